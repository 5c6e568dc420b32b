"""Exception tree; every message names the file, line or item at fault."""


class MicrobenchError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(MicrobenchError, ValueError):
    """User input (a file, a matrix, an argument) is malformed or inconsistent."""


class BundleError(MicrobenchError):
    """A bundle is missing, of an unknown schema version, or fails its checksums."""


class ItemMismatchError(MicrobenchError):
    """Items of a run do not match the items a bundle expects (missing, extra, changed hash)."""


class ConvergenceWarning(UserWarning):
    """An iterative fit stopped at its iteration limit before meeting its tolerance."""
