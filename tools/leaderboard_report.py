"""The leaderboard benchmark's markdown: summary, targets, anchors, defaults, per-dataset tables.

Written by ``tools/bench_reliability.py`` as ``bench/reliability.md``; everything here only
formats records and facts that were computed before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from leaderboard_baselines import RIDGE
from leaderboard_bench import OPENLLM
from leaderboard_defaults import (
    DEFAULTS_RULE,
    MDAD_BASELINE,
    TARGET_BUDGET,
    TARGET_MAE_50,
    TARGET_MAE_ALL,
    pick,
)

from lmeval_microbench.reliability.plan import ALL
from lmeval_microbench.reliability.report import markdown_table


def _num(value: Any, fmt: str = ".2f") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "never"
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return format(value, fmt)


def _combo(brief: dict[str, Any] | None) -> str:
    if brief is None:
        return "-"
    if brief["method"] == ALL:
        return f"all ({brief['items']}) + {brief['estimator']}"
    return f"{brief['method']} + {brief['estimator']}"


def _mark(text: str, value: str) -> str:
    return f"{value} {text}" if text == "met" else f"{value} **{text}**"


def summary_table(rows: Sequence[dict]) -> list[str]:
    lines = [
        "| benchmark | protocol | best at 50 items | MAE@50 (<= 1.5) | best at all items "
        "| MAE@all (<= 1.0) | MDAD@50 best / random+mean / random+calibrated | MDAD cut "
        "(>= 30 %) |",
        "|---|---|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        cut = "-" if r["mdad_cut"] is None else f"{100 * r['mdad_cut']:.0f} %"
        lines.append(
            f"| {r['dataset']} | {r['protocol']} | {_combo(r['best50'])} | "
            f"{_mark(r['target_mae50'], _num(r['mae50']))} | {_combo(r['best_all'])} | "
            f"{_mark(r['target_mae_all'], _num(r['mae_all']))} | "
            f"{_num(r['mdad50'], '.1f')} / {_num(r['mdad50_random_mean'], '.1f')} / "
            f"{_num(r['mdad50_random_calibrated'], '.1f')} | {_mark(r['target_mdad'], cut)} |"
        )
    return lines


def target_lines(rows: Sequence[dict]) -> list[str]:
    """One line per target: met everywhere, or where it is missed and by how much."""
    targets = [
        ("target_mae_all", "mae_all", f"MAE <= {TARGET_MAE_ALL} with all B items", ".2f"),
        ("target_mae50", "mae50", f"MAE <= {TARGET_MAE_50} with {TARGET_BUDGET} items", ".2f"),
        ("target_mdad", "mdad_cut", "MDAD at 50 items >= 30 % below random + mean", ".0%"),
    ]
    lines = []
    for key, value_key, text, fmt in targets:
        judged = [r for r in rows if r[key] != "n/a"]
        missed = [r for r in judged if r[key] == "missed"]
        if not judged:
            lines.append(f"- {text}: not measured in this run.")
        elif not missed:
            lines.append(f"- {text}, every benchmark and protocol: **met**.")
        else:
            where = ", ".join(
                f"{r['dataset']} {r['protocol']} ({_num(r[value_key], fmt)})" for r in missed
            )
            lines.append(f"- {text}: **missed** on {len(missed)} of {len(judged)}: {where}.")
    return lines


def anchors_table(
    records: Sequence[dict[str, Any]], anchors: dict[str, dict], datasets: Sequence[str]
) -> list[str]:
    """Reference numbers per benchmark: metabench's own, ridge CV, ridge and published on splits."""
    columns = [
        (
            "metabench own (test models, all B items)",
            lambda d, a: _num(_get(a, "metabench", "mae")),
        ),
        ("ridge 5-fold CV, all items", lambda d, a: _num(_get(a, "ridge_cv_all", "mae"))),
        ("ridge 5-fold CV, 50 random", lambda d, a: _num(_get(a, "ridge_cv_50", "mae"))),
    ]
    for protocol in ("random", "extrapolation"):
        for label, method, estimator, budget in (
            ("ridge all", ALL, RIDGE, ALL),
            ("ridge 50 random", "random", RIDGE, TARGET_BUDGET),
            ("random + mean @50", "random", "mean", TARGET_BUDGET),
            ("Anchor Points @50", "anchor_points", "anchor", TARGET_BUDGET),
            ("tinyBenchmarks gp-IRT @50", "tinybenchmarks", "gpirt", TARGET_BUDGET),
            ("metabench-like @50", "metabench", "calibrated", TARGET_BUDGET),
        ):
            columns.append(
                (
                    f"{protocol}: {label}",
                    lambda d, a, p=protocol, m=method, e=estimator, b=budget: _num(
                        _first_mae(records, d, p, b, m, e)
                    ),
                )
            )
    lines = [
        "| anchor (MAE, points) | " + " | ".join(datasets) + " |",
        "|---|" + "---:|" * len(datasets),
    ]
    for title, getter in columns:
        cells = [getter(d, anchors.get(d, {})) for d in datasets]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return lines


