"""Fill the GPU results page (``benchmarks/results/gpu_h200.md``) from the files ``benchmarks/gpu_study.sh`` wrote.

    .venv/bin/python benchmarks/gpu_study_report.py OUT_DIR [--out benchmarks/results/gpu_h200.md]

Reads ``OUT_DIR/machine.json``, ``profile.json``, ``report.md``, ``report.json``, ``async.json`` (each optional: a
missing one is named in the page with the phase that writes it) and prints (or writes) the page:

1. decode throughput per B and its fraction of the roofline, at the datasheet ceilings the profile was given and at
   the ceilings measured on the machine (:func:`rlbatch.profile.roofline_tokens_per_s`, the one bound);
2. generation time per doubling of B and the generation-throughput gain for 4x the sequences
   (:func:`rlbatch.analysis.throughput.time_ratios`), beside the paper's 2.29x (PPO, B 256 -> 1024: 39 s -> 68 s);
3. the study's accounting table with its intervals and where the aligned family ends, copied from the study's
   report (the report computes them; this page only quotes);
4. asynchronous vs synchronous rollouts;
5. the same quantities measured on 2 CPU cores (committed results), for the differences.
Computes nothing that the package does not already compute, except the per-pair ratios listed above.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rlbatch.analysis.throughput import time_ratios  # noqa: E402
from rlbatch.output import markdown_table  # noqa: E402
from rlbatch.profile import roofline_tokens_per_s  # noqa: E402

#: Li et al. 2026, accelerate half: PPO B 256 -> 1024 (4x the responses) took 39 s -> 68 s of generation: 2.29x the
#: generation throughput (rlbatch.analysis.throughput's module docstring).
PAPER_GEN_GAIN_4X = 2.29
#: Committed CPU measurements the page compares with (2 shared CPU cores, the tiny preset).
CPU_PROFILE = ROOT / "benchmarks/results/decode_roofline_tiny.json"
CPU_ASYNC = ROOT / "benchmarks/results/async_vs_sync.md"


def _load(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _missing(name: str, phase: str) -> str:
    return f"_Not measured: `{name}` is missing (phase `{phase}` of gpu_study.sh failed or ran out of its box; see " \
           f"`gpu_study.log`)._\n"


def machine_section(m: dict | None) -> str:
    if not m:
        return _missing("machine.json", "setup")
    w = m.get("warm_start") or {}
    warm = (f" Warm start of `{w.get('preset')}` ({w.get('params', 0) / 1e6:.1f} M parameters) on the device: "
            f"{w.get('steps')} supervised steps in {w.get('seconds', float('nan')):.1f} s to a probe score of "
            f"{w.get('probe_score', float('nan')):.3f}." if w.get("steps") else " Warm start: not recorded.")
    return (f"{m.get('device_name')} ({m.get('device')}), torch {m.get('torch')} (CUDA {m.get('cuda')}), "
            f"transformers {m.get('transformers')}, Python {m.get('python')}, {m.get('cpu_count')} CPUs; measured on "
            f"{m.get('date_utc')}. Ceilings measured by the script: copy bandwidth "
            f"{m.get('measured_bandwidth_gbs', float('nan')):.4g} GB/s, matmul "
            f"{m.get('measured_peak_tflops', float('nan')):.4g} TFLOP/s (bf16 on CUDA, fp32 on CPU)." + warm + "\n")


def profile_rows(prof: dict, machine: dict | None) -> list[dict]:
    """The profile's rows plus the roofline fraction at the measured ceilings (when machine.json has them)."""
    ctx = prof["prompt_tokens"] + (prof["new_tokens"] + 1) / 2  # the profile's mean decode context
    rows = []
    for r in prof["batches"]:
        row = dict(r)
        if machine and machine.get("measured_bandwidth_gbs") and machine.get("measured_peak_tflops"):
            roof, _ = roofline_tokens_per_s(r["batch_size"], ctx, prof["shape"], machine["measured_bandwidth_gbs"],
                                            machine["measured_peak_tflops"])
            row["measured_roofline_fraction"] = r["decode_tokens_per_s"] / roof
        rows.append(row)
    return rows


