"""Speed of the 2PL fit, against py-irt and girth on the same matrices, on 2 CPU threads.

Matrices: the six Open LLM Leaderboard v1 matrices of ``../shared/data/openllm_v1/responses``
(3-4k models x 58-249 items), ``psn_irt/combine.csv`` (12 models x 41,871 items, constant
columns dropped) and a synthetic 2PL matrix (5,000 x 30,000 by default; known parameters).

Every (tool, matrix) pair runs in its own subprocess with BLAS/torch limited to ``--threads``
threads and a wall-clock ``--timeout``: the time is the fit alone (data loading excluded;
ours: fastest of ``--repeats`` fits, as the machine may be shared; the others: one fit),
the memory is the subprocess's peak RSS (``resource.getrusage``), reported with its RSS once
the matrix is loaded (tracemalloc was tried and dropped: it slowed numpy fits 5-7x).

Tools: ``ours`` (``IRTModel("2pl")``; ``ours_1thread``: the same with one thread, as two
spinning BLAS threads on a shared machine can be many times slower than one), ``girth``
(``girth.twopl_mml``, marginal ML) and ``pyirt`` (py-irt ``2pl``, variational inference,
default 2000 epochs). Agreement with ours: Pearson correlation of discriminations,
difficulties b = -d / a and abilities, joined by item and model id; as b explodes where a
slope is near 0, the Spearman rank correlation of b is reported too.

    python tools/bench_irt.py              # full run, writes bench/irt_speed.{json,md}
    python tools/bench_irt.py --quick      # small synthetic, psn subset, 50 py-irt epochs
    python tools/bench_irt.py --tools ours,girth --timeout 300
    python tools/bench_irt.py --tools ours,ours_1thread --reuse bench/irt_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_irt_report import markdown

OPENLLM_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")
TOOLS = ("ours", "ours_1thread", "girth", "pyirt")
TARGET_SECONDS = {"openllm": 1.0, "psn": 60.0, "synthetic": 60.0}
TARGET_PEAK_GIB = 4.0
REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------- arguments
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=REPO / ".." / "shared" / "data",
        help="the shared data folder (default: ../shared/data)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "bench",
        help="folder for irt_speed.json and irt_speed.md (default: bench/)",
    )
    parser.add_argument(
        "--tools", default=",".join(TOOLS), help=f"comma-separated subset of {','.join(TOOLS)}"
    )
    parser.add_argument("--threads", type=int, default=2, help="BLAS / torch threads (default 2)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="wall-clock limit per (tool, Open LLM matrix) run in seconds (default 1800)",
    )
    parser.add_argument(
        "--timeout-large",
        type=float,
        default=600.0,
        help="the same for the psn and synthetic matrices (default 600)",
    )
    parser.add_argument(
        "--pyirt-epochs",
        type=int,
        default=2000,
        help="py-irt training epochs (default: its own default, 2000)",
    )
    parser.add_argument(
        "--synthetic",
        default="5000x30000",
        help="models x items of the synthetic 2PL matrix (default 5000x30000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic matrix")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="fits of ours per matrix; the fastest is reported (default 3; "
        "girth and py-irt run once)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1000x3000 synthetic, first 5000 psn columns, 50 py-irt epochs, "
        "other tools on arc and mmlu only",
    )
    parser.add_argument(
        "--reuse",
        type=Path,
        help="an earlier irt_speed.json: keep its rows of the tools not given to "
        "--tools (e.g. rerun only ours when the slow comparators are done); "
        "time ratios are recomputed, the rows are labelled as reused",
    )
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--job-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(args.tools) - set(TOOLS))
    if unknown:
        parser.error(f"--tools: unknown {unknown}; choose from {TOOLS}")
    try:
        rows, cols = (int(x) for x in args.synthetic.lower().split("x"))
    except ValueError:
        parser.error(f"--synthetic must look like 5000x30000, got {args.synthetic!r}")
    args.synthetic_shape = (rows, cols)
    if args.quick:
        args.synthetic_shape = (1000, 3000)
        args.pyirt_epochs = min(args.pyirt_epochs, 50)
    return args


# ---------------------------------------------------------------------------------- jobs (child)
def load_matrix(spec: dict[str, Any]):
    """The matrix of a job spec, plus the true parameters for the synthetic one."""
    import numpy as np
    import pandas as pd

    from lmeval_microbench.responses import ResponseMatrix

    data = Path(spec["data"])
    if spec["kind"] == "openllm":
        path = data / "openllm_v1" / "responses" / f"{spec['name']}_B.parquet"
        return ResponseMatrix.read_parquet(path), None
    if spec["kind"] == "psn":
        path = data / "psn_irt" / "combine.csv"
        values = pd.read_csv(path, header=None).to_numpy(dtype=np.float64)
        if spec.get("max_items"):
            values = values[:, : spec["max_items"]]
        matrix = ResponseMatrix(
            values,
            [f"psn_model{k}" for k in range(values.shape[0])],
            [f"psn.{j}" for j in range(values.shape[1])],
            source=str(path),
        )
        return matrix.drop_items(matrix.constant_items()), None
    return synthetic_matrix(*spec["shape"], seed=spec["seed"])


def synthetic_matrix(n_models: int, n_items: int, *, seed: int):
    """A 2PL matrix drawn in row chunks as int8 (so the draw itself stays small)."""
    import numpy as np
    from scipy.special import expit

    from lmeval_microbench.responses import ResponseMatrix

    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(n_models)
    a = np.exp(rng.normal(0.0, 0.3, n_items))
    d = rng.normal(0.0, 1.0, n_items)
    values = np.empty((n_models, n_items), dtype=np.int8)
    for start in range(0, n_models, 250):
        rows = slice(start, start + 250)
        probs = expit(np.outer(theta[rows], a) + d)
        values[rows] = rng.random(probs.shape) < probs
    matrix = ResponseMatrix(
        values,
        [f"sim_model{k}" for k in range(n_models)],
        [f"sim.{j}" for j in range(n_items)],
        source=f"synthetic 2PL {n_models}x{n_items} seed {seed}",
    )
    return matrix, {"a": a, "b": -d / a, "theta": theta}


def run_job(spec: dict[str, Any]) -> dict[str, Any]:
    """Fit one matrix with one tool; returns times, ids and fitted arrays (JSON-ready)."""
    matrix, truth = load_matrix(spec)
    result: dict[str, Any] = {"shape": list(matrix.shape)}
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    fit = {"ours": fit_ours, "ours_1thread": fit_ours, "girth": fit_girth, "pyirt": fit_pyirt}[
        spec["tool"]
    ]
    result.update(fit(matrix, spec))
    result["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    result["rss_before_fit_gib"] = rss_before
    if truth is not None:
        result["truth"] = {k: v.tolist() for k, v in truth.items()}
    return result


def fit_ours(matrix, spec: dict[str, Any]) -> dict[str, Any]:
    import warnings

    from lmeval_microbench.errors import ConvergenceWarning
    from lmeval_microbench.irt import IRTModel

    times = []
    for _ in range(spec["repeats"]):
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = IRTModel("2pl").fit(matrix)
        times.append(time.perf_counter() - started)
    a = model.params_.a[:, 0]
    return {
        "seconds": min(times),
        "seconds_all": times,
        "converged": bool(model.converged_),
        "n_iter": int(model.n_iter_),
        "item_ids": list(model.params_.item_ids),
        "model_ids": list(model.model_ids_),
        "a": a.tolist(),
        "b": (-model.params_.d / a).tolist(),
        "theta": model.abilities_[:, 0].tolist(),
    }


def fit_girth(matrix, spec: dict[str, Any]) -> dict[str, Any]:
    import girth
    import numpy as np

    responses = np.asarray(matrix.values.T, dtype=int)  # girth: items x participants, no NaN
    started = time.perf_counter()
    out = girth.twopl_mml(responses)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "item_ids": list(matrix.item_ids),
        "model_ids": list(matrix.model_ids),
        "a": np.asarray(out["Discrimination"], dtype=float).tolist(),
        "b": np.asarray(out["Difficulty"], dtype=float).tolist(),
        "theta": np.asarray(out["Ability"], dtype=float).tolist(),
    }


def fit_pyirt(matrix, spec: dict[str, Any]) -> dict[str, Any]:
    import torch
    from py_irt.config import IrtConfig
    from py_irt.dataset import Dataset
    from py_irt.training import IrtModelTrainer

    torch.set_num_threads(spec["threads"])
    frame = matrix.to_frame().reset_index()
    dataset = Dataset.from_pandas(frame, subject_column="model", item_columns=list(matrix.item_ids))
    config = IrtConfig(model_type="2pl", epochs=spec["epochs"], log_every=10**9, seed=spec["seed"])
    trainer = IrtModelTrainer(data_path=None, config=config, dataset=dataset, verbose=False)
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    params = trainer.last_params
    return {
        "seconds": seconds,
        "epochs": spec["epochs"],
        "item_ids": [params["item_ids"][k] for k in range(len(params["diff"]))],
        "model_ids": [params["subject_ids"][k] for k in range(len(params["ability"]))],
        "a": list(params["disc"]),
        "b": list(params["diff"]),
        "theta": list(params["ability"]),
    }


# ---------------------------------------------------------------------------------- parent
def thread_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def launch(spec: dict[str, Any], timeout: float, threads: int) -> dict[str, Any]:
    """Run one job in a subprocess; timeouts and crashes become a recorded status."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "job.json"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--job",
            json.dumps(spec),
            "--job-out",
            str(out),
        ]
        started = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                env=thread_env(threads),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "reason": f"no result within {timeout:.0f} s (killed)"}
        wall = time.perf_counter() - started
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"status": "error", "reason": " | ".join(tail) or f"exit {done.returncode}"}
        result = json.loads(out.read_text())
        result.update(status="ok", wall_seconds=wall)
        return result


