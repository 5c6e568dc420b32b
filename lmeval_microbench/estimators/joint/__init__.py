"""Joint estimation across benchmarks: all of a model's subset answers inform every score.

One estimator, :class:`JointEstimator`, in modules by role:

- :mod:`.estimator`: the estimator (fit, estimate, state); its module docstring has the method;
- :mod:`.inputs`: checks and joins of what ``fit`` is given across benchmarks;
- :mod:`.head`: the ridge head (one ridge per output, penalties chosen by GCV);
- :mod:`.results`: what ``estimate`` returns for one model, and its fallback warning;
- :mod:`.state`: the fitted estimator of a sealed ``joint.json``.

Not imported by ``estimators/__init__``: the joint estimator sits on top of the per-benchmark
estimators (it uses their registry), not in it.
"""

from .estimator import FEATURE_SETS, STATE_VERSION, JointEstimator
from .head import ALPHA_GRID, ITEM_SCALES, RidgeHead, cross_fit_head, fit_ridge_head
from .inputs import AVERAGE
from .results import JointEstimates, JointFallbackWarning
from .state import load_state

__all__ = [
    "ALPHA_GRID",
    "AVERAGE",
    "FEATURE_SETS",
    "ITEM_SCALES",
    "STATE_VERSION",
    "JointEstimates",
    "JointEstimator",
    "JointFallbackWarning",
    "RidgeHead",
    "cross_fit_head",
    "fit_ridge_head",
    "load_state",
]
