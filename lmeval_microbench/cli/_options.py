"""Argument types, shared options and output helpers of the subcommands.

The CLI grew one command at a time; these rules keep it one CLI (``tests/test_cli_options.py``
checks them on every subcommand's parser):

* The same thing has the same name everywhere:

  - ``--responses FILE``: the response matrix (.parquet or .csv) a command reads
    (``estimate`` also takes lm-eval output folders there);
  - ``--irt-model {1pl,2pl,3pl,4pl}``: the IRT model;
  - ``--model-id ID``: a model's id in a matrix or a run;
  - ``--method``/``--methods``, ``--estimator``/``--estimators``: selection methods and
    estimators by name, their values listed in the help and checked while parsing;
  - ``--seed``, ``--level``, ``--benchmark``, ``--format``, ``--quiet`` (no progress bars).

* Options handed to lm-eval keep lm-eval's spelling: ``--model`` (only ever lm-eval's model
  type), ``--model_args``, ``--tasks``, ``--include_path``, ``--batch_size``, ``--device``,
  ``--output_path``.

* ``--out PATH`` is where a command writes its result; what kind of path (a file, a JSON file
  with its markdown table beside it, a folder) is said in its help. Existing output is never
  replaced without ``--overwrite``, and that is checked before any work starts.

* Every option has help text; names, files and combinations are checked before any work, and
  a refused command line is one line, ``microbench CMD: error: ...`` with status 2, as every
  other refusal (:class:`CommandParser`). ``microbench`` alone prints the command list on
  stderr with status 2 (no command is a usage error, as for git).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from .._json import strict_json
from ..errors import InputError

IRT_MODELS = ("1pl", "2pl", "3pl", "4pl")
"""``irt.params.MODEL_TYPES``, spelled out so that ``--help`` needs no scientific imports."""

METHODS = (
    "anchor_points",
    "balanced",
    "dpp",
    "greedy",
    "lasso",
    "metabench",
    "random",
    "stratified",
    "tinybenchmarks",
)
"""``selection.SELECTORS`` by name (a test keeps the two equal)."""

ESTIMATORS = (
    "anchor",
    "anchor_sum",
    "blend",
    "calibrated",
    "gpirt",
    "guarded",
    "irt",
    "kridge",
    "mean",
    "pirt",
    "ridge",
    "similar",
)
"""``estimators.ESTIMATORS`` by name (a test keeps the two equal)."""

AUTO = "auto"
"""``auto.AUTO``: let ``build`` choose by cross-validation."""


# ---------------------------------------------------------------------------- parsing
class UsageError(InputError):
    """A command line argparse refused; ``prog`` names the (sub)command."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class CommandParser(argparse.ArgumentParser):
    """Refuses a bad command line with the one-line error every other refusal has, instead
    of argparse's usage block; ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, f"{message} (`{self.prog} --help` lists the options)")


# ---------------------------------------------------------------------------- value types
def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def interval_level(text: str) -> float:
    """A level strictly between 0 and 1, refused while parsing rather than after the work."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def chance_level(text: str) -> float:
    """A chance level in [0, 1), refused while parsing rather than after the method choice."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:  # NaN fails too
        raise argparse.ArgumentTypeError(
            f"expected a number in [0, 1) (e.g. 0.25 for four choices), got {text!r}"
        )
    return value


def _name_in(known: Sequence[str], kind: str, extra: Sequence[str] = ()) -> Callable[[str], str]:
    """A ``type=`` that accepts one of ``known`` (or ``extra``) and lists them otherwise."""
    allowed = (*known, *extra)

    def check(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(
                f"unknown {kind} {text!r}; choose from {', '.join(allowed)}"
            )
        return text

    return check


def _names_in(known: Sequence[str], kind: str) -> Callable[[str], str]:
    """A ``type=`` for a comma-separated list of ``known`` names (kept as the text)."""
    one = _name_in(known, kind)

    def check(text: str) -> str:
        for part in text.split(","):
            one(part.strip())
        return text

    return check


method_name = _name_in(METHODS, "selection method")
method_or_auto = _name_in(METHODS, "selection method", (AUTO,))
method_names = _names_in(METHODS, "selection method")
ADAPTIVE_METHOD = "adaptive"
"""``reliability``'s extra method name (``reliability.plan.ADAPTIVE``; kept here so that
parsing arguments does not import the evaluation code)."""
reliability_method_names = _names_in((*METHODS, ADAPTIVE_METHOD), "selection method")
estimator_name = _name_in(ESTIMATORS, "estimator")
estimator_or_auto = _name_in(ESTIMATORS, "estimator", (AUTO,))
estimator_names = _names_in(ESTIMATORS, "estimator")


def listing(names: Sequence[str]) -> str:
    """``a, b, c`` for help texts (argparse escapes nothing here: no ``%`` in names)."""
    return ", ".join(names)


# ---------------------------------------------------------------------------- shared options
def add_seed(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="what to print: table or json (default: table)",
    )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def add_irt_model(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--irt-model",
        choices=IRT_MODELS,
        default="2pl",
        help=f"IRT model: {listing(IRT_MODELS)} (default: 2pl)",
    )


def add_responses(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    required: bool = True,
    help: str = "response matrix (.parquet or .csv)",
) -> None:
    parser.add_argument("--responses", metavar="FILE", required=required, help=help)


def add_out(
    parser: argparse.ArgumentParser,
    what: str,
    *,
    required: bool = False,
    type: Callable[[str], Any] = str,
) -> None:
    """``--out`` and ``--overwrite`` with the one wording every command uses."""
    parser.add_argument(
        "--out",
        metavar="PATH",
        type=type,
        required=required,
        help=f"{what} (refuses to replace it without --overwrite)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace what --out names if it exists"
    )


def require_responses(args: argparse.Namespace) -> None:
    """``--responses`` is required and must exist (a missing file is "no such file", not
    "not a readable parquet file")."""
    if args.responses is None:
        raise InputError("--responses FILE is required (the response matrix)")
    check_exists(args.responses, "--responses")


# ---------------------------------------------------------------------------- checks
def check_exists(path: str | Path, option: str) -> Path:
    """An input path, refused before any work when absent (``no such file or folder``)."""
    found = Path(path)
    if not found.exists():
        raise InputError(f"{option} {found}: no such file or folder")
    return found


def refuse_existing(paths: Sequence[Path], overwrite: bool) -> None:
    """The one overwrite rule: an existing output is replaced only with ``--overwrite``."""
    for path in paths:
        if path.exists() and not overwrite:
            raise InputError(f"--out {path} exists; pass --overwrite to replace it")


# ---------------------------------------------------------------------------- printing
def print_json(payload: Any) -> None:
    """``payload`` as strict JSON on stdout (NaN written as ``null``, never bare ``NaN``)."""
    json.dump(strict_json(payload), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def table_text(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A plain markdown table (readable in a terminal, pasteable into a README)."""

    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    print(table_text(rows, columns), end="")


