"""``rlbatch sweep --backend local|ray|trl|verl|openrlhf [--adaptive]``: one ladder (:func:`rlbatch.study.ladder.
build_ladder`), run by one backend, then one report.

The trainer backends (``local``: worker processes here, :mod:`rlbatch.backends.local`; ``trl``: the same with TRL's
``GRPOTrainer``, :mod:`rlbatch.backends.local_trl`; ``ray``: Ray tasks, :mod:`rlbatch.backends.ray`) share the
manifest ``sweep.json`` (:mod:`rlbatch.study.manifest`) and the report (:func:`rlbatch.study.report.report_sweep`),
so a sweep started with one resumes with another. The launch backends (``verl``, ``openrlhf``; ``trl`` with
``--dry-run`` or ``--submit``) write / print / submit one training command per trial
(:func:`rlbatch.backends.launch.launch`); ``rlbatch analyze OUT/logs`` reads their logs back. ``--adaptive`` runs the
one decision loop (:func:`rlbatch.study.adaptive.decide`) on the backend's executor (:mod:`rlbatch.backends.executors`):
the local trainer or TRL in chunks here, Ray tasks, or the launched jobs watched through their logs; every backend
writes the same ``OUT/adaptive.json``.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Callable

from rlbatch.backends import local
from rlbatch.backends.executors import ChunkExecutor, LogExecutor, ProcessJob, RayExecutor, RayJob
from rlbatch.backends.launch import launch, ray_job_client
from rlbatch.backends.local_trl import run_trial_trl
from rlbatch.backends.ray import run_sweep_ray, start_ray
from rlbatch.errors import UserError
from rlbatch.study.adaptive import AdaptiveResult, TrialRef, decide
from rlbatch.study.ladder import TrialSpec, build_ladder
from rlbatch.study.manifest import TRIALS_DIR, check_same_study, ladder_settings, read_manifest, write_manifest
from rlbatch.study.report import adaptive_writer, finish_adaptive, report_sweep
from rlbatch.train.config import check_device

BACKENDS = ("local", "ray", "verl", "openrlhf", "trl")


def launched(backend: str, dry_run: bool = False, submit: bool = False) -> bool:
    """Whether the study is launched on a framework (verl, openrlhf; trl with ``--dry-run`` / ``--submit``) rather
    than trained by rlbatch's runners: it decides the budget kind (generated vs retained responses)."""
    return backend in ("verl", "openrlhf") or (backend == "trl" and (dry_run or submit))


