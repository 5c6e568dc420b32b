"""What a reconstruction of lm-eval runs reports, as JSON and a markdown table.

:mod:`.reconstruct` reads the runs; the result types below hold what it finds: one
:class:`BenchmarkEstimate` per model and benchmark, an :class:`AverageEstimate` per model
(the leaderboard average with a conservative simultaneous interval), gathered in a
:class:`Reconstruction` that writes JSON and a markdown table.

Every estimate carries its person fit (:mod:`..personfit`) when the bundle has a
``person_fit`` block: JSON gets a ``person_fit`` object, the table marks a flagged estimate
with :data:`~lmeval_microbench.reconstruct.FIT_MARK`, and an estimate whose answers cannot
be told from guessing has its interval widened to include the bundle's chance-level score.
Where the bundle's guard (an adaptive run: its ability) places a model above or below every
source model (:mod:`..outside.placement`), JSON gets a ``placement`` object and the table
marks the side (``↑``, ``↓``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._types import Estimate, ItemId, MaybeEstimated, ModelId
from ..benchmarks import SUITES, column_order, shipped
from ..bundle import Bundle
from ..errors import InputError
from ..outside.placement import legend, side_mark
from ..pairs import write_pair
from ..reconstruct import FIT_MARK

UNIT = "(%)"
"""The unit of every score column of our tables, written in its header."""

JOINT_COLUMN = "average (joint)"
"""The column of the joint estimator's average."""


# ---------------------------------------------------------------------------- per benchmark
@dataclass(frozen=True)
class BenchmarkEstimate(MaybeEstimated):
    """One model's reconstructed estimate on one benchmark."""

    model: ModelId
    benchmark: str
    task: str
    bundle: str
    estimator: str
    metric: str
    items_scored: int
    items_in_bundle: int
    full_size: int | None
    subset_mean: float
    estimate: Estimate | None
    """None when subset items are missing and ``allow_missing`` is off (reported as NaN)."""
    missing: tuple[ItemId, ...] = ()
    in_run: Mapping[str, float] | None = None
    samples: str = ""
    person_fit: Mapping[str, Any] | None = None
    """:func:`..personfit.fit_record` of the scored items (None: not computed)."""
    placement: Mapping[str, Any] | None = None
    """Where the bundle's guard places the model against the source models
    (:func:`..outside.placement_records`), or an adaptive run's ability
    (:func:`..adaptive.bands.run_placement`); None: no guard, an item unscored, a pool saved
    without ability edges."""

    @property
    def flagged(self) -> bool:
        """True when the person fit flagged the answers (see :data:`FIT_MARK`)."""
        return bool(self.person_fit and self.person_fit.get("flagged"))

    def to_dict(self) -> dict[str, Any]:
        estimate = self.estimate
        return {
            "model": self.model,
            "benchmark": self.benchmark,
            "task": self.task,
            "bundle": self.bundle,
            "estimator": self.estimator,
            "metric": self.metric,
            "items_scored": self.items_scored,
            "items_in_bundle": self.items_in_bundle,
            "full_size": self.full_size,
            "subset_mean": _json_float(self.subset_mean),
            "estimate": _json_float(self.value),
            "lower": _json_float(self.lower),
            "upper": _json_float(self.upper),
            "level": None if estimate is None else estimate.level,
            "se": None if estimate is None else _json_float(estimate.se),
            "missing_items": list(self.missing),
            "in_run_estimate": None if self.in_run is None else dict(self.in_run),
            "samples": self.samples,
            "person_fit": None if self.person_fit is None else dict(self.person_fit),
            "placement": None if self.placement is None else dict(self.placement),
        }


