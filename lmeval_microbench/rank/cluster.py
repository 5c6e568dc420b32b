"""Cluster rounds: live ranking whose lm-eval runs a scheduler makes, between two invocations.

``microbench rank --plan-round DIR`` writes the first round as one ordinary ``lm_eval`` command
per model (``DIR/round_0/commands.sh``, and ``plan.json`` for programs); Slurm, Kubernetes or a
shell loop runs them; ``microbench rank --resume DIR`` reads their outputs and either plans the
next round (``round_1``...) or, when the ranking is done, writes the report the in-process
mode writes.

Why a replay rather than a saved engine: the round engine (:func:`.rounds.run_rounds`) is
deterministic given the item scores, so every invocation runs it from the start over the
scores read so far (``DIR/state.json``, plain JSON written atomically). The estimates of a
model at a level come from the same items in the same order as an in-process
:class:`~.live.LiveEvaluator` would score (nested prefixes of one seeded order per task), so
the two modes rank alike; the first round whose scores are not all read stops the engine
(:class:`RoundPending`, raised from :meth:`ClusterEvaluator.start_round`) and is written out.
Outputs are checked before anything is kept (:mod:`.cluster_runs`); a model whose output is
missing or wrong stops the resume with what is wrong, after the good ones are saved, or with
``skip_missing`` counts as failed as an in-process run that raises would.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import atomic_path, write_json_atomic
from .._json import read_json
from ..errors import InputError, MicrobenchError
from .cluster_runs import StoredScores, command_line, lm_eval_argv, model_slugs, read_run
from .live import LiveEvaluator
from .rounds import Evaluated, Ranking, RoundOptions, Scored, run_rounds

STATE = "state.json"
FORMAT = "microbench-rank-cluster"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class ClusterSettings:
    """What fixes a ranking, kept in state.json: every resume replays the same rounds."""

    models: dict[str, str]
    """name -> ``--model_args``, in the order the models are ranked"""
    tasks: tuple[str, ...]
    include_path: str
    fractions: tuple[float, ...]
    model: str = "hf"
    seed: int = 0
    batch_size: str = "1"
    device: str | None = None
    tiers: str | None = None
    max_items: int | None = None
    level_caps: bool = True
    rank_intervals: str = "simulate"
    rank_level: float = 0.9
    full_items: int | None = None

    def round_options(self) -> RoundOptions:
        from .tiers import parse_tiers

        return RoundOptions(
            parse_tiers(self.tiers) if self.tiers is not None else None,
            max_items=self.max_items,
            level_caps=self.level_caps,
            interval_method=self.rank_intervals,
            rank_level=self.rank_level,
            seed=self.seed,
        )

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {**data, "tasks": list(self.tasks), "fractions": list(self.fractions)}

    @classmethod
    def from_json(cls, data: Any, where: str) -> ClusterSettings:
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or not {"models", "tasks", "include_path"} <= set(data):
            raise InputError(f"{where}: 'settings' is not a ranking's settings")
        unknown = sorted(set(data) - names)
        if unknown:
            raise InputError(f"{where}: unknown settings {unknown} (written by a newer version?)")
        return cls(**{**data, "tasks": tuple(data["tasks"]), "fractions": tuple(data["fractions"])})


@dataclass
class ClusterState:
    """The ranking between invocations: settings, rounds planned, every score read back."""

    settings: ClusterSettings
    slugs: dict[str, str]
    tasks: dict[str, dict[str, Any]]
    """task -> what its documents were at planning (count, version, bundle, item-id hash)"""
    rounds: list[dict[str, int]] = field(default_factory=list)
    """round k: model -> the level its run reaches"""
    scores: dict[str, StoredScores] = field(default_factory=dict)
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)
    """model -> {"level", "why"}: runs given up (``skip_missing``), as failed in-process runs"""
    report: dict[str, Any] = field(default_factory=dict)
    """``out`` folder, ``no_plots``, and ``written`` once the report is"""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "settings": self.settings.to_json(),
            **{k: getattr(self, k) for k in ("slugs", "tasks", "rounds", "scores", "failures")},
            "report": self.report,
        }

    def save(self, folder: Path) -> None:
        write_json_atomic(folder / STATE, self.to_json())

    @classmethod
    def load(cls, folder: Path) -> ClusterState:
        path = folder / STATE
        if not path.is_file():
            raise InputError(
                f"{folder} holds no planned ranking (no {STATE}): start one with "
                f"--plan-round {folder}"
            )
        data = read_json(path)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"{path}: not the state of a ranking planned with --plan-round")
        if data.get("version") != FORMAT_VERSION:
            raise InputError(f"{path}: state version {data.get('version')!r} is not supported")
        try:
            return cls(
                ClusterSettings.from_json(data["settings"], str(path)),
                **{k: data[k] for k in ("slugs", "tasks", "rounds", "scores", "failures")},
                report=data.get("report", {}),
            )
        except (KeyError, TypeError) as exc:
            raise InputError(f"{path}: incomplete ranking state ({exc})") from None


class RoundPending(Exception):
    """The engine reached a round whose runs are not read yet: ``runs`` is model -> level."""

    def __init__(self, runs: dict[str, int]) -> None:
        super().__init__(f"{len(runs)} runs to plan")
        self.runs = runs


class ClusterEvaluator(LiveEvaluator):
    """The in-process evaluator's documents and estimates over the scores read back.

    Sharing :class:`~.live.LiveEvaluator`'s order, counts and ``_estimate`` is what makes a
    cluster ranking equal an in-process one; only where the scores come from differs.
    """

    def __init__(self, state: ClusterState) -> None:
        s = state.settings
        super().__init__(
            s.models, s.tasks, s.include_path, fractions=s.fractions, model=s.model, seed=s.seed
        )
        self.state = state

    def slice_docs(self, task: str, level: int) -> list[int]:
        """The documents of ``task`` a model's run to ``level`` adds (sorted, as in-process)."""
        counts = self.counts[task]
        start = counts[level - 1] if level else 0
        return sorted(int(i) for i in self.order[task][start : counts[level]])

    def run_docs(self, level: int) -> dict[str, list[int]]:
        """Task -> documents of the run that takes a model from ``level - 1`` to ``level``."""
        docs = {task: self.slice_docs(task, level) for task in self.tasks}
        return {task: d for task, d in docs.items() if d}

    def has(self, name: str, level: int) -> bool:
        """Whether every document up to ``level`` has a score of ``name`` read back."""
        stored = self.state.scores.get(name, {})
        return all(
            str(doc) in stored.get(task, {})
            for k in range(level + 1)
            for task, docs in self.run_docs(k).items()
            for doc in docs
        )

    def failed_at(self, name: str, level: int) -> str | None:
        failure = self.state.failures.get(name)
        return failure["why"] if failure and failure["level"] == level else None

    def start_round(self, batches: Mapping[int, Sequence[str]]) -> None:
        """Stop the engine at the first round with runs not read back: they are planned."""
        pending = {
            name: level
            for level, names in batches.items()
            for name in names
            if not self.has(name, level) and self.failed_at(name, level) is None
        }
        if pending:
            order = list(self.state.settings.models)
            raise RoundPending(dict(sorted(pending.items(), key=lambda kv: order.index(kv[0]))))

    def _restore(self, name: str, level: int) -> Scored:
        """The estimate at ``level`` from the stored scores, in the in-process insertion order
        (each run's documents sorted, run after run)."""
        stored = self.state.scores[name]
        kept: dict[str, dict[str, float]] = {}
        for k in range(level + 1):
            for task, docs in self.run_docs(k).items():
                for doc in docs:
                    item_id, score = stored[task][str(doc)]
                    kept.setdefault(task, {})[str(item_id)] = float(score)
        self.scores[name], self.level_of[name] = kept, level
        return self._estimate(name)

    def evaluate(self, models: Sequence[str], level: int) -> Evaluated:
        out = Evaluated()
        for name in models:
            why = self.failed_at(name, level)
            if why is not None:
                out.failures[name] = why
                continue
            try:
                out.scores[name] = self._restore(name, level)
            except Exception as exc:  # as score_models: a model that fails is reported
                out.failures[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        return out


@dataclass(frozen=True)
class PlannedRound:
    """A round written out: where its commands are and how many runs it holds."""

    folder: Path
    round: int
    runs: int
    commands: Path
    plan: Path


@dataclass(frozen=True)
class Finished:
    """The ranking is done: what the report needs."""

    ranking: Ranking
    info: dict[str, Any]
    options: RoundOptions
    state: ClusterState


def _fingerprint(evaluator: LiveEvaluator) -> dict[str, dict[str, Any]]:
    """What a resume checks the task documents against (changed documents change ranks)."""
    return {
        name: {
            "n_docs": info.n_docs,
            "version": str(info.version),
            "bundle": info.bundle.name,
            "item_ids_sha256": hashlib.sha256(json.dumps(info.item_ids).encode()).hexdigest(),
        }
        for name, info in evaluator.tasks.items()
    }


def plan_ranking(
    folder: str | Path, settings: ClusterSettings, *, out: str | Path | None, no_plots: bool
) -> PlannedRound | Finished:
    """Start a ranking in the empty (or new) ``folder``: state.json and round 0."""
    folder = Path(folder).resolve()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InputError(
            f"--plan-round {folder}: not an empty folder; plan a ranking into a new folder "
            f"(continue a planned one with --resume {folder})"
        )
    state = ClusterState(settings, model_slugs(list(settings.models)), {})
    evaluator = ClusterEvaluator(state)
    state.tasks = _fingerprint(evaluator)
    out = Path(out).resolve() if out else folder / "report"
    state.report = {"out": str(out), "no_plots": bool(no_plots)}
    folder.mkdir(parents=True, exist_ok=True)
    return _advance(folder, state, evaluator)


def resume_ranking(folder: str | Path, *, skip_missing: bool = False) -> PlannedRound | Finished:
    """Read the last planned round's outputs into the state, then plan on or finish."""
    folder = Path(folder).resolve()
    state = ClusterState.load(folder)
    evaluator = ClusterEvaluator(state)
    changed = [
        task for task, seen in _fingerprint(evaluator).items() if state.tasks.get(task) != seen
    ]
    if changed or set(state.tasks) != set(evaluator.tasks):
        raise InputError(
            f"{folder / STATE}: the documents of {', '.join(changed) or 'the tasks'} changed "
            "since the ranking was planned; rank on the task folder it was planned with"
        )
    if state.rounds:
        read_round(folder, state, evaluator, skip_missing=skip_missing)
    return _advance(folder, state, evaluator)


def _advance(
    folder: Path, state: ClusterState, evaluator: ClusterEvaluator
) -> PlannedRound | Finished:
    """Replay the rounds over the scores read so far: plan the first unread one, or finish."""
    options = state.settings.round_options()
    try:
        ranking = run_rounds(evaluator, list(state.settings.models), options)
    except RoundPending as pending:
        return write_round(folder, state, evaluator, pending.runs)
    info = {
        "mode": "live",
        "model": state.settings.model,
        "tasks": sorted(evaluator.tasks),
        "cluster_dir": str(folder),
    }
    return Finished(ranking, info, options, state)


def round_folder(folder: Path, k: int) -> Path:
    return folder / f"round_{k}"


def output_folder(folder: Path, k: int, slug: str) -> Path:
    return round_folder(folder, k) / "outputs" / slug


def write_round(
    folder: Path, state: ClusterState, evaluator: ClusterEvaluator, runs: dict[str, int]
) -> PlannedRound:
    """``round_K/commands.sh`` (one line per model, nothing else: line k is run k, for job
    arrays), ``round_K/plan.json``, then the state that names the round (written last: a
    crash before it leaves the previous round current)."""
    k = len(state.rounds)
    where = round_folder(folder, k)
    s = state.settings
    entries = []
    for name, level in runs.items():
        docs = evaluator.run_docs(level)
        output = output_folder(folder, k, state.slugs[name])
        argv = lm_eval_argv(
            model=s.model,
            model_args=s.models[name],
            docs=docs,
            include_path=s.include_path,
            output_path=output,
            batch_size=s.batch_size,
            device=s.device,
        )
        entries.append(
            {
                "model": name,
                "model_args": s.models[name],
                "level": level,
                "items": evaluator.levels[level],
                "docs": docs,
                "item_ids": {
                    t: [evaluator.tasks[t].item_ids[d] for d in ds] for t, ds in docs.items()
                },
                "output_path": str(output),
                "argv": argv,
                "command": command_line(argv),
            }
        )
    plan = {
        "round": k,
        "state": str(folder / STATE),
        "levels": list(evaluator.levels),
        "tasks": list(evaluator.tasks),
        "runs": entries,
        "then": f"microbench rank --resume {folder}",
    }
    (where / "outputs").mkdir(parents=True, exist_ok=True)
    write_json_atomic(where / "plan.json", plan)
    with atomic_path(where / "commands.sh") as tmp:
        tmp.write_text("".join(entry["command"] + "\n" for entry in entries), encoding="utf-8")
    state.rounds.append(dict(runs))
    state.save(folder)
    return PlannedRound(folder, k, len(entries), where / "commands.sh", where / "plan.json")


def read_round(
    folder: Path, state: ClusterState, evaluator: ClusterEvaluator, *, skip_missing: bool
) -> None:
    """Read every run of the last round not read yet; keep the good ones (saved at once),
    then refuse the rest naming each model and folder, or with ``skip_missing`` record them
    as failed."""
    k = len(state.rounds) - 1
    problems: dict[str, tuple[Path, str]] = {}
    changed = False
    for name, level in state.rounds[k].items():
        if evaluator.has(name, level) or evaluator.failed_at(name, level) is not None:
            continue
        output = output_folder(folder, k, state.slugs[name])
        try:
            got = read_run(
                output,
                name=name,
                model=state.settings.model,
                model_args=state.settings.models[name],
                docs=evaluator.run_docs(level),
                tasks=evaluator.tasks,
            )
        except (MicrobenchError, OSError) as exc:
            problems[name] = (output, str(exc))
            continue
        stored = state.scores.setdefault(name, {})
        for task, docs in got.items():
            stored.setdefault(task, {}).update(docs)
        changed = True
    if problems and skip_missing:
        for name, (output, why) in problems.items():
            level = state.rounds[k][name]
            state.failures[name] = {"level": level, "why": f"no usable output in {output}: {why}"}
            warnings.warn(f"model {name!r} counted as failed: {output}: {why}", stacklevel=2)
        changed = True
    if changed:
        state.save(folder)
    if problems and not skip_missing:
        kept = len(state.rounds[k]) - len(problems)
        lines = [
            f"round {k}: {len(problems)} of {len(state.rounds[k])} runs have no usable output "
            f"({kept} read and kept in {folder / STATE}); run their lines of "
            f"{round_folder(folder, k) / 'commands.sh'} (again, where a run failed), then "
            "--resume again, or pass --skip-missing to rank without them:"
        ]
        lines += [f"  model {name!r} ({output}): {why}" for name, (output, why) in problems.items()]
        raise InputError("\n".join(lines))


def mark_written(folder: Path, state: ClusterState, written: Mapping[str, str]) -> None:
    """Remember the report: a later ``--resume`` of a finished ranking may rewrite it."""
    state.report = {**state.report, "written": dict(written)}
    state.save(folder)
