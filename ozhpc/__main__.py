"""``ozhpc`` and ``python -m ozhpc``: the signal handlers first, then the command line.

Importing the command line loads NumPy, h5py and more (about 0.4 s); a Ctrl-C or SIGTERM in
that time must end the process like one during the run (ozhpc.signals)."""
from . import signals


def main() -> None:
    try:
        signals.install()
        from .cli import entry_point
    except signals.Interrupted as exc:
        signals.leave(exc.signum)
    entry_point()


if __name__ == "__main__":
    main()
