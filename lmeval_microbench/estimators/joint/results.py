"""What :meth:`.estimator.JointEstimator.estimate` returns for one model, and its warning."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..._types import Estimate


class JointFallbackWarning(UserWarning):
    """A model lacks some benchmarks: per-benchmark estimates were returned, not joint ones."""


class JointEstimates(dict[str, Estimate]):
    """Estimates keyed by output (benchmark names and ``"average"``), with how each was made.

    ``method[output]`` is ``"joint"`` or ``"per-benchmark"``; ``missing`` lists the benchmarks
    the model had no scores for (then there is no ``"average"`` and the rest fall back).
    """

    def __init__(
        self,
        estimates: Mapping[str, Estimate],
        method: Mapping[str, str],
        missing: Sequence[str] = (),
    ) -> None:
        super().__init__(estimates)
        self.method = dict(method)
        self.missing = tuple(missing)
