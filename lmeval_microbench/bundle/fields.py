"""Field readers and the small parts of a bundle: dataset, metric, provenance, estimator state.

Why a module of its own: these are the building blocks every section of a bundle is read
with: type checks that name the field at fault (``_get``, ``_object``, ``_no_unknown``,
``_non_empty``), conversion to plain JSON (``as_json_value``) and the self-validating value
types a :class:`~.schema.Bundle` is assembled from. :mod:`.schema` (the bundle document and
its versioning) and :mod:`.fit_spec` (the ``person_fit`` block) both read their fields with
them, so they sit below both.

A reader's ``lenient`` flag (a newer minor schema version) only lets unknown fields through;
a field of the wrong type is a :class:`~lmeval_microbench.errors.BundleError` in any version.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..errors import BundleError, InputError

SCORE_SCALES = ("fraction", "percent")
"""How the target metric is reported: fractions in [0, 1] or percentages in [0, 100]."""

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


# ---------------------------------------------------------------------------- field readers
def _type_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        dict: "object",
        list: "array",
        type(None): "null",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False  # JSON true is not a number
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, kinds)


def _get(
    obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = ...
) -> Any:
    """Field ``key`` of ``obj`` checked against ``kind``; missing -> default or error."""
    if key not in obj:
        if default is ...:
            raise BundleError(f"{where or 'bundle'}: missing required field {key!r}")
        return default
    value = obj[key]
    if not _is_kind(value, kind):
        path = f"{where}.{key}" if where else key
        raise BundleError(f"{path}: expected {_type_name(kind)}, got {value!r}")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise BundleError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _no_unknown(obj: Mapping[str, Any], known: Iterable[str], where: str, lenient: bool) -> None:
    unknown = sorted(set(obj) - set(known))
    if unknown and not lenient:
        raise BundleError(f"{where}: unknown fields {unknown} (known: {sorted(known)})")


def _non_empty(value: str, where: str) -> str:
    if not value.strip():
        raise BundleError(f"{where}: must not be empty")
    return value


def as_json_value(value: Any, where: str) -> Any:
    """``value`` as plain JSON types (numpy scalars/arrays converted); else a BundleError.

    Non-finite numbers are refused: strict JSON has no NaN, store null instead.
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BundleError(f"{where}: non-finite number {value!r} is not valid JSON (use null)")
        return float(value)
    if isinstance(value, Mapping):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise BundleError(f"{where}: object keys must be strings, got {bad[0]!r}")
        return {k: as_json_value(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json_value(v, f"{where}[{k}]") for k, v in enumerate(value)]
    raise BundleError(f"{where}: {type(value).__name__} is not a JSON value")


# ---------------------------------------------------------------------------- parts
@dataclass(frozen=True)
class DatasetCoordinates:
    """Where the benchmark's documents live: ``datasets.load_dataset(path, name, split=...)``."""

    path: str
    name: str | None = None
    split: str | None = None
    revision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "name": self.name,
            "split": self.split,
            "revision": self.revision,
        }

    @classmethod
    def from_dict(
        cls, obj: Any, where: str = "dataset", lenient: bool = False
    ) -> DatasetCoordinates:
        obj = _object(obj, where)
        _no_unknown(obj, ("path", "name", "split", "revision"), where, lenient)
        return cls(
            path=_non_empty(_get(obj, "path", str, where), f"{where}.path"),
            name=_get(obj, "name", (str, type(None)), where, None),
            split=_get(obj, "split", (str, type(None)), where, None),
            revision=_get(obj, "revision", (str, type(None)), where, None),
        )


