"""From a sweep directory to its report: the sweep's finished trials go to ``rlbatch.report.build_report``, the same
code path as ``rlbatch analyze SWEEP_DIR`` (seed-averaged accounting and overlay with seed bands, per-seed
samples-to-target, gradient norm vs B with its slope, time per step, throughput model, the plan). The sweep adds only
a note on how its timings were measured and the manifest's trial states (``report.json`` key ``sweep``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from rlbatch.readers.collect import load_all
from rlbatch.errors import UserError
from rlbatch.readers import load
from rlbatch.report import build_report
from rlbatch.analysis.study import Study
from rlbatch.result import StudyResult
from rlbatch.runstore import annotate_stopped, annotate_timing, atomic_write_text, sequential_record, timing_blocks
from rlbatch.study.adaptive import AdaptiveResult
from rlbatch.study.manifest import read_manifest, short_error


def timing_note(settings: dict, hardware: dict) -> str:
    """One paragraph on how the sweep's timings were measured (parallel trials, threads, CPUs, device)."""
    return (f"Timings: measured while {settings.get('workers', 1)} trial process(es) ran in parallel with "
            f"{hardware.get('torch_threads', '?')} torch thread(s) each on a machine with "
            f"{hardware.get('cpu_count', '?')} CPUs (device {hardware.get('device', '?')}); other load on the machine "
            f"inflates them and adds noise to the throughput ratios.")


def report_sweep(out: Path | str, *, target: float | None, reference: str | None = None,
                 title: str = "rlbatch sweep") -> dict:
    """Read the finished trials of the sweep in ``out`` (manifest ``sweep.json``, any backend) and write
    ``report.html``, ``report.md`` and ``report.json`` there with :func:`rlbatch.report.build_report`.
    ``reference`` defaults to build_report's (the smallest batch that reached the target). Returns the report's JSON
    object. Raises :class:`UserError` when no trial has finished."""
    out = Path(out)
    manifest = read_manifest(out) or {"trials": [], "settings": {}}
    # read as rlbatch analyze reads them (the run-store reader), so both reports say the same
    runs = [run for t in manifest["trials"] if t["state"] == "finished" for run in load(out / t["run_dir"], "rlbatch")]
    if not runs:
        failed = [t for t in manifest["trials"] if t["state"] == "failed" and t.get("error")]
        if failed:  # say why: the same error in every trial (a mistyped --task) is one line, not a silent failure
            errors = sorted({short_error(t["error"]) for t in failed})
            raise UserError(f"no finished trials to report on: {len(failed)} of {len(manifest['trials'])} failed "
                            f"({'; '.join(errors[:3])}{'; ...' if len(errors) > 3 else ''}; each trial's error is in "
                            f"sweep.json)", path=str(out))
        raise UserError("no finished trials to report on", path=str(out))
    # the timing pass's blocks lie in OUT (beside OUT/trials), above each trial's directory: annotated here as
    # rlbatch analyze OUT does, so that the sweep's own report takes its throughput from them too
    annotate_timing(runs, timing_blocks(out))
    settings = manifest.get("settings", {})
    hw = runs[0].meta.hardware if isinstance(runs[0].meta.hardware, dict) else {}
    sections = [{"title": "How the sweep was run", "markdown": timing_note(settings, hw)}]
    extra = {"sweep": {"settings": settings, "backend": manifest.get("backend", "local"),
                       "trials": [{"run_id": t["spec"].run_id, "state": t["state"], "seconds": t.get("seconds"),
                                   "attempts": t.get("attempts")} for t in manifest["trials"]]}}
    seq = sequential_record(out)
    study = None
    if seq is not None:  # the page's decision is the sequential study's last look (one pick on every page)
        sections.append(sequential_section(seq))
        study = Study.of(runs, target, reference=reference, sequential=seq)
    study = study or Study.of(runs, target, reference=reference)
    return build_report(runs, out, title=title, sections=sections, extra_json=extra,
                        study_result=StudyResult.of_study(study))


