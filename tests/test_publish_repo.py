"""A published repository works for a Hub user: ``datasets``, ``hf://`` and lm-eval, offline.

* A shipped bundle and a bundle without a task are written with ``to_folder`` and read back
  with ``datasets.load_dataset`` (offline) and ``load_bundle``.
* ``load_bundle("hf://...")`` goes through the real ``huggingface_hub.snapshot_download``,
  offline, against a Hub cache laid out as a download leaves it (``refs/<branch>`` naming a
  commit, ``snapshots/<commit>/`` holding the files): no monkeypatched download.
* End to end: a task folder as ``microbench build --task`` writes it is published to the fake
  Hub of ``test_publish``; the card's commands are run as written (download, ``lm-eval run``
  with a tiny random GPT-2 for MODEL, ``microbench reconstruct``) and the estimates are
  checked against the original bundle's on the same answers.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import test_harness
from test_publish import FakeHub, _card_commands, hub

from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import BUNDLE_FILE, Bundle, load_bundle, load_items, save_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.errors import BundleError, InputError, ItemMismatchError
from lmeval_microbench.harness import TaskSpec, clear_registry, include_path, write_task
from lmeval_microbench.harness.docs import ITEMS_JSONL, read_docs
from lmeval_microbench.publish import CARD_FILE, DATA_FILE, publish_bundle
from lmeval_microbench.synthetic import random_item_params, simulate_responses

datasets = pytest.importorskip("datasets")
huggingface_hub = pytest.importorskip("huggingface_hub")
tiny_model = test_harness.tiny_model  # the fixture: a random GPT-2 built locally

__all__ = ["hub", "tiny_model"]  # fixtures, used by name

SHIPPED = include_path() / "openllm_v1"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))
    clear_registry()
    yield
    clear_registry()


def load_items_dataset(folder: Path):
    """``datasets.load_dataset`` of a published folder, as a Hub user's download is read."""
    return datasets.load_dataset(str(folder), cache_dir=str(folder.parent / "ds-cache"))


def repo_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# ---------------------------------------------------------------------------- shipped bundle
def test_shipped_bundle_publishes_a_loadable_dataset_and_task(tmp_path: Path) -> None:
    source = SHIPPED / "arc"
    bundle = load_bundle(source)
    out = Path(publish_bundle(source, "me/micro-arc", to_folder=tmp_path / "repo"))
    assert repo_files(out) == sorted(
        [BUNDLE_FILE, DATA_FILE, CARD_FILE, "microbench_arc.yaml", "microbench_hooks.py",
         f"arc/{BUNDLE_FILE}", f"arc/{ITEMS_JSONL}"]
    )  # fmt: skip
    for name in (BUNDLE_FILE, f"arc/{BUNDLE_FILE}"):  # the bundle, unchanged, checksums valid
        assert (out / name).read_bytes() == (source / BUNDLE_FILE).read_bytes()
    assert load_bundle(out) == bundle and load_bundle(out / "arc") == bundle
    assert (out / "microbench_arc.yaml").read_bytes() == (
        SHIPPED / "microbench_arc.yaml"
    ).read_bytes()
    items = load_items_dataset(out)
    assert list(items) == ["test"]
    rows = items["test"]
    assert rows["item_id"] == list(bundle.item_ids)
    assert rows["content_hash"] == [bundle.content_hashes[i] for i in bundle.item_ids]
    assert rows["weight"] == pytest.approx([bundle.weights[i] for i in bundle.item_ids])
    shipped_docs = {doc["item_id"]: doc for doc in read_docs(source / ITEMS_JSONL)}
    for row in rows:  # the prompts lm-eval sends, few-shot included
        doc = shipped_docs[row["item_id"]]
        assert row["context"] == doc["context"] and row["options"] == doc["options"]
        assert row["gold"] == doc["gold"]


def test_a_suite_of_several_tasks_needs_the_task_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"several tasks \['microbench_arc', .*pass --task"):
        publish_bundle(SHIPPED, "me/micro", dry_run=True)
    with pytest.raises(InputError, match="no micro-benchmark task 'nope'"):
        publish_bundle(SHIPPED, "me/micro", task="nope", dry_run=True)
    plan = publish_bundle(SHIPPED, "me/micro", task="microbench_truthfulqa", dry_run=True)
    assert plan.task == "microbench_truthfulqa" and "truthfulqa/items.jsonl" in plan.files
    assert plan.bundle_name == load_bundle(SHIPPED / "truthfulqa").name
    assert "--tasks microbench_truthfulqa" in plan.card
    assert "microbench reconstruct out --bundle micro/truthfulqa" in plan.card


def test_a_published_folder_publishes_again_as_itself(tmp_path: Path) -> None:
    first = Path(publish_bundle(SHIPPED / "gsm8k", "me/g", to_folder=tmp_path / "one"))
    again = Path(publish_bundle(first, "me/g", to_folder=tmp_path / "two"))
    assert {f: (first / f).read_bytes() for f in repo_files(first)} == {
        f: (again / f).read_bytes() for f in repo_files(again)
    }


