"""What the guard costs for models like the sources and gains beyond them: bench/guard_cost.*.

Every default candidate of ``--method auto`` is read with ``guarded``: its inner regression
(``kridge``) inside the sources, moved towards an outside reading as far as that reading places
the model beyond them (``outside/guard.py``). This script rebuilds, on each cell of the peer
suite's splits that ``bench/choice_rules.json`` records (the v1 and v2 matrices; all sources
and 25-100 of them; random and strongest-fifth splits), the recipe the default chose there, and
reads the held-out models twice with the same fitted bundle: with the guard, and with its inner
estimator alone. Beside the errors: the share of held-out models the guard counts as possibly
beyond the sources (outside weight over ``W_MIN``), the same share among the source models
themselves (all inside, so every one counted there is a false alarm), the width of the
sources' true-score range and the median standard error of the reading, whose ratio says how
often the guard must act; and the cells split by whether that false-alarm share exceeded the
level at which ``microbench build`` says so.

Intervals are the estimators' own, before the interval factor of ``--method auto``.

    python tools/bench_guard_cost.py --jobs 2          # about 7 minutes on 2 idle cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm
from worker_pool import worker_pool

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import build_recipe
from cell_scoring import interval_metrics
from peer_cells import DATA, V1, Cell, split_cell

from lmeval_microbench._io import write_text_if_changed
from lmeval_microbench.build import SOURCES_OUTSIDE_NOTE as NOTE_SHARE
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.subset import Subset

REPO = Path(__file__).resolve().parents[1]


def cell_of(key: str) -> Cell:
    matrix, population, protocol, budget, seed = key.split("/")
    return Cell(matrix, population, protocol, int(budget), int(seed))


@dataclass(frozen=True)
class Rebuilt:
    """One cell's chosen recipe rebuilt on its sources."""

    guarded: Any
    """The fitted guarded estimator, as the bundle saved it."""
    held: ResponseMatrix
    """The held-out models' answers on the bundle's items."""
    held_truth: np.ndarray
    whole_source: ResponseMatrix
    """The source models' answers on every matrix item, as the build saw them."""
    source_truth: np.ndarray
    subset: Subset
    irt: ItemParams | None

    @property
    def sources(self) -> ResponseMatrix:
        """The source models' answers on the bundle's items."""
        return self.whole_source.select_items(self.subset.item_ids)


def rebuilt_guard(job: tuple[str, str, str]) -> Rebuilt | None:
    """One cell's chosen recipe rebuilt on its sources (None: the recipe is not read with
    ``guarded``)."""
    key, recipe, data = job
    method, estimator = recipe.split("+")
    if estimator != "guarded":
        return None
    cell = cell_of(key)
    source, target, source_truth, target_truth = split_cell(cell, Path(data))
    bundle = build_recipe(cell, source, source_truth, method, "guarded")
    return Rebuilt(
        estimator_from_state(bundle.estimator_state()),
        target.select_items(bundle.item_ids),
        target_truth,
        source,
        source_truth,
        bundle.subset,
        bundle.irt,
    )


def measure(job: tuple[str, str, str]) -> dict[str, Any] | None:
    """Guarded and inner-only metrics of one cell's chosen recipe (None: not guarded)."""
    rebuilt = rebuilt_guard(job)
    if rebuilt is None:
        return None
    guarded, held, held_truth = rebuilt.guarded, rebuilt.held, rebuilt.held_truth
    key, recipe, _ = job
    inner_value = guarded.inner_.predict_rows(held.values, 0.9)[0]
    reading_se = guarded.reading_.locate(held.values, inner_value)[1]
    out: dict[str, Any] = {"key": key, "recipe": recipe}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fitted in (("guarded", guarded), ("inner", guarded.inner_)):
            out[name] = interval_metrics(*fitted.estimate_matrix(held), held_truth)
    out["outside"] = guarded.outside_share(held.values)
    out["sources_outside"] = guarded.outside_share(rebuilt.sources.values)
    out["range"] = 100 * (guarded.top_ - guarded.bottom_)
    out["reading_se"] = float(100 * np.median(reading_se))
    return out


