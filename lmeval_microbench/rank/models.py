"""Models kept loaded between live ranking rounds: each model is loaded once where memory allows.

A live ranking promotes a model several times, and each round asks it only a few items. On a
GPU server, loading a 7B model again for every round costs far more than the items it is asked,
so :class:`LoadedModels` keeps every model it has loaded. Before the next load it checks the
free memory of the device the models live on; when the largest model seen so far (with a
margin) would not fit, it lets the least recently used models go, logs which one and why, and
loads that model again when it is next promoted. ``keep`` caps the number kept, whatever the
memory (``--keep-models``; 1 loads each model anew whenever another was used in between).

With several devices (``--devices cuda:0,cuda:1``), :class:`DeviceModels` gives each model a
device for the whole ranking (round robin in the order the models were given, so a kept model
is found where it was loaded) and keeps a :class:`LoadedModels` per device. The devices work
at once, one thread each, but a load runs alone (:class:`LoadGate`): in a test, threads
loading beside each other's work gave other log-likelihoods, even NaN (which process-wide
state a Hugging Face load touches was not pinned down); with loads alone, every estimate
equals one thread's.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

HEADROOM = 1.25  # a load needs its weights and some working memory besides
GIB = 2**30


def model_bytes(lm: Any) -> int | None:
    """Bytes of an lm-eval model's weights and buffers, or None where it has none to count
    (an API model, a vLLM engine that manages its own memory)."""
    module = getattr(lm, "model", None)
    if not callable(getattr(module, "parameters", None)):
        return None
    tensors = [*module.parameters(), *module.buffers()]
    return int(sum(t.numel() * t.element_size() for t in tensors))


def model_device(lm: Any) -> str:
    """'cuda:N' for a model on a GPU, else 'cpu' (the memory :func:`free_bytes` reads)."""
    device = str(getattr(lm, "device", "cpu"))
    if device.startswith("cuda"):
        return device if ":" in device else "cuda:0"
    return "cpu"


def free_bytes(device: str) -> int | None:
    """Free memory of ``device``: the GPU's from CUDA, the machine's available memory for the
    CPU (Linux ``MemAvailable``); None where it cannot be read."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def lm_loader(
    model: str, model_args: Mapping[str, str], *, device: str | None, batch_size: str | None
) -> Callable[[str], Any]:
    """Loads the model named ``name`` as ``lm-eval run`` would from its ``--model_args``."""
    from ..adaptive.runner import make_lm

    def load(name: str) -> Any:
        return make_lm(model, model_args[name], device=device, batch_size=batch_size)

    return load


def release_memory() -> None:
    """Return freed weights to the device (CUDA's cache) once a model is let go."""
    gc.collect()
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


