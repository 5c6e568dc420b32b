"""The bundle schema: one versioned, checksummed JSON document per micro-benchmark subset.

A bundle is everything needed to run a subset and turn its scores into a full-benchmark
estimate, without the source response matrix: which items (ids, content hashes, weights),
where they come from (dataset coordinates), what score they estimate (metric), the IRT
parameters and fitted estimator states, how the subset was built (provenance) and how well
it did when measured (reliability).

Decisions worth knowing
-----------------------
* Items are keyed by id everywhere; ``content_hashes`` is a mapping, never a parallel list.
* IRT parameters, when present, are stored for every item they were fitted on in the
  source matrix (usually all of it, minus constant items), not only the subset: IRT and
  p-IRT estimators extrapolate to the unseen items and need their parameters. They must
  cover every subset item and can cover at most ``provenance.n_source_items`` items.
* A ``None`` content hash means "unknown": :func:`lmeval_microbench.bundle.verify_items`
  then skips that item with a warning instead of failing.
* ``method``, ``seed`` and ``budget`` live once, in the ``subset`` section (budget is the
  number of items), so the provenance cannot disagree with the subset.
* The document is strict JSON (no NaN/Infinity), so any JSON reader can open it.
* ``checksums`` guards against corruption and hand edits, not against forgery; what it
  covers in each version is :mod:`.integrity`'s business.

Versioning: ``schema_version`` is ``"major.minor"``. A reader refuses another major version;
it reads a newer minor version with a :class:`BundleVersionWarning`, ignoring the fields it
does not know (minor versions only ever add optional fields). Unknown fields in a file of
this version or older are an error, because they are typos. 1.1 added
``checksums.document``, which seals the list of side files too; 1.2 the optional
``person_fit`` block (:mod:`.fit_spec`: thresholds and chance levels of the person-fit check).
A reader accepts ``person_fit`` in a file of any 1.x version; older bundles simply have none.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import __version__
from .._io import canonical_json
from .._text import preview as _preview
from .._types import ItemId
from ..errors import BundleError, InputError
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..selection.base import Subset

if TYPE_CHECKING:
    from .fit_spec import PersonFitSpec

SCHEMA_VERSION = "1.2"
"""Version this package writes; it reads any ``1.x``."""

SCORE_SCALES = ("fraction", "percent")
"""How the target metric is reported: fractions in [0, 1] or percentages in [0, 100]."""

_HEX = re.compile(r"^[0-9a-f]+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_WEIGHT_TOLERANCE = 1e-9  # same tolerance as Subset


class BundleVersionWarning(UserWarning):
    """A bundle was written by a newer minor schema version; unknown fields were ignored."""


# ---------------------------------------------------------------------------- versions
def parse_version(value: Any, where: str) -> tuple[int, int]:
    """``"1.0"`` -> ``(1, 0)``; anything else is a :class:`BundleError` naming ``where``."""
    if not isinstance(value, str) or not re.fullmatch(r"\d+\.\d+", value):
        raise BundleError(f"{where}: schema_version must be a 'major.minor' string, got {value!r}")
    major, minor = value.split(".")
    return int(major), int(minor)


def check_version(value: Any, where: str, *, warn: bool = True) -> bool:
    """Accept ``value`` if its major version is ours; return True if its minor is newer.

    A newer minor version is read, with a :class:`BundleVersionWarning` when ``warn``.
    """
    major, minor = parse_version(value, where)
    own_major, own_minor = parse_version(SCHEMA_VERSION, "SCHEMA_VERSION")
    if major != own_major:
        raise BundleError(
            f"{where}: bundle schema version {value} is not supported; this lmeval-microbench "
            f"{__version__} reads schema {own_major}.x (writes {SCHEMA_VERSION})"
            + ("; upgrade lmeval-microbench" if major > own_major else "")
        )
    if minor > own_minor and warn:
        warnings.warn(
            f"{where}: bundle schema version {value} is newer than {SCHEMA_VERSION}; "
            "fields this version does not know are ignored (upgrade lmeval-microbench)",
            BundleVersionWarning,
            stacklevel=3,
        )
    return minor > own_minor


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


# ---------------------------------------------------------------------------- the bundle
_TOP_LEVEL = (
    "schema_version",
    "name",
    "benchmark",
    "license",
    "description",
    "dataset",
    "metric",
    "subset",
    "irt",
    "estimators",
    "default_estimator",
    "provenance",
    "reliability",
    "person_fit",
)


@dataclass(frozen=True, eq=False)
class Bundle:
    """A versioned micro-benchmark: subset items with weights plus what estimates need.

    Construct with :meth:`from_parts` (from a selection run) or :meth:`from_dict` (from a
    file); both validate. Two bundles are equal when their JSON forms are equal.

    Attributes
    ----------
    name, benchmark : identifiers, e.g. ``"mmlu-100-anchor"`` and ``"mmlu"``.
    subset : the selected item ids, weights (summing to 1), method, seed and method info.
    content_hashes : item id -> lowercase hex content hash, or None when unknown.
    metric : the lm-eval metric being estimated.
    provenance : source matrix hash and size, package version, creation time.
    estimators : fitted estimator states; ``default_estimator`` names the one to use.
    irt : IRT parameters of the source items (a superset of the subset), or None.
    dataset : Hugging Face coordinates of the benchmark documents, or None.
    reliability : measured numbers (e.g. ``{"mae": 0.012, "coverage": 0.91}``); may be empty.
    license : licence of the bundle's content (Hub card); None means "other".
    person_fit : thresholds and chance levels of the person-fit check, or None (no check).
    """

    name: str
    benchmark: str
    subset: Subset
    content_hashes: Mapping[ItemId, str | None]
    metric: MetricSpec
    provenance: Provenance
    estimators: tuple[EstimatorSpec, ...]
    default_estimator: str
    irt: ItemParams | None = None
    dataset: DatasetCoordinates | None = None
    reliability: dict[str, Any] = field(default_factory=dict)
    license: str | None = None
    description: str | None = None
    person_fit: PersonFitSpec | None = None

    def __post_init__(self) -> None:
        for attr in ("name", "benchmark"):
            value = getattr(self, attr)
            if not isinstance(value, str) or not value.strip():
                raise BundleError(f"{attr}: expected a non-empty string, got {value!r}")
        object.__setattr__(self, "content_hashes", self._checked_hashes(self.content_hashes))
        object.__setattr__(self, "estimators", self._checked_estimators(self.estimators))
        object.__setattr__(
            self, "reliability", as_json_value(dict(self.reliability), "reliability")
        )
        object.__setattr__(self, "subset", self._checked_subset_info(self.subset))
        self._check_irt_coverage()
        self._check_person_fit()
        if self.provenance.n_source_items < self.subset.budget:
            raise BundleError(
                f"provenance.n_source_items: {self.provenance.n_source_items} is smaller than "
                f"the {self.subset.budget} subset items"
            )

    # ------------------------------------------------------------------ checks
    def _checked_hashes(self, hashes: Mapping[ItemId, str | None]) -> dict[ItemId, str | None]:
        ids = self.subset.item_ids
        missing = [i for i in ids if i not in hashes]
        in_subset = set(ids)
        extra = [i for i in hashes if i not in in_subset]
        if missing or extra:
            raise BundleError(
                "content_hashes must have exactly the subset items: "
                + "; ".join(
                    part
                    for part in (
                        f"missing {_preview(missing)}" if missing else "",
                        f"not in the subset {_preview(extra)}" if extra else "",
                    )
                    if part
                )
            )
        for item in ids:
            value = hashes[item]
            if value is not None and not (isinstance(value, str) and _HEX.match(value)):
                raise BundleError(
                    f"content_hash of item {item!r}: expected a lowercase hex string or null, "
                    f"got {value!r}"
                )
        return {item: hashes[item] for item in ids}

    def _checked_estimators(self, estimators: Iterable[Any]) -> tuple[EstimatorSpec, ...]:
        specs = tuple(
            e if isinstance(e, EstimatorSpec) else EstimatorSpec.from_dict(e, f"estimators[{k}]")
            for k, e in enumerate(estimators)
        )
        if not specs:
            raise BundleError("estimators: a bundle needs at least one estimator")
        names = [s.name for s in specs]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise BundleError(f"estimators: duplicate estimator names {dups}")
        if self.default_estimator not in names:
            raise BundleError(
                f"default_estimator: {self.default_estimator!r} is not one of the stored "
                f"estimators {names}"
            )
        return specs

    def _checked_subset_info(self, subset: Subset) -> Subset:
        info = as_json_value(dict(subset.info), "subset.info")
        if subset.seed is not None and (
            isinstance(subset.seed, bool) or not isinstance(subset.seed, (int, np.integer))
        ):
            raise BundleError(f"subset.seed: expected an integer or null, got {subset.seed!r}")
        seed = None if subset.seed is None else int(subset.seed)
        return Subset(subset.item_ids, subset.weights, subset.method, seed, info)

    def _check_irt_coverage(self) -> None:
        if self.irt is None:
            return
        known = set(self.irt.item_ids)
        missing = [i for i in self.subset.item_ids if i not in known]
        if missing:
            raise BundleError(f"irt: no IRT parameters for subset items {_preview(missing)}")
        if self.irt.n_items > self.provenance.n_source_items:
            raise BundleError(
                f"irt: parameters for {self.irt.n_items} items, more than the "
                f"{self.provenance.n_source_items} items of the source matrix"
            )

    def _check_person_fit(self) -> None:
        """Per-item chance must be the subset's items. Person fit needs the IRT parameters: a
        bundle built without them (``replace(bundle, irt=None)``) has no check; a *file*
        holding both ``person_fit`` and ``"irt": null`` is refused when read."""
        if self.person_fit is None:
            return
        checked = None if self.irt is None else self.person_fit.for_items(self.subset.item_ids)
        object.__setattr__(self, "person_fit", checked)

    # ------------------------------------------------------------------ access
    @property
    def item_ids(self) -> tuple[ItemId, ...]:
        return self.subset.item_ids

    @property
    def budget(self) -> int:
        return self.subset.budget

    @property
    def method(self) -> str:
        return self.subset.method

    @property
    def weights(self) -> dict[ItemId, float]:
        """Weight of each subset item, by id."""
        return dict(zip(self.subset.item_ids, self.subset.weights.tolist(), strict=True))

    def estimator_state(self, name: str | None = None) -> dict[str, Any]:
        """State of estimator ``name`` (the default one when None)."""
        wanted = self.default_estimator if name is None else name
        for spec in self.estimators:
            if spec.name == wanted:
                return spec.state
        stored = [s.name for s in self.estimators]
        raise BundleError(f"bundle {self.name!r}: no estimator {wanted!r}; stored: {stored}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Bundle):
            return NotImplemented
        return canonical_json(self.to_dict()) == canonical_json(other.to_dict())

    __hash__ = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ conversion
    def to_dict(self) -> dict[str, Any]:
        """The JSON payload (without checksums; the writer adds them)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "benchmark": self.benchmark,
            "license": self.license,
            "description": self.description,
            "dataset": None if self.dataset is None else self.dataset.to_dict(),
            "metric": self.metric.to_dict(),
            "subset": {
                "method": self.subset.method,
                "seed": self.subset.seed,
                "info": self.subset.info,
                "items": [
                    {"item_id": item, "content_hash": self.content_hashes[item], "weight": weight}
                    for item, weight in zip(
                        self.subset.item_ids, self.subset.weights.tolist(), strict=True
                    )
                ],
            },
            "irt": None if self.irt is None else self.irt.to_dict(),
            "estimators": [spec.to_dict() for spec in self.estimators],
            "default_estimator": self.default_estimator,
            "provenance": self.provenance.to_dict(),
            "reliability": self.reliability,
            "person_fit": None if self.person_fit is None else self.person_fit.to_dict(),
        }

    @classmethod
    def from_dict(cls, payload: Any, *, source: str = "<bundle>") -> Bundle:
        """Validate and build a bundle from its JSON payload (checksums are not checked here).

        Every error is a :class:`BundleError` that starts with ``source`` and names the field,
        item or version at fault.
        """
        try:
            return cls._from_dict(_object(payload, source), source)
        except BundleError as exc:
            message = str(exc)
            if message.startswith(source):
                raise
            raise BundleError(f"{source}: {message}") from exc.__cause__

    @classmethod
    def _from_dict(cls, obj: Mapping[str, Any], source: str) -> Bundle:
        from .fit_spec import PersonFitSpec

        lenient = check_version(obj.get("schema_version"), source)
        _no_unknown(obj, (*_TOP_LEVEL, "checksums"), source, lenient)
        dataset = _get(obj, "dataset", (dict, type(None)), "", None)
        irt = _get(obj, "irt", (dict, type(None)), "", None)
        fit = _get(obj, "person_fit", (dict, type(None)), "", None)
        if fit is not None and irt is None:
            raise BundleError("person_fit: a person-fit check needs the bundle's IRT parameters")
        subset, hashes = _subset_from_dict(_get(obj, "subset", dict, ""), lenient)
        return cls(
            name=_get(obj, "name", str, ""),
            benchmark=_get(obj, "benchmark", str, ""),
            subset=subset,
            content_hashes=hashes,
            metric=MetricSpec.from_dict(_get(obj, "metric", dict, ""), "metric", lenient),
            provenance=Provenance.from_dict(
                _get(obj, "provenance", dict, ""), "provenance", lenient
            ),
            estimators=tuple(
                EstimatorSpec.from_dict(e, f"estimators[{k}]", lenient)
                for k, e in enumerate(_get(obj, "estimators", list, ""))
            ),
            default_estimator=_get(obj, "default_estimator", str, ""),
            irt=None if irt is None else _irt_from_dict(irt),
            dataset=None
            if dataset is None
            else DatasetCoordinates.from_dict(dataset, "dataset", lenient),
            reliability=dict(_get(obj, "reliability", dict, "", {})),
            license=_get(obj, "license", (str, type(None)), "", None),
            description=_get(obj, "description", (str, type(None)), "", None),
            person_fit=None if fit is None else PersonFitSpec.from_dict(fit, "person_fit", lenient),
        )

    @classmethod
    def from_parts(
        cls,
        *,
        name: str,
        benchmark: str,
        subset: Subset,
        source: ResponseMatrix,
        irt: ItemParams | None,
        estimators: Sequence[Mapping[str, Any] | EstimatorSpec],
        default_estimator: str,
        metric: MetricSpec,
        dataset: DatasetCoordinates | None = None,
        reliability: Mapping[str, Any] | None = None,
        license: str | None = None,
        description: str | None = None,
        created: str | None = None,
        person_fit: PersonFitSpec | None = None,
    ) -> Bundle:
        """Assemble a bundle from a selection run in one call (what ``microbench build`` does).

        Content hashes come from ``source.items["content_hash"]`` (None stays None: those
        items are then not verified against the run's documents). Provenance is computed
        from ``source``; ``created`` defaults to now (pass it for reproducible files).
        """
        source.item_positions(subset.item_ids)  # ItemMismatchError names unknown items
        if irt is not None:
            known = set(source.item_ids)
            outside = [i for i in irt.item_ids if i not in known]
            if outside:
                raise BundleError(
                    f"irt: parameters for items not in the source matrix {_preview(outside)}"
                )
        hashes_column = source.items["content_hash"]
        hashes = {item: _hash_or_none(hashes_column.loc[item]) for item in subset.item_ids}
        provenance = Provenance(
            source_sha256=source.fingerprint(),
            n_source_models=source.n_models,
            n_source_items=source.n_items,
            package_version=__version__,
            created=created or utc_now(),
        )
        return cls(
            name=name,
            benchmark=benchmark,
            subset=subset,
            content_hashes=hashes,
            metric=metric,
            provenance=provenance,
            estimators=tuple(
                e
                if isinstance(e, EstimatorSpec)
                else EstimatorSpec.from_dict(e, f"estimators[{k}]")
                for k, e in enumerate(estimators)
            ),
            default_estimator=default_estimator,
            irt=irt,
            dataset=dataset,
            reliability=dict(reliability or {}),
            license=license,
            description=description,
            person_fit=person_fit,
        )


