"""Build the shipped Open LLM Leaderboard v1 micro-benchmark tasks from metabench data.

For each benchmark of the leaderboard (arc, hellaswag, mmlu, truthfulqa, winogrande, gsm8k):

1. turn every matrix item of ``items/{bm}-secondary.parquet`` into the document the shipped
   task runs on: the full prompt exactly as the leaderboard rendered it (few-shot examples
   included), the continuations scored, the gold index, and the original fields;
2. check each prompt against ``prompts/items-{bm}-B.csv`` (the leaderboard's rendering) and
   its structure (number of shots, question at the end); any difference stops the build;
3. select items of ``responses/{bm}_B.parquet``, fit IRT and the estimators on the source
   models against their true full-benchmark score (``scores/{bm}_B_scores.csv``
   ``full_score_metabench``; hellaswag: the ``hellaswag`` column of
   ``open-llm-leaderboard.csv``, joined on model name), and write the bundle. Method, budget
   and regression of each benchmark are the ones ``tools/bench_reliability.py`` chose
   (``bench/defaults.json``); every bundle's default estimator is ``guarded`` (that
   regression's items read with ``kridge`` inside the sources and an outside reading below
   them), whose held-out error ``tools/bench_shipped_guard.py`` measured for exactly this
   recipe (``bench/shipped_guard.json``) goes into the bundle's reliability. The regression
   stays stored beside it. ``--method``, ``--budget`` and ``--estimator`` override them;
4. write ``microbench_{bm}.yaml``, the data folder (``bundle.json`` + ``items.jsonl``), the
   hooks shim, the ``microbench_openllm`` group, a README and the data licence notice.

Rerunning with the same arguments rewrites nothing (bundles keep their creation time). A
build into a new folder stamps bundles with the current time, or with ``SOURCE_DATE_EPOCH``
when it is set: two such builds are byte for byte the same. ``--reseal`` rewrites the
bundles and ``joint.json`` of ``--out`` in the current file format (schema version,
checksums) without refitting anything: every number and creation time stays.
``--person-fit`` adds (or refreshes) each bundle's ``person_fit`` block from the data without
refitting anything else: the same block a full build writes (l_z* threshold at the 4 %
quantile of the source models, alpha 0.01, chance 1 / number of choices per item, gsm8k the
weakest source models' item rates; see :func:`item_chance`).

    python tools/build_openllm_v1.py                      # all six, bench/defaults.json
    python tools/build_openllm_v1.py --budget 40,mmlu=60  # 40 items each, mmlu 60
    python tools/build_openllm_v1.py --benchmarks arc --method anchor_points --out /tmp/suite
    python tools/build_openllm_v1.py --reseal             # after a change of the file format
    python tools/build_openllm_v1.py --person-fit         # add the person-fit blocks only
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from openllm_v1_benchmarks import BENCHMARKS, Benchmark, build_docs

from lmeval_microbench._io import SEAL_KEY, seal_holds, seal_json, write_text_if_changed
from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import (
    Bundle,
    MetricSpec,
    load_bundle,
    save_bundle,
)
from lmeval_microbench.collect import content_hash
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import DEFAULT_ESTIMATOR, ESTIMATORS
from lmeval_microbench.estimators.joint import JointEstimator
from lmeval_microbench.harness import (
    EstimateOptions,
    GroupSpec,
    write_group,
    write_task,
)
from lmeval_microbench.personfit import build_spec
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import JOINT_FILE
from lmeval_microbench.truth import align_target, read_scores

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "openllm_v1"
DEFAULT_OUT = REPO / "lmeval_microbench" / "task_configs" / "openllm_v1"

DEFAULT_CHOICES = REPO / "bench" / "defaults.json"
"""Method, estimator and budget per benchmark, as tools/bench_reliability.py chose them."""

FALLBACK_ESTIMATOR = DEFAULT_ESTIMATOR
"""Stored beside each default: the IRT-based alternative (``microbench_estimator``)."""
SHIPPED_ESTIMATOR = "guarded"
"""Every bundle's default: the recipe's regression was biased by 5-11 points on the weakest
fifth of the leaderboard with intervals holding for 0.16-0.38 of those models, where
``guarded`` holds for 0.41-0.97 at the same error inside the sources and above them
(``bench/shipped_guard.md``)."""
GUARD_REPORT = "shipped_guard.json"
"""The held-out errors of ``guarded`` per recipe, beside ``defaults.json``."""

SEED = 0

LICENSE = "cc-by-nc-sa-4.0"


# ---------------------------------------------------------------------------- bundles
def read_truth(bm: Benchmark, data: Path) -> pd.Series:
    """True full-benchmark score per model (fractions)."""
    if bm.name == "hellaswag":
        return read_scores(data / "open-llm-leaderboard.csv", "hellaswag", model_column="name")
    return read_scores(data / "scores" / f"{bm.name}_B_scores.csv", "full_score_metabench")


def source_matrix(bm: Benchmark, data: Path, docs: Mapping[str, dict]) -> ResponseMatrix:
    """The response matrix with each item's content hash (the hash of its document)."""
    matrix = ResponseMatrix.read(data / "responses" / f"{bm.name}_B.parquet")
    missing = [item for item in matrix.item_ids if item not in docs]
    if missing:
        raise InputError(f"{bm.name}: matrix items without a document: {missing[:5]}")
    return matrix.with_content_hashes([content_hash(docs[item]) for item in matrix.item_ids])