def profile_section(prof: dict | None, machine: dict | None) -> str:
    if not prof:
        return _missing("profile.json", "profile")
    sh = prof["shape"]
    rows = profile_rows(prof, machine)
    cols = [("batch_size", "B", None), ("prefill_s", "prefill s", ".3g"), ("decode_s", "decode s", ".3g"),
            ("decode_step_ms", "ms / decode step", ".3g"), ("decode_tokens_per_s", "decode tok/s", ".4g"),
            ("roofline_tokens_per_s", "roofline tok/s", ".4g"),
            ("roofline_fraction", f"of roofline ({prof['bandwidth_source']} ceilings)", ".1%"),
            ("measured_roofline_fraction", "of roofline (measured ceilings)", ".1%"),
            ("roofline_bound", "bound", None), ("update_s", "update s", ".3g")]
    head = (f"Model `{prof['model']}`: {sh['n_params'] / 1e6:.1f} M parameters, {sh['param_bytes'] / 1e6:.1f} MB in "
            f"{prof['dtype']}, {sh['kv_bytes_per_token'] / 1e3:.3g} kB of KV cache per token; {prof['prompt_tokens']} "
            f"prompt tokens, {prof['new_tokens']} decoded per sequence (greedy, no early stop), best of "
            f"{prof['repeats']}. Roofline at {prof['bandwidth_gbs']:.4g} GB/s and {prof['peak_tflops']:.4g} TFLOP/s "
            f"({prof['bandwidth_source']}).\n")
    return head + "\n" + markdown_table(rows, cols) + "\n"


def generation_section(prof: dict | None) -> str:
    """Per doubling (consecutive B) and per 4x (every B to 4B) of generation time = prefill + decode."""
    if not prof:
        return _missing("profile.json", "profile")
    bs = [r["batch_size"] for r in prof["batches"]]
    ts = [r["gen_s"] for r in prof["batches"]]
    per = time_ratios(bs, ts)
    quad = [p for i in range(len(bs)) for j in range(i + 1, len(bs)) if bs[j] == 4 * bs[i]
            for p in time_ratios([bs[i], bs[j]], [ts[i], ts[j]])]
    cols = [("b_from", "B from", None), ("b_to", "B to", None), ("time_ratio", "gen time x", ".2f"),
            ("per_doubling", "per doubling", ".2f"), ("throughput_gain", "gen throughput x", ".2f"),
            ("sublinear", "sublinear", None)]
    above = [p for p in quad if p["throughput_gain"] >= PAPER_GEN_GAIN_4X]
    lines = ["Between consecutive measured B:\n", markdown_table(per, cols), "",
             f"For 4x the sequences (the paper: PPO B 256 -> 1024 gave {PAPER_GEN_GAIN_4X}x the generation "
             "throughput):\n", markdown_table(quad, cols), ""]
    if quad:
        lines.append(f"{len(above)} of {len(quad)} 4x steps gain at least the paper's {PAPER_GEN_GAIN_4X}x"
                     + (f" (B {above[0]['b_from']} -> {above[0]['b_to']} to B {above[-1]['b_from']} -> "
                        f"{above[-1]['b_to']})." if above else "."))
    w = (prof.get("gen_window") or {}).get("window")
    lines.append(f"Sublinear generation window (every doubling < 1.9x time): "
                 + (f"B = {w[0]} to {w[1]}." if w else "none.") + "\n")
    return "\n".join(lines)


def _report_block(report_md: str, start: str, stop: str = "\n## ") -> str | None:
    i = report_md.find(start)
    if i < 0:
        return None
    j = report_md.find(stop, i + len(start))
    return report_md[i:j if j > 0 else None].strip()


def study_section(report_md: str | None, report: dict | None) -> str:
    if not report_md or not report:
        return _missing("report.md / report.json", "study")
    acc = _report_block(report_md, "### Accounting")
    out = []
    trials = (report.get("sweep") or {}).get("trials") or []
    states: dict[str, int] = {}
    for t in trials:
        states[t["state"]] = states.get(t["state"], 0) + 1
    settings = (report.get("sweep") or {}).get("settings") or {}
    out.append(f"Study `{settings.get('preset', '?')}`: B = {settings.get('batches')} on the {settings.get('rule')} "
               f"rule from B0 = {settings.get('base_batch')}, lr0 = {settings.get('base_lr')}, fixed-LR control at "
               f"B = {settings.get('fixed_lr_control')}, {settings.get('seeds')} seed(s), target "
               f"{report.get('target')} ({report.get('metric')}), clock: {report.get('clock')}. Trials: "
               + ", ".join(f"{n} {s}" for s, n in sorted(states.items())) + ".\n")
    out.append(acc.replace("### ", "#### ") if acc else "_The report has no accounting section._")
    rec = report.get("recommendation")
    if rec:
        out.append("\n" + rec)
    noise = (report.get("noise") or {}).get("actor") or {}
    if noise.get("slope") is not None:
        ci = noise.get("slope_ci") or [None, None]
        out.append(f"\nGrad-norm slope vs B: {noise['slope']:.2f} ({ci[0]:.2f} to {ci[1]:.2f}), knee (critical batch) "
                   f"at B = {noise.get('knee_batch')}." if None not in ci else
                   f"\nGrad-norm slope vs B: {noise['slope']:.2f}, knee at B = {noise.get('knee_batch')}.")
    return "\n".join(out) + "\n"


