"""Labelled model x item score matrices: the input of every fit, selection and estimate.

Rows are models, columns are items; values are scores in [0, 1] (0/1 correctness or a
fractional metric such as mc2) and NaN means "not evaluated". Rows and columns are always
addressed by id, never by position, because lm-eval reorders documents across ranks.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES

from ._io import atomic_path, canonical_json, sha256_bytes
from ._json import parse_json
from ._text import preview as _preview
from ._types import ItemId, ModelId, duplicate_ids
from .errors import InputError, ItemMismatchError

ITEM_FIELDS = ("benchmark", "stratum", "content_hash")
"""Item metadata columns every matrix carries (values may be None)."""

_PARQUET_META_KEY = b"lmeval_microbench"
_NA_MARKERS = sorted(STR_NA_VALUES)
"""What pandas reads as missing by default ('', 'NA', 'nan', 'null', ...)."""
_FORMAT_VERSION = 1


def infer_item_metadata(item_ids: Sequence[ItemId]) -> pd.DataFrame:
    """Benchmark and stratum from dotted ids: ``"mmlu.anatomy.12"`` -> ``mmlu`` / ``anatomy``.

    Ids with one dot (``"arc.17"``) get a benchmark and no stratum; ids without a dot get
    neither. This matches the ids of the Open LLM Leaderboard matrices in ``shared/data``.
    """
    benchmarks: list[str | None] = []
    strata: list[str | None] = []
    for item_id in item_ids:
        parts = str(item_id).split(".")
        benchmarks.append(parts[0] if len(parts) >= 2 else None)
        strata.append(".".join(parts[1:-1]) if len(parts) >= 3 else None)
    return pd.DataFrame(
        {"benchmark": benchmarks, "stratum": strata, "content_hash": [None] * len(item_ids)},
        index=pd.Index(list(item_ids), name="item_id"),
        dtype=object,  # None stays None (pandas 3 would make these str columns with NaN)
    )


class ResponseMatrix:
    """Scores of ``n_models`` models on ``n_items`` items, with item and model metadata.

    Parameters
    ----------
    values
        Array of shape ``(n_models, n_items)``; finite values must lie in [0, 1], NaN marks
        an item a model was not evaluated on.
    model_ids, item_ids
        Unique ids for rows and columns.
    items
        Optional frame indexed by item id with columns ``benchmark``, ``stratum`` and
        ``content_hash`` (missing columns are inferred from the ids or left empty).
    models
        Optional frame indexed by model id with free-form metadata columns.
    source
        Where the data came from, quoted in error messages.
    """

    def __init__(
        self,
        values: np.ndarray,
        model_ids: Sequence[ModelId],
        item_ids: Sequence[ItemId],
        *,
        items: pd.DataFrame | None = None,
        models: pd.DataFrame | None = None,
        source: str = "<in-memory matrix>",
    ) -> None:
        self.source = source
        self.model_ids: tuple[ModelId, ...] = tuple(str(m) for m in model_ids)
        self.item_ids: tuple[ItemId, ...] = tuple(str(i) for i in item_ids)
        array = np.array(values, dtype=np.float64, copy=True)
        if array.ndim != 2 or array.shape != (len(self.model_ids), len(self.item_ids)):
            raise InputError(
                f"{source}: values have shape {array.shape}, expected "
                f"({len(self.model_ids)} models, {len(self.item_ids)} items)"
            )
        self._check_ids(self.model_ids, "model")
        self._check_ids(self.item_ids, "item")
        self._check_range(array)
        array.setflags(write=False)
        self.values = array
        self.items = self._normalise_items(items)
        self.models = self._normalise_models(models)
        self._item_pos = {item: k for k, item in enumerate(self.item_ids)}
        self._model_pos = {model: k for k, model in enumerate(self.model_ids)}

    # ------------------------------------------------------------------ validation
    def _refuse_duplicates(self, ids: Iterable[str], kind: str, where: str = "") -> None:
        """Ids are how every join is made: one seen twice is an error that names it."""
        dups = duplicate_ids(ids)
        if dups:
            raise InputError(f"{self.source}: {where}duplicate {kind} ids: {_preview(dups)}")

    def _check_ids(self, ids: tuple[str, ...], kind: str) -> None:
        self._refuse_duplicates(ids, kind)
        empty = [k for k, value in enumerate(ids) if value.strip() == "" or value == "nan"]
        if empty:
            raise InputError(f"{self.source}: {kind} at positions {_preview(empty)} has no id")

    def _check_range(self, array: np.ndarray) -> None:
        finite = np.isfinite(array)
        if np.isinf(array).any():
            rows, cols = np.nonzero(np.isinf(array))
            raise InputError(
                f"{self.source}: infinite score for model {self.model_ids[rows[0]]!r}, "
                f"item {self.item_ids[cols[0]]!r}"
            )
        bad = finite & ((array < 0) | (array > 1))
        if bad.any():
            rows, cols = np.nonzero(bad)
            raise InputError(
                f"{self.source}: score {float(array[rows[0], cols[0]])!r} outside [0, 1] for model "
                f"{self.model_ids[rows[0]]!r}, item {self.item_ids[cols[0]]!r} "
                f"({bad.sum()} such entries)"
            )

    def _normalise_items(self, items: pd.DataFrame | None) -> pd.DataFrame:
        inferred = infer_item_metadata(self.item_ids)
        if items is None:
            return inferred
        items = items.copy()
        items.index = items.index.map(str)
        self._refuse_duplicates(items.index, "item", "item metadata: ")
        missing = [i for i in self.item_ids if i not in items.index]
        if missing:
            raise InputError(f"{self.source}: item metadata lacks items {_preview(missing)}")
        items = items.loc[list(self.item_ids)]
        for field in ITEM_FIELDS:
            if field not in items.columns:
                items[field] = inferred[field]
        items = items.astype(object).where(items.notna(), None)
        items.index.name = "item_id"
        return items

    def _normalise_models(self, models: pd.DataFrame | None) -> pd.DataFrame:
        if models is None:
            return pd.DataFrame(index=pd.Index(list(self.model_ids), name="model"))
        models = models.copy()
        models.index = models.index.map(str)
        self._refuse_duplicates(models.index, "model", "model metadata: ")
        models = models.reindex(list(self.model_ids))
        models.index.name = "model"
        return models

    def check_fittable(self, *, allow_constant: bool = False) -> None:
        """Raise :class:`InputError` if a row or column has no data or carries no information.

        All-NaN rows/columns cannot be fitted at all; constant columns (every model right, or
        every model wrong) have infinite IRT difficulty. The message names the offenders.
        """
        observed = ~np.isnan(self.values)
        empty_rows = [self.model_ids[k] for k in np.flatnonzero(~observed.any(axis=1))]
        if empty_rows:
            raise InputError(f"{self.source}: models with no observed item: {_preview(empty_rows)}")
        empty_cols = [self.item_ids[k] for k in np.flatnonzero(~observed.any(axis=0))]
        if empty_cols:
            raise InputError(
                f"{self.source}: items no model was evaluated on: {_preview(empty_cols)}"
            )
        if not allow_constant:
            constant = self.constant_items()
            if constant:
                raise InputError(
                    f"{self.source}: items with the same score for every model carry no "
                    f"information (drop them with .drop_items()): {_preview(constant)}"
                )

    def constant_items(self) -> list[ItemId]:
        """Ids of items whose observed scores are all equal."""
        with np.errstate(invalid="ignore"):
            spread = np.nanmax(self.values, axis=0) - np.nanmin(self.values, axis=0)
        return [self.item_ids[k] for k in np.flatnonzero(~(spread > 0))]

    # ------------------------------------------------------------------ shape and access
    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape  # type: ignore[return-value]

    @property
    def n_models(self) -> int:
        return len(self.model_ids)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of evaluated entries."""
        return ~np.isnan(self.values)

    def __repr__(self) -> str:
        return (
            f"ResponseMatrix({self.n_models} models x {self.n_items} items, source={self.source!r})"
        )

    def item_positions(self, item_ids: Iterable[ItemId]) -> np.ndarray:
        """Column positions of ``item_ids``; :class:`ItemMismatchError` names the ids this
        matrix lacks (a user's file missing items a bundle reads: the file is named, and
        the items, not called unknown)."""
        item_ids = list(item_ids)
        missing = [i for i in item_ids if i not in self._item_pos]
        if missing:
            raise ItemMismatchError(
                f"{self.source}: lacks items {_preview(missing)} "
                f"({len(missing)} of the {len(item_ids)} asked for)"
            )
        return np.array([self._item_pos[i] for i in item_ids], dtype=np.intp)

    def model_positions(self, model_ids: Iterable[ModelId]) -> np.ndarray:
        """Row positions of ``model_ids``; :class:`InputError` names unknown ids."""
        model_ids = list(model_ids)
        missing = [m for m in model_ids if m not in self._model_pos]
        if missing:
            raise InputError(f"{self.source}: unknown models {_preview(missing)}")
        return np.array([self._model_pos[m] for m in model_ids], dtype=np.intp)

    def select_items(self, item_ids: Iterable[ItemId]) -> ResponseMatrix:
        """A matrix restricted to ``item_ids``, in that order."""
        positions = self.item_positions(item_ids)
        ids = [self.item_ids[k] for k in positions]
        return ResponseMatrix(
            self.values[:, positions],
            self.model_ids,
            ids,
            items=self.items.loc[ids],
            models=self.models,
            source=self.source,
        )

    def reindex_items(self, item_ids: Sequence[ItemId]) -> ResponseMatrix:
        """A matrix with exactly ``item_ids`` as columns; items this one lacks become NaN."""
        values = np.full((self.n_models, len(item_ids)), np.nan)
        known = [k for k, item in enumerate(item_ids) if item in self._item_pos]
        values[:, known] = self.values[:, self.item_positions([item_ids[k] for k in known])]
        items = infer_item_metadata(item_ids)
        present = [item_ids[k] for k in known]
        items.loc[present] = self.items.loc[present, list(ITEM_FIELDS)].to_numpy()
        return ResponseMatrix(
            values, self.model_ids, item_ids, items=items, models=self.models, source=self.source
        )

    def with_content_hashes(self, hashes: Sequence[str | None]) -> ResponseMatrix:
        """The same scores with ``items["content_hash"]`` replaced, one hash per item in order.

        Used when the documents a subset will run differ in form from the ones collected (the
        shipped tasks render each item's whole prompt), so the bundle must record theirs.
        """
        if len(hashes) != self.n_items:
            raise InputError(f"{len(hashes)} content hashes for {self.n_items} items")
        items = self.items.copy()
        items["content_hash"] = list(hashes)
        return ResponseMatrix(
            self.values,
            self.model_ids,
            self.item_ids,
            items=items,
            models=self.models,
            source=self.source,
        )

    def drop_items(self, item_ids: Iterable[ItemId]) -> ResponseMatrix:
        drop = set(item_ids)
        return self.select_items([i for i in self.item_ids if i not in drop])

    def select_models(self, model_ids: Iterable[ModelId]) -> ResponseMatrix:
        """A matrix restricted to ``model_ids``, in that order."""
        positions = self.model_positions(model_ids)
        ids = [self.model_ids[k] for k in positions]
        return self._with_rows(positions, ids)

    def _with_rows(self, positions: np.ndarray, ids: list[ModelId]) -> ResponseMatrix:
        """Rows ``positions`` of this matrix, already checked: a shallow copy whose row side
        (model ids, checked again, values, model metadata) is replaced. Its items, their
        metadata and the range of its values stay as they are; checking and inferring them
        anew for every fold and candidate took an eighth of the time of ``build`` on 348
        models x 12,096 items (34 of 271 s under cProfile)."""
        out = copy.copy(self)
        out.model_ids = tuple(ids)
        out._check_ids(out.model_ids, "model")
        out.values = self.values[positions]
        out.values.setflags(write=False)
        out.items = self.items.copy()
        out.models = out._normalise_models(self.models.loc[ids])
        out._model_pos = {model: k for k, model in enumerate(out.model_ids)}
        return out

    def row(self, model_id: ModelId) -> dict[ItemId, float]:
        """One model's observed scores keyed by item id (NaN entries left out)."""
        values = self.values[self.model_positions([model_id])[0]]
        return {i: float(v) for i, v in zip(self.item_ids, values, strict=True) if not np.isnan(v)}

    def mean_scores(self) -> np.ndarray:
        """Per-model mean over observed items (the subset accuracy lm-eval would print)."""
        with np.errstate(invalid="ignore"):
            return np.nanmean(self.values, axis=1)

    def strata(self) -> np.ndarray:
        """Stratum of each item (benchmark where no stratum is known), as an object array."""
        stratum = self.items["stratum"].where(
            self.items["stratum"].notna(), self.items["benchmark"]
        )
        return stratum.to_numpy(dtype=object)

    def fingerprint(self) -> str:
        """sha256 over ids and values: identifies the source matrix in bundle provenance."""
        header = canonical_json({"models": self.model_ids, "items": self.item_ids})
        values = np.ascontiguousarray(np.nan_to_num(self.values, nan=-1.0)).tobytes()
        return sha256_bytes(header + values)

    # ------------------------------------------------------------------ combining
    @classmethod
    def concat_items(cls, matrices: Sequence[ResponseMatrix]) -> ResponseMatrix:
        """Join matrices side by side (e.g. several benchmarks) on model id; missing -> NaN."""
        if not matrices:
            raise InputError("concat_items: no matrices given")
        frames = [m.to_frame() for m in matrices]
        dup_items = duplicate_ids([i for m in matrices for i in m.item_ids])
        if dup_items:
            raise InputError(
                f"concat_items: items appear in several matrices: {_preview(dup_items)}"
            )
        joined = pd.concat(frames, axis=1, join="outer", sort=False)
        items = pd.concat([m.items for m in matrices])
        models = pd.concat([m.models for m in matrices])
        models = models[~models.index.duplicated(keep="first")]
        return cls.from_frame(
            joined, items=items, models=models, source="+".join(m.source for m in matrices)
        )

    # ------------------------------------------------------------------ conversion and I/O
    def to_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.values, index=list(self.model_ids), columns=list(self.item_ids))
        frame.index.name = "model"
        return frame

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        items: pd.DataFrame | None = None,
        models: pd.DataFrame | None = None,
        source: str = "<data frame>",
    ) -> ResponseMatrix:
        """Build from a wide frame: index = model ids, columns = item ids."""
        try:
            values = frame.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError, OverflowError) as exc:  # text, or a 400-digit integer
            bad_cols = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
            raise InputError(
                f"{source}: non-numeric scores in columns {_preview(bad_cols)}"
                f"{_first_text_cell(frame, bad_cols)}"
            ) from exc
        return cls(
            values,
            list(frame.index),
            list(frame.columns),
            items=items,
            models=models,
            source=source,
        )

    def to_parquet(self, path: str | os.PathLike[str]) -> None:
        """Write a wide parquet (index ``model``) with item/model metadata in the file schema."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.to_frame(), preserve_index=True)
        meta = {
            "format_version": _FORMAT_VERSION,
            "items": json.loads(self.items.reset_index().to_json(orient="records")),
            "models": json.loads(self.models.reset_index().to_json(orient="records")),
        }
        schema_meta = dict(table.schema.metadata or {})
        schema_meta[_PARQUET_META_KEY] = json.dumps(meta).encode()
        table = table.replace_schema_metadata(schema_meta)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)

    @classmethod
    def read_parquet(cls, path: str | os.PathLike[str]) -> ResponseMatrix:
        """Read our parquet, or any wide parquet whose index/first column holds model ids."""
        import pyarrow.parquet as pq

        path = Path(path)
        try:
            # pyarrow cannot even select columns of a file with repeated names: check first
            _refuse_repeated_columns(pq.read_schema(path).names, str(path))
            table = pq.read_table(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: not a readable parquet file ({exc})") from exc
        frame = _with_model_index(table.to_pandas(), str(path))
        items, models = _parquet_metadata(table.schema.metadata, str(path))
        return cls.from_frame(frame, items=items, models=models, source=str(path))

    @classmethod
    def read_csv(cls, path: str | os.PathLike[str]) -> ResponseMatrix:
        """Read a wide CSV: first column model ids (or a ``model`` column), one column per item."""
        path = Path(path)
        try:
            # pandas renames a repeated column ('arc.1' -> 'arc.1.1') and names a blank one
            # ('Unnamed: 3'): check the header as written
            header = csv_header(path)
            _refuse_repeated_columns(header, str(path))
            _refuse_blank_columns(header, str(path))
            frame = read_csv_keeping_ids(path, header, "model")
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            raise InputError(f"{path}: not a readable CSV matrix ({exc})") from exc
        frame = _with_model_index(frame, str(path))
        return cls.from_frame(frame, source=str(path))

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ResponseMatrix:
        """Read a ``.parquet`` or ``.csv`` matrix by extension."""
        suffix = Path(path).suffix.lower()
        if suffix == ".parquet":
            return cls.read_parquet(path)
        if suffix in (".csv", ".tsv"):
            return cls.read_csv(path)
        raise InputError(f"{path}: unknown matrix file type {suffix!r} (use .parquet or .csv)")


_BITS = bytes.maketrans(b"\x00\x01", b"01")


def encode_rows(rows: np.ndarray) -> list[str] | list[list[float]]:
    """Answer rows for JSON: 0/1 rows as bit strings (compact), anything else as float lists."""
    if np.isin(rows, (0.0, 1.0)).all():
        return [row.astype(np.uint8).tobytes().translate(_BITS).decode() for row in rows]
    return rows.tolist()


def decode_rows(encoded: list[Any], width: int) -> np.ndarray:
    """The rows :func:`encode_rows` wrote, ``(len(encoded), width)`` when well formed."""
    if not encoded:
        return np.zeros((0, width))
    if isinstance(encoded[0], str):
        bits = np.array([np.frombuffer(row.encode(), dtype=np.uint8) for row in encoded])
        return (bits == ord("1")).astype(np.float64)
    return np.asarray(encoded, dtype=np.float64)


def _with_model_index(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Move model ids into the index: a ``model`` column, a named index, or the first column.

    A file without rows or item columns is refused here: every later step would fail on it
    with a message that does not say why.
    """
    if frame.index.name == "model":
        pass  # our own parquet: an item may even be called 'model'
    elif "model" in frame.columns:
        frame = frame.set_index("model")
    elif frame.index.name is None and isinstance(frame.index, pd.RangeIndex):
        if frame.shape[1] == 0:
            raise InputError(f"{source}: empty matrix")
        first = frame.columns[0]
        if len(frame) and pd.api.types.is_numeric_dtype(frame[first]):
            raise InputError(
                f"{source}: cannot find model ids: expected a 'model' column or a first column "
                "of names"
            )
        frame = frame.set_index(first)
    if len(frame) == 0:
        raise InputError(f"{source}: the matrix has no models (no rows under the header)")
    if frame.shape[1] == 0:
        raise InputError(f"{source}: the matrix has no items (no column besides the model ids)")
    return frame


