"""Which training step each run is, so that a curve's x axis is the model's history.

A run is placed by the first rule that applies: ``--step-regex`` searched in the run
folder's name, then in the model id (``step-(\\d+k)`` finds 240,000 in
``TinyLlama-1.1B-intermediate-step-240k-503b``); else ``revision=`` in the run's model
arguments (Pythia's ``revision=step143000``); else the order the runs were given. A run
whose step cannot be read, and runs sharing one step, are left out with a note naming them:
a curve with a point at the wrong place would show a change of the model that is not there.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import InputError

ORDER_RULES = ("auto", "regex", "revision", "given")
"""``auto``: the regex when one is given, else ``revision=`` when a run has one, else given."""

_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*([kKmMbB]?)")
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9}


@dataclass(frozen=True)
class RunIdentity:
    """What names a run: the path given, its model id and model arguments; its step once
    ordered (``step_from`` says which rule gave it)."""

    label: str
    model: str
    model_args: Any = None
    step: float | None = None
    step_from: str = ""

    @property
    def folder_name(self) -> str:
        return Path(self.label.rstrip("/")).name or self.label


@dataclass
class Ordering:
    """Runs in step order, and the runs left out with the reason."""

    runs: list[RunIdentity]
    rule: str
    notes: list[str]


def number_of(text: str) -> float | None:
    """The first number of ``text`` with its ``k``/``M``/``B`` multiplier (``"50K"`` ->
    50000), None when it has none."""
    found = _NUMBER.search(text)
    if found is None:
        return None
    return float(found[1]) * _SUFFIX[found[2].lower()]


def step_from_text(text: str, pattern: re.Pattern[str]) -> float | None:
    """The step ``pattern`` finds in ``text``: its ``step`` group, else its first group,
    else the whole match, read by :func:`number_of`; None when it does not match."""
    found = pattern.search(text)
    if found is None:
        return None
    if "step" in pattern.groupindex:
        piece = found["step"]
    elif pattern.groups:
        piece = found[1]
    else:
        piece = found[0]
    return None if piece is None else number_of(piece)


def model_arg(model_args: Any, key: str) -> str | None:
    """``key`` of lm-eval's ``model_args``: a dict, or a ``"a=1,b=2"`` string."""
    if isinstance(model_args, Mapping):
        value = model_args.get(key)
        return None if value in (None, "") else str(value)
    if isinstance(model_args, str):
        for part in model_args.split(","):
            name, _, value = part.partition("=")
            if name.strip() == key and value.strip():
                return value.strip()
    return None


def compile_step_regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise InputError(f"--step-regex {text!r} is not a regular expression: {exc}") from None


def _regex_step(run: RunIdentity, pattern: re.Pattern[str]) -> tuple[float | None, str]:
    for where, text in (("folder name", run.folder_name), ("model id", run.model)):
        step = step_from_text(text, pattern)
        if step is not None:
            return step, f"--step-regex on the {where}"
    return None, ""


def _revision_step(run: RunIdentity) -> tuple[float | None, str]:
    revision = model_arg(run.model_args, "revision")
    if revision is None:
        return None, ""
    return number_of(revision), f"revision={revision}"


def _pick_rule(runs: Sequence[RunIdentity], rule: str, step_regex: str | None) -> str:
    if rule not in ORDER_RULES:
        raise InputError(f"order rule must be one of {ORDER_RULES}, got {rule!r}")
    if rule == "regex" and step_regex is None:
        raise InputError("ordering by regex needs --step-regex")
    if rule != "auto":
        return rule
    if step_regex is not None:
        return "regex"
    if any(model_arg(run.model_args, "revision") for run in runs):
        return "revision"
    return "given"


def order_runs(
    runs: Sequence[RunIdentity], *, rule: str = "auto", step_regex: str | None = None
) -> Ordering:
    """``runs`` sorted by step (see the module docstring for the rules).

    Runs whose step cannot be read and runs sharing a step are left out, each named in a
    note; when no run is left, the error names them all.
    """
    chosen = _pick_rule(runs, rule, step_regex)
    if chosen == "given":
        placed = [replace(r, step=float(k), step_from="order given") for k, r in enumerate(runs)]
        return Ordering(placed, chosen, [])
    pattern = compile_step_regex(step_regex) if chosen == "regex" else None
    placed, notes = [], []
    for run in runs:
        step, source = _regex_step(run, pattern) if pattern else _revision_step(run)
        if step is None:
            how = f"--step-regex {step_regex!r}" if pattern else "a numbered revision= model arg"
            notes.append(
                f"run {run.label} (model {run.model!r}): no step found with {how}; left out"
            )
        else:
            placed.append(replace(run, step=step, step_from=source))
    kept, clashes = _drop_shared_steps(placed)
    notes += clashes
    if not kept:
        raise InputError("no run could be placed on the step axis: " + "; ".join(notes))
    return Ordering(sorted(kept, key=lambda r: r.step or 0.0), chosen, notes)


def _drop_shared_steps(runs: list[RunIdentity]) -> tuple[list[RunIdentity], list[str]]:
    """Runs whose step no other run has; a note per shared step naming its runs (which of
    them is the checkpoint at that step cannot be told)."""
    by_step: dict[float, list[RunIdentity]] = defaultdict(list)
    for run in runs:
        by_step[run.step or 0.0].append(run)
    kept, notes = [], []
    for step, group in by_step.items():
        if len(group) == 1:
            kept += group
        else:
            names = ", ".join(r.label for r in group)
            notes.append(f"runs {names} all have step {step:g}; all of them left out")
    return kept, notes
