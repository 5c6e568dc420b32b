"""``microbench adaptive build``: a pool of a user's own lm-eval task, then an adaptive run.

The original task is the local multiple-choice YAML of ``test_own_task`` (few-shot examples,
documents from JSON-lines files); the run's requests must be the original task's.
"""

from __future__ import annotations

import json
import re

import pytest
import test_harness
import test_own_task
from test_own_task import requests_by_item

from lmeval_microbench.adaptive import pool_state
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.harness.render import load_task

pytestmark = pytest.mark.slow
originals = test_own_task.originals
_offline_and_fresh = test_own_task._offline_and_fresh
tiny_model = test_harness.tiny_model


def test_pool_of_an_own_task_runs_with_the_original_requests(
    originals, tiny_model, tmp_path, capsys
):
    task = originals["toy_mc"]
    out = tmp_path / "pools"
    argv = ["adaptive", "build", "--responses", str(task["matrix"]), "--task", str(task["yaml"]),
            "--chance", "0.25"]  # fmt: skip
    assert main([*argv, "--metric", "acc_norm", "--out", str(out)]) == 0
    loud = capsys.readouterr().err
    assert re.search(r"person-fit folds:\s+\d+%\|", loud)  # the bar --quiet hides
    stages = [line.split("] ", 1)[1] for line in loud.splitlines() if "] " in line]
    assert [s.split(" ")[0] for s in stages] == [
        "reading",
        "loading",
        "rendering",
        "fitting",
        "writing",
    ]
    # an existing pool task is refused before any work: no stage past loading the task
    assert main([*argv, "--metric", "acc_norm", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already holds task 'microbench_pool_toy_mc'; pass --overwrite" in err
    assert "fitting" not in err and "rendering" not in err
    # --quiet: neither stage lines nor the person-fit folds' bar (lm-eval's own bar while it
    # builds the requests stays), the summary line stays
    quiet = [*argv, "--metric", "acc_norm", "--out", str(out), "--overwrite", "--quiet"]
    assert main(quiet) == 0
    said = capsys.readouterr()
    assert "] reading" not in said.err and "person-fit folds" not in said.err
    assert "wrote pool task microbench_pool_toy_mc" in said.out
    pool = pool_state(load_bundle(out / "toy_mc"))
    assert len(pool.item_ids) == test_own_task.N_ITEMS
    # the chance level sets the person-fit check and the floor of runs below the sources
    assert pool.bundle.person_fit.chance_from == "given"
    assert pool.state.score_map.floor == pytest.approx(0.25 - 0.05)
    assert main(["adaptive", "--model", "hf", "--model_args", test_harness.model_args(tiny_model),
                 "--tasks", "microbench_pool_toy_mc", "--include_path", str(out),
                 "--max-items", "3", "--output_path", str(tmp_path / "run")]) == 0  # fmt: skip
    (samples,) = (tmp_path / "run").glob("samples_*.jsonl")
    logged = [json.loads(line) for line in samples.read_text().splitlines()]
    original = requests_by_item(load_task(str(task["yaml"])), "id")
    assert len(logged) == 3
    for sample in logged:
        sent = [tuple(args) for args in sample["arguments"]]
        assert sent == [tuple(a) for a in original[sample["doc"]["item_id"]]]
