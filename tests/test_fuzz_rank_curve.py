"""Fuzz tests (issue 21.4, properties of ``fuzz_support``) of what ``microbench rank`` reads
(``--model-args-file``, the replay's ``--scores``) and writes (``ranking.json``, strict JSON
holding what was printed; ``ranking.md``), and of ``microbench curve``'s run reader
(``curve.reader.read_runs`` via ``trace_runs``) and writer (strict ``curve.json``; the
footer of ``curve.md`` names its sha256). The curve reader leaves a run it cannot read out
with a note, so a curve that is drawn must name in a note every run it left out."""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import json
import math
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fuzz_support as fs
import numpy as np
import pytest
from fuzz_runs_support import SAMPLE_FIELDS, results_fields
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_runs import hook_lines, hook_results

from lmeval_microbench._json import strict_json
from lmeval_microbench.cli import rank as rank_cli
from lmeval_microbench.curve import trace_runs, write_report
from lmeval_microbench.curve.report import CurveReport
from lmeval_microbench.errors import InputError
from lmeval_microbench.personfit import check_estimate
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses

bundle_template = fs.bundle_template  # the fixture, used by name
Rule = tuple[str, str | None]  # (order rule, --step-regex)


# ============================================================================ --model-args-file
def read_models(path: Path) -> dict[str, str]:
    return rank_cli.read_model_args(argparse.Namespace(model_args=[], model_args_file=str(path)))


@st.composite
def model_lists(draw: st.DrawFn) -> dict[str, str]:
    """name -> ``--model_args``, spelt several ways (``pretrained=`` first or not, other
    arguments, a bare string that is its own name)."""
    name = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,12}", fullmatch=True)
    names = draw(st.lists(name, min_size=2, max_size=6, unique=True))
    forms = ("pretrained={}", "pretrained={},dtype=bfloat16", "revision=main, pretrained={}", "{}")
    return {n: draw(st.sampled_from(forms)).format(n) for n in names}


FILLER = ("", "   ", "# a comment", "  # indented, with pretrained=commented", "\t")


def model_file_text(models: dict[str, str], rnd: random.Random, *, crlf: bool, bom: bool) -> str:
    """The models one per line (padded), with blank and comment lines between them."""
    lines: list[str] = []
    for args in models.values():
        lines += [rnd.choice(FILLER) for _ in range(rnd.randrange(3))]
        lines.append(rnd.choice(("", " ", "\t")) + args + rnd.choice(("", "  ")))
    text = ("\r\n" if crlf else "\n").join(lines) + rnd.choice(("", "\n"))
    return ("\ufeff" if bom else "") + text


@fs.fuzz_settings(fs.N_MODEL_ARGS_ROUNDTRIP)
@given(models=model_lists(), rnd=st.randoms(use_true_random=False), crlf=st.booleans(),
       bom=st.booleans())  # fmt: skip
def test_model_args_roundtrip_and_reorder(
    models: dict[str, str], rnd: random.Random, crlf: bool, bom: bool
) -> None:
    """Properties 3 and 2: every listed model reads back under its name, in the file's order;
    the lines in another order (other comments) are the same models."""
    keys = list(models)
    rnd.shuffle(keys)
    with fs.case_dir() as tmp:
        for order, path in ((list(models), tmp / "models.txt"), (keys, tmp / "shuffled.txt")):
            text = model_file_text({k: models[k] for k in order}, rnd, crlf=crlf, bom=bom)
            path.write_bytes(text.encode("utf-8"))
            assert list(read_models(path).items()) == [(k, models[k]) for k in order]


@fs.fuzz_settings(fs.N_MODEL_ARGS_BYTES)
@given(models=model_lists(), ops=fs.byte_ops)
def test_model_args_byte_mutations(models: dict[str, str], ops: list) -> None:
    """Property 1 for a byte-mutated model list (lines dropped, repeated, bytes not UTF-8)."""
    with fs.case_dir() as tmp:
        path = tmp / "models.txt"
        path.write_bytes(fs.mutate_bytes("\n".join(models.values()).encode(), ops))
        ok, found = fs.read_clean(lambda: read_models(path), path.name, case=(models, ops))
        assert not ok or (len(found) >= 2 and all(found.values()))