def _hash_or_none(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _subset_from_dict(
    obj: Mapping[str, Any], lenient: bool
) -> tuple[Subset, dict[ItemId, str | None]]:
    """Read the ``subset`` section, checking ids, hashes and weights item by item."""
    where = "subset"
    _no_unknown(obj, ("method", "seed", "info", "items"), where, lenient)
    method = _non_empty(_get(obj, "method", str, where), f"{where}.method")
    seed = _get(obj, "seed", (int, type(None)), where, None)
    info = _get(obj, "info", dict, where, {})
    records = _get(obj, "items", list, where)
    if not records:
        raise BundleError(f"{where}.items: the subset has no items")
    ids: list[ItemId] = []
    weights: list[float] = []
    hashes: dict[ItemId, str | None] = {}
    for k, record in enumerate(records):
        at = f"{where}.items[{k}]"
        record = _object(record, at)
        _no_unknown(record, ("item_id", "content_hash", "weight"), at, lenient)
        item = _non_empty(_get(record, "item_id", str, at), f"{at}.item_id")
        if item in hashes:
            raise BundleError(f"{at}: duplicate item id {item!r}")
        ids.append(item)
        hashes[item] = _get(record, "content_hash", (str, type(None)), at)
        weights.append(_checked_weight(record, at, item))
    total = math.fsum(weights)
    if abs(total - 1.0) > _WEIGHT_TOLERANCE:
        raise BundleError(f"{where}.items: weights sum to {total!r}, not 1")
    subset = Subset(tuple(ids), np.asarray(weights, dtype=np.float64), method, seed, dict(info))
    return subset, hashes


def _checked_weight(record: Mapping[str, Any], at: str, item: ItemId) -> float:
    if "weight" not in record:
        raise BundleError(f"{at}: missing required field 'weight' of item {item!r}")
    weight = record["weight"]
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise BundleError(f"{at}: weight of item {item!r} must be a number, got {weight!r}")
    if not math.isfinite(weight) or weight < 0:
        raise BundleError(
            f"{at}: weight of item {item!r} must be finite and non-negative, got {weight!r}"
        )
    return float(weight)


def _irt_from_dict(obj: Mapping[str, Any]) -> ItemParams:
    try:
        return ItemParams.from_dict(dict(obj))
    except (InputError, ValueError, TypeError) as exc:
        raise BundleError(f"irt: invalid IRT parameters ({exc})") from exc
