"""The exception hierarchy: every error fusebridge raises on bad input is an `Error`.

`ArgumentError` and `ArgumentTypeError` also derive from the built-in ValueError and TypeError
(`CoreImportError` from ImportError), so callers that already catch those keep working.
"""


class Error(Exception):
    """Base of every fusebridge error."""


class ArgumentError(Error, ValueError):
    """An argument has the right type but a value the op cannot accept."""


class ArgumentTypeError(Error, TypeError):
    """An argument has a type (or dtype) the op cannot accept."""


class ModelFormatError(Error, ValueError):
    """A model or parameter file is not what its format says: truncated, corrupt, or
    inconsistent with the program that names it."""


class UnsupportedOpError(Error, ValueError):
    """A model holds ops (or attribute values) fusebridge cannot convert; the message lists
    every one at once."""


def in_model_file(exc: Error, source: str) -> Error:
    """exc, raised while a model file was read, as the error to give its reader: the message
    starts with `source`, and a value an op refuses (ArgumentError, ArgumentTypeError: the
    checks are shared with the kernels' arguments) is the file's fault, a ModelFormatError."""
    kind = ModelFormatError if isinstance(exc, (ArgumentError, ArgumentTypeError)) else type(exc)
    return kind(f"{source}: {exc}")


class ExecutionError(Error, RuntimeError):
    """Running a model failed inside a backend (ONNX Runtime, a kernel) on inputs that passed
    the checks; the message names the partition or node."""


class CoreImportError(Error, ImportError):
    """The compiled core (`fusebridge.kernels._C`) cannot be imported: most often a source tree
    without a build shadows the installed package."""


class MissingDependencyError(Error, ImportError):
    """An optional dependency a feature needs is not installed; the message says which extra
    brings it."""
