"""Errors that mean "the user asked for something that cannot be done" (CLI exit code 2)."""


class InputError(ValueError):
    """Bad input: a missing file or dataset, a wrong shape or dtype, a bad option.

    The message names the file, dataset, shape or option at fault.
    """