def _get(anchor: dict, key: str, field_name: str) -> float | None:
    entry = anchor.get(key)
    return None if entry is None else entry.get(field_name)


def _first_mae(records, dataset, protocol, budget, method, estimator) -> float | None:
    rows = pick(records, dataset, protocol, budget, method=method, estimator=estimator)
    return rows[0]["mae"] if rows else None


def defaults_table(defaults: dict[str, dict | None]) -> list[str]:
    lines = [
        "| benchmark | method | estimator | budget | random MAE | extrapolation MAE |",
        "|---|---|---|---:|---:|---:|",
    ]
    for name, d in defaults.items():
        if d is None:
            lines.append(f"| {name} | - | - | - | - | - |")
            continue
        budget = f"{d['budget']} (all)" if d["all_items"] else str(d["budget"])
        lines.append(
            f"| {name} | {d['method']} | {d['estimator']} | {budget} | {d['random_mae']:.2f} | "
            f"{d['extrapolation_mae']:.2f} |"
        )
    return lines


def kept_defaults_note(
    defaults: dict[str, dict | None], shipped: dict[str, dict] | None
) -> list[str]:
    """Where this run's choice differs from the kept ``defaults.json`` (empty: none kept)."""
    if shipped is None:
        return []
    key = ("method", "estimator", "budget")
    changed = [
        f"- {name}: kept {_recipe(shipped[name])}; this run's rule picks "
        f"{_recipe(chosen)} (random MAE {chosen['random_mae']:.2f}, extrapolation "
        f"{chosen['extrapolation_mae']:.2f})"
        for name, chosen in defaults.items()
        if chosen is not None
        and name in shipped
        and any(chosen[k] != shipped[name][k] for k in key)
    ]
    head = (
        "The table is this run's choice by the rule. `bench/defaults.json` was kept (the "
        "shipped tasks are built from it; `--choose-defaults` rewrites it, then rebuild with "
        "`tools/build_openllm_v1.py`)"
    )
    return [
        head + (": it agrees on every benchmark." if not changed else ". It differs on:"),
        "",
    ] + ([*changed, ""] if changed else [])


def _recipe(d: dict) -> str:
    return f"{d['method']} + {d['estimator']} at {d['budget']} items"


def dataset_section(
    name: str, records: Sequence[dict[str, Any]], info: dict[str, Any], plots: dict[str, str]
) -> list[str]:
    lines = [
        f"## {name}: {info['n_models']} models x {info['n_items']} items",
        "",
        f"Truth: {info['truth']}. Repeats: "
        + ", ".join(f"{p} {n}" for p, n in info["repeats"].items())
        + f". {info['irt_fits']} 2PL fits shared by the IRT estimators "
        f"({info['irt_unconverged']} hit the iteration limit, {info['irt_seconds']:.0f} s); "
        f"{info['seconds']:.0f} s in all. Seconds of estimator fits: "
        + ", ".join(f"{k} {v:.0f}" for k, v in info["seconds_by_step"]["estimators"].items())
        + "; of selection: "
        + ", ".join(f"{k} {v:.0f}" for k, v in info["seconds_by_step"]["selection"].items())
        + ".",
        "",
    ]
    lines += [f"{note}" for note in info["notes"]] + ([""] if info["notes"] else [])
    if info["warnings"]:
        lines += [
            "Warnings raised during the run: "
            + "; ".join(f"{k} x{v}" for k, v in sorted(info["warnings"].items()))
            + ".",
            "",
        ]
    if plots:
        lines += [" ".join(f"![{k}]({v})" for k, v in plots.items()), ""]
    for protocol in info["protocols"]:
        rows = [r for r in records if r["dataset"] == name and r["protocol"] == protocol]
        if rows:
            lines += [
                f"### {name}, {protocol}: {rows[0]['n_sources']} source models per split, "
                f"{rows[0]['n_targets']} target models per repeat",
                "",
                *markdown_table(rows),
                "",
            ]
    return lines


def cpu_whose(run_info: dict[str, Any]) -> str:
    """Whose CPU time the header counts: the workers' too where datasets ran in parallel."""
    jobs = run_info.get("jobs", 1)
    return "this process" if jobs == 1 else f"this process and its {jobs} workers"