def test_an_edited_task_document_is_refused(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(SHIPPED / "gsm8k", suite / "gsm8k")
    shutil.copy(SHIPPED / "microbench_gsm8k.yaml", suite)
    path = suite / "gsm8k" / ITEMS_JSONL
    path.write_text(path.read_text().replace("Question:", "Q:", 1))
    with pytest.raises(ItemMismatchError, match="1 items changed content"):
        publish_bundle(suite, "me/g", to_folder=tmp_path / "repo")
    assert not (tmp_path / "repo").exists()


# ---------------------------------------------------------------------------- hf:// offline
def cache_snapshot(cache: Path, repo_id: str, folder: Path, revision: str = "main") -> Path:
    """Lay ``folder`` out in a Hub cache as ``snapshot_download`` leaves a download."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    storage = cache / f"datasets--{repo_id.replace('/', '--')}"
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / revision).write_text(commit)
    shutil.copytree(folder, storage / "snapshots" / commit)
    return storage / "snapshots" / commit


def test_hf_location_resolves_offline_from_the_hub_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    cache = tmp_path / "hub-cache"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(BundleError, match="hf://me/micro-mmlu: cannot download"):
        load_bundle("hf://me/micro-mmlu")  # not in the cache, and no network
    out = Path(publish_bundle(SHIPPED / "mmlu", "me/micro-mmlu", to_folder=tmp_path / "repo"))
    snapshot = cache_snapshot(cache, "me/micro-mmlu", out)
    bundle = load_bundle("hf://me/micro-mmlu")
    assert bundle == load_bundle(SHIPPED / "mmlu")
    assert load_items("hf://me/micro-mmlu") is None  # the documents are the task's
    assert load_items_dataset(snapshot)["test"]["item_id"] == list(bundle.item_ids)


# ---------------------------------------------------------------------------- no task
@pytest.fixture
def bare_bundle(tmp_path: Path) -> Path:
    """A bundle built from a bare response matrix: no documents, no task."""
    matrix, _ = simulate_responses(random_item_params(30, seed=1), 80, seed=2)
    bundle = build_bundle(
        matrix, matrix.mean_scores(), name="bare", benchmark="toy", method="random", budget=6,
        estimators=["mean"], default_estimator="mean",
    )  # fmt: skip
    return save_bundle(bundle, tmp_path / "bare")


def test_a_bundle_without_task_publishes_ids_and_weights_and_says_so(
    bare_bundle: Path, tmp_path: Path
) -> None:
    bundle = load_bundle(bare_bundle)
    out = Path(publish_bundle(bare_bundle, "me/bare", to_folder=tmp_path / "repo"))
    assert repo_files(out) == sorted([BUNDLE_FILE, DATA_FILE, CARD_FILE])
    rows = load_items_dataset(out)["test"]
    assert rows.column_names == ["item_id", "content_hash", "weight"]
    assert rows["item_id"] == list(bundle.item_ids)
    assert rows["weight"] == pytest.approx([bundle.weights[i] for i in bundle.item_ids])
    card = (out / CARD_FILE).read_text()
    assert "There is no lm-eval task in this repository" in card and "lm-eval run" not in card
    assert "microbench estimate hf://me/bare --responses scores.csv" in card


# ---------------------------------------------------------------------------- end to end
@pytest.fixture
def micro_task(tmp_path: Path) -> tuple[Path, Bundle]:
    """A task folder as ``microbench build --task`` writes one (``write_task``), 5 items."""
    bundle, docs = test_harness.toy_bundle("toy-published")
    spec = TaskSpec(
        task="micro_toy", data_dir="toy", output_type="multiple_choice",
        process_results="process_acc",
    )  # fmt: skip
    write_task(tmp_path / "my_tasks", spec, bundle, docs)
    return tmp_path / "my_tasks", bundle


def run_lmeval_cli(command: str, model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The card's ``lm-eval run`` line through lm-eval's own CLI, in this process (no
    second interpreter start-up); MODEL becomes the tiny model, on the CPU."""
    from lm_eval._cli import HarnessCLI

    argv = shlex.split(command.replace("pretrained=MODEL", f"pretrained={model},dtype=float32"))
    assert argv[:2] == ["lm-eval", "run"] and "MODEL" not in argv
    monkeypatch.setattr(sys, "argv", [*argv, "--device", "cpu", "--batch_size", "4"])
    cli = HarnessCLI()
    cli.execute(cli.parse_args())


@pytest.mark.slow
def test_card_commands_run_the_published_task_and_estimate_like_the_original(
    micro_task, hub: FakeHub, tiny_model: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    folder, bundle = micro_task
    publish_bundle(folder, "me/micro-toy")
    card = (hub.folder("me/micro-toy", None) / CARD_FILE).read_text()
    commands = _card_commands(card)
    assert commands[0] == "pip install lmeval-microbench"
    download, lmeval, reconstruct = commands[1:]
    work = tmp_path / "user"
    work.mkdir()
    monkeypatch.chdir(work)
    exec(shlex.split(download)[2], {})  # python -c "...snapshot_download(..., local_dir=...)"
    assert load_bundle(work / "micro-toy") == bundle
    run_lmeval_cli(lmeval, tiny_model, monkeypatch)
    (results_file,) = (work / "out").rglob("results_*.json")
    (samples,) = (work / "out").rglob("samples_micro_toy_*.jsonl")
    in_run = json.loads(results_file.read_text())["results"]["micro_toy"]
    # the original bundle (the task folder's, never uploaded) on the same answers
    record = test_harness.recomputed_estimate(samples, load_bundle(folder / "toy"), "acc")
    assert record["items_scored"] == bundle.budget
    test_harness.assert_same_estimate(in_run, record)
    capsys.readouterr()
    assert main(shlex.split(reconstruct)[1:]) == 0  # as written: the markdown table
    assert "toy" in capsys.readouterr().out
    assert main([*shlex.split(reconstruct)[1:], "--format", "json"]) == 0
    (model,) = json.loads(capsys.readouterr().out)["models"]
    found = model["benchmarks"][bundle.benchmark]
    assert found["bundle"] == bundle.name and found["items_scored"] == bundle.budget
    assert found["estimate"] == pytest.approx(record["estimate_value"], abs=1e-12)
    assert (found["lower"], found["upper"]) == pytest.approx(
        (record["estimate_lower"], record["estimate_upper"]), abs=1e-12
    )
