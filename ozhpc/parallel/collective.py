"""Rank-local failures turned into the same error on every rank, so no rank waits forever.

Any step that may fail on some ranks only (a file one node cannot see, a full disk, a GPU
missing on one node) runs inside ``with collective_errors(comm):``. At the end of the block
every rank learns, in one allgather, whether any rank failed; if one did, every rank raises:
the lowest failing rank's :class:`~ozhpc.errors.InputError` as an InputError with the same
message (so the CLI prints one line and exits 2 everywhere), anything else as a RuntimeError
naming that rank (an :class:`~ozhpc.errors.OptionError` as one, for the front end to spell).
The failing rank re-raises its own exception object.
"""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import InputError, OptionError


def agree(comm, error: BaseException | None) -> None:
    """Collective: raise on EVERY rank when any rank had an error (see the module docstring).

    ``error`` is this rank's exception or None; ``comm`` None or of one rank raises it as is.
    """
    if comm is None or comm.Get_size() == 1:
        if error is not None:
            raise error
        return
    mine = None if error is None else (isinstance(error, InputError), str(error), getattr(error, "template", None))
    found = [(rank, e) for rank, e in enumerate(comm.allgather(mine)) if e is not None]
    if not found:
        return
    rank, (is_input, message, template) = found[0]
    if error is not None and rank == comm.Get_rank():
        raise error
    if template is not None:  # an option's error: the front end still spells it
        raise OptionError(template)
    if is_input:
        raise InputError(message)
    raise RuntimeError(f"rank {rank} failed: {message}")


@contextmanager
def collective_errors(comm, *, catch: type | tuple = Exception, cleanup=None):
    """Run the block on every rank, then raise everywhere if it raised on any rank.

    ``catch``: the exceptions that are agreed on (others, e.g. KeyboardInterrupt, propagate
    on the rank where they happen). ``cleanup()`` runs on every rank before the error is
    raised (remove a temporary file, say).
    """
    error = None
    try:
        yield
    except catch as exc:  # re-raised on every rank by agree()
        error = exc
    try:
        agree(comm, error)
    except BaseException:
        if cleanup is not None:
            cleanup()
        raise
