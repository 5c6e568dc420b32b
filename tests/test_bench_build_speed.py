"""tools/bench_build_speed.py: the wide matrix it builds to show how a build grows with items."""

from __future__ import annotations

import numpy as np
import pandas as pd
from tools_support import tools_module


def test_wide_matrix_repeats_the_answers_with_a_share_flipped(tmp_path):
    tool = tools_module("bench_build_speed")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        (rng.random((40, 50)) < 0.5).astype(np.int8),
        index=[f"m{k}" for k in range(40)],
        columns=[f"i{k}" for k in range(50)],
    )
    frame.to_parquet(tmp_path / "small.parquet")
    path = tool.wide_matrix(tmp_path / "small.parquet", 3, tmp_path)
    wide = pd.read_parquet(path)
    assert wide.shape == (40, 150) and wide.columns.is_unique
    assert list(wide.index) == list(frame.index)
    for copy in range(3):
        block = wide.iloc[:, 50 * copy : 50 * (copy + 1)].to_numpy()
        flipped = np.mean(block != frame.to_numpy())
        assert 0.04 < flipped < 0.12