def _json_float(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def full_size_of(bundle: Bundle) -> int | None:
    """Items of the whole benchmark a shipped bundle stands for (None: not a shipped one)."""
    found = shipped(bundle.name, bundle.benchmark)
    return None if found is None else found.full_size


def suite_of(bundle_name: str, benchmark: str) -> str | None:
    """The shipped suite a bundle belongs to (None: a user's own bundle)."""
    found = shipped(bundle_name, benchmark)
    return None if found is None else found.suite


# ---------------------------------------------------------------------------- averages
@dataclass(frozen=True)
class AverageEstimate:
    """Mean of one model's benchmark estimates, with a simultaneous (conservative) interval."""

    model: ModelId
    benchmarks: tuple[str, ...]
    value: float
    lower: float
    upper: float
    level: float
    method: str
    suite: str | None
    """The shipped suite the benchmarks belong to (None: other bundles)."""
    complete: bool
    """True when the benchmarks are exactly the suite's (all six of the Open LLM Leaderboard
    v1, say)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "benchmarks": list(self.benchmarks),
            "estimate": _json_float(self.value),
            "lower": _json_float(self.lower),
            "upper": _json_float(self.upper),
            "level": self.level,
            "method": self.method,
            "suite": self.suite,
            "complete": self.complete,
        }


def average_estimate(
    model: ModelId,
    per_benchmark: Mapping[str, BenchmarkEstimate],
    bonferroni: Mapping[str, Estimate | None],
    level: float,
    suite: str | None = None,
) -> AverageEstimate:
    """The unweighted mean of the estimates; the interval averages Bonferroni intervals.

    Each benchmark's interval is taken at level ``1 - (1 - level) / k`` (``bonferroni``):
    all ``k`` then hold together with probability at least ``level`` whatever the
    dependence between their errors, and when they all hold the mean of the true scores lies
    between the means of their ends. Conservative, but valid without a joint model.
    """
    names = tuple(per_benchmark)
    value = float(np.mean([per_benchmark[b].value for b in names]))
    ends = [bonferroni[b] for b in names]
    if any(e is None for e in ends):
        lower = upper = math.nan
    else:
        lower = float(np.mean([e.lower for e in ends]))
        upper = float(np.mean([e.upper for e in ends]))
    return AverageEstimate(
        model=model,
        benchmarks=names,
        value=value,
        lower=lower,
        upper=upper,
        level=level,
        method=f"mean of the {len(names)} estimates; interval = mean of their Bonferroni "
        f"intervals at level {1 - (1 - level) / len(names):.4f} each",
        suite=suite,
        complete=suite is not None and set(names) == set(SUITES[suite].benchmarks),
    )


# ---------------------------------------------------------------------------- the result
@dataclass
class Reconstruction:
    """Every reconstructed estimate of a set of lm-eval output folders."""

    estimates: list[BenchmarkEstimate]
    averages: list[AverageEstimate]
    skipped: list[str] = field(default_factory=list)
    """Samples files of tasks no bundle matched (``file (task)``)."""
    notes: list[str] = field(default_factory=list)
    """Warnings raised while reconstructing, in order."""
    joint: dict[ModelId, Mapping[str, Estimate]] = field(default_factory=dict)
    """Per model, the joint estimator's outputs (benchmarks and ``"average"``) when a fitted
    joint estimator was available and the model ran all of its benchmarks."""

    @property
    def models(self) -> list[ModelId]:
        return sorted({e.model for e in self.estimates}, key=natural_key)

    @property
    def benchmarks(self) -> list[str]:
        return column_order({e.benchmark for e in self.estimates})

    def get(self, model: ModelId, benchmark: str) -> BenchmarkEstimate | None:
        return next(
            (e for e in self.estimates if e.model == model and e.benchmark == benchmark), None
        )

    def average(self, model: ModelId, suite: str | None = None) -> AverageEstimate | None:
        """The model's average over the benchmarks of ``suite`` (default: its first)."""
        found = self.averages_of(model)
        if suite is not None:
            found = [a for a in found if a.suite == suite]
        return found[0] if found else None

    def averages_of(self, model: ModelId) -> list[AverageEstimate]:
        return [a for a in self.averages if a.model == model]

    @property
    def average_suites(self) -> list[str | None]:
        """The suites averaged over, in registry order (None last: other bundles)."""
        found = {a.suite for a in self.averages}
        return [s for s in SUITES if s in found] + ([None] if None in found else [])

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": [
                {
                    "model": model,
                    "benchmarks": {
                        bm: found.to_dict()
                        for bm in self.benchmarks
                        if (found := self.get(model, bm)) is not None
                    },
                    "average": None if (a := self.average(model)) is None else a.to_dict(),
                    "averages": [a.to_dict() for a in self.averages_of(model)],
                    "joint": None
                    if model not in self.joint
                    else {
                        out: {
                            "estimate": _json_float(e.value),
                            "lower": _json_float(e.lower),
                            "upper": _json_float(e.upper),
                            "level": e.level,
                        }
                        for out, e in self.joint[model].items()
                    },
                }
                for model in self.models
            ],
            "skipped": list(self.skipped),
            "notes": list(self.notes),
        }

    def to_markdown(self) -> str:
        """Rows = models (natural order), columns = benchmarks then the average, in percent
        (every score column says so in its header: lm-eval's own table shows fractions)."""
        benchmarks = self.benchmarks
        joint = bool(self.joint)
        suites = self.average_suites
        averages = [self._average_column(s, len(suites)) for s in suites] or ["average"]
        columns = [*benchmarks, *averages, *([JOINT_COLUMN] if joint else [])]
        header = ["model", *(f"{name} {UNIT}" for name in columns)]
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for model in self.models:
            cells = [model]
            for bm in benchmarks:
                found = self.get(model, bm)
                cells.append("" if found is None else _marked_cell(found))
            for suite in suites or [None]:
                average = next((a for a in self.averages_of(model) if a.suite == suite), None)
                cells.append(
                    "" if average is None else _cell(average.value, average.lower, average.upper)
                )
            if joint:
                found = self.joint.get(model, {}).get("average")
                cells.append("" if found is None else _cell(found.value, found.lower, found.upper))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n\n" + self._legend() + "\n"

    @staticmethod
    def _average_column(suite: str | None, n_suites: int) -> str:
        if n_suites == 1:
            return "average"
        return f"average {suite}" if suite is not None else "average (other bundles)"

    def _items_scored(self, benchmark: str) -> str:
        """``arc 50 of 1,172``: the items scored (a range over models) of the full benchmark,
        and how many of the subset's items went unscored (a run cut short, ``--limit``)."""
        found = [e for e in self.estimates if e.benchmark == benchmark]
        low = min(e.items_scored for e in found)
        high = max(e.items_scored for e in found)
        budget = max(e.items_in_bundle for e in found)
        full = found[0].full_size
        text = f"{benchmark} {low}" + ("" if low == high else f"-{high}")
        text += f" of {full:,}" if full else ""
        if low < budget:
            most = "" if low == high else "up to "
            text += f" ({most}{budget - low} of its {budget} subset items unscored)"
        return text

    def _legend(self) -> str:
        parts = [self._items_scored(bm) for bm in self.benchmarks]
        level = next((e.estimate.level for e in self.estimates if e.estimate), 0.9)
        text = (
            f"Each cell: the estimated full-benchmark score in percent [its {level:.0%} "
            "interval], recomputed from the answers the run logged (the same numbers lm-eval "
            "printed as estimate, estimate_lower, estimate_upper, there as fractions, unless "
            "another estimator or level is asked for here). It is not the share of subset "
            "items answered right: the items were chosen to be informative, not typical, and "
            "the bundle's estimator maps which of them were right to the full score. Items "
            f"scored: {', '.join(parts)}."
        )
        if self.averages:
            first = self.averages[0]
            k = len(first.benchmarks)
            whole = first.suite is None or first.complete
            text += (
                f" average = mean of the {k} estimates"
                + ("" if whole else f" (not all benchmarks of {SUITES[first.suite].title})")
                + " of a suite, interval from Bonferroni intervals of each (conservative)."
            )
        if self.joint:
            text += (
                f" {JOINT_COLUMN} = the joint estimator's average, learned from all subset "
                "answers together, with its own conformal interval."
            )
        if any(side_mark(e.placement) for e in self.estimates):
            text += " " + legend()
        if any(e.flagged for e in self.estimates):
            text += (
                f" {FIT_MARK} the answers do not fit the bundle's IRT model (person fit; see "
                "the warnings): read the estimate with care; where they cannot be told from "
                "guessing, the interval is widened to include the chance-level score."
            )
        return text


