"""``rlbatch sweep --backend local|ray|verl|openrlhf|trl [--adaptive]``: one entry point for every way of running a
study. The trainer backends (``local``: worker processes on this machine, ``ray``: Ray tasks on a cluster) share the
trial list (:func:`rlbatch.sweep.local.plan_trials`), the manifest ``sweep.json`` and the report
(:func:`rlbatch.sweep.study.report_sweep`), so a sweep started with one resumes with the other. ``trl`` runs the
same trials here with TRL's ``GRPOTrainer`` (one process per trial, :func:`rlbatch.sweep.trl.run_trial_trl`), with
the same manifest and report. The framework backends (``verl``, ``openrlhf``; ``trl`` with ``--dry-run`` or
``--submit``) write / print / submit one training command per trial (:func:`rlbatch.sweep.launch.launch`);
``rlbatch analyze OUT/logs`` reads their logs back. ``adaptive`` runs
:func:`rlbatch.sweep.adaptive.adaptive_sweep` with the local trainer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError

TRAINER_BACKENDS = ("local", "ray")
LAUNCH_BACKENDS = ("verl", "openrlhf", "trl")
BACKENDS = TRAINER_BACKENDS + LAUNCH_BACKENDS


def run_study(*, backend: str, base_batch: int, base_lr: float, batches: list[int], rule: str,
              group_sizes: list[int], seeds: int, samples: int, out: Path, target: float | None,
              fixed_lr_control: int | None = None, model: str = "tiny", task: str = "arithmetic",
              options: dict[str, Any] | None = None, workers: int = 1, adaptive: bool = False,
              address: str | None = None, cpus_per_trial: float = 1, gpus_per_trial: float = 0,
              max_retries: int = 2, verl_config: Path | None = None, dry_run: bool = False, submit: bool = False,
              progress: bool = True, launch_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run (or launch) the study and return ``{"kind": "report"|"adaptive"|"launch", ...}``: for the trainer
    backends the report's JSON object (``report``), for ``--adaptive`` the adaptive record and the report, for the
    framework backends :func:`rlbatch.sweep.launch.launch`'s result (``launch``).

    Raises :class:`UserError` for an unknown backend, options that do not apply to it (``--verl-config``,
    ``--dry-run``, ``--submit`` outside verl/openrlhf/trl; ``--adaptive`` outside local), or a missing target."""
    from rlbatch.scaling import scaled_lr

    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}", field="backend")
    scaled_lr(base_batch, base_batch, base_lr, rule)
    if backend in LAUNCH_BACKENDS and not (backend == "trl" and not dry_run and not submit):
        if adaptive:
            raise UserError("--adaptive runs the embedded trainer: use it with --backend local", field="adaptive")
        if len(group_sizes) != 1:
            raise UserError(f"--backend {backend} takes one group size (--group-sizes G), got {group_sizes}",
                            field="group_sizes")
        from rlbatch.sweep.launch import launch

        res = launch(backend=backend, base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule,
                     group_size=group_sizes[0], samples=samples, out=out, base_config=verl_config,
                     fixed_lr_control=fixed_lr_control, seeds=seeds, dry_run=dry_run, submit=submit,
                     address=address, **(launch_kwargs or {}))
        return {"kind": "launch", "launch": res}
    for flag, val in (("--verl-config", verl_config), ("--dry-run", dry_run), ("--submit", submit)):
        if val and backend != "trl":
            raise UserError(f"{flag} applies to --backend verl, openrlhf or trl, not {backend}", field="backend")
    if target is None:
        raise UserError("--target is required to run a sweep (the held-out score every trial is timed to)",
                        field="target")
    from rlbatch.sweep.local import plan_trials, run_sweep
    from rlbatch.sweep.study import report_sweep

    specs = plan_trials(base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule, group_sizes=group_sizes,
                        seeds=seeds, fixed_lr_control=fixed_lr_control, samples=samples, model=model, task=task,
                        options=options)
    title = f"rlbatch sweep ({model}, {task})"
    if backend == "trl" and verl_config:
        raise UserError("--base-config applies to the TRL launch (--dry-run / --submit, or rlbatch launch); a TRL "
                        "sweep run here takes the trainer options", field="backend")
    if adaptive:
        if backend != "local":
            raise UserError("--adaptive runs trials one after the other: use it with --backend local",
                            field="adaptive")
        return {"kind": "adaptive", **run_adaptive(specs[0], out, target=target, title=title, progress=progress)}
    settings = dict(base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule,
                    fixed_lr_control=fixed_lr_control, group_sizes=group_sizes, seeds=seeds, samples=samples,
                    target=target, model=model, task=task, options=options or {}, workers=workers)
    if backend == "ray":
        from rlbatch.sweep.local import read_manifest, write_manifest
        from rlbatch.sweep.ray import run_sweep_ray

        old = read_manifest(out) if (out / "sweep.json").exists() else None
        if old is not None:  # keep the manifest's settings with the ray run
            old["settings"] = settings
            write_manifest(out, old)
        else:
            out.mkdir(parents=True, exist_ok=True)
            write_manifest(out, {"version": 1, "settings": settings, "trials": []})
        say = print if progress else None
        run_sweep_ray([s.model_dump(mode="json") for s in specs], out, address=address,
                      cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial, max_retries=max_retries,
                      log=say)
    else:
        run_sweep(specs, out, workers=workers, threads=1, settings=settings, progress=progress,
                  runner="trl" if backend == "trl" else "local")
    return {"kind": "report", "report": report_sweep(out, target=target, title=title)}


def run_adaptive(base_spec, out: Path, *, target: float, title: str, progress: bool = True) -> dict[str, Any]:
    """``--adaptive``: :func:`rlbatch.sweep.adaptive.adaptive_sweep` with the local trainer, trials in ``OUT/trials``,
    its record in ``OUT/adaptive.json``, then the report over every trial it ran (``rlbatch.report.build_report``,
    with the record under the key ``adaptive``). Returns ``{"adaptive": record, "report": report JSON}``."""
    from rlbatch.analyze import load_all
    from rlbatch.report import build_report
    from rlbatch.runstore import atomic_write_text
    from rlbatch.sweep.adaptive import adaptive_sweep
    from rlbatch.sweep.local import TRIALS_DIR, _init_worker, _prepare, run_trial

    _init_worker(1)
    _prepare(base_spec.model)
    rec = adaptive_sweep(run_trial, base_spec, out / TRIALS_DIR, target=target,
                         progress=print if progress else None)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "adaptive.json", json.dumps(rec, indent=2, default=str) + "\n")
    runs, _ = load_all([out / TRIALS_DIR])
    section = {"title": "Adaptive sweep", "json_key": "adaptive", "json": rec,
               "markdown": (f"Doubling from B={runs[0].meta.batch_size if runs else '?'}: "
                            + "; ".join(f"B={t['batch_size']}: {t['decided_by']} after {t['samples']:.0f} samples"
                                        for t in rec["trials"])
                            + f". Stopped because {rec['stopped_because']}. Samples spent over all trials: "
                              f"{rec['samples_spent']:.0f}. Recommended: {rec['recommended']}.")}
    rep = build_report(runs, out, target=target, title=title + " — adaptive", sections=[section])
    return {"adaptive": rec, "report": rep}