@dataclass(frozen=True)
class Recipe:
    """How one benchmark's subset is chosen and estimated, and what that measured held out."""

    method: str
    budget: int
    estimator: str
    """The bundle's default estimator."""
    regression: str
    """The regression ``tools/bench_reliability.py`` chose, stored beside the default."""
    held_out: dict[str, Any]
    """tools/bench_shipped_guard.py's errors of exactly this recipe; empty when overridden."""

    @property
    def estimators(self) -> list[str]:
        return list(dict.fromkeys([self.estimator, self.regression, FALLBACK_ESTIMATOR]))


HELD_OUT_FIELDS = ("mae", "max_error", "bias", "kendall_tau", "coverage90", "width90")


def read_recipes(path: Path, names: list[str]) -> dict[str, Recipe]:
    """The chosen recipe of each benchmark, with its held-out errors from the benchmark report.

    ``path`` is ``bench/defaults.json``; the errors of the recipe read with
    :data:`SHIPPED_ESTIMATOR` are read from the :data:`GUARD_REPORT` beside it.
    """
    try:
        chosen = json.loads(path.read_text())["benchmarks"]
        report = json.loads((path.parent / GUARD_REPORT).read_text())
        measured, repeats = report["results"], report["info"]["repeats"]
    except (OSError, ValueError, KeyError) as error:
        raise InputError(f"{path}: cannot read the benchmark's chosen defaults: {error}") from None
    recipes = {}
    for name in names:
        if name not in chosen:
            raise InputError(f"{path}: no default recipe for benchmark {name!r}")
        pick = chosen[name]
        recipes[name] = Recipe(
            pick["method"],
            int(pick["budget"]),
            SHIPPED_ESTIMATOR,
            pick["estimator"],
            held_out_errors(measured.get(name), pick, repeats),
        )
    return recipes


def held_out_errors(
    measured: Mapping[str, Any] | None, pick: Mapping[str, Any], repeats: Mapping[str, int]
) -> dict[str, Any]:
    """Per protocol, the errors of the shipped estimator on ``pick``'s recipe (empty when the
    report measured another recipe or none)."""
    keys = ("method", "budget", "estimator")
    if measured is None or any(measured["recipe"].get(k) != pick[k] for k in keys):
        return {}
    return {
        protocol: {key: per["mean"][SHIPPED_ESTIMATOR][key] for key in HELD_OUT_FIELDS}
        | {"repeats": repeats["random" if protocol == "random" else "fixed"]}
        for protocol, per in measured.items()
        if isinstance(per, Mapping) and "mean" in per
    }


