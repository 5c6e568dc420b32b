"""What a person reads: units in our tables, the few-shot label, warnings, skipped paths.

The reconstruction fixtures (two toy bundles as a task suite, lm-eval run folders written by
hand) are those of ``test_reconstruct``.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import reconstruct_support
import yaml
from reconstruct_support import TS, run_of

from lmeval_microbench.cli._warnings import one_line_warnings
from lmeval_microbench.cli.demo import TABLE_NOTE
from lmeval_microbench.errors import InputError
from lmeval_microbench.harness import OPENLLM_V1_TASKS, include_path
from lmeval_microbench.harness.estimates import logged_warnings
from lmeval_microbench.runs import UNIT, ReconstructionWarning, note, reconstruct_runs

toys = reconstruct_support.toys  # fixtures: two toy bundles and their task suite
suite = reconstruct_support.suite

SUITE = include_path() / "openllm_v1"
CUSTOM_KWARGS = "Custom kwargs can be passed to `--metadata`"
"""The start of lm-eval 0.4.13's warning for every task with a ``custom_dataset``."""


def reconstruct(paths, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)
        return reconstruct_runs(paths, progress=False, **kwargs)


# ---------------------------------------------------------------------------- units
def test_every_score_column_of_the_table_says_percent(tmp_path, suite, toys):
    for k, bm in enumerate(("toya", "toyb")):
        run_of(tmp_path / "out", "m", toys[bm], seed=k)
    table = reconstruct(tmp_path / "out", bundles=[suite]).to_markdown()
    header = table.splitlines()[0]
    assert header == f"| model | toya {UNIT} | toyb {UNIT} | average {UNIT} |"
    legend = table.split("\n\n")[1]
    assert "in percent" in legend and "as fractions" in legend  # lm-eval's unit named too
    assert "recomputed from the answers the run logged" in legend
    assert "not the share of subset items answered right" in legend


def test_the_demo_table_note_explains_its_columns():
    for column in ("subset score", "estimate", "in-run = recomputed"):
        assert f"{column}:" in TABLE_NOTE
    assert "informative, not typical" in TABLE_NOTE


# ---------------------------------------------------------------------------- few-shot label
class _TaggedLoader(yaml.SafeLoader):
    """Reads ``!function x.y`` as the string ``x.y``."""


_TaggedLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


@pytest.mark.parametrize("task", OPENLLM_V1_TASKS)
def test_the_alias_says_where_the_few_shot_examples_are(task):
    config = yaml.load((SUITE / f"{task}.yaml").read_text(), Loader=_TaggedLoader)
    assert config["num_fewshot"] == 0  # lm-eval's n-shot column: 0
    alias = config["task_alias"]
    assert alias.startswith(f"{task} (")
    shots = re.search(r"(\d+)-shot", alias)
    assert shots is not None, alias
    assert shots.group(1) == "0" or alias.endswith("-shot prompts built in)"), alias


# ---------------------------------------------------------------------------- lm-eval's log
@pytest.fixture
def lm_eval_log():
    """Every record lm-eval logs while a test runs (its loggers may not reach the root)."""
    pytest.importorskip("lm_eval")
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("lm_eval")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def test_a_shipped_task_loads_without_the_custom_kwargs_advice(lm_eval_log, tmp_path, suite):
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=str(SUITE.parent), include_defaults=False)
    loaded = manager.load(["microbench_mmlu"])
    assert len(loaded["tasks"]["microbench_mmlu"].eval_docs) == 50
    assert not [r for r in lm_eval_log if CUSTOM_KWARGS in r.getMessage()]
    # the control: a task not named after its YAML is not known as ours, and lm-eval advises
    text = (suite / "microbench_toya.yaml").read_text()
    (suite / "control.yaml").write_text(text.replace("task: microbench_toya", "task: control_x"))
    loaded = TaskManager(include_path=str(suite), include_defaults=False).load(["control_x"])
    assert len(loaded["tasks"]["control_x"].eval_docs) == reconstruct_support.BUDGET
    advice = [r.getMessage() for r in lm_eval_log if CUSTOM_KWARGS in r.getMessage()]
    assert advice and all(m.startswith("control_x:") for m in advice)


def test_our_warnings_in_the_run_are_log_lines(caplog):
    caplog.set_level(logging.WARNING, "lmeval_microbench.harness")
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        with logged_warnings():
            note("first line\n   second line")
            warnings.warn("not ours", DeprecationWarning, stacklevel=1)
    assert [r.getMessage() for r in caplog.records] == ["first line second line"]
    assert [str(w.message) for w in raised] == ["not ours"]


# ---------------------------------------------------------------------------- CLI warnings
def test_one_line_warnings_print_ours_without_a_source_line(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with one_line_warnings():
            note("model 'm': two runs\n found")
    assert capsys.readouterr().err == "warning: model 'm': two runs found\n"


def test_a_duplicate_run_warns_in_one_line_through_the_cli(tmp_path, suite, toys):
    out = tmp_path / "out"
    run_of(out, "m", toys["toya"], seed=1)
    run_of(out, "m", toys["toya"], seed=2, ts=TS.replace("2025", "2026"))
    code = "import sys; from lmeval_microbench.cli.app import main; sys.exit(main(sys.argv[1:]))"
    argv = ["reconstruct", str(out), "--bundle", str(suite), "--quiet"]
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(
        re.match(r"warning: model 'm', task 'microbench_toya': 2 runs found", x) for x in lines
    )
    assert "Warning:" not in done.stderr and ".py:" not in done.stderr  # no category, no source


# ---------------------------------------------------------------------------- paths
def test_a_missing_path_is_noted_and_the_others_are_read(tmp_path, suite, toys):
    run_of(tmp_path / "out", "m", toys["toya"], seed=1)
    (tmp_path / "empty").mkdir()
    paths = [tmp_path / "out", tmp_path / "ckpt-*", tmp_path / "empty"]
    result = reconstruct(paths, bundles=[suite])
    assert result.models == ["m"]
    assert f"{tmp_path / 'ckpt-*'}: no such file or folder (a pattern that matched nothing?)" in (
        "\n".join(result.notes)
    )
    assert any(n.startswith(f"{tmp_path / 'empty'}: no samples_*.jsonl") for n in result.notes)
    with pytest.raises(InputError, match="no samples_"):
        reconstruct([tmp_path / "ckpt-*", tmp_path / "empty"], bundles=[suite])


def test_the_reconstruct_help_explains_every_column():
    from lmeval_microbench.cli.reconstruct import EPILOG

    for column in ("BENCHMARK (%)", "average (%)", "average (joint) (%)", "†"):
        assert column in EPILOG
    assert (
        Path(__file__).parents[1].joinpath("README.md").read_text().count("## Reading the output")
        == 1
    )
