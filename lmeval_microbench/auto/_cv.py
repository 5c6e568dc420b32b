"""Cross-validated errors of selection-method x estimator candidates over splits of models.

Each split's source models see the item selection, the IRT fit and the estimator fits; its
target models are only estimated and compared with their truth. Work is shared as in
:mod:`lmeval_microbench.reliability`: one IRT fit per split (the expensive part, cached by
split key), one selection per method x budget, every estimator of that method fitted on it.
A candidate that fails on any split (an estimator that cannot be fitted on so few models, a
selector that cannot reach the budget) is marked failed with the reason rather than scored on
fewer splits, which would not compare with the others.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import InputError
from ..estimators import make_estimator
from ..irt.params import ItemParams
from ..reliability import IRTCache, Split, loo_splits, needs_irt, random_splits, select_items
from ..responses import ResponseMatrix
from ..selection import make_selector
from ..selection.base import Subset

LEVEL = 0.9
FAILURES = (InputError, ValueError, ArithmeticError, np.linalg.LinAlgError)
"""What a candidate may raise on a split without stopping the others."""


@dataclass(frozen=True, order=True)
class Candidate:
    """A recipe without its budget: a selection method and the estimator read on its subset."""

    method: str
    estimator: str

    @property
    def label(self) -> str:
        return f"{self.method}+{self.estimator}"


@dataclass
class Outcome:
    """Per-split absolute errors (fractions) and interval hits of one candidate at one budget."""

    errors: list[np.ndarray] = field(default_factory=list)
    covered: list[np.ndarray] = field(default_factory=list)
    failure: str | None = None

    def add(
        self, truth: np.ndarray, value: np.ndarray, lower: np.ndarray, upper: np.ndarray
    ) -> None:
        self.errors.append(np.abs(np.asarray(value) - truth))
        self.covered.append((np.asarray(lower) <= truth) & (truth <= np.asarray(upper)))

    @property
    def ok(self) -> bool:
        return self.failure is None and bool(self.errors)

    def split_mae(self) -> np.ndarray:
        """Mean absolute error of each split, in score points."""
        return np.array([100.0 * float(np.mean(e)) for e in self.errors])

    def mae(self) -> float:
        return 100.0 * float(np.mean(np.concatenate(self.errors))) if self.ok else math.nan

    def coverage(self) -> float:
        return float(np.mean(np.concatenate(self.covered))) if self.ok else math.nan


Table = dict[tuple[Candidate, int], Outcome]


@dataclass(frozen=True)
class SplitScheme:
    """How models are split: ``targets`` per split, ``loo`` or ``repeats`` random draws."""

    scheme: str
    splits: int
    targets: int
    sources: int

    def as_record(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "splits": self.splits,
            "targets_per_split": self.targets,
            "sources_per_split": self.sources,
        }


def split_scheme(n_models: int, required: int, repeats: int, share: float) -> SplitScheme | None:
    """Splits of ``n_models`` that leave at least ``required`` source models; None if none do.

    ``share`` of the models are targets where that leaves enough sources, else as many as it
    can. Single-target splits of few models are a leave-one-model-out cycle (each model once).
    """
    targets = min(max(1, round(share * n_models)), n_models - required)
    if targets < 1:
        return None
    if targets == 1 and n_models <= repeats:
        return SplitScheme("loo", n_models, 1, n_models - 1)
    return SplitScheme("random", repeats, targets, n_models - targets)


def make_splits(
    matrix: ResponseMatrix, truth: np.ndarray, scheme: SplitScheme, seed: int, stage: str
) -> list[Split]:
    """The splits of ``scheme`` (reliability's generators), keys prefixed with ``stage``.

    The IRT cache refits when the split key changes; inner splits of different outer splits
    would otherwise share keys (``random/0``...) while their source models differ.
    """
    if scheme.scheme == "loo":
        splits = loo_splits(matrix, truth, repeats=1, seed=seed)
    else:
        share = scheme.targets / matrix.n_models
        splits = random_splits(matrix, truth, repeats=scheme.splits, seed=seed, share=share)
    return [replace(split, key=f"{stage}:{split.key}") for split in splits]


def estimate_split(
    split: Split, subset: Subset, estimator: str, irt: ItemParams | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit ``estimator`` on the split's sources; (value, lower, upper) of its targets."""
    fitted = make_estimator(estimator).fit(split.source, subset, split.source_truth, irt=irt)
    return fitted.estimate_matrix(split.target, level=LEVEL)


def _brief(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]


def evaluate_split(
    split: Split,
    candidates: Sequence[Candidate],
    budgets: Sequence[int],
    table: Table,
    irt_cache: IRTCache,
    bar: Any = None,
) -> None:
    """Add the split's target errors of every candidate x budget to ``table``."""
    irt = irt_cache.get(split) if any(needs_irt(c.estimator) for c in candidates) else None
    for method in dict.fromkeys(c.method for c in candidates):
        mine = [c for c in candidates if c.method == method]
        for budget in budgets:
            outcomes = [table.setdefault((c, budget), Outcome()) for c in mine]
            try:
                subset = select_items(make_selector(method), split, budget)
            except FAILURES as exc:
                for outcome in outcomes:
                    outcome.failure = outcome.failure or f"selection: {_brief(exc)}"
                subset = None
            for candidate, outcome in zip(mine, outcomes, strict=True):
                if subset is None or outcome.failure is not None:
                    continue
                try:
                    estimates = estimate_split(split, subset, candidate.estimator, irt)
                except FAILURES as exc:
                    outcome.failure = _brief(exc)
                    continue
                outcome.add(split.target_truth, *estimates)
            if bar is not None:
                bar.update(1)


def evaluate(
    splits: Iterable[Split],
    candidates: Sequence[Candidate],
    budgets: Sequence[int],
    irt_cache: IRTCache,
    bar: Any = None,
) -> Table:
    """Errors of every candidate x budget over ``splits``; estimator warnings are muted.

    The warnings (no calibration line on few models, IRT iteration limits) repeat once per
    fit; the caller records what the protocol implies instead.
    """
    table: Table = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for split in splits:
            evaluate_split(split, candidates, budgets, table, irt_cache, bar)
    return table


def units(n_splits: int, candidates: Sequence[Candidate], budgets: Sequence[int]) -> int:
    """Progress units of :func:`evaluate`: one per split x method x budget."""
    return n_splits * len({c.method for c in candidates}) * len(budgets)
