"""The tools' ``--jobs`` workers run with one BLAS thread each (``tools/worker_pool.py``)."""

from __future__ import annotations

import numpy as np  # noqa: F401  (loads the BLAS library the parent and its workers share)
import pytest
from threadpoolctl import threadpool_info, threadpool_limits
from tools_support import tools_module


def blas_threads(_: int = 0) -> list[int]:
    """Thread counts of the BLAS libraries loaded in this process."""
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_workers_get_one_blas_thread_whatever_the_parent_has():
    if not blas_threads():
        pytest.skip("numpy reports no BLAS library to limit")
    with threadpool_limits(limits=2, user_api="blas"):  # a parent with more than one
        with tools_module("worker_pool").worker_pool(2) as pool:
            found = list(pool.map(blas_threads, range(4)))
    assert found and all(threads == [1] * len(threads) for threads in found)
