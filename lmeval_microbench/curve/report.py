"""The result of ``microbench curve``: JSON, a markdown table and a PNG per benchmark, all
written atomically into one folder (each file to a temporary name first, then moved; the
markdown's last line names the JSON's sha256, as ``microbench reconstruct`` does)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import atomic_path
from ..errors import InputError
from ..pairs import write_pair
from .ordering import RunIdentity
from .series import BenchmarkCurve

JSON_NAME = "curve.json"
TABLE_NAME = "curve.md"


def png_name(benchmark: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in benchmark)
    return f"curve_{safe}.png"


@dataclass
class CurveReport:
    """Every benchmark's curve over the ordered runs, and what was left out and why."""

    runs: list[RunIdentity]
    rule: str
    curves: list[BenchmarkCurve]
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for run in self.runs:  # a point at step inf (a 400-digit revision=) has no place
            if run.step is not None and not math.isfinite(run.step):
                raise InputError(
                    f"run {run.label}: its step ({run.step_from}) is not a finite number; give "
                    "--step-regex or --order given"
                )

    def to_dict(self) -> dict[str, Any]:
        return {
            "order": {
                "rule": self.rule,
                "runs": [
                    {"run": r.label, "model": r.model, "step": r.step, "step_from": r.step_from}
                    for r in self.runs
                ],
            },
            "benchmarks": {c.benchmark: c.to_dict() for c in self.curves},
            "notes": list(self.notes),
        }

    def to_markdown(self) -> str:
        parts = [f"Runs ordered by: {self.rule}."]
        for curve in self.curves:
            parts += [f"## {curve.benchmark}", _points_table(curve), _stats_table(curve)]
        if self.notes:
            parts.append("Notes:\n\n" + "\n".join(f"- {n}" for n in self.notes))
        return "\n\n".join(parts) + "\n"


def _pct(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else f"{100 * value:.1f}"


def _change(curve: BenchmarkCurve, quantity: str, k: int, scale: float) -> str:
    """``+2.1*`` (significant) or ``+0.3 (±1.2)`` (within the noise band) into point ``k``."""
    tests = curve.steps.get(quantity, [])
    if k == 0 or k - 1 >= len(tests):
        return ""
    test = tests[k - 1]
    if not math.isfinite(test.delta):
        return ""
    if test.significant:
        return f"{scale * test.delta:+.2f}*"
    return f"{scale * test.delta:+.2f} (±{scale * test.threshold:.2f})"


def _points_table(curve: BenchmarkCurve) -> str:
    lines = [
        "| step | run | items | raw | ability (SE) | estimate [interval] | change: raw | "
        "change: ability | change: estimate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k, p in enumerate(curve.points):
        est = p.estimate
        estimate = (
            "NaN" if est is None else f"{_pct(est.value)} [{_pct(est.lower)}, {_pct(est.upper)}]"
        )
        ability = "" if not math.isfinite(p.ability) else f"{p.ability:.2f} ({p.ability_se:.2f})"
        lines.append(
            f"| {p.step:g} | {p.label} | {p.items_scored} | {_pct(p.raw)} | {ability} | "
            f"{estimate} | "
            f"{_change(curve, 'raw', k, 100)} | {_change(curve, 'ability', k, 1)} | "
            f"{_change(curve, 'estimate', k, 100)} |"
        )
    legend = (
        f"Scores in percent; estimate by `{curve.estimator}` of bundle `{curve.bundle}` with "
        f"{curve.level:.0%} intervals. Changes: `*` = significant at level {curve.level:.0%} "
        "by the paired sign-flip test on the items (the change of the model on these items); "
        "otherwise the change and the noise band it stays within."
    )
    return "\n".join(lines) + "\n\n" + legend


def _number(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "" if value is None else f"{scale * value:.{digits}f}"


def _stats_table(curve: BenchmarkCurve) -> str:
    lines = [
        "| series | points | total variation | share of steps down | residual SD | SNR |",
        "|---|---|---|---|---|---|",
    ]
    for quantity, found in curve.stats.items():
        scale = 1 if quantity == "ability" else 100
        row = found.to_dict()
        snr = "∞" if row["snr_infinite"] else _number(row["snr"], digits=1)
        lines.append(
            f"| {quantity} | {found.points} | {_number(row['total_variation'], scale)} | "
            f"{_number(row['share_down'])} | {_number(row['residual_sd'], scale)} | {snr} |"
        )
    return "\n".join(lines) + (
        "\n\nTotal variation and residual SD in points (ability: logits); residual around the "
        "best monotone (isotonic) fit; SNR = net rise of that fit / residual SD."
    )


def output_files(folder: str | os.PathLike[str], benchmarks: list[str] | None = None) -> list[Path]:
    folder = Path(folder)
    names = [JSON_NAME, TABLE_NAME] + [png_name(b) for b in benchmarks or []]
    return [folder / name for name in names]


def check_output(folder: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """The output folder, refused before any work when it is a file or already holds a
    curve (``curve.json``, ``curve.md`` or any ``curve_*.png``) and ``overwrite`` is off."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder} is a file; --out takes a folder for the curve files")
    if folder.is_dir() and not overwrite:
        taken = [p for p in output_files(folder) if p.exists()] + sorted(folder.glob("curve_*.png"))
        if taken:
            raise InputError(
                f"{taken[0]} exists; pass --overwrite (overwrite=True) to replace the curve files"
            )
    return folder


def write_report(
    report: CurveReport,
    folder: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    plots: bool = True,
) -> list[Path]:
    """Write JSON, markdown and (``plots``) the PNGs into ``folder``; returns the paths."""
    folder = check_output(folder, overwrite=overwrite)
    written: list[Path] = []
    if plots:
        from .plot import curve_png

        for curve in report.curves:
            path = folder / png_name(curve.benchmark)
            with atomic_path(path) as tmp:
                tmp.write_bytes(curve_png(curve))
            written.append(path)
    data = (json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n").encode("utf-8")
    json_path, table_path = folder / JSON_NAME, folder / TABLE_NAME
    write_pair(json_path, table_path, data, report.to_markdown(), "Curve data")
    return [json_path, table_path, *written]
