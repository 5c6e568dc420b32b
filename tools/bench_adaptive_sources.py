"""Adaptive pools from few source models, beside the static default: bench/adaptive_sources.*.

``adaptive build`` accepts 15 source models or more, and a static ``build`` 10. The adaptive
reports (``bench/adaptive.md``) fit their pools on every leaderboard model; this script fits
them on the peer suite's sub-sampled populations (25, 50 and 100 source models, the same splits
as ``tools/bench_peers.py``: 20 % of the models held out at random or the strongest 20 %,
sources drawn from the rest) and replays the held-out models adaptively
(:func:`lmeval_microbench.adaptive.evaluate.estimate_targets`: the pool's IRT, score map and
bands fitted on the sources, max-information selection, no person-fit check). Beside each
cell: the static default (``microbench build`` then ``estimate``, 50 items) and the best
benchpred method of that cell, both read from ``bench/peers.json`` (the same split).

Under 48 source models the directed folds of a pool hold fewer than 10 models and it fits no
side bands, top band or move towards the IRT-free reading (``adaptive/pool.py``): this is
where that shows.

    python tools/bench_adaptive_sources.py --jobs 2          # about 3 minutes on 2 idle cores
    python tools/bench_adaptive_sources.py --jobs 2 --protocols weak   # adaptive_sources_weak.*

The weakest 20 % held out (``weak``) has no static column at 25-100 sources: the peer suite
runs that protocol with every source model only. ``--checked`` reads the runs as ``microbench
adaptive`` prints them instead (``tools/bench_adaptive_fit.py``'s reading): the pool built as
``adaptive build`` builds it, chance levels as the shipped pools were given them, and each
estimate after the person-fit check (``adaptive.pool.estimate_pool``); its report is suffixed
``_checked``.

    python tools/bench_adaptive_sources.py --jobs 2 --protocols weak --checked
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from bench_adaptive_fit import max_info_runs, read_runs
from bench_fit_effect import given_chance
from peer_cells import DATA, V1, V2, Cell, require_data, split_cell
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.adaptive.evaluate import estimate_targets
from lmeval_microbench.adaptive.pool import build_pool, pool_state

REPO = Path(__file__).resolve().parents[1]
POPULATIONS = ("25", "50", "100")
PROTOCOLS = ("random", "extrapolation")
ITEMS = (10, 25, 50)
STATIC_BUDGET = 50
"""The peer suite's population cells are built at this budget only."""


def cells(v2_seeds: int, v1_seeds: int, protocols: tuple[str, ...] = PROTOCOLS) -> list[Cell]:
    """Every (matrix, population, protocol, seed) cell, at the peer suite's budget of 50."""
    seeds = {**{m: v2_seeds for m in V2}, **{m: v1_seeds for m in V1}}
    return [
        Cell(matrix, population, protocol, STATIC_BUDGET, seed)
        for matrix in (*V2, *V1)
        for population in POPULATIONS
        for protocol in protocols
        for seed in range(seeds[matrix])
    ]


def measure(cell: Cell, checked: bool = False) -> dict[str, Any]:
    """MAE, bias (points), 90 % coverage and width of the adaptive runs of one cell's
    held-out models after each of :data:`ITEMS` items (``checked``: as the product prints
    them, :func:`checked_runs`)."""
    source, target, source_truth, target_truth = split_cell(cell, DATA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        floor = None
        if checked:
            found, floor = checked_runs(cell, source, source_truth, target)
        else:
            found = estimate_targets(source, source_truth, target, ITEMS, seed=cell.seed)
    out: dict[str, Any] = {"key": cell.key, "sources": source.n_models, "adaptive": {}}
    if floor is not None:  # held-out models under where the floor stops a lower edge
        out["under_floor"] = float(np.mean(target_truth < floor))
    for n, (value, lower, upper) in found.items():
        error = value - target_truth
        out["adaptive"][str(n)] = {
            "mae": float(100 * np.mean(np.abs(error))),
            "bias": float(100 * np.mean(error)),
            "coverage": float(np.mean((lower <= target_truth) & (target_truth <= upper))),
            "width": float(100 * np.mean(upper - lower)),
        }
    return out


def checked_runs(
    cell: Cell, source: Any, source_truth: np.ndarray, target: Any
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]], float | None]:
    """``{items: (value, lower, upper)}`` of the held-out models' max-information runs, read
    after the person-fit check by a pool built as ``microbench adaptive build`` builds it
    (chance levels as the shipped pool was given them), and the pool's floor under the
    sources (the chance-level score less 5 points; 0 without chance levels)."""
    chance = given_chance(cell.matrix, list(source.item_ids))
    bundle = build_pool(
        source, source_truth, name=f"{cell.matrix}-sources", benchmark=cell.matrix,
        seed=cell.seed, chance=chance, progress=False,
    )  # fmt: skip
    pool = pool_state(bundle)
    values = target.values[:, target.item_positions(list(pool.item_ids))]
    result = max_info_runs(pool, values, ITEMS)
    found = {n: read_runs(pool, values, result.order, n)["checked"] for n in ITEMS}
    return found, pool.state.score_map.floor


