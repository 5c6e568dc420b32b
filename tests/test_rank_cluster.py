"""``microbench rank --plan-round/--resume``: live rounds whose lm-eval runs a scheduler makes.

The fast tests stand a deterministic fake in for lm-eval (scores from a hash of the model and
the item): the in-process ranking gets it through ``LiveEvaluator._run``, the cluster ranking
as lm-eval output folders written where the plan says. The slow test runs the planned
``lm_eval`` command lines themselves on tiny random GPT-2 models.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import test_harness

from lmeval_microbench.cli.app import main

tiny_model = test_harness.tiny_model  # the fixtures: a random GPT-2 built locally
toy = test_harness.toy
toy_suite = test_harness.toy_suite
_fresh_registry = test_harness._fresh_registry

STRENGTH = {"m_low": 0.2, "m_mid": 0.5, "m_high": 0.55}


# ---------------------------------------------------------------------------- the fake lm-eval
def fake_score(model_args: str, item_id: str) -> float:
    name = model_args.partition("=")[2]
    draw = int(hashlib.sha256(f"{name}|{item_id}".encode()).hexdigest()[:8], 16) / 2**32
    return float(draw < STRENGTH[name])


def task_docs(include_path: Path, tasks: list[str]) -> dict[str, Any]:
    import lm_eval.tasks

    from lmeval_microbench.rank.live import leaf_tasks

    manager = lm_eval.tasks.TaskManager(include_path=str(include_path))
    return dict(leaf_tasks(lm_eval.tasks.get_task_dict(tasks, manager)))


def fake_results(tasks: dict[str, Any], model_args: str, docs: dict[str, list[int]]) -> dict:
    """What ``lm_eval.simple_evaluate(..., samples=docs, log_samples=True)`` returns, faked."""
    samples = {}
    for task, indices in docs.items():
        eval_docs = tasks[task].eval_docs
        samples[task] = [
            {
                "doc_id": d,
                "doc": eval_docs[d],
                "filter": "none",
                "acc": fake_score(model_args, eval_docs[d]["item_id"]),
            }
            for d in indices
        ]
    versions = {task: tasks[task].VERSION for task in docs}
    return {"samples": samples, "versions": versions}


def write_lm_eval_output(output_path: str, model_args: str, results: dict) -> None:
    """The results json and samples files as lm-eval's CLI lays them out."""
    folder = Path(output_path) / model_args.partition("=")[2].replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().isoformat().replace(":", "-")  # as lm-eval names a run
    samples = results["samples"]
    summary = {
        "config": {"model": "hf", "model_args": model_args},
        "versions": results["versions"],
        "n-samples": {t: {"original": 5, "effective": len(s)} for t, s in samples.items()},
    }
    (folder / f"results_{stamp}.json").write_text(json.dumps(summary))
    for task, lines in samples.items():
        text = "".join(json.dumps(line) + "\n" for line in lines)
        (folder / f"samples_{task}_{stamp}.jsonl").write_text(text)


def run_planned(plan: dict, tasks: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    """Every run of a round, faked into the folder the plan gives it."""
    for run in plan["runs"]:
        if run["model"] not in skip:
            results = fake_results(tasks, run["model_args"], run["docs"])
            write_lm_eval_output(run["output_path"], run["model_args"], results)


def rank_argv(suite: Path, *extra: str) -> list[str]:
    argv = ["rank", "--tasks", test_harness.TASK, "--include_path", str(suite)]
    argv += ["--fractions", "0.2,0.6,1", "--no-plots"]
    for name in STRENGTH:
        argv += ["--model_args", f"pretrained={name}"]
    return [*argv, *extra]


def last_plan(folder: Path) -> dict:
    rounds = sorted(folder.glob("round_*"), key=lambda p: int(p.name.split("_")[1]))
    return json.loads((rounds[-1] / "plan.json").read_text())


def without_cluster_dir(document: dict) -> dict:
    """The report less what only one mode has: the cluster folder, and the in-process
    ranking's model loads (a cluster's lm-eval commands load their own models)."""
    return {k: v for k, v in document.items() if k not in ("cluster_dir", "model_loads")}


@pytest.fixture
def fake_lm_eval(monkeypatch, toy_suite):
    """The fake for the in-process ranking; returns the suite's task objects. lm-eval's own
    tasks are left out of the task index (6 s per invocation; the toy task needs none)."""
    import lm_eval.tasks

    from lmeval_microbench.rank.live import LiveEvaluator

    class TaskManager(lm_eval.tasks.TaskManager):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "include_defaults": False})

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", TaskManager)
    tasks = task_docs(toy_suite, [test_harness.TASK])
    monkeypatch.setattr(
        LiveEvaluator,
        "_run",
        lambda self, name, docs: fake_results(tasks, self.model_args[name], docs),
    )
    return tasks


