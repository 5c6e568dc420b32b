"""Build the shipped adaptive item pools of the Open LLM Leaderboard v1 and v2.

Open LLM Leaderboard v1 (``--suite openllm_v1``, metabench data): for each benchmark, the pool
is every item of ``responses/{bm}_B.parquet`` with the leaderboard's exact prompt (the
documents ``tools/build_openllm_v1.py`` renders and checks against the leaderboard's own
prompts). Open LLM Leaderboard v2 (``--suite openllm_v2``): every item of the whole IFEval and
MuSR, with the documents and lm-eval task settings of ``tools/build_openllm_v2.py`` (lm-eval's
own leaderboard code at run time). Each pool has IRT parameters and a ``kridge`` score
estimator fitted on all source models, and interval bands from cross-fitted adaptive replays
(:func:`lmeval_microbench.adaptive.build_pool`). Each is written as an lm-eval task
``microbench_pool_{bm}`` into ``lmeval_microbench/adaptive/pools/{suite}`` (not under
``task_configs/``, see ``adaptive.pool_task.SHIPPED_POOLS``): a full static run of it scores
every pool item; ``microbench adaptive`` runs it adaptively.

    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py          # all six of v1
    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py --suite openllm_v2
    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py --benchmarks mmlu --out /tmp/p
    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py --ability-edges   # no refitting
    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py --source-rates    # no refitting
    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py --floor           # no refitting
    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py --upper-reach     # no refitting
    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py --top-band  # upward folds replayed
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_openllm_v1 import (
    BENCHMARKS,
    DEFAULT_DATA,
    LICENSE,
    build_docs,
    item_chance,
    read_truth,
    source_matrix,
)

from lmeval_microbench.adaptive import build_pool, pool_task_spec
from lmeval_microbench.adaptive.pool import pool_person_fit, pool_state
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.adaptive.refresh import (
    with_ability_edges,
    with_floor,
    with_source_rates,
    with_top_band,
    with_upper_reach,
)
from lmeval_microbench.benchmarks import BENCHMARKS as REGISTRY
from lmeval_microbench.benchmarks import SUITES
from lmeval_microbench.bundle import Bundle, MetricSpec, load_bundle, save_bundle
from lmeval_microbench.errors import InputError
from lmeval_microbench.harness.export import write_task
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.truth import align_target

REPO = Path(__file__).resolve().parents[1]
SEED = 0


def add_person_fit(folder: Path, source: ResponseMatrix, truth, chance) -> None:
    """Add (or refresh) a shipped pool's ``person_fit`` block from its source matrix, refitting
    nothing else: the block a full build writes (:func:`~lmeval_microbench.adaptive.pool.
    pool_person_fit`, from the pool's own IRT parameters)."""
    bundle = load_bundle(folder)
    if source.fingerprint() != bundle.provenance.source_sha256:
        raise InputError(f"{folder}: pool {bundle.name!r} was built from another source matrix")
    spec = pool_person_fit(source, truth, chance, seed=SEED)
    save_bundle(replace(bundle, person_fit=spec), folder, overwrite=True)
    print(
        f"{folder.name:<11} l_z* threshold {spec.lz_threshold:.2f}, chance score "
        f"{spec.chance_score:.3f} ({spec.chance_rule})",
        flush=True,
    )


def add_ability_edges(folder: Path, source: ResponseMatrix) -> None:
    """Add the side bands' ability edges to a shipped pool, refitting nothing
    (:func:`~lmeval_microbench.adaptive.refresh.with_ability_edges`)."""
    bundle = with_ability_edges(load_bundle(folder), source)
    save_bundle(bundle, folder, overwrite=True)
    sides = pool_state(bundle).state.score_map.sides
    edges = ", ".join(f"{side.side} {side.ability_edge:.3f}" for side in sides)
    print(f"{folder.name:<11} ability edges: {edges}", flush=True)


def add_source_rates(folder: Path, source: ResponseMatrix, truth) -> None:
    """Add the IRT-free reading's inputs to a shipped pool, refitting nothing
    (:func:`~lmeval_microbench.adaptive.refresh.with_source_rates`)."""
    bundle = with_source_rates(load_bundle(folder), source, truth)
    save_bundle(bundle, folder, overwrite=True)
    low, high = pool_state(bundle).state.score_map.truth_range
    print(f"{folder.name:<11} source rates; true scores {low:.3f}-{high:.3f}", flush=True)


def add_floor(folder: Path) -> None:
    """Add the floor of runs below the sources to a shipped pool, from its person-fit block,
    refitting nothing (:func:`~lmeval_microbench.adaptive.refresh.with_floor`)."""
    bundle = with_floor(load_bundle(folder))
    save_bundle(bundle, folder, overwrite=True)
    floor = pool_state(bundle).state.score_map.floor
    print(f"{folder.name:<11} floor below the sources {floor:.3f}", flush=True)


def add_upper_reach(folder: Path, source: ResponseMatrix, truth) -> None:
    """Add the upper reach of the spans to a shipped pool where its rule gives one (a target
    that is not its sources' mean over its items, or no upward fold), refitting nothing
    (:func:`~lmeval_microbench.adaptive.refresh.with_upper_reach`)."""
    bundle = with_upper_reach(load_bundle(folder), source, truth)
    save_bundle(bundle, folder, overwrite=True)
    reach = pool_state(bundle).state.score_map.reach
    print(f"{folder.name:<11} upper reach {reach:.3f} binomial sds (0: none)", flush=True)


def add_top_band(folder: Path, source: ResponseMatrix, truth) -> None:
    """Add the top band to a shipped pool, replaying only the upward folds it is chosen from
    and refitting nothing of the pool
    (:func:`~lmeval_microbench.adaptive.refresh.with_top_band`)."""
    bundle = with_top_band(load_bundle(folder), source, truth)
    save_bundle(bundle, folder, overwrite=True)
    top = pool_state(bundle).state.score_map.top
    found = (
        "none"
        if top is None
        else ", ".join(
            f"{n}: {100 * q:.2f}" for n, q in zip(top.n_items, top.quantiles[0.9], strict=True)
        )
    )
    print(f"{folder.name:<11} top band, 90 % (items: points): {found}", flush=True)


def refresh(folder: Path, what: str, source: ResponseMatrix, truth, chance) -> None:
    """One of the refreshes that refit nothing of the pool: ``person_fit``, ``ability_edges``,
    ``source_rates``, ``floor``, ``upper_reach`` or ``top_band``."""
    if what == "top_band":
        add_top_band(folder, source, truth)
    elif what == "upper_reach":
        add_upper_reach(folder, source, truth)
    elif what == "person_fit":
        add_person_fit(folder, source, truth, chance)
    elif what == "ability_edges":
        add_ability_edges(folder, source)
    elif what == "floor":
        add_floor(folder)
    else:
        add_source_rates(folder, source, truth)


def cv_by_items(pool: Bundle) -> str:
    """The pool's cross-fitted MAE (points) at 10, 25 and 50 items, for the build's log."""
    cv = pool.reliability["adaptive"]["cv_mae_by_items"]
    return ", ".join(f"{n}: {100 * cv[str(n)]:.2f}" for n in (10, 25, 50) if str(n) in cv)


def build_one(name: str, data: Path, out: Path, only: str | None = None) -> None:
    started = time.perf_counter()
    bm = BENCHMARKS[name]
    label = f"openllm-v1-{name}-pool"
    docs, equal = build_docs(bm, data, label)
    source, truth = align_target(source_matrix(bm, data, docs), read_truth(bm, data))
    chance = item_chance(bm, docs)
    if only:
        refresh(out / name, only, source, truth, chance)
        return
    bundle = build_pool(
        source,
        truth,
        name=label,
        benchmark=name,
        metric=MetricSpec(name=bm.spec.estimated_metric),
        dataset=bm.dataset,
        license=LICENSE,
        description=f"Adaptive item pool: all {source.n_items} of metabench's items of the "
        f"{bm.n_items} of {bm.summary}, as the Open LLM Leaderboard v1 ran them; fitted on "
        f"{source.n_models} leaderboard models.",
        seed=SEED,
        chance=chance,
    )
    spec = pool_task_spec(replace(bm.spec, tags=("microbench_pool",)), name)
    write_task(out, spec, bundle, [docs[item] for item in bundle.item_ids])
    print(
        f"{name:<11} {source.n_items:>4} items {equal}/{len(docs)} prompts equal; cross-fitted "
        f"MAE by items ({cv_by_items(bundle)}); {time.perf_counter() - started:.0f} s",
        flush=True,
    )


def build_v2(name: str, data: Path, out: Path, only: str | None = None) -> None:
    """The pool of a whole v2 benchmark, with the v2 micro task's settings."""
    import build_openllm_v2 as v2

    started = time.perf_counter()
    bm = REGISTRY[name]
    label = f"openllm-v2-{name}-pool"
    raw = {"ifeval": v2.ifeval_docs, "musr": v2.musr_docs}[name](data)
    source, truth = v2.load_matrix(bm, data)
    ids = list(source.item_ids)
    docs = v2.as_lmeval_sees(
        [{"item_id": i, "bundle": label, "benchmark": name, **raw[i]} for i in ids]
    )
    source = v2.with_hashes(source, {d["item_id"]: d for d in docs})
    chance = v2.item_chance(name, {i: raw[i] for i in ids})
    if only:
        refresh(out / name, only, source, truth, chance)
        return
    bundle = build_pool(
        source,
        truth,
        name=label,
        benchmark=name,
        metric=MetricSpec(name=bm.metric),
        dataset=v2.DATASETS[name],
        license=v2.LICENSES[name],
        description=f"Adaptive item pool: all {source.n_items} items of {v2.SUMMARIES[name]}, "
        f"as lm-eval's {bm.lmeval_task} runs them; fitted on {source.n_models} Open LLM "
        "Leaderboard v2 models.",
        seed=SEED,
        chance=chance,
    )
    static = {"ifeval": v2.ifeval_spec, "musr": v2.musr_spec}[name]()
    spec = pool_task_spec(replace(static, tags=("microbench_pool",)), name)
    write_task(out, spec, bundle, docs)
    print(
        f"{name:<11} {source.n_items:>4} items; cross-fitted MAE by items ({cv_by_items(bundle)}); "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("openllm_v1", "openllm_v2"), default="openllm_v1")
    parser.add_argument("--data", type=Path, help="the suite's data folder (default: shared)")
    parser.add_argument("--out", type=Path, help="pool folder (default: the shipped one)")
    parser.add_argument("--benchmarks", help="comma-separated (default: all of the suite)")
    parser.add_argument(
        "--person-fit",
        dest="only",
        action="store_const",
        const="person_fit",
        help="only add the person-fit block to the pools of --out (from the data, no refitting)",
    )
    parser.add_argument(
        "--ability-edges",
        dest="only",
        action="store_const",
        const="ability_edges",
        help="only add the side bands' ability edges to the pools of --out (no refitting)",
    )
    parser.add_argument(
        "--source-rates",
        dest="only",
        action="store_const",
        const="source_rates",
        help="only add the IRT-free reading's source rates to the pools of --out saved without "
        "them (no refitting; a pool that has rates is refused)",
    )
    parser.add_argument(
        "--floor",
        dest="only",
        action="store_const",
        const="floor",
        help="only add the floor of runs below the sources to the pools of --out (no refitting)",
    )
    parser.add_argument(
        "--upper-reach",
        dest="only",
        action="store_const",
        const="upper_reach",
        help="only add the upper reach of the spans to the pools of --out (no refitting)",
    )
    parser.add_argument(
        "--top-band",
        dest="only",
        action="store_const",
        const="top_band",
        help="only add the top band to the pools of --out (the upward folds replayed, the pool "
        "not refitted)",
    )
    args = parser.parse_args(argv)
    out = args.out or SHIPPED_POOLS / args.suite
    names = args.benchmarks.split(",") if args.benchmarks else list(SUITES[args.suite].benchmarks)
    for name in names:
        if args.suite == "openllm_v1":
            build_one(name, args.data or DEFAULT_DATA, out, args.only)
        else:
            build_v2(name, args.data or DEFAULT_DATA.parent / "openllm_v2", out, args.only)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
