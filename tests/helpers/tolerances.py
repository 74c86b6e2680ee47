"""Error criteria in one place, stated against the FP64 error of a native DGEMM."""
import numpy as np

from ozhpc.run.reference import relative_errors, sample_indices

NATIVE_RATIO_MAX = 1.0
"""Auto mode: max sampled |C - exact|/(|A||B|) must not exceed NumPy's own A @ B figure."""


def error_vs_native(c, a_op, b_op, samples=40, seed=0):
    """(ours, native) max componentwise relative error on sampled entries, exact reference."""
    idx = sample_indices(a_op.shape[0], b_op.shape[1], samples, seed)
    ours = relative_errors(c, a_op, b_op, idx).max()
    native = relative_errors(a_op @ b_op, a_op, b_op, idx).max()
    return float(ours), float(native)