# ---------------------------------------------------------------------------- tests
def test_cluster_rounds_rank_as_the_in_process_rounds(toy_suite, fake_lm_eval, tmp_path, capsys):
    """Plan, run the commands (faked), resume until done: the same rounds, estimates and
    report as the in-process ranking on the same scores."""
    assert main(rank_argv(toy_suite, "--out", str(tmp_path / "inproc"))) == 0
    capsys.readouterr()
    expected = json.loads((tmp_path / "inproc" / "ranking.json").read_text())

    folder = tmp_path / "cluster"
    assert main(rank_argv(toy_suite, "--plan-round", str(folder))) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["round"] == 0 and printed["runs"] == 3
    assert printed["then"] == f"microbench rank --resume {folder}"
    lines = (folder / "round_0" / "commands.sh").read_text().splitlines()
    plan = last_plan(folder)
    assert len(lines) == 3 and [r["model"] for r in plan["runs"]] == list(STRENGTH)
    for line, run in zip(lines, plan["runs"], strict=True):
        argv = shlex.split(line)
        assert argv == run["argv"] and argv[0] == "lm_eval" and "--log_samples" in argv
        assert (
            json.loads(argv[argv.index("--samples") + 1])
            == run["docs"]
            == {test_harness.TASK: run["docs"][test_harness.TASK]}
        )
        assert argv[argv.index("--output_path") + 1] == run["output_path"]
        assert Path(run["output_path"]).parent == folder / "round_0" / "outputs"
        assert "--device" not in argv  # the node that runs the line picks its device
    rounds = 0
    while True:
        run_planned(last_plan(folder), fake_lm_eval)
        rounds += 1
        assert main(["rank", "--resume", str(folder)]) == 0
        printed = json.loads(capsys.readouterr().out)
        if "written" in printed:
            break
        assert printed["round"] == rounds
    assert rounds >= 2  # the close pair climbs: more than the first round was planned
    document = json.loads((folder / "report" / "ranking.json").read_text())
    assert document["cluster_dir"] == str(folder)
    assert without_cluster_dir(document) == without_cluster_dir(expected)
    assert (folder / "report" / "ranking.md").read_text() == (
        tmp_path / "inproc" / "ranking.md"
    ).read_text()
    # a finished ranking resumes to the same report again
    assert main(["rank", "--resume", str(folder)]) == 0
    assert json.loads((folder / "report" / "ranking.json").read_text()) == document