def correlation(
    ours: dict[str, Any], other: dict[str, Any], key: str, id_key: str, *, rank: bool = False
) -> float:
    """Pearson (or Spearman, ``rank``) correlation of ``key`` between two results, by id."""
    import numpy as np
    from scipy.stats import rankdata

    theirs = dict(zip(other[id_key], other[key], strict=True))
    pairs = [(v, theirs[i]) for i, v in zip(ours[id_key], ours[key], strict=True) if i in theirs]
    if len(pairs) < 3:
        return float("nan")
    x, y = np.array(pairs, dtype=float).T
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return float("nan")
    x, y = (rankdata(x[ok]), rankdata(y[ok])) if rank else (x[ok], y[ok])
    return float(np.corrcoef(x, y)[0, 1])


def agreement(ours: dict[str, Any], other: dict[str, Any]) -> dict[str, float]:
    return {
        "r_discrimination": correlation(ours, other, "a", "item_ids"),
        "r_difficulty": correlation(ours, other, "b", "item_ids"),
        "rho_difficulty": correlation(ours, other, "b", "item_ids", rank=True),
        "r_ability": correlation(ours, other, "theta", "model_ids"),
    }


def matrix_specs(args: argparse.Namespace) -> list[dict[str, Any]]:
    base = {
        "data": str(args.data.resolve()),
        "seed": args.seed,
        "threads": args.threads,
        "epochs": args.pyirt_epochs,
        "repeats": args.repeats,
    }
    specs = [{**base, "kind": "openllm", "name": bm} for bm in OPENLLM_BENCHMARKS]
    psn = {**base, "kind": "psn", "name": "psn_combine"}
    if args.quick:
        psn["max_items"] = 5000
    specs.append(psn)
    rows, cols = args.synthetic_shape
    specs.append(
        {**base, "kind": "synthetic", "name": f"synthetic_{rows}x{cols}", "shape": [rows, cols]}
    )
    return specs


