"""The overflow reproducer (an entry whose representation rounds past DBL_MAX) on both engines, both
schemes and both guarantees, and the default product CPU == GPU: a short check on a GPU node.
Usage: python3 bench/accuracy/overflow_check.py (needs the cutile engine)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: common (and this checkout's ozhpc)
from common import parser  # noqa: E402
import numpy as np  # noqa: E402

import ozhpc  # noqa: E402


def main():
    parser(__doc__).parse_args()
    A = np.array([[0.9 * 2.0**86, 6.0]]); B = np.array([[0.0, 1.0], [float.fromhex("0x1.1111111111111p+1021"), 1.0]])
    for scheme in ("ozaki2", "ozaki1"):
        for g in ("dgemm", "tight"):
            kw = dict(scheme=scheme, guarantee=g, info=True)
            Cn, i_n = ozhpc.gemm(A, B, engine="numpy", **kw); Cg, i_g = ozhpc.gemm(A, B, engine="cutile", **kw)
            print(scheme, g, Cg.tolist(), i_g.certified, "bits equal:", Cn.tobytes() == Cg.tobytes(), Cn.tolist())
    rng = np.random.default_rng(1)
    for n in (300, 1000):
        A = (rng.random((n, n)) - 0.5) * np.exp(0.5 * rng.standard_normal((n, n))); B = A.T.copy()
        Cn = ozhpc.gemm(A, B, engine="numpy"); Cg = ozhpc.gemm(A, B, engine="cutile")
        print(n, "default CPU == GPU:", Cn.tobytes() == Cg.tobytes())


if __name__ == "__main__":
    main()
