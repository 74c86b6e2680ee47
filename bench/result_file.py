"""What the CPU benchmark scripts share when they write a result file: the table and the machine line."""
from __future__ import annotations

import datetime
import os
import platform

import numpy as np


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """``header`` and ``rows`` as the lines of a Markdown table."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def cpu_run_line(command: str) -> str:
    """Date, machine, NumPy and the command, as the opening lines of a CPU result file."""
    return (f"Date: {datetime.date.today()}, machine: {platform.node()} ({os.cpu_count()}-core CPU, "
            f"{platform.machine()}), NumPy {np.__version__}, engine numpy.\nCommand: `{command}`\n\n")
