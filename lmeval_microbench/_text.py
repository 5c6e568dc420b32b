"""Short renderings of long lists for messages: errors name the items at fault, a few of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def preview(values: Iterable[Any], limit: int = 5, *, quote: bool = True) -> str:
    """The first ``limit`` values, comma-separated, with the total when there are more.

    ``quote`` shows each value as ``repr`` (ids in quotes), else as ``str``.
    """
    values = list(values)
    render = repr if quote else str
    shown = ", ".join(render(v) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")
