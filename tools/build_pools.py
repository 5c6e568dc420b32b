"""Build the shipped adaptive item pools of the Open LLM Leaderboard v1 from metabench data.

For each benchmark, the pool is every item of ``responses/{bm}_B.parquet`` with the
leaderboard's exact prompt (the documents ``tools/build_openllm_v1.py`` renders and checks
against the leaderboard's own prompts), IRT parameters and a ``kridge`` score estimator fitted
on all source models, and interval bands from cross-fitted adaptive replays
(:func:`lmeval_microbench.adaptive.build_pool`). Each is written as an lm-eval task
``microbench_pool_{bm}`` into ``lmeval_microbench/adaptive/pools/openllm_v1`` (not under
``task_configs/``, see ``adaptive.pool_task.SHIPPED_POOLS``): a full
static run of it scores every pool item; ``microbench adaptive`` runs it adaptively.

    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py          # all six
    SOURCE_DATE_EPOCH=1795392000 python tools/build_pools.py --benchmarks mmlu --out /tmp/p
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
    read_truth,
    source_matrix,
)

from lmeval_microbench.adaptive import build_pool, pool_task_spec
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.bundle import MetricSpec
from lmeval_microbench.harness.export import write_task
from lmeval_microbench.truth import align_target

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = SHIPPED_POOLS
SEED = 0


def build_one(name: str, data: Path, out: Path) -> None:
    started = time.perf_counter()
    bm = BENCHMARKS[name]
    label = f"openllm-v1-{name}-pool"
    docs, equal = build_docs(bm, data, label)
    source, truth = align_target(source_matrix(bm, data, docs), read_truth(bm, data))
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
    )
    spec = pool_task_spec(replace(bm.spec, tags=("microbench_pool",)), name)
    write_task(out, spec, bundle, [docs[item] for item in bundle.item_ids])
    cv = bundle.reliability["adaptive"]["cv_mae_by_items"]
    shown = ", ".join(f"{n}: {100 * cv[str(n)]:.2f}" for n in (10, 25, 50) if str(n) in cv)
    print(
        f"{name:<11} {source.n_items:>4} items {equal}/{len(docs)} prompts equal; cross-fitted "
        f"MAE by items ({shown}); {time.perf_counter() - started:.0f} s",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    args = parser.parse_args(argv)
    for name in args.benchmarks.split(","):
        build_one(name, args.data, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
