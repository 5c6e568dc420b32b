"""``microbench build --task`` without a network: one line naming the task and dataset, fast.

Before, ``build --task arc_easy`` offline retried for 30-100 s and ended in a traceback. The
command runs in a subprocess, as a user runs it, with an empty Hugging Face cache
(``HF_HOME``), once with ``HF_DATASETS_OFFLINE=1``/``HF_HUB_OFFLINE=1`` and once without them
but with the Hub unreachable (``HF_ENDPOINT`` on a closed local port, so nothing depends on
this machine's network).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmeval_microbench.errors import InputError
from lmeval_microbench.harness import offline
from lmeval_microbench.synthetic import random_item_params, simulate_responses

CLOSED = "http://127.0.0.1:9"
"""An endpoint that refuses connections at once (the discard port, nothing listening)."""
FAST = 60.0
"""Seconds the whole command may take (most of it is lm-eval's import and task index)."""


@pytest.fixture(scope="module")
def matrix_file(tmp_path_factory) -> Path:
    matrix, _ = simulate_responses(random_item_params(20, seed=5), 30, seed=6)
    path = tmp_path_factory.mktemp("offline") / "m.parquet"
    matrix.to_parquet(path)
    return path


def run_build(
    matrix_file: Path, tmp_path: Path, **env: str
) -> tuple[subprocess.CompletedProcess, float]:
    pytest.importorskip("lm_eval")
    base = {k: v for k, v in os.environ.items() if k not in offline.OFFLINE_VARIABLES}
    base = {k: v for k, v in base.items() if k not in offline.PROXY_VARIABLES}
    base |= {"HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_CACHE": str(tmp_path / "hf-ds"), **env}
    cli = Path(sys.executable).with_name("microbench")
    if not cli.exists():
        pytest.skip(f"the microbench command is not installed beside {sys.executable}")
    command = [str(cli)]
    start = time.monotonic()
    done = subprocess.run(
        [
            *command,
            *("build", "--responses", str(matrix_file), "--task", "arc_easy"),
            *("--metric", "acc_norm", "--method", "random", "--budget", "5"),
            *("--out", str(tmp_path / "my_tasks")),
        ],
        env=base,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, time.monotonic() - start


def check_one_line(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("microbench build:")]
    assert len(errors) == 1, done.stderr[-2000:]
    for needle in ("'arc_easy'", "'allenai/ai2_arc'", *needles):
        assert needle in errors[0], errors[0]


@pytest.mark.slow
def test_offline_variables_fail_in_one_line(matrix_file, tmp_path):
    done, seconds = run_build(
        matrix_file, tmp_path, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_ENDPOINT=CLOSED
    )
    check_one_line(done, "HF_DATASETS_OFFLINE is set", "not in the local Hugging Face cache")
    assert seconds < FAST
    assert not (tmp_path / "my_tasks").exists()


@pytest.mark.slow
def test_no_network_without_the_variables_fails_fast_in_one_line(matrix_file, tmp_path):
    done, seconds = run_build(matrix_file, tmp_path, HF_ENDPOINT=CLOSED)
    check_one_line(done, "no network: 127.0.0.1 cannot be reached", "HF_DATASETS_OFFLINE=1")
    assert seconds < FAST


def test_the_probe_and_what_needs_the_hub(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", CLOSED)
    assert offline.hub_address() == ("127.0.0.1", 9)
    start = time.monotonic()
    assert not offline.hub_reachable(timeout=1.0)
    assert time.monotonic() - start < 2.0
    assert offline.needs_hub("allenai/ai2_arc") and offline.needs_hub(None)
    assert not offline.needs_hub("json") and not offline.needs_hub(str(tmp_path))
    for name in offline.OFFLINE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert offline.offline_variable() is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert offline.offline_variable() == "HF_HUB_OFFLINE"


def test_online_errors_other_than_the_network_pass_through(monkeypatch):
    """A missing dataset with a working network is not called a network failure."""
    for name in (*offline.OFFLINE_VARIABLES, *offline.PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(offline, "hub_reachable", lambda timeout=0: True)
    with pytest.raises(FileNotFoundError), offline.dataset_access("t", "org/none"):
        raise FileNotFoundError("no such dataset")
    with pytest.raises(InputError, match="Hub could not be reached"):
        with offline.dataset_access("t", "org/none"):
            raise ConnectionError("reset")
