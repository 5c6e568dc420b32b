"""Random-weights models through lm-eval on every shipped micro task and pool (issue 21).

``tools/bench_random_models.py`` simulates random responders on the matrices (hundreds per
benchmark); this is the real path: randomly initialised GPT-2s (``tests/tiny_models.py``, a
byte-level tokenizer, nothing downloaded; one seed per model) are evaluated by lm-eval on the
eight shipped micro tasks (``microbench_openllm`` and ``microbench_openllm_v2``, estimates
recomputed from the logged samples as ``microbench reconstruct`` does) and run adaptively on
the eight shipped pools (``adaptive.interleave.run_task``, one item per step, at most
``--max-items`` items). A random-weights model is not a uniform guesser: its loglikelihoods
prefer some options (often the shortest) systematically, so its true score can sit some
points off the chance score; the check is what a user reads: whether the reported 90 %
interval contains the chance score, how far the point estimate is from it, and whether the
estimate is flagged. IFEval has no choices, so its chance score is the weakest source models'
score, not what a random generator scores; on IFEval and MuSR the pools hold every item of the
benchmark, so each model is also run on the whole benchmark and its own score (its truth) is
checked against its interval. The v1 pools hold metabench's items only: there the chance
score is the only reference.

    python tools/bench_random_weights.py --models 5 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from worker_pool import worker_pool

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # tiny_models: the random GPT-2 of the tests
V1 = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
V2 = ("ifeval", "musr")


def _static(lm: Any, out: Path) -> dict[str, dict[str, Any]]:
    """The eight micro tasks through lm-eval, estimates read back from the logged samples."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    from lmeval_microbench.harness import include_path
    from lmeval_microbench.runs import ReconstructionWarning, reconstruct_runs

    manager = TaskManager(include_path=str(include_path()), include_defaults=False)
    tracker = EvaluationTracker(output_path=str(out))
    tasks = [f"microbench_{name}" for name in (*V1, *V2)]
    results = lm_eval.simple_evaluate(
        model=lm, tasks=tasks, task_manager=manager, log_samples=True, evaluation_tracker=tracker
    )
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)
        found = reconstruct_runs(out, progress=False)
    return {
        e.benchmark: {
            "value": e.value,
            "lower": e.lower,
            "upper": e.upper,
            "subset_mean": e.subset_mean,
            "flagged": e.flagged,
            "chance": (e.person_fit or {}).get("chance_score"),
        }
        for e in found.estimates
    }


def _adaptive(lm: Any, out: Path, max_items: int) -> dict[str, dict[str, Any]]:
    from lmeval_microbench.adaptive.interleave import run_task
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
    from lmeval_microbench.adaptive.runner import RunOptions, load_pool_task

    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for suite, names in (("openllm_v1", V1), ("openllm_v2", V2)):
        for name in names:
            task = load_pool_task(f"microbench_pool_{name}", SHIPPED_POOLS / suite)
            result = run_task(lm, task, RunOptions(max_items=max_items), out / f"{name}.log")
            est = result.estimate
            rows[name] = {
                "value": est.value,
                "lower": est.lower,
                "upper": est.upper,
                "subset_mean": float(np.mean([a.score for a in result.answers])),
                "flagged": est.flagged,
                "chance": est.person_fit.get("chance_score"),
            }
    return rows


def _whole(lm: Any) -> dict[str, float]:
    """Each v2 model's score on the whole benchmark: its pool task run on every item.

    The pools of IFEval and MuSR hold every item of the benchmark (541 and 756), so the pool
    task's metric over all of them is the model's full score, as the v2 matrix's row mean is
    for the source models.
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
    from lmeval_microbench.bundle import load_bundle

    manager = TaskManager(include_path=str(SHIPPED_POOLS / "openllm_v2"), include_defaults=False)
    tasks = [f"microbench_pool_{name}" for name in V2]
    results = lm_eval.simple_evaluate(model=lm, tasks=tasks, task_manager=manager)["results"]
    scores = {}
    for name in V2:
        metric = load_bundle(SHIPPED_POOLS / "openllm_v2" / name).metric
        scores[name] = float(results[f"microbench_pool_{name}"][f"{metric.name},{metric.filter}"])
    return scores


def evaluate_model(seed: int, max_items: int, batch_size: int) -> dict[str, Any]:
    from lm_eval.models.huggingface import HFLM
    from tiny_models import build_random_gpt2

    with tempfile.TemporaryDirectory(prefix="microbench-random-") as tmp:
        # 4,096 positions: IFEval generates up to 1,280 tokens after its prompt
        folder = build_random_gpt2(Path(tmp) / "model", seed=seed, n_positions=4096)
        lm = HFLM(pretrained=str(folder), device="cpu", batch_size=batch_size)
        started = time.perf_counter()
        static = _static(lm, Path(tmp) / "static")
        adaptive = _adaptive(lm, Path(tmp) / "adaptive", max_items)
        whole = _whole(lm)
    return {
        "seed": seed,
        "static": static,
        "adaptive": adaptive,
        "whole": whole,
        "seconds": time.perf_counter() - started,
    }


def summary(models: list[dict[str, Any]], run: str) -> list[dict[str, Any]]:
    rows = []
    for name in (*V1, *V2):
        found = [m[run][name] for m in models if name in m[run]]
        chance = np.array([f["chance"] for f in found], dtype=float)
        value = np.array([f["value"] for f in found], dtype=float)
        inside = [f["lower"] <= f["chance"] <= f["upper"] for f in found]
        row = {
            "benchmark": name,
            "run": run,
            "models": len(found),
            "chance": 100 * float(np.mean(chance)),
            "subset_mean": 100 * float(np.mean([f["subset_mean"] for f in found])),
            "contains_chance": 100 * float(np.mean(inside)),
            "distance": 100 * float(np.mean(np.abs(value - chance))),
            "flagged": 100 * float(np.mean([f["flagged"] for f in found])),
        }
        row.update(_against_whole([m for m in models if name in m[run]], run, name))
        rows.append(row)
    return rows


def _against_whole(models: list[dict[str, Any]], run: str, name: str) -> dict[str, float]:
    """Each model's interval against its own whole-benchmark score, where that was run."""
    if not models or any(name not in m.get("whole", {}) for m in models):
        return {}
    whole = np.array([m["whole"][name] for m in models])
    value, lower, upper = (
        np.array([m[run][name][k] for m in models]) for k in ("value", "lower", "upper")
    )
    inside = (lower <= whole) & (whole <= upper)
    return {
        "whole": 100 * float(np.mean(whole)),
        "whole_min": 100 * float(np.min(whole)),
        "whole_max": 100 * float(np.max(whole)),
        "contains_whole": 100 * float(np.mean(inside)),
        "whole_error": 100 * float(np.mean(np.abs(value - whole))),
    }


