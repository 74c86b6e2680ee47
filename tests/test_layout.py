"""Block-cyclic layout maths (pure, no MPI), checked against brute-force ownership."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ozhpc.parallel.layout import BlockCyclic, Cyclic1D, numroc


def brute_owner(n, nb, nprocs, src):
    return [(src + i // nb) % nprocs for i in range(n)]


@pytest.mark.parametrize("n,nb,nprocs,src", [(157, 1, 1, 0), (157, 5, 2, 0), (157, 13, 3, 1), (96, 17, 4, 3),
                                             (301, 64, 4, 0), (0, 5, 3, 0), (7, 32, 4, 2), (64, 64, 1, 0)])
def test_numroc_and_maps_match_brute_force(n, nb, nprocs, src):
    owner = brute_owner(n, nb, nprocs, src)
    axis = Cyclic1D(n, nb, nprocs, src)
    total = 0
    for p in range(nprocs):
        mine = [i for i in range(n) if owner[i] == p]
        assert numroc(n, nb, p, src, nprocs) == len(mine) == axis.local_size(p)
        assert axis.global_indices(p).tolist() == mine
        for il, ig in enumerate(mine):
            assert axis.to_global(p, il) == ig
            assert axis.to_local(ig) == (p, il)
            assert axis.owner(ig) == p
        covered = [i for g0, g1, _ in axis.segments(p) for i in range(g0, g1)]
        assert covered == mine
        regular, tail = axis.regular_part(p)
        idx = []
        if regular:
            start, stride, count, block = regular
            idx += [start + c * stride + b for c in range(count) for b in range(block)]
        if tail:
            idx += list(range(*tail))
        assert idx == mine
        total += len(mine)
    assert total == n


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 500), nb=st.integers(1, 70), nprocs=st.integers(1, 9), data=st.data())
def test_numroc_property(n, nb, nprocs, data):
    src = data.draw(st.integers(0, nprocs - 1))
    owner = brute_owner(n, nb, nprocs, src)
    for p in range(nprocs):
        assert numroc(n, nb, p, src, nprocs) == owner.count(p)


def test_block_cyclic_2d_and_descriptor():
    lay = BlockCyclic(157, 96, 5, 13, 2, 3, rsrc=1, csrc=2)
    seen = np.zeros((157, 96), dtype=int)
    for pr, pc in itertools.product(range(2), range(3)):
        ml, nl = lay.local_shape(pr, pc)
        for il, jl in [(0, 0), (ml - 1, nl - 1)] if ml and nl else []:
            i, j = lay.to_global(pr, pc, il, jl)
            assert lay.to_local(i, j) == ((pr, pc), (il, jl))
            assert lay.owner(i, j) == (pr, pc)
        seen[np.ix_(lay.rows.global_indices(pr), lay.cols.global_indices(pc))] += 1
    assert (seen == 1).all()
    desc = lay.descriptor(ctxt=7, prow=0)
    assert len(desc) == 9
    assert desc == (1, 7, 157, 96, 5, 13, 1, 2, lay.rows.local_size(0))
    t = lay.transpose()
    assert (t.m, t.n, t.mb, t.nb, t.p, t.q, t.rsrc, t.csrc) == (96, 157, 13, 5, 3, 2, 2, 1)


@pytest.mark.parametrize("bad", [dict(n=-1, nb=1, nprocs=1), dict(n=5, nb=0, nprocs=1),
                                 dict(n=5, nb=2, nprocs=0), dict(n=5, nb=2, nprocs=2, src=2)])
def test_bad_layouts_raise(bad):
    with pytest.raises(ValueError):
        Cyclic1D(**bad)
    with pytest.raises(ValueError):
        numroc(bad["n"], bad["nb"], 0, bad.get("src", 0), bad["nprocs"])
