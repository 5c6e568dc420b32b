"""Full-benchmark estimates inside an lm-eval run: bundles by name, item scores joined by id.

lm-eval hands a metric's aggregation function nothing but the list of per-document values,
concatenated rank by rank (so in no useful order). Each value our ``process_results`` hooks
emit is therefore an :data:`ItemScore` tuple ``(bundle name, item id, metric, score)``: the
aggregation finds the bundle by name in this process-wide registry (filled when the task's
documents are loaded) and joins the scores to its items by id.

Missing items (``--limit``, a crashed shard) are not papered over. By default the estimate is
NaN and a warning says how many items lack a score: the estimators and their intervals were
calibrated on models scored on every subset item. With ``allow_missing`` (lm-eval
``--metadata '{"microbench_allow_missing": true}'``) the missing scores are imputed from the
bundle's IRT parameters (``estimators.missing``): the interval widens with the share missing,
and a warning names the count.

Every estimate is checked for person fit when the bundle carries a ``person_fit`` block
(:mod:`..personfit`, scored items only): a pattern unlike the source models' or one that
cannot be told from guessing gets a one-line warning naming the model and bundle, and in the
second case the interval is widened to include the bundle's chance-level score. An estimate
whose answers place the model above or below every source model (the bundle's guard,
:mod:`..outside.placement`) gets a one-line warning saying so.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._conformal import check_level
from .._types import Estimate, ItemId, MaybeEstimated
from ..bundle import Bundle
from ..errors import BundleError, InputError, ItemMismatchError, one_line, own_warning
from ..estimators import ESTIMATORS
from ..estimators._fitting import checked_score
from ..estimators.base import ScoreEstimator
from ..outside.ceiling import ceiling_note, saturated
from ..outside.placement import placement_note, placement_records
from ..personfit import PersonFit, check_estimate, fit_warning
from ..reconstruct import bundle_estimator

logger = logging.getLogger("lmeval_microbench.harness")

ItemScore = tuple[str, ItemId, str, float]
"""What a hook emits per document: ``(bundle name, item id, metric name, score)``."""


@dataclass(frozen=True)
class EstimateOptions:
    """How a bundle's estimate is computed in a run (set from lm-eval ``--metadata``).

    ``estimator`` None means the bundle's default estimator; ``level`` is the nominal coverage
    of the interval; ``allow_missing`` imputes unscored items from the bundle's IRT fit.
    ``model`` names the model in warnings (lm-eval passes its ``pretrained`` argument).
    """

    estimator: str | None = None
    level: float = 0.9
    allow_missing: bool = False
    model: str | None = None


@dataclass(frozen=True)
class RunEstimate(MaybeEstimated):
    """The estimate of one run of one bundle, with how many subset items it rests on."""

    bundle: str
    estimator: str
    n_scored: int
    n_items: int
    estimate: Estimate | None
    """None when items were missing and ``allow_missing`` was off."""
    person_fit: PersonFit | None = None
    """None when the bundle has no person-fit block."""
    fit_note: str = ""
    """Why the estimate was flagged (and its interval widened); empty when it was not."""
    placement: Mapping[str, Any] | None = None
    """Where the bundle's guard places the model against the source models
    (:func:`..outside.placement_records`); None without a guard or with items unscored."""


@dataclass
class _Entry:
    bundle: Bundle
    options: EstimateOptions
    estimators: dict[str | None, ScoreEstimator]


_REGISTRY: dict[str, _Entry] = {}
_CACHE: dict[tuple[Any, ...], RunEstimate] = {}


@contextmanager
def logged_warnings() -> Iterator[None]:
    """Our Python warnings raised inside the block go to this module's log, one line each.

    lm-eval shows its log, so that is where a user of the run reads; a Python warning would
    add its category, our file and line and a line of our source. Other libraries' warnings
    are raised again as they were.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        yield
    for warning in caught:
        if own_warning(warning.category, warning.filename):
            logger.warning("%s", one_line(warning.message))
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )


# ---------------------------------------------------------------------------- registry
def register_bundle(bundle: Bundle, options: EstimateOptions | None = None) -> None:
    """Make ``bundle`` findable by name for the aggregation functions of this process.

    Registering the same bundle again (lm-eval builds tasks more than once) only updates the
    options; a *different* bundle under a name already taken is an error, since the scores of
    a run could then be joined to the wrong items. Options the bundle cannot honour (an
    estimator it does not store, ``allow_missing`` without IRT parameters to impute from)
    are refused here, before any model runs.
    """
    options = options or EstimateOptions()
    check_level(options.level)
    known = _REGISTRY.get(bundle.name)
    if known is not None and known.bundle != bundle:
        raise BundleError(
            f"two different bundles named {bundle.name!r} were loaded in one process; "
            "rename one of them (bundle names must be unique within an lm-eval run)"
        )
    entry = _Entry(bundle, options, known.estimators if known is not None else {})
    fitted = _fitted(entry)  # BundleError naming the stored estimators if unknown
    if options.allow_missing and not fitted.imputes_missing:
        able = [e.name for e in bundle.estimators if ESTIMATORS[e.name].supports_missing]
        raise InputError(
            f"bundle {bundle.name!r}: microbench_allow_missing imputes unscored items from IRT "
            f"parameters, and neither the bundle nor estimator {fitted.name!r} has them"
            + (
                f" (this bundle also stores {able}: pick one with microbench_estimator)"
                if able
                else ""
            )
        )
    _REGISTRY[bundle.name] = entry


def registered_bundle(name: str) -> Bundle:
    """The bundle registered under ``name``; a clear error when its task was never loaded."""
    return _entry(name).bundle


