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
``person_fit`` block (:mod:`.fit_spec`: thresholds and chance levels of the person-fit check);
1.3 its ``chance_from`` field (whether chance levels were given or the weakest source models
stand in); 1.4 an estimator band's ``widen`` factor (``--method auto``'s interval factor,
:mod:`lmeval_microbench.auto.widen`), which a 1.3 reader would drop without a word, giving
narrower intervals: it warns instead, as for any newer minor version. A reader accepts
``person_fit`` in a file of any 1.x version; older bundles simply have none.

The parts (dataset coordinates, metric, provenance, estimator states) and the field readers
every section is checked with live in :mod:`.fields`; this module holds the document itself.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import __version__
from .._io import canonical_json
from .._text import preview as _preview
from .._types import ItemId
from ..errors import BundleError, InputError
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..subset import Subset
from .fields import (
    DatasetCoordinates,
    EstimatorSpec,
    MetricSpec,
    Provenance,
    _get,
    _no_unknown,
    _non_empty,
    _object,
    as_json_value,
    utc_now,
)

if TYPE_CHECKING:
    from .fit_spec import PersonFitSpec

SCHEMA_VERSION = "1.4"
"""Version this package writes; it reads any ``1.x``."""

_HEX = re.compile(r"^[0-9a-f]+$")
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
        source.item_positions(subset.item_ids)  # ItemMismatchError names the items it lacks
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