@dataclass
class LoadedModels:
    """lm-eval models by name, loaded by ``load`` once and kept while memory allows.

    ``loads`` counts the loads of each model; ``reloads`` says, for each load after the first,
    why the model had been let go. ``free`` reads a device's free memory (injectable for tests).
    """

    load: Callable[[str], Any]
    keep: int | None = None
    free: Callable[[str], int | None] = free_bytes
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)
    loads: Counter[str] = field(default_factory=Counter)
    reloads: list[dict[str, str]] = field(default_factory=list)
    _kept: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    _sizes: dict[str, int] = field(default_factory=dict)
    _devices: dict[str, str] = field(default_factory=dict)
    _why_gone: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        """The loaded model ``name``: the kept one, else a new load (after making room)."""
        if name in self._kept:
            self._kept.move_to_end(name)
            return self._kept[name]
        self._make_room(name)
        lm = self.load(name)
        self.loads[name] += 1
        if self.loads[name] > 1:
            self.reloads.append({"model": name, "reason": self._why_gone.pop(name, "")})
        size = model_bytes(lm)
        if size is not None:
            self._sizes[name] = size
            self._devices[name] = model_device(lm)
        self._kept[name] = lm
        return lm

    def is_loaded(self, name: str) -> bool:
        return name in self._kept

    def _make_room(self, name: str) -> None:
        """Let the least recently used models go until ``name`` fits (count and memory)."""
        while self._kept and self.keep is not None and len(self._kept) >= self.keep:
            self._drop(f"--keep-models {self.keep}: room for {name}")
        while self._kept and (shortfall := self._shortfall()) is not None:
            self._drop(f"room for {name}: {shortfall}")

    def _shortfall(self) -> str | None:
        """Why one more model of the largest size seen does not fit, or None if it does."""
        kept = [m for m in self._kept if m in self._sizes]
        if not kept:
            return None
        device = self._devices[kept[-1]]
        need = HEADROOM * max(self._sizes.values())
        free = self.free(device)
        if free is None or free >= need:
            return None
        return f"{device} had {free / GIB:.1f} GiB free, a model needs about {need / GIB:.1f} GiB"

    def _drop(self, reason: str) -> None:
        name, _ = self._kept.popitem(last=False)
        self._why_gone[name] = reason
        self.log(f"microbench: let {name} go ({reason}); it is loaded again when promoted")
        release_memory()

    def close(self) -> None:
        """Let every model go (the end of the ranking)."""
        self._kept.clear()
        release_memory()

    def summary(self) -> dict[str, Any]:
        """Loads per model and the reasons for reloads (``ranking.json``'s ``model_loads``)."""
        return {"loads": dict(self.loads), "reloads": list(self.reloads)}


def assign_devices(models: Sequence[str], devices: Sequence[str | None]) -> dict[str, str | None]:
    """Each model's device: round robin in the order given, fixed for the whole ranking."""
    return {name: devices[k % len(devices)] for k, name in enumerate(models)}


class DeviceModels:
    """Models loaded on one or more devices: a :class:`LoadedModels` per device, each model on
    the device :func:`assign_devices` gives it. ``devices`` ``[None]``: the backend's choice."""

    def __init__(
        self,
        model: str,
        model_args: Mapping[str, str],
        *,
        devices: Sequence[str | None],
        batch_size: str | None,
        keep: int | None,
    ) -> None:
        self.device_of = assign_devices(list(model_args), devices)
        self.on = {
            device: LoadedModels(
                lm_loader(model, model_args, device=device, batch_size=batch_size), keep=keep
            )
            for device in dict.fromkeys(devices)
        }

    def get(self, name: str) -> Any:
        return self.on[self.device_of[name]].get(name)

    def is_loaded(self, name: str) -> bool:
        return self.on[self.device_of[name]].is_loaded(name)

    def close(self) -> None:
        for models in self.on.values():
            models.close()

    def summary(self) -> dict[str, Any]:
        """Loads per model and reasons for reloads over every device (and, with several, the
        device of each model)."""
        parts = [models.summary() for models in self.on.values()]
        summary: dict[str, Any] = {
            "loads": {name: n for part in parts for name, n in part["loads"].items()},
            "reloads": [row for part in parts for row in part["reloads"]],
        }
        if len(self.on) > 1:
            summary["devices"] = dict(self.device_of)
        return summary


class LoadGate:
    """Model calls of several threads at once, a model load only while nothing else runs.

    A load waits until the running evaluations finish; evaluations that would start wait
    while a load runs or waits (so a load is never starved).
    """

    def __init__(self) -> None:
        self._state = threading.Condition()
        self._running = 0  # evaluations running
        self._loads = 0  # loads running or waiting
        self._load_running = False

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        with self._state:
            self._state.wait_for(lambda: self._loads == 0)
            self._running += 1
        try:
            yield
        finally:
            with self._state:
                self._running -= 1
                self._state.notify_all()

    @contextmanager
    def loading(self) -> Iterator[None]:
        with self._state:
            self._loads += 1
            self._state.wait_for(lambda: self._running == 0 and not self._load_running)
            self._load_running = True
        try:
            yield
        finally:
            with self._state:
                self._loads -= 1
                self._load_running = False
                self._state.notify_all()