def group_of(key: str) -> tuple[str, str, str]:
    cell = cell_of(key)
    family = "v1" if cell.matrix in V1 else "v2"
    sources = "all" if cell.population == "all" else "25-100"
    return family, sources, cell.protocol


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(group_of(r["key"]), []).append(r)
    rows = []
    for (family, sources, protocol), cells in sorted(groups.items()):
        row: dict[str, Any] = {"family": family, "sources": sources, "protocol": protocol}
        row["cells"] = len(cells)
        for name in ("guarded", "inner"):
            row[f"{name}_mae"] = float(np.mean([c[name]["mae"] for c in cells]))
            row[f"{name}_min_cov"] = float(min(c[name]["coverage"] for c in cells))
            row[f"{name}_width"] = float(np.mean([c[name]["width"] for c in cells]))
        for name in ("outside", "sources_outside", "range", "reading_se"):
            row[name] = float(np.mean([c[name] for c in cells]))
        rows.append(row)
    return rows


def note_split(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cells split by whether the guard counted over :data:`NOTE_SHARE` of the sources as
    possibly outside (where ``microbench build`` says so), per protocol."""
    rows = []
    for protocol in ("random", "extrapolation"):
        for over in (True, False):
            cells = [
                r
                for r in results
                if cell_of(r["key"]).protocol == protocol
                and (r["sources_outside"] > NOTE_SHARE) == over
            ]
            row = {"protocol": protocol, "over": over, "cells": len(cells)}
            for name in ("guarded", "inner"):
                row[name] = float(np.mean([c[name]["mae"] for c in cells])) if cells else None
            rows.append(row)
    return rows


def note_lines(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"Cells where the guard counted more than {NOTE_SHARE:.0%} of the sources themselves "
        "as possibly outside (`microbench build` says so, `build.py`), against the rest:",
        "",
        "| protocol | sources outside | cells | guarded MAE | inner MAE |",
        "|---|---|---:|---:|---:|",
    ]
    for r in note_split(results):
        if r["cells"]:
            share = f"over {NOTE_SHARE:.0%}" if r["over"] else f"up to {NOTE_SHARE:.0%}"
            lines.append(
                f"| {r['protocol']} | {share} | {r['cells']} | {r['guarded']:.2f} "
                f"| {r['inner']:.2f} |"
            )
    return lines


def render(results: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "## The guard's cost inside the sources and its gain beyond them",
        "",
        f"Generated by `tools/bench_guard_cost.py`; command: `{info['command']}`; "
        f"{info['seconds']:.0f} s; load average {info['load'][0]} -> {info['load'][1]} "
        "(2 shared cores). On each cell of `bench/choice_rules.json` whose chosen recipe is "
        "read with `guarded` (every cell but those of anchor points' own sum), the recipe is "
        "rebuilt on the cell's source models and the held-out models are read twice: with the "
        "guard, and with its inner estimator (`kridge`) alone. MAE in points; coverage of the "
        "estimators' own 90 % intervals (before `--method auto`'s factor); `outside`: share of "
        "held-out models the guard counts as possibly beyond the sources (outside weight over "
        "W_MIN: their interval spans the reading's band and, on a whole benchmark, their "
        "estimate moves towards the reading), `sources outside`: the same share among the "
        "source models, every one of them inside; `range`: the sources' "
        "true-score range in points; `reading se`: the reading's median standard error in "
        "points.",
        "",
        "| matrices | sources | protocol | cells | guarded MAE | inner MAE | guarded min cov "
        "| inner min cov | guarded width | inner width | outside | sources outside | range "
        "| reading se |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summary_rows(results):
        lines.append(
            f"| {r['family']} | {r['sources']} | {r['protocol']} | {r['cells']} "
            f"| {r['guarded_mae']:.2f} | {r['inner_mae']:.2f} | {r['guarded_min_cov']:.2f} "
            f"| {r['inner_min_cov']:.2f} | {r['guarded_width']:.1f} | {r['inner_width']:.1f} "
            f"| {r['outside']:.2f} | {r['sources_outside']:.2f} | {r['range']:.1f} "
            f"| {r['reading_se']:.1f} |"
        )
    lines += ["", *note_lines(results)]
    lines += [
        "",
        "### Whole benchmarks (v2), cell by cell",
        "",
        "| cell | recipe | guarded MAE | cov | inner MAE | cov | outside | sources outside "
        "| range | reading se |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(results, key=lambda r: r["key"]):
        if group_of(r["key"])[0] != "v2":
            continue
        g, i = r["guarded"], r["inner"]
        lines.append(
            f"| {r['key']} | {r['recipe']} | {g['mae']:.2f} | {g['coverage']:.2f} "
            f"| {i['mae']:.2f} | {i['coverage']:.2f} | {r['outside']:.2f} "
            f"| {r['sources_outside']:.2f} | {r['range']:.1f} | {r['reading_se']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def run_cells(
    measure_cell: Callable[[tuple[str, str, str]], dict[str, Any] | None],
    script: str,
    argv: list[str] | None,
    description: str,
) -> tuple[list[dict[str, Any]], dict[str, Any], Path]:
    """Parse the options of a script that reads the chosen recipe of every cell of
    ``bench/choice_rules.json`` (``--matrices``: only these; ``--weak``: also the weakest-fifth
    cells of ``bench/peers.json``) and run ``measure_cell`` on each in ``--jobs`` processes;
    returns its results (cells it skipped left out), the run's info (command, seconds, load
    average) and the folder to write to."""
    parser = grid_parser(description)
    parser.add_argument("--cells", type=Path, default=REPO / "bench" / "choice_rules.json")
    parser.add_argument("--matrices", default="", help="comma-separated subset (default: all)")
    parser.add_argument(
        "--weak",
        type=Path,
        nargs="?",
        const=REPO / "bench" / "peers.json",
        help="also the weakest-fifth cells of this peer-suite report (default bench/peers.json), "
        "each with the recipe the default build chose there",
    )
    args = parser.parse_args(argv)
    cells = json.loads(args.cells.read_text(encoding="utf-8"))["cells"]
    if args.weak is not None:
        cells = cells + weak_cells(args.weak)
    wanted = set(filter(None, args.matrices.split(",")))
    jobs = [
        (c["key"], c["chosen"], str(args.data))
        for c in cells
        if not wanted or cell_of(c["key"]).matrix in wanted
    ]
    found, info = run_jobs(measure_cell, jobs, args.jobs, script, argv)
    return [r for r in found if r is not None], info, args.out


def weak_cells(peers: Path) -> list[dict[str, str]]:
    """The weakest-fifth cells of a peer-suite report (``tools/bench_peers.py``'s JSON) as
    ``choice_rules`` cells: key and the recipe ``ours`` (the default build) chose there. The
    choice's own report has only random and strongest-fifth splits; a rule below the sources
    is measured where the held-out models lie below them."""
    found = json.loads(peers.read_text(encoding="utf-8"))["cells"]
    return [
        {"key": c["key"], "chosen": c["methods"]["ours"]["recipe"]}
        for c in found
        if c["protocol"] == "weak" and "recipe" in c["methods"].get("ours", {})
    ]


def grid_parser(description: str) -> argparse.ArgumentParser:
    """The options every script that runs a grid of jobs on the real matrices takes:
    ``--data``, ``--jobs`` (processes) and ``--out`` (the report's folder)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    return parser


def run_jobs(
    measure: Callable[[Any], Any], jobs: list[Any], n_jobs: int, script: str, argv: list[str] | None
) -> tuple[list[Any], dict[str, Any]]:
    """``measure`` of every job, in order, run in ``n_jobs`` processes with a progress bar, and
    the run's info: the command that reproduces it, its seconds and the load average."""
    start, load = time.perf_counter(), [round(x, 2) for x in os.getloadavg()]
    with worker_pool(n_jobs) as pool:
        results = list(tqdm(pool.map(measure, jobs), total=len(jobs), desc=script, unit="cell"))
    info = {
        "command": f"python tools/{script} " + " ".join(argv or sys.argv[1:]),
        "seconds": time.perf_counter() - start,
        "load": [load[0], round(os.getloadavg()[0], 2)],
    }
    return results, info


def write_report(out: Path, stem: str, payload: dict[str, Any], markdown: str) -> None:
    """``out/<stem>.json`` and ``out/<stem>.md``, each rewritten only where it changed."""
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, allow_nan=False) + "\n"
    write_text_if_changed(out / f"{stem}.json", text)
    write_text_if_changed(out / f"{stem}.md", markdown)


def main(argv: list[str] | None = None) -> None:
    results, info, out = run_cells(measure, "bench_guard_cost.py", argv, __doc__.splitlines()[0])
    payload = {
        "info": info,
        "summary": summary_rows(results),
        "note_split": note_split(results),
        "cells": results,
    }
    write_report(out, "guard_cost", payload, render(results, info))


if __name__ == "__main__":
    main()
