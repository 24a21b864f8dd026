"""From a sweep directory to its report: the sweep's finished trials go to ``rlbatch.report.build_report``, the same
code path as ``rlbatch analyze SWEEP_DIR`` (seed-averaged accounting and overlay with seed bands, per-seed
samples-to-target, gradient norm vs B with its slope, time per step, throughput model, the plan). The sweep adds only
a note on how its timings were measured and the manifest's trial states (``report.json`` key ``sweep``).
"""

from __future__ import annotations

from pathlib import Path

from rlbatch.errors import UserError
from rlbatch.readers import load


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
    from rlbatch.report import build_report
    from rlbatch.sweep.local import read_manifest

    out = Path(out)
    manifest = read_manifest(out) or {"trials": [], "settings": {}}
    # read as rlbatch analyze reads them (the run-store reader), so both reports say the same
    runs = [run for t in manifest["trials"] if t["state"] == "finished" for run in load(out / t["run_dir"], "rlbatch")]
    if not runs:
        raise UserError("no finished trials to report on", path=str(out))
    settings = manifest.get("settings", {})
    hw = runs[0].meta.hardware if isinstance(runs[0].meta.hardware, dict) else {}
    sections = [{"title": "How the sweep was run", "markdown": timing_note(settings, hw)}]
    extra = {"sweep": {"settings": settings, "backend": manifest.get("backend", "local"),
                       "trials": [{"run_id": t["spec"].run_id, "state": t["state"], "seconds": t.get("seconds"),
                                   "attempts": t.get("attempts")} for t in manifest["trials"]]}}
    return build_report(runs, out, target=target, reference=reference, title=title, sections=sections,
                        extra_json=extra)
