"""``microbench build``: select a subset of a response matrix; write a bundle or an lm-eval task.

Without ``--task`` the result is a bundle folder (``bundle.json``). With ``--task`` (a task
lm-eval knows, or the path of its YAML) it is a task folder for ``--include_path``: the micro
task's YAML, the hooks shim, and a data folder with the bundle and the selected documents,
each holding the exact prompt a full run of the original task sends (few-shot included).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ._options import (
    AUTO,
    ESTIMATORS,
    METHODS,
    add_irt_model,
    add_out,
    add_quiet,
    add_responses,
    add_seed,
    chance_level,
    estimator_names,
    estimator_or_auto,
    listing,
    load_original_task,
    method_or_auto,
    positive_int,
    print_json,
    render_original_task,
    require_responses,
    split_list,
)

NEW_MODELS = ("any", "like-sources")

if TYPE_CHECKING:
    import numpy as np

    from ..bundle import Bundle, DatasetCoordinates
    from ..responses import ResponseMatrix


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "build",
        help="select items from a response matrix; write a bundle or a micro lm-eval task",
        description=(
            "Select BUDGET items with METHOD from the source models of --responses, fit IRT "
            "and the score estimators on them, and write a bundle folder (bundle.json); with "
            "--task, a working lm-eval task folder running the selected items of that task."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  microbench build --responses mmlu_B.parquet --method anchor_points --budget 50 \\\n"
            "      --scores mmlu_B_scores.csv --score-column full_score_metabench \\\n"
            "      --benchmark mmlu --out bundles/mmlu-50\n"
            "  microbench build --responses arc_easy.parquet --task arc_easy --metric acc_norm \\\n"
            "      --method greedy --budget 50 --out my_tasks/\n"
            "  lm-eval run --model hf --model_args pretrained=MODEL --include_path my_tasks/ \\\n"
            "      --tasks micro_arc_easy --log_samples --output_path out/\n\n"
            "Two builds of the same matrix and options are the same but for the bundle's "
            "creation time; set SOURCE_DATE_EPOCH (seconds since 1970) to make them byte "
            "for byte the same."
        ),
    )
    add_responses(
        parser, required=False, help="response matrix of the source models (.parquet or .csv)"
    )
    _add_recipe_options(parser)
    _add_score_options(parser)
    _add_bundle_options(parser)
    add_out(
        parser,
        "bundle folder to write, or with --task the task folder (other files in it stay)",
        required=True,
    )
    add_seed(parser)
    add_quiet(parser)
    _add_task_options(parser.add_argument_group("an lm-eval task folder (--task)"))
    parser.set_defaults(run=run)


def _add_recipe_options(parser: argparse.ArgumentParser) -> None:
    """Which items and how many: method, budget, the automatic choice, audit items."""
    parser.add_argument(
        "--method",
        type=method_or_auto,
        metavar="METHOD",
        help=f"selection method: {listing(METHODS)}, or auto (default: auto: method and "
        "estimator chosen by cross-validation over the source models, on random and "
        "extrapolation folds, ties to balanced random items with the guarded estimator; "
        "under 20 models (30 against --scores that are not the matrix means) a fixed recipe "
        "without a choice (README: 'Your own micro-benchmark from few models'); the choice "
        "is recorded in the bundle)",
    )
    parser.add_argument(
        "--budget",
        type=_budget,
        required=True,
        help="number of items to keep, or auto (with --target-mae)",
    )
    parser.add_argument(
        "--target-mae",
        type=float,
        help="with --budget auto: the error to reach, in score points (percent of the full "
        "benchmark: 2 means 2 points); the smallest budget of the grid 10, 25, 50, 100, 200, "
        "400 (up to the item count) whose chosen recipe reaches it in cross-validation, else "
        "the largest",
    )
    parser.add_argument(
        "--new-models",
        choices=NEW_MODELS,
        default="any",
        help="with auto, the models the bundle will estimate: any (default: the choice is "
        "validated on random folds and on the strongest sources estimated from weaker ones) "
        "or like-sources (fine-tunes or checkpoints within the sources' range: random folds "
        "only, greedy and dpp items among the candidates, still read with the guarded "
        "estimator so an interval widens for a model beyond the sources; more accurate "
        "inside them, less beyond, bench/peers.md 'ours_inside')",
    )
    parser.add_argument(
        "--nested-folds",
        type=int,
        default=0,
        metavar="K",
        help="with auto: repeat the whole choice in K outer folds and report the error of "
        "'choose, then fit' beside the floor's (default 0: off; it multiplies the time by "
        "about K + 1)",
    )
    parser.add_argument(
        "--audit",
        type=_audit,
        default=0,
        metavar="N",
        help="items of the budget drawn at random from the items the method left out (an "
        "audit sample: the guarded estimator's 'audit' reading corrects its prediction with "
        "the model's answers on them, without assumptions about the model; default 0; at "
        "least 2 when used)",
    )


def _add_score_options(parser: argparse.ArgumentParser) -> None:
    """The truth the estimators learn and which estimators are fitted."""
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
    parser.add_argument(
        "--estimators",
        type=estimator_names,
        metavar="NAMES",
        help=(
            f"comma-separated estimators to fit, of {listing(ESTIMATORS)} (default: all but "
            "blend, which averages two of the others; it is fitted where it is the default)"
        ),
    )
    parser.add_argument(
        "--default-estimator",
        type=estimator_or_auto,
        metavar="NAME",
        help=f"estimator used by default, of {listing(ESTIMATORS)}, or auto (chosen with the "
        "method; default: auto with --method auto, else the fitted estimator with the lowest "
        "cross-validated error on the source models)",
    )
    add_irt_model(parser)


def _add_bundle_options(parser: argparse.ArgumentParser) -> None:
    """What the bundle says about itself: names, metric, dataset, licence, chance level."""
    parser.add_argument(
        "--benchmark",
        help="benchmark name, e.g. mmlu (required unless --task, whose name is the default)",
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
    parser.add_argument(
        "--chance",
        type=chance_level,
        help="probability of a right answer by guessing, for the person-fit check, e.g. 0.25 "
        "for four choices (default: each item's rate among the weakest 5%% of source models; "
        "the check then widens the interval of a model that answers like them but moves no "
        "estimate, since their score is a floor of the sources, not a guesser's). Where the "
        "benchmark's score is not the mean of the matrix items, the interval of a model below "
        "every source reaches down to the chance score less 5 points (0 without --chance)",
    )


def _add_task_options(task: argparse._ArgumentGroup) -> None:
    task.add_argument(
        "--task", help="the original lm-eval task: its name, or the path of its YAML file"
    )
    task.add_argument("--include_path", help="folder of task YAMLs lm-eval should search too")
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


def run(args: argparse.Namespace) -> int:
    from ..responses import ResponseMatrix
    from ..truth import align_target, read_scores

    if args.task is None and args.benchmark is None:
        raise InputError("--benchmark is required (or --task, whose name it then defaults to)")
    _check_recipe_args(args)
    require_responses(args)
    if args.task is None:
        from ..bundle import check_bundle_folder

        check_bundle_folder(Path(args.out), args.overwrite)  # before any work
    matrix = ResponseMatrix.read(args.responses)
    scores = (
        read_scores(args.scores, args.score_column, scale=args.score_scale) if args.scores else None
    )
    source, target = align_target(matrix, scores)
    _check_budget(args, source)
    if args.task is not None:
        return _build_task(args, source, target)
    recipe = _resolve_recipe(args, source, target)
    bundle = _build(
        args, recipe, source, target, args.benchmark, args.metric or "acc", _coordinates(args)
    )
    from ..bundle import save_bundle

    folder = save_bundle(bundle, args.out, overwrite=args.overwrite)
    _print_summary(bundle, source, {"bundle": str(folder)})
    return 0


def _budget(text: str) -> int | str:
    return "auto" if text == "auto" else positive_int(text)


def _audit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of items, got {text!r}"
        ) from None
    if value == 1 or value < 0:
        raise argparse.ArgumentTypeError(
            f"an audit needs at least 2 items (or 0 for none), got {value}"
        )
    return value


@dataclass(frozen=True)
class _Recipe:
    """What the bundle is built with: named by the user or chosen by ``auto``."""

    method: str
    budget: int
    default_estimator: str | None
    """None: the fitted estimator with the lowest cross-validated error (``build_bundle``)."""
    estimators: list[str] | None
    record: dict[str, Any] | None = None


def _check_recipe_args(args: argparse.Namespace) -> None:
    """Inconsistent auto options fail before the matrix is read (names failed parsing)."""
    from ..auto import check_target_mae

    if args.budget == AUTO and args.target_mae is None:
        raise InputError("--budget auto needs --target-mae (the error to reach, in points)")
    if args.budget != AUTO and args.target_mae is not None:
        raise InputError("--target-mae chooses the budget: pass it with --budget auto")
    chosen = (args.method or AUTO, args.budget, args.default_estimator)
    if args.new_models != "any" and AUTO not in chosen:
        raise InputError(
            f"--new-models {args.new_models} changes how auto chooses; with --method, "
            "--budget and --default-estimator all fixed nothing is chosen: leave one of them "
            "auto, or drop --new-models"
        )
    if args.budget != AUTO and args.audit >= args.budget:
        raise InputError(
            f"--audit {args.audit} leaves none of the budget of {args.budget} items to the "
            "selection method: ask for fewer audit items or a larger budget"
        )
    check_target_mae(args.target_mae)


def _check_budget(args: argparse.Namespace, source: ResponseMatrix) -> None:
    """A budget larger than the matrix is refused before any work, naming both."""
    if args.budget != AUTO and args.budget > source.n_items:
        raise InputError(
            f"--budget {args.budget} exceeds the {source.n_items} items of {source.source}"
        )


def _resolve_recipe(
    args: argparse.Namespace, source: ResponseMatrix, target: np.ndarray
) -> _Recipe:
    """The user's recipe, or the one ``choose_recipe`` picks where any part is ``auto``."""
    from ..auto import AUTO, FLOOR, Candidate, choose_recipe

    estimators = split_list(args.estimators)
    method = args.method or AUTO
    if AUTO not in (method, args.budget, args.default_estimator):
        return _Recipe(method, args.budget, args.default_estimator, estimators)
    fixed = args.default_estimator if args.default_estimator not in (None, AUTO) else None
    choice = choose_recipe(
        source,
        target,
        methods=None if method == AUTO else [method],
        estimators=[fixed] if fixed else estimators,
        budgets=None if args.budget == AUTO else [args.budget],
        target_mae=args.target_mae,
        floor=Candidate(FLOOR.method if method == AUTO else method, fixed or FLOOR.estimator),
        seed=args.seed,
        irt_model=args.irt_model,
        audit=args.audit,
        outer_repeats=args.nested_folds,
        extrapolation=args.new_models == "any",
        progress=not args.quiet,
    )
    print("\n".join(choice.table_lines()), file=sys.stderr)
    if estimators is not None and choice.estimator not in estimators:
        estimators = [*estimators, choice.estimator]
    return _Recipe(choice.method, choice.budget, choice.estimator, estimators, choice.as_record())


