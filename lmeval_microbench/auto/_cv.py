"""Cross-validated errors of selection-method x estimator candidates over splits of models.

Each split's source models see the item selection, the IRT fit and the estimator fits; its
target models are only estimated and compared with their truth. Two kinds of split: random
folds (each model a target once: the error on models like the sources) and extrapolation
folds (the strongest sources estimated from weaker ones, :mod:`lmeval_microbench.outside.folds`:
the error on a model stronger than all sources, which a user cannot rule out). Work is shared as in
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._rng import spawn
from ..errors import InputError
from ..estimators import make_estimator
from ..estimators._fitting import MIN_SOURCE_MODELS
from ..irt.params import ItemParams
from ..outside.folds import extrapolation_folds
from ..reliability import IRTCache, Split, needs_irt, select_items
from ..responses import ResponseMatrix
from ..selection import make_selector, select_with_audit
from ..subset import Subset

LEVEL = 0.9
RANDOM = "random"
EXTRAPOLATION = "extrapolation"
KINDS = (RANDOM, EXTRAPOLATION)
EXTRAPOLATION_REPEATS = 3
"""Item selections per extrapolation fold: their spread is the fold's noise."""
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
    """Per-split absolute errors (fractions), interval hits and protocol of one candidate at
    one budget."""

    errors: list[np.ndarray] = field(default_factory=list)
    covered: list[np.ndarray] = field(default_factory=list)
    ratios: list[np.ndarray] = field(default_factory=list)
    """Each target's error over its interval's half-width on the side of the truth."""
    kinds: list[str] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    """Which fold of its kind each split is (extrapolation folds repeat with new items)."""
    failure: str | None = None

    def add(
        self,
        truth: np.ndarray,
        value: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        kind: str = RANDOM,
        group: int = 0,
    ) -> None:
        value, lower, upper = (np.asarray(a, dtype=np.float64) for a in (value, lower, upper))
        self.errors.append(np.abs(value - truth))
        self.covered.append((lower <= truth) & (truth <= upper))
        self.ratios.append(exceedance_ratios(truth, value, lower, upper))
        self.kinds.append(kind)
        self.groups.append(group)

    def split_groups(self, kind: str) -> np.ndarray:
        """The fold of each split of protocol ``kind``, in the order of :meth:`split_mae`."""
        return np.array([g for g, k in zip(self.groups, self.kinds, strict=True) if k == kind])

    @property
    def ok(self) -> bool:
        return self.failure is None and bool(self.errors)

    def _of(self, values: list[np.ndarray], kind: str | None) -> list[np.ndarray]:
        return [v for v, k in zip(values, self.kinds, strict=True) if kind in (None, k)]

    def split_mae(self, kind: str | None = None) -> np.ndarray:
        """Mean absolute error of each split (of protocol ``kind``, or all), in score points."""
        return np.array([100.0 * float(np.mean(e)) for e in self._of(self.errors, kind)])

    def mae(self, kind: str | None = None) -> float:
        """Pooled MAE over the targets of protocol ``kind`` (or all), in score points."""
        errors = self._of(self.errors, kind) if self.ok else []
        return 100.0 * float(np.mean(np.concatenate(errors))) if errors else math.nan

    def ratio_values(self, kind: str | None = None) -> np.ndarray:
        """The :attr:`ratios` of every target of protocol ``kind`` (or all), pooled."""
        ratios = self._of(self.ratios, kind) if self.ok else []
        return np.concatenate(ratios) if ratios else np.zeros(0)

    def coverage(self, kind: str | None = None) -> float:
        covered = self._of(self.covered, kind) if self.ok else []
        return float(np.mean(np.concatenate(covered))) if covered else math.nan

    def score(self) -> float:
        """What the choice minimises: the mean of the random-fold and extrapolation MAEs
        (the random-fold MAE alone when the matrix allowed no extrapolation fold)."""
        present = [k for k in KINDS if k in self.kinds]
        return float(np.mean([self.mae(k) for k in present])) if self.ok else math.nan


Table = dict[tuple[Candidate, int], Outcome]


def exceedance_ratios(
    truth: np.ndarray, value: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    """``|value - truth|`` over the half-width on the truth's side: above 1 where the interval
    missed. A zero half-width gives inf where the estimate erred (0 where it did not)."""
    half = np.where(truth >= value, upper - value, value - lower)
    error = np.abs(value - truth)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(half > 0, error / np.where(half > 0, half, 1.0), np.inf)
    return np.where(error > 0, ratio, 0.0)


@dataclass(frozen=True)
class SplitScheme:
    """How models are split: ``splits`` random folds (``folds``, or ``loo`` with one target
    each) of ``targets`` models, plus ``extrapolation`` splits that score the strongest
    sources from weaker ones (each extrapolation fold :data:`EXTRAPOLATION_REPEATS` times,
    with new items each time)."""

    scheme: str
    splits: int
    targets: int
    sources: int
    extrapolation: int = 0

    def as_record(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "splits": self.splits,
            "targets_per_split": self.targets,
            "sources_per_split": self.sources,
            "extrapolation_folds": self.extrapolation,
        }

    @property
    def total(self) -> int:
        return self.splits + self.extrapolation


def split_scheme(
    n_models: int, required: int, folds: int, extrapolation: bool = True
) -> SplitScheme | None:
    """Folds of ``n_models`` that leave at least ``required`` source models; None if none do.

    ``folds`` random folds partition the models (each is a target once); when a fold would
    leave too few sources, one model per fold (leave-one-model-out). Extrapolation folds
    (:func:`lmeval_microbench.outside.folds.extrapolation_folds`) are added where they leave
    ``required`` training models.
    """
    if n_models - 1 < required or folds < 1:
        return None
    k = min(max(folds, 2), n_models)
    targets = math.ceil(n_models / k)
    if n_models - targets < required:
        k, targets = n_models, 1
    n_extra = 0
    if extrapolation:
        folds = _extrapolation_rows(np.arange(n_models, dtype=float), required)
        n_extra = len(folds) * EXTRAPOLATION_REPEATS
    scheme = "loo" if targets == 1 else "folds"
    return SplitScheme(scheme, k, targets, n_models - targets, n_extra)


def _extrapolation_rows(truth: np.ndarray, required: int) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(tr, te) for tr, te in extrapolation_folds(truth) if tr.size >= required]


