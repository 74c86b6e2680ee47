"""What SUMMA's panels travel as: int8 planes, or FP64 split into planes by the receiving rank.

Planes move ``depth`` bytes per entry (scheme I's slices or scheme II's residues, plus the
certificate's magnitude digits and, with inf/NaN inputs, class codes); FP64 moves 8 and costs
each receiver a split of the panel (every plane is elementwise in the global scales, which
every rank of the panel's process row or column holds, so the bits never depend on the wire).
FP64 also means no rank keeps the planes of its whole op(A) / op(B)^T pieces, only those of the
panels in flight. ``auto`` compares the two per entry: ``depth / link`` against
``8 / link + 1 / split``. No MPI here: ``ozhpc plan`` uses the same rule.

The choice is a :class:`Wire` value: what SUMMA's buffers hold, what the product is told
(``split_on_arrival``), what the memory check and the planner count; nothing else names a format.
"""
from __future__ import annotations

from dataclasses import dataclass

WIRE_NAMES = ("auto", "fp64", "planes")


@dataclass(frozen=True)
class Wire:
    """A wire format, "planes" or "fp64" (:func:`choose_wire` picks one for "auto"), and why."""

    name: str
    reason: str = "requested"

    def __post_init__(self):
        if self.name not in WIRE_NAMES[1:]:
            raise ValueError(f"unknown wire format {self.name!r}; choose one of: {', '.join(WIRE_NAMES)}")

    @property
    def split_on_arrival(self) -> bool:
        """FP64 panels that every receiver splits: no rank makes planes of its whole operands."""
        return self.name == "fp64"

    def panel_entry(self, depth: int, complex: bool = False) -> tuple[int, str]:
        """(values, dtype) per entry of a panel buffer when a pass has ``depth`` planes per entry
        (``complex``: an FP64 panel holds both parts of each entry)."""
        return (2 if complex else 1, "float64") if self.split_on_arrival else (depth, "int8")

    def bytes_per_entry(self, depth: int, complex: bool = False) -> int:
        """Bytes one panel entry puts on the wire when a pass has ``depth`` planes per entry."""
        return (16 if complex else 8) if self.split_on_arrival else depth


def as_wire(wire) -> Wire:
    """``wire`` as a :class:`Wire`: one already, or a format's name ("planes", "fp64")."""
    return wire if isinstance(wire, Wire) else Wire(wire)

SPLIT_RATE = {"numpy": 1.5e7, "cutile": 5.8e10}
"""Entries per second one rank splits into planes: the NumPy engine on one core of a 2-core VM
(15-20 M entries/s, residues the slower: ``bench/results/cpu_speed_2026-12-05.md``), the cuTile
split / residue kernels on an H200 (1.3-1.4 TB/s of 8 + 16 bytes per entry,
``bench/results/gpu_gemm_h200_2026-12-01_residues.md``)."""

LINK_RATE = {("numpy", True): 2e9, ("numpy", False): 2e9, ("cutile", True): 450e9, ("cutile", False): 50e9}
"""Bytes per second one rank sends into a broadcast, by (engine, all ranks on one node): MPI
shared memory on the CPU; NVLink 4 (900 GB/s both ways, 450 one way) inside an H200 node; one
400 Gb/s NIC per GPU between nodes."""


def wire_cost(depth: int, split_rate: float, link_rate: float, complex: bool = False) -> tuple[float, float]:
    """Seconds per panel entry on a receiving rank: (as planes, as FP64 then split; ``complex``:
    two FP64 parts, split as two entries)."""
    parts = 2 if complex else 1
    return depth / link_rate, parts * (8.0 / link_rate + 1.0 / split_rate)


def choose_wire(wire: str, depth: int, *, ranks: int, engine: str = "numpy", one_node: bool = True,
                split_rate: float | None = None, link_rate: float | None = None, complex: bool = False) -> Wire:
    """The :class:`Wire` for ``wire`` in WIRE_NAMES; ``depth``: the first pass's planes per entry
    (``complex``: of complex operands).

    The inputs are global (the plan assumed for "auto" settings, the grid, the engine every rank
    agreed on), so every rank picks the same wire."""
    if wire not in WIRE_NAMES:
        raise ValueError(f"unknown wire format {wire!r}; choose one of: {', '.join(WIRE_NAMES)}")
    if wire != "auto":
        return Wire(wire)
    if ranks == 1:
        return Wire("fp64", "auto: one rank, nothing moves; planes made per panel (no whole-operand planes)")
    split = SPLIT_RATE.get(engine, SPLIT_RATE["numpy"]) if split_rate is None else split_rate
    link = LINK_RATE.get((engine, one_node), LINK_RATE[("numpy", True)]) if link_rate is None else link_rate
    planes, fp64 = wire_cost(depth, split, link, complex)
    pick = "fp64" if fp64 < planes else "planes"
    return Wire(pick, f"auto: {depth} planes per entry cost {planes * 1e12:.3g} ps to move, FP64 "
                      f"{fp64 * 1e12:.3g} ps to move and split ({link / 1e9:.3g} GB/s link, "
                      f"{split / 1e9:.3g} G entries/s split)")
