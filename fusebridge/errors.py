"""The exception hierarchy: every error fusebridge raises on bad input is an `Error`.

`ArgumentError` and `ArgumentTypeError` also derive from the built-in ValueError and TypeError,
so callers that already catch those keep working.
"""


class Error(Exception):
    """Base of every fusebridge error."""


class ArgumentError(Error, ValueError):
    """An argument has the right type but a value the op cannot accept."""


class ArgumentTypeError(Error, TypeError):
    """An argument has a type (or dtype) the op cannot accept."""