def _write(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


AB = {"a": "pretrained=a", "b": "pretrained=b"}
MODEL_ARGS_FILE_CASES: tuple[tuple[str, Callable[[Path], Any], dict[str, str] | None], ...] = (
    ("missing file", lambda path: None, None),
    ("a folder", lambda path: path.mkdir(), None),
    ("empty file", _write(b""), None),
    ("comments only", _write(b"# pretrained=a\n\n  # pretrained=b\n"), None),
    ("one model", _write(b"pretrained=a\n"), None),
    ("a line twice", _write(b"pretrained=a\npretrained=b\npretrained=a\n"), None),
    ("a name twice", _write(b"pretrained=a\npretrained=a,dtype=float16\npretrained=b\n"), None),
    ("latin-1", _write("pretrained=caf\xe9\npretrained=b\n".encode("latin-1")), None),
    ("utf-16", _write("pretrained=a\npretrained=b\n".encode("utf-16")), None),
    ("byte order mark", _write(b"\xef\xbb\xbfpretrained=a\npretrained=b\n"), AB),
    ("CR line ends", _write(b"pretrained=a\rpretrained=b\r"), AB),
    ("indented comment", _write(b"pretrained=a\n   # pretrained=a\npretrained=b\n"), AB),
    ("a NUL byte", _write(b"pretrained=a\x00b\npretrained=b\n"),
     {"a\x00b": "pretrained=a\x00b", "b": "pretrained=b"}),
    ("a huge line", _write(b"pretrained=" + b"x" * 2**20 + b"\npretrained=b\n"),
     {"x" * 2**20: "pretrained=" + "x" * 2**20, "b": "pretrained=b"}),
    ("an empty pretrained=", _write(b"pretrained=\npretrained=b\n"),
     {"pretrained=": "pretrained=", "b": "pretrained=b"}),
    ("unicode line separators", _write("pretrained=a\u2028x\npretrained=b\n".encode()),
     {"a\u2028x": "pretrained=a\u2028x", "b": "pretrained=b"}),
)  # fmt: skip


@pytest.mark.parametrize(
    ("write", "expected"), [pytest.param(w, e, id=n) for n, w, e in MODEL_ARGS_FILE_CASES]
)
def test_model_args_file_mutations(
    write: Callable[[Path], Any], expected: dict[str, str] | None, tmp_path: Path
) -> None:
    """Property 1 (and 3 where the file is valid) for whole-file mutations of the list."""
    assert len(MODEL_ARGS_FILE_CASES) == fs.N_MODEL_ARGS_FILES
    path = tmp_path / "models.txt"
    write(path)
    ok, found = fs.read_clean(lambda: read_models(path), path.name)
    assert (found if ok else None) == expected


def test_model_args_file_errors_name_the_file_and_lines(tmp_path: Path) -> None:
    """Defect: a latin-1 list escaped as UnicodeDecodeError, a folder as IsADirectoryError
    (tracebacks); a model listed twice, or a file of comments only, named neither the file
    nor the lines. Now one line naming both."""
    path, folder = tmp_path / "models.txt", tmp_path / "folder.txt"
    folder.mkdir()
    with pytest.raises(InputError, match=r"folder\.txt: not readable"):
        read_models(folder)
    for text, error in (
        (b"pretrained=a\n# ok\npretrained=caf\xe9\n", r"line 3 is not UTF-8"),
        (b"pretrained=a\n\npretrained=b\npretrained=a,x=1\n", r"names: 'a' \(line 1, line 4\)"),
        (b"# pretrained=a\n", r"ranking needs at least 2 models, got 0"),
    ):
        path.write_bytes(text)
        with pytest.raises(InputError, match=r"models\.txt: .*" + error):
            read_models(path)


# ============================================================================ rank replay
RANK_ARGS = ("--population", "8", "--tiers", "1-4,5-", "--estimator", "mean", "--no-plots")


def rank_run(matrix: Path, out: Path, *extra: str) -> dict[str, Any]:
    """``microbench rank --responses`` in-process (errors propagate): what it printed."""
    parser = argparse.ArgumentParser()
    rank_cli.add_parser(parser.add_subparsers())
    argv = ["rank", "--responses", str(matrix), *RANK_ARGS, "--out", str(out), *extra]
    args, printed = parser.parse_args(argv), io.StringIO()
    with contextlib.redirect_stdout(printed):
        fs.quiet(lambda: args.run(args))
    return json.loads(printed.getvalue(), parse_constant=fs._refuse_constant)


def check_ranking(out: Path, printed: dict[str, Any], model_ids: list[str]) -> dict[str, Any]:
    """The written report: strict JSON holding what was printed, the markdown row by row."""
    document = fs.strict_load(out / "ranking.json")
    assert document["cost"] == printed["cost"] and document["failures"] == printed["failures"]
    rows = document["ranking"]
    assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
    assert {r["model"] for r in rows} <= set(model_ids)
    assert document["cost"]["items_spent"] == sum(r["items"] for r in rows)
    assert all(r["items"] in document["levels"] for r in rows)
    table = (out / "ranking.md").read_text(encoding="utf-8").splitlines()
    assert sum(line.startswith("| ") and line[2:3].isdigit() for line in table) == len(rows)
    return document


def write_csv(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


@pytest.fixture(scope="module")
def rank_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 40 x 16 response matrix, its score table and the ranking they give."""
    matrix, _ = simulate_responses(random_item_params(16, seed=1), 40, seed=2)
    folder = tmp_path_factory.mktemp("rank")
    matrix.to_parquet(folder / "matrix.parquet")
    means = matrix.values.mean(axis=1)
    rows = [["model", "score", "other"]]
    rows += [
        [m, repr(round(float(v), 4)), "x"] for m, v in zip(matrix.model_ids, means, strict=True)
    ]
    write_csv(folder / "scores.csv", rows)
    scores = ("--scores", str(folder / "scores.csv"))
    printed = rank_run(folder / "matrix.parquet", folder / "out", *scores)
    document = check_ranking(folder / "out", printed, list(matrix.model_ids))
    return {"matrix": matrix, "folder": folder, "rows": rows, "document": document}


CELLS = ("0", "1", "0.25", "0.75", "-0", "1e-320", " 0.5", "", "nan", "NaN", "inf", "-inf", "-1",
         "2", "150", "1e999", "x", "0x1f", "1,5", "None", "TRUE")  # fmt: skip
TABLE_OPS = ("cell", "cell", "cell", "drop_row", "drop_row", "swap_columns", "unknown_model",
             "dup_row", "blank_model", "rename_header", "ragged_row")  # fmt: skip
table_ops = st.lists(
    st.tuples(st.sampled_from(TABLE_OPS), st.integers(0, 2**16), st.sampled_from(CELLS)),
    min_size=1,
    max_size=3,
)


def mutate_table(rows: list[list[str]], ops: list[tuple[str, int, str]]) -> list[list[str]]:
    """Score-table mutations: a score cell replaced, rows dropped, repeated, added for a model
    the matrix lacks or without a model id, a header renamed, columns swapped, a row cut."""
    rows = [list(r) for r in rows]
    for op, pos, cell in ops:
        k = 1 + pos % max(1, len(rows) - 1)
        if k >= len(rows):
            continue
        if op == "cell":
            rows[k][1] = cell
        elif op in ("drop_row", "dup_row"):
            rows[k : k + 1] = [] if op == "drop_row" else [rows[k], list(rows[k])]
        elif op == "unknown_model":
            rows.append(["no-such-model", cell, "x"])
        elif op == "blank_model":
            rows[k][0] = ""
        elif op == "rename_header":
            rows[0][pos % len(rows[0])] = cell
        elif op == "swap_columns":
            rows = [row[1::-1] + row[2:] for row in rows]
        else:
            rows[k] = rows[k][:1]
    return rows


@fs.fuzz_settings(fs.N_RANK_SCORES)
@given(ops=table_ops, scale=st.sampled_from(["auto", "fraction", "percent"]),
       column=st.sampled_from(["score", "score", "score", "other", "missing"]),
       raw=fs.byte_ops, raw_too=st.sampled_from([False] * 4 + [True]))  # fmt: skip
def test_rank_score_mutations(
    rank_inputs: dict[str, Any], ops: list, scale: str, column: str, raw: list, raw_too: bool
) -> None:
    """Property 1 for the replay's score table (cells, rows, headers, bytes) and the column
    asked for; a ranking that is drawn is written as strict JSON and a row per model."""
    with fs.case_dir() as tmp:
        scores = tmp / "scores.csv"
        write_csv(scores, mutate_table(rank_inputs["rows"], ops))
        if raw_too:
            scores.write_bytes(fs.mutate_bytes(scores.read_bytes(), raw))
        matrix = rank_inputs["folder"] / "matrix.parquet"
        extra = ("--scores", str(scores), "--score-column", column, "--score-scale", scale)
        run = lambda: rank_run(matrix, tmp / "out", *extra)  # noqa: E731
        case = (ops, scale, column, raw_too and raw)
        ok, printed = fs.read_clean(run, scores.name, matrix.name, case=case)
        if ok:
            check_ranking(tmp / "out", printed, list(rank_inputs["matrix"].model_ids))


@fs.fuzz_settings(fs.N_RANK_SCORES_REORDER)
@given(rnd=st.randoms(use_true_random=False))
def test_rank_scores_reorder(rank_inputs: dict[str, Any], rnd: random.Random) -> None:
    """Property 2: the score table's rows and columns in another order give the same report."""
    header, *body = rank_inputs["rows"]
    rnd.shuffle(body)
    columns = list(range(len(header)))
    rnd.shuffle(columns)
    with fs.case_dir() as tmp:
        write_csv(tmp / "scores.csv", [[row[c] for c in columns] for row in [header, *body]])
        scores = ("--scores", str(tmp / "scores.csv"))
        rank_run(rank_inputs["folder"] / "matrix.parquet", tmp / "out", *scores)
        assert fs.strict_load(tmp / "out" / "ranking.json") == rank_inputs["document"]


@fs.fuzz_settings(fs.N_RANK_OUTPUTS)
@given(n_models=st.integers(19, 24), n_items=st.integers(2, 10),
       cells=st.lists(st.sampled_from([0.0, 1.0] * 4 + [0.5, math.nan]), min_size=240,
                      max_size=240),
       constant=st.sampled_from(["no", "rows", "all"]),
       estimator=st.sampled_from(["mean", "ridge"]))  # fmt: skip
def test_rank_outputs(
    n_models: int, n_items: int, cells: list[float], constant: str, estimator: str
) -> None:
    """The report of any replay (models that all score the same, missing answers, few items)
    is strict JSON whose numbers are the printed ones; the markdown has a row per model."""
    values = np.array(cells[: n_models * n_items]).reshape(n_models, n_items)
    if constant == "rows":
        values[:] = values[:, :1]
    elif constant == "all":
        values[:] = 1.0
    models = [f"m{k}" for k in range(n_models)]
    matrix = ResponseMatrix(values, models, [f"i{k}" for k in range(n_items)], source="fuzz")
    with fs.case_dir() as tmp:
        matrix.to_parquet(tmp / "matrix.parquet")
        run = lambda: rank_run(tmp / "matrix.parquet", tmp / "out", "--estimator", estimator)  # noqa: E731
        ok, printed = fs.read_clean(run, "matrix.parquet", case=(values.tolist(), estimator))
        if ok:
            check_ranking(tmp / "out", printed, models)


def test_ranking_json_is_strict_when_every_model_scores_the_same(tmp_path: Path) -> None:
    """Defect: when every replayed model scores the same, Kendall's tau is NaN and writing
    ranking.json (``allow_nan=False``) escaped as a ValueError; now it is ``null``."""
    models, items = [f"m{k}" for k in range(20)], [f"i{k}" for k in range(6)]
    ResponseMatrix(np.ones((20, 6)), models, items).to_parquet(tmp_path / "ones.parquet")
    rank_run(tmp_path / "ones.parquet", tmp_path / "out")
    document = fs.strict_load(tmp_path / "out" / "ranking.json")
    assert document["replay_check"]["kendall_tau"] is None
    assert strict_json({"a": [math.nan, math.inf, 1.0]}) == {"a": [None, None, 1.0]}


def test_rank_number_lists_are_one_line_errors(rank_inputs: dict[str, Any], tmp_path: Path) -> None:
    """Defect: ``--levels 4,x`` escaped as a bare ValueError (a traceback); now an InputError
    naming the option (``--fractions`` of live runs shares the parser)."""
    with pytest.raises(InputError, match=r"--levels takes numbers .* got '4,x'"):
        rank_run(rank_inputs["folder"] / "matrix.parquet", tmp_path / "out", "--levels", "4,x")
    assert rank_cli.numbers("0.25, 1", "--fractions", float) == [0.25, 1.0]


# ============================================================================ curve
STEPS = (100, 200, 300)
CURVE_TASK = "microbench_toy"


def write_checkpoints(
    template: dict[str, Any], root: Path,
    lines: Callable[[int, list[dict[str, Any]]], list[str]] | None = None,
    results: Callable[[int, dict[str, Any]], str] | None = None,
) -> list[Path]:  # fmt: skip
    """One lm-eval output folder per checkpoint (``ckpt-STEP/org__tiny-stepSTEP/``: a
    samples file and a results json whose model args name the revision)."""
    folders = []
    for m, step in enumerate(STEPS):
        folder = root / f"ckpt-{step}"
        inner = folder / f"org__tiny-step{step}"
        inner.mkdir(parents=True)
        logged = hook_lines(template, m)
        texts = [json.dumps(x) for x in logged] if lines is None else lines(m, logged)
        samples = inner / f"samples_{CURVE_TASK}_{fs.TS}.jsonl"
        samples.write_text("\n".join(texts) + "\n", encoding="utf-8")
        tree = hook_results(f"org/tiny-step{step}")
        tree["config"]["model_args"]["revision"] = f"step{step}"
        text = json.dumps(tree) if results is None else results(m, tree)
        (inner / f"results_{fs.TS}.json").write_text(text, encoding="utf-8")
        folders.append(folder)
    return folders


def file_of(folder: Path, which: str = "samples") -> Path:
    """A checkpoint's samples file (``which="samples"``) or results json."""
    return next(folder.glob("*/samples_*.jsonl" if which == "samples" else "*/results_*.json"))


STEP_RULES = (("regex", r"ckpt-(\d+)"), ("regex", r"step(?P<step>\d+)"), ("revision", None),
              ("auto", None))  # fmt: skip


def curve(template: dict[str, Any], paths: list[Path], rule: Rule) -> Any:
    return fs.quiet(
        lambda: trace_runs([str(p) for p in paths], order=rule[0], step_regex=rule[1],
                           bundles=[template["folder"]], shipped=False, progress=False)
    )  # fmt: skip


def check_curve(report: CurveReport, paths: list[Path], out: Path) -> None:
    """A drawn curve: every run it left out named in a note, points in increasing step
    order, strict curve.json, and a curve.md whose footer names curve.json's sha256."""
    notes = " | ".join(report.notes + [n for c in report.curves for n in c.notes])
    for found in report.curves:
        steps = [p.step for p in found.points]
        assert steps == sorted(set(steps)), steps
        placed = [p.label for p in found.points]
        for path in paths:
            assert str(path) in placed or str(path) in notes, (str(path), notes)
    assert len(fs.quiet(lambda: write_report(report, out, plots=False))) == 2
    fs.strict_load(out / "curve.json")
    footer = (out / "curve.md").read_text(encoding="utf-8").splitlines()[-1]
    assert hashlib.sha256((out / "curve.json").read_bytes()).hexdigest() in footer


def normalised(document: dict[str, Any], root: Path) -> str:
    """The curve's numbers with the case folder taken out of the run labels."""
    return json.dumps({k: document[k] for k in ("order", "benchmarks")}).replace(str(root), "ROOT")


@pytest.fixture(scope="module")
def curve_expected(bundle_template: dict[str, Any]) -> dict[str, str]:
    """The curve of the valid checkpoints under each step rule (labels without the folder)."""
    with fs.case_dir() as tmp:
        paths = write_checkpoints(bundle_template, tmp / "runs")
        return {str(rule): normalised(curve(bundle_template, paths, rule).to_dict(), tmp)
                for rule in STEP_RULES}  # fmt: skip


def test_curve_roundtrip(bundle_template: dict[str, Any], tmp_path: Path) -> None:
    """Property 3: every checkpoint at its step, its raw score the mean of what it logged,
    its estimate the bundle's own; the written report (PNG too) holds the same numbers."""
    paths = write_checkpoints(bundle_template, tmp_path / "runs")
    report = curve(bundle_template, list(reversed(paths)), STEP_RULES[0])
    (found,) = report.curves
    assert [p.step for p in found.points] == list(STEPS) and report.notes == []
    bundle = bundle_template["bundle"]
    for m, point in enumerate(found.points):
        scores = {x["doc"]["item_id"]: x["acc"] for x in hook_lines(bundle_template, m)}
        assert point.raw == pytest.approx(np.mean(list(scores.values())))
        direct = fs.quiet(lambda s=scores: bundle_estimator(bundle).estimate(s))
        direct = check_estimate(bundle, scores, direct)[0]
        assert point.estimate is not None
        assert (point.estimate.value, point.estimate.lower, point.estimate.upper) == pytest.approx(
            (direct.value, direct.lower, direct.upper)
        )
    written = fs.quiet(lambda: write_report(report, tmp_path / "out"))
    assert [p.name for p in written] == ["curve.json", "curve.md", "curve_toy.png"]
    assert fs.strict_load(tmp_path / "out" / "curve.json") == json.loads(
        json.dumps(report.to_dict())
    )
    check_curve(report, paths, tmp_path / "again")


@fs.fuzz_settings(fs.N_CURVE_REORDER)
@given(rnd=st.randoms(use_true_random=False), rule=st.sampled_from(STEP_RULES))
def test_curve_reorder(
    bundle_template: dict[str, Any], curve_expected: dict[str, str], rnd: random.Random, rule: Rule
) -> None:
    """Property 2: the runs given in another order, the lines of each samples file and the
    keys of every JSON object shuffled: the same curve numbers."""

    def lines(m: int, logged: list[dict[str, Any]]) -> list[str]:
        texts = [json.dumps(fs.shuffle_keys(x, rnd)) for x in logged]
        rnd.shuffle(texts)
        return texts

    with fs.case_dir() as tmp:
        paths = write_checkpoints(bundle_template, tmp / "runs", lines,
                                  lambda m, t: json.dumps(fs.shuffle_keys(t, rnd)))  # fmt: skip
        rnd.shuffle(paths)
        report = curve(bundle_template, paths, rule)
        assert normalised(report.to_dict(), tmp) == curve_expected[str(rule)]


def _curve_clean(
    template: dict[str, Any], paths: list[Path], rule: Rule, names: list[str], tmp: Path,
    case: Any,
) -> None:  # fmt: skip
    """Property 1 for a curve over ``paths``; a curve that is drawn passes check_curve."""
    ok, report = fs.read_clean(lambda: curve(template, paths, rule), *names, case=case)
    if ok:
        check_curve(report, paths, tmp / "out")


@fs.fuzz_settings(fs.N_CURVE_BYTES)
@given(victim=st.integers(0, len(STEPS) - 1), which=st.sampled_from(["samples", "results"]),
       ops=fs.byte_ops, rule=st.sampled_from(STEP_RULES))  # fmt: skip
def test_curve_byte_mutations(
    bundle_template: dict[str, Any], victim: int, which: str, ops: list, rule: Rule
) -> None:
    """Property 1 when one checkpoint's samples file or results json is byte-mutated
    (truncated, flipped, lines dropped or repeated)."""
    with fs.case_dir() as tmp:
        paths = write_checkpoints(bundle_template, tmp / "runs")
        target = file_of(paths[victim], which)
        target.write_bytes(fs.mutate_bytes(target.read_bytes(), ops))
        names = [target.name, str(paths[victim]), "--step-regex"]
        _curve_clean(bundle_template, paths, rule, names, tmp, (victim, which, ops, rule))


CURVE_RESULT_FIELDS = (*results_fields(CURVE_TASK), "config.model_args.revision")


@fs.fuzz_settings(fs.N_CURVE_JSON)
@given(victim=st.integers(0, len(STEPS) - 1), line=st.integers(0, 2**16), ops=fs.json_ops,
       fields=fs.targeted_ops(SAMPLE_FIELDS), result_fields=fs.targeted_ops(CURVE_RESULT_FIELDS),
       which=st.sampled_from(["samples", "results"]), rule=st.sampled_from(STEP_RULES))  # fmt: skip
def test_curve_json_mutations(
    bundle_template: dict[str, Any], victim: int, line: int, ops: list, fields: list,
    result_fields: list, which: str, rule: Rule,
) -> None:  # fmt: skip
    """Property 1 when a line of one checkpoint's samples file, or its results json, has
    fields deleted, retyped, renamed or nested."""

    def lines(m: int, logged: list[dict[str, Any]]) -> list[str]:
        texts = [json.dumps(x) for x in logged]
        if m == victim and which == "samples":
            k = line % len(logged)
            texts[k] = fs.dump_json(fs.mutate_fields(fs.mutate_json(logged[k], ops), fields))
        return texts

    def results(m: int, tree: dict[str, Any]) -> str:
        if m == victim and which == "results":
            return fs.dump_json(fs.mutate_fields(fs.mutate_json(tree, ops), result_fields))
        return json.dumps(tree)

    with fs.case_dir() as tmp:
        paths = write_checkpoints(bundle_template, tmp / "runs", lines, results)
        target = file_of(paths[victim], which)
        names = [target.name, str(paths[victim]), "--step-regex"]
        case = (victim, which, line, ops, fields if which == "samples" else result_fields, rule)
        _curve_clean(bundle_template, paths, rule, names, tmp, case)


def change_folders(kind: str, paths: list[Path]) -> list[Path]:
    """The checkpoint folders after a folder-level mutation of the second one (or of all)."""
    victim = paths[1]
    samples, results = file_of(victim), file_of(victim, "results")
    if kind in ("no samples", "samples is a folder"):
        samples.unlink()
    if kind in ("no results", "results is a folder"):
        results.unlink()
    if kind in ("folder missing", "folder is a file", "empty folder"):
        shutil.rmtree(victim)
    for path in paths if kind == "all empty" else []:
        shutil.rmtree(path)
        path.mkdir()
    if kind == "samples is a folder":
        samples.mkdir()
    elif kind == "results is a folder":
        results.mkdir()
    elif kind == "folder is a file":
        victim.write_text("not a folder")
    elif kind == "empty folder":
        victim.mkdir()
    elif kind == "two models":
        shutil.copytree(next(paths[2].iterdir()), victim / "other")
    elif kind == "older samples too":
        shutil.copy(samples, samples.with_name(f"samples_{CURVE_TASK}_2023-01-01T00-00-00.0.jsonl"))
    elif kind == "shared step":
        shutil.copytree(victim, victim.with_name("ckpt-200-copy"))
        return [*paths, victim.with_name("ckpt-200-copy")]
    return {"given as samples file": [paths[0], samples, paths[2]], "given twice": [*paths, victim],
            "one run": paths[:1]}.get(kind, paths)  # fmt: skip


CURVE_FOLDER_CASES = ("no samples", "no results", "folder missing", "folder is a file",
    "given as samples file", "empty folder", "two models", "older samples too",
    "samples is a folder", "results is a folder", "given twice", "shared step", "all empty",
    "one run", r"regex zzz(\d+)", "regex ckpt", r"regex (\d)", r"regex ckpt-(\d+")  # fmt: skip


@pytest.mark.parametrize("kind", CURVE_FOLDER_CASES)
def test_curve_folder_mutations(bundle_template: dict[str, Any], kind: str, tmp_path: Path) -> None:
    """Property 1 for files and folders missing, extra or of the wrong kind, runs given
    twice or sharing a step, and step regexes that match nothing or the same step twice."""
    assert len(CURVE_FOLDER_CASES) == fs.N_CURVE_FOLDERS
    paths = change_folders(kind, write_checkpoints(bundle_template, tmp_path / "runs"))
    names = [str(p) for p in paths] + ["--step-regex", "more than once"]
    rule = ("regex", kind[6:] if kind.startswith("regex ") else r"ckpt-(\d+)")
    _curve_clean(bundle_template, paths, rule, names, tmp_path, None)


folder_names = st.from_regex(r"[a-z]{0,4}[-_]?[0-9]{0,3}[kKmMbB]?", fullmatch=True).filter(bool)
PATTERNS = (r"ckpt-(\d+)", r"(\d+)", r"(?P<step>\d+[kKmMbB]?)", r"\d+", r"(\d*)", "", r"(x)?",
            r"(\d+)|(k)", r"[0-9]+[kKmMbB]?", r"step(\d+)", "(", r"(?P<step>x)?\d")  # fmt: skip


@fs.fuzz_settings(fs.N_CURVE_STEPS)
@given(names=st.lists(folder_names, min_size=3, max_size=3, unique=True),
       pattern=st.sampled_from(PATTERNS),
       order=st.sampled_from(["auto", "regex", "revision", "given"]))  # fmt: skip
def test_curve_step_rules(
    bundle_template: dict[str, Any], names: list[str], pattern: str, order: str
) -> None:
    """Property 1 for checkpoint folders of any name under any step regex and order rule:
    runs whose step is unreadable or shared are named; the others in increasing step order."""
    with fs.case_dir() as tmp:
        written = write_checkpoints(bundle_template, tmp / "written")
        (tmp / "runs").mkdir()
        paths = [p.rename(tmp / "runs" / n) for p, n in zip(written, names, strict=True)]
        rule = (order, pattern if order in ("auto", "regex") else None)
        names_ok = [*map(str, paths), "--step-regex"]
        _curve_clean(bundle_template, paths, rule, names_ok, tmp, (names, pattern, order))


def test_curve_step_that_is_not_finite_names_the_run(
    bundle_template: dict[str, Any], tmp_path: Path
) -> None:
    """Defect: a step read as infinity (``revision=step`` and 400 digits) was written to
    curve.json as bare ``Infinity``; now the curve is refused naming the run."""

    def results(m: int, tree: dict[str, Any]) -> str:
        if m == 1:
            tree["config"]["model_args"]["revision"] = "step" + "9" * 400
        return json.dumps(tree)

    paths = write_checkpoints(bundle_template, tmp_path / "runs", results=results)
    with pytest.raises(InputError, match=re.escape(f"run {paths[1]}: its step")):
        curve(bundle_template, paths, ("revision", None))
