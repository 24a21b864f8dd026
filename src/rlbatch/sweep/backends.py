"""``rlbatch sweep --backend local|ray|verl|openrlhf|trl [--adaptive]``: one entry point for every way of running a
study. The trainer backends (``local``: worker processes on this machine, ``ray``: Ray tasks on a cluster) share the
trial list (:func:`rlbatch.sweep.local.plan_trials`), the manifest ``sweep.json`` and the report
(:func:`rlbatch.sweep.study.report_sweep`), so a sweep started with one resumes with the other. ``trl`` runs the
same trials here with TRL's ``GRPOTrainer`` (one process per trial, :func:`rlbatch.sweep.trl.run_trial_trl`), with
the same manifest and report. The framework backends (``verl``, ``openrlhf``; ``trl`` with ``--dry-run`` or
``--submit``) write / print / submit one training command per trial (:func:`rlbatch.sweep.launch.launch`);
``rlbatch analyze OUT/logs`` reads their logs back. ``--adaptive`` runs the one decision loop
(:func:`rlbatch.sweep.adaptive.decide`) on the backend's executor (:mod:`rlbatch.sweep.executors`): the local
trainer or TRL in chunks here, Ray tasks, or the launched verl / OpenRLHF jobs watched through their logs; every
backend writes the same ``OUT/adaptive.json``.
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
              progress: bool = True, launch_kwargs: dict[str, Any] | None = None,
              adaptive_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run (or launch) the study and return ``{"kind": "report"|"adaptive"|"launch", ...}``: for the trainer
    backends the report's JSON object (``report``), for ``--adaptive`` the adaptive record and the report, for the
    framework backends :func:`rlbatch.sweep.launch.launch`'s result (``launch``).

    Raises :class:`UserError` for an unknown backend, options that do not apply to it (``--verl-config``,
    ``--dry-run``, ``--submit`` outside verl/openrlhf/trl; ``--adaptive`` with ``--dry-run``), or a missing target.
    ``adaptive_options``: ``chunk``, ``min_eval_points``, ``n_boot`` of :func:`run_adaptive`."""
    from rlbatch.scaling import scaled_lr

    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}", field="backend")
    scaled_lr(base_batch, base_batch, base_lr, rule)
    if backend in LAUNCH_BACKENDS and not (backend == "trl" and not dry_run and not submit):
        if adaptive and dry_run:
            raise UserError("--adaptive runs the trials and watches them: not with --dry-run", field="adaptive")
        if adaptive and target is None:
            raise UserError("--adaptive needs --target (the held-out score every trial is timed to)", field="target")
        if len(group_sizes) != 1:
            raise UserError(f"--backend {backend} takes one group size (--group-sizes G), got {group_sizes}",
                            field="group_sizes")
        if adaptive:
            return {"kind": "adaptive", **run_adaptive_launched(
                backend=backend, base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule,
                group_size=group_sizes[0], samples=samples, out=out, target=target, base_config=verl_config,
                fixed_lr_control=fixed_lr_control, seeds=seeds, address=address if submit else None,
                progress=progress, launch_kwargs=launch_kwargs)}
        from rlbatch.sweep.launch import launch

        res = launch(backend=backend, base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule,
                     group_size=group_sizes[0], samples=samples, out=out, base_config=verl_config,
                     fixed_lr_control=fixed_lr_control, seeds=seeds, dry_run=dry_run, submit=submit,
                     address=address, **(launch_kwargs or {}))
        return {"kind": "launch", "launch": res}
    for flag, val in (("--base-config", verl_config), ("--dry-run", dry_run), ("--submit", submit)):
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
        return {"kind": "adaptive", **run_adaptive(specs, out, backend=backend, target=target, title=title,
                                                   samples=samples, progress=progress, address=address,
                                                   cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial,
                                                   max_retries=max_retries, **(adaptive_options or {}))}
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
          + (f" (within noise: {', '.join(map(str, rec['within_noise']))})" if rec["within_noise"] else "") + ".")
    return {"title": "Adaptive sweep", "json_key": "adaptive", "json": rec, "markdown": md}


def _finish_adaptive(res, out: Path, runs_dir, target: float, title: str) -> dict[str, Any]:
    from rlbatch.readers.collect import load_all
    from rlbatch.report import build_report
    from rlbatch.runstore import atomic_write_text

    rec = res.to_json()
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "adaptive.json", json.dumps(rec, indent=2, default=str) + "\n")
    if isinstance(runs_dir, list):  # the runs as the loop read them (logs lack P and G: the plans give them)
        runs = runs_dir
    else:
        try:
            runs, _ = load_all([runs_dir])
        except UserError:
            runs = []
    if not runs:
        return {"adaptive": rec, "report": {}}
    rep = build_report(runs, out, target=target, title=title + " — adaptive", sections=[adaptive_section(rec)])
    return {"adaptive": rec, "report": rep}


def _writer(out: Path):
    from rlbatch.runstore import atomic_write_text

    def write(res) -> None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "adaptive.json", json.dumps(res.to_json(), indent=2, default=str) + "\n")
    return write


