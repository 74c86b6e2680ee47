"""What one product did (:class:`GemmInfo`, its phases' times from a :class:`Stopwatch`), and what a
failed certificate does (:func:`enforce_accuracy`).

``ozhpc.gemm`` returns a GemmInfo, SUMMA a subclass (:class:`ozhpc.parallel.summa.SummaInfo`); the
runner's report, the HDF5 attributes of C and ``ozhpc report`` read its fields.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import AccuracyError, AccuracyWarning


@dataclass
class GemmInfo:
    """What one call did: sizes, plan, engine, error bound and time per phase.

    ``truncation_bound`` (tau*k), ``combine_bound`` and ``rounding_bound`` bound the error of
    every entry a priori, for any plan:
    ``|C_ij - (op(A) op(B))_ij| <= 2**(e_i+f_j) (truncation_bound + combine_bound)
    + rounding_bound |C_ij| + 2**-1074`` (alpha = 1, beta = 0, finite results; ``e_i``, ``f_j``
    the row / column scales). "auto" certifies the bound of ``guarantee`` per entry instead. ``slices`` / ``groups`` are scheme I's
    (None with scheme II), ``moduli`` scheme II's (None with scheme I).
    """

    m: int
    n: int
    k: int
    engine: str
    slices: int | None
    groups: int | None
    int8_gemms: int
    """int8 GEMMs of one pass of the products: slice pairs (scheme I) or moduli (scheme II)."""
    spread_bits: int
    truncation_bound: float
    rounding_bound: float
    nonfinite_inputs: bool
    combine_bound: float = 0.0
    seconds: dict = field(default_factory=dict)
    scheme: str = ""
    bits: int = 0
    """Bits per operand entry: 7 x slices (scheme I), the integer width (scheme II)."""
    moduli: int | None = None
    planes: int = 0
    """int8 planes per operand entry: slices (scheme I) or moduli (scheme II)."""
    plan_summary: str = ""
    """One line, e.g. 'scheme ozaki1: 8 slices, 8 groups, 36 pair GEMMs'."""
    guarantee: str | None = None
    """The bound "auto" certified: "dgemm" (``k u (|A||B|)_ij``) or "tight" (``u (|A||B|)_ij``),
    each plus the final rounding of C; None with fixed slices / bits."""
    certified: bool | None = None
    """"auto": True when every finite entry passed the certificate (docs/numerics.md, "The
    guarantee"), False when ``uncertified`` entries did not at the widest plan. None: fixed
    slices / bits, not checked (``truncation_bound`` is what they guarantee)."""
    uncertified: int = 0
    """Entries of C (all ranks) whose error bound the certificate could not show below u (|A||B|)_ij."""
    worst_ratio: float = 0.0
    """Largest ``E_ij / (c u L_ij)`` over all entries (the error bound over the certified bound, ``c`` = k
    for "dgemm", 1 for "tight"; L a lower bound of (|A||B|)_ij): <= 1 for every entry when certified,
    so ``1 / worst_ratio`` is the certificate's headroom."""
    widths: list = field(default_factory=list)
    """Plans "auto" ran, in order: ``[bits, uncertified, worst_ratio]`` each (bits as in ``bits``); a
    refinement of the failing entries (``refined_entries``) adds the last, with its staircase's bits."""
    refined_entries: int = 0
    """Entries (all ranks) that the last pass could not certify, recomputed from the levels of
    scales of their rows and columns (docs/numerics.md, "Levels of scales"): every other entry keeps
    the pass's bits."""
    levels: int = 0
    """Levels of scales the refinement went down (0: none ran)."""
    exact_entries: int = 0
    """Entries (all ranks) given their exact dot product, correctly rounded (what the levels did
    not certify)."""
    complex: bool = False
    """A complex product (ZGEMM): ``guarantee`` holds per component, with ``k + 1`` for "dgemm" and
    the ``|A||B|`` of the real and imaginary parts (docs/numerics.md, "Complex products")."""

    def to_dict(self) -> dict:
        return asdict(self)

    def plan_attrs(self) -> dict:
        """The plan and its certificate as HDF5 attributes of C (the scheme and its accuracy decide
        the bits): None where n/a (``certified`` with fixed slices / bits)."""
        keys = ("scheme", "bits", "slices", "groups", "moduli", "guarantee", "certified")
        out = {key: getattr(self, key) for key in keys if getattr(self, key) is not None}
        if self.complex:
            out["complex"] = True
        if self.certified is not None:
            out.update(uncertified=self.uncertified, worst_ratio=self.worst_ratio, refined_entries=self.refined_entries,
                       levels=self.levels, exact_entries=self.exact_entries)
        return out

    def accuracy_message(self) -> str:
        """One line on a failed certificate (empty when C is certified or was not checked)."""
        if self.certified is not False:
            return ""
        bound = "k*u*(|A||B|)_ij" if self.guarantee == "dgemm" else "u*(|A||B|)_ij"
        if self.complex:
            bound = ("(k+1)" if self.guarantee == "dgemm" else "") + "*u*(|A||B| of the parts)_ij per component"
            bound = bound.lstrip("*")
        return (f"{self.uncertified} of {self.m * self.n} entries of C are not certified to the "
                f"guarantee '{self.guarantee}', {bound} (worst bound {self.worst_ratio:.3g} times it), "
                f"even with {self.bits} bits, the widest plan of scheme {self.scheme}")


class Stopwatch:
    """Time per phase from the engine's timers (CUDA events on a GPU, recorded in order and read
    only when :attr:`seconds` is asked for: timing never synchronises the device mid-call)."""

    def __init__(self, engine):
        self.engine = engine
        self._laps: dict[str, list] = {}
        self._timer = self._started()

    def _started(self):
        timer = self.engine.timer()
        timer.start()
        return timer

    def lap(self, phase: str) -> None:
        self._timer.stop()
        self._laps.setdefault(phase, []).append(self._timer)
        self._timer = self._started()

    @property
    def seconds(self) -> dict[str, float]:
        return {phase: sum(t.seconds() for t in timers) for phase, timers in self._laps.items()}


def enforce_accuracy(info: GemmInfo, accuracy: str, *, stacklevel: int = 3) -> None:
    """A failed certificate (``info.certified is False``) as the user asked: an
    :class:`~ozhpc.errors.AccuracyWarning` ("warn") or an :class:`~ozhpc.errors.AccuracyError`
    ("strict"). The certificate is global, so every rank of a grid does the same."""
    message = info.accuracy_message()
    if not message:
        return
    if accuracy == "strict":
        raise AccuracyError(message, info)
    import warnings
    warnings.warn(message, AccuracyWarning, stacklevel=stacklevel)
