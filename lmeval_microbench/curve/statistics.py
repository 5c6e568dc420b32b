"""How noisy a curve is: the statistics Fluid Benchmarking (Hofmann et al. 2025) uses to
compare evaluation methods on pretraining checkpoints, on one series of values per step.

* total variation: the summed size of the step-to-step moves (a noisy curve travels far);
* share of steps that go down (a pretraining curve should rarely go down);
* the variance of the steps around a smooth fit, and a signal-to-noise ratio.

The smooth fit is the best monotone (isotonic) fit, increasing or decreasing, whichever
leaves less residual. Why monotone: over a training run a benchmark score is expected to
move one way, but its shape (learning-rate schedules, log-linear phases, plateaus) is not
known, and series are short (3-10 checkpoints), where a polynomial in log-step would spend
most of the degrees of freedom. A monotone fit assumes only the direction and has no
parameter to choose; what it cannot follow (a curve going up, down, up) is exactly the
wiggle the statistics are meant to count. The truth's own statistics are reported beside
the micro curve's, so a real dip in the model counts on both sides.

Signal-to-noise ratio = net rise of the fit (last minus first fitted value, absolute)
divided by the residual standard deviation; infinite for a monotone series.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class SeriesStats:
    """Noise statistics of one series of values over steps (NaN values left out)."""

    points: int
    total_variation: float
    share_down: float
    fit_direction: str
    residual_variance: float
    snr: float

    def to_dict(self) -> dict[str, float | int | str | None]:
        return {
            "points": self.points,
            "total_variation": _finite(self.total_variation),
            "share_down": _finite(self.share_down),
            "fit": f"isotonic, {self.fit_direction}",
            "residual_variance": _finite(self.residual_variance),
            "residual_sd": _finite(math.sqrt(self.residual_variance)),
            "snr": None if not np.isfinite(self.snr) else float(self.snr),
            "snr_infinite": bool(np.isinf(self.snr)),
        }


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def isotonic_increasing(values: np.ndarray) -> np.ndarray:
    """The least-squares non-decreasing fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, size]
    for value in np.asarray(values, dtype=np.float64):
        blocks.append([float(value), 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, size = blocks.pop()
            previous = blocks[-1]
            total = previous[1] + size
            previous[0] = (previous[0] * previous[1] + mean * size) / total
            previous[1] = total
    return np.concatenate([np.full(int(size), mean) for mean, size in blocks])


def monotone_fit(values: np.ndarray) -> tuple[np.ndarray, str]:
    """The better of the increasing and decreasing isotonic fits (increasing on a tie)."""
    up = isotonic_increasing(values)
    down = -isotonic_increasing(-np.asarray(values, dtype=np.float64))
    if np.sum((values - down) ** 2) < np.sum((values - up) ** 2) - 1e-15:
        return down, "decreasing"
    return up, "increasing"


def series_stats(values: np.ndarray) -> SeriesStats:
    """The statistics of the module docstring; NaN ones for fewer than two finite values."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size < 2:
        return SeriesStats(int(values.size), np.nan, np.nan, "none", np.nan, np.nan)
    moves = np.diff(values)
    fit, direction = monotone_fit(values)
    residual = float(np.mean((values - fit) ** 2))
    rise = abs(float(fit[-1] - fit[0]))
    if residual > 1e-20:
        snr = rise / math.sqrt(residual)
    else:
        snr = math.inf if rise > 0 else math.nan
    return SeriesStats(
        points=int(values.size),
        total_variation=float(np.sum(np.abs(moves))),
        share_down=float(np.mean(moves < 0)),
        fit_direction=direction,
        residual_variance=residual,
        snr=snr,
    )


def rank_agreement(values: np.ndarray, truth: np.ndarray) -> float:
    """Spearman correlation over the steps where both are finite (NaN below 3 steps or for
    a constant series: no order to compare)."""
    values, truth = np.asarray(values, float), np.asarray(truth, float)
    both = np.isfinite(values) & np.isfinite(truth)
    if both.sum() < 3 or np.ptp(values[both]) == 0 or np.ptp(truth[both]) == 0:
        return math.nan
    return float(stats.spearmanr(values[both], truth[both]).statistic)
