"""Report of ``tools/bench_peers.py``: tables, targets and plots from the per-cell results.

A cell's numbers are averaged over its seeds before methods are compared, and "the best
peer" of a case is the benchpred method with the lowest seed-averaged MAE there (a different
method in different cases, as a user who knew in advance which to pick would get).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

OURS = "ours"
MARGIN = 0.1
TARGET_BUDGETS = (25, 50, 100)
SHOWN = ("random_sampling", "aipw", "anchor_points_weighted", "lasso")


def _mean(values: Iterable[float | None]) -> float:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(kept)) if kept else math.nan


def cases(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, dict[str, float]]]:
    """(matrix, population, protocol, budget) -> method -> seed-averaged metrics."""
    grouped: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in with_ours_seeds(rows):
        case = case_key(row)
        for method, metrics in row["methods"].items():
            grouped[case][method].append(metrics)
    out = {}
    for case, methods in grouped.items():
        out[case] = {}
        for method, runs in methods.items():
            ok = [r for r in runs if "error" not in r]
            summary = {
                k: _mean(r.get(k) for r in ok)
                for k in ("mae", "bias", "tau", "coverage", "width", "seconds")
            }
            summary["runs"] = len(ok)
            summary["failed"] = len(runs) - len(ok)
            summary["errors"] = sorted({r["error"] for r in runs if "error" in r})[:2]
            summary["recipes"] = sorted({r["recipe"] for r in ok if r.get("recipe")})
            out[case][method] = summary
    return out


def with_ours_seeds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only the seeds (target sets) ours ran, in every case ours ran at all: where ours ran
    fewer seeds than a peer, the two are compared on the same held-out models."""
    ran: dict[tuple, set] = defaultdict(set)
    for row in rows:
        if OURS in row["methods"]:
            ran[case_key(row)].add(row["seed"])
    return [row for row in rows if case_key(row) not in ran or row["seed"] in ran[case_key(row)]]


def is_target_case(case: tuple) -> bool:
    """The issue's target cases: all source models, 25/50/100 items, random or extrapolation."""
    _, population, protocol, budget = case
    in_protocol = protocol in ("random", "extrapolation")
    return population == "all" and budget in TARGET_BUDGETS and in_protocol


def case_key(row: dict[str, Any]) -> tuple:
    """The case a cell belongs to: (matrix, population, protocol, budget), seeds pooled."""
    return (row["matrix"], row["population"], row["protocol"], row["budget"])


def best_peer(methods: dict[str, dict[str, float]]) -> tuple[str | None, float]:
    peers = {
        m: s["mae"]
        for m, s in methods.items()
        if not m.startswith(OURS) and math.isfinite(s["mae"])
    }
    if not peers:
        return None, math.nan
    name = min(peers, key=peers.__getitem__)
    return name, peers[name]


def verdicts(
    table: dict[tuple, dict[str, dict[str, float]]], method: str = OURS
) -> list[dict[str, Any]]:
    """Per case: ``method``'s MAE beside the best peer's, and its interval."""
    out = []
    for case, methods in sorted(table.items()):
        ours = methods.get(method, {}).get("mae", math.nan)
        name, best = best_peer(methods)
        if name is None or not math.isfinite(ours):
            continue
        out.append(
            {
                "case": case,
                "ours": ours,
                "best": best,
                "best_peer": name,
                "within": ours <= best + MARGIN,
                "coverage": methods[method].get("coverage", math.nan),
                "width": methods[method].get("width", math.nan),
            }
        )
    return out


