"""ozhpc from Python: one product with its GemmInfo, then the same bits from other settings.

    python examples/api_example.py [--n 96] [--phi 1.0]

The Ozaki scheme rounds in a fixed order, so C does not depend on how it was asked for:
transposed storage gives C bit for bit, and so does any grid or block size (see the MPI
examples). "auto" certifies every entry of C and picks its plan from the whole product, so a
block of rows on its own may pick another plan; with a fixed slice count, computing a block of
rows on its own gives the same bits too. The script checks that (bits compared as uint64) and
prints the error against the exact product on a few entries, next to NumPy's native FP64 product.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import ozhpc
from ozhpc.run.matrices import standard_matrix
from ozhpc.run.reference import relative_errors, sample_indices


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and np.array_equal(np.ascontiguousarray(x).view(np.uint64),
                                                 np.ascontiguousarray(y).view(np.uint64))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=96, help="sizes m = n, k = 3n/2 (default 96)")
    parser.add_argument("--phi", type=float, default=1.0, help="exponent spread of the test matrices")
    args = parser.parse_args(argv)
    m, n, k = args.n, args.n - 7, (3 * args.n) // 2

    A = standard_matrix(m, k, args.phi, seed=1)
    B = standard_matrix(k, n, args.phi, seed=2)

    # 1. The product, with what the call did.
    C, info = ozhpc.gemm(A, B, info=True)
    print(f"C = A @ B, {m}x{n} (k = {k}): engine {info.engine}, scheme {info.scheme}, {info.bits} bits, "
          f"{info.moduli} moduli, certified {info.certified} to the guarantee '{info.guarantee}' "
          f"(worst bound ratio {info.worst_ratio:.2g})")
    print("  seconds: " + ", ".join(f"{p} {t:.4f}" for p, t in info.seconds.items()))

    # 2. The same product asked for differently: every variant must give the same bits.
    fixed = ozhpc.gemm(A, B, scheme="ozaki2", bits=info.bits, engine="numpy")
    variants = {
        "transposed storage (transa, transb)":
            (C, ozhpc.gemm(np.ascontiguousarray(A.T), np.ascontiguousarray(B.T), transa=True, transb=True)),
        f"fixed bits={info.bits}, engine='numpy': the first half of the rows on their own":
            (fixed, np.vstack([ozhpc.gemm(A[: m // 2], B, scheme="ozaki2", bits=info.bits, engine="numpy"),
                               ozhpc.gemm(A[m // 2:], B, scheme="ozaki2", bits=info.bits, engine="numpy")])),
        f"fixed bits={info.bits}: transposed storage":
            (fixed, ozhpc.gemm(np.ascontiguousarray(A.T), B, transa=True, scheme="ozaki2", bits=info.bits)),
    }
    ok = info.certified is True
    for name, (one, other) in variants.items():
        same = same_bits(one, other)
        ok &= same
        print(f"  {'bitwise equal' if same else 'DIFFERENT'}: {name}")

    # 3. Accuracy on sampled entries against the exact product.
    idx = sample_indices(m, n, 32, 0)
    ours = relative_errors(C, A, B, idx).max()
    native = relative_errors(A @ B, A, B, idx).max()
    print(f"  max |C - exact| / (|A||B|): ozhpc {ours:.2e}, NumPy native {native:.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