def run_adaptive(specs: list, out: Path, *, backend: str = "local", target: float, title: str, samples: int,
                 progress: bool = True, address: str | None = None, cpus_per_trial: float = 1,
                 gpus_per_trial: float = 0, max_retries: int = 2, chunk: int | None = None,
                 min_eval_points: int = 6, n_boot: int = 200) -> dict[str, Any]:
    """``--adaptive`` on a trainer backend: every trial of ``specs`` (:func:`rlbatch.sweep.local.plan_trials`,
    the ladder's first configuration is the reference) run by the backend's executor (``local``: the embedded
    trainer, ``trl``: TRL's entry point, both in chunks here; ``ray``: Ray tasks) under
    :func:`rlbatch.sweep.adaptive.decide` with ``samples`` as each trial's budget; trials in ``OUT/trials``, the
    record in ``OUT/adaptive.json`` (rewritten after every re-plan), then the report over every trial it ran with
    the record under the key ``adaptive``. Returns ``{"adaptive": record, "report": report JSON}``."""
    from rlbatch.sweep.adaptive import TrialRef, decide
    from rlbatch.sweep.executors import ChunkExecutor, RayExecutor
    from rlbatch.sweep.local import TRIALS_DIR, _init_worker, _prepare, run_trial

    trials = [TrialRef(run_id=s.run_id, batch_size=s.batch_size, config=s.config_id, spec=s) for s in specs]
    say = print if progress else None
    started = False
    if backend == "ray":
        from rlbatch.sweep.ray import import_ray

        ray = import_ray()
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address)
                else:
                    ray.init(include_dashboard=False, log_to_driver=False)
            except ConnectionError as err:
                raise UserError(f"--address {address}: cannot connect to Ray ({err})", field="address") from None
            started = True
        ex = RayExecutor(out / TRIALS_DIR, cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial,
                         max_retries=max_retries)
    elif backend == "trl":
        from rlbatch.sweep.trl import run_trial_trl

        ex = ChunkExecutor(run_trial_trl, out / TRIALS_DIR)
    else:
        _init_worker(1)
        _prepare(specs[0].model)
        ex = ChunkExecutor(run_trial, out / TRIALS_DIR)
    try:
        res = decide(ex, trials, target=target, budget=samples, chunk=chunk, min_eval_points=min_eval_points,
                     n_boot=n_boot, backend=backend, progress=say, on_update=_writer(out))
    finally:
        if started:
            ray.shutdown()
    return _finish_adaptive(res, out, out / TRIALS_DIR, target, title)


def run_adaptive_launched(*, backend: str, base_batch: int, base_lr: float, batches: list[int], rule: str,
                          group_size: int, samples: int, out: Path, target: float,
                          base_config: Path | None = None, fixed_lr_control: int | None = None, seeds: int = 1,
                          address: str | None = None, progress: bool = True, interval: float = 30.0,
                          launch_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``--adaptive --backend verl|openrlhf``: the study's launch (:func:`rlbatch.sweep.launch.plan_trials`,
    scripts written by :func:`rlbatch.sweep.launch.write_launch`), every trial started at once as a process here
    (:class:`rlbatch.sweep.executors.ProcessJob`) or, with ``address`` (``--submit --address``), as a Ray job
    (:class:`rlbatch.sweep.executors.RayJob`); their logs (verl's file logger, OpenRLHF's TensorBoard events) are
    re-read every ``interval`` seconds and :func:`rlbatch.sweep.adaptive.decide` stops the trials that cannot win
    (SIGTERM / ``ray job stop``; each resumes from its checkpoint when its script runs again). Writes
    ``OUT/adaptive.json`` as it goes and the report over the logs at the end."""
    from rlbatch.sweep.adaptive import TrialRef, decide
    from rlbatch.sweep.executors import LogExecutor, ProcessJob, RayJob
    from rlbatch.sweep.launch import plan_trials, write_launch
    from rlbatch.sweep.local import config_id
    from rlbatch.sweep.trials import make_trials

    rows = make_trials(base_batch, base_lr, batches, rule, group_size, samples, fixed_lr_control, seeds)
    plans = plan_trials(rows, backend, out, base_config=base_config, **(launch_kwargs or {}))
    write_launch(plans, out)
    client = None
    if address:
        try:
            from ray.job_submission import JobSubmissionClient

            client = JobSubmissionClient(address)
        except ImportError:
            raise UserError("--submit needs Ray's job submission client: pip install 'rlbatch[ray]'") from None
        except Exception as err:  # connection refused, bad URL, version mismatch
            raise UserError(f"--address {address}: cannot reach the Ray dashboard ({err})", field="address") \
                from None
    trials = []
    for row, p in zip(rows, plans):
        import shlex

        job = RayJob(client, f"bash {shlex.quote(p['script'])}",
                     {"env_vars": {k: str(v) for k, v in p["env"].items()}}) if client else ProcessJob(p["script"])
        fmt = {"verl-file": "verl-jsonl"}.get(p["log_format"], p["log_format"])
        spec = {**row, "log_path": p["log_path"], "log_format": fmt, "samples": row["steps"] * row["batch_size"],
                "job": job}
        trials.append(TrialRef(run_id=row["run_id"], batch_size=row["batch_size"], config=config_id(row["run_id"]),
                               spec=spec))
    ex = LogExecutor(trials, interval=interval)
    try:
        res = decide(ex, trials, target=target, budget=max(t.spec["samples"] for t in trials), backend=backend,
                     progress=print if progress else None, on_update=_writer(out))
    finally:
        for t in trials:  # interrupted: leave nothing running behind
            if not ex.idle(t.run_id):
                ex.stop(t, "the adaptive sweep ended")
    runs = [r for r in (ex.read(t.run_id) for t in trials) if r is not None]
    return _finish_adaptive(res, out, runs, target, f"rlbatch sweep ({backend})")