def override_recipes(recipes: dict[str, Recipe], args: argparse.Namespace) -> dict[str, Recipe]:
    """Command-line choices replace the benchmark's; a changed recipe has no measured error."""
    budgets = parse_budgets(args.budget, {name: r.budget for name, r in recipes.items()})
    changed = {}
    for name, recipe in recipes.items():
        new = replace(
            recipe,
            method=args.method or recipe.method,
            budget=budgets[name],
            estimator=args.estimator or recipe.estimator,
        )
        changed[name] = new if new == recipe else replace(new, held_out={})
    return changed


def item_chance(bm: Benchmark, docs: Mapping[str, dict]) -> dict[str, float] | None:
    """Chance of a right answer by guessing, per matrix item: 1 / number of choices (options,
    or winogrande's contexts); None for gsm8k, which has no choices (``build_bundle`` then
    uses the item rates of the weakest 5 % of source models). The bundle's chance score is
    the mean over these items (metabench's items of the benchmark, not all of it)."""
    if bm.spec.output_type == "generate_until":
        return None
    return {item: 1.0 / len(doc.get("contexts") or doc["options"]) for item, doc in docs.items()}


def make_bundle(
    bm: Benchmark,
    source: ResponseMatrix,
    target: np.ndarray,
    recipe: Recipe,
    name: str,
    chance: Mapping[str, float] | None,
) -> Bundle:
    bundle = build_bundle(
        source,
        target,
        name=name,
        benchmark=bm.name,
        method=recipe.method,
        budget=recipe.budget,
        seed=SEED,
        estimators=recipe.estimators,
        default_estimator=recipe.estimator,
        metric=MetricSpec(name=bm.spec.estimated_metric),
        dataset=bm.dataset,
        license=LICENSE,
        chance=chance,
    )
    reliability = dict(bundle.reliability)
    if recipe.held_out:
        reliability["held_out"] = {
            "estimator": recipe.estimator,
            "by_protocol": recipe.held_out,
            "units": "score points (percent of the full benchmark); coverage of the 90% interval",
            "source": "bench/shipped_guard.json (tools/bench_shipped_guard.py): 'random' = "
            "80/20 random model splits, 'extrapolation' = the best 20% of models as targets, "
            "'weak' = the weakest 20%",
        }
    description = (
        f"{recipe.budget} of the {bm.n_items} items of {bm.summary}, as the Open LLM "
        "Leaderboard v1 ran them; selected from metabench's informative items of the benchmark "
        f"({source.n_items}) on {source.n_models} leaderboard models with {recipe.method!r}, "
        f"estimated with {recipe.estimator!r} ({recipe.regression!r} stored beside it)."
    )
    return replace(bundle, description=description, reliability=reliability)


def write_joint(
    out: Path, sources: Mapping[str, tuple[ResponseMatrix, np.ndarray]], bundles: list[Bundle]
) -> JointEstimator:
    """Fit the joint estimator on the shipped subsets and write it beside the data folders.

    ``microbench reconstruct`` finds it there and adds the joint average (one estimate from
    all of a model's subset answers) for models that ran all six tasks in full.
    """
    subsets = {bundle.benchmark: bundle.subset for bundle in bundles}
    joint = JointEstimator(random_state=SEED).fit(
        {name: source for name, (source, _) in sources.items()},
        subsets,
        {name: target for name, (_, target) in sources.items()},
    )
    write_joint_state(out / JOINT_FILE, joint.state_dict())
    return joint


def write_joint_state(path: Path, state: Mapping[str, Any]) -> None:
    """``joint.json``: the state with its checksum (an edited number fails when it is read)."""
    write_text_if_changed(path, json.dumps(seal_json(state), separators=(",", ":")) + "\n")