def markdown(rows: list[dict[str, Any]], command: str, seconds: float, max_items: int) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "# Random-weights models through lm-eval: every shipped micro task and pool",
        "",
        f"Generated by `{command}` in {seconds:.0f} s (load average at the end {load}, "
        f"{os.cpu_count()} cores).",
        "",
        (__doc__ or "").split("\n\n")[1].replace("\n", " "),
        "",
        f"Static: the shipped micro task's estimate; adaptive: at most {max_items} pool items. "
        "Subset score: the share of asked items the model got right (its own answers, before "
        "any estimator). Contains chance: the share of models whose 90 % interval contains "
        "the chance score; distance: mean |estimate - chance score| in points. Whole score: "
        "the models' own score on every item of the benchmark (mean, and range over the "
        "models); contains whole: the share whose interval contains their own whole score; "
        "error: mean |estimate - whole score| in points. `-`: the benchmark's whole item set "
        "is not at hand offline.",
        "",
        "| benchmark | run | models | chance score | subset score | contains chance | "
        "distance | whole score | contains whole | error | flagged |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        whole = (
            f"{r['whole']:.1f} ({r['whole_min']:.1f}-{r['whole_max']:.1f}) | "
            f"{r['contains_whole']:.0f} % | {r['whole_error']:.1f}"
            if "whole" in r
            else "- | - | -"
        )
        lines.append(
            f"| {r['benchmark']} | {r['run']} | {r['models']} | {r['chance']:.1f} | "
            f"{r['subset_mean']:.1f} | {r['contains_chance']:.0f} % | {r['distance']:.1f} | "
            f"{whole} | {r['flagged']:.0f} % |"
        )
    inside = [r["contains_chance"] for r in rows]
    distance = [r["distance"] for r in rows]
    truth = [r for r in rows if "whole" in r]
    runs = sum(r["models"] for r in truth)
    held = sum(r["models"] * r["contains_whole"] / 100 for r in truth)
    lines += [
        "",
        f"Over every benchmark and run: contains chance {min(inside):.0f}-{max(inside):.0f} % "
        f"(mean {np.mean(inside):.0f} %), distance {min(distance):.1f}-{max(distance):.1f} "
        f"points (mean {np.mean(distance):.1f}).",
    ]
    if truth:
        lines.append(
            f"Against the models' own whole-benchmark scores ({', '.join(V2)}): the interval "
            f"contains it in {held:.0f} of {runs} runs."
        )
    return "\n".join(lines) + "\n"


def _evaluate_on_one_thread(seed: int, max_items: int, batch_size: int) -> dict[str, Any]:
    """One model in a worker process with one torch thread, so that ``--jobs`` workers share
    the cores (``worker_pool`` limits BLAS, not torch's own threads)."""
    import torch

    torch.set_num_threads(1)
    return evaluate_model(seed, max_items, batch_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", type=int, default=5, help="random-weights models (seeds)")
    parser.add_argument("--max-items", type=int, default=30, help="adaptive item budget")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--jobs", type=int, default=1, help="models evaluated side by side")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "random_weights")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    started = time.perf_counter()
    with worker_pool(args.jobs) as pool:
        futures = [
            pool.submit(_evaluate_on_one_thread, seed, args.max_items, args.batch_size)
            for seed in range(args.models)
        ]
        models = []
        for future in futures:
            models.append(future.result())
            print(
                f"model {len(models)} of {args.models}: {models[-1]['seconds']:.0f} s",
                file=sys.stderr,
            )
    rows = summary(models, "static") + summary(models, "adaptive")
    command = "python tools/bench_random_weights.py " + " ".join(sys.argv[1:])
    seconds = time.perf_counter() - started
    args.out.with_suffix(".json").write_text(json.dumps({"rows": rows, "models": models}, indent=2))
    args.out.with_suffix(".md").write_text(markdown(rows, command.strip(), seconds, args.max_items))


if __name__ == "__main__":
    main()
