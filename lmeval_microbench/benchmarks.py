"""The benchmarks this package ships micro tasks for, declared once; everything else reads them.

A :class:`Benchmark` says what a micro task stands for: the whole benchmark's size, the
lm-eval task and metric it reproduces, its chance level, the settings its source models ran
with and where its data lives in ``../shared/data``. A :class:`Suite` groups the benchmarks
of one leaderboard: the folder of shipped tasks, the lm-eval group, the prefix of its bundle
names. Reconstruction (full sizes, column order, per-suite averages), the demo, the
reliability harness, the adaptive pools and the build and benchmark tools all look names up
here, so adding a benchmark is one entry plus its bundle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InputError


@dataclass(frozen=True)
class SourceSettings:
    """How the source models of a benchmark were run by the leaderboard.

    ``chat_template``: ``"never"`` (no source model used one), ``"always"`` or ``"mixed"``
    (instruction-tuned models with it, base models without, as the Open LLM Leaderboard v2
    ran them); ``fewshot_as_multiturn`` likewise. A run whose settings no source model used
    gets a warning (:func:`settings_warning`).
    """

    chat_template: str = "never"
    fewshot_as_multiturn: str = "never"
    note: str = ""


@dataclass(frozen=True)
class Benchmark:
    """One benchmark a shipped micro task estimates.

    ``name``: the bundle's ``benchmark`` (and the micro task ``microbench_{name}``);
    ``full_size``: items of the whole benchmark as its leaderboard ran it; ``metric``: the
    lm-eval metric estimated; ``lmeval_task``: the lm-eval task (or group) the micro task
    reproduces; ``chance``: the score of a random responder (None: no choices, e.g. free
    generation); ``data``: the response matrix under ``../shared/data``.
    """

    name: str
    suite: str
    full_size: int
    metric: str
    lmeval_task: str
    chance: float | None
    data: str
    settings: SourceSettings = SourceSettings()

    @property
    def micro_task(self) -> str:
        return f"microbench_{self.name}"


@dataclass(frozen=True)
class Suite:
    """The shipped micro tasks of one leaderboard."""

    name: str
    title: str
    folder: str
    """Folder under ``task_configs/`` (and ``adaptive/pools/``)."""
    group: str
    """The lm-eval group task running all of them."""
    bundle_prefix: str
    """Start of the names of the suite's bundles (``openllm-v1-``)."""
    benchmarks: tuple[str, ...]
    """The suite's benchmarks in the leaderboard's column order."""


_V1_SETTINGS = SourceSettings(note="the Open LLM Leaderboard v1 ran every model without one")
_V2_SETTINGS = SourceSettings(
    chat_template="mixed",
    fewshot_as_multiturn="mixed",
    note=(
        "the Open LLM Leaderboard v2 ran instruction-tuned models with --apply_chat_template "
        "--fewshot_as_multiturn and base models without (its documentation); which source "
        "model ran how is not in the data, so either setting is like some sources"
    ),
)

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark("arc", "openllm_v1", 1172, "acc_norm", "arc_challenge", 0.25,
                  "openllm_v1/responses/arc_B.parquet", _V1_SETTINGS),
        Benchmark("hellaswag", "openllm_v1", 10042, "acc_norm", "hellaswag", 0.25,
                  "openllm_v1/responses/hellaswag_B.parquet", _V1_SETTINGS),
        Benchmark("mmlu", "openllm_v1", 14042, "acc", "mmlu", 0.25,
                  "openllm_v1/responses/mmlu_B.parquet", _V1_SETTINGS),
        Benchmark("truthfulqa", "openllm_v1", 817, "mc1", "truthfulqa_mc1", None,
                  "openllm_v1/responses/truthfulqa_B.parquet", _V1_SETTINGS),
        Benchmark("winogrande", "openllm_v1", 1267, "acc", "winogrande", 0.5,
                  "openllm_v1/responses/winogrande_B.parquet", _V1_SETTINGS),
        Benchmark("gsm8k", "openllm_v1", 1319, "exact_match", "gsm8k", None,
                  "openllm_v1/responses/gsm8k_B.parquet", _V1_SETTINGS),
        Benchmark("ifeval", "openllm_v2", 541, "prompt_level_strict_acc", "leaderboard_ifeval",
                  None, "openllm_v2/responses/ifeval.parquet", _V2_SETTINGS),
        Benchmark("musr", "openllm_v2", 756, "acc_norm", "leaderboard_musr", None,
                  "openllm_v2/responses/musr.parquet", _V2_SETTINGS),
    )
}  # fmt: skip
"""Every shipped benchmark by name."""

SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite("openllm_v1", "Open LLM Leaderboard v1", "openllm_v1", "microbench_openllm",
              "openllm-v1-", ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")),
        Suite("openllm_v2", "Open LLM Leaderboard v2", "openllm_v2", "microbench_openllm_v2",
              "openllm-v2-", ("ifeval", "musr")),
    )
}  # fmt: skip
"""Every shipped suite by name."""


def benchmark(name: str) -> Benchmark:
    """A registered benchmark by name; an unknown name lists the known ones."""
    if name not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name]


def suite(name: str) -> Suite:
    if name not in SUITES:
        raise InputError(f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    return SUITES[name]


def suite_benchmarks(name: str) -> tuple[Benchmark, ...]:
    return tuple(BENCHMARKS[b] for b in suite(name).benchmarks)


def shipped(bundle_name: str, benchmark_name: str) -> Benchmark | None:
    """The registered benchmark a bundle of a shipped suite stands for, None for others.

    A bundle belongs to a suite when its name starts with the suite's prefix and its
    benchmark is one of the suite's: a user's own ``mmlu`` bundle is not the leaderboard's.
    """
    found = BENCHMARKS.get(benchmark_name)
    if found is None or not bundle_name.startswith(SUITES[found.suite].bundle_prefix):
        return None
    return found


def column_order(names: Iterable[str]) -> list[str]:
    """Benchmarks in suite order (suites as registered), then any others by name."""
    names = set(names)
    ordered = [b for s in SUITES.values() for b in s.benchmarks if b in names]
    return ordered + sorted(names - set(ordered))


def recorded_settings(reliability: Mapping[str, Any], found: Benchmark) -> SourceSettings:
    """The source settings a bundle records (``reliability["source_settings"]``), else the
    registry's for its benchmark."""
    given = reliability.get("source_settings")
    if not isinstance(given, Mapping):
        return found.settings
    return SourceSettings(
        str(given.get("chat_template", "never")),
        str(given.get("fewshot_as_multiturn", "never")),
        str(given.get("note", "")),
    )


def settings_warning(
    found: Benchmark,
    chat_template: bool,
    fewshot_as_multiturn: bool,
    settings: SourceSettings | None = None,
) -> str | None:
    """A one-line warning when a run used settings none of the benchmark's sources used.

    Few-shot as multi-turn changes a prompt only through a chat template (lm-eval joins
    the turns as plain text without one, and ``simple_evaluate`` records it as on by
    default), so without a chat template it counts as off."""
    settings = settings or found.settings
    multiturn = fewshot_as_multiturn and chat_template
    used = {"chat template": chat_template, "few-shot as multi-turn": multiturn}
    source = {
        "chat template": settings.chat_template,
        "few-shot as multi-turn": settings.fewshot_as_multiturn,
    }
    off = [
        name
        for name, on in used.items()
        if (on and source[name] == "never") or (not on and source[name] == "always")
    ]
    if not off:
        return None
    how = " and ".join(f"{'with' if used[n] else 'without'} {n}" for n in off)
    return (
        f"{found.micro_task}: run {how}, unlike every source model of its bundle "
        f"({settings.note}); its estimate assumes the sources' prompts"
    )