def run_study(ladder: list[TrialSpec], *, backend: str, out: Path, target: float | None, workers: int = 1,
              adaptive: bool = False, address: str | None = None, cpus_per_trial: float = 1,
              gpus_per_trial: float = 0, max_retries: int = 2, base_config: Path | None = None,
              dry_run: bool = False, submit: bool = False, progress: bool = True,
              launch_kwargs: dict[str, Any] | None = None,
              adaptive_options: dict[str, Any] | None = None, force: bool = False,
              sequential: bool = False) -> dict[str, Any]:
    """Run (or launch) the trials of ``ladder`` on ``backend`` and return ``{"kind": "report"|"adaptive"|"launch",
    ...}``: for the trainer backends the report's JSON object (``report``), for ``--adaptive`` the adaptive record
    and the report, for the launch backends :func:`rlbatch.backends.launch.launch`'s result (``launch``).

    Raises :class:`UserError` for an unknown backend, a ladder whose budget kind the backend cannot run, options
    that do not apply to it (``--base-config``, ``--dry-run``, ``--submit`` outside verl/openrlhf/trl; ``--adaptive``
    with ``--dry-run``), or a missing target. ``adaptive_options``: ``chunk``, ``min_eval_points``, ``n_boot``,
    ``max_active``, ``confirm`` of :func:`run_adaptive` (``max_active`` also for the launched backends).
    A trainer backend refuses ``out`` when it holds a study of other settings
    (:func:`rlbatch.study.manifest.check_same_study`; ``force``: start over, the old study moved aside).
    ``sequential`` (local, trl, ray): the sequential study (:func:`rlbatch.study.sequential.run_spec_study`) over
    the ladder, which must hold the design's largest seed count per configuration; the report then decides as its
    last look did (``OUT/sequential.json``), and the result carries the record under ``sequential``."""
    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}", field="backend")
    if sequential and adaptive:
        raise UserError("--sequential and --adaptive are two designs; choose one (--sequential: seeds where the "
                        "decision needs them, its error controlled over its looks)", field="sequential")
    if sequential and launched(backend, dry_run, submit):
        raise UserError(f"--sequential runs its trials with rlbatch's runners (--backend local, trl or ray), not "
                        f"launched on {backend}: use --adaptive there, or run the seeds and rlbatch analyze their "
                        "logs", field="sequential")
    for k in adaptive_options or {}:
        if not adaptive:
            flag = {"chunk": "--chunk-samples"}.get(k, "--" + k.replace("_", "-"))
            raise UserError(f"{flag} applies to --adaptive", field=k)
    want = "generated" if launched(backend, dry_run, submit) else "retained"
    if ladder[0].budget != want:
        raise UserError(f"--backend {backend} runs a budget of {want} responses, the ladder counts "
                        f"{ladder[0].budget} ones", field="samples")
    if want == "generated":
        if adaptive and dry_run:
            raise UserError("--adaptive runs the trials and watches them: not with --dry-run", field="adaptive")
        if adaptive and target is None:
            raise UserError("--adaptive needs --target (the held-out score every trial is timed to)", field="target")
        res = launch(ladder, backend=backend, out=out, base_config=base_config, dry_run=dry_run,
                     submit=submit and not adaptive, address=address, **(launch_kwargs or {}))
        if not adaptive:
            return {"kind": "launch", "launch": res}
        return {"kind": "adaptive", **watch_launched(ladder, res["plans"], backend=backend, out=out, target=target,
                                                     address=address if submit else None, progress=progress,
                                                     max_active=(adaptive_options or {}).get("max_active"),
                                                     confirm=bool((adaptive_options or {}).get("confirm")))}
    for flag, val in (("--base-config", base_config), ("--dry-run", dry_run), ("--submit", submit)):
        if val and backend != "trl":
            raise UserError(f"{flag} applies to --backend verl, openrlhf or trl, not {backend}", field="backend")
    if target is None:
        raise UserError("--target is required to run a sweep (the held-out score every trial is timed to)",
                        field="target")
    if backend == "trl" and base_config:
        raise UserError("--base-config applies to the TRL launch (--dry-run / --submit, or rlbatch launch); a TRL "
                        "sweep run here takes the trainer options", field="backend")
    cfg = ladder[0].train_config()  # validate the trainer options once, before anything runs
    if backend in ("local", "trl") and not launched(backend, dry_run, submit):  # trials run on this machine
        check_device(cfg.device)
    title = f"rlbatch sweep ({ladder[0].model}, {ladder[0].task})"
    settings = {**ladder_settings(ladder), "target": target, "workers": workers}
    if sequential:
        settings["sequential"] = True
    check_same_study(out, ladder, settings, force)
    if sequential:
        return {"kind": "report", **run_sequential_sweep(ladder, out, backend=backend, target=target, title=title,
                                                         settings=settings, workers=workers, progress=progress,
                                                         address=address, cpus_per_trial=cpus_per_trial,
                                                         gpus_per_trial=gpus_per_trial, max_retries=max_retries)}
    if adaptive:
        if read_manifest(out) is None:  # record what the study is, so that a re-run of other settings is told apart
            out.mkdir(parents=True, exist_ok=True)
            write_manifest(out, {"version": 1, "settings": {**settings, "adaptive": True}, "backend": backend,
                                 "trials": [{"run_id": s.run_id, "spec": s, "state": "adaptive",
                                             "run_dir": f"{TRIALS_DIR}/{s.run_id}", "attempts": 0, "error": None,
                                             "seconds": None} for s in ladder]})
        return {"kind": "adaptive", **run_adaptive(ladder, out, backend=backend, target=target, title=title,
                                                   progress=progress, address=address,
                                                   cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial,
                                                   max_retries=max_retries, **(adaptive_options or {}))}
    if backend == "ray":
        _ray_sweep(ladder, out, settings, address=address, cpus_per_trial=cpus_per_trial,
                   gpus_per_trial=gpus_per_trial, max_retries=max_retries, progress=progress)
    else:
        local.run_sweep(ladder, out, workers=workers, threads=1, settings=settings, progress=progress,
                        runner=backend)
    return {"kind": "report", "report": report_sweep(out, target=target, title=title)}


def _ray_sweep(specs: list[TrialSpec], out: Path, settings: dict[str, Any], *, address: str | None,
               cpus_per_trial: float, gpus_per_trial: float, max_retries: int, progress: bool) -> None:
    """``specs`` as Ray tasks (:func:`rlbatch.backends.ray.run_sweep_ray`: finished trials skipped), the manifest's
    settings kept first (a re-run of other settings is told apart)."""
    old = read_manifest(out)
    out.mkdir(parents=True, exist_ok=True)
    write_manifest(out, {**(old or {"version": 1, "trials": []}), "settings": settings})
    run_sweep_ray([s.model_dump(mode="json") for s in specs], out, address=address, cpus_per_trial=cpus_per_trial,
                  gpus_per_trial=gpus_per_trial, max_retries=max_retries, log=print if progress else None)


