"""Join runs and matrices on item id, and write the result atomically.

Item metadata (``benchmark``, ``stratum``, ``content_hash``) is merged across sources: gaps
are filled from later sources, and with ``check_content`` one id carrying two different
content hashes is an error, because the same id would then stand for two questions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._io import atomic_path
from .._types import ItemId, ModelId
from ..errors import InputError
from ..responses import ITEM_FIELDS, ResponseMatrix
from ._records import natural_key, preview
from ._scores import SampleScores

MATRIX_SUFFIXES = (".parquet", ".csv")
"""File types :func:`write_matrix` writes (and ``ResponseMatrix.read`` reads)."""

_Meta = tuple[Any, ...]  # one item's values of ITEM_FIELDS


class _ItemTable:
    """Item metadata gathered from several sources, remembering where each id came from."""

    def __init__(self, check_content: bool) -> None:
        self.check_content = check_content
        self.meta: dict[ItemId, _Meta] = {}
        self.origin: dict[ItemId, str] = {}

    def merge(self, new_items: pd.DataFrame, where: Mapping[ItemId, str]) -> None:
        """Add ``new_items``; fill gaps, and refuse one id with two contents."""
        table = new_items[list(ITEM_FIELDS)].astype(object)
        table = table.where(table.notna(), None)
        for item_id, meta in zip(
            table.index, table.itertuples(index=False, name=None), strict=True
        ):
            previous = self.meta.get(item_id)
            if previous is None:
                self.meta[item_id], self.origin[item_id] = meta, where[item_id]
                continue
            old_hash, new_hash = previous[2], meta[2]
            if (
                self.check_content
                and old_hash is not None
                and new_hash is not None
                and old_hash != new_hash
            ):
                raise InputError(
                    f"item {item_id!r} has different content in {self.origin[item_id]} and "
                    f"{where[item_id]} (content hashes {old_hash[:12]}... vs {new_hash[:12]}...): "
                    "the same id names two different docs; check id_field/id_prefix, or pass "
                    "check_content=False (microbench collect --no-check-content) to keep the first"
                )
            self.meta[item_id] = tuple(
                o if o is not None else n for o, n in zip(previous, meta, strict=True)
            )

    def frame(self, item_ids: Sequence[ItemId]) -> pd.DataFrame:
        """Metadata of ``item_ids`` as the ``items`` frame of a matrix."""
        return pd.DataFrame.from_dict(
            {i: dict(zip(ITEM_FIELDS, self.meta[i], strict=True)) for i in item_ids},
            orient="index",
        )


def assemble_runs(
    per_model: Mapping[ModelId, Sequence[SampleScores]], *, source: str, check_content: bool
) -> ResponseMatrix:
    """Join runs on item id: one row per model, ids in natural order, NaN where not run."""
    rows: dict[ModelId, dict[ItemId, float]] = {}
    table = _ItemTable(check_content)
    for model, runs in per_model.items():
        row: dict[ItemId, float] = {}
        row_origin: dict[ItemId, str] = {}
        for run in runs:
            clash = [i for i in run.scores if i in row]
            if clash:
                raise InputError(
                    f"model {model!r}: items {preview(repr(i) for i in clash)} appear both in "
                    f"{row_origin[clash[0]]} and {run.where[clash[0]]} (give each task its own "
                    "id_prefix, e.g. id_prefix='{task}.')"
                )
            row.update(run.scores)
            row_origin.update(run.where)
            table.merge(run.items, run.where)
        rows[model] = row
    item_ids = sorted(table.meta, key=natural_key)
    model_ids = sorted(rows, key=natural_key)
    column = {item: k for k, item in enumerate(item_ids)}
    values = np.full((len(model_ids), len(item_ids)), np.nan)
    for r, model in enumerate(model_ids):
        count = len(rows[model])
        cols = np.fromiter((column[i] for i in rows[model]), dtype=np.intp, count=count)
        values[r, cols] = np.fromiter(rows[model].values(), dtype=np.float64, count=count)
    return ResponseMatrix(values, model_ids, item_ids, items=table.frame(item_ids), source=source)


def combine_models(
    matrices: Sequence[ResponseMatrix], *, check_content: bool = True
) -> ResponseMatrix:
    """Stack matrices by model (rows), joining items by id; a missing entry becomes NaN.

    Use it to add newly collected models to an existing matrix (e.g. a parquet/CSV read with
    :meth:`ResponseMatrix.read`). A model in two matrices is an error; item metadata is
    taken from the first matrix that has it, and with ``check_content`` differing content
    hashes for one item id are an error.
    """
    if not matrices:
        raise InputError("combine_models: no matrices given")
    owner: dict[ModelId, str] = {}
    for matrix in matrices:
        for model in matrix.model_ids:
            if model in owner:
                raise InputError(f"model {model!r} is in both {owner[model]} and {matrix.source}")
            owner[model] = matrix.source
    table = _ItemTable(check_content)
    for matrix in matrices:
        table.merge(matrix.items, dict.fromkeys(matrix.item_ids, matrix.source))
    joined = pd.concat([m.to_frame() for m in matrices], axis=0, join="outer", sort=False)
    item_ids = list(table.meta)
    return ResponseMatrix.from_frame(
        joined[item_ids],
        items=table.frame(item_ids),
        models=pd.concat([m.models for m in matrices], axis=0, sort=False),
        source="+".join(m.source for m in matrices),
    )


def write_matrix(matrix: ResponseMatrix, path: str | os.PathLike[str]) -> Path:
    """Write ``matrix`` atomically by extension: ``.parquet`` keeps item/model metadata,
    ``.csv`` holds the scores only (``model`` column, one column per item id)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        matrix.to_parquet(path)
    elif suffix == ".csv":
        with atomic_path(path) as tmp:
            matrix.to_frame().to_csv(tmp)
    else:
        raise InputError(f"{path}: unknown matrix file type {suffix!r} (use .parquet or .csv)")
    return path
