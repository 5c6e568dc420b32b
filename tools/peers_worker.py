"""Worker of ``tools/bench_peers.py``: runs benchpred's methods inside benchpred's own venv.

benchpred 1.0.0 pins numpy 1.26, so it cannot share an environment with this package; the
peer suite creates a venv for it and calls this script there. It reads the cells of one
matrix from an ``.npz`` file (``Y``: models x items int8 matrix, ``cells``: JSON list of
``{key, source, target, budget, seed}``), fits the method on each cell's source models with
``coreset_size = budget`` and appends one JSON line per cell to the output file:
``{key, pred, items, seconds}`` or ``{key, error, seconds}``. Nothing of benchpred is copied
here: it is imported and called as its README shows.

    python peers_worker.py CELLS.npz OUT.jsonl METHOD [--skip KEY ...]
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
import warnings

import numpy as np


def run_cell(method: str, matrix: np.ndarray, cell: dict) -> dict:
    from benchpred import all_methods

    source = matrix[np.asarray(cell["source"])].astype(float)
    target = matrix[np.asarray(cell["target"])].astype(float)
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            fitted = all_methods[method]()
            fitted.fit(source, cell["budget"], seed=cell["seed"])
            coreset = np.asarray(fitted.get_coreset(), dtype=int)
            pred = np.asarray(fitted.predict(target[:, coreset]), dtype=float).reshape(-1)
        if pred.shape != (target.shape[0],) or not np.all(np.isfinite(pred)):
            raise ValueError(f"prediction of shape {pred.shape} with non-finite values")
        return {
            "key": cell["key"],
            "pred": pred.tolist(),
            "items": int(np.unique(coreset).size),
            "seconds": time.perf_counter() - start,
        }
    except Exception as exc:  # a peer's failure is a result, not a crash of the suite
        text = str(exc).splitlines()[0][:200] if str(exc) else ""
        return {
            "key": cell["key"],
            "error": f"{type(exc).__name__}: {text}",
            "seconds": time.perf_counter() - start,
        }


def main(argv: list[str]) -> None:
    cells_file, out_file, method = argv[:3]
    skip = set(argv[argv.index("--skip") + 1 :]) if "--skip" in argv else set()
    warnings.filterwarnings("ignore")
    data = np.load(cells_file)
    matrix = data["Y"]
    cells = json.loads(str(data["cells"]))
    with open(out_file, "a", encoding="utf-8") as out:
        for cell in cells:
            if cell["key"] in skip:
                continue
            out.write(json.dumps(run_cell(method, matrix, cell)) + "\n")
            out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