def run_sequential_sweep(ladder: list[TrialSpec], out: Path, *, backend: str, target: float, title: str,
                         settings: dict[str, Any], workers: int = 1, progress: bool = True,
                         address: str | None = None, cpus_per_trial: float = 1, gpus_per_trial: float = 0,
                         max_retries: int = 2) -> dict[str, Any]:
    """``rlbatch sweep --sequential``: :func:`rlbatch.study.sequential.run_spec_study` over ``ladder`` (seed-major),
    each look's trials run by the backend (``local`` / ``trl``: :func:`rlbatch.backends.local.run_sweep`, ``ray``:
    :func:`rlbatch.backends.ray.run_sweep_ray` on one Ray instance for the whole study); finished trials are skipped,
    so a killed study resumes where it was. Returns ``{"sequential": record, "report": report JSON}``."""
    from rlbatch.study.sequential import run_spec_study

    specs = sorted(ladder, key=lambda s: s.seed)  # seed-major (stable)
    stop_ray = None
    if backend == "ray":
        stop_ray = start_ray(address)

        def run_specs(todo):
            _ray_sweep(todo, out, settings, address=address, cpus_per_trial=cpus_per_trial,
                       gpus_per_trial=gpus_per_trial, max_retries=max_retries, progress=progress)
    else:
        def run_specs(todo):
            local.run_sweep(todo, out, workers=workers, threads=1, settings=settings, progress=progress,
                            runner=backend)
    try:
        rec = run_spec_study(out, specs, run_specs, target, progress=progress)
    finally:
        if stop_ray is not None:
            stop_ray()
    return {"sequential": rec, "report": report_sweep(out, target=target, title=title)}


def run_adaptive(ladder: list[TrialSpec], out: Path, *, backend: str = "local", target: float, title: str,
                 progress: bool = True, address: str | None = None, cpus_per_trial: float = 1,
                 gpus_per_trial: float = 0, max_retries: int = 2, chunk: int | None = None,
                 min_eval_points: int = 6, n_boot: int = 200, max_active: int | None = None,
                 confirm: bool = False) -> dict[str, Any]:
    """``--adaptive`` on a trainer backend: every trial of ``ladder`` (the ladder's first configuration is the
    reference) run by the backend's executor (``local``: the embedded trainer, ``trl``: TRL's entry point, both in
    chunks here; ``ray``: Ray tasks) under :func:`rlbatch.study.adaptive.decide` with each trial's ``samples`` as
    its budget (``max_active``: configurations running at once, default all); trials in ``OUT/trials``, the record in ``OUT/adaptive.json`` (rewritten after every re-plan), then
    the report over every trial it ran with the record under the key ``adaptive``. Returns ``{"adaptive": record,
    "report": report JSON}``."""
    trials = [TrialRef(run_id=s.run_id, batch_size=s.batch_size, config=s.config_id, spec=s) for s in ladder]
    stop_ray = None
    if backend == "ray":
        stop_ray = start_ray(address)
        ex = RayExecutor(out / TRIALS_DIR, cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial,
                         max_retries=max_retries)
    elif backend == "trl":
        ex = ChunkExecutor(run_trial_trl, out / TRIALS_DIR)
    else:
        local.prepare_here(ladder[0].model)
        ex = ChunkExecutor(local.run_trial, out / TRIALS_DIR)
    try:
        res = decide(ex, trials, target=target, budget=ladder[0].samples, chunk=chunk, max_active=max_active,
                     min_eval_points=min_eval_points, n_boot=n_boot, backend=backend, confirm=confirm,
                     progress=print if progress else None, on_update=adaptive_writer(out))
    finally:
        if stop_ray is not None:
            stop_ray()
    return finish_adaptive(res, out, out / TRIALS_DIR, target, title)


def watch_launched(ladder: list[TrialSpec], plans: list[dict], *, backend: str, out: Path, target: float,
                   address: str | None = None, progress: bool = True, interval: float = 30.0,
                   max_active: int | None = None, confirm: bool = False) -> dict[str, Any]:
    """``--adaptive --backend verl|openrlhf``: the launched study's trials (``plans``, their scripts already written
    by :func:`rlbatch.backends.launch.launch`) started at once as processes here
    (:class:`rlbatch.backends.executors.ProcessJob`) or, with ``address`` (``--submit --address``), as Ray jobs
    (:class:`rlbatch.backends.executors.RayJob`); their logs (verl's file logger, OpenRLHF's TensorBoard events) are
    re-read every ``interval`` seconds and :func:`rlbatch.study.adaptive.decide` stops the trials that cannot win
    (SIGTERM / ``ray job stop``; each resumes from its checkpoint when its script runs again). Writes
    ``OUT/adaptive.json`` as it goes and the report over the logs at the end."""
    client = ray_job_client(address) if address else None
    trials = []
    for t, p in zip(ladder, plans):
        job = RayJob(client, f"bash {shlex.quote(p['script'])}",
                     {"env_vars": {k: str(v) for k, v in p["env"].items()}}) if client else ProcessJob(p["script"])
        fmt = {"verl-file": "verl-jsonl"}.get(p["log_format"], p["log_format"])
        spec = {**t.row(), "log_path": p["log_path"], "log_format": fmt, "samples": t.steps * t.batch_size,
                "job": job}
        trials.append(TrialRef(run_id=t.run_id, batch_size=t.batch_size, config=t.config_id, spec=spec))
    ex = LogExecutor(trials, interval=interval)
    try:
        res = decide(ex, trials, target=target, budget=max(t.spec["samples"] for t in trials), backend=backend,
                     max_active=max_active, confirm=confirm, progress=print if progress else None,
                     on_update=adaptive_writer(out))
    finally:
        for t in trials:  # interrupted: leave nothing running behind
            if not ex.idle(t.run_id):
                ex.stop(t, "the adaptive sweep ended")
    runs = [r for r in (ex.read(t.run_id) for t in trials) if r is not None]
    return finish_adaptive(res, out, runs, target, f"rlbatch sweep ({backend})")