def async_section(a: dict | None) -> str:
    if not a:
        return _missing("async.json", "async")
    med = a.get("throughput_median") or {}
    s = a.get("async_speedup")
    line = (f"`{a['model']}` on {a['device']} ({a['precision']}), B = {a['batch']} (G = {a['group']}), "
            f"{a['steps']} steps per run, {a['rounds']} round(s): retained samples per second (median) "
            + ", ".join(f"{k} {v:.4g}" for k, v in med.items()) + ".")
    if s:
        line += (f" Asynchronous (K = 1) / synchronous: **{s['median']:.2f}x** (rounds {s['min']:.2f}-"
                 f"{s['max']:.2f}).")
    return line + "\n"


def cpu_section(prof: dict | None, a: dict | None) -> str:
    """The CPU measurements committed in benchmarks/results, beside the GPU ones."""
    lines = []
    cpu = _load(CPU_PROFILE)
    if cpu and prof:
        c0, c1 = cpu["batches"][0], cpu["batches"][-1]
        g = {r["batch_size"]: r for r in prof["batches"]}
        lines.append(f"- Decode, roofline fraction: CPU (`tiny`, {CPU_PROFILE.name}) {c0['roofline_fraction']:.1%} at "
                     f"B = {c0['batch_size']} and {c1['roofline_fraction']:.1%} at B = {c1['batch_size']}; this run "
                     + ", ".join(f"{g[b]['roofline_fraction']:.1%} at B = {b}" for b in (c0["batch_size"],
                                                                                         c1["batch_size"]) if b in g)
                     + ".")
        lines.append(f"- Generation time B {c0['batch_size']} -> {c1['batch_size']}: CPU "
                     f"x{c1['gen_s'] / c0['gen_s']:.2f}"
                     + (f", this run x{g[c1['batch_size']]['gen_s'] / g[c0['batch_size']]['gen_s']:.2f}"
                        if c0["batch_size"] in g and c1["batch_size"] in g else "") + ".")
    if CPU_ASYNC.is_file():
        m = re.search(r"async_speedup=([0-9.]+)\s+\(rounds: ([0-9.]+)-([0-9.]+)\)",
                      CPU_ASYNC.read_text(encoding="utf-8"))
        if m:
            s = (a or {}).get("async_speedup")
            lines.append(f"- Asynchronous rollouts (K = 1): CPU {m.group(1)}x (rounds {m.group(2)}-{m.group(3)}, "
                         f"{CPU_ASYNC.name}, first entry)" + (f"; this run {s['median']:.2f}x" if s else "") + ".")
    lines.append("- The study on CPU (README, `rlbatch demo`, tiny preset, 2026-12-01): the family ends between B = 16 "
                 "and 1024, the throughput gain levels off at ~2.3-2.7x from B = 128, and B = 4096 is slower than "
                 "B = 16 beyond noise (1.47x, 1.14-1.84).")
    return "\n".join(lines) + "\n"


def build_page(out_dir: Path) -> str:
    machine = _load(out_dir / "machine.json")
    prof = _load(out_dir / "profile.json")
    report = _load(out_dir / "report.json")
    report_md = (out_dir / "report.md").read_text(encoding="utf-8") if (out_dir / "report.md").is_file() else None
    a = _load(out_dir / "async.json")
    name = (machine or {}).get("device_name") or "the GPU"
    return "\n".join([
        f"# rlbatch on {name}: the first GPU measurements",
        "",
        "Written by `benchmarks/gpu_study_report.py` from the files of one `bash benchmarks/gpu_study.sh` run "
        "(the run stores are in its `runs.tar.gz`).",
        "", "## The machine", "", machine_section(machine),
        "## 1. Decode throughput per B and its fraction of the roofline", "", profile_section(prof, machine),
        "## 2. Generation grows sublinearly in B", "", generation_section(prof),
        "## 3. The GRPO batch study (accounting with 95% intervals, where the family ends)", "",
        study_section(report_md, report),
        "## 4. Asynchronous vs synchronous rollouts", "", async_section(a),
        "## 5. What differed from 2 CPU cores", "", cpu_section(prof, a),
    ])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path, help="the folder gpu_study.sh wrote ($OUT)")
    ap.add_argument("--out", type=Path, default=None, help="write the page here (default: print it)")
    args = ap.parse_args()
    if not args.out_dir.is_dir():
        print(f"gpu_study_report: {args.out_dir}: not a folder", file=sys.stderr)
        return 2
    page = build_page(args.out_dir)
    if args.out:
        args.out.write_text(page, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