def _marked_cell(found: BenchmarkEstimate) -> str:
    """The estimate with its marks: person fit and the side beyond the sources."""
    marks = (FIT_MARK if found.flagged else "") + side_mark(found.placement)
    cell = _cell(found.value, found.lower, found.upper)
    return f"{cell} {marks}" if marks else cell


def _cell(value: float, lower: float, upper: float) -> str:
    if not math.isfinite(value):
        return "NaN"
    interval = f" [{100 * lower:.1f}, {100 * upper:.1f}]" if math.isfinite(lower) else ""
    return f"{100 * value:.1f}{interval}"


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key putting ``ckpt-9`` before ``ckpt-10`` (model and checkpoint names)."""
    parts = re.split(r"(\d+)", text)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p != "")


def benchmark_order(name: str) -> tuple[int, str]:
    """Sort key of benchmarks: suites in registry order, each in its column order."""
    order = [b for s in SUITES.values() for b in s.benchmarks]
    return (order.index(name), name) if name in order else (len(order), name)


def reconstruction_files(
    path: str | os.PathLike[str], *, overwrite: bool = False
) -> tuple[Path, Path]:
    """The JSON file and the markdown table beside it that :func:`write_reconstruction`
    writes, checked before any work: a folder, or an existing file without ``overwrite``
    (it may be anything, a response matrix say), is refused naming it."""
    path = Path(path)
    table = path.with_suffix(".md")
    if path.is_dir():
        raise InputError(
            f"{path} is a folder: give the file to write the estimates to, e.g. "
            f"{path / 'estimates.json'} (its markdown table goes beside it)"
        )
    if path == table:
        raise InputError(
            f"{path}: the estimates (JSON) and their markdown table would be one file; give a "
            f"name such as {path.with_suffix('.json')}"
        )
    for target in (path, table):
        if target.is_dir():
            raise InputError(f"{target} is a folder; the markdown table cannot be written there")
        if target.exists() and not overwrite:
            raise InputError(f"{target} exists; pass --overwrite (overwrite=True) to replace it")
    return path, table


def write_reconstruction(
    result: Reconstruction, path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write ``result`` as JSON to ``path`` and its markdown table beside it (``.md``).

    Both are written as a pair (:func:`~lmeval_microbench.pairs.write_pair`): the table's
    last line names the JSON and its sha256, so a pair cut apart by a kill between the two
    moves shows it (``microbench verify``). See :func:`reconstruction_files` for the targets
    refused.
    """
    path, table = reconstruction_files(path, overwrite=overwrite)
    data = (json.dumps(result.to_dict(), indent=2) + "\n").encode("utf-8")
    write_pair(path, table, data, result.to_markdown(), "Estimates")
    return path
