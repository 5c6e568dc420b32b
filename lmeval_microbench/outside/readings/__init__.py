"""Outside readings: a model's score read without regressing it towards the source models.

Each reading turns a model's subset answers (and the inner estimator's estimate) into an
estimate of its full score that is, as far as its assumptions go, unbiased *given the
model's true score*, wherever that lies, with a standard error. See :mod:`.base` for the
contract and the modules for the four readings.
"""

from __future__ import annotations

import difflib

from ...errors import InputError
from .audit import AuditReading
from .base import Reading, SourceView
from .checked import CheckedReading
from .deshrunk import DeshrunkReading
from .design import DesignReading
from .own import OwnLevelReading
from .similar import SimilarReading

READINGS: dict[str, type[Reading]] = {
    cls.name: cls
    for cls in (
        OwnLevelReading,
        DesignReading,
        DeshrunkReading,
        CheckedReading,
        AuditReading,
        SimilarReading,
    )
}
"""Reading classes by name."""


def make_reading(name: str) -> Reading:
    """A new, unfitted reading by name; unknown names list the known ones."""
    if name not in READINGS:
        close = difflib.get_close_matches(name, list(READINGS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(f"unknown outside reading {name!r}{hint}; known: {sorted(READINGS)}")
    return READINGS[name]()


__all__ = [
    "READINGS",
    "AuditReading",
    "CheckedReading",
    "DeshrunkReading",
    "DesignReading",
    "OwnLevelReading",
    "Reading",
    "SimilarReading",
    "SourceView",
    "make_reading",
]