def test_bad_outputs_are_refused_by_model_and_folder_and_good_ones_kept(
    toy_suite, fake_lm_eval, tmp_path, capsys
):
    folder = tmp_path / "cluster"
    argv = rank_argv(toy_suite, "--fractions", "0.4,1", "--plan-round", str(folder))
    assert main(argv) == 0
    capsys.readouterr()
    plan = last_plan(folder)
    runs = {run["model"]: run for run in plan["runs"]}
    task = test_harness.TASK
    run_planned(plan, fake_lm_eval, skip=("m_mid", "m_high"))
    # m_high: one of its 2 planned documents is missing (a run cut short)
    high = runs["m_high"]
    assert len(high["docs"][task]) == 2
    results = fake_results(fake_lm_eval, high["model_args"], high["docs"])
    results["samples"][task] = results["samples"][task][:1]
    write_lm_eval_output(high["output_path"], high["model_args"], results)
    assert main(["rank", "--resume", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "round 0: 2 of 3 runs have no usable output (1 read and kept" in err
    assert f"model 'm_mid' ({runs['m_mid']['output_path']}): no output folder" in err
    assert f"model 'm_high' ({high['output_path']}): " in err
    assert f"1 of the 2 planned documents of task '{task}'" in err and "incomplete" in err
    state = json.loads((folder / "state.json").read_text())
    assert list(state["scores"]) == ["m_low"]  # the complete model is kept
    assert len(state["rounds"]) == 1
    # m_mid's folder holds another model's run, m_high's a run of other documents
    mid = runs["m_mid"]
    wrong = fake_results(fake_lm_eval, "pretrained=m_low", mid["docs"])
    write_lm_eval_output(mid["output_path"], "pretrained=m_low", wrong)
    others = [d for d in range(5) if d not in high["docs"][task]][:2]
    results = fake_results(fake_lm_eval, high["model_args"], {task: others})
    write_lm_eval_output(high["output_path"], high["model_args"], results)
    assert main(["rank", "--resume", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "model 'm_mid'" in err and "another model's output" in err
    assert "model 'm_high'" in err and "not in this round's plan" in err
    # the user re-runs both into the same folders: their newest runs are read
    for name in ("m_mid", "m_high"):
        run = runs[name]
        results = fake_results(fake_lm_eval, run["model_args"], run["docs"])
        write_lm_eval_output(run["output_path"], run["model_args"], results)
    assert main(["rank", "--resume", str(folder)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.get("round") == 1 or "written" in printed


def test_skip_missing_ranks_without_the_model_as_a_failed_one(
    toy_suite, fake_lm_eval, tmp_path, capsys
):
    folder = tmp_path / "cluster"
    argv = rank_argv(toy_suite, "--plan-round", str(folder))
    argv += ["--model_args", "pretrained=m_gone"]
    assert main(argv) == 0
    capsys.readouterr()
    run_planned(last_plan(folder), fake_lm_eval, skip=("m_gone",))
    assert main(["rank", "--resume", str(folder)]) == 2
    assert "model 'm_gone'" in capsys.readouterr().err
    assert main(["rank", "--resume", str(folder), "--skip-missing"]) == 0
    captured = capsys.readouterr()
    assert "model 'm_gone' counted as failed" in captured.err
    while "written" not in (printed := json.loads(captured.out)):
        run_planned(last_plan(folder), fake_lm_eval)
        assert main(["rank", "--resume", str(folder)]) == 0
        captured = capsys.readouterr()
    assert list(printed["failures"]) == ["m_gone"]
    assert "no output folder" in printed["failures"]["m_gone"]
    document = json.loads((folder / "report" / "ranking.json").read_text())
    assert {row["model"] for row in document["ranking"]} == set(STRENGTH)


def test_resume_errors_are_one_clear_line(toy_suite, fake_lm_eval, tmp_path, capsys):
    nothing = tmp_path / "nothing"
    assert main(["rank", "--resume", str(nothing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"microbench rank: error: {nothing} holds no planned ranking (no state.json): "
        f"start one with --plan-round {nothing}"
    )
    folder = tmp_path / "cluster"
    assert main(rank_argv(toy_suite, "--plan-round", str(folder))) == 0
    capsys.readouterr()
    assert main(rank_argv(toy_suite, "--plan-round", str(folder))) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert main(["rank", "--resume", str(folder), "--tiers", "1-1,2-", "--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert "leave out --tiers, --seed" in err and len(err.strip().splitlines()) == 1
    assert main(["rank", "--responses", "x.parquet", "--plan-round", str(tmp_path / "r")]) == 2
    assert "does not take --responses" in capsys.readouterr().err


def test_model_slugs_are_distinct_folder_names():
    from lmeval_microbench.rank.cluster_runs import model_slugs

    slugs = model_slugs(["org/model", "org_model", "/abs/path/m1", "Org/Model"])
    assert slugs["/abs/path/m1"] == "abs_path_m1"
    assert len({s.lower() for s in slugs.values()}) == 4
    clashing = (slugs["org/model"], slugs["org_model"], slugs["Org/Model"])
    assert all(s.lower().startswith("org_model-") for s in clashing)


# ---------------------------------------------------------------------------- end to end
def run_commands(commands: Path) -> None:
    """Every line of a round as a scheduler would run it: its own process, all at once."""
    bin_dir = str(Path(sys.executable).parent)  # where this environment's lm_eval lives
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    jobs = []
    for k, line in enumerate(commands.read_text().splitlines()):
        log = commands.with_name(f"job_{k}.log")
        with log.open("w") as sink:
            jobs.append((log, subprocess.Popen(["sh", "-c", line], env=env, stdout=sink,
                                               stderr=subprocess.STDOUT)))  # fmt: skip
    for log, job in jobs:
        assert job.wait(timeout=900) == 0, log.read_text()[-3000:]


@pytest.mark.slow
def test_planned_lm_eval_commands_rank_tiny_models_as_the_in_process_rounds(
    tiny_model, toy_suite, tmp_path, capsys
):
    """Two rounds planned, their ``lm_eval`` lines run as separate processes, read back: the
    same estimates and ranks as the in-process live ranking of the same models."""
    from test_rank_live import reseeded

    models = [tiny_model] + [reseeded(tiny_model, s, tmp_path / f"m{s}") for s in (1, 2)]
    argv = ["rank", "--tasks", test_harness.TASK, "--include_path", str(toy_suite)]
    argv += ["--fractions", "0.4,1", "--batch_size", "4", "--no-plots"]
    for m in models:
        argv += ["--model_args", test_harness.model_args(m, device=False)]
    assert main([*argv, "--out", str(tmp_path / "inproc")]) == 0
    capsys.readouterr()
    expected = json.loads((tmp_path / "inproc" / "ranking.json").read_text())

    folder = tmp_path / "cluster"
    assert main([*argv, "--plan-round", str(folder)]) == 0
    printed = json.loads(capsys.readouterr().out)
    while "written" not in printed:
        run_commands(Path(printed["commands"]))
        assert main(["rank", "--resume", str(folder)]) == 0
        printed = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in folder.glob("round_*")) == ["round_0", "round_1"]
    document = json.loads((folder / "report" / "ranking.json").read_text())
    assert without_cluster_dir(document) == without_cluster_dir(expected)
    assert document["levels"] == [2, 5] and len(document["ranking"]) == 3