def reseal(out: Path, names: list[str]) -> None:
    """Rewrite the suite's bundles and joint state in the current file format, refitting nothing.

    Each file is read with every check first (checksums included), so resealing cannot bless
    an edited file; only the schema version and the checksums change.
    """
    for name in names:
        folder = out / BENCHMARKS[name].spec.data_dir
        save_bundle(load_bundle(folder), folder, overwrite=True)
    path = out / JOINT_FILE
    if not path.is_file():
        return
    state = json.loads(path.read_text(encoding="utf-8"))
    if seal_holds(state) is False:
        raise InputError(f"{path}: checksum mismatch; rebuild the suite instead of resealing it")
    state.pop(SEAL_KEY, None)
    JointEstimator.from_state(state)  # still a valid state
    write_joint_state(path, state)


def add_person_fit(out: Path, data: Path, names: list[str]) -> None:
    """Add or refresh the ``person_fit`` block of the suite's bundles, refitting nothing else.

    The source matrix must be the one the bundle was built from (its fingerprint); the block
    is computed from it exactly as a full build computes it (the l_z* threshold from IRT fits
    without each source, :func:`lmeval_microbench.personfit.build_spec`).
    """
    for name in names:
        bm = BENCHMARKS[name]
        folder = out / bm.spec.data_dir
        bundle = load_bundle(folder)
        docs, _ = build_docs(bm, data, bundle.name)
        source, target = align_target(source_matrix(bm, data, docs), read_truth(bm, data))
        if source.fingerprint() != bundle.provenance.source_sha256:
            raise InputError(
                f"{folder}: bundle {bundle.name!r} was built from another source matrix than "
                f"{data}; rebuild it instead"
            )
        ids = list(bundle.item_ids)
        spec = build_spec(source, ids, target, item_chance(bm, docs), seed=SEED)
        save_bundle(replace(bundle, person_fit=spec), folder, overwrite=True)
        print(
            f"{name:<11} l_z* threshold {spec.lz_threshold:.2f}, chance score "
            f"{spec.chance_score:.3f} ({spec.chance_rule})"
        )


def bundle_name(bm: Benchmark, recipe: Recipe) -> str:
    return f"openllm-v1-{bm.name}-{recipe.budget}-{recipe.method}"


# ---------------------------------------------------------------------------- suite files
README = """\
# Open LLM Leaderboard v1 micro-benchmarks

Generated by `tools/build_openllm_v1.py`; do not edit by hand. Each task runs a small subset
of one benchmark of the Open LLM Leaderboard v1 with the leaderboard's prompts and scoring,
and reports, next to the subset score, the estimated score on the whole benchmark
(`estimate`) and its {level:.0%} interval (`estimate_lower`, `estimate_upper`).

    TASKS=$(python -c "import lmeval_microbench.harness as h; print(h.include_path())")
    lm-eval run --model hf --model_args pretrained=MODEL --include_path "$TASKS" \\
        --tasks microbench_openllm --log_samples --output_path out/

{header}
{rows}

The held-out errors are those `tools/bench_shipped_guard.py` measured for exactly this recipe
(`bench/shipped_guard.md`): models split 80/20 at random, the best 20 % of models estimated
from the others (extrapolation: expect the larger error for a model better than all source
models), and the weakest 20 % (near-random models; often the largest). The default estimator
`guarded` reads the items with `kridge` inside the leaderboard's range and widens the interval
beyond it; the regression `tools/bench_reliability.py` chose is stored beside it
(`--metadata '{{"microbench_estimator": "kridge"}}'`).

* Every document holds the full prompt, few-shot examples included, exactly as the
  leaderboard rendered it (checked against the leaderboard's prompts when built), so the
  tasks set `num_fewshot: 0`, which lm-eval never overrides: `--num_fewshot` is ignored.
* The group's `estimate` is the unweighted mean of the six estimates. After the run,
  `microbench reconstruct OUT/` also prints the *joint* average (`joint.json`: a ridge
  regression on all six subsets' answers and estimates, fitted on the {n_joint} leaderboard
  models that have all six; cross-validated MAE on them, in points: {joint_mae}).
* The items load from `*/items.jsonl` beside each `bundle.json`: no download, and a changed
  document fails its content hash.
* `--limit` leaves items unscored: the estimate is then NaN with a warning, unless
  `--metadata '{{"microbench_allow_missing": true}}'` imputes them from the bundle's IRT fit,
  with an interval widened for them (error and coverage by items kept: `bench/missing.md`).
  `microbench_estimator` and `microbench_level` pick another stored estimator and level.
* The estimates target the micro-averaged benchmark score: for mmlu the mean over items (the
  leaderboard averaged subjects), for truthfulqa mc1 (the leaderboard showed mc2).
* Prompts and continuations are the leaderboard's; the tokenisation of context and
  continuation follows the lm-eval you run, which may differ slightly from the 2023 harness.

See NOTICE.md for the licence of the items.
"""

