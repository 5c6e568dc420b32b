"""Figures of the reliability benchmark; matplotlib (a dependency) is imported only here, lazily.

The object-oriented API (``matplotlib.figure.Figure``) is used instead of ``pyplot`` so that
drawing never switches the caller's backend or opens a window.
"""

from __future__ import annotations

import importlib.util
import io
import math
from collections.abc import Sequence
from typing import Any

from .errors import MicrobenchError

ALL = "all"
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINESTYLES = ("-", "--", "-.", ":")


def matplotlib_available() -> bool:
    """Whether matplotlib can be imported (it is a dependency; an environment may still lack it)."""
    return importlib.util.find_spec("matplotlib") is not None


def _require_matplotlib() -> None:
    if not matplotlib_available():
        raise MicrobenchError(
            "plots need matplotlib, a dependency of lmeval-microbench missing from this "
            "environment: pip install matplotlib (or --no-plots)"
        )


def _x_position(record: dict[str, Any], all_at: float) -> float:
    return all_at if record["budget"] == ALL else float(record["budget"])


def _y_value(record: dict[str, Any], metric: str) -> float:
    value = record.get(metric)
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return math.nan
    return float(value)


def _all_position(records: Sequence[dict[str, Any]]) -> tuple[float, str] | None:
    """Where the ``all`` budget goes on the log x axis: past the largest numeric budget."""
    full = [r for r in records if r["budget"] == ALL]
    if not full:
        return None
    numeric = [float(r["budget"]) for r in records if r["budget"] != ALL]
    at = max(numeric) * 1.6 if numeric else float(full[0].get("items") or 1)
    return at, f"all ({full[0].get('items', '?')})"


def _draw_panel(ax: Any, rows: list[dict[str, Any]], metric: str, style: dict) -> None:
    placement = _all_position(rows)
    all_at = placement[0] if placement else math.nan
    estimators = list(dict.fromkeys(r["estimator"] for r in rows))
    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if m != ALL] or [ALL]
    for estimator in estimators:
        full = [r for r in rows if r["estimator"] == estimator and r["method"] == ALL]
        for method in methods:
            line = [r for r in rows if r["estimator"] == estimator and r["method"] == method]
            line = sorted(
                line + (full if method != ALL else []), key=lambda r: _x_position(r, all_at)
            )
            if not line:
                continue
            ax.plot(
                [_x_position(r, all_at) for r in line],
                [_y_value(r, metric) for r in line],
                color=style["color"][estimator],
                linestyle=style["linestyle"].get(method, "-"),
                marker=style["marker"].get(method, "o"),
                markersize=4,
                linewidth=1.2,
            )
    ticks = sorted({float(r["budget"]) for r in rows if r["budget"] != ALL})
    labels = [f"{t:g}" for t in ticks]
    if placement:
        ticks.append(placement[0])
        labels.append(placement[1])
    ax.set_xscale("log")
    ax.set_xticks(ticks, labels)
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)
    ax.set_xlabel("items (budget)")


def metric_vs_budget_png(
    records: Sequence[dict[str, Any]], metric: str, *, ylabel: str, title: str = ""
) -> bytes:
    """PNG of ``metric`` against budget: a panel per protocol, a line per method x estimator.

    Colour tells the estimator, line style and marker the selection method; the ``all`` budget
    (every matrix item, no selection) ends every line of its estimator. Non-finite values
    (e.g. an MDAD that is never reached) leave a gap.
    """
    _require_matplotlib()
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    protocols = list(dict.fromkeys(r["protocol"] for r in records))
    if not protocols:
        raise MicrobenchError("no records to plot")
    estimators = list(dict.fromkeys(r["estimator"] for r in records))
    methods = list(dict.fromkeys(r["method"] for r in records))
    palette = [f"C{k % 10}" for k in range(len(estimators))]
    style = {
        "color": dict(zip(estimators, palette, strict=True)),
        "marker": {m: _MARKERS[k % len(_MARKERS)] for k, m in enumerate(methods)},
        "linestyle": {m: _LINESTYLES[k % len(_LINESTYLES)] for k, m in enumerate(methods)},
    }
    figure = Figure(figsize=(4.6 * len(protocols) + 2.4, 4.0), layout="constrained")
    axes = figure.subplots(1, len(protocols), squeeze=False)[0]
    for ax, protocol in zip(axes, protocols, strict=True):
        _draw_panel(ax, [r for r in records if r["protocol"] == protocol], metric, style)
        ax.set_title(protocol)
    axes[0].set_ylabel(ylabel)
    handles = [Line2D([], [], color=style["color"][e], label=e) for e in estimators]
    handles += [
        Line2D(
            [],
            [],
            color="0.3",
            linestyle=style["linestyle"][m],
            marker=style["marker"][m],
            label=f"method: {m}",
        )
        for m in methods
        if m != ALL
    ]
    figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    if title:
        figure.suptitle(title)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()