def csv_header(path: Path, sep: str = ",") -> list[str]:
    """The column names of a CSV exactly as written (pandas would rename repeated ones)."""
    header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False)
    return header.iloc[0].tolist() if len(header) else []


def read_csv_keeping_ids(
    path: Path, header: Sequence[str], id_column: str, *, sep: str = ","
) -> pd.DataFrame:
    """A CSV whose ids are kept as written: ``007`` stays ``007``, ``NA`` is a name.

    pandas would read ``007`` as 7 and ``NA`` or ``null`` as missing. The column
    ``id_column`` is read as text (without it, the first column is the candidate for ids:
    no missing-value markers, types inferred); the other columns keep pandas' markers.
    """
    names = [name or f"Unnamed: {k}" for k, name in enumerate(header)]  # pandas' names
    ids = id_column if id_column in names else names[0] if names else id_column
    markers = {name: _NA_MARKERS for name in names if name != ids}
    dtype = {ids: str} if ids == id_column else None
    return pd.read_csv(path, sep=sep, keep_default_na=False, na_values=markers, dtype=dtype)


def _refuse_blank_columns(header: Sequence[str], source: str) -> None:
    """A column without a name has no item id (the first may be an unnamed id column)."""
    blank = [k + 1 for k, name in enumerate(header) if k > 0 and not name.strip()]
    if blank:
        raise InputError(f"{source}: columns {_preview(blank)} have no name (no item id)")