NOTICE = """\
# Notice: licence of the item data

The documents (`*/items.jsonl`) and the item ids and parameters in `*/bundle.json` are derived
from metabench (Kipnis et al., github.com/adkipnis/metabench), which is licensed under
CC BY-NC-SA 4.0 (https://creativecommons.org/licenses/by-nc-sa/4.0/): these derived files are
shared under the same licence (non-commercial, share-alike, with attribution).

The questions themselves come from ARC (CC BY-SA 4.0), HellaSwag (MIT), MMLU (MIT),
TruthfulQA (Apache-2.0), WinoGrande (CC-BY) and GSM8K (MIT); the few-shot prompts are those
of the Open LLM Leaderboard v1 (lm-evaluation-harness, MIT). The code of lmeval-microbench is
MIT-licensed; this notice covers the data files of this folder only.
"""


TABLE_HEADER = (
    "| task | items | benchmark | selection | estimator "
    "| held-out MAE (random / top 20 % / bottom 20 %) | 90 % coverage | bundle |\n"
    "|---|---|---|---|---|---|---|---|"
)


def held_out_summary(bundle: Bundle, key: str = "mae") -> str:
    by_protocol = bundle.reliability.get("held_out", {}).get("by_protocol", {})
    found = [by_protocol.get(p, {}).get(key) for p in ("random", "extrapolation", "weak")]
    return " / ".join("not measured" if v is None else f"{v:.2f}" for v in found)


def write_readme(
    out: Path, built: list[tuple[Benchmark, Bundle]], joint: JointEstimator, level: float
) -> None:
    rows = "\n".join(
        f"| `{bm.spec.task}` | {bundle.budget} | {bm.summary} | {bundle.method} | "
        f"{bundle.default_estimator} | {held_out_summary(bundle)} | "
        f"{held_out_summary(bundle, 'coverage90')} | `{bundle.name}` |"
        for bm, bundle in built
    )
    joint_mae = ", ".join(
        f"{output} {100 * joint.cv_mae_[output]:.2f}" for output in joint.outputs_
    )
    text = README.format(
        level=level,
        rows=rows,
        n_joint=joint.n_source_,
        joint_mae=joint_mae,
        header=TABLE_HEADER,
    )
    write_text_if_changed(out / "README.md", text)
    write_text_if_changed(out / "NOTICE.md", NOTICE)


