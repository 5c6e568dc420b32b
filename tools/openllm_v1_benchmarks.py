"""The six Open LLM Leaderboard v1 benchmarks as shipped tasks, and their documents.

Each benchmark's task spec, dataset and shots (:data:`BENCHMARKS`), and every matrix item
turned into the document the shipped task runs on: the full prompt exactly as the leaderboard
rendered it, checked against ``prompts/items-{bm}-B.csv`` (:func:`build_docs`). Used by
``tools/build_openllm_v1.py`` (and through it by ``tools/build_pools.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lmeval_microbench.bundle import (
    DatasetCoordinates,
)
from lmeval_microbench.errors import InputError
from lmeval_microbench.harness import (
    TaskSpec,
)

GSM8K_STOP = [":", "Question:", "Question"]
"""Stop sequences of the leaderboard's gsm8k (lm-eval commit b281b09), ':' included."""


@dataclass(frozen=True)
class Benchmark:
    """How one leaderboard benchmark becomes a shipped task."""

    name: str
    shots: int
    id_field: str
    dataset: DatasetCoordinates
    n_items: int
    spec: TaskSpec
    summary: str


def _spec(bm: str, hook: str, alias: str, **kwargs: Any) -> TaskSpec:
    return TaskSpec(
        task=f"microbench_{bm}",
        data_dir=bm,
        output_type=kwargs.pop("output_type", "multiple_choice"),
        process_results=hook,
        alias=alias,
        tags=("microbench",),
        **kwargs,
    )


BENCHMARKS: dict[str, Benchmark] = {
    "arc": Benchmark(
        "arc", 25, "metabench_idx",
        DatasetCoordinates("allenai/ai2_arc", "ARC-Challenge", "test"), 1172,
        _spec("arc", "process_acc_norm", "microbench_arc (25-shot prompts built in)"),
        "ARC-Challenge, 25-shot, acc_norm",
    ),
    "hellaswag": Benchmark(
        "hellaswag", 10, "metabench_idx",
        DatasetCoordinates("Rowan/hellaswag", None, "validation"), 10042,
        _spec("hellaswag", "process_acc_norm", "microbench_hellaswag (10-shot prompts built in)"),
        "HellaSwag, 10-shot, acc_norm",
    ),
    "mmlu": Benchmark(
        "mmlu", 5, "mb_sub_idx",
        DatasetCoordinates("cais/mmlu", "all", "test"), 14042,
        _spec("mmlu", "process_acc", "microbench_mmlu (5-shot prompts built in)"),
        "MMLU, 5-shot, acc (the estimate is the item-level mean; the leaderboard averaged "
        "the 57 subjects)",
    ),
    "truthfulqa": Benchmark(
        "truthfulqa", 0, "metabench_idx",
        DatasetCoordinates("truthful_qa", "multiple_choice", "validation"), 817,
        _spec("truthfulqa", "process_mc1", "microbench_truthfulqa (mc1, 0-shot)"),
        "TruthfulQA multiple choice, 0-shot (fixed QA preamble), mc1 (the leaderboard "
        "column is mc2)",
    ),
    "winogrande": Benchmark(
        "winogrande", 5, "metabench_idx",
        DatasetCoordinates("winogrande", "winogrande_xl", "validation"), 1267,
        _spec("winogrande", "process_acc", "microbench_winogrande (5-shot prompts built in)",
              multiple_input=True),
        "WinoGrande, 5-shot, acc with partial scoring",
    ),
    "gsm8k": Benchmark(
        "gsm8k", 5, "metabench_idx",
        DatasetCoordinates("gsm8k", "main", "test"), 1319,
        _spec("gsm8k", "process_gsm8k", "microbench_gsm8k (5-shot prompts built in)",
              output_type="generate_until",
              generation_kwargs={"until": GSM8K_STOP, "do_sample": False,
                                 "temperature": 0.0, "max_gen_toks": 256}),
        "GSM8K, 5-shot, exact match of the '#### <number>' answer (leaderboard rule)",
    ),
}  # fmt: skip


# ---------------------------------------------------------------------------- documents
def hellaswag_clean(text: str) -> str:
    """HellaSwag's WikiHow markup removed the way the leaderboard's lm-eval did."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def _plain(value: Any) -> Any:
    """numpy arrays/scalars from parquet as JSON-ready Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _check_tail(item: str, context: str, tail: str) -> None:
    if not context.endswith(tail):
        raise InputError(f"{item}: the prompt does not end with the item itself: {tail[-80:]!r}")


def arc_doc(item: str, row: pd.Series, prompt: str) -> dict[str, Any]:
    labels, texts = list(row["choices"]["label"]), list(row["choices"]["text"])
    context = row["alltwentyfiveshot_longprompt"]
    _check_tail(item, context, f"Question: {row['question']}\nAnswer:")
    return {
        "context": context,
        "options": texts,
        "gold": labels.index(row["answerKey"]),
        "source": {
            "id": row["id"],
            "question": row["question"],
            "choices": {"label": labels, "text": texts},
            "answerKey": row["answerKey"],
        },
    }


def hellaswag_doc(item: str, row: pd.Series, prompt: str) -> dict[str, Any]:
    context = row["alltenshot_longprompt"]
    query = f"{row['activity_label']}: {row['ctx_a']} {row['ctx_b'].capitalize()}"
    _check_tail(item, context, hellaswag_clean(query))
    fields = ("ind", "activity_label", "ctx_a", "ctx_b", "ctx", "source_id", "split")
    return {
        "context": context,
        "options": [hellaswag_clean(ending) for ending in row["endings"]],
        "gold": int(row["label"]),
        "source": {
            **{name: _plain(row[name]) for name in fields},
            "endings": list(row["endings"]),
            "label": row["label"],
        },
    }


