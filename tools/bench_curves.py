"""Training curves on real checkpoint series: does the micro curve show the model's changes?

Real series of checkpoints of one model are in the Open LLM Leaderboard v1 matrices
(TinyLlama pretraining steps, GPT-2-Large steps, SPIN / iterative-DPO iterations, ...). Per
benchmark, every series model is left out of the source models; the shipped recipe of
``bench/defaults.json`` (selection, budget, estimator) builds a bundle on the rest
(``build.build_bundle``, seed 0); each checkpoint's recorded answers are replayed on the
subset items and traced with ``lmeval_microbench.curve.trace_benchmark`` (the code of
``microbench curve``). Compared with the true full-benchmark curve:

* Spearman correlation over steps of raw subset score, IRT ability and estimate with the
  truth (series of 3+ checkpoints);
* noise statistics of raw, ability, estimate and truth (total variation, share of steps
  down, residual SD around the best monotone fit);
* every step marked significant, and whether its sign is the truth's: the paired sign-flip
  test (ours) and, for comparison, "the two 90 % intervals do not overlap" (estimate) and a
  z-test of two independent IRT abilities;
* null pairs: two answer vectors drawn from the bundle's IRT model at the same ability (a
  checkpoint compared with itself): how often each rule calls a change (nominal 10 %).

Writes ``bench/curves.json``, ``bench/curves.md`` and ``bench/curves_*.png``::

    python tools/bench_curves.py --shared ../shared/data
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reliability import load_openllm

from lmeval_microbench._io import atomic_path, write_json_atomic, write_text_if_changed
from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import Bundle
from lmeval_microbench.curve import BenchmarkCurve, TraceOptions, paired_flip_test, trace_benchmark
from lmeval_microbench.curve.ordering import compile_step_regex, step_from_text
from lmeval_microbench.curve.plot import curve_png
from lmeval_microbench.curve.series import score_functions
from lmeval_microbench.irt import estimate_abilities

BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
LEVEL = 0.9
Z_90 = 1.6448536269514722

SERIES: dict[str, tuple[str, list[str]]] = {
    "TinyLlama-1.1B pretraining": (
        r"step-(\d+[kK])",
        [
            "PY007/TinyLlama-1.1B-step-50K-105b",
            "PY007/TinyLlama-1.1B-intermediate-step-240k-503b",
            "PY007/TinyLlama-1.1B-intermediate-step-480k-1T",
            "TinyLlama/TinyLlama-1.1B-intermediate-step-955k-token-2T",
            "TinyLlama/TinyLlama-1.1B-intermediate-step-1195k-token-2.5T",
            "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
        ],
    ),
    "GPT-2-Large steps": (
        r"(\d+k)-steps",
        [f"DrNicefellow/GPT-2-Large-{k}k-steps" for k in (20, 32, 40, 43, 51, 115)],
    ),
    "zephyr-7b SPIN": (
        r"iter(\d+)",
        [f"UCLA-AGI/zephyr-7b-sft-full-SPIN-iter{k}" for k in range(4)],
    ),
    "openchat SPIN": (r"iter(\d+)", [f"splm/openchat-spin-slimorca-iter{k}" for k in range(4)]),
    "zephyr-7b SPIN (peft)": (
        r"iter(\d+)",
        [f"splm/zephyr-7b-sft-full-spin-peft-iter{k}" for k in range(3)],
    ),
    "ZhangShenao ablation iters": (
        r"iter_(\d+)",
        [f"ZhangShenao/0.0_ablation_sample1_4iters_bs256_iter_{k}" for k in range(1, 5)],
    ),
    "ZhangShenao llama-3 nodpo iters": (
        r"iter_(\d+)",
        [f"ZhangShenao/0.001_llama-3_nodpo_3iters_bs128_531lr_iter_{k}" for k in range(1, 4)],
    ),
    "ZhangShenao llama 4iters": (
        r"iter_(\d+)",
        [f"ZhangShenao/0.0005_llama_4iters_bs128_5551lr_iter_{k}" for k in range(1, 5)],
    ),
    "ZhangShenao idpo declr": (
        r"iter_(\d+)",
        [f"ZhangShenao/0.001_idpo_declr_4iters_iter_{k}" for k in range(1, 5)],
    ),
    "ShenaoZhang idpo": (r"iter_(\d+)", [f"ShenaoZhang/0.001_idpo_iter_{k}" for k in (1, 2, 3)]),
    "ShenaoZhang idpo noreplacerej": (
        r"iter_(\d+)",
        [f"ShenaoZhang/0.001_idpo_noreplacerej_iter_{k}" for k in (2, 3)],
    ),
    "rwitz truthy iters": (
        r"iter-(\d+)",
        [f"rwitz/experiment26-truthy-iter-{k}" for k in range(3)],
    ),
    "Korabbit afr flan-v2 steps": (
        r"afr-(\d+)step",
        [f"Korabbit/Llama-2-7b-chat-hf-afr-{k}step-flan-v2" for k in (100, 200, 300, 441)],
    ),
    "Mistral-7B-Merge-14 ft steps": (
        r"step-(\d+)",
        [f"EmbeddedLLM/Mistral-7B-Merge-14-v0.3-ft-step-{k}" for k in (9984, 15936)],
    ),
    "zephyr-7b PPO steps": (
        r"step_(\d+)",
        [f"ewqr2130/alignment-handbook-zephyr-7b_ppo_5e7step_{k}" for k in (51, 102)],
    ),
    "pythia-12b sft-v8 steps": (
        r"v8-([\d.]+k)-steps",
        [f"OpenAssistant/pythia-12b-sft-v8-{k}-steps" for k in ("2.5k", "7k")],
    ),
}
"""Series name -> (step regex, checkpoint model ids). Checkpoints without answers in a
benchmark's matrix (held back from this copy of the data) are skipped there."""

