"""Joint estimates of a reconstruction: the suites' fitted joint estimators on the runs.

The last step of reading lm-eval runs (:mod:`.reconstruct`): a ``joint.json`` found beside a suite's
bundles (or named by the user) is applied to every model that ran all of its benchmarks in
full, its outputs carrying the person-fit widening of the per-benchmark estimates.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .._types import Estimate, ItemId, ModelId
from ..bundle import Bundle
from ..errors import BundleError
from .bundles import BundleIndex, note
from .report import BenchmarkEstimate
from .scores import TaskScores

JOINT_FILE = "joint.json"
"""A fitted :class:`~lmeval_microbench.estimators.joint.JointEstimator` state (JSON) at the
root of a task suite, beside its data folders; used for the joint average when present."""


def guessing_chances(estimates: Sequence[BenchmarkEstimate], model: ModelId) -> dict[str, float]:
    """``benchmark -> chance score`` where the person fit could not reject guessing."""
    return {
        e.benchmark: float(e.person_fit["chance_score"])
        for e in estimates
        if e.model == model and e.flagged and e.person_fit and e.person_fit.get("guessing")
    }


def widen_joint(outputs: Mapping[str, Estimate], chances: Mapping[str, float]) -> dict:
    """Joint outputs carrying the person-fit widening of the per-benchmark estimates.

    The joint estimator reads the same answers, so a benchmark whose answers may be guesses
    may be at chance in its joint output too, and the average may be the mean with those
    benchmarks at chance (see :func:`..personfit.widen_for_fit` for the rule per benchmark).
    """
    from ..estimators.joint import AVERAGE

    if not chances:
        return dict(outputs)
    out = {
        name: _stretch(e, chances[name]) if name in chances else e for name, e in outputs.items()
    }
    benchmarks = [name for name in outputs if name != AVERAGE]
    if AVERAGE in outputs and benchmarks:
        at_chance = float(np.mean([chances.get(b, outputs[b].value) for b in benchmarks]))
        out[AVERAGE] = _stretch(outputs[AVERAGE], at_chance)
    return out


def _stretch(estimate: Estimate, point: float) -> Estimate:
    return replace(estimate, lower=min(estimate.lower, point), upper=max(estimate.upper, point))


def find_joints(index: BundleIndex) -> list[Path]:
    """The :data:`JOINT_FILE` of every suite folder the bundles live in."""
    suites = sorted({ref.folder.parent for ref in index.by_name.values()})
    return [suite / JOINT_FILE for suite in suites if (suite / JOINT_FILE).is_file()]


def load_joint(path: str | os.PathLike[str]) -> Any:
    """A fitted joint estimator from its sealed JSON state (see
    :func:`..estimators.joint.load_state`)."""
    from ..estimators.joint import load_state

    return load_state(path)


def joint_bundles(joint: Any, index: BundleIndex) -> dict[str, Bundle]:
    """The bundle of each of the joint estimator's benchmarks: the one holding its subset.

    A subset no loaded bundle of that benchmark holds is an error: the estimator would read
    answers to other items.
    """
    by_benchmark: dict[str, Bundle] = {}
    for benchmark in joint.benchmarks_:
        fitted = set(joint.subsets_[benchmark].item_ids)
        found = [
            ref.bundle
            for ref in index.by_name.values()
            if ref.bundle.benchmark == benchmark and set(ref.bundle.item_ids) == fitted
        ]
        if not found:
            raise BundleError(
                f"the joint estimator's {benchmark} subset ({len(fitted)} items) is not the "
                f"items of any {benchmark} bundle in use; refit it on the bundles' subsets"
            )
        by_benchmark[benchmark] = found[0]
    return by_benchmark


def joint_estimates(
    joint: Any,
    scored: Sequence[TaskScores],
    bundles: Mapping[str, Bundle],
    level: float | None,
    *,
    warn_incomplete: bool = True,
) -> dict[ModelId, Mapping[str, Estimate]]:
    """The joint estimator's outputs for every model that ran all its benchmarks in full.

    ``bundles`` are the joint estimator's, by benchmark: runs of other bundles do not count.
    Other models get none; ``warn_incomplete`` says so in a warning per model.
    """
    level = level if level is not None else 0.9
    names = {bundle.name for bundle in bundles.values()}
    scores: dict[ModelId, dict[ItemId, float]] = defaultdict(dict)
    benchmarks: dict[ModelId, set[str]] = defaultdict(set)
    for run in scored:
        if not run.missing and run.match.ref.bundle.name in names:
            scores[run.model].update(run.scores)
            benchmarks[run.model].add(run.match.ref.bundle.benchmark)
    out: dict[ModelId, Mapping[str, Estimate]] = {}
    for model, found in scores.items():
        lacking = sorted(set(joint.benchmarks_) - benchmarks[model])
        if lacking:
            if warn_incomplete:
                note(
                    f"model {model!r}: no joint estimate (benchmarks {lacking} not run in "
                    "full); the per-benchmark estimates and their average stand"
                )
            continue
        out[model] = dict(joint.estimate(found, level=level))
    return out
