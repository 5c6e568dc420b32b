"""Adaptive evaluation (Fluid Benchmarking style): pick each next item by Fisher information.

Roles, as in catsim: :mod:`.selection` (which items next), :mod:`.estimation` (ability after
each answer), :mod:`.stopping` (when to stop), :mod:`.scoring` (ability and answers -> full
score with an interval); :mod:`.engine` runs them as one loop, :mod:`.simulate` replays
recorded answers through it, :mod:`.pool` builds and opens item pools (:mod:`.calibrate` fits
their bands and imputation strength on replays of the source models; :mod:`.refresh` gives a
saved pool what later releases added, refitting nothing), :mod:`.runner` asks a
real model through lm-eval, :mod:`.interleave` runs several benchmarks with one batch per step,
:mod:`.runlog` keeps what a run did, and :mod:`.evaluate` measures
pools on held-out models.
"""

from .engine import AdaptiveSession
from .pool import ADAPTIVE, AdaptiveState, Pool, build_pool, is_pool, pool_state
from .pool_task import POOL_TASK_PREFIX, pool_task_spec
from .scoring import ScoreMap
from .selection import MaxInfoSelector, RandomesqueSelector, Selector, make_selector
from .simulate import ReplayResult, replay
from .stopping import StoppingRule

__all__ = [
    "ADAPTIVE",
    "POOL_TASK_PREFIX",
    "AdaptiveSession",
    "AdaptiveState",
    "MaxInfoSelector",
    "Pool",
    "RandomesqueSelector",
    "ReplayResult",
    "ScoreMap",
    "Selector",
    "StoppingRule",
    "build_pool",
    "is_pool",
    "make_selector",
    "pool_state",
    "pool_task_spec",
    "replay",
]
