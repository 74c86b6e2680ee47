"""Engines by name. An explicit table: nothing registers itself on import."""
from __future__ import annotations

import importlib
import logging

from .base import Engine

log = logging.getLogger(__name__)

ENGINES = {
    "numpy": ("ozhpc.engines.numpy_engine", "NumpyEngine"),
    "cutile": ("ozhpc.engines.cutile_engine", "CutileEngine"),
}
ENGINE_NAMES = ("auto",) + tuple(ENGINES)
"""The choices of ``--engine`` / ``ozaki.engine`` / ``engine=``."""
INSTALL_HINT = {
    "cutile": "The cutile engine needs an NVIDIA GPU, CuPy and cuda-tile "
              "(pip install 'ozhpc[gpu]'; see README, 'GPU engine')",
}


class EngineUnavailable(RuntimeError):
    """A requested engine cannot run here (missing package or device)."""


_UNAVAILABLE: dict[str, tuple[str, BaseException]] = {}
"""Engines found unavailable in this process: a failed import is not cached by Python, and
retrying it (``engine="auto"`` on a machine without CuPy) cost milliseconds on every call."""


def _load(name: str) -> Engine:
    if name in _UNAVAILABLE:
        why, cause = _UNAVAILABLE[name]
        raise EngineUnavailable(why) from cause
    module, cls = ENGINES[name]
    try:
        engine_cls = getattr(importlib.import_module(module), cls)
        return engine_cls()
    except (ImportError, RuntimeError, OSError) as exc:
        _UNAVAILABLE[name] = (f"engine {name!r} is not available: {exc}. "
                              f"{INSTALL_HINT.get(name, '')}".strip(), exc)
        raise EngineUnavailable(_UNAVAILABLE[name][0]) from exc


def get_engine(name="auto") -> Engine:
    """``"numpy"``, ``"cutile"``, an :class:`Engine` instance, or ``"auto"`` (cutile if it runs, else numpy)."""
    if isinstance(name, Engine):
        return name
    if name == "auto":
        try:
            engine = _load("cutile")
        except EngineUnavailable as exc:
            log.info("engine auto: using numpy (%s)", exc)
            return _load("numpy")
        log.info("engine auto: using cutile")
        return engine
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; choose one of: auto, {', '.join(ENGINES)}")
    return _load(name)


def available_engines() -> dict[str, str]:
    """Engine name -> 'available' or the reason it is not (for ``ozhpc info``)."""
    status = {}
    for name in ENGINES:
        try:
            _load(name)
            status[name] = "available"
        except EngineUnavailable as exc:
            status[name] = str(exc)
    return status
