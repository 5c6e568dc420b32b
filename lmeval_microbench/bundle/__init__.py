"""Versioned, checksummed micro-benchmark bundles: schema (``schema``) and folders (``io``)."""

from .fields import SCORE_SCALES, DatasetCoordinates, EstimatorSpec, MetricSpec, Provenance
from .io import (
    BUNDLE_FILE,
    ITEMS_FILE,
    check_bundle_folder,
    load_bundle,
    load_items,
    parse_hf_location,
    resolve_location,
    save_bundle,
    verify_items,
)
from .schema import SCHEMA_VERSION, Bundle, BundleVersionWarning

__all__ = [
    "BUNDLE_FILE",
    "ITEMS_FILE",
    "SCHEMA_VERSION",
    "SCORE_SCALES",
    "Bundle",
    "BundleVersionWarning",
    "DatasetCoordinates",
    "EstimatorSpec",
    "MetricSpec",
    "Provenance",
    "check_bundle_folder",
    "load_bundle",
    "load_items",
    "parse_hf_location",
    "resolve_location",
    "save_bundle",
    "verify_items",
]
