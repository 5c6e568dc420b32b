"""Exception tree; every message names the file, line or item at fault.

Also our warning categories, and which warnings are ours (:func:`own_warning`): those a
command prints as one ``warning: ...`` line (:func:`one_line`) and a reconstruction keeps in
its notes.
"""

from __future__ import annotations

from pathlib import Path


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


class FewSourcesWarning(UserWarning):
    """Fewer source models than a calibration line needs, so an estimator fits none. The
    estimator's name is kept apart from what is said, so that a build fitting a dozen
    estimators says it once for all of them (:func:`..build.build_bundle`)."""

    def __init__(self, estimator: str, detail: str | None = None) -> None:
        if detail is None:  # warnings.warn(text, FewSourcesWarning): the text is all there is
            estimator, detail = "", estimator
        super().__init__(f"{estimator}: {detail}" if estimator else detail)
        self.estimator = estimator
        self.detail = detail


class ReconstructionWarning(UserWarning):
    """Something about a run deserves attention but does not stop the reconstruction."""


PACKAGE_DIR = Path(__file__).resolve().parent
"""Where our own code lives: a warning raised from a file below it is ours."""


def own_warning(category: type[Warning], filename: str) -> bool:
    """Whether a warning is one of ours, to be shown as a one-line message (no source line).

    Ours: every :class:`ReconstructionWarning`, and user warnings raised by a file of this
    package (bundle loading, estimators, run readers). Warnings of other libraries are
    theirs to show.
    """
    if issubclass(category, ReconstructionWarning):
        return True
    return issubclass(category, UserWarning) and Path(filename).resolve().is_relative_to(
        PACKAGE_DIR
    )


def one_line(message: Warning | str) -> str:
    """A warning's text on one line (line breaks and runs of spaces become single spaces)."""
    return " ".join(str(message).split())