def _entry(name: str) -> _Entry:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BundleError(
            f"bundle {name!r} is not loaded in this process: its documents must come from the "
            "task's custom_dataset loader (lmeval_microbench.harness.hooks.load_docs); "
            f"loaded bundles: {sorted(_REGISTRY) or 'none'}"
        ) from None


def _fitted(entry: _Entry) -> ScoreEstimator:
    """The estimator the options ask for, rebuilt from the bundle once and kept."""
    name = entry.options.estimator
    if name not in entry.estimators:
        entry.estimators[name] = bundle_estimator(entry.bundle, name)
    return entry.estimators[name]


def clear_registry() -> None:
    """Forget every registered bundle and cached estimate (tests, long-lived sessions)."""
    _REGISTRY.clear()
    _CACHE.clear()


# ---------------------------------------------------------------------------- joining
def parse_item_scores(values: Sequence[Any]) -> tuple[str, str, dict[ItemId, float]]:
    """Bundle name, metric and ``item id -> score`` from what the hooks emitted.

    Every value must be an :data:`ItemScore` of one bundle and one metric; an item id twice
    is an error (the same document scored twice would weigh double).
    """
    if not values:
        raise ItemMismatchError("no item scores reached the estimate aggregation")
    bundles, metrics = set(), set()
    scores: dict[ItemId, float] = {}
    for k, value in enumerate(values):
        if not isinstance(value, (tuple, list)) or len(value) != 4:
            raise InputError(
                f"item score {k}: expected (bundle, item_id, metric, score), got {value!r}"
            )
        bundle_name, item, metric, score = value
        bundles.add(bundle_name)
        metrics.add(metric)
        if item in scores:
            raise ItemMismatchError(f"bundle {bundle_name!r}: item {item!r} was scored twice")
        scores[item] = checked_score(item, score)
    if len(bundles) > 1 or len(metrics) > 1:
        raise ItemMismatchError(
            f"one aggregation received scores of bundles {sorted(bundles)} and metrics "
            f"{sorted(metrics)}; expected exactly one of each"
        )
    return bundles.pop(), metrics.pop(), scores


def estimate_run(values: Sequence[Any]) -> RunEstimate:
    """Join the emitted item scores to their bundle by id and estimate the full score.

    The result is cached per distinct input, so the three aggregations of a task (value,
    lower, upper) compute it once.
    """
    with logged_warnings():
        return _estimate_run(values)


def _estimate_run(values: Sequence[Any]) -> RunEstimate:
    name, metric, scores = parse_item_scores(values)
    entry = _entry(name)
    bundle = entry.bundle
    if metric != bundle.metric.name:
        raise ItemMismatchError(
            f"bundle {name!r} estimates metric {bundle.metric.name!r}, but the task emitted "
            f"{metric!r} scores"
        )
    unknown = [item for item in scores if item not in bundle.content_hashes]
    if unknown:
        raise ItemMismatchError(
            f"bundle {name!r}: {len(unknown)} scored items are not in the bundle: {unknown[:5]}"
        )
    key = (name, entry.options, frozenset(scores.items()))
    if key not in _CACHE:
        _CACHE[key] = _compute(entry, scores)
    return _CACHE[key]


def _compute(entry: _Entry, scores: dict[ItemId, float]) -> RunEstimate:
    bundle, options = entry.bundle, entry.options
    fitted = _fitted(entry)
    missing = [item for item in bundle.item_ids if item not in scores]
    result = RunEstimate(bundle.name, fitted.name, len(scores), bundle.budget, None)
    if missing and not options.allow_missing:
        logger.warning(
            "bundle %r: %d of %d subset items have no score (e.g. %s; was --limit used?): the "
            "full-benchmark estimate needs every item and is reported as NaN. Run without "
            "--limit, or pass --metadata '{\"microbench_allow_missing\": true}' to impute "
            "them (the interval widens accordingly).",
            bundle.name,
            len(missing),
            bundle.budget,
            missing[:3],
        )
        return _with_person_fit(entry, scores, result)
    if missing:
        logger.warning(
            "bundle %r: estimating from %d of %d subset items with estimator %r; the %d "
            "missing scores are imputed from the IRT model and the interval is widened for "
            "them.",
            bundle.name,
            len(scores),
            bundle.budget,
            fitted.name,
            len(missing),
        )
    estimate = fitted.estimate(scores, level=options.level, allow_missing=bool(missing))
    placement = None if missing else _placement(entry, fitted, scores)
    return _with_person_fit(entry, scores, replace(result, estimate=estimate, placement=placement))


def _placement(
    entry: _Entry, fitted: ScoreEstimator, scores: dict[ItemId, float]
) -> Mapping[str, Any] | None:
    """Where the guard places the run's model, logged when beyond the sources; a model with
    every item right is told that its interval is open above (:mod:`..outside.ceiling`)."""
    row = np.array([[scores[item] for item in fitted.item_ids_]], dtype=np.float64)
    record = placement_records(fitted, row)[0]
    note = "" if record is None else placement_note(entry.options.model, entry.bundle.name, record)
    if note:
        logger.warning("%s", note)
    if saturated(row)[0]:
        items = f"every item of bundle {entry.bundle.name!r}"
        logger.warning("%s", ceiling_note(entry.options.model, items))
    return record


def _with_person_fit(
    entry: _Entry, scores: dict[ItemId, float], result: RunEstimate
) -> RunEstimate:
    """``result`` with the person fit of the scored items, widened and warned about if flagged."""
    estimate, fit, note = check_estimate(entry.bundle, scores, result.estimate)
    if note:
        logger.warning("%s", fit_warning(entry.options.model, entry.bundle.name, note))
    return replace(result, estimate=estimate, person_fit=fit, fit_note=note)