def _fmt(value: float, digits: int = 2) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def summary_lines(found: list[dict[str, Any]], method: str = OURS) -> list[str]:
    lines = [
        f"| cases | {method} within best peer + 0.1 | mean MAE {method} | mean MAE best peer | "
        "coverage (min-max) | mean width |",
        "|---|---:|---:|---:|---|---:|",
    ]
    groups = {
        "target cases (population all, budgets 25/50/100)": [
            v for v in found if is_target_case(v["case"])
        ],
    }
    for protocol in ("random", "extrapolation", "weak"):
        groups[f"{protocol}, every population and budget"] = [
            v for v in found if v["case"][2] == protocol
        ]
    groups["source populations of 25-100 (budget 50)"] = [v for v in found if v["case"][1] != "all"]
    for label, items in groups.items():
        if not items:
            continue
        within = sum(v["within"] for v in items)
        cov = [v["coverage"] for v in items if math.isfinite(v["coverage"])]
        span = f"{min(cov):.2f}-{max(cov):.2f}" if cov else "-"
        lines.append(
            f"| {label} | {within}/{len(items)} ({100 * within / len(items):.0f} %) | "
            f"{_mean(v['ours'] for v in items):.2f} | {_mean(v['best'] for v in items):.2f} | "
            f"{span} | {_mean(v['width'] for v in items):.1f} |"
        )
    return lines