def mmlu_doc(item: str, row: pd.Series, prompt: str) -> dict[str, Any]:
    letters = ["A", "B", "C", "D"]
    context = row["allfiveshot_longprompt"]
    listed = "".join(f"{k}. {c}\n" for k, c in zip(letters, row["choices"], strict=True))
    _check_tail(item, context, f"{row['question'].strip()}\n{listed}Answer:")
    return {
        "context": context,
        "options": letters,
        "gold": int(row["answer"]),
        "source": {
            "subject": row["subject"],
            "question": row["question"],
            "choices": list(row["choices"]),
            "answer": int(row["answer"]),
        },
    }


def truthfulqa_doc(item: str, row: pd.Series, prompt: str) -> dict[str, Any]:
    choices = list(row["mc1_targets"]["choices"])
    labels = [int(v) for v in row["mc1_targets"]["labels"]]
    if labels[0] != 1 or sum(labels) != 1:
        raise InputError(f"{item}: mc1 expects the one true answer first, labels are {labels}")
    _check_tail(item, prompt, f"\n\nQ: {row['question']}\nA:")
    return {
        "context": prompt,
        "options": choices,
        "gold": 0,
        "source": {
            "question": row["question"],
            "mc1_targets": {"choices": choices, "labels": labels},
        },
    }


def winogrande_doc(item: str, row: pd.Series, prompt: str) -> dict[str, Any]:
    sentence = row["sentence"]
    blank = sentence.index("_")
    shots = row["allfiveshot_longprompt"].split("\n\n")
    if shots.pop() != sentence:
        raise InputError(f"{item}: the few-shot prompt does not end with the sentence")
    contexts = [
        "\n\n".join([*shots, sentence[:blank] + option])
        for option in (row["option1"], row["option2"])
    ]
    return {
        "contexts": contexts,
        "continuation": sentence[blank + 1 :].strip(),
        "gold": {"1": 0, "2": 1}[row["answer"]],
        "source": {
            "sentence": sentence,
            "option1": row["option1"],
            "option2": row["option2"],
            "answer": row["answer"],
        },
    }


def gsm8k_doc(item: str, row: pd.Series, prompt: str) -> dict[str, Any]:
    context = row["allfiveshot_longprompt"]
    _check_tail(item, context, f"Question: {row['question']}\nAnswer:")
    return {"context": context, "answer": row["answer"], "source": {"question": row["question"]}}


DOC_BUILDERS: dict[str, Callable[[str, pd.Series, str], dict[str, Any]]] = {
    "arc": arc_doc,
    "hellaswag": hellaswag_doc,
    "mmlu": mmlu_doc,
    "truthfulqa": truthfulqa_doc,
    "winogrande": winogrande_doc,
    "gsm8k": gsm8k_doc,
}

# Segments of a prompt split at blank lines: shots + the item (+ the MMLU description).
PROMPT_SEGMENTS = {"mmlu": 7, "truthfulqa": 7}


def rendered_prompt(doc: Mapping[str, Any]) -> str:
    """The context lm-eval scores the gold answer after, for comparison with the CSV."""
    return doc["contexts"][doc["gold"]] if "contexts" in doc else doc["context"]


def build_docs(bm: Benchmark, data: Path, bundle_name: str) -> tuple[dict[str, dict], int]:
    """Documents of every matrix item, checked against the leaderboard's prompts.

    Returns the documents by item id and the number of prompts found equal to the CSV.
    """
    items = pd.read_parquet(data / "items" / f"{bm.name}-secondary.parquet")
    prompts_path = data / "prompts" / f"items-{bm.name}-B.csv"
    prompts = pd.read_csv(prompts_path, keep_default_na=False).set_index("item")["prompt"]
    docs: dict[str, dict] = {}
    equal = 0
    for _, row in items.iterrows():
        item = f"{bm.name}.{row[bm.id_field]}"
        if item not in prompts.index:
            raise InputError(f"{prompts_path}: no prompt for item {item!r}")
        fields = DOC_BUILDERS[bm.name](item, row, prompts[item])
        doc = {"item_id": item, "bundle": bundle_name, "benchmark": bm.name, **fields}
        doc["source"] = {**_plain(doc["source"]), bm.id_field: _plain(row[bm.id_field])}
        _check_prompt(item, rendered_prompt(doc), prompts[item], bm)
        equal += 1
        docs[item] = doc
    return docs, equal


def _check_prompt(item: str, rendered: str, expected: str, bm: Benchmark) -> None:
    if rendered != expected:
        at = next(
            (k for k, (a, b) in enumerate(zip(rendered, expected, strict=False)) if a != b),
            min(len(rendered), len(expected)),
        )
        raise InputError(
            f"{item}: prompt differs from the leaderboard's at character {at}: "
            f"{rendered[at - 40 : at + 40]!r} vs {expected[at - 40 : at + 40]!r}"
        )
    segments = len(rendered.split("\n\n"))
    wanted = PROMPT_SEGMENTS.get(bm.name, bm.shots + 1)
    if segments != wanted:
        raise InputError(f"{item}: {segments} prompt segments, expected {wanted} ({bm.shots}-shot)")
