"""Host <-> GPU copies of the cutile engine (``ozhpc/engines/host_copy.py``): same bytes, same layout,
the pages given back, and the plain copy where page-locking is refused."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def hc(gpu):
    from ozhpc.engines import host_copy

    return host_copy


def _special(shape, seed):
    x = np.random.default_rng(seed).standard_normal(shape)
    x.flat[::7] = np.resize([np.nan, -0.0, np.inf, 5e-324, -np.inf], x.flat[::7].size)
    return x


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (300, 301), (2048, 1031)])
def test_upload_and_download_keep_every_byte(hc, gpu, shape):
    _, cp = gpu
    x = _special(shape, sum(shape))
    stream = cp.cuda.get_current_stream()
    d = hc.upload(x, stream)
    assert d.shape == x.shape and d.flags.c_contiguous
    assert d.get().tobytes() == x.tobytes()
    back = hc.download(d, stream)
    assert back.tobytes() == x.tobytes() and back.flags.c_contiguous


def test_the_pages_are_given_back(hc, gpu):
    _, cp = gpu
    x = _special((512, 512), 1)
    hc.upload(x, cp.cuda.get_current_stream())
    with hc.page_locked(x) as locked:      # would be refused if the upload had left them registered
        assert locked


def test_refused_page_locking_falls_back_to_the_plain_copy(hc, gpu):
    _, cp = gpu
    x = _special((256, 300), 2)
    stream = cp.cuda.get_current_stream()
    with hc.page_locked(x) as locked:
        assert locked
        with hc.page_locked(x) as again:   # already registered: refused, not an error
            assert not again
        assert hc.upload(x, stream).get().tobytes() == x.tobytes()
    with hc.page_locked(x) as locked:      # and the outer registration was released once
        assert locked


def test_a_transposed_view_stays_a_transposed_view(hc, gpu):
    _, cp = gpu
    base = _special((123, 77), 3)
    d = hc.upload(base.T, cp.cuda.get_current_stream())
    assert d.shape == (77, 123) and d.T.flags.c_contiguous
    assert d.get().tobytes() == np.ascontiguousarray(base.T).tobytes()


def test_a_strided_view_is_copied_in_order(hc, gpu):
    _, cp = gpu
    base = _special((90, 80), 4)
    view = base[::3, 5::2]
    stream = cp.cuda.get_current_stream()
    assert hc.upload(view, stream).get().tobytes() == np.ascontiguousarray(view).tobytes()
    assert hc.download(cp.asarray(base)[::3, 5::2], stream).tobytes() == np.ascontiguousarray(view).tobytes()


def test_download_waits_for_the_work_on_the_stream(hc, gpu):
    _, cp = gpu
    stream = cp.cuda.get_current_stream()
    d = cp.arange(1 << 22, dtype=cp.float64)
    d *= 3.0                                   # queued on the stream, not yet synchronised
    assert np.array_equal(hc.download(d, stream), np.arange(1 << 22, dtype=np.float64) * 3.0)


def test_the_engine_copies_large_arrays_this_way(hc, gpu, monkeypatch):
    engine, cp = gpu
    calls = []
    for name in ("upload", "download"):
        real = getattr(hc, name)
        monkeypatch.setattr(hc, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    x = _special((hc.MIN_BYTES // 8 // 512 + 1, 512), 5)
    d = engine.asarray(x.T)
    assert d.shape == x.T.shape and d.get().tobytes() == np.ascontiguousarray(x.T).tobytes()
    assert engine.to_host(d).tobytes() == np.ascontiguousarray(x.T).tobytes()
    engine.asarray(x[:4])                      # small: the plain copy
    assert calls == ["upload", "download"]
