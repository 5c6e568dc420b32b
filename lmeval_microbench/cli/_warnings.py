"""Our warnings as the one-line ``warning: ...`` messages every command prints.

Python shows a warning with its category, file, line number and that line of source: noise
to a user of the command, who did nothing wrong in ``runs/reconstruct.py``. Inside
:func:`one_line_warnings` the warnings of this package (:func:`..errors.own_warning`)
print as ``warning: MESSAGE`` on stderr, one line each; other libraries' warnings are shown
as Python shows them.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO


@contextmanager
def one_line_warnings() -> Iterator[None]:
    """Show our warnings as ``warning: MESSAGE`` lines on stderr while the block runs."""
    from ..errors import one_line, own_warning

    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> Any:
        if not own_warning(category, filename):
            return shown(message, category, filename, lineno, file, line)
        print(f"warning: {one_line(message)}", file=file or sys.stderr)
        return None

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown
