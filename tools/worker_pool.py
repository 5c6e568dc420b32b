"""Worker processes for the tools' ``--jobs``: one BLAS thread each.

With the machine's default of one BLAS thread per core, two workers on 2 cores each ran
their small matrix products on both cores at once and waited on each other: the peer suite's
MuSR cells with all source models took 24-200 s per cell against 5-19 s with one thread per
process, and ``bench_similar.py --jobs 2`` took 13 minutes against 2. One thread per worker
is what ``OMP_NUM_THREADS=1`` gives, set where the workers start, so a run does not depend
on the caller remembering it. Thread counts can move results slightly (selectors that fit
their own IRT model or clusters round differently), so a report made this way is reproduced
this way.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor


def one_blas_thread() -> None:
    """Limit this process's BLAS libraries to one thread (threadpoolctl, with scikit-learn)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def worker_pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` worker processes, each with one BLAS thread."""
    return ProcessPoolExecutor(max_workers=jobs, initializer=one_blas_thread)
