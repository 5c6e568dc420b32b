"""Models kept loaded between live ranking rounds (issue 23): one load per model where memory
allows, the least recently used let go (and named) where it does not."""

from __future__ import annotations

import pytest

from lmeval_microbench.rank.models import GIB, LoadedModels, model_bytes, model_device


class _Tensor:
    def __init__(self, numel: int, element_size: int = 2) -> None:
        self._numel, self._size = numel, element_size

    def numel(self) -> int:
        return self._numel

    def element_size(self) -> int:
        return self._size


class _Module:
    def __init__(self, gib: float) -> None:
        self.weights = [_Tensor(int(gib * GIB / 2))]

    def parameters(self):
        return iter(self.weights)

    def buffers(self):
        return iter([_Tensor(0)])


class _LM:
    """An lm-eval model stand-in with ``gib`` GiB of weights on ``device``."""

    def __init__(self, name: str, gib: float = 1.0, device: str = "cuda") -> None:
        self.name, self.model, self.device = name, _Module(gib), device


def _loaded(**kwargs) -> tuple[LoadedModels, list[str], list[str]]:
    made: list[str] = []
    lines: list[str] = []

    def load(name: str) -> _LM:
        made.append(name)
        return _LM(name)

    return LoadedModels(load, log=lines.append, **kwargs), made, lines


def test_each_model_is_loaded_once_across_rounds_where_memory_allows():
    models, made, lines = _loaded(free=lambda device: 100 * GIB)
    for _ in range(3):  # three rounds over three models
        for name in ("a", "b", "c"):
            assert models.get(name).name == name
    assert made == ["a", "b", "c"]
    assert models.summary() == {"loads": {"a": 1, "b": 1, "c": 1}, "reloads": []}
    assert lines == []


def test_a_device_short_of_memory_lets_the_least_recently_used_model_go_and_says_why():
    holder: list[LoadedModels] = []

    def free(device: str) -> int:
        assert device == "cuda:0"
        return int((3.0 - len(holder[0]._kept)) * GIB)  # a 3 GiB card; a model takes 1 GiB

    models, made, lines = _loaded(free=free)
    holder.append(models)
    for name in ("a", "b", "c", "b", "a"):
        models.get(name)
    # after a and b, 1 GiB is free: less than 1.25 GiB for the next, so a goes before c
    # loads; b is used again after c, so c is the least recently used when a comes back
    assert made == ["a", "b", "c", "a"]
    short = "cuda:0 had 1.0 GiB free, a model needs about 1.2 GiB"
    assert models.summary() == {
        "loads": {"a": 2, "b": 1, "c": 1},
        "reloads": [{"model": "a", "reason": f"room for c: {short}"}],
    }
    assert lines == [
        "microbench: let a go (room for c: cuda:0 had 1.0 GiB free, a model needs about 1.2 GiB);"
        " it is loaded again when promoted",
        "microbench: let c go (room for a: cuda:0 had 1.0 GiB free, a model needs about 1.2 GiB);"
        " it is loaded again when promoted",
    ]


def test_keep_models_caps_the_count_whatever_the_memory():
    models, made, _ = _loaded(keep=1, free=lambda device: 100 * GIB)
    for name in ("a", "b", "a"):
        models.get(name)
    assert made == ["a", "b", "a"]
    assert models.summary()["reloads"] == [{"model": "a", "reason": "--keep-models 1: room for b"}]


def test_models_without_weights_to_count_are_all_kept():
    class _API:
        device = "cpu"

    models = LoadedModels(lambda name: _API(), free=lambda device: 0)
    for name in ("a", "b", "a", "b"):
        models.get(name)
    assert models.summary()["loads"] == {"a": 1, "b": 1}
    assert model_bytes(_API()) is None


@pytest.mark.parametrize(
    ("device", "read"), [("cuda", "cuda:0"), ("cuda:1", "cuda:1"), ("cpu", "cpu"), ("mps", "cpu")]
)
def test_the_memory_read_is_that_of_the_models_device(device, read):
    assert model_device(_LM("m", device=device)) == read


def test_model_bytes_counts_weights_of_a_real_torch_module():
    torch = pytest.importorskip("torch")
    lm = _LM("m")
    lm.model = torch.nn.Linear(10, 4).to(torch.float16)  # 40 weights + 4 biases, 2 bytes each
    assert model_bytes(lm) == 88


def test_a_failed_load_is_not_counted_and_the_next_round_tries_again():
    attempts: list[str] = []

    def load(name: str) -> _LM:
        attempts.append(name)
        if len(attempts) == 1:
            raise RuntimeError("CUDA out of memory")
        return _LM(name)

    models = LoadedModels(load, free=lambda device: 100 * GIB)
    with pytest.raises(RuntimeError):
        models.get("a")
    assert models.get("a").name == "a" and models.summary()["loads"] == {"a": 1}
