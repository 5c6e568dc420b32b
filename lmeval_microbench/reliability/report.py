"""The records as strict JSON and as a readable markdown report (one table per protocol)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .evaluate import ReliabilityResult
from .metrics import MDAD_AGREEMENT, MDAD_BIN_WIDTH, MDAD_MIN_PAIRS, THIRD_FIELDS
from .plan import ALL


def json_ready(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records with NaN and infinite floats as ``null`` (strict JSON; see ``mdad_status``)."""
    return [
        {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in record.items()
        }
        for record in records
    ]


MARKDOWN_COLUMNS = (
    ("method", "method", None),
    ("estimator", "estimator", None),
    ("budget", "budget", None),
    ("MAE", "mae", ".2f"),
    ("RMSE", "rmse", ".2f"),
    ("max err", "max_error", ".1f"),
    ("tau", "kendall_tau", ".3f"),
    ("tau DIoR", "tau_dior", ".3f"),
    ("top-10 DIoR", "top10_dior", ".2f"),
    ("MDAD", "mdad", ".1f"),
    ("cov90", "coverage90", ".3f"),
    ("width90", "width90", ".1f"),
    ("cov low", "cov90_low", ".2f"),
    ("cov mid", "cov90_mid", ".2f"),
    ("cov high", "cov90_high", ".2f"),
    ("worst third (truth)", "cov90_min_third_truth", ".2f"),
    ("s", "seconds", ".2f"),
)


def _cell(value: Any, fmt: str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isinf(value):
            return "never" if value > 0 else "-"
        if math.isnan(value):
            return "-"
        return format(value, fmt or ".4g")
    return str(value)


NOT_APPLICABLE = "n/a"
"""The cell of a metric that does not apply to a record (see its ``*_status``), unlike "-"
(could not be computed, e.g. too few targets in a third)."""
_STATUS_FIELDS = {
    "dior_status": ("tau_dior", "top10_dior"),
    "interval_status": ("coverage90", *THIRD_FIELDS),
}


def _not_applicable(record: dict[str, Any]) -> set[str]:
    """The metrics of ``record`` that its status fields declare meaningless."""
    return {key for status, keys in _STATUS_FIELDS.items() if record.get(status) for key in keys}


def markdown_table(records: Sequence[dict[str, Any]]) -> list[str]:
    """One row per record, the columns of :data:`MARKDOWN_COLUMNS` ("-" for NaN, "n/a" for a
    metric that does not apply: see :func:`table_notes`)."""
    lines = [
        "| " + " | ".join(title for title, _, _ in MARKDOWN_COLUMNS) + " |",
        "|" + "|".join("---" if fmt is None else "---:" for _, _, fmt in MARKDOWN_COLUMNS) + "|",
    ]
    for record in records:
        skip = _not_applicable(record)
        cells = [
            NOT_APPLICABLE if key in skip else _cell(record.get(key), fmt)
            for _, key, fmt in MARKDOWN_COLUMNS
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def table_notes(
    rows: Sequence[dict[str, Any]], info: dict[str, Any], *, truth_is_mean: bool = False
) -> list[str]:
    """Why some cells of a protocol's table say n/a, or some rows say less than they seem to.

    Each note is written only when its case occurs in ``rows``: one repeat (no DIoR),
    zero-width intervals, ``stratified`` on a matrix without strata (the same items as
    ``random``), and ``all`` rows whose truth is the mean over those very items.
    """
    notes = []
    if any(r.get("dior_status") for r in rows):
        notes.append(
            "`tau DIoR`, `top-10 DIoR` n/a: DIoR is the 95 % lower bound over repeats and "
            "this protocol ran one repeat (a leave-one-out cycle is one), whose bound would "
            "only repeat `tau`; run `--protocols random` (5 repeats) for it."
        )
    if any(r.get("interval_status") for r in rows):
        notes.append(
            "coverage n/a: the interval has width 0, as the estimate reproduced its target "
            "exactly on every source model (every matrix item, with a truth that is their mean, "
            "or no calibration line below 20 source models), so whether it covers is rounding "
            "noise."
        )
    if info.get("n_strata", 2) < 2 and any(r["method"] == "stratified" for r in rows):
        notes.append(
            "`stratified` rows equal `random`'s: the matrix has no strata (no item `stratum` "
            "such as an MMLU subject), and stratified sampling of one stratum is random "
            "sampling."
        )
    if truth_is_mean and any(r["budget"] == ALL for r in rows):
        notes.append(
            "`all` rows: the truth is the mean over the matrix items (no `--scores`), which "
            "every item reproduces by construction: they check the estimators, not a subset."
        )
    return [f"Note: {text}" for text in notes]


def markdown_report(
    result: ReliabilityResult,
    *,
    truth_note: str,
    truth_is_mean: bool = False,
    notes: Sequence[str] = (),
) -> str:
    """A readable report: what was run, the definitions, one table per protocol with the
    notes that apply to it (:func:`table_notes`; ``truth_is_mean``: no true scores were given),
    and ``notes`` on what the plan left out and why."""
    info = result.info
    lines = [
        f"# Reliability of micro-benchmarks: {info['source']}",
        "",
        f"{info['n_models']} models x {info['n_items']} items; truth: {truth_note}. "
        f"{info['repeats']} repeats, seed {info['seed']}; {info['irt_fits']} {info['irt_model']} "
        f"IRT fits ({info['irt_unconverged']} hit the iteration limit, "
        f"{info['irt_seconds']:.0f} s); total {info['seconds']:.0f} s.",
        "",
        f"Methods: {', '.join(info['methods']) or '-'}; estimators: "
        f"{', '.join(info['estimators'])}; budgets: {', '.join(map(str, info['budgets']))}; "
        f"protocols: {', '.join(info['protocols'])}.",
        "",
        *[line for note in notes for line in (note, "")],
        "Errors in score points (percent of the full benchmark), pooled over repeats. `tau`: "
        "Kendall's tau-b of estimates vs truths among the targets, mean over repeats. `MDAD`: "
        f"smallest true gap (bins of {MDAD_BIN_WIDTH} points, bins of fewer than "
        f"{MDAD_MIN_PAIRS} pairs merged upward) from which every larger gap is ordered "
        f"correctly in at least {MDAD_AGREEMENT:.0%} of target pairs; `never`: not even the "
        "largest gaps. `cov90`: share of targets inside the 90 % interval; `width90`: its mean "
        "width; `cov low/mid/high`: `cov90` among targets whose estimate is in the lower, middle "
        "or upper third of the targets' true score range (equal widths); `worst third (truth)`: "
        "the lowest `cov90` of the three thirds when targets are grouped by true score. `s`: "
        "seconds of estimator fits and estimates (selection and IRT are shared).",
        "",
    ]
    for protocol in info["protocols"]:
        rows = [r for r in result.records if r["protocol"] == protocol]
        if not rows:
            continue
        lines += [
            f"## {protocol}: {rows[0]['n_sources']} source models per split, "
            f"{rows[0]['n_targets']} target models per repeat",
            "",
            *markdown_table(rows),
            "",
            *[
                line
                for note in table_notes(rows, info, truth_is_mean=truth_is_mean)
                for line in (note, "")
            ],
        ]
    return "\n".join(lines)
