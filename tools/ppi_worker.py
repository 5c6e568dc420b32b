"""Worker of ``tools/bench_ppi.py``: ppi_py's mean estimates inside ppi_py's own venv.

ppi_py (PyPI ``ppi_python``; Angelopoulos et al., prediction-powered inference and PPI++)
needs numba and statsmodels, which this package does not, so ``bench_ppi.py`` creates a venv
for it and calls this script there. It reads one ``.npz`` file of parts (per cell key:
``KEY/yhat`` models x non-informative items, the predictions; ``KEY/audit_index`` the audit
items' columns in it; ``KEY/y_audit`` models x audit items, the answers) and writes, per cell
key, each model's estimate and 90 % interval of the mean over the non-informative items by
three of ppi_py's estimators: ``ppi`` (``lam=1``: the plain AIPW correction), ``ppi_tuned``
(``lam=None``: PPI++'s power tuning) and ``classical`` (the audit items' mean alone). Nothing
of ppi_py is copied here: it is imported and called.

    python ppi_worker.py PARTS.npz OUT.json
"""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np

LEVEL = 0.9


def estimates(y: np.ndarray, yhat: np.ndarray, unlabeled: np.ndarray) -> dict[str, list]:
    """``{estimator: [estimate, lower, upper]}`` of one model (scale: share of items right)."""
    from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

    alpha = 1.0 - LEVEL
    out = {}
    for name, lam in (("ppi", 1.0), ("ppi_tuned", None)):
        value = ppi_mean_pointestimate(y, yhat, unlabeled, lam=lam)
        lower, upper = ppi_mean_ci(y, yhat, unlabeled, alpha=alpha, lam=lam)
        out[name] = [float(np.ravel(v)[0]) for v in (value, lower, upper)]
    lower, upper = classical_mean_ci(y, alpha=alpha)
    out["classical"] = [float(np.mean(y)), float(np.ravel(lower)[0]), float(np.ravel(upper)[0])]
    return out


def main(argv: list[str]) -> int:
    parts_file, out_file = argv
    parts = np.load(parts_file)
    keys = sorted({name.rsplit("/", 1)[0] for name in parts.files})
    result: dict[str, list[dict[str, list]]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key in keys:
            yhat, index, answers = (parts[f"{key}/{n}"] for n in ("yhat", "audit_index", "y_audit"))
            result[key] = [
                estimates(answers[m], yhat[m, index], yhat[m]) for m in range(yhat.shape[0])
            ]
            print(key, flush=True)
    with open(out_file, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