MAIN_SERIES = ("TinyLlama-1.1B pretraining", "GPT-2-Large steps", "zephyr-7b SPIN", "openchat SPIN")


# ---------------------------------------------------------------------------- building
def series_models() -> set[str]:
    return {model for _, models in SERIES.values() for model in models}


def build_left_out(data: Path, benchmark: str, recipe: dict[str, Any], seed: int):
    """The benchmark's bundle built without any series model, and the series' answers."""
    matrix, truth, _ = load_openllm(data / "openllm_v1", benchmark)
    held = series_models()
    keep = [m for m in matrix.model_ids if m not in held]
    source = matrix.select_models(keep)
    position = {m: k for k, m in enumerate(matrix.model_ids)}
    source_truth = truth[[position[m] for m in keep]]
    bundle = build_bundle(
        source,
        source_truth,
        name=f"curves-{benchmark}",
        benchmark=benchmark,
        method=recipe["method"],
        budget=int(recipe["budget"]),
        seed=seed,
        estimators=[recipe["estimator"]],
        default_estimator=recipe["estimator"],
    )
    answers = {
        m: matrix.values[position[m], matrix.item_positions(bundle.item_ids)]
        for m in held
        if m in position
    }
    truths = {m: float(truth[position[m]]) for m in held if m in position}
    return bundle, answers, truths, source.n_models


# ---------------------------------------------------------------------------- measuring
def comparison_rules(curve: BenchmarkCurve) -> dict[str, list[int]]:
    """Per rule, the direction each step is called (+1, -1, 0 = noise)."""
    rules = {f"flip {q}": [t.direction for t in tests] for q, tests in curve.steps.items()}
    points = curve.points
    overlap, ability_z = [], []
    for a, b in itertools.pairwise(points):
        ea, eb = a.estimate, b.estimate
        if ea is None or eb is None:
            overlap.append(0)
        else:
            apart = eb.lower > ea.upper or ea.lower > eb.upper
            overlap.append(int(np.sign(eb.value - ea.value)) if apart else 0)
        se = math.hypot(a.ability_se, b.ability_se)
        z = (b.ability - a.ability) / se if se > 0 else math.nan
        ability_z.append(int(np.sign(z)) if math.isfinite(z) and abs(z) > Z_90 else 0)
    rules["intervals apart (estimate)"] = overlap
    rules["independent z (ability)"] = ability_z
    return rules