def leaderboard_markdown(
    run_info: dict[str, Any],
    infos: dict[str, dict[str, Any]],
    records: Sequence[dict[str, Any]],
    anchors: dict[str, dict[str, Any]],
    summary: Sequence[dict],
    psn_summary: Sequence[dict],
    defaults: dict[str, dict | None],
    plots: dict[str, bytes],
    shipped: dict[str, dict] | None = None,
) -> str:
    """``bench/reliability.md``: how it was run, the summaries, anchors, defaults, every table.

    ``shipped``: the recipes of an existing ``defaults.json`` that this run keeps (the shipped
    tasks were built from them); the table then shows this run's choice by the rule, and
    every benchmark where the two differ is named.
    """
    machine = run_info["machine"]
    openllm = [d for d in infos if d in OPENLLM]
    lines = [
        "# Reliability of micro-benchmarks on real leaderboard data",
        "",
        "Generated by `tools/bench_reliability.py`; do not edit by hand. Command:",
        "",
        f"    {run_info['command']}",
        "",
        f"Run time {run_info['minutes']:.1f} min wall clock, {run_info['cpu_minutes']:.1f} min "
        f"of CPU ({cpu_whose(run_info)}; BLAS threads: {run_info['blas_threads'] or 'default'}), "
        f"finished {run_info['finished']}, on {machine['cpu']} ({machine['cores']} cores, "
        f"load average {machine['load_average_at_start'][0]} at the start: other work shared "
        f"the machine), Python {machine['python']}, numpy {machine['numpy']}, commit "
        f"{machine['commit']}. Seed {run_info['seed']}.",
        "",
        "Each split divides the models into source models (item selection, IRT fit and "
        "estimator fits see only them) and target models, whose full-benchmark score is "
        "estimated from their answers to the selected items. `random`: "
        f"{run_info['repeats'].get('random')} random 80/20 splits; `extrapolation`: the best "
        f"20 % of models by truth are the targets ({run_info['repeats'].get('extrapolation')} "
        "repeats of the same split, redrawing the selection); `loo`: each model in turn. "
        "Errors in score points (percent of the whole benchmark). MDAD: the smallest true gap "
        "between two target models from which the estimates order at least 80 % of pairs "
        "correctly (bins of 0.5 points; `never`: not even the largest gaps).",
        "",
        "Combinations: every selection method with `calibrated` and with our own estimators "
        f"({', '.join(run_info['our_estimators']) or 'none in this run'}; on psn: "
        f"{', '.join(run_info['psn_our_estimators']) or 'none'}; registered: "
        f"{', '.join(run_info['registered_estimators'])}); the "
        "published methods as their authors pair them (random + mean, Anchor Points = "
        "anchor_points + anchor, tinyBenchmarks gp-IRT = tinybenchmarks + gpirt, "
        "metabench-like = metabench + calibrated); `all` = every matrix item, with every "
        "estimator used. `ridge_items` rows are the ridge baseline (not a micro-benchmark "
        "estimator of the package); they are never the 'best'.",
        "",
        "## Summary: Open LLM Leaderboard v1",
        "",
        "Best method x estimator by MAE at 50 items and at all items (58-249, the matrix), per "
        f"protocol. MDAD cut: 1 - MDAD(best at 50) / MDAD({' + '.join(MDAD_BASELINE)} at 50) "
        "(random sampling scored by its subset mean, calibrated by a line); random + "
        "calibrated is shown for comparison.",
        "",
        *summary_table(summary),
        "",
        *target_lines(summary),
        "",
    ]
    if psn_summary:
        lines += [
            "## Summary: whole benchmarks, 12 models (psn_irt), leave-one-model-out",
            "",
            "Targets are stated for the Open LLM matrices; shown here for reference.",
            "",
            *summary_table(psn_summary),
            "",
        ]
    if openllm:
        lines += [
            "## Anchors",
            "",
            "(a) metabench's own reconstruction error with all B items: its `test` models "
            "(not in our matrices), |pred_from_subset_irt - full_score_metabench|. (b) Ridge "
            "regression of the full score on the item responses, penalty by GCV: 5-fold CV "
            "over all models of our matrices (50 random items: redrawn per fold), and fitted "
            "on the source models of each split (50 items: the random selector's). (c) "
            "Published methods from this run.",
            "",
            *anchors_table(records, anchors, openllm),
            "",
            "## Defaults per benchmark (`bench/defaults.json`)",
            "",
            f"Rule: {DEFAULTS_RULE}",
            "",
            *defaults_table(defaults),
            "",
            *kept_defaults_note(defaults, shipped),
        ]
    for name, info in infos.items():
        files = {
            metric: f"reliability_{name}_{metric}.png"
            for metric in ("mae", "mdad", "tau_dior")
            if f"reliability_{name}_{metric}.png" in plots
        }
        lines += dataset_section(name, records, info, files)
    return "\n".join(lines)