def make_splits(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    scheme: SplitScheme,
    seed: int,
    stage: str,
    required: int = MIN_SOURCE_MODELS,
) -> list[Split]:
    """The random folds and extrapolation folds of ``scheme``, keys prefixed with ``stage``.

    The IRT cache refits when the split key changes; inner splits of different outer splits
    would otherwise share keys (``random/0``...) while their source models differ.
    """
    rng = spawn(seed, 1)[0]
    labels = (np.arange(matrix.n_models) % scheme.splits)[rng.permutation(matrix.n_models)]
    rows = [
        (np.flatnonzero(labels != k), np.flatnonzero(labels == k)) for k in range(scheme.splits)
    ]
    splits = [
        _split(matrix, truth, train, test, RANDOM, k, f"{stage}:random/{k}", rng)
        for k, (train, test) in enumerate(rows)
    ]
    if scheme.extrapolation:
        folds = _extrapolation_rows(truth, required)
        for r in range(EXTRAPOLATION_REPEATS):
            for k, (train, test) in enumerate(folds):
                key = f"{stage}:extrapolation/{k}/{r}"
                splits.append(_split(matrix, truth, train, test, EXTRAPOLATION, k, key, rng))
    return splits


def _split(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    protocol: str,
    repeat: int,
    key: str,
    rng: np.random.Generator,
) -> Split:
    ids = np.asarray(matrix.model_ids)
    return Split(
        protocol,
        repeat,
        key,
        matrix.select_models(ids[train]),
        truth[train],
        matrix.select_models(ids[test]),
        truth[test],
        int(rng.integers(2**31)),
        int(rng.integers(2**31)),
    )


def select_split(method: str, split: Split, budget: int, n_audit: int = 0) -> Subset:
    """Items of ``method`` (plus ``n_audit`` audit items) chosen on the split's sources."""
    if n_audit == 0:
        return select_items(make_selector(method), split, budget)
    return select_with_audit(
        make_selector(method),
        split.source,
        budget,
        n_audit,
        seed=split.selection_seed,
        target=split.source_truth,
    )


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
    n_audit: int = 0,
) -> None:
    """Add the split's target errors of every candidate x budget to ``table``."""
    irt = irt_cache.get(split) if any(needs_irt(c.estimator) for c in candidates) else None
    for method in dict.fromkeys(c.method for c in candidates):
        mine = [c for c in candidates if c.method == method]
        for budget in budgets:
            outcomes = [table.setdefault((c, budget), Outcome()) for c in mine]
            try:
                subset = select_split(method, split, budget, n_audit)
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
                outcome.add(split.target_truth, *estimates, kind=split.protocol, group=split.repeat)
            if bar is not None:
                bar.update(1)


def evaluate(
    splits: Iterable[Split],
    candidates: Sequence[Candidate],
    budgets: Sequence[int],
    irt_cache: IRTCache,
    bar: Any = None,
    n_audit: int = 0,
    floor: Candidate | None = None,
) -> tuple[Table, dict[int, list[str]]]:
    """Errors of every candidate x budget over ``splits``; estimator warnings are muted.

    The warnings (no calibration line on few models, IRT iteration limits) repeat once per
    fit; the caller records what the protocol implies instead.

    A split whose sources ``floor`` cannot be fitted on at a budget is left out at that budget
    for every candidate, and why is returned per budget: there the split's data fail, not a
    candidate. An extrapolation fold trained on the weakest half of 66 models spanning 10
    points of MuSR, 113 of its items read against its whole score, gave no map from their
    mean to the score (slope 0.04; all 66: 1.03), and refused the whole choice.
    """
    table: Table = {}
    dropped: dict[int, list[str]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for split in splits:
            found: Table = {  # a candidate failed on an earlier split is not fitted again
                key: Outcome(failure=outcome.failure)
                for key, outcome in table.items()
                if outcome.failure is not None
            }
            evaluate_split(split, candidates, budgets, found, irt_cache, bar, n_audit)
            for budget in budgets:
                floor_failure = found[(floor, budget)].failure if floor in candidates else None
                if floor_failure is not None:
                    dropped.setdefault(budget, []).append(floor_failure)
                    continue
                for candidate in candidates:
                    _merge(
                        table.setdefault((candidate, budget), Outcome()), found[(candidate, budget)]
                    )
    return table, dropped


def _merge(into: Outcome, split: Outcome) -> None:
    """Add one split's outcome to a candidate's outcome over the splits before it."""
    into.failure = into.failure or split.failure
    for name in ("errors", "covered", "ratios", "kinds", "groups"):
        getattr(into, name).extend(getattr(split, name))


def units(n_splits: int, candidates: Sequence[Candidate], budgets: Sequence[int]) -> int:
    """Progress units of :func:`evaluate`: one per split x method x budget."""
    return n_splits * len({c.method for c in candidates}) * len(budgets)