def static_of(peers: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per cell key: the static default's metrics and the best benchpred method's MAE."""
    out = {}
    for cell in peers["cells"]:
        methods = cell["methods"]
        if "ours" not in methods:
            continue
        peer = {k: v["mae"] for k, v in methods.items() if not k.startswith("ours")}
        if not peer:  # a cell of our methods alone has no peer to stand beside
            continue
        best = min(peer, key=peer.get)
        out[cell["key"]] = {"ours": methods["ours"], "best_peer": best, "best_peer_mae": peer[best]}
    return out


def summary(rows: list[dict[str, Any]], static: dict[str, dict[str, Any]]) -> list[dict]:
    """Per matrix, population and protocol: adaptive at each item count (mean over seeds),
    the static default and the best peer at 50 items on the same splits."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        matrix, population, protocol, _, _ = row["key"].split("/")
        groups.setdefault((matrix, population, protocol), []).append(row)
    out = []
    for (matrix, population, protocol), members in groups.items():
        entry: dict[str, Any] = {
            "matrix": matrix,
            "population": population,
            "protocol": protocol,
            "seeds": len(members),
        }
        for n in ITEMS:
            for metric in ("mae", "bias", "coverage", "width"):
                entry[f"{metric}_{n}"] = float(
                    np.mean([r["adaptive"][str(n)][metric] for r in members])
                )
            entry[f"min_coverage_{n}"] = float(
                np.min([r["adaptive"][str(n)]["coverage"] for r in members])
            )
        under = [r["under_floor"] for r in members if "under_floor" in r]
        if under:
            entry["under_floor"] = float(np.mean(under))
        found = [static[r["key"]] for r in members if r["key"] in static]
        if found:
            entry["static_mae"] = float(np.mean([s["ours"]["mae"] for s in found]))
            entry["static_coverage"] = float(np.mean([s["ours"]["coverage"] for s in found]))
            entry["static_width"] = float(np.mean([s["ours"]["width"] for s in found]))
            entry["best_peer_mae"] = float(np.mean([s["best_peer_mae"] for s in found]))
            entry["static_seeds"] = len(found)
        out.append(entry)
    return out


READINGS = {
    False: "`adaptive.evaluate.estimate_targets`: the score map alone",
    True: "`adaptive build`'s pool, the estimate after the person-fit check, as `microbench "
    "adaptive` prints it, chance levels as the shipped pools were given them",
}


def markdown(groups: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "# Adaptive pools from few source models, beside the static default",
        "",
        f"Generated by `{info['command']}` in {info['minutes']:.1f} min (load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f}, 2 shared cores).",
        "",
        "The peer suite's population cells (`tools/peer_cells.py`: 20 % of the models held "
        "out at random, the strongest 20 % (extrapolation) or the weakest (weak), the sources "
        "drawn from the rest; v2 seeds "
        f"{info['v2_seeds']}, v1 seeds {info['v1_seeds']}). `adaptive k`: the pool fitted on "
        "the sources, each held-out model replayed adaptively for k items "
        f"({info.get('reading', READINGS[False])}); MAE in points, cov: share of 90 % intervals "
        "holding the true score (mean over seeds; min: the lowest seed), width in points. "
        "`static 50`: the static default on the same splits at 50 items and the best "
        "benchpred method there, from `bench/peers.json` (its seeds where it has them: the "
        "count is in `static seeds`).",
        "",
        "| matrix | sources | protocol | adaptive 10: MAE / cov (min) / width | adaptive 25 "
        "| adaptive 50 | static 50: MAE / cov / width | best peer 50 | static seeds |",
        "|---|---:|---|---|---|---|---|---:|---:|",
    ]
    for g in groups:
        cols = [
            f"{g[f'mae_{n}']:.2f} / {g[f'coverage_{n}']:.2f} ({g[f'min_coverage_{n}']:.2f}) / "
            f"{g[f'width_{n}']:.1f}"
            for n in ITEMS
        ]
        if "static_mae" in g:
            static = f"{g['static_mae']:.2f} / {g['static_coverage']:.2f} / {g['static_width']:.1f}"
            peer, seeds = f"{g['best_peer_mae']:.2f}", str(g["static_seeds"])
        else:
            static, peer, seeds = "-", "-", "0"
        lines.append(
            f"| {g['matrix']} | {g['population']} | {g['protocol']} | {' | '.join(cols)} | "
            f"{static} | {peer} | {seeds} |"
        )
    lines += ["", *_findings(groups), ""]
    return "\n".join(lines)


def _findings(groups: list[dict[str, Any]]) -> list[str]:
    """Counts a reader would otherwise add up: cells whose coverage falls under 0.85."""
    out = []
    for population in POPULATIONS:
        mine = [g for g in groups if g["population"] == population]
        for n in ITEMS:
            low = [f"{g['matrix']} {g['protocol']}" for g in mine if g[f"coverage_{n}"] < 0.85]
            named = f" ({', '.join(low)})" if low else ""
            out.append(
                f"- {population} sources, {n} items: mean coverage under 0.85 in "
                f"{len(low)} of {len(mine)} matrix x protocol groups{named}"
            )
    under = [f"{g['matrix']} {g['protocol']} {g['under_floor']:.2f}" for g in groups
             if g.get("under_floor") and g["population"] == POPULATIONS[0]]  # fmt: skip
    if under:  # the same held-out models at every population
        out.append(
            "- share of the held-out models whose true score lies under the pool's floor "
            f"(the chance-level score less 5 points): {', '.join(under)}"
        )
    return out


def _protocols(text: str) -> tuple[str, ...]:
    """``--protocols``: a comma-separated subset of the split protocols, in the given order."""
    chosen = tuple(p for p in text.split(",") if p)
    unknown = [p for p in chosen if p not in (*PROTOCOLS, "weak")]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"must name some of random, extrapolation, weak, got {text!r}"
        )
    return chosen