def split_list(text: str | None) -> list[str] | None:
    """``"a,b"`` -> ``["a", "b"]``; None stays None; empty entries are an error."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if any(p == "" for p in parts):
        raise InputError(f"empty entry in list {text!r}")
    return parts


def add_run_estimate_options(
    parser: argparse.ArgumentParser, *, task_map_help: str, level_help: str, missing_help: str
) -> None:
    """How estimates are made from lm-eval run folders (``reconstruct``, ``curve``): extra
    bundles, task renaming, estimator, interval level and imputation, spelled alike in both."""
    parser.add_argument(
        "--bundle",
        action="append",
        default=[],
        metavar="DIR",
        help="bundle folder, or a folder of them, besides the shipped ones (repeatable)",
    )
    parser.add_argument(
        "--task-map", action="append", default=[], metavar="TASK=BENCHMARK", help=task_map_help
    )
    parser.add_argument(
        "--estimator",
        type=estimator_name,
        metavar="NAME",
        help=f"estimator stored in the bundles: {listing(ESTIMATORS)} (default: as in the run)",
    )
    parser.add_argument("--level", type=interval_level, help=level_help)
    parser.add_argument("--allow-missing", action="store_true", default=None, help=missing_help)


def load_original_task(args: argparse.Namespace) -> tuple[Any, str, str]:
    """The lm-eval task named by ``--task`` (``build --task``, ``adaptive build``), the benchmark
    name (``--benchmark``, else the task's name) and the metric (``--metric``, else
    ``exact_match`` for generation and ``acc`` for the rest), decided alike in both commands."""
    from ..harness.render import load_task

    task_obj = load_task(
        args.task,
        include_path=args.include_path,
        num_fewshot=args.num_fewshot,
        fewshot_seed=args.fewshot_seed,
    )
    benchmark = args.benchmark or task_obj.config.task
    generative = task_obj.OUTPUT_TYPE == "generate_until"
    return task_obj, benchmark, args.metric or ("exact_match" if generative else "acc")


def render_original_task(
    args: argparse.Namespace, task_obj: Any, benchmark: str, metric: str
) -> Any:
    """The task of :func:`load_original_task` rendered item by item with the command's
    ``--filter``, ``--id-field`` and ``--id-prefix`` (``build --task``, ``adaptive build``)."""
    from ..harness.render import render_task

    return render_task(
        task_obj,
        metric=metric,
        filter=args.filter,
        id_field=args.id_field,
        id_prefix=args.id_prefix,
        benchmark=benchmark,
    )
