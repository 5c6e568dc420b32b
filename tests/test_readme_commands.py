"""Every README command marked runnable runs as written (issue 22: a new user's first hour).

The marker
----------
An HTML comment on the line right before a fenced ``bash`` block (invisible on GitHub)::

    <!-- runnable -->          runs in the default test run (seconds to a minute on CPU)
    <!-- runnable: slow -->    runs only with ``pytest -m slow`` (minutes)

The whole block runs as one ``bash -e -o pipefail`` script (so ``D=...`` and ``\\``
continuations work, and a later command may use an earlier one's output), in a fresh
temporary folder, with this virtual environment's ``bin`` first on ``PATH`` (``microbench``,
``lm-eval``, ``microbench tasks-dir``), ``HF_HUB_OFFLINE=1``/``HF_DATASETS_OFFLINE=1`` and
matplotlib's ``Agg`` backend. A block fails the test if it exits non-zero or prints a Python
traceback on stderr.

What the README leaves to the reader is filled in by :data:`SUBSTITUTIONS` (text replaced in
the block before it runs) and :data:`SETUP_FILES` (files made in the folder when the block
names them); both are kept to placeholders, so what runs is what the README says:

- ``../shared/data`` (the real data beside the repository) -> its absolute path
  (``MICROBENCH_SHARED_DATA``); the blocks that need it skip, with the reason, when it is absent;
- ``mmlu_B.parquet`` / ``mmlu_B_scores.csv`` (a bare file name: "your matrix") -> the
  leaderboard MMLU matrix and its scores in the shared data;
- ``MODEL`` (``pretrained=MODEL``) -> a random 2-layer GPT-2 saved at test time
  (``tests/tiny_models.py``; nothing downloaded);
- ``new_models.parquet`` ("your new models") -> 5 models of the MMLU matrix, written there.

Not marked, and why (:data:`NOT_RUNNABLE` names each by how its first line starts; a new bash
block must be marked or listed there, or :func:`test_every_bash_block_is_classified` fails):

- the Quick start install + demo, and the test-suite command: they install from the network
  and run for many minutes (the demo is tested in ``tests/test_demo.py``);
- "Use with lm-eval" (``lm-eval ... --tasks microbench_openllm``, ``microbench eval``,
  ``reconstruct``): all six tasks are 574 items, 249 of them gsm8k generations; on the tiny
  GPT-2 on 2 CPU cores one run took over 10 minutes (the integration is tested on small tasks
  in ``tests/test_harness.py`` and ``tests/test_cli_eval.py``);
- the leaderboard v2 block (IFEval generations of up to 1,280 tokens: minutes);
- "Your own micro-benchmark" (``collect runs/ --tasks arc_easy``, ``build --task arc_easy``):
  needs the reader's own runs and the arc_easy dataset from the network;
- the checkpoint curve loop (``microbench eval`` per checkpoint: the reader's checkpoints);
- the live ``microbench rank`` commands (the reader's ``models.txt``; the cluster round block
  also a Slurm cluster: ``tests/test_rank_cluster.py`` runs planned rounds on tiny models);
- the Hub user's download of a published micro-benchmark (the network; the card's commands
  run against a fake Hub in ``tests/test_publish_repo.py``);
- ``microbench adaptive`` (``--device cuda:0``, and ``...`` placeholders).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MARKER = re.compile(r"^<!--\s*runnable(?::\s*(?P<tag>slow))?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")
BLOCK_SECONDS = 300
"""Per block; a default block should take well under a minute."""

SUBSTITUTIONS: tuple[tuple[str, str], ...] = (
    (r"\.\./shared/data", "{shared}"),
    (r"(?<![/\w])mmlu_B\.parquet", "{shared}/openllm_v1/responses/mmlu_B.parquet"),
    (r"(?<![/\w])mmlu_B_scores\.csv", "{shared}/openllm_v1/scores/mmlu_B_scores.csv"),
    (r"\bpretrained=MODEL\b", "pretrained={model}"),
)
"""(regex, replacement) applied in order to a block's text before it runs."""

SETUP_FILES = {"new_models.parquet": "five models of the shared MMLU matrix"}
"""File names a block may use as the reader's own, made in its folder by :func:`_setup`."""

NOT_RUNNABLE = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch": "network install, "
    "then the demo runs for minutes (tested in tests/test_demo.py)",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -q torch": "network install, "
    "then the whole test suite",
    "lm-eval --model hf --model_args pretrained=MODEL --tasks microbench_openllm ": "all six "
    "tasks, 249 gsm8k generations: over 10 minutes per command on CPU",
    "lm-eval run --model hf --model_args pretrained=MODEL --tasks microbench_openllm_v2": "IFEval "
    "generations of up to 1,280 tokens: minutes on CPU",
    "microbench collect runs/ --tasks arc_easy": "the reader's own runs, and arc_easy's dataset "
    "from the network",
    "for step in 1000 2000 4000 8000; do": "the reader's checkpoints",
    "# live: many models through lm-eval": "the reader's models.txt",
    "microbench rank --model hf --model-args-file models.txt --tasks microbench_mmlu": "the "
    "reader's models.txt and a Slurm cluster (tests/test_rank_cluster.py runs the planned "
    "lm_eval commands on tiny models)",
    'python -c "from huggingface_hub import snapshot_download': "downloads from the Hub (the "
    "card's commands run against a fake Hub in tests/test_publish_repo.py)",
    "microbench adaptive --model hf": "--device cuda:0, and `...` placeholders",
}
"""How each bash block left unmarked starts (a prefix of its first line), and why."""