def sign_record(curve: BenchmarkCurve) -> dict[str, dict[str, int]]:
    truth = curve.values("truth")
    true_sign = np.sign(np.diff(truth))
    out = {}
    for rule, calls in comparison_rules(curve).items():
        calls = np.array(calls)
        called = calls != 0
        out[rule] = {
            "steps": int(calls.size),
            "significant": int(called.sum()),
            "wrong_sign": int(np.sum(called & (calls != true_sign))),
        }
    return out


def trace_series(
    bundle: Bundle,
    name: str,
    answers: dict[str, np.ndarray],
    truths: dict[str, float],
    permutations: int,
) -> BenchmarkCurve | None:
    regex, models = SERIES[name]
    pattern = compile_step_regex(regex)
    present = [m for m in models if m in answers]
    if len(present) < 2:
        return None
    steps = [step_from_text(m, pattern) for m in present]
    order = np.argsort(steps)
    present = [present[k] for k in order]
    options = TraceOptions(level=LEVEL, permutations=permutations)
    return trace_benchmark(
        bundle,
        present,
        present,
        [steps[k] for k in order],
        np.array([answers[m] for m in present]),
        options,
        truth=[truths[m] for m in present],
    )


def curve_record(name: str, curve: BenchmarkCurve) -> dict[str, Any]:
    stats = {q: s.to_dict() for q, s in curve.stats.items()}
    return {
        "series": name,
        "benchmark": curve.benchmark,
        "checkpoints": [p.model for p in curve.points],
        "steps": [p.step for p in curve.points],
        "spearman": curve.rank_agreement(),
        "statistics": stats,
        "signs": sign_record(curve),
        "curve": curve.to_dict(),
    }


def null_pairs(
    bundle: Bundle, answers: dict[str, np.ndarray], permutations: int, seed: int, draws: int
) -> dict[str, dict[str, int]]:
    """Same-model pairs: two answer vectors drawn from the IRT model at each series
    checkpoint's own ability; every change a rule calls is a false call."""
    rng = np.random.default_rng(seed)
    ids = list(bundle.item_ids)
    models = sorted(answers)
    theta = estimate_abilities(bundle.irt, np.array([answers[m] for m in models]), ids)[0]
    probability = bundle.irt.subset(ids).probability(theta)
    functions, _, _ = score_functions(bundle, TraceOptions(level=LEVEL).filled())
    called = {q: 0 for q in functions}
    total = 0
    for k in range(len(models)):
        for _ in range(draws):
            pair = (rng.random((2, len(ids))) < probability[k]).astype(np.float64)
            for quantity, function in functions.items():
                test = paired_flip_test(
                    function, pair[0], pair[1], level=LEVEL, permutations=permutations, seed=total
                )
                called[quantity] += int(test.significant)
            total += 1
    return {q: {"pairs": total, "called": n} for q, n in called.items()}