def _build(
    args: argparse.Namespace,
    recipe: _Recipe,
    source: ResponseMatrix,
    target: np.ndarray,
    benchmark: str,
    metric: str,
    dataset: DatasetCoordinates | None,
) -> Bundle:
    from ..build import build_bundle
    from ..bundle import MetricSpec

    return build_bundle(
        source,
        target,
        name=_bundle_name(args, recipe, benchmark),
        benchmark=benchmark,
        method=recipe.method,
        budget=recipe.budget,
        seed=args.seed,
        estimators=recipe.estimators,
        default_estimator=recipe.default_estimator,
        irt_model=args.irt_model,
        metric=MetricSpec(name=metric, filter=args.filter),
        dataset=dataset,
        license=args.license,
        chance=args.chance,
        choice=recipe.record,
        audit=args.audit,
        progress=not args.quiet,
    )


def _bundle_name(args: argparse.Namespace, recipe: _Recipe, benchmark: str) -> str:
    return args.name or f"{benchmark}-{recipe.budget}-{recipe.method}"


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
    from ..harness.render import finish_docs, with_document_hashes

    task_obj, benchmark, metric = load_original_task(args)
    micro_task = args.micro_task or f"micro_{task_obj.config.task}"
    out = Path(args.out)
    if (out / f"{micro_task}.yaml").exists() and not args.overwrite:
        raise InputError(f"--out {out} already holds task {micro_task!r}; pass --overwrite")
    rendered = render_original_task(args, task_obj, benchmark, metric)
    spec = rendered.spec(micro_task, metric)
    recipe = _resolve_recipe(args, source, target)
    bundle_name = _bundle_name(args, recipe, benchmark)
    source = with_document_hashes(source, rendered, bundle_name)
    bundle = _build(args, recipe, source, target, benchmark, metric, _coordinates(args, task_obj))
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
