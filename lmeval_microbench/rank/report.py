"""Outputs of a ranking: JSON payload, markdown table and a PNG of the rank intervals.

Every output is built in memory first and written atomically into ``--out DIR`` only when
all of them exist, so a failure leaves nothing half-written; an existing report is kept
unless ``overwrite``.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._io import atomic_path
from .._json import strict_json
from ..errors import InputError
from .rounds import STATUS_TEXT, Ranking

FILES = {"json": "ranking.json", "md": "ranking.md", "png": "rank_intervals.png"}


def cost_summary(ranking: Ranking, full_items: int | None = None) -> dict[str, Any]:
    """Items spent against every model on the whole subset (flat) and on the full benchmark."""
    n_models = len(_ranked(ranking) | set(ranking.failures))
    flat = n_models * ranking.levels[-1]
    summary = {
        "models": len(ranking.models),
        "items_spent": ranking.items_spent,
        "flat_subset_items": flat,
        "share_of_flat": ranking.items_spent / flat if flat else None,
        "full_benchmark_items": None if full_items is None else n_models * full_items,
    }
    if full_items:
        summary["share_of_full"] = ranking.items_spent / (n_models * full_items)
    return summary


def _ranked(ranking: Ranking) -> set[str]:
    return {row["model"] for row in ranking.models}


def payload(ranking: Ranking, info: Mapping[str, Any], full_items: int | None = None) -> dict:
    """JSON-ready record of the ranking, its rounds, failures and costs."""
    return {
        **info,
        "levels": list(ranking.levels),
        "stop_reason": ranking.stop_reason,
        "tiers": [tier.label for tier in ranking.tiers],
        "tier_rule": ranking.tier_rule,
        "cost": cost_summary(ranking, full_items),
        "rounds": ranking.rounds,
        "failures": ranking.failures,
        "ranking": ranking.models,
    }


def _resolved_text(row: Mapping[str, Any]) -> str:
    """``yes``, or ``no`` and why its rounds stopped (rows of older reports: plain no)."""
    if row["resolved"]:
        return "yes"
    return STATUS_TEXT.get(row.get("status", ""), "no")


def replay_markdown(check: Mapping[str, Any], n_models: int | None = None) -> list[str]:
    """Lines of the section "Replay against the true scores": how far the replayed ranking,
    its rank intervals and its top agree with the ranking by full-benchmark scores."""
    top = next((key for key in check if key.startswith("top") and key[3:].isdigit()), None)

    def number(value: Any) -> str:
        return "undefined" if value is None or not math.isfinite(value) else f"{value:.3f}"

    lines = [
        "",
        "## Replay against the true scores",
        "",
        f"- Kendall tau with the true ranking: {number(check['kendall_tau'])}",
    ]
    if top is not None:
        k = int(top[3:])
        every = " (every model: always 1)" if n_models is not None and n_models <= k else ""
        lines.append(f"- top-{k} agreement: {number(check[top])}{every}")
    lines.append(
        f"- rank coverage (rank intervals holding the true rank): "
        f"{number(check['rank_coverage'])}; mean width {number(check['rank_width'])} ranks"
    )
    errors = ", ".join(f"{tier} {err:.2f}" for tier, err in check.get("rank_error", {}).items())
    if errors:
        lines.append(f"- mean rank error by true tier: {errors}")
    return lines


def markdown(document: Mapping[str, Any]) -> str:
    """The ranking as a markdown table with the costs and the tier rule above it, and the
    replay's agreement with the true scores below it (replays only)."""
    cost = document["cost"]
    full = cost["full_benchmark_items"]
    lines = [
        f"# Ranking of {cost['models']} models (coarse to fine)",
        "",
        f"Items spent: {cost['items_spent']} (flat subset: {cost['flat_subset_items']}"
        + (f", full benchmarks: {full}" if full else "")
        + f"). Levels: {document['levels']}. Stopped: {document['stop_reason']}.",
        "",
        f"Resolution: {document.get('tier_rule') or 'tiers'}.",
        "",
        "| rank | model | estimate | 90% interval | rank interval | tier | items | resolved |",
        "|---:|---|---:|---|---|---|---:|---|",
    ]
    for row in document["ranking"]:
        lines.append(
            f"| {row['rank']} | {row['model']} | {100 * row['estimate']:.1f} | "
            f"{100 * row['lower']:.1f}-{100 * row['upper']:.1f} | "
            f"{row['rank_low']}-{row['rank_high']} | {row['tier']} | {row['items']} | "
            f"{_resolved_text(row)} |"
        )
    for model, why in document["failures"].items():
        lines.append(f"\nFailed: {model}: {why}")
    if document.get("replay_check"):
        lines += replay_markdown(document["replay_check"], cost["models"])
    return "\n".join(lines) + "\n"


PLOT_MODELS = 200
"""Most models one plot draws (the bench's largest population); more would be unreadable."""


def plot_title(title: str, n_rows: int, max_models: int = PLOT_MODELS) -> str:
    """``title`` with what the plot draws: every model, or the best ``max_models`` of them.

    The count comes from the rows drawn, never from the caller: a title that said
    "100 models" over the best 60 misled readers into thinking the rest were missing."""
    if n_rows > max_models:
        return f"{title} (best {max_models} of {n_rows} models)"
    return f"{title} ({n_rows} models)"


def rank_interval_png(
    rows: list[Mapping[str, Any]], title: str, max_models: int = PLOT_MODELS
) -> bytes:
    """Horizontal bars of the rank intervals of the best ``max_models``, point rank marked;
    the title gets the count drawn (:func:`plot_title`)."""
    from matplotlib.figure import Figure

    title = plot_title(title, len(rows), max_models)
    rows = rows[:max_models]
    figure = Figure(figsize=(7, 1.5 + 0.18 * len(rows)))
    ax = figure.add_subplot()
    for y, row in enumerate(rows):
        ax.plot([row["rank_low"], row["rank_high"]], [y, y], color="tab:blue", lw=2)
        ax.plot(row["rank"], y, "o", color="black" if row["resolved"] else "tab:red", ms=3)
    ax.set_yticks(range(len(rows)), [str(r["model"])[:40] for r in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("rank (black: resolved, red: not)")
    ax.set_title(title, fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def check_report_folder(out: str | Path, *, overwrite: bool) -> Path:
    """``--out`` checked before any work: a file, or a folder holding a report without
    ``overwrite``, is refused naming it."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--out {folder} is a file; give the folder for the ranking report")
    existing = [name for name in FILES.values() if (folder / name).exists()]
    if existing and not overwrite:
        raise InputError(f"{folder} already holds {', '.join(existing)}; pass --overwrite")
    return folder


def write_report(
    out: str | Path, document: Mapping[str, Any], png: bytes | None, *, overwrite: bool
) -> dict[str, str]:
    """Write ranking.json, ranking.md and (when drawn) rank_intervals.png into ``out``."""
    folder = check_report_folder(out, overwrite=overwrite)
    blobs: dict[str, bytes] = {
        "json": (json.dumps(strict_json(document), indent=2, allow_nan=False) + "\n").encode(),
        "md": markdown(document).encode(),
    }
    if png is not None:
        blobs["png"] = png
    existing = [FILES[k] for k in blobs if (folder / FILES[k]).exists()]
    if existing and not overwrite:
        raise InputError(f"{folder} already holds {', '.join(existing)}; pass --overwrite")
    for key, blob in blobs.items():
        with atomic_path(folder / FILES[key]) as tmp:
            tmp.write_bytes(blob)
    return {key: str(folder / FILES[key]) for key in blobs}
