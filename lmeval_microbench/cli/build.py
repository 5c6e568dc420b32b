"""``microbench build``: select a subset of a response matrix; write a bundle or an lm-eval task.

Without ``--task`` the result is a bundle folder (``bundle.json``). With ``--task`` (a task
lm-eval knows, or the path of its YAML) it is a task folder for ``--include_path``: the micro
task's YAML, the hooks shim, and a data folder with the bundle and the selected documents,
each holding the exact prompt a full run of the original task sends (few-shot included).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ._options import add_seed, positive_int, print_json, split_list

if TYPE_CHECKING:
    import numpy as np

    from ..bundle import Bundle, DatasetCoordinates
    from ..responses import ResponseMatrix


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "build",
        help="select items from a response matrix; write a bundle or a micro lm-eval task",
        description=(
            "Select BUDGET items with METHOD from the source models of MATRIX, fit IRT and the "
            "score estimators on them, and write a bundle folder (bundle.json); with --task, "
            "a working lm-eval task folder running the selected items of that task."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  microbench build mmlu_B.parquet --method anchor_points --budget 50 \\\n"
            "      --scores mmlu_B_scores.csv --score-column full_score_metabench \\\n"
            "      --benchmark mmlu --out bundles/mmlu-50\n"
            "  microbench build arc_easy.parquet --task arc_easy --metric acc_norm \\\n"
            "      --method greedy --budget 50 --out my_tasks/\n"
            "  lm-eval run --model hf --model_args pretrained=MODEL --include_path my_tasks/ \\\n"
            "      --tasks micro_arc_easy --log_samples --output_path out/"
        ),
    )
    parser.add_argument("matrix", help="response matrix of the source models (.parquet or .csv)")
    parser.add_argument(
        "--method", default="anchor_points", help="selection method (default: anchor_points)"
    )
    parser.add_argument(
        "--budget", type=positive_int, required=True, help="number of items to keep"
    )
    parser.add_argument(
        "--scores", help="CSV/parquet of true full-benchmark scores (default: matrix row means)"
    )
    parser.add_argument(
        "--score-column", default="score", help="column of --scores holding the score"
    )
    parser.add_argument(
        "--score-scale",
        choices=("auto", "fraction", "percent"),
        default="auto",
        help="scale of --scores (default: auto: percent when a score exceeds 1, else the one "
        "that agrees with the matrix row means; an unclear case is refused)",
    )
    parser.add_argument("--estimators", help="comma-separated estimators to fit (default: all)")
    parser.add_argument("--default-estimator", default=None, help="estimator used by default")
    parser.add_argument("--irt-model", choices=("1pl", "2pl", "3pl", "4pl"), default="2pl")
    parser.add_argument(
        "--benchmark", help="benchmark name, e.g. mmlu (default with --task: the task name)"
    )
    parser.add_argument("--name", help="bundle name (default: BENCHMARK-BUDGET-METHOD)")
    parser.add_argument(
        "--metric",
        help="lm-eval metric the scores are (default: acc; exact_match for a generative --task)",
    )
    parser.add_argument(
        "--filter", default="none", help="lm-eval filter of the metric (default: none)"
    )
    parser.add_argument(
        "--dataset-path", help="Hugging Face dataset path of the benchmark documents"
    )
    parser.add_argument("--dataset-name", help="dataset config name")
    parser.add_argument("--dataset-split", help="dataset split")
    parser.add_argument("--dataset-revision", help="dataset revision (commit sha)")
    parser.add_argument("--license", help="licence of the bundle content (for the Hub card)")
    parser.add_argument("--out", required=True, help="bundle folder (or task folder) to write")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing bundle or task (other files in the folder stay)",
    )
    add_seed(parser)
    task = parser.add_argument_group("an lm-eval task folder (--task)")
    task.add_argument(
        "--task", help="the original lm-eval task: its name, or the path of its YAML file"
    )
    task.add_argument("--include-path", help="folder of task YAMLs lm-eval should search too")
    task.add_argument("--micro-task", help="name of the new task (default: micro_TASK)")
    task.add_argument(
        "--id-field",
        help="doc field the matrix item ids came from, as given to collect (default: "
        "collect's choice)",
    )
    task.add_argument(
        "--id-prefix", default="", help="text collect put before each id (default: none)"
    )
    task.add_argument(
        "--num-fewshot", type=int, help="the --num_fewshot of the matrix's runs (default: YAML)"
    )
    task.add_argument(
        "--fewshot-seed",
        type=int,
        default=1234,
        help="the --fewshot_random_seed of the matrix's runs (default: lm-eval's 1234)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..responses import ResponseMatrix
    from ..truth import align_target, read_scores

    if args.task is None and args.benchmark is None:
        raise InputError("--benchmark is required (or --task, whose name it then defaults to)")
    matrix = ResponseMatrix.read(args.matrix)
    scores = (
        read_scores(args.scores, args.score_column, scale=args.score_scale) if args.scores else None
    )
    source, target = align_target(matrix, scores)
    if args.task is not None:
        return _build_task(args, source, target)
    bundle = _build(args, source, target, args.benchmark, args.metric or "acc", _coordinates(args))
    from ..bundle import save_bundle

    folder = save_bundle(bundle, args.out, overwrite=args.overwrite)
    _print_summary(bundle, source, {"bundle": str(folder)})
    return 0


def _build(
    args: argparse.Namespace,
    source: ResponseMatrix,
    target: np.ndarray,
    benchmark: str,
    metric: str,
    dataset: DatasetCoordinates | None,
) -> Bundle:
    from ..build import build_bundle
    from ..bundle import MetricSpec
    from ..estimators import DEFAULT_ESTIMATOR

    estimators = split_list(args.estimators)
    default = args.default_estimator or (
        DEFAULT_ESTIMATOR if not estimators or DEFAULT_ESTIMATOR in estimators else estimators[0]
    )
    return build_bundle(
        source,
        target,
        name=_bundle_name(args, benchmark),
        benchmark=benchmark,
        method=args.method,
        budget=args.budget,
        seed=args.seed,
        estimators=estimators,
        default_estimator=default,
        irt_model=args.irt_model,
        metric=MetricSpec(name=metric, filter=args.filter),
        dataset=dataset,
        license=args.license,
    )


def _bundle_name(args: argparse.Namespace, benchmark: str) -> str:
    return args.name or f"{benchmark}-{args.budget}-{args.method}"


def _coordinates(args: argparse.Namespace, task_obj: Any = None) -> DatasetCoordinates | None:
    """Dataset coordinates from the options, else from the task's YAML."""
    from ..bundle import DatasetCoordinates

    if args.dataset_path:
        return DatasetCoordinates(
            args.dataset_path, args.dataset_name, args.dataset_split, args.dataset_revision
        )
    config = getattr(task_obj, "config", None)
    path = getattr(config, "dataset_path", None)
    if not isinstance(path, str) or not path:
        return None
    split = getattr(config, "test_split", None) or getattr(config, "validation_split", None)
    revision = (getattr(config, "dataset_kwargs", None) or {}).get("revision")
    return DatasetCoordinates(path, getattr(config, "dataset_name", None), split, revision)


