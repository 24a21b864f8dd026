"""How the ``rlbatch`` commands print their results (:data:`Format`: a rich table, JSON or Markdown): the accounting
table of ``account``, a sweep's report of ``sweep`` and ``demo``, and the trials of ``launch``. The commands
themselves: :mod:`rlbatch.cli`."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from rlbatch.output import console, markdown_table, markdown_text, print_json, rich_table


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


def print_accounting(rows, reference: str, fmt: Format, title: str = "End-to-end accounting") -> None:
    from rlbatch.analysis.table import fastest, to_json_rows  # on use: --help loads no pandas
    from rlbatch.analysis.headline import verdict

    recs = rows.to_dict(orient="records")
    for r in recs:  # the reference is not compared with itself: "—", not "no" (newcomer finding 23)
        if r.get("run") == reference:
            r["faster_than_reference"] = "—"
    nr = "not reached"
    cols = [("run", "run", None), ("batch_size", "B", None), ("samples_to_target", "samples-to-target", ".6g"),
            ("rN", "rN", ".2f"), ("relative_throughput", "rel. throughput", ".2f"),
            ("relative_time", "rel. time-to-target", ".2f"),
            ("faster_than_reference", "faster (point estimate)", None)]
    best = fastest(rows)
    if fmt is Format.json:
        print_json(to_json_rows(rows))
        return
    if fmt is Format.markdown:
        print(markdown_table(recs, cols, none=nr))
        print()
        for r in recs:
            print(f"- {verdict(r, reference)}")
        if best:
            print(f"\n**Fastest to target: {best}.**")
        return
    con = console()
    con.print(rich_table(recs, cols, title=f"{title} (reference {reference})", none=nr))
    for r in recs:
        con.print(f"  {verdict(r, reference)}")
    if best:
        con.print(f"[bold]Fastest to target: {best}[/bold]")


def print_sweep_report(rep: dict, fmt: Format, out: Path) -> None:
    from rlbatch.report import accounting_columns, with_ci_cells  # on use: --help loads no matplotlib

    rows = with_ci_cells(rep.get("accounting") or [])
    cols = accounting_columns(combined=True)
    if fmt is Format.json:
        print_json(rep)
        return
    family = (rep.get("aligned_family") or {}).get("statement")
    if fmt is Format.markdown:
        print(markdown_table(rows, cols, none="not reached"))
        print(f"\n{rep.get('recommendation') or ''}\n")
        if family:
            print(f"{family}\n")
        print(f"Report: {out}/report.html, report.md, report.json")
        return
    con = console()
    con.print(rich_table(rows, cols, title="End-to-end accounting (seeds of a configuration averaged)",
                         none="not reached"))
    con.print(markdown_text(rep.get("recommendation") or ""))
    if family:
        con.print(markdown_text(family))
    con.print(f"Report: {out}/report.html, {out}/report.md, {out}/report.json", markup=False)


def print_launch(res: dict, backend: str, out: Path, dry_run: bool, fmt: Format) -> None:

    from rlbatch.backends.launch import format_dry_run  # on use: --help loads no pandas / torch
    plans = res["plans"]
    if fmt is Format.json:
        print_json({"trials": plans, "launch_script": res["launch_script"], "jobs": res["jobs"]})
        return
    if dry_run:
        print(format_dry_run(plans), end="")
        return
    jobs = {j["run_id"]: j["job_id"] for j in res["jobs"]}
    rows = [{**p, "job_id": jobs.get(p["run_id"])} for p in plans]
    cols = [("run_id", "trial", None), ("prompts_per_step", "P", None), ("group_size", "G", None),
            ("batch_size", "B", None), ("lr", "lr", ".4g"), ("steps", "steps", None), ("log_path", "log", None)]
    if jobs:
        cols.append(("job_id", "Ray job", None))
    if fmt is Format.markdown:
        print(markdown_table(rows, cols))
    else:
        console().print(rich_table(rows, cols, title=f"{backend}: {len(plans)} trials"))
    if not jobs:
        print(f"Run: bash {res['launch_script']}   (re-run to resume; then: rlbatch analyze {Path(out) / 'logs'})")