def _refuse_repeated_columns(names: Iterable[str], source: str) -> None:
    """A column name seen twice is an item id seen twice (or a repeated model column)."""
    dups = duplicate_ids(name for name in names if name)
    if dups:
        raise InputError(f"{source}: duplicate item ids: {_preview(dups)}")


def _parquet_metadata(
    schema_meta: dict[bytes, bytes] | None, source: str
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Item and model metadata stored by :meth:`ResponseMatrix.to_parquet` (None if absent)."""
    raw = (schema_meta or {}).get(_PARQUET_META_KEY)
    if raw is None:
        return None, None
    where = f"{source}: unreadable {_PARQUET_META_KEY.decode()!r} metadata"
    meta = parse_json(raw, where)
    if not isinstance(meta, dict):
        raise InputError(f"{where} (a JSON {type(meta).__name__}, not an object)")
    version = meta.get("format_version")
    if version != _FORMAT_VERSION:
        raise InputError(f"{source}: unknown matrix format version {version!r}")
    try:
        items = pd.DataFrame(meta["items"]).set_index("item_id")
        models = pd.DataFrame(meta["models"]).set_index("model") if meta["models"] else None
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where} ({type(exc).__name__}: {exc})") from exc
    return items, models


def _first_text_cell(frame: pd.DataFrame, columns: Sequence[Any]) -> str:
    """`` (model 'm', item 'i': 'yes')`` for the first cell of ``columns`` that is not a
    number (a word, or an integer too large for a float), or ``""`` when none is found."""
    for column in columns:
        for at, cell in enumerate(frame[column].tolist()):
            if not _is_number(cell):
                text = repr(cell) if len(repr(cell)) <= 40 else f"{repr(cell)[:37]}..."
                return f" (model {frame.index[at]!r}, item {column!r}: {text})"
    return ""


def _is_number(cell: Any) -> bool:
    if cell is None or cell is pd.NA:
        return True  # a gap, not text
    try:
        float(cell)
    except (TypeError, ValueError, OverflowError):
        return False
    return True
