"""The mean item curve of a large benchmark, read off a fine ability grid.

The IRT estimators average P(right | theta) and its slope over every item of the source
matrix, for every row they predict. Building a bundle predicts many rows: the calibration of
partial runs (:mod:`.missing`) alone asks for some ten thousand imputed rows per estimator. On
a whole current benchmark of thousands of items that is an (m, n) array per call: on
MuSR's answers repeated eight times (348 x 6,048) the default build took 192 s and 3.9 GiB,
84 s and 593 MiB with this curve (``bench/build_speed_before_item_curve.md``,
``bench/build_speed.md``). With one ability dimension both means are smooth functions of theta
alone, so they are computed once on a grid and interpolated (error under 1e-5 of a score at
the grid's spacing); rows beyond the grid, and every benchmark under :data:`MIN_ITEMS` items,
keep the exact sums.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ..irt import _math
from ..irt.params import ItemParams

MIN_ITEMS = 2000
"""Fewest items read off the grid; smaller benchmarks are summed exactly (every shipped one)."""
GRID = np.linspace(-8.0, 8.0, 4001)
"""Abilities the curve is computed at (spacing 0.004; EAP abilities lie within +-6)."""
_CHUNK = 256
_CACHE_SIZE = 8
_cache: dict[bytes, ItemCurve] = {}


def slope_scale(params: ItemParams, theta: np.ndarray) -> np.ndarray:
    """dP/dtheta of every item at every ability per unit of its slope ``a``: (m, n)."""
    star = expit(_math.logits(theta, params.a, params.d))
    return (params.u - params.g) * star * (1.0 - star)


def mean_slope_exact(params: ItemParams, theta: np.ndarray) -> np.ndarray:
    """Mean over items of dP/dtheta at every ability, exactly: (m, D)."""
    return slope_scale(params, theta) @ params.a / params.n_items


@dataclass(frozen=True)
class ItemCurve:
    """Mean P(right) and mean dP/dtheta over a benchmark's items at each :data:`GRID` point."""

    mean_p: np.ndarray
    mean_slope: np.ndarray

    @classmethod
    def of(cls, params: ItemParams) -> ItemCurve | None:
        """The curve of ``params``; None where exact sums are kept (see the module).

        A build fits the IRT estimators again in every fold on the same item parameters, so
        the last few curves are kept, keyed by the parameters' values.
        """
        if params.n_dims != 1 or params.n_items < MIN_ITEMS:
            return None
        key = hashlib.sha1(
            b"".join(
                np.ascontiguousarray(x).tobytes() for x in (params.a, params.d, params.g, params.u)
            )
        ).digest()
        if key not in _cache:
            if len(_cache) >= _CACHE_SIZE:
                _cache.pop(next(iter(_cache)))
            _cache[key] = cls._computed(params)
        return _cache[key]

    @classmethod
    def _computed(cls, params: ItemParams) -> ItemCurve:
        mean_p, mean_slope = [], []
        for start in range(0, GRID.size, _CHUNK):
            theta = GRID[start : start + _CHUNK, None]
            mean_p.append(params.probability(theta).mean(axis=1))
            mean_slope.append(mean_slope_exact(params, theta)[:, 0])
        return cls(np.concatenate(mean_p), np.concatenate(mean_slope))

    def read(self, params: ItemParams, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean P (m,) and mean slope (m, 1) at abilities ``theta`` (m, 1): interpolated on
        the grid, summed exactly for abilities beyond it."""
        points = np.asarray(theta, dtype=np.float64)[:, 0]
        mean_p = np.interp(points, GRID, self.mean_p)
        mean_slope = np.interp(points, GRID, self.mean_slope)[:, None]
        beyond = (points < GRID[0]) | (points > GRID[-1])
        if beyond.any():
            outside = theta[beyond]
            mean_p[beyond] = params.probability(outside).mean(axis=1)
            mean_slope[beyond] = mean_slope_exact(params, outside)
        return mean_p, mean_slope
