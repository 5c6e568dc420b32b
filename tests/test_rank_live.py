"""``microbench rank`` live: several tiny random GPT-2 models through the real lm-eval."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import test_harness

from lmeval_microbench.cli.app import main

tiny_model = test_harness.tiny_model  # the fixture: a random GPT-2 built locally
toy = test_harness.toy
toy_suite = test_harness.toy_suite
_fresh_registry = test_harness._fresh_registry


def reseeded(folder: Path, seed: int, target: Path) -> Path:
    """The tiny model with other random weights (same tokenizer): another 'fine-tune'."""
    import torch
    import transformers

    shutil.copytree(folder, target)
    torch.manual_seed(seed)
    config = transformers.GPT2Config.from_pretrained(folder)
    transformers.GPT2LMHeadModel(config).save_pretrained(target)
    return target


@pytest.mark.slow
def test_live_rank_runs_rounds_through_lm_eval_and_reports_a_failed_model(
    tiny_model, toy_suite, tmp_path, capsys
):
    models = [tiny_model] + [reseeded(tiny_model, s, tmp_path / f"m{s}") for s in (1, 2)]
    lines = [test_harness.model_args(m) for m in models]
    lines.append(test_harness.model_args(tmp_path / "no-such-model"))
    listing = tmp_path / "models.txt"
    listing.write_text("# one --model_args per line\n" + "\n".join(lines) + "\n")
    out = tmp_path / "ranking"
    argv = ["rank", "--model-args-file", str(listing), "--tasks", test_harness.TASK]
    argv += ["--include_path", str(toy_suite), "--fractions", "0.4,1", "--tiers", "1-1,2-"]
    argv += ["--out", str(out), "--batch_size", "4"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    document = json.loads((out / "ranking.json").read_text())
    assert document["levels"] == [2, 5]  # ceil(0.4 x 5 items), then all 5
    assert [row["rank"] for row in document["ranking"]] == [1, 2, 3]
    assert {row["items"] for row in document["ranking"]} <= {2, 5}
    assert list(printed["failures"]) == [str(tmp_path / "no-such-model")]
    assert printed["cost"]["models"] == 3  # ranked; the failed model still counts as flat cost
    assert printed["cost"]["flat_subset_items"] == 4 * 5
    for row in document["ranking"]:
        assert row["lower"] <= row["estimate"] <= row["upper"]
        assert row["rank_low"] <= row["rank"] <= row["rank_high"]
    assert (out / "rank_intervals.png").stat().st_size > 0
    # each model loaded once for the whole ranking, promoted or not (the failed one: never)
    ranked = {row["model"] for row in document["ranking"]}
    assert document["model_loads"] == {"loads": dict.fromkeys(ranked, 1), "reloads": []}
    assert any(row["items"] == 5 for row in document["ranking"])  # a promotion reused a model


def test_duplicate_live_models_are_an_error(tmp_path, capsys):
    argv = ["rank", "--model_args", "pretrained=a", "--model_args", "pretrained=a,dtype=float32"]
    assert main(argv) == 2
    assert "duplicate model names: 'a'" in capsys.readouterr().err


@pytest.mark.slow
def test_live_rank_on_an_adaptive_pool_continues_each_models_run(
    tiny_model, tmp_path, capsys, monkeypatch
):
    """Rounds over a pool task: level 2 asks 3 more items, picked after the first 3 answers,
    K = 2 items per model call; each model loaded once."""
    import test_adaptive_harness

    from lmeval_microbench.adaptive import runner

    pools = test_adaptive_harness.write_pool(tmp_path / "pools")
    calls: list[dict[str, list[str]]] = []
    real_ask_many = runner.ask_many

    def counting_ask_many(lm, batches):
        calls.append({task.name: list(items) for task, items in batches})
        return real_ask_many(lm, batches)

    monkeypatch.setattr(runner, "ask_many", counting_ask_many)
    models = [tiny_model] + [reseeded(tiny_model, s, tmp_path / f"m{s}") for s in (1, 2)]
    argv = ["rank", "--adaptive", "--adaptive-items", "3,6", "--tasks", "microbench_pool_toy"]
    argv += ["--include_path", str(pools), "--tiers", "1-1,2-", "--batch_size", "4"]
    argv += ["--items-per-step", "2"]
    for m in [*models, tmp_path / "no-such-model"]:
        argv += ["--model_args", test_harness.model_args(m)]
    argv += ["--out", str(tmp_path / "ranking")]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    document = json.loads((tmp_path / "ranking" / "ranking.json").read_text())
    assert document["mode"] == "live-adaptive" and document["levels"] == [3, 6]
    assert list(printed["failures"]) == [str(tmp_path / "no-such-model")]
    rows = document["ranking"]
    assert len(rows) == 3 and {row["items"] for row in rows} <= {3, 6}
    promoted = sum(row["items"] == 6 for row in rows)
    # 3 items at K=2: steps of 2 and 1; a promotion to 6 asks 3 more: again 2 and 1
    assert [len(items) for call in calls for items in call.values()] == [2, 1] * (3 + promoted)
    asked = [item for call in calls for items in call.values() for item in items]
    assert len(asked) == 3 * 3 + 3 * promoted
    ranked = {row["model"] for row in rows}
    assert document["model_loads"] == {"loads": dict.fromkeys(ranked, 1), "reloads": []}
    for row in rows:
        assert row["lower"] <= row["estimate"] <= row["upper"]


def test_adaptive_item_counts_are_checked(capsys):
    from lmeval_microbench.errors import InputError
    from lmeval_microbench.rank.adaptive_live import check_counts

    argv = ["rank", "--adaptive", "--model_args", "pretrained=a", "--model_args", "pretrained=b"]
    assert main([*argv, "--adaptive-items", "5,x"]) == 2
    assert "--adaptive-items takes item counts such as" in capsys.readouterr().err
    assert check_counts([3, 6], {"p": 6, "q": 9}) == (3, 6)
    with pytest.raises(InputError, match="must increase"):
        check_counts([20, 10], {"p": 40})
    with pytest.raises(InputError, match="exceeds the 6 items of pool task 'p'"):
        check_counts([3, 7], {"p": 6, "q": 9})


def test_a_round_without_a_terminal_prints_a_line_per_model(capsys):
    from lmeval_microbench.rank.live import score_models

    def score(name: str):
        if name == "bad":
            raise RuntimeError("out of memory\nmore")
        return name

    done = score_models(["a", "bad", "c"], [10, 40], 1, score)
    assert set(done.scores) == {"a", "c"} and done.failures["bad"] == "RuntimeError: out of memory"
    assert capsys.readouterr().err.splitlines() == [
        "level 2/2 (40 items): model 1 of 3 done: a",
        "level 2/2 (40 items): model 2 of 3 failed: bad",
        "level 2/2 (40 items): model 3 of 3 done: c",
    ]


def test_the_hf_model_runs_on_the_cpu_where_there_is_no_gpu(monkeypatch):
    import torch

    from lmeval_microbench.adaptive.runner import default_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device("hf", None) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device("hf", None) == "cuda"
    assert default_device("hf", "cuda:1") == "cuda:1"
    assert default_device("vllm", None) is None  # other backends choose for themselves
    assert default_device("hf", None, "pretrained=m, device=cpu") is None  # named: left alone


class _ScriptedLive:
    """Stands in for ``LiveEvaluator``: three models whose estimates sharpen with the level
    (two of them close), so the CLI's live path runs its rounds without lm-eval."""

    def __init__(self, models, tasks, include_path, **kwargs) -> None:
        self.truth = {"a": 0.50, "b": 0.56, "c": 0.90}
        self.sds = (0.08, 0.02, 0.001)
        self.levels, self.tasks = (2, 4, 8), {"toy": 8}
        self.calls: list[tuple[int, list[str]]] = []

    def evaluate(self, models, level):
        from lmeval_microbench.rank import Evaluated, Scored

        self.calls.append((level, list(models)))
        sd = self.sds[level]
        return Evaluated({m: Scored(self.truth[m], self.truth[m] - 2 * sd,
                                    self.truth[m] + 2 * sd) for m in models})  # fmt: skip


