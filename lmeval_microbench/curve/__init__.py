"""Training-checkpoint curves that show the model, not the sampling noise (``microbench curve``).

Roles, one module each:

* :mod:`.reader`: lm-eval output folders -> each checkpoint's answers per benchmark and
  item, read by the same code as ``microbench reconstruct`` (:mod:`lmeval_microbench.runs`);
* :mod:`.ordering`: which training step each run is (``--step-regex``, ``revision=``, or
  the order given);
* :mod:`.series`: per benchmark and checkpoint the raw subset score, IRT ability and
  full-score estimate with its interval;
* :mod:`.significance`: the paired sign-flip test that marks a step as a change of the
  model or noise;
* :mod:`.statistics`: total variation, share of steps down, residual variance around a
  monotone fit, signal-to-noise ratio, rank agreement with a true curve;
* :mod:`.assemble` and :mod:`.trace`: runs -> curves; :mod:`.report` and :mod:`.plot`:
  JSON, markdown and PNGs.
"""

from .ordering import Ordering, RunIdentity, order_runs
from .report import CurveReport, check_output, write_report
from .series import QUANTITIES, BenchmarkCurve, CurvePoint, TraceOptions, trace_benchmark
from .significance import StepTest, paired_flip_test
from .statistics import SeriesStats, rank_agreement, series_stats
from .trace import trace_runs

__all__ = [
    "QUANTITIES",
    "BenchmarkCurve",
    "CurvePoint",
    "CurveReport",
    "Ordering",
    "RunIdentity",
    "SeriesStats",
    "StepTest",
    "TraceOptions",
    "check_output",
    "order_runs",
    "paired_flip_test",
    "rank_agreement",
    "series_stats",
    "trace_benchmark",
    "trace_runs",
    "write_report",
]
