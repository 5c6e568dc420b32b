"""A PNG per benchmark: the estimate with its interval band, the raw subset score beside it,
and each step marked as a change of the model or noise (matplotlib, imported lazily, the
object-oriented API so that no backend is switched and no window opens)."""

from __future__ import annotations

import io

import numpy as np

from ..plots import _require_matplotlib
from .series import BenchmarkCurve


def _x_axis(curve: BenchmarkCurve) -> tuple[np.ndarray, bool]:
    """Step positions, and whether a log axis shows them better (steps spanning 10x+)."""
    steps = np.array([p.step for p in curve.points], dtype=np.float64)
    logged = bool(steps.size > 1 and steps.min() > 0 and steps.max() / steps.min() >= 10)
    return steps, logged


def curve_png(curve: BenchmarkCurve, *, title: str | None = None, dpi: int = 110) -> bytes:
    """The figure of one benchmark's curve as PNG bytes.

    Filled markers on the estimate: the step into this checkpoint is a significant change
    (paired test, :mod:`.significance`); hollow: within the noise. The true full score is
    drawn too when the curve carries it (benchmarks on leaderboard series).
    """
    _require_matplotlib()
    from matplotlib.figure import Figure

    x, logged = _x_axis(curve)
    estimate = 100 * curve.values("estimate")
    lower = 100 * np.array(
        [np.nan if p.estimate is None else p.estimate.lower for p in curve.points]
    )
    upper = 100 * np.array(
        [np.nan if p.estimate is None else p.estimate.upper for p in curve.points]
    )
    figure = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = figure.subplots()
    ax.fill_between(x, lower, upper, color="C0", alpha=0.2, label=f"{curve.level:.0%} interval")
    ax.plot(x, estimate, color="C0", label=f"estimate ({curve.estimator})")
    changed = [False] + [t.significant for t in curve.steps.get("estimate", [])]
    for k in range(len(x)):
        face = "C0" if changed[k] else "white"
        ax.plot(x[k], estimate[k], "o", color="C0", markerfacecolor=face, zorder=3)
    ax.plot(x, 100 * curve.values("raw"), "s--", color="C1", label="raw subset score")
    if curve.truth is not None:
        ax.plot(x, 100 * curve.values("truth"), "^:", color="k", label="true full score")
    if logged:
        ax.set_xscale("log")
        ax.set_xticks([], minor=True)
    ax.set_xticks(x, [p.label.rstrip("/").split("/")[-1][-18:] for p in curve.points])
    ax.tick_params(axis="x", labelrotation=30, labelsize="small")
    ax.set_xlabel("checkpoint (by training step)")
    ax.set_ylabel("score (%)")
    ax.set_title(title or f"{curve.benchmark}: filled = significant change, hollow = noise")
    ax.legend(fontsize="small")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