@dataclass(frozen=True)
class MetricSpec:
    """The lm-eval score the subset estimates, e.g. ``acc_norm`` / ``none`` / ``mean``.

    ``scale`` says how estimates are reported: ``"fraction"`` (0-1) or ``"percent"`` (0-100).
    """

    name: str
    filter: str = "none"
    aggregation: str = "mean"
    higher_is_better: bool = True
    scale: str = "fraction"

    def __post_init__(self) -> None:
        if self.scale not in SCORE_SCALES:
            raise BundleError(f"metric.scale: {self.scale!r} is not one of {SCORE_SCALES}")
        if not self.name.strip():
            raise BundleError("metric.name: must not be empty")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "filter": self.filter,
            "aggregation": self.aggregation,
            "higher_is_better": self.higher_is_better,
            "scale": self.scale,
        }

    @classmethod
    def from_dict(cls, obj: Any, where: str = "metric", lenient: bool = False) -> MetricSpec:
        obj = _object(obj, where)
        _no_unknown(
            obj, ("name", "filter", "aggregation", "higher_is_better", "scale"), where, lenient
        )
        return cls(
            name=_get(obj, "name", str, where),
            filter=_get(obj, "filter", str, where),
            aggregation=_get(obj, "aggregation", str, where),
            higher_is_better=_get(obj, "higher_is_better", bool, where),
            scale=_get(obj, "scale", str, where),
        )


@dataclass(frozen=True)
class Provenance:
    """Where the subset came from: the source matrix (by hash and size), package, time."""

    source_sha256: str
    n_source_models: int
    n_source_items: int
    package_version: str
    created: str

    def __post_init__(self) -> None:
        if not _SHA256.match(self.source_sha256):
            raise BundleError(
                "provenance.source_sha256: expected 64 lowercase hex digits, "
                f"got {self.source_sha256!r}"
            )
        for name in ("n_source_models", "n_source_items"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BundleError(f"provenance.{name}: expected a positive integer, got {value!r}")
        try:
            datetime.fromisoformat(self.created.replace("Z", "+00:00"))
        except (ValueError, AttributeError) as exc:
            raise BundleError(
                f"provenance.created: expected an ISO 8601 timestamp, got {self.created!r}"
            ) from exc

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_sha256": self.source_sha256,
            "n_source_models": self.n_source_models,
            "n_source_items": self.n_source_items,
            "package_version": self.package_version,
            "created": self.created,
        }

    @classmethod
    def from_dict(cls, obj: Any, where: str = "provenance", lenient: bool = False) -> Provenance:
        obj = _object(obj, where)
        names = ("source_sha256", "n_source_models", "n_source_items", "package_version", "created")
        _no_unknown(obj, names, where, lenient)
        kinds = (str, int, int, str, str)
        return cls(**{n: _get(obj, n, k, where) for n, k in zip(names, kinds, strict=True)})


@dataclass(frozen=True)
class EstimatorSpec:
    """A fitted estimator as an opaque JSON state: ``{"name": ..., "state": {...}}``."""

    name: str
    state: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise BundleError(f"estimators: name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.state, Mapping):
            raise BundleError(f"estimators[{self.name!r}].state: expected an object")
        object.__setattr__(
            self, "state", as_json_value(self.state, f"estimators[{self.name!r}].state")
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state}

    @classmethod
    def from_dict(
        cls, obj: Any, where: str = "estimators[]", lenient: bool = False
    ) -> EstimatorSpec:
        obj = _object(obj, where)
        _no_unknown(obj, ("name", "state"), where, lenient)
        return cls(name=_get(obj, "name", str, where), state=dict(_get(obj, "state", dict, where)))


def utc_now() -> str:
    """Current time as an ISO 8601 UTC string with a ``Z`` suffix, to the second.

    ``SOURCE_DATE_EPOCH`` (seconds since 1970, the reproducible-builds convention) replaces
    the clock when set, so that two builds of the same inputs are byte for byte the same.
    """
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch:
        now = datetime.now(timezone.utc)
    elif epoch.isdigit():
        now = datetime.fromtimestamp(int(epoch), timezone.utc)
    else:
        raise InputError(
            f"SOURCE_DATE_EPOCH must be a whole number of seconds since 1970, got {epoch!r}"
        )
    return now.replace(microsecond=0).isoformat().replace("+00:00", "Z")