def test_live_rank_of_three_models_is_pairwise_and_prints_no_replay_check(
    tmp_path, capsys, monkeypatch
):
    """Default tiers on 3 models: before, the first round called all three resolved at 1-3
    on 2 of 8 items; now the close pair climbs until it is told apart."""
    from lmeval_microbench.rank import live

    monkeypatch.setattr(live, "LiveEvaluator", _ScriptedLive)
    argv = ["rank", "--device", "cpu", "--out", str(tmp_path / "ranking"), "--no-plots"]
    for name in ("a", "b", "c"):
        argv += ["--model_args", f"pretrained={name}"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    document = json.loads((tmp_path / "ranking" / "ranking.json").read_text())
    rows = {row["model"]: row for row in document["ranking"]}
    assert [rows[m]["rank"] for m in "cba"] == [1, 2, 3]
    assert all(row["rank_low"] == row["rank_high"] for row in rows.values())
    assert rows["a"]["items"] == rows["b"]["items"] > 2 and rows["c"]["items"] == 2
    assert printed["tier_rule"].startswith("pairwise") and "replay_check" not in printed
    assert "Replay against" not in (tmp_path / "ranking" / "ranking.md").read_text()


def test_rank_adaptive_refuses_vllm_data_parallel(capsys):
    argv = ["rank", "--adaptive", "--model", "vllm", "--adaptive-items", "2,4"]
    for name in ("a", "b"):
        argv += ["--model_args", f"pretrained={name},data_parallel_size=2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "engines anew in every call" in err and "Traceback" not in err


def test_models_on_several_devices_are_scored_at_once_and_reported_in_order():
    """One thread per device: a and b (kept from an earlier round) wait for each other (a
    barrier that breaks after 10 s if the devices ran one after another); c and d are loaded
    first (alone: a load waits for the evaluations running)."""
    import threading

    from lmeval_microbench.rank import Scored
    from lmeval_microbench.rank.live import score_models

    meet = threading.Barrier(2, timeout=10)

    class Loaded:  # as DeviceModels: each model's device, loads
        def __init__(self) -> None:
            self.device_of = {"a": "cuda:0", "b": "cuda:1", "c": "cuda:0", "d": "cuda:1"}
            self.kept, self.loads = ["a", "b"], []

        def is_loaded(self, name: str) -> bool:
            return name in self.kept

        def get(self, name: str) -> str:
            self.loads.append(name)
            self.kept.append(name)
            return name

    def score(name: str) -> Scored:
        if name in ("a", "b"):
            meet.wait()
        if name == "d":
            raise RuntimeError("CUDA out of memory")
        return Scored(0.5, 0.4, 0.6)

    loaded = Loaded()
    done = score_models(list(loaded.device_of), [10, 20], 0, score, loaded)
    assert list(done.scores) == ["a", "b", "c"]
    assert done.failures == {"d": "RuntimeError: CUDA out of memory"}
    assert sorted(loaded.loads) == ["c", "d"]


def test_a_load_waits_for_running_evaluations_and_holds_new_ones():
    import threading
    import time

    from lmeval_microbench.rank.models import LoadGate

    gate, events = LoadGate(), []
    evaluating = threading.Event()

    def evaluate(name: str, seconds: float) -> None:
        with gate.evaluating():
            events.append(f"{name} starts")
            evaluating.set()
            time.sleep(seconds)
            events.append(f"{name} ends")

    first = threading.Thread(target=evaluate, args=("first", 0.3))
    first.start()
    evaluating.wait(5)

    def load() -> None:
        with gate.loading():
            events.append("load")

    loader = threading.Thread(target=load)
    loader.start()
    time.sleep(0.05)  # the load now waits; an evaluation asked for now waits behind it
    second = threading.Thread(target=evaluate, args=("second", 0.0))
    second.start()
    for thread in (first, loader, second):
        thread.join(5)
    assert events == ["first starts", "first ends", "load", "second starts", "second ends"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--device", "cpu", "--devices", "cuda:0,cuda:1"], "give --device or --devices"),
        (["--devices", "cuda:0,cuda:0"], "distinct devices"),
        (["--devices", " , "], "empty entry"),
    ],
)
def test_devices_are_checked(extra, message, capsys):
    argv = ["rank", "--model_args", "pretrained=a", "--model_args", "pretrained=b", *extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_devices_refuse_a_device_named_in_model_args(capsys):
    argv = ["rank", "--model_args", "pretrained=a,device=cuda:3", "--model_args", "pretrained=b"]
    assert main([*argv, "--devices", "cuda:0,cuda:1"]) == 2
    assert "names a device too: lm-eval takes one" in capsys.readouterr().err
    assert main([*argv, "--device", "cpu"]) == 2
    assert "--device is given, and --model_args of 'a'" in capsys.readouterr().err


def rank_on_one_and_two_devices(argv: list[str], models: list, tmp_path: Path) -> list[dict]:
    """``ranking.json`` of the same ranking on one device and on two (lm-eval's hf model reads
    'cpu:0' as the CPU, so a CPU machine has two 'devices', one thread each)."""
    for m in models:
        argv = [*argv, "--model_args", test_harness.model_args(m, device=False)]
    assert main([*argv, "--device", "cpu", "--out", str(tmp_path / "one")]) == 0
    assert main([*argv, "--devices", "cpu,cpu:0", "--out", str(tmp_path / "two")]) == 0
    return [json.loads((tmp_path / k / "ranking.json").read_text()) for k in ("one", "two")]


@pytest.mark.slow
def test_live_rank_over_two_devices_gives_the_one_device_ranking(tiny_model, toy_suite, tmp_path):
    """The models are spread over two threads and the ranking is the one of one device."""
    models = [tiny_model] + [reseeded(tiny_model, s, tmp_path / f"m{s}") for s in (1, 2)]
    argv = ["rank", "--tasks", test_harness.TASK, "--include_path", str(toy_suite)]
    argv += ["--fractions", "0.4,1", "--tiers", "1-1,2-", "--batch_size", "4", "--no-plots"]
    one, two = rank_on_one_and_two_devices(argv, models, tmp_path)
    assert two["ranking"] == one["ranking"] and two["rounds"] == one["rounds"]
    assert two["model_loads"]["devices"] == {
        str(m): device for m, device in zip(models, ["cpu", "cpu:0", "cpu"], strict=True)
    }
    assert two["model_loads"]["loads"] == dict.fromkeys(map(str, models), 1)


@pytest.mark.slow
def test_adaptive_live_rank_over_two_devices_gives_the_one_device_ranking(tiny_model, tmp_path):
    """As above on an adaptive pool: each device thread asks through its own task objects."""
    import test_adaptive_harness

    pools = test_adaptive_harness.write_pool(tmp_path / "pools")
    models = [tiny_model] + [reseeded(tiny_model, s, tmp_path / f"m{s}") for s in (1, 2)]
    argv = ["rank", "--adaptive", "--adaptive-items", "3,6", "--tasks", "microbench_pool_toy"]
    argv += ["--include_path", str(pools), "--tiers", "1-1,2-", "--batch_size", "4", "--no-plots"]
    one, two = rank_on_one_and_two_devices(argv, models, tmp_path)
    assert two["ranking"] == one["ranking"] and two["rounds"] == one["rounds"]
    assert set(two["model_loads"]["devices"].values()) == {"cpu", "cpu:0"}