def sequential_section(rec: dict[str, Any]) -> dict[str, Any]:
    """The report section of a sequential study (``OUT/sequential.json``, :mod:`rlbatch.study.sequential`): each
    look (seeds, called faster, dropped and why), why it stopped, and its answer. Its "faster" claims are the
    study's decisions (each at its look's group-sequential boundary); the accounting below repeats its last look's
    decision (that look's boundary, only the study's claims called faster, the same pick)."""
    d = rec["design"]
    looks = "; ".join(
        f"look {lk['index'] + 1} ({lk['seeds']} seeds, {lk['runs']} runs): "
        + (f"faster {', '.join(lk['called'])}" if lk["called"] else "none faster")
        + (f", dropped {', '.join(f'{c} ({w})' for c, w in lk['dropped'].items())}" if lk["dropped"] else "")
        for lk in rec["looks"])
    if rec["decided"]:
        ans = (f"Decided: {', '.join(f'{c} (look {j + 1})' for c, j in rec['faster'].items())} shown faster than the "
               f"reference {rec['reference']}; pick {rec['pick']} (the smallest upper end of the relative time among "
               "them).")
    elif not rec["looks"]:  # stopped before its first look could compare anything: the accounting below is the
        ans = ("No look compared anything; the accounting below analyses the runs as a fixed design (another "  # fixed one
               "reference where this one never reached the target).")
    else:
        ans = (f"Undecided: nothing shown faster than the reference {rec['reference']} within the design's "
               f"{max(d['looks'])} seeds; the best estimate is {rec['pick']} (not shown faster).")
    last = (f" May be the fastest at the last look: {', '.join(rec['may_be_fastest']) or 'none'}."
            if rec["looks"] else "")
    md = (f"Sequential study (group-sequential, looks at {', '.join(map(str, d['looks']))} seeds, O'Brien-Fleming "
          f"boundary C = {d['C']:.2f}, futility {d['futility']:g} se, familywise false \"faster\" {d['alpha']:.0%}, "
          f"indifference zone {d['zone']:.0%})" + (f": {looks}" if looks else "") + f". Stopped: {rec['stop']}; "
          f"{rec['runs']} runs. {ans}{last}")
    return {"title": "Sequential study", "json_key": "sequential", "json": rec, "markdown": md}


def adaptive_section(rec: dict[str, Any]) -> dict[str, Any]:
    """The report section of an adaptive sweep: the record under the JSON key ``adaptive`` and one Markdown
    paragraph (each configuration's outcome and reason, the samples spent, the pick)."""
    seen: dict[str, dict] = {}
    for t in rec["trials"]:
        seen.setdefault(t["config"], {**t, "samples": 0.0})["samples"] += t["samples"]
    md = ("Adaptive sweep on " + rec["backend"] + ": "
          + "; ".join(f"B={t['batch_size']} ({c}): {t['state']} after {t['samples']:.0f} samples ({t['decided_by']})"
                      for c, t in seen.items())
          + f". Samples spent over all trials: {rec['samples_spent']:.0f}; clock seconds: {rec['time_spent_s']:.0f}. "
            f"Recommended: {rec['recommended']}"
          + (f" (may be the fastest too: {', '.join(map(str, rec['within_noise']))})" if rec["within_noise"] else "")
          + ".")
    return {"title": "Adaptive sweep", "json_key": "adaptive", "json": rec, "markdown": md}


def adaptive_writer(out: Path) -> Callable[[AdaptiveResult], None]:
    """The adaptive loop's ``on_update``: rewrite ``OUT/adaptive.json`` (atomically) after every re-plan."""
    def write(res: AdaptiveResult) -> None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "adaptive.json", json.dumps(res.to_json(), indent=2, default=str) + "\n")
    return write


def finish_adaptive(res: AdaptiveResult, out: Path, runs_dir, target: float, title: str) -> dict[str, Any]:
    """Write the final ``OUT/adaptive.json`` and the report over the runs the loop ran (``runs_dir``: a directory
    of run directories, or the runs as the loop read them: launched logs lack P and G, the plans give them) with
    :func:`adaptive_section`. Returns ``{"adaptive": record, "report": report JSON ({} without runs)}``."""
    adaptive_writer(out)(res)
    rec = res.to_json()
    if isinstance(runs_dir, list):
        runs = runs_dir
    else:
        try:
            runs, _ = load_all([runs_dir])
        except UserError:
            runs = []
    if not runs:
        return {"adaptive": rec, "report": {}}
    annotate_stopped(runs, rec.get("trials") or [])  # the report says which trials the loop stopped, and why
    rep = build_report(runs, out, target=target, title=title + " — adaptive", sections=[adaptive_section(rec)])
    return {"adaptive": rec, "report": rep}