def _build_task(args: argparse.Namespace, source: ResponseMatrix, target: np.ndarray) -> int:
    from ..harness.export import write_task
    from ..harness.render import finish_docs, load_task, render_task, with_document_hashes

    task_obj = load_task(
        args.task,
        include_path=args.include_path,
        num_fewshot=args.num_fewshot,
        fewshot_seed=args.fewshot_seed,
    )
    name = task_obj.config.task
    benchmark = args.benchmark or name
    generative = task_obj.OUTPUT_TYPE == "generate_until"
    metric = args.metric or ("exact_match" if generative else "acc")
    micro_task = args.micro_task or f"micro_{name}"
    out = Path(args.out)
    if (out / f"{micro_task}.yaml").exists() and not args.overwrite:
        raise InputError(f"--out {out} already holds task {micro_task!r}; pass --overwrite")
    rendered = render_task(
        task_obj,
        metric=metric,
        filter=args.filter,
        id_field=args.id_field,
        id_prefix=args.id_prefix,
        benchmark=benchmark,
    )
    spec = rendered.spec(micro_task, metric)
    bundle_name = _bundle_name(args, benchmark)
    source = with_document_hashes(source, rendered, bundle_name)
    bundle = _build(args, source, target, benchmark, metric, _coordinates(args, task_obj))
    yaml_path = write_task(out, spec, bundle, finish_docs(rendered, bundle.item_ids, bundle_name))
    command = (
        f"lm-eval run --model hf --model_args pretrained=MODEL --include_path "
        f"{shlex.quote(str(out))} --tasks {micro_task} --log_samples --output_path OUT"
    )
    _print_summary(bundle, source, {"task": micro_task, "yaml": str(yaml_path), "run": command})
    return 0


def _print_summary(bundle: Bundle, source: ResponseMatrix, where: dict[str, str]) -> None:
    print_json(
        {
            **where,
            "name": bundle.name,
            "items": bundle.budget,
            "source_models": source.n_models,
            "source_items": source.n_items,
            "default_estimator": bundle.default_estimator,
            "reliability": bundle.reliability,
        }
    )