# ---------------------------------------------------------------------------- main
def parse_budgets(text: str | None, defaults: Mapping[str, int]) -> dict[str, int]:
    """``"40"``, ``"mmlu=60"`` or ``"40,mmlu=60"`` over ``defaults`` -> budget per benchmark."""
    everywhere: int | None = None
    per: dict[str, int] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, _, value = part.rpartition("=")
        try:
            number = int(value)
        except ValueError:
            raise InputError(f"--budget: {part!r} is not N or BENCHMARK=N") from None
        if number < 1:
            raise InputError(f"--budget: {part!r} must be positive")
        if not key:
            everywhere = number
        elif key not in BENCHMARKS:
            raise InputError(f"--budget: unknown benchmark {key!r} (known: {list(BENCHMARKS)})")
        else:
            per[key] = number
    return {
        name: per.get(name, default if everywhere is None else everywhere)
        for name, default in defaults.items()
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="openllm_v1 data folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="suite folder to write")
    parser.add_argument(
        "--defaults",
        type=Path,
        default=DEFAULT_CHOICES,
        help="chosen recipe per benchmark (default: bench/defaults.json)",
    )
    parser.add_argument("--method", help="selection method for every benchmark")
    parser.add_argument("--budget", help="items per benchmark: N and/or BM=N, comma-separated")
    parser.add_argument("--estimator", help="default estimator of every bundle")
    parser.add_argument(
        "--benchmarks", default=",".join(BENCHMARKS), help="comma-separated benchmarks to build"
    )
    parser.add_argument(
        "--reseal",
        action="store_true",
        help="only rewrite the files of --out in the current format (no data, no refitting)",
    )
    parser.add_argument(
        "--person-fit",
        action="store_true",
        help="only add the person-fit block to the bundles of --out (from the data, no refitting)",
    )
    args = parser.parse_args(argv)
    args.names = [name.strip() for name in args.benchmarks.split(",") if name.strip()]
    unknown = [name for name in args.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmarks {unknown} (known: {list(BENCHMARKS)})")
    if args.estimator is not None and args.estimator not in ESTIMATORS:
        parser.error(f"unknown --estimator {args.estimator!r} (known: {list(ESTIMATORS)})")
    if not args.reseal and not (args.data / "responses").is_dir():
        parser.error(f"{args.data}: not the openllm_v1 data folder (no responses/)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.reseal:
        reseal(args.out, args.names)
        print(f"resealed {args.out}")
        return 0
    if args.person_fit:
        add_person_fit(args.out, args.data, args.names)
        return 0
    recipes = override_recipes(read_recipes(args.defaults, args.names), args)
    built: list[tuple[Benchmark, Bundle]] = []
    sources: dict[str, tuple[ResponseMatrix, np.ndarray]] = {}
    print(
        f"{'benchmark':<11} {'recipe':<28} {'prompts equal':>14} {'cv MAE':>7} "
        f"{'held-out MAE':>12} {'seconds':>7}"
    )
    for name in args.names:
        started = time.perf_counter()
        bm, recipe = BENCHMARKS[name], recipes[name]
        label = bundle_name(bm, recipe)
        docs, equal = build_docs(bm, args.data, label)
        source, target = align_target(source_matrix(bm, args.data, docs), read_truth(bm, args.data))
        sources[name] = (source, target)
        bundle = make_bundle(bm, source, target, recipe, label, item_chance(bm, docs))
        write_task(args.out, bm.spec, bundle, [docs[item] for item in bundle.item_ids])
        built.append((bm, bundle))
        cv_mae = bundle.reliability["cv_mae_source"][bundle.default_estimator]
        held_out = recipe.held_out.get("random", {}).get("mae")
        print(
            f"{name:<11} {f'{recipe.method} {recipe.budget} {recipe.estimator}':<28} "
            f"{f'{equal}/{len(docs)}':>14} {100 * cv_mae:>6.2f}% "
            f"{'-' if held_out is None else f'{held_out:.2f}':>12} "
            f"{time.perf_counter() - started:>7.1f}"
        )
    if len(built) == len(BENCHMARKS):
        write_group(
            args.out,
            GroupSpec(
                group="microbench_openllm",
                tasks=tuple(bm.spec.task for bm, _ in built),
                comment="The six Open LLM Leaderboard v1 micro-benchmarks; generated by "
                "tools/build_openllm_v1.py, do not edit.",
            ),
        )
        joint = write_joint(args.out, sources, [bundle for _, bundle in built])
        write_readme(args.out, built, joint, EstimateOptions().level)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