# ---------------------------------------------------------------------------- report
def _fmt(value: Any, digits: int = 2, scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{scale * value:.{digits}f}"


def markdown(records: list[dict[str, Any]], nulls: dict[str, Any], config: dict[str, Any]) -> str:
    lines = [
        "# Training curves on real checkpoint series",
        "",
        f"Generated by `{config['command']}` ({config['finished']}, {config['seconds']:.0f} s).",
        "",
        "Per benchmark, all series models are left out of the source models; the shipped "
        "recipe (`bench/defaults.json`) builds the bundle on the rest (seed 0), and each "
        "checkpoint's recorded leaderboard answers are replayed on the subset items and "
        "traced by `lmeval_microbench.curve` (the code of `microbench curve`). Truth = the "
        "full-benchmark score. Checkpoints whose answers are held back from this copy of the "
        "data are missing from a benchmark's series.",
        "",
        "## Rank agreement and noise (series of 3+ checkpoints)",
        "",
        "Spearman = rank correlation over steps with the true full-score curve. TV = total "
        "variation (points; ability in logits); down = share of steps going down; resid = "
        "residual SD around the best monotone (isotonic) fit (points).",
        "",
        "| series | benchmark | n | Spearman raw | Spearman ability | Spearman estimate | "
        "TV raw | TV estimate | TV truth | down raw | down est. | down truth | resid raw | "
        "resid est. | resid truth |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if len(r["steps"]) < 3:
            continue
        rho, st = r["spearman"], r["statistics"]
        lines.append(
            f"| {r['series']} | {r['benchmark']} | {len(r['steps'])} | {_fmt(rho['raw'])} | "
            f"{_fmt(rho.get('ability'))} | {_fmt(rho['estimate'])} | "
            f"{_fmt(st['raw']['total_variation'], 1, 100)} | "
            f"{_fmt(st['estimate']['total_variation'], 1, 100)} | "
            f"{_fmt(st['truth']['total_variation'], 1, 100)} | "
            f"{_fmt(st['raw']['share_down'])} | {_fmt(st['estimate']['share_down'])} | "
            f"{_fmt(st['truth']['share_down'])} | {_fmt(st['raw']['residual_sd'], 1, 100)} | "
            f"{_fmt(st['estimate']['residual_sd'], 1, 100)} | "
            f"{_fmt(st['truth']['residual_sd'], 1, 100)} |"
        )
    lines += ["", *targets(records), "", *sign_table(records), "", *null_table(nulls), ""]
    lines += [f"![{p}]({p})" for p in config["plots"]]
    return "\n".join(lines) + "\n"


def _rho(record: dict[str, Any], quantity: str) -> float:
    """Spearman with the truth; an undefined one (a constant series: no order) counts 0."""
    value = record["spearman"].get(quantity)
    return 0.0 if value is None or not math.isfinite(value) else float(value)


def _tv_gap(record: dict[str, Any], quantity: str) -> float:
    stats = record["statistics"]
    return abs(stats[quantity]["total_variation"] - stats["truth"]["total_variation"])


def _missed(records: list[dict[str, Any]], kept: list[dict[str, Any]]) -> str:
    missed = [f"{r['series']} / {r['benchmark']}" for r in records if r not in kept]
    return "" if not missed else " (missed on: " + ", ".join(missed) + ")"


def targets(records: list[dict[str, Any]]) -> list[str]:
    long = [r for r in records if len(r["steps"]) >= 3]
    rank_ok = [r for r in long if _rho(r, "estimate") >= _rho(r, "raw") - 1e-12]
    tv_ok = [r for r in long if _tv_gap(r, "estimate") <= _tv_gap(r, "raw") + 1e-12]
    wrong = sum(r["signs"]["flip estimate"]["wrong_sign"] for r in records)
    called = sum(r["signs"]["flip estimate"]["significant"] for r in records)
    return [
        "## Targets",
        "",
        f"- Spearman(estimate) >= Spearman(raw) (an undefined Spearman, constant series, "
        f"counts 0): {len(rank_ok)} of {len(long)} curves of 3+ checkpoints"
        + _missed(long, rank_ok),
        "- total variation of the estimate closer to the truth's than the raw score's: "
        f"{len(tv_ok)} of {len(long)}" + _missed(long, tv_ok),
        f"- changes of the estimate marked significant (paired sign-flip test): {called}, of "
        f"them with the wrong sign against the truth: {wrong}",
    ]


def sign_table(records: list[dict[str, Any]]) -> list[str]:
    rules = list(records[0]["signs"]) if records else []
    lines = [
        "## Significant steps and their sign (all series, 2+ checkpoints)",
        "",
        "A step is the change between consecutive checkpoints of a series on one benchmark. "
        "`flip`: the paired sign-flip test on the items (ours, level 90 %); `intervals apart`: "
        "the two 90 % intervals of the estimate do not overlap; `independent z`: the IRT "
        "abilities' difference over the root sum of their squared SEs beyond 1.645.",
        "",
        "| rule | steps | called significant | wrong sign | wrong-sign rate |",
        "|---|---|---|---|---|",
    ]
    for rule in rules:
        steps = sum(r["signs"][rule]["steps"] for r in records)
        called = sum(r["signs"][rule]["significant"] for r in records)
        wrong = sum(r["signs"][rule]["wrong_sign"] for r in records)
        rate = _fmt(wrong / called) if called else "–"
        lines.append(f"| {rule} | {steps} | {called} | {wrong} | {rate} |")
    return lines


def null_table(nulls: dict[str, Any]) -> list[str]:
    lines = [
        "## Null pairs: a checkpoint against itself",
        "",
        "Two answer vectors drawn from each bundle's IRT model at a series checkpoint's "
        "ability: the model did not change, so every significant call is false (nominal "
        "rate 10 %).",
        "",
        "| benchmark | pairs | raw called | ability called | estimate called |",
        "|---|---|---|---|---|",
    ]
    for benchmark, found in nulls.items():
        pairs = found["raw"]["pairs"]
        cells = [
            f"{found[q]['called'] / pairs:.3f}" if q in found else "–"
            for q in ("raw", "ability", "estimate")
        ]
        lines.append(f"| {benchmark} | {pairs} | " + " | ".join(cells) + " |")
    return lines


# ---------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=Path("../shared/data"))
    parser.add_argument("--defaults", type=Path, default=Path("bench/defaults.json"))
    parser.add_argument("--out", type=Path, default=Path("bench"))
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--permutations", type=int, default=999)
    parser.add_argument("--null-draws", type=int, default=20, help="null pairs per checkpoint")
    return parser.parse_args(argv)


def plot_names(records: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """A few figures: the main series' longest curve each."""
    chosen = {}
    for name in MAIN_SERIES:
        found = [r for r in records if r["series"] == name]
        if found:
            best = max(found, key=lambda r: len(r["steps"]))
            slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
            chosen[(name, best["benchmark"])] = f"curves_{slug}_{best['benchmark']}.png"
    return chosen


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    defaults = json.loads(args.defaults.read_text())["benchmarks"]
    started = time.perf_counter()
    records, curves, nulls, sources = [], {}, {}, {}
    for benchmark in tqdm(args.benchmarks.split(","), desc="benchmarks"):
        bundle, answers, truths, n_source = build_left_out(
            args.shared, benchmark, defaults[benchmark], args.seed
        )
        sources[benchmark] = n_source
        for name in SERIES:
            curve = trace_series(bundle, name, answers, truths, args.permutations)
            if curve is not None:
                records.append(curve_record(name, curve))
                curves[(name, benchmark)] = curve
        nulls[benchmark] = null_pairs(
            bundle, answers, args.permutations, args.seed, args.null_draws
        )
    plots = plot_names(records)
    args.out.mkdir(parents=True, exist_ok=True)
    for (name, benchmark), file in plots.items():
        with atomic_path(args.out / file) as tmp:
            tmp.write_bytes(curve_png(curves[(name, benchmark)], title=f"{name}: {benchmark}"))
    config = {
        "command": " ".join(["python tools/bench_curves.py", *(argv or sys.argv[1:])]),
        "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": time.perf_counter() - started,
        "level": LEVEL,
        "permutations": args.permutations,
        "source_models": sources,
        "plots": list(plots.values()),
    }
    write_json_atomic(
        args.out / "curves.json", {"config": config, "records": records, "null_pairs": nulls}
    )
    text = markdown(records, nulls, config)
    write_text_if_changed(args.out / "curves.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