@dataclass(frozen=True)
class Block:
    """A fenced code block of the README."""

    line: int
    """1-based line of its opening fence."""
    lang: str
    text: str
    tag: str | None
    """None: not marked; "" : runnable; "slow": runnable, slow."""

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text``, each with the marker on the line before it, if any."""
    blocks, lines = [], text.splitlines()
    k = 0
    while k < len(lines):
        fence = FENCE.match(lines[k])
        if fence is None:
            k += 1
            continue
        end = next((j for j in range(k + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise AssertionError(f"README.md:{k + 1}: unclosed code fence")
        marker = MARKER.match(lines[k - 1]) if k > 0 else None
        tag = None if marker is None else (marker.group("tag") or "")
        body = "\n".join(lines[k + 1 : end])
        blocks.append(Block(k + 1, fence.group("lang"), body, tag))
        k = end + 1
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
RUNNABLE = [b for b in BLOCKS if b.tag is not None]


def _param(block: Block) -> object:
    marks = [pytest.mark.slow] if block.tag == "slow" else []
    return pytest.param(block, id=f"README.md:{block.line}", marks=marks)


# ---------------------------------------------------------------------------- the parser
def test_the_marker_grammar():
    text = "\n".join(
        [
            "<!-- runnable -->",
            "```bash",
            "echo a",
            "```",
            "```bash",
            "echo b",
            "```",
            "<!--runnable: slow-->",
            "```bash",
            "echo c \\",
            "  d",
            "```",
        ]
    )
    blocks = readme_blocks(text)
    assert [(b.line, b.tag, b.text) for b in blocks] == [
        (2, "", "echo a"),
        (5, None, "echo b"),
        (9, "slow", "echo c \\\n  d"),
    ]


def test_every_bash_block_is_classified():
    """A bash block is marked runnable or named in NOT_RUNNABLE (with its reason above)."""
    unclassified = [
        f"README.md:{b.line}: {b.first_line!r}"
        for b in BLOCKS
        if b.lang == "bash" and b.tag is None and not b.first_line.startswith(tuple(NOT_RUNNABLE))
    ]
    assert not unclassified, (
        "mark these `<!-- runnable -->` (or `<!-- runnable: slow -->`) or add them to "
        f"NOT_RUNNABLE in {Path(__file__).name} with the reason: {unclassified}"
    )
    assert all(b.lang == "bash" for b in RUNNABLE), "only bash blocks can be marked runnable"
    assert RUNNABLE, "no README block is marked runnable"


# ---------------------------------------------------------------------------- running
def substitute(text: str, *, shared: Path, model: Path | None) -> str:
    """The block as it runs here: :data:`SUBSTITUTIONS` applied in order."""
    for pattern, replacement in SUBSTITUTIONS:
        if "{model}" in replacement and re.search(pattern, text) and model is None:
            raise AssertionError("a block uses MODEL but no tiny model was built")
        value = replacement.format(shared=shared, model=model)
        text = re.sub(pattern, lambda _m, v=value: v, text)
    return text


def _setup(text: str, folder: Path, shared: Path) -> None:
    """Make the :data:`SETUP_FILES` the block names."""
    if "new_models.parquet" in text:
        from lmeval_microbench.responses import ResponseMatrix

        matrix = ResponseMatrix.read(shared / "openllm_v1" / "responses" / "mmlu_B.parquet")
        matrix.select_models(matrix.model_ids[:5]).to_parquet(folder / "new_models.parquet")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    from tiny_models import build_random_gpt2

    return build_random_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), seed=0)


def _environment() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "MPLBACKEND": "Agg",
        "MICROBENCH_REPO": str(REPO),
    }


@pytest.mark.parametrize("block", [_param(b) for b in RUNNABLE])
def test_readme_block_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest):
    uses_shared = re.search(r"\.\./shared/data|(?<![/\w])mmlu_B", block.text) or any(
        name in block.text for name in SETUP_FILES
    )
    shared = request.getfixturevalue("shared_data") if uses_shared else Path("/nonexistent")
    model = request.getfixturevalue("tiny_model") if "MODEL" in block.text else None
    script = substitute(block.text, shared=shared, model=model)
    _setup(block.text, tmp_path, shared)
    start = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=BLOCK_SECONDS,
    )
    seconds = time.monotonic() - start
    where = f"README.md:{block.line} ({seconds:.0f} s)\n--- ran:\n{script}\n--- stderr:\n"
    assert done.returncode == 0, where + done.stderr[-4000:]
    assert "Traceback (most recent call last)" not in done.stderr, where + done.stderr[-4000:]