PYIRT_MAX_OBSERVATIONS = 20_000_000
"""py-irt's Dataset keeps three Python lists with one object per observation (~100 bytes
each after pandas' melt and merge): beyond this it would need more memory than the machine."""


def compared_on(spec: dict[str, Any], tool: str, quick: bool) -> str | None:
    """Why ``tool`` is not run on this matrix (None: run it)."""
    if tool.startswith("ours"):
        return None
    if quick and spec.get("name") not in ("arc", "mmlu"):
        return "--quick: other tools only on arc and mmlu"
    if tool == "pyirt" and spec["kind"] == "synthetic":
        n_obs = spec["shape"][0] * spec["shape"][1]
        if n_obs > PYIRT_MAX_OBSERVATIONS:
            return (
                f"{n_obs / 1e6:.0f}M observations: py-irt's long-format Dataset would need "
                f"~{n_obs * 100 / 2**30:.0f} GiB (one Python object per observation)"
            )
    return None


def timeout_for(spec: dict[str, Any], args: argparse.Namespace) -> float:
    """Large matrices get ``--timeout-large``: girth/py-irt are expected not to finish there."""
    return args.timeout if spec["kind"] == "openllm" else args.timeout_large


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tqdm.auto import tqdm

    rows: list[dict[str, Any]] = []
    specs = matrix_specs(args)
    jobs = [(spec, tool) for spec in specs for tool in args.tools]
    for spec, tool in tqdm(jobs, desc="bench_irt", unit="run"):
        reason = compared_on(spec, tool, args.quick)
        if reason is not None:
            rows.append(
                {
                    "matrix": spec["name"],
                    "kind": spec["kind"],
                    "tool": tool,
                    "status": "skipped",
                    "reason": reason,
                }
            )
            continue
        threads = 1 if tool == "ours_1thread" else args.threads
        result = launch(
            {**spec, "tool": tool, "threads": threads}, timeout_for(spec, args), threads
        )
        rows.append({"matrix": spec["name"], "kind": spec["kind"], "tool": tool, **result})
    if args.reuse is not None:
        rows += reused_rows(args.reuse, exclude=set(args.tools))
    attach_comparisons(rows)
    return rows


