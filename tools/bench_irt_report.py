"""The markdown report of ``tools/bench_irt.py`` (bench/irt_speed.md) from its JSON results."""

from __future__ import annotations

from typing import Any


def fmt(value: Any, spec: str = ".2f") -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return format(value, spec)


def tool_cells(row: dict[str, Any] | None) -> list[str]:
    if row is None:
        return ["not run", "-", "-", "-", "-"]
    if row["status"] != "ok":
        return [row["status"], "-", "-", "-", "-"]
    agree = row.get("agreement_with_ours", {})
    difficulty = (
        f"{fmt(agree.get('r_difficulty'), '.3f')} / {fmt(agree.get('rho_difficulty'), '.3f')}"
    )
    return [
        fmt(row["seconds"], ".1f"),
        fmt(row.get("time_ratio_vs_ours"), ".1f") + "x",
        fmt(agree.get("r_discrimination"), ".3f"),
        difficulty,
        fmt(agree.get("r_ability"), ".3f"),
    ]


def _loads(values: list[float] | None) -> str:
    return "/".join(f"{x:.2f}" for x in values) if values else "not recorded"


def markdown(report: dict[str, Any]) -> str:
    rows = report["results"]
    machine = report["machine"]
    lines = [
        "# IRT fitting speed (2PL)",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Machine: {machine['cpu_model']}, nproc {machine['nproc']}, "
        f"{machine['threads_used']} BLAS/torch threads, load average at start "
        f"{', '.join(f'{x:.2f}' for x in machine['load_average_start'])} / end "
        f"{', '.join(f'{x:.2f}' for x in report['load_average_end'])} "
        "(the machine is shared: other processes may slow every column alike). "
        f"Versions: {', '.join(f'{k} {v}' for k, v in machine['versions'].items())}.",
        "",
        "Time = the fit alone, in seconds (ours: fastest of the repeats, EAP abilities "
        "included; girth and py-irt: one run). Every tool runs with the same BLAS/torch "
        "thread count; 'ours 1 thread' repeats our fit with one thread, because on a shared "
        "machine two spinning BLAS threads can be many times slower than one. "
        "xours = time / our time. r(a), r(theta) = Pearson correlation with our "
        "discriminations and abilities; r/rho(b) = Pearson / Spearman correlation with our "
        "difficulties b = -d/a (joined by id). Reasons for runs without a result are listed "
        "below the table.",
        "",
        "| matrix | models x items | ours (s) | target (s) | EM steps | ours 1 thread (s) "
        "| girth (s) | xours | r(a) | r/rho(b) | r(theta) "
        "| py-irt (s) | xours | r(a) | r/rho(b) | r(theta) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    matrices = list(dict.fromkeys(r["matrix"] for r in rows))
    for name in matrices:
        by_tool = {r["tool"]: r for r in rows if r["matrix"] == name}
        ours = by_tool.get("ours")
        shape = next((r["shape"] for r in by_tool.values() if r.get("shape")), None)
        kind = next(iter(by_tool.values()))["kind"]
        ours_cells = ["-", "-"]
        if ours is not None and ours["status"] == "ok":
            ours_cells = [fmt(ours["seconds"], ".2f"), fmt(ours.get("n_iter"), "d")]
        elif ours is not None:
            ours_cells = [f"{ours['status']}: {ours.get('reason', '')}", "-"]
        single = by_tool.get("ours_1thread")
        single_cell = fmt(single["seconds"], ".2f") if single and single["status"] == "ok" else "-"
        lines.append(
            f"| {name} | {'x'.join(str(s) for s in shape) if shape else '-'} | {ours_cells[0]} "
            f"| < {report['targets']['seconds'][kind]:g} | {ours_cells[1]} | {single_cell} | "
            + " | ".join(tool_cells(by_tool.get("girth")) + tool_cells(by_tool.get("pyirt")))
            + " |"
        )
    lines += ["", "Memory and recovery:", ""]
    for row in rows:
        if row["tool"] == "ours" and row["status"] == "ok":
            recovery = row.get("recovery_vs_truth")
            extra = ""
            if recovery:
                extra = (
                    f"; recovery of the true parameters: r(a) "
                    f"{recovery['r_discrimination']:.4f}, r(b) {recovery['r_difficulty']:.4f}, "
                    f"r(theta) {recovery['r_ability']:.4f}"
                )
            lines.append(
                f"- {row['matrix']}: peak RSS {row['peak_rss_gib']:.2f} GiB (after loading "
                f"the matrix {row['rss_before_fit_gib']:.2f} GiB); converged "
                f"{row['converged']} in {row['n_iter']} EM steps{extra}"
            )
    reused = [r["reused_from"] for r in rows if "reused_from" in r]
    if reused:
        origin = reused[0]
        tools = sorted({r["tool"] for r in rows if "reused_from" in r})
        lines += [
            "",
            f"Rows of {', '.join(tools)} are reused from an earlier run "
            f"(`{origin['command']}`, started {origin['started_at']}, load average "
            f"{_loads(origin['load_average_start'])} at its start and "
            f"{_loads(origin['load_average_end'])} at its end); the other rows are "
            "from this run. Time ratios are against the 'ours' column; agreement values "
            "against our (deterministic) fit.",
        ]
    skipped = [r for r in rows if r["status"] != "ok"]
    if skipped:
        lines += ["", "Not run / no result:", ""]
        lines += [
            f"- {r['tool']} on {r['matrix']}: {r['status']} ({r.get('reason', '')})"
            for r in skipped
        ]
    return "\n".join(lines) + "\n"
