"""Tables and their JSON as checkable pairs (``pairs``, ``microbench verify``; issue 21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmeval_microbench.cli.app import main
from lmeval_microbench.errors import InputError
from lmeval_microbench.harness import include_path
from lmeval_microbench.pairs import check_pair, write_pair


def _pair(folder: Path, numbers: str = '{"a": 1}\n') -> Path:
    target = folder / "est.json"
    write_pair(target, folder / "est.md", numbers.encode(), "| a |\n|---|\n| 1 |\n", "Estimates")
    return target


def test_a_written_pair_checks_from_either_file(tmp_path):
    target = _pair(tmp_path)
    assert check_pair(target) == target and check_pair(tmp_path / "est.md") == target
    assert (tmp_path / "est.md").read_text().splitlines()[-1].startswith("Estimates: `est.json`")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda t: t.write_text('{"a": 2}\n'), "do not match"),
        (lambda t: t.unlink(), "which is missing"),
        (lambda t: t.with_suffix(".md").write_text("| a |\n"), "names no JSON file"),
        (lambda t: t.with_suffix(".md").unlink(), "no such table"),
        (lambda t: t.with_suffix(".md").write_bytes(b"\xff\xfe"), "not readable as text"),
    ],
    ids=["JSON replaced", "JSON gone", "table edited", "table gone", "table not text"],
)
def test_a_broken_pair_is_one_error_naming_the_files(tmp_path, damage, said):
    target = _pair(tmp_path)
    damage(target)
    with pytest.raises(InputError, match=said) as raised:
        check_pair(target)
    assert str(tmp_path / "est.md") in str(raised.value)


def test_verify_checks_a_bundle_and_reports_each_path(tmp_path, capsys):
    bundle = include_path() / "openllm_v1" / "arc"
    target = _pair(tmp_path)
    target.write_text("{}\n")
    assert main(["verify", str(bundle), str(target), str(tmp_path / "absent")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "ok: bundle 'openllm-v1-arc-50-greedy': 50 items, checksums match\n"
    errors = captured.err.splitlines()
    assert len(errors) == 2 and "do not match" in errors[0] and "no such file" in errors[1]


def test_estimate_out_writes_a_pair_verify_accepts(tmp_path, capsys):
    from lmeval_microbench.bundle import load_bundle

    bundle = load_bundle(include_path() / "openllm_v1" / "winogrande")
    rows = ["model," + ",".join(bundle.item_ids)]
    rows += [f"m{k}," + ",".join(str((k + j) % 2) for j in range(bundle.budget)) for k in range(2)]
    (tmp_path / "scores.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "est.json"
    argv = ["estimate", str(include_path() / "openllm_v1" / "winogrande")]
    assert main([*argv, "--responses", str(tmp_path / "scores.csv"), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out == f"ok: {out.with_suffix('.md')} shows {out}\n"
