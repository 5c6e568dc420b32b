"""Reading lm-eval runs: find bundles, match samples files, read scores, reconstruct, report.

The post-run half of the package (the in-run half, the metric hooks lm-eval calls, is
:mod:`lmeval_microbench.harness`). One module a step, in the order of the data:

- :mod:`.bundles`: which bundles exist, with their shipped documents and task versions;
  the ``--task-map`` syntax;
- :mod:`.match`: which bundle a samples file's documents are, by their content;
- :mod:`.scores`: a run checked and its scores read by item id;
- :mod:`.reconstruct`: the estimates and averages of every run found (:func:`reconstruct_runs`);
- :mod:`.joint`: a suite's fitted joint estimator applied to the runs;
- :mod:`.report`: the result (:class:`Reconstruction`), written as JSON and a markdown table.
"""

from ..errors import ReconstructionWarning
from .bundles import BundleIndex, BundleRef, load_bundle_ref, note, parse_task_map, version_text
from .joint import JOINT_FILE, guessing_chances, joint_estimates, load_joint, widen_joint
from .match import FOREIGN_ID_FIELDS, OWN_FIELDS, LoggedSamples, RunMatch, identify, match_run
from .reconstruct import ReconstructOptions, estimate_task_scores, reconstruct_runs, score_runs
from .report import (
    UNIT,
    AverageEstimate,
    BenchmarkEstimate,
    Reconstruction,
    average_estimate,
    full_size_of,
    natural_key,
    reconstruction_files,
    write_reconstruction,
)
from .scores import METRIC_ALIASES, PREFERRED_FILTER, TaskScores, read_task_scores

__all__ = [
    "FOREIGN_ID_FIELDS",
    "JOINT_FILE",
    "METRIC_ALIASES",
    "OWN_FIELDS",
    "PREFERRED_FILTER",
    "UNIT",
    "AverageEstimate",
    "BenchmarkEstimate",
    "BundleIndex",
    "BundleRef",
    "LoggedSamples",
    "ReconstructOptions",
    "Reconstruction",
    "ReconstructionWarning",
    "RunMatch",
    "TaskScores",
    "average_estimate",
    "estimate_task_scores",
    "full_size_of",
    "guessing_chances",
    "identify",
    "joint_estimates",
    "load_bundle_ref",
    "load_joint",
    "match_run",
    "natural_key",
    "note",
    "parse_task_map",
    "read_task_scores",
    "reconstruct_runs",
    "reconstruction_files",
    "score_runs",
    "version_text",
    "widen_joint",
    "write_reconstruction",
]
