"""Build a :class:`ResponseMatrix` from lm-eval ``--log_samples`` output and leaderboard details.

Three sources feed the model x item matrix every fit and selection starts from:

* folders of lm-eval ``--log_samples`` output (:func:`collect_samples`, module ``samples``);
* Open LLM Leaderboard "details" datasets, v1 and v2, from the Hub or from local copies
  (:func:`collect_leaderboard_details`, module ``details``);
* existing wide matrices (``.parquet``/``.csv``), stacked by model with
  :func:`combine_models` (module ``matrices``).

Items are joined by id, never by line order: lm-eval reorders documents across ranks and
versions, so a shuffled samples file gives the same matrix (old-format files, whose lines say
their filter only by position, are split by content or refused: module ``_filters``). Every
error names the file, line (or row) and item at fault. Modules import one way: ``_records``
<- ``_filters`` <- ``_scores`` <- ``matrices`` <- ``samples``, ``details``. The record-level
pieces (``Record``, ``lookup``, ``scores_from_records``, ``newest_runs``, ...) are exported
too: :mod:`lmeval_microbench.runs` reads samples files against bundles with the same rules.
"""

from ._records import (
    Record,
    content_hash,
    doc_of,
    format_id,
    iter_json_records,
    lookup,
    preview,
    text_hash,
)
from ._scores import (
    DEFAULT_ID_FIELDS,
    SampleScores,
    ScoreOptions,
    item_ids_of_docs,
    scores_from_records,
)
from .details import (
    DETAILS_TEXT_FIELDS,
    collect_leaderboard_details,
    details_repo_id,
    prompt_id_map,
)
from .matrices import MATRIX_SUFFIXES, combine_models, write_matrix
from .samples import (
    SamplesRun,
    collect_samples,
    find_samples_files,
    folder_model_notes,
    newest_runs,
    read_samples_file,
)

__all__ = [
    "DEFAULT_ID_FIELDS",
    "DETAILS_TEXT_FIELDS",
    "MATRIX_SUFFIXES",
    "Record",
    "SampleScores",
    "SamplesRun",
    "ScoreOptions",
    "collect_leaderboard_details",
    "collect_samples",
    "combine_models",
    "content_hash",
    "details_repo_id",
    "doc_of",
    "find_samples_files",
    "folder_model_notes",
    "format_id",
    "item_ids_of_docs",
    "iter_json_records",
    "lookup",
    "newest_runs",
    "preview",
    "prompt_id_map",
    "read_samples_file",
    "scores_from_records",
    "text_hash",
    "write_matrix",
]
