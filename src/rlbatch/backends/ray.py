"""Run the trials of a sweep as Ray tasks (``rlbatch sweep ... --backend ray [--address ...]``).

Each trial is one Ray task with a resource request (``cpus_per_trial``, ``gpus_per_trial``); Ray runs as many at once
as the cluster has room for. Every trial writes its run directory ``OUT/trials/<run_id>`` (the run store) directly,
so ``OUT`` must be on a filesystem all nodes share (NFS, Lustre, a mounted bucket). The driver alone writes the
manifest ``OUT/sweep.json`` after every change, atomically. It is the study's one manifest
(:mod:`rlbatch.study.manifest`: each trial's ``run_id``, ``spec``, state ``pending|running|finished|failed``,
``run_dir`` relative to ``OUT``, ``attempts``, last ``error``, ``seconds``; top-level ``settings``, ``backend``), so
a sweep started locally can be resumed on Ray and the other way round. A trial that fails (its worker process killed,
its node lost, an exception) is submitted again, up to ``max_retries`` times; the trial function resumes from the
trial's checkpoint, so nothing is repeated. Re-running the sweep skips finished trials and resumes the others.

We do not build a scheduler: Ray places the tasks; this module only submits, waits, retries and records.
Without ``address`` a local Ray instance is started (``ray.init(num_cpus=...)``); with ``address`` (``auto``,
``HOST:6379`` or ``ray://HOST:10001``) it joins that cluster. Ray is optional: ``pip install 'rlbatch[ray]'``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from rlbatch.backends.local import run_trial
from rlbatch.errors import UserError
from rlbatch.study.ladder import TrialSpec, trial_order
from rlbatch.study.manifest import TRIALS_DIR, read_manifest_json, write_manifest_json

STATES = ("pending", "running", "finished", "failed")

TrialFn = Callable[[Any, Path], Any]


def import_ray():
    """Import Ray or raise :class:`UserError` with the install command."""
    try:
        # lazy: Ray is an optional dependency (rlbatch[ray]) and slow to import
        import ray
    except ImportError:
        raise UserError("the Ray backend needs Ray: pip install 'rlbatch[ray]' (ray[default]>=2.9)") from None
    return ray


def start_ray(address: str | None = None, *, num_cpus: int | None = None,
              runtime_env: dict | None = None) -> Callable[[], None] | None:
    """Join the Ray cluster at ``address`` (``auto``, ``HOST:6379``, ``ray://HOST:10001``) or, without one, start a
    local instance with ``num_cpus`` CPUs, unless Ray is already initialised in this process (then it is used as
    is). Returns ``ray.shutdown`` when this call started Ray, else None. Raises :class:`UserError` when Ray is
    missing or the cluster cannot be reached."""
    ray = import_ray()
    if ray.is_initialized():
        return None
    kwargs: dict[str, Any] = {"runtime_env": runtime_env} if runtime_env else {}
    try:
        if address:  # an existing cluster (ray:// goes through Ray Client, which takes few init options)
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, **kwargs)
    except ConnectionError as err:
        raise UserError(f"--address {address}: cannot connect to Ray ({err})", field="address") from None
    return ray.shutdown


def default_trial_fn(spec: dict, run_dir: Path) -> Path:
    """Run one trial with the embedded trainer: ``rlbatch.backends.local.run_trial(TrialSpec(**spec), run_dir)``
    (resumable)."""
    return run_trial(TrialSpec(**spec), run_dir)


def execute_trial(trial_fn: TrialFn, spec: dict, run_dir: str) -> str:
    """Body of the Ray task: run the trial, return its run directory."""
    return str(trial_fn(spec, Path(run_dir)))


def _entry_id(e: dict) -> str | None:
    """Run id of a manifest entry (entries of older local manifests carry it only in their spec)."""
    return e.get("run_id") or (e.get("spec") or {}).get("run_id")


def _describe(err: BaseException) -> str:
    name = type(err).__name__
    text = str(err).strip().splitlines()
    return f"{name}: {text[-1] if text else ''}"[:500]


def run_sweep_ray(trials: list[dict], out_dir: Path | str, *, trial_fn: TrialFn | None = None,
                  address: str | None = None, cpus_per_trial: float = 1, gpus_per_trial: float = 0,
                  max_retries: int = 2, num_cpus: int | None = None, runtime_env: dict | None = None,
                  log: Callable[[str], None] | None = print) -> dict:
    """Run ``trials`` (dicts with at least ``run_id``; e.g. :func:`rlbatch.study.ladder.make_trials` rows plus
    trainer options) as Ray tasks and return the final manifest.

    - ``trial_fn(spec, run_dir)`` runs one trial and must be resumable (default :func:`default_trial_fn`, the
      embedded trainer); it runs on a Ray worker, so it must be importable there (a module-level function).
    - ``cpus_per_trial`` / ``gpus_per_trial``: the resource request of each task (``--cpus-per-trial``,
      ``--gpus-per-trial``); Ray runs trials in parallel up to the cluster's capacity.
    - ``max_retries``: a failed trial is submitted again at most this many times (``--max-retries``).
    - ``address``: join this cluster; ``None`` starts a local instance with ``num_cpus`` CPUs. If Ray is already
      initialised in this process it is used as is (and not shut down).

    Writes ``OUT/sweep.json`` after every state change. Returns the manifest dict; trials that still failed after
    their retries have state ``failed`` and their last ``error``. Raises :class:`UserError` when Ray is missing,
    run ids repeat, or a resource request is negative.
    """
    ray = import_ray()
    if cpus_per_trial < 0 or gpus_per_trial < 0 or max_retries < 0:
        raise UserError("--cpus-per-trial, --gpus-per-trial and --max-retries must be >= 0")
    ids = [t["run_id"] for t in trials]
    if len(set(ids)) != len(ids):
        raise UserError("two trials share a run id; give each (batch, rule, seed) once", field="run_id")
    out = Path(out_dir).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    trial_fn = trial_fn or default_trial_fn

    old_manifest = read_manifest_json(out) or {"trials": []}
    previous = {_entry_id(e): e for e in old_manifest.get("trials", []) if isinstance(e, dict)}
    entries: dict[str, dict] = {}
    for t in trials:
        old = previous.get(t["run_id"], {})
        state = old.get("state", "pending")
        rel = old.get("run_dir") or f"{TRIALS_DIR}/{t['run_id']}"
        if state == "finished" and not (out / rel).is_dir():
            state = "pending"  # the run directory went missing: run it again
        entries[t["run_id"]] = {"run_id": t["run_id"], "spec": t, "state": "finished" if state == "finished"
                                else "pending", "run_dir": rel, "attempts": int(old.get("attempts") or 0),
                                "error": old.get("error") if state == "finished" else None,
                                "seconds": old.get("seconds")}
    # keep the manifest's other keys (settings, created, ...) and trials of it not in this call
    for rid, e in previous.items():
        if rid is not None and rid not in entries:
            entries[rid] = e
    extra = {k: v for k, v in old_manifest.items() if k != "trials"}
    extra.setdefault("version", 1)
    extra.setdefault("created", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    extra.update(backend="ray", ray={"address": address, "cpus_per_trial": cpus_per_trial,
                                     "gpus_per_trial": gpus_per_trial, "max_retries": max_retries})
    extra["order"] = [t["run_id"] for t in trial_order(trials)]  # seed-major rounds, each shuffled (fixed seed)
    write_manifest_json(out, {**extra, "trials": list(entries.values())})

    stop_ray = start_ray(address, num_cpus=num_cpus, runtime_env=runtime_env)
    say = log or (lambda _m: None)
    remote = ray.remote(execute_trial).options(num_cpus=cpus_per_trial, num_gpus=gpus_per_trial, max_retries=0,
                                          retry_exceptions=False)
    todo = [rid for rid in extra["order"] if entries[rid]["state"] != "finished"]
    started: dict[str, float] = {}
    budget = {rid: max_retries + 1 for rid in todo}  # attempts allowed in this invocation
    inflight: dict[Any, str] = {}

    def submit(rid: str) -> None:
        e = entries[rid]
        e["state"], e["attempts"] = "running", e["attempts"] + 1
        budget[rid] -= 1
        started[rid] = time.monotonic()
        inflight[remote.remote(trial_fn, e["spec"], str(out / e["run_dir"]))] = rid
        write_manifest_json(out, {**extra, "trials": list(entries.values())})

    t0 = time.monotonic()
    try:
        for rid in todo:
            submit(rid)
        while inflight:
            done, _ = ray.wait(list(inflight), num_returns=1)
            for ref in done:
                rid = inflight.pop(ref)
                e = entries[rid]
                e["seconds"] = round(time.monotonic() - started[rid], 2)
                try:
                    ray.get(ref)
                except Exception as err:  # worker crash, node loss, or the trial raised
                    e["error"] = _describe(err)
                    if budget[rid] > 0:
                        say(f"rlbatch: trial {rid} failed (attempt {e['attempts']}: {e['error']}); retrying")
                        submit(rid)
                    else:
                        e["state"] = "failed"
                        say(f"rlbatch: trial {rid} failed after {e['attempts']} attempt(s): {e['error']}")
                        write_manifest_json(out, {**extra, "trials": list(entries.values())})
                    continue
                e["state"], e["error"] = "finished", None
                say(f"rlbatch: trial {rid} finished ({e['attempts']} attempt(s))")
                write_manifest_json(out, {**extra, "trials": list(entries.values())})
    except KeyboardInterrupt:
        for ref in inflight:
            ray.cancel(ref, force=True)
        for rid in inflight.values():
            entries[rid]["state"] = "pending"
        write_manifest_json(out, {**extra, "trials": list(entries.values())})
        raise
    finally:
        if stop_ray is not None:
            stop_ray()
    manifest = {**extra, "trials": list(entries.values()), "wall_s": time.monotonic() - t0}
    return manifest