def report_name(protocols: tuple[str, ...], checked: bool = False) -> str:
    """``adaptive_sources``, suffixed with the chosen protocols where they are not the default
    and with ``checked`` for the product's reading."""
    parts = ["adaptive_sources", *(() if protocols == PROTOCOLS else protocols)]
    return "_".join([*parts, "checked"] if checked else parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--v2-seeds", type=int, default=3)
    parser.add_argument("--v1-seeds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--peers", type=Path, default=REPO / "bench" / "peers.json")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument(
        "--protocols",
        type=_protocols,
        default=PROTOCOLS,
        help="comma-separated, of random, extrapolation, weak; other than the default the "
        "report is named after them (adaptive_sources_weak.*)",
    )
    parser.add_argument(
        "--checked",
        action="store_true",
        help="read the runs after the person-fit check, as microbench adaptive prints them",
    )
    args = parser.parse_args(argv)
    require_data(DATA)
    load_start, start = os.getloadavg()[0], time.time()
    todo = cells(args.v2_seeds, args.v1_seeds, args.protocols)
    with worker_pool(args.jobs) as pool:
        found = pool.map(partial(measure, checked=args.checked), todo)
        rows = list(tqdm(found, total=len(todo), desc="cells"))
    static = static_of(json.loads(args.peers.read_text()))
    groups = summary(rows, static)
    info = {
        "command": "python tools/bench_adaptive_sources.py " + " ".join(sys.argv[1:]),
        "minutes": (time.time() - start) / 60,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "v2_seeds": list(range(args.v2_seeds)),
        "v1_seeds": list(range(args.v1_seeds)),
        "reading": READINGS[args.checked],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = report_name(args.protocols, args.checked)
    write_json_atomic(args.out / f"{name}.json", {"info": info, "rows": rows})
    text = markdown(groups, info)
    write_text_if_changed(args.out / f"{name}.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
