"""From a finished sweep to its report: seed-averaged runs per configuration, the sweep's figures (score vs retained
samples, score vs wall-clock, grad norm vs B with a fitted log-log slope, time per step split into generation and
update), per-seed samples-to-target intervals, and the accounting.

The report itself is ``rlbatch.report.build_report`` (issue 3) fed with one seed-averaged run per configuration and
these figures as extra sections. Where that module is not available (this branch alone), :func:`fallback_report`
writes report.json/report.md/report.html with the same sections and the accounting of
``rlbatch.analysis.accounting``.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlbatch.runstore import Run, make_meta, read_run

TIME_SPLIT = ("time/gen_s", "time/reward_s", "time/train_s")


# --------------------------------------------------------------------------------------------------- curves
def samples_to_target(evals: pd.DataFrame, target: float, metric: str = "eval/score",
                      x: str = "samples/retained") -> float | None:
    """First crossing of ``target`` by linear interpolation between evaluation points; None if never reached.
    Uses ``rlbatch.analysis.curves.samples_to_target`` (issue 3) when present."""
    try:
        from rlbatch.analysis.curves import samples_to_target as s2t
    except ImportError:
        s2t = None
    if s2t is not None:
        return s2t(evals, target, metric=metric, x=x)
    if evals is None or evals.empty:
        return None
    xs, ys = evals[x].to_numpy(float), evals[metric].to_numpy(float)
    for i in range(len(xs)):
        if ys[i] >= target:
            if i == 0:
                return float(xs[0]) if xs[0] > 0 else None
            x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
            return float(x0 + (target - y0) * (x1 - x0) / (y1 - y0)) if y1 != y0 else float(x1)
    return None


def aggregate_seeds(runs: list[Run], name: str) -> Run:
    """One run per configuration: per-step metrics averaged over seeds (numeric columns), and the eval curve
    averaged over seeds on a common grid of retained samples (the eval points of the seed with the fewest),
    linearly interpolated; ``eval/score_min``/``eval/score_max`` keep the seed range. A single run is renamed only."""
    first = runs[0]
    meta = make_meta(None, **{**first.meta.model_dump(mode="json"), "run_id": name, "seed": None,
                              "seeds": [r.meta.seed for r in runs], "n_seeds": len(runs)})
    if len(runs) == 1:
        return Run(meta=meta, metrics=first.metrics.copy(), evals=first.evals.copy(), path=first.path)
    metrics = pd.concat([r.metrics.select_dtypes("number") for r in runs]).groupby("step", as_index=False).mean()
    counts = pd.concat([r.metrics[["step"]] for r in runs]).groupby("step").size()
    metrics = metrics[metrics["step"].map(counts) == len(runs)].reset_index(drop=True)  # steps every seed has
    base = min(runs, key=lambda r: r.evals["samples/retained"].max())
    grid = base.evals["samples/retained"].to_numpy(float)
    scores = np.array([np.interp(grid, r.evals["samples/retained"].to_numpy(float),
                                 r.evals["eval/score"].to_numpy(float)) for r in runs])
    evals = pd.DataFrame({"step": base.evals["step"].to_numpy(), "samples/retained": grid,
                          "eval/score": scores.mean(0), "eval/score_min": scores.min(0),
                          "eval/score_max": scores.max(0),
                          "eval/n": base.evals["eval/n"].to_numpy() * len(runs) if "eval/n" in base.evals else None})
    if len(metrics):
        evals["time/wall_s"] = np.interp(grid, np.r_[0.0, metrics["samples/retained"].to_numpy(float)],
                                         np.r_[0.0, metrics["time/wall_s"].to_numpy(float)])
    return Run(meta=meta, metrics=metrics, evals=evals, path=None)


def group_runs(runs: list[Run]) -> dict[str, list[Run]]:
    from rlbatch.sweep.local import config_id

    groups: dict[str, list[Run]] = {}
    for r in sorted(runs, key=lambda r: (r.meta.batch_size or 0, r.run_id)):
        groups.setdefault(config_id(r.run_id), []).append(r)
    return groups


def throughput(run: Run) -> float | None:
    """Retained samples per wall-clock second (generation + scoring + update; evaluation excluded)."""
    m = run.metrics
    if m.empty or "time/wall_s" not in m or float(m["time/wall_s"].iloc[-1]) <= 0:
        return None
    return float(m["samples/retained"].iloc[-1]) / float(m["time/wall_s"].iloc[-1])


def accounting_rows(agg: list[Run], target: float, reference: str) -> tuple[pd.DataFrame | None, str | None]:
    """Accounting over seed-averaged runs (``rlbatch.analysis.accounting.account``); ``(None, why)`` if the
    reference did not reach the target."""
    from rlbatch.analysis.accounting import account
    from rlbatch.errors import UserError

    df = pd.DataFrame([{"run": r.run_id, "batch_size": r.meta.batch_size,
                        "samples_to_target": samples_to_target(r.evals, target),
                        "throughput_samples_per_s": throughput(r)} for r in agg])
    try:
        return account(df, reference), None
    except UserError as err:
        return None, str(err)


# --------------------------------------------------------------------------------------------------- figures
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(r: Run) -> str:
    rule = "fixed lr" if r.meta.lr_rule == "none" else f"{r.meta.lr_rule} rule"
    return f"B={r.meta.batch_size} ({rule}, lr={r.meta.lr:.2g})"


def curves_figures(agg: list[Run], target: float | None) -> dict:
    plt = _plt()
    figs = {}
    for key, xcol, xlabel in (("score_vs_samples", "samples/retained", "retained samples"),
                              ("score_vs_wallclock", "time/wall_s", "wall-clock seconds (excluding evaluation)")):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for r in agg:
            e = r.evals
            if e.empty or xcol not in e:
                continue
            ls = "--" if r.meta.lr_rule == "none" else "-"
            (line,) = ax.plot(e[xcol], e["eval/score"], ls, marker="o", ms=3, label=_label(r))
            if "eval/score_min" in e and xcol == "samples/retained":
                ax.fill_between(e[xcol], e["eval/score_min"], e["eval/score_max"], color=line.get_color(), alpha=0.12)
        if target is not None:
            ax.axhline(target, color="k", lw=0.8, ls=":", label=f"target {target:g}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("held-out score (greedy, mean over seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        figs[key] = fig
    return figs


def grad_norm_fit(runs: list[Run], metric: str = "grad_norm/actor") -> dict[str, Any]:
    """Log-log fit of the mean pre-clip actor gradient norm against B over the sqrt-rule trials (one point per
    seed): slope with a 95% CI (ideal -0.5 inside the batch-invariant range; Li et al. 2026, McCandlish et al.
    2018). Uses only the first half of each run's steps, so all B are compared at similar policy quality.
    ``metric="grad_norm/critic"`` fits PPO's critic the same way."""
    from scipy import stats

    pts = []
    for r in runs:
        if r.meta.lr_rule == "none" or r.metrics.empty or metric not in r.metrics:
            continue
        g = r.metrics[metric].dropna()
        g = g.iloc[: max(1, len(g) // 2)]
        if len(g):
            pts.append((float(r.meta.batch_size), float(g.mean()), r.run_id))
    out: dict[str, Any] = {"points": [{"batch_size": b, "grad_norm_mean": g, "run": n} for b, g, n in pts]}
    bs = sorted({p[0] for p in pts})
    if len(bs) >= 2:
        x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
        fit = stats.linregress(x, y)
        dof = max(len(x) - 2, 1)
        half = float(stats.t.ppf(0.975, dof) * fit.stderr) if len(x) > 2 else float("nan")
        out.update(slope=float(fit.slope), slope_ci95=[float(fit.slope - half), float(fit.slope + half)],
                   intercept=float(fit.intercept), r2=float(fit.rvalue ** 2), n_points=len(x))
    return out


def grad_norm_figure(runs: list[Run], fit: dict):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    pts = fit["points"]
    ax.loglog([p["batch_size"] for p in pts], [p["grad_norm_mean"] for p in pts], "o", label="sqrt-rule trials")
    ctrl = [(r.meta.batch_size, r.metrics["grad_norm/actor"].dropna().iloc[: max(1, len(r.metrics) // 2)].mean())
            for r in runs if r.meta.lr_rule == "none" and "grad_norm/actor" in r.metrics]
    if ctrl:
        ax.loglog(*zip(*ctrl), "s", mfc="none", label="fixed-LR control")
    if "slope" in fit:
        bs = np.array(sorted({p["batch_size"] for p in pts}))
        ax.loglog(bs, np.exp(fit["intercept"]) * bs ** fit["slope"], "-",
                  label=f"fit: slope {fit['slope']:.2f} (95% CI {fit['slope_ci95'][0]:.2f}..{fit['slope_ci95'][1]:.2f})")
        ax.loglog(bs, np.exp(fit["intercept"]) * bs[0] ** fit["slope"] * (bs / bs[0]) ** -0.5, ":", color="gray",
                  label="ideal B^-1/2")
    ax.set_xlabel("batch size B (responses per update)")
    ax.set_ylabel("actor grad norm before clipping")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def time_split(agg: list[Run]) -> list[dict]:
    rows = []
    for r in agg:
        m = r.metrics
        if m.empty:
            continue
        row = {"run": r.run_id, "batch_size": r.meta.batch_size}
        for k in TIME_SPLIT:
            row[k.split("/")[1]] = float(m[k].mean()) if k in m else None
        row["step_s"] = float(m["time/step_s"].mean())
        row["throughput_samples_per_s"] = throughput(r)
        rows.append(row)
    return rows


def time_figure(rows: list[dict]):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    names = [f"{r['run']}" for r in rows]
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for key, lab in (("gen_s", "generation"), ("reward_s", "scoring"), ("train_s", "update")):
        vals = np.array([r[key] or 0.0 for r in rows])
        ax.bar(x, vals, bottom=bottom, label=lab)
        bottom += vals
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("seconds per step (mean)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------------- sections
def _md_table(rows: list[dict], cols: list[tuple[str, str, str | None]]) -> str:
    from rlbatch.output import markdown_table

    return markdown_table(rows, cols, none="not reached")


def seed_rows(groups: dict[str, list[Run]], target: float | None) -> list[dict]:
    rows = []
    for name, rs in groups.items():
        s2t = [samples_to_target(r.evals, target) if target is not None else None for r in rs]
        reached = [s for s in s2t if s is not None]
        first = [float(r.evals["eval/score"].iloc[0]) for r in rs if len(r.evals)]
        last = [float(r.evals["eval/score"].iloc[-1]) for r in rs if len(r.evals)]
        rows.append({"config": name, "batch_size": rs[0].meta.batch_size, "lr": rs[0].meta.lr,
                     "lr_rule": rs[0].meta.lr_rule, "seeds": len(rs), "reached": f"{len(reached)}/{len(rs)}",
                     "samples_to_target_per_seed": s2t,
                     "samples_to_target_min": min(reached) if reached else None,
                     "samples_to_target_max": max(reached) if reached else None,
                     "first_eval_mean": float(np.mean(first)) if first else None,
                     "last_eval_mean": float(np.mean(last)) if last else None,
                     "samples_retained": float(np.mean([r.metrics["samples/retained"].iloc[-1] for r in rs])),
                     "samples_generated": float(np.mean([r.metrics["samples/generated"].iloc[-1] for r in rs]))})
    return rows


def sweep_sections(runs: list[Run], agg: list[Run], target: float | None, timing_note: str = "") -> list[dict]:
    """The sweep's report sections (contract of ``rlbatch.report.build_report``): learning curves, per-seed
    samples-to-target, gradient norm vs B with its fitted slope, and time per step split."""
    groups = group_runs(runs)
    srows = seed_rows(groups, target)
    fit = grad_norm_fit(runs)
    trows = time_split(agg)
    curves = curves_figures(agg, target)
    sec = [
        {"title": "Learning curves", "json_key": "curves", "json": None,
         "markdown": "Held-out score (greedy decoding on a fixed held-out set) against cumulative retained samples "
                     "(the paper's x-axis: curves of the sqrt-rule trials should overlay) and against wall-clock "
                     "time. Lines are means over seeds; shaded bands the range across seeds.",
         "figures": curves},
        {"title": "Seeds: samples-to-target per seed", "json_key": "seeds", "json": srows,
         "markdown": _md_table(srows, [("config", "config", None), ("batch_size", "B", None), ("lr", "lr", ".3g"),
                                       ("reached", "seeds reaching target", None),
                                       ("samples_to_target_min", "min samples-to-target", ".0f"),
                                       ("samples_to_target_max", "max samples-to-target", ".0f"),
                                       ("first_eval_mean", "first eval", ".3f"),
                                       ("last_eval_mean", "last eval", ".3f"),
                                       ("samples_generated", "generated samples", ".0f"),
                                       ("samples_retained", "retained samples", ".0f")])
                     + "\n\nThe accounting uses the seed-averaged curve of each configuration; the range across "
                       "seeds shows how much evaluation and sampling noise there is in one seed's samples-to-target.",
         "figures": {}},
    ]
    slope_txt = (f"Fitted log-log slope of the pre-clip actor gradient norm against B (sqrt-rule trials, first half "
                 f"of each run): **{fit['slope']:.3f}** (95% CI {fit['slope_ci95'][0]:.3f} .. "
                 f"{fit['slope_ci95'][1]:.3f}, {fit['n_points']} points); ideal inside the batch-invariant range: "
                 f"-0.5 (the paper measured -0.468 for GRPO)." if "slope" in fit else
                 "Too few batch sizes for a gradient-norm fit.")
    sec.append({"title": "Gradient norm vs batch size", "json_key": "grad_norm_fit", "json": fit,
                "markdown": slope_txt, "figures": {"grad_norm_vs_B": grad_norm_figure(runs, fit)}})
    cfit = grad_norm_fit(runs, "grad_norm/critic")
    if cfit["points"]:  # PPO: the critic's own gradient-norm scaling beside the actor's
        ctxt = (f"Fitted log-log slope of the pre-clip critic (value model) gradient norm against B (sqrt-rule "
                f"trials, first half of each run): **{cfit['slope']:.3f}** (95% CI {cfit['slope_ci95'][0]:.3f} .. "
                f"{cfit['slope_ci95'][1]:.3f}, {cfit['n_points']} points), beside the actor's "
                f"{fit['slope']:.3f}" if "slope" in cfit and "slope" in fit else
                "Too few batch sizes for a critic gradient-norm fit.")
        if "slope" in cfit and "slope" not in fit:
            ctxt = f"Critic gradient-norm slope: **{cfit['slope']:.3f}** (no actor fit)."
        sec.append({"title": "Critic gradient norm vs batch size (PPO)", "json_key": "grad_norm_fit_critic",
                    "json": cfit, "figures": {},
                    "markdown": ctxt + (". The paper finds the critic's norm nearly flat in B, so its critical "
                                        "batch can differ from the actor's." if "slope" in cfit and "slope" in fit
                                        else "")})
    sec.append({"title": "Time per step: generation vs update", "json_key": "time_split", "json": trows,
                "markdown": _md_table(trows, [("run", "config", None), ("batch_size", "B", None),
                                              ("gen_s", "generation s", ".4f"), ("reward_s", "scoring s", ".4f"),
                                              ("train_s", "update s", ".4f"), ("step_s", "step s", ".4f"),
                                              ("throughput_samples_per_s", "retained samples/s", ".1f")])
                            + (f"\n\n{timing_note}" if timing_note else ""),
                "figures": {"time_per_step": time_figure(trows)}})
    return sec


# --------------------------------------------------------------------------------------------------- report
def recommendation(rows: pd.DataFrame | None, reference: str, why: str | None) -> str:
    from rlbatch.analysis.accounting import fastest, verdict

    if rows is None:
        return f"No recommendation: {why}"
    best = fastest(rows)
    recs = rows.to_dict(orient="records")
    parts = [verdict(r, reference) for r in recs if r["run"] != reference]
    if best is None:
        return "No run reached the target."
    b = next(r for r in recs if r["run"] == best)
    head = (f"Recommendation: use {best} (B={b['batch_size']}); it reaches the target in "
            f"{b['relative_time']:.2f}x the reference's ({reference}) time-to-target. " if best != reference else
            f"Recommendation: keep the reference {reference}; no larger batch beat it on time-to-target. ")
    return head + " ".join(parts) + (" A configuration is faster than the reference iff its throughput gain exceeds "
                                     "its sample penalty rN (Li et al. 2026).")


def _fig_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def fallback_report(agg: list[Run], out: Path, *, target: float | None, reference: str, title: str,
                    sections: list[dict], extra_json: dict | None = None) -> dict:
    """report.json / report.md / report.html without ``rlbatch.report`` (issue 3 not merged): the accounting of
    ``rlbatch.analysis.accounting`` over the seed-averaged runs, the recommendation paragraph, and ``sections``."""
    from rlbatch.analysis.accounting import to_json_rows
    from rlbatch.output import to_json

    rows, why = accounting_rows(agg, target, reference) if target is not None else (None, "no target given")
    rec = recommendation(rows, reference, why)
    summaries = [{"run": r.run_id, "batch_size": r.meta.batch_size, "prompts_per_step": r.meta.prompts_per_step,
                  "group_size": r.meta.group_size, "lr": r.meta.lr, "lr_rule": r.meta.lr_rule,
                  "steps": int(r.metrics["step"].iloc[-1]) if len(r.metrics) else 0,
                  "samples_retained": float(r.metrics["samples/retained"].iloc[-1]) if len(r.metrics) else 0,
                  "wall_clock_s": float(r.metrics["time/wall_s"].iloc[-1]) if len(r.metrics) else None,
                  "throughput_samples_per_s": throughput(r),
                  "samples_to_target": samples_to_target(r.evals, target) if target is not None else None,
                  "first_eval_score": float(r.evals["eval/score"].iloc[0]) if len(r.evals) else None,
                  "last_eval_score": float(r.evals["eval/score"].iloc[-1]) if len(r.evals) else None}
                 for r in agg]
    acc_json = to_json_rows(rows) if rows is not None else []
    report = {"title": title, "target": target, "reference": reference, "runs": summaries, "accounting": acc_json,
              "recommendation": rec, **(extra_json or {})}
    for s in sections:
        if s.get("json_key"):
            report[s["json_key"]] = s.get("json")
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(to_json(report) + "\n")

    acc_md = "(no accounting: " + (why or "") + ")"
    if rows is not None:
        acc_md = _md_table(rows.to_dict(orient="records"),
                           [("run", "run", None), ("batch_size", "B", None),
                            ("samples_to_target", "samples-to-target", ".0f"), ("rN", "rN", ".2f"),
                            ("relative_throughput", "rel. throughput", ".2f"),
                            ("relative_time", "rel. time-to-target", ".2f"), ("faster_than_reference", "faster", None)])
    md = [f"# {title}", "", f"Target held-out score: {target}; reference: {reference}.", "", "## Accounting", "",
          acc_md, "", "## Recommendation", "", rec, ""]
    html = [f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>body{{font-family:sans-serif;"
            "max-width:960px;margin:2em auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;"
            "padding:3px 6px}}</style></head><body>", f"<h1>{title}</h1>",
            f"<p>Target held-out score: {target}; reference: {reference}.</p>", "<h2>Accounting</h2>",
            _md_to_html_table(acc_md), "<h2>Recommendation</h2>", f"<p>{rec}</p>"]
    for s in sections:
        md += [f"## {s['title']}", "", s.get("markdown", ""), ""]
        html += [f"<h2>{s['title']}</h2>", _md_to_html(s.get("markdown", ""))]
        for name, fig in (s.get("figures") or {}).items():
            png = _fig_png(fig)
            (out / f"{name}.png").write_bytes(png)
            md += [f"![{name}]({name}.png)", ""]
            html.append(f"<img alt='{name}' src='data:image/png;base64,{base64.b64encode(png).decode()}'/>")
    html.append("</body></html>")
    (out / "report.md").write_text("\n".join(md))
    (out / "report.html").write_text("\n".join(html))
    return report


def _md_to_html_table(md: str) -> str:
    lines = [x for x in md.splitlines() if x.startswith("|")]
    if len(lines) < 2:
        return f"<p>{md}</p>"
    cells = [[c.strip() for c in x.strip("|").split("|")] for x in lines if not set(x) <= set("|-: ")]
    head, body = cells[0], cells[1:]
    return ("<table><tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in body) + "</table>")


def _md_to_html(md: str) -> str:
    blocks, table, text = [], [], []
    for line in md.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            blocks.append(_md_to_html_table("\n".join(table)))
            table = []
        if line.strip():
            text.append(line.replace("**", ""))
        elif text:
            blocks.append("<p>" + " ".join(text) + "</p>")
            text = []
    if table:
        blocks.append(_md_to_html_table("\n".join(table)))
    if text:
        blocks.append("<p>" + " ".join(text) + "</p>")
    return "\n".join(blocks)


def report_sweep(out: Path | str, *, target: float | None, reference: str | None = None,
                 title: str = "rlbatch sweep") -> dict:
    """Read the finished trials of the sweep in ``out``, average seeds per configuration, and write the report
    (``rlbatch.report.build_report`` when available, else :func:`fallback_report`). ``reference`` defaults to the
    B0 configuration under the sweep's rule. Returns the report's JSON object."""
    from rlbatch.sweep.local import read_manifest

    out = Path(out)
    manifest = read_manifest(out) or {"trials": [], "settings": {}}
    runs = [read_run(out / t["run_dir"]) for t in manifest["trials"] if t["state"] == "finished"]
    if not runs:
        from rlbatch.errors import UserError

        raise UserError("no finished trials to report on", path=str(out))
    groups = group_runs(runs)
    agg = [aggregate_seeds(rs, name) for name, rs in groups.items()]
    if reference is None:
        s = manifest.get("settings", {})
        b0, rule = s.get("base_batch"), s.get("rule", "sqrt")
        cands = [r.run_id for r in agg if r.meta.batch_size == b0 and r.meta.lr_rule == rule]
        reference = cands[0] if cands else agg[0].run_id
    s = manifest.get("settings", {})
    hw = runs[0].meta.hardware if isinstance(runs[0].meta.hardware, dict) else {}
    note = (f"Timings: measured while {s.get('workers', 1)} trial process(es) ran in parallel with "
            f"{hw.get('torch_threads', '?')} torch thread(s) each on a machine with {hw.get('cpu_count', '?')} CPUs "
            f"(device {hw.get('device', '?')}); other load on the machine inflates them and adds noise to the "
            f"throughput ratios.")
    sections = sweep_sections(runs, agg, target, timing_note=note)
    extra = {"sweep": {"settings": manifest.get("settings", {}),
                       "trials": [{"run_id": t["spec"].run_id, "state": t["state"], "seconds": t.get("seconds")}
                                  for t in manifest["trials"]]}}
    try:
        from rlbatch.report import build_report
    except ImportError:
        build_report = None
    if build_report is not None:
        rep = build_report(agg, out, target=target, reference=reference, title=title, sections=sections,
                           extra_json=extra)
    else:
        print("note: rlbatch.report.build_report is not available on this branch (issue 3); writing the sweep's "
              "own report (accounting, figures, recommendation) instead.")
        rep = fallback_report(agg, out, target=target, reference=reference, title=title, sections=sections,
                              extra_json=extra)
    _plt().close("all")
    return rep