# --------------------------------------------------------------------------------------------------- doubling
def doubling_ladder(base_spec: Any, max_doublings: int) -> list[TrialSpec]:
    """The doubling ladder B_k = B_0 x 2^k (k = 0..max_doublings) from a base spec (dict or
    :class:`~rlbatch.study.ladder.TrialSpec` with ``prompts_per_step``, ``group_size``, ``lr``, ``samples`` and
    optionally ``lr_rule`` (default ``sqrt``), ``seed``, ``model``, ``task``, ``options``), built by
    :func:`rlbatch.study.ladder.build_ladder` (B0 = P x G, lr0 = the base's ``lr``; run ids of the one scheme).
    Raises :class:`UserError` when a field is missing."""
    base = base_spec.model_dump() if hasattr(base_spec, "model_dump") else dict(base_spec)
    for k in ("prompts_per_step", "group_size", "lr", "samples"):
        if base.get(k) is None:
            raise UserError(f"base trial spec lacks {k!r}", field=k)
    if max_doublings < 0:
        raise UserError(f"max_doublings must be >= 0, got {max_doublings}", field="max_doublings")
    b0, g = int(base["prompts_per_step"]) * int(base["group_size"]), int(base["group_size"])
    extra = {k: base[k] for k in ("model", "task", "options") if base.get(k) is not None}
    return build_ladder(base_batch=b0, base_lr=float(base["lr"]),
                        batches=[b0 * 2 ** k for k in range(max_doublings + 1)], rule=base.get("lr_rule") or "sqrt",
                        group_sizes=[g], seed_offset=int(base.get("seed") or 0), samples=int(base["samples"]),
                        **extra)


def adaptive_sweep(run_trial_fn: Callable[[Any, Path], Any], base_spec: Any, sweep_dir: Path | str, *,
                   target: float, metric: str = "eval/score", max_doublings: int = 6, chunk_fraction: float = 0.125,
                   min_eval_points: int = 6, tol: float = 0.1, n_boot: int = 200, max_active: int | None = 1,
                   skip_after: int | None = None, progress: Callable[[str], None] | None = None,
                   backend: str = "local") -> AdaptiveResult:
    """The doubling sweep from one base spec (:func:`doubling_ladder`) with a resumable trial function
    ``run_trial_fn(spec, run_dir)`` (the local trainer :func:`rlbatch.backends.local.run_trial`, TRL's
    :func:`rlbatch.backends.local_trl.run_trial_trl`, or :func:`rlbatch.backends.synthetic.synthetic_trial`) run in
    chunks of ``chunk_fraction x samples`` by a :class:`rlbatch.backends.executors.ChunkExecutor`, decided by
    :func:`decide` with the base spec's ``samples`` as every trial's budget. ``max_active`` 1 (default): one
    configuration after the other, from the base up (the doubling order); ``skip_after`` 1 stops raising B at the
    first loss, the paper's doubling (:func:`decide`'s step 4; default: never skip)."""
    if not (0 < chunk_fraction <= 1):
        raise UserError(f"chunk_fraction must be in (0, 1], got {chunk_fraction}", field="chunk_fraction")
    ladder = doubling_ladder(base_spec, max_doublings)
    trials = [TrialRef(run_id=t.run_id, batch_size=t.batch_size, config=t.config_id, spec=t) for t in ladder]
    budget = ladder[0].samples
    ex = ChunkExecutor(run_trial_fn, Path(sweep_dir))
    return decide(ex, trials, target=target, metric=metric, budget=budget, chunk=int(chunk_fraction * budget),
                  max_active=max_active, skip_after=skip_after, min_eval_points=min_eval_points, tol=tol,
                  n_boot=n_boot, progress=progress, backend=backend)
