"""The dataset card (``README.md``) of a published micro-benchmark.

Its YAML front matter is what the Hub and ``datasets.load_dataset`` read (licence, tags, and
the ``configs`` entry naming the items file); its usage section is a bash block whose
commands ``tests/test_publish*.py`` run as written. A bundle exported as an lm-eval task gets
the download, ``lm-eval run`` and ``microbench reconstruct`` commands; one built from a bare
response matrix says plainly that there is no task and shows what does run: the item ids,
and the estimate from a CSV of scores.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..bundle import BUNDLE_FILE, ITEMS_FILE, SCHEMA_VERSION, Bundle
from ..harness.docs import ITEMS_JSONL
from ..harness.export import HOOKS_MODULE
from .repo import DATA_FILE, DATA_SPLIT, Source, TaskSource

CARD_TAGS = ("lm-eval", "micro-benchmark")

TASK_USAGE = """\
```bash
pip install lmeval-microbench
# download this repository (the lm-eval task, its documents and the bundle) into ./{local}
python -c "from huggingface_hub import snapshot_download; \\
snapshot_download('{repo_id}', repo_type='dataset', local_dir='{local}'{revision_arg})"
# run it (MODEL: a Hugging Face model id or folder); lm-eval's table shows `estimate`,
# the estimated score on the whole of {benchmark}, and its interval
lm-eval run --model hf --model_args pretrained=MODEL --include_path {local} \\
    --tasks {task} --log_samples --output_path out
# the same estimate, recomputed from the logged answers
microbench reconstruct out --bundle {local}/{data_dir}
```
"""
"""Usage of a bundle with an lm-eval task: download, run, reconstruct."""

SCORES_USAGE = """\
```bash
pip install lmeval-microbench
# the subset's item ids, one per line: score these items of {benchmark} with your evaluation
python -c "from lmeval_microbench.bundle import load_bundle; \\
print(*load_bundle('{location}').item_ids, sep='\\n')" > items.txt
# scores.csv: a column 'model', then one column per item id, each score in [0, 1]
microbench estimate {location} --responses scores.csv
```
"""
"""Usage of a bundle without a task: the card must not send readers to the shipped
``microbench_*`` tasks, which apply other bundles."""

NO_TASK = (
    "**There is no lm-eval task in this repository**: the bundle was built from a response "
    "matrix {why}, so it cannot be run with `lm-eval --tasks`. Score its items with your own "
    "evaluation of {benchmark}, then estimate the full score from those scores:\n\n"
)


# ---------------------------------------------------------------------------- parts
def _format_number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _flatten(values: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows.extend(_flatten(value, f"{name}."))
        else:
            rows.append((name, value))
    return rows


def _front_matter(bundle: Bundle) -> str:
    meta: dict[str, Any] = {
        "license": bundle.license or "other",
        "pretty_name": bundle.name,
        "tags": list(CARD_TAGS),
        "configs": [
            {"config_name": "default", "data_files": [{"split": DATA_SPLIT, "path": DATA_FILE}]}
        ],
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _reliability_section(bundle: Bundle) -> str:
    rows = _flatten(bundle.reliability)
    if not rows:
        return "No reliability measurement is stored in this bundle.\n"
    lines = ["| measure | value |", "| --- | --- |"]
    lines += [f"| {name} | {_format_number(value)} |" for name, value in rows]
    return "\n".join(lines) + "\n"


def _source_section(bundle: Bundle, task: TaskSource | None) -> str:
    prov = bundle.provenance
    irt = "none" if bundle.irt is None else f"{bundle.irt.model}, {bundle.irt.n_items} items"
    lines = [
        f"- benchmark: `{bundle.benchmark}`",
        f"- budget: {bundle.budget} items out of the {prov.n_source_items} items of the source "
        f"response matrix ({prov.n_source_models} models, sha256 `{prov.source_sha256[:16]}...`)",
        f"- selection method: `{bundle.method}` (seed {bundle.subset.seed})",
        f"- metric: `{bundle.metric.name}` (filter `{bundle.metric.filter}`, aggregation "
        f"`{bundle.metric.aggregation}`, reported as a {bundle.metric.scale})",
        f"- estimators: {', '.join(f'`{s.name}`' for s in bundle.estimators)} "
        f"(default `{bundle.default_estimator}`)",
        f"- IRT parameters: {irt}",
        f"- lm-eval task: `{task.name}`" if task else "- lm-eval task: none",
        f"- built by lmeval-microbench {prov.package_version} on {prov.created}",
    ]
    if bundle.dataset is not None:
        ds = bundle.dataset
        lines.insert(
            1,
            f"- documents: `{ds.path}` config `{ds.name}`, split `{ds.split}`, "
            f"revision `{ds.revision}`",
        )
    return "\n".join(lines) + "\n"


def _usage(source: Source, repo_id: str, revision: str | None) -> str:
    bundle, task = source.bundle, source.task
    location = f"hf://{repo_id}" + (f"@{revision}" if revision else "")
    if task is None:
        why = "with documents but no prompts" if source.document_fields else "alone"
        return NO_TASK.format(why=why, benchmark=bundle.benchmark) + SCORES_USAGE.format(
            location=location, benchmark=bundle.benchmark
        )
    return "From the command line:\n\n" + TASK_USAGE.format(
        repo_id=repo_id,
        local=repo_id.split("/")[1],
        revision_arg=f", revision='{revision}'" if revision else "",
        benchmark=bundle.benchmark,
        task=task.name,
        data_dir=task.data_dir,
    )


def _python_usage(repo_id: str, revision: str | None) -> str:
    at = f", revision={revision!r}" if revision else ""
    location = f"hf://{repo_id}" + (f"@{revision}" if revision else "")
    return (
        "In Python:\n\n```python\nfrom datasets import load_dataset\n"
        "from lmeval_microbench.bundle import load_bundle\n\n"
        f'items = load_dataset("{repo_id}", split="{DATA_SPLIT}"{at})\n'
        f'bundle = load_bundle("{location}")\n'
        'print(items[0]["item_id"], bundle.default_estimator)\n```\n'
    )


def _files_section(source: Source) -> str:
    fields = source.document_fields
    what = (
        f"and the documents' fields ({', '.join(f'`{f}`' for f in fields)})"
        if fields
        else ("(the bundle stores no documents)")
    )
    lines = [
        f"- `{BUNDLE_FILE}`: the versioned bundle (schema {SCHEMA_VERSION}), with sha256 "
        "checksums of its content and side files.",
        f"- `{DATA_FILE}`: one row per item (split `{DATA_SPLIT}`): `item_id`, `content_hash`, "
        f"`weight` {what}.",
    ]
    if ITEMS_FILE in source.bundle_files:
        lines.insert(1, f"- `{ITEMS_FILE}`: the bundle's item documents (checksummed).")
    task = source.task
    if task is not None:
        lines += [
            f"- `{task.yaml.name}`: the lm-eval task `{task.name}` (for `--include_path`).",
            f"- `{HOOKS_MODULE}.py`: the functions the task YAML names (from lmeval-microbench).",
            f"- `{task.data_dir}/`: the task's bundle and its `{ITEMS_JSONL}` documents, each "
            "with the full prompt it sends.",
        ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- the card
def render_card(source: Source, repo_id: str, revision: str | None = None) -> str:
    """The dataset card: front matter, what the subset is, reliability, usage, files."""
    bundle = source.bundle
    description = f"{bundle.description}\n\n" if bundle.description else ""
    return (
        _front_matter(bundle)
        + f"\n# {bundle.name}\n\n"
        + description
        + f"A micro-benchmark of **{bundle.benchmark}**: {bundle.budget} items chosen so that a "
        "model's score on them, passed through the stored estimator, estimates its score on the "
        "whole benchmark, with an interval. Made with "
        "[lmeval-microbench](https://pypi.org/project/lmeval-microbench/) for "
        "EleutherAI lm-evaluation-harness.\n\n"
        "## Contents\n\n"
        + _source_section(bundle, source.task)
        + "\n## Measured reliability\n\n"
        + _reliability_section(bundle)
        + "\n## Usage\n\n"
        + _usage(source, repo_id, revision)
        + "\n"
        + _python_usage(repo_id, revision)
        + "\n## Files\n\n"
        + _files_section(source)
    )
