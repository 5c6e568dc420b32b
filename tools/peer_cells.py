"""The peer suite's cells: which matrix, which models are sources and which are held out.

Every tool that measures on the peer suite's splits (:mod:`bench_peers` and the benches built
on its cells) reads a matrix and cuts it the same way, so a cell names the same source and
target models in all of them: :class:`Cell` names a split, :func:`load_matrix` reads a real
matrix of ``../shared/data``, :func:`cell_rows` draws the split's rows (the same targets for
every budget and population of a seed), and :func:`split_cell` gives the two response
matrices with their true scores.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from lmeval_microbench.responses import ResponseMatrix

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
V1 = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")
V2 = ("ifeval", "musr")
PSN = ("psn_mmlu", "psn_bbh")
PSN_BLOCKS = {
    "psn_mmlu": "MMLU",
    "psn_bbh": "BBH",
    "psn_arc": "ARC-C",
    "psn_gpqa": "GPQA Diamond",
    "psn_gsm8k": "GSM8K",
    "psn_hellaswag": "HellaSwag",
    "psn_humaneval": "HumanEval",
    "psn_math": "MATH",
    "psn_mbpp": "MBPP",
    "psn_theoremqa": "TheoremQA",
    "psn_simpleqa_zh": "Chinese SimpleQA",
}
"""Every whole benchmark of the psn matrix by its segment name; the suite uses ``PSN``, the
rest are the held-out check of ``tools/bench_psn_held_out.py``."""
MUSR_BLOCKS = ("musr_murder_mysteries", "musr_object_placements", "musr_team_allocation")
"""MuSR's three tasks, each read as a whole benchmark of its own (250-256 items, the same 348
models; ``tools/bench_musr_tasks.py``)."""
V1_ALL = 1000
"""Most source models of a v1 'all' population (``--v1-all``)."""
TARGET_SHARE = 0.2


@dataclass(frozen=True)
class Cell:
    matrix: str
    population: str
    protocol: str
    budget: int
    seed: int

    @property
    def key(self) -> str:
        return f"{self.matrix}/{self.population}/{self.protocol}/{self.budget}/{self.seed}"


# ---------------------------------------------------------------------- data
def require_data(data: Path) -> None:
    """Exit with a one-line message where the real data these benchmarks read is missing."""
    if not data.is_dir():
        sys.exit(f"no real data at {data}: this benchmark needs ../shared/data")


def load_matrix(name: str, data: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """0/1 values (models x items, complete rows), each model's mean over them, item ids."""
    if name in V2:
        frame = pd.read_parquet(data / "openllm_v2" / "responses" / f"{name}.parquet")
    elif name in V1:
        frame = pd.read_parquet(data / "openllm_v1" / "responses" / f"{name}_B.parquet")
    elif name in MUSR_BLOCKS:
        frame = pd.read_parquet(data / "openllm_v2" / "responses" / "musr.parquet")
        task = "musr." + name.removeprefix("musr_") + "."
        frame = frame[[c for c in frame.columns if str(c).startswith(task)]]
    else:
        segments = pd.read_csv(data / "psn_irt" / "column_segments_inferred.csv")
        row = segments[segments["benchmark"] == PSN_BLOCKS[name]].iloc[0]
        start, stop = int(row["start_col"]), int(row["end_col_exclusive"])
        frame = pd.read_csv(data / "psn_irt" / "combine.csv", header=None).iloc[:, start:stop]
        frame.columns = [f"psn.{name.removeprefix('psn_')}.{k}" for k in range(start, stop)]
    values = frame.to_numpy(dtype=np.float64)
    complete = ~np.isnan(values).any(axis=1)
    values = values[complete]
    return values, values.mean(axis=1), [str(c) for c in frame.columns]


def cell_rows(truth: np.ndarray, cell: Cell, v1_all: int) -> tuple[np.ndarray, np.ndarray]:
    """Source and target rows of a cell: the same targets for every budget and population."""
    n = truth.size
    count = max(1, round(TARGET_SHARE * n))
    rng = np.random.default_rng([cell.seed, _stable(cell.matrix)])
    order = np.argsort(-truth, kind="stable")
    if cell.protocol == "random":
        perm = rng.permutation(n)
        target, pool = perm[:count], perm[count:]
    elif cell.protocol == "extrapolation":
        target, pool = order[:count], order[count:]
    else:
        target, pool = order[-count:], order[:-count]
    size = v1_all if cell.population == "all" and cell.matrix in V1 else None
    if cell.population != "all":
        size = int(cell.population)
    if size is not None and size < pool.size:
        pool = np.random.default_rng([cell.seed, size, _stable(cell.matrix)]).choice(
            pool, size, replace=False
        )
    return np.sort(pool), np.sort(target)


def _stable(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


@lru_cache(maxsize=1)
def matrix_of(name: str, data: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """:func:`load_matrix`, read once per worker while its cells share a matrix."""
    return load_matrix(name, data)


class Split(NamedTuple):
    """A cell's source and held-out models with each one's true score (a tuple, so a tool
    unpacks the parts it reads)."""

    source: ResponseMatrix
    target: ResponseMatrix
    source_truth: np.ndarray
    target_truth: np.ndarray


def split_rows(
    values: np.ndarray, truth: np.ndarray, ids: list[str], rows: tuple[np.ndarray, np.ndarray]
) -> Split:
    """Any matrix cut by a cell's ``rows`` (a tool's own variant of a matrix: gaps punched in
    the sources, a pool of its items, answers split into parts). Model ids are ``m<row>``."""
    source, target = (ResponseMatrix(values[r], [f"m{k}" for k in r], ids) for r in rows)
    return Split(source, target, truth[rows[0]], truth[rows[1]])


def split_cell(cell: Cell, data: Path, v1_all: int = V1_ALL) -> Split:
    """The cell's split of its matrix (read through :func:`matrix_of`)."""
    values, truth, ids = matrix_of(cell.matrix, data)
    return split_rows(values, truth, ids, cell_rows(truth, cell, v1_all))