def head_to_head_lines(table: dict, method: str = OURS) -> list[str]:
    """The target cases against each benchpred method on its own: the one a user would have
    to pick in advance, where "the best peer" above is picked per case after the fact. Rows
    from the lowest mean MAE of the method up."""
    lines = [
        "Each benchpred method on its own, over the target cases it ran (a user picks one "
        'method in advance; "the best peer" above is the best of all of them per case, '
        "known only after the fact):",
        "",
        f"| benchpred method | target cases | {method} within it + {MARGIN} | mean MAE {method} | "
        "its mean MAE | cases where it is the best peer |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    targets = {case: methods for case, methods in table.items() if is_target_case(case)}
    names = sorted({m for methods in targets.values() for m in methods if not m.startswith(OURS)})
    rows = []
    for name in names:
        pairs = [
            (methods[method]["mae"], methods[name]["mae"])
            for methods in targets.values()
            if method in methods
            and name in methods
            and math.isfinite(methods[method]["mae"])
            and math.isfinite(methods[name]["mae"])
        ]
        if not pairs:
            continue
        ours, theirs = np.array(pairs).T
        within = int(np.sum(ours <= theirs + MARGIN))
        best = sum(best_peer(methods)[0] == name for methods in targets.values())
        rows.append((float(theirs.mean()), name, len(pairs), within, float(ours.mean()), best))
    for theirs_mean, name, n, within, ours_mean, best in sorted(rows):
        lines.append(
            f"| {name} | {n} | {within}/{n} ({100 * within / n:.0f} %) | {ours_mean:.2f} | "
            f"{theirs_mean:.2f} | {best} |"
        )
    return [*lines, ""]


def case_lines(table: dict, population_filter: Any, title_cols: str) -> list[str]:
    lines = [
        f"| {title_cols} | ours | cov | width | best peer | its MAE | "
        + " | ".join(SHOWN)
        + " | ours_audit | ours_inside | ours' recipes |",
        "|" + "---|" * (len(title_cols.split("|")) + 7 + len(SHOWN)) + "---|",
    ]
    for case, methods in sorted(table.items(), key=lambda kv: _case_order(kv[0])):
        if not population_filter(case):
            continue
        ours = methods.get(OURS, {})
        name, best = best_peer(methods)
        mine = ours.get("mae", math.nan)
        mark = " ✗" if math.isfinite(best) and math.isfinite(mine) and mine > best + MARGIN else ""
        cells = [_fmt(methods.get(m, {}).get("mae", math.nan)) for m in SHOWN]
        key = " | ".join(str(c) for c in _label(case, title_cols))
        lines.append(
            f"| {key} | {_fmt(ours.get('mae', math.nan))}{mark} | "
            f"{_fmt(ours.get('coverage', math.nan))} | {_fmt(ours.get('width', math.nan), 1)} | "
            f"{name or '-'} | {_fmt(best)} | " + " | ".join(cells) + " | "
            f"{_fmt(methods.get('ours_audit', {}).get('mae', math.nan))} | "
            f"{_fmt(methods.get('ours_inside', {}).get('mae', math.nan))} | "
            f"{', '.join(ours.get('recipes', [])) or '-'} |"
        )
    return lines


def _case_order(case: tuple) -> tuple:
    matrix, population, protocol, budget = case
    pop = 10**6 if population == "all" else int(population)
    return (matrix, ["random", "extrapolation", "weak"].index(protocol), -pop, budget)


def _label(case: tuple, title_cols: str) -> list[Any]:
    matrix, population, protocol, budget = case
    if title_cols.startswith("matrix | population"):
        return [matrix, population, protocol]
    return [matrix, protocol, budget]


def time_lines(table: dict) -> list[str]:
    per_method: dict[str, list[float]] = defaultdict(list)
    for case, methods in table.items():
        if case[1] == "all" and case[3] == 50:
            for method, summary in methods.items():
                if math.isfinite(summary["seconds"]):
                    per_method[method].append(summary["seconds"])
    lines = [
        "| method | median seconds per cell (population all, 50 items) | cells |",
        "|---|---:|---:|",
    ]
    for method, values in sorted(per_method.items(), key=lambda kv: np.median(kv[1])):
        lines.append(f"| {method} | {np.median(values):.1f} | {len(values)} |")
    return lines


def failure_lines(table: dict) -> list[str]:
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for methods in table.values():
        for method, summary in methods.items():
            for error in summary["errors"]:
                seen[(method, error)] += summary["failed"]
    return [f"- {m}: {e} ({n} runs)" for (m, e), n in sorted(seen.items())] or ["- none"]


def plot(table: dict, protocol: str, out: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    matrices = sorted({c[0] for c in table if c[1] == "all" and c[2] == protocol})
    if not matrices:
        return None
    cols = 4
    rows = math.ceil(len(matrices) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, matrix in zip(axes.flat, matrices, strict=False):
        budgets = sorted(c[3] for c in table if c[:3] == (matrix, "all", protocol))
        series = {"ours": [], "best peer": [], **{m: [] for m in SHOWN}}
        for b in budgets:
            methods = table[(matrix, "all", protocol, b)]
            series["ours"].append(methods.get(OURS, {}).get("mae", math.nan))
            series["best peer"].append(best_peer(methods)[1])
            for m in SHOWN:
                series[m].append(methods.get(m, {}).get("mae", math.nan))
        for label, values in series.items():
            style = {"ours": "-o", "best peer": "--k"}.get(label, ":.")
            ax.plot(budgets, values, style, label=label, linewidth=2 if label == "ours" else 1)
        ax.set_title(f"{matrix} ({protocol})", fontsize=9)
        ax.set_xscale("log")
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_ylabel("MAE (points)", fontsize=8)
    for ax in list(axes.flat)[len(matrices) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    name = f"peers_{protocol}.png"
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def inside_lines(table: dict) -> list[str]:
    """``ours_inside`` (``build --new-models like-sources``) beside ``ours`` on its cases."""
    inside = {v["case"]: v for v in verdicts(table, "ours_inside")}
    if not inside:
        return []
    ours = {v["case"]: v for v in verdicts(table) if v["case"] in inside}
    lines = [
        "### For models like the sources: `ours_inside`",
        "",
        "`microbench build --new-models like-sources`: `--method auto` validated on random "
        "folds only, among guarded estimators, the lowest score kept without a margin over "
        "the floor. The same cells as `ours` (all source models, every budget), the strongest "
        "fifth included, to show what the claim costs when it is wrong.",
        "",
        "| cases | ours_inside within best peer + 0.1 | ours within | mean MAE ours_inside "
        "| mean MAE ours | mean MAE best peer | ours_inside coverage (min-max) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for protocol in ("random", "extrapolation"):
        for label, budgets in (("budgets 25/50/100", TARGET_BUDGETS), ("every budget", None)):
            cases = [
                c
                for c in inside
                if c[2] == protocol and c in ours and (budgets is None or c[3] in budgets)
            ]
            if not cases:
                continue
            cov = [inside[c]["coverage"] for c in cases if math.isfinite(inside[c]["coverage"])]
            span = f"{min(cov):.2f}-{max(cov):.2f}" if cov else "-"
            lines.append(
                f"| {protocol}, {label} | {sum(inside[c]['within'] for c in cases)}/{len(cases)} | "
                f"{sum(ours[c]['within'] for c in cases)}/{len(cases)} | "
                f"{_mean(inside[c]['ours'] for c in cases):.2f} | "
                f"{_mean(ours[c]['ours'] for c in cases):.2f} | "
                f"{_mean(inside[c]['best'] for c in cases):.2f} | {span} |"
            )
    return [*lines, ""]


def kept_groups(rows: list[dict[str, Any]], method: str) -> list[str]:
    """The matrices whose cells of ``method`` came from an earlier report; a matrix only some
    of whose protocols did is named with those protocols, e.g. ``arc (extrapolation)``."""
    kept: dict[str, set[str]] = {}
    every: dict[str, set[str]] = {}
    for row in rows:
        every.setdefault(row["matrix"], set()).add(row["protocol"])
        if method in row["from_earlier"]:
            kept.setdefault(row["matrix"], set()).add(row["protocol"])
    return [
        matrix if protocols == every[matrix] else f"{matrix} ({', '.join(sorted(protocols))})"
        for matrix, protocols in sorted(kept.items())
    ]


def kept_for(found: dict[str, list[str]]) -> str:
    """Where each of our methods came from an earlier run, e.g. `ours_inside` on arc, musr."""
    return "; ".join(f"`{method}` on {', '.join(matrices)}" for method, matrices in found.items())


def tier_cells(info: dict[str, Any]) -> str:
    """`` (fast: every cell; ...)``: where each tier ran, when the run's info says so."""
    found = info.get("tier_cells")
    if not found:
        return ""
    return " (" + "; ".join(f"{tier}: {cells}" for tier, cells in found.items()) + ")"


def write_report(rows: list[dict[str, Any]], info: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    table = cases(rows)
    found = verdicts(table)
    plots = [p for p in (plot(table, "random", out), plot(table, "extrapolation", out)) if p]
    md = [
        "## Peer suite: benchpred's methods beside ours on the same splits",
        "",
        f"Generated by `tools/bench_peers.py`; command: `{info['command']}`; started "
        f"{info['started']}; load average {info['load_average']['start']} at the start, "
        f"{info['load_average']['end']} at the end (2 shared cores). benchpred "
        f"{info['benchpred']} in its own venv."
        + (
            f" benchpred's metrics of the cells the cache lacked are those of "
            f"`{info['peer_metrics_from']}` (the same splits; they do not change with our code)."
            if info.get("peer_metrics_from")
            else ""
        )
        + (
            f" Our methods' metrics of the cells the cache lacked are also those of "
            f"`{info['ours_metrics_from']}` (`--ours-metrics`: cells a change rerun here cannot "
            f"reach, or the seeds of an earlier run): {kept_for(info['ours_kept_for'])}."
            if info.get("ours_kept_for")
            else ""
        ),
        "",
        "Full score = each model's mean over the matrix items (v2 and psn: the whole "
        "benchmark; the v1 matrices: the 58-249 items metabench kept, taken as the "
        f"benchmark). v1 'all' populations hold at most {info['v1_all']} source models. "
        "MAE in points, averaged over seeds; `ours` = `microbench build` with its defaults "
        "then `microbench estimate`; `cov`/`width`: its 90 % interval; ✗: more than "
        f"{MARGIN} points above the best peer of the case. Peer tiers: {info['peers']}"
        + tier_cells(info)
        + ".",
        "",
        *summary_lines(found),
        "",
        *head_to_head_lines(table),
        *(f"![{p}]({p})" for p in plots),
        "",
        *inside_lines(table),
        "### Every case with all source models",
        "",
        *case_lines(table, lambda c: c[1] == "all", "matrix | protocol | budget"),
        "",
        "### Few source models (budget 50)",
        "",
        *case_lines(table, lambda c: c[1] != "all", "matrix | population | protocol"),
        "",
        "### Time",
        "",
        *time_lines(table),
        "",
        "### Failures",
        "",
        *failure_lines(table),
    ]
    (out / "peers.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    payload = {
        "info": info,
        "cells": rows,
        "cases": [{"case": list(k), "methods": v} for k, v in sorted(table.items())],
    }
    (out / "peers.json").write_text(json.dumps(_strict(payload), indent=1) + "\n", encoding="utf-8")


def _strict(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value