def reused_rows(path: Path, *, exclude: set[str]) -> list[dict[str, Any]]:
    """Rows of an earlier report for tools not rerun now, labelled with where they came from."""
    earlier = json.loads(path.read_text(encoding="utf-8"))
    origin = {
        "command": earlier.get("command"),
        "started_at": earlier.get("started_at", "not recorded"),
        "load_average_start": earlier.get("machine", {}).get("load_average_start"),
        "load_average_end": earlier.get("load_average_end"),
    }
    rows = []
    for row in earlier.get("results", []):
        if row["tool"] in exclude:
            continue
        row = {k: v for k, v in row.items() if k != "time_ratio_vs_ours"}
        row["reused_from"] = origin
        rows.append(row)
    return rows


def attach_comparisons(rows: list[dict[str, Any]]) -> None:
    """Time ratio and agreement of each other tool with ours (or the truth), then drop arrays."""
    ours = {r["matrix"]: r for r in rows if r["tool"] == "ours" and r["status"] == "ok"}
    for row in rows:
        if row["status"] == "ok" and "truth" in row and "reused_from" not in row:
            truth = {"item_ids": row["item_ids"], "model_ids": row["model_ids"], **row["truth"]}
            row["recovery_vs_truth"] = agreement(row, truth)
        base = ours.get(row["matrix"])
        if row["tool"] != "ours" and row["status"] == "ok" and base is not None:
            row["time_ratio_vs_ours"] = row["seconds"] / base["seconds"]
            if row["tool"] != "ours_1thread" and "reused_from" not in row:
                row["agreement_with_ours"] = agreement(base, row)
    for row in rows:
        for key in ("item_ids", "model_ids", "a", "b", "theta", "truth"):
            row.pop(key, None)


def machine_info(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import scipy

    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
    }
    for name in ("girth", "py_irt", "torch"):
        try:
            module = __import__(name)
            versions[name] = getattr(module, "__version__", "installed")
        except ImportError:
            versions[name] = "not installed"
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "threads_used": args.threads,
        "load_average_start": list(os.getloadavg()),
        "platform": platform.platform(),
        "versions": versions,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.job:
        sys.path.insert(0, str(REPO))
        result = run_job(json.loads(args.job))
        args.job_out.write_text(json.dumps(result))
        return 0
    sys.path.insert(0, str(REPO))
    from lmeval_microbench._io import atomic_path, write_json_atomic

    if not (args.data / "openllm_v1").exists():
        print(
            f"bench_irt: no data at {args.data} (expected openllm_v1/ and psn_irt/)",
            file=sys.stderr,
        )
        return 2
    given = sys.argv[1:] if argv is None else argv
    command = " ".join(["python tools/bench_irt.py", *given])
    machine = machine_info(args)
    started_at = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    started = time.perf_counter()
    results = run_all(args)
    report = {
        "command": command,
        "started_at": started_at,
        "machine": machine,
        "load_average_end": list(os.getloadavg()),
        "settings": {
            "tools": args.tools,
            "reuse": str(args.reuse) if args.reuse else None,
            "threads": args.threads,
            "timeout_s": args.timeout,
            "timeout_large_s": args.timeout_large,
            "pyirt_epochs": args.pyirt_epochs,
            "synthetic_shape": args.synthetic_shape,
            "quick": args.quick,
            "seed": args.seed,
            "repeats": args.repeats,
        },
        "targets": {"seconds": TARGET_SECONDS, "synthetic_peak_gib": TARGET_PEAK_GIB},
        "total_seconds": time.perf_counter() - started,
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "irt_speed.json", report)
    with atomic_path(args.out / "irt_speed.md") as tmp:
        tmp.write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
