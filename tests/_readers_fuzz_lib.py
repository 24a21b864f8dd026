"""Seeds, mutations and the oracle for fuzzing the log readers (used by tests/test_readers_fuzz.py and
benchmarks/fuzz_readers.py).

A *case* is ``(kind, files)``: ``kind`` names the seed's format (``verl``, ``verl-jsonl``, ``jsonl``, ``csv``,
``wandb-csv``, ``trl``, ``trl-console``, ``prime-rl``, ``nemo-rl``, ``slime``, ``wandb-summary``, ``tensorboard``,
``rlbatch``, or ``dir``: a directory of logs) and ``files`` maps relative
paths to bytes. A mutation is a list
of *ops* (plain tuples, so hypothesis can shrink them and a plain ``random.Random`` can draw them):

- ``("truncate", frac)``: cut the file at ``frac`` of its length (mid-line, mid-record);
- ``("flip", frac, byte)``: overwrite one byte;
- ``("insert", frac, token)``: insert a token (huge numbers, ANSI codes, Ray prefixes, NULs, BOMs, CRs, lone
  surrogates...);
- ``("number", k, token)``: replace the k-th number of the file by a token (``1e400``, ``-0``, ``nan``...);
- ``("encode", name)``: re-encode the text (latin-1, UTF-16 with/without BOM, UTF-8 with BOM, invalid UTF-8);
- ``("interleave", seed)``: interleave Ray actors' output (``(main_task pid=..)``/``(TaskRunner pid=..)`` prefixes,
  colour codes, another actor's text spliced into the middle of a line);
- ``("longline", frac, n)``: insert a line of ``n`` characters;
- ``("junk", n, seed)``: replace the whole file by ``n`` random bytes; ``("empty",)``: by nothing.

:func:`check` is the oracle: reading must give runs with canonical columns, or one ``UserError`` naming the file.
"""

from __future__ import annotations

import json
import random
import re
import struct
import warnings
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
#: real logs beside the repository (third-party; never copied into it): used as seeds where present
VERL_LOG_DIR = REPO.parent / "shared" / "logs" / "verl"
REAL_LOG_DIR = REPO.parent / "shared" / "logs" / "real"
#: the real files of ../shared/logs/real and the format each is read as (issue 14)
REAL_FILES = {"trl_grpo_console_dicts_issue_trl3452.log": "trl-console",
              "verl_file_logger_ppo_gsm8k_agentloop.jsonl": "verl-jsonl",
              "primerl_orchestrator_excerpt_pr1318.txt": "prime-rl"}

TOKENS = [b"1e308", b"1e400", b"-1e400", b"99999999999999999999999", b"-0", b"-0.0", b"inf", b"-inf", b"nan", b"NaN",
          b"Infinity", b"1e-400", b"0x1p3", b"1_000", b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"\xfe\xff", b"\r",
          b"\r\n", b"\n", b"\x1b[36m", b"\x1b[0m", b"\x1b[", b"(TaskRunner pid=4242) ", b"(main_task pid=123) ",
          b"step:", b"step:7 - ", b" - ", b":", b"{", b"}", b"\"", b",", b"\xed\xa0\x80", b"\xc3", b"\x80\x80",
          b"np.float64(", b")", b"(1e-4)", b"'", b"\t", "\u2028".encode(), b"\x85"]
ENCODINGS = ["latin-1", "utf-16", "utf-16-le", "utf-16-be", "utf-8-sig", "invalid-utf8", "cp1252"]
ACTORS = ["(main_task pid=123)", "(TaskRunner pid=678203)", "(WorkerDict pid=99, ip=10.0.0.2)", "(raylet)"]


# ------------------------------------------------------------------------------------------------------ seeds
def verl_log_dir() -> Path:
    return VERL_LOG_DIR


def _verl_excerpt(text: str, n_steps: int = 4) -> str:
    """The launch/config header, the first few step lines and any validation-metrics lines of a real log (the
    whole file would make each fuzz example slow)."""
    lines = text.splitlines(keepends=True)
    first = next((i for i, ln in enumerate(lines) if "step:" in ln and " - " in ln), len(lines))
    head = lines[: min(first, 120)]
    steps = [ln for ln in lines[first:] if "step:" in ln][:n_steps]
    tail = [ln for ln in lines if "validation metrics" in ln][-2:]
    return "".join(head + steps + tail)


def real_verl_seeds() -> list[tuple[str, dict[str, bytes]]]:
    """Excerpts of the real verl logs in ../shared/logs/verl; [] where that folder is absent."""
    d = verl_log_dir()
    if not d.is_dir():
        return []
    return [("verl", {p.name: _verl_excerpt(p.read_text(encoding="utf-8", errors="replace")).encode()})
            for p in sorted(d.glob("*.log"))]


def real_other_seeds() -> list[tuple[str, dict[str, bytes]]]:
    """The real non-verl-console files of ../shared/logs/real (TRL console dicts, verl file logger, prime-rl), and
    the Tinker-style JSONL with its config beside it (a directory case); [] where that folder is absent."""
    d = REAL_LOG_DIR
    out = [(kind, {name: (d / name).read_bytes()}) for name, kind in REAL_FILES.items() if (d / name).is_file()]
    tinker = ("tinker_grpo_qwen3_4b_metrics.jsonl", "tinker_grpo_qwen3_4b_config.json")
    if all((d / n).is_file() for n in tinker):
        out.append(("dir", {f"tinker/{n}": (d / n).read_bytes() for n in tinker}))
    return out


def _tb_event(step: int, tag: str, value: float, wall: float) -> bytes:
    from tensorboard.compat.proto import event_pb2, summary_pb2

    ev = event_pb2.Event(wall_time=wall, step=step,
                         summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]))
    return ev.SerializeToString()


def _tfrecord(data: bytes) -> bytes:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def tensorboard_bytes(steps: int = 4) -> bytes:
    from tensorboard.compat.proto import event_pb2

    out = [_tfrecord(event_pb2.Event(wall_time=1000.0, file_version="brain.Event:2").SerializeToString())]
    for s in range(1, steps + 1):
        for tag, v in (("train/reward", 0.1 * s), ("train/grad_norm", 1.0 / s), ("timing_s/step", 2.0)):
            out.append(_tfrecord(_tb_event(s, tag, v, 1000.0 + 2 * s)))
    out.append(_tfrecord(_tb_event(steps, "val-core/gsm8k/reward/mean@1", 0.5, 1000.0 + 2 * steps)))
    return b"".join(out)


def generated_seeds() -> list[tuple[str, dict[str, bytes]]]:
    """Small hand-made logs of every other format (4 steps, an evaluation)."""
    prefix = "\x1b[36m(TaskRunner pid=4242)\x1b[0m "
    verl = ["+ python3 -m verl.trainer.main_ppo data.train_batch_size=8 actor_rollout_ref.rollout.n=4 "
            "actor_rollout_ref.actor.optim.lr=1e-6 algorithm.adv_estimator=grpo\n"]
    verl += [f"{prefix}step:{s} - actor/grad_norm:np.float64({1.0 / s}) - actor/lr(1e-4):0.010 - "
             f"critic/score/mean:{0.1 * s:.3f} - timing_s/gen:{1.5:.3f} - timing_s/update_actor:0.5 - "
             f"timing_s/step:2.5" + (f" - val-core/gsm8k/reward/mean@1:{0.2 * s}" if s % 2 == 0 else "") + "\n"
             for s in range(1, 5)]
    verl.append(f"{prefix}(\"Final validation metrics: {{'val-core/gsm8k/reward/mean@1': np.float64(0.75)}}\")\n")
    vjsonl = [json.dumps({"step": s, "data": {"actor/grad_norm": 1.0 / s, "critic/score/mean": 0.1 * s,
                                              "timing_s/step": 2.0, "timing_s/gen": 1.0,
                                              **({"val-core/gsm8k/reward/mean@1": 0.3} if s == 4 else {})}})
              for s in range(1, 5)]
    gjsonl = [json.dumps({"step": s, "train": {"reward": 0.1 * s, "grad_norm": 1.0 / (s + 1)}, "time_per_step": 2.0,
                          "lr": 1e-6}) for s in range(4)]
    csv = ["step,reward,grad_norm,time_per_step,eval/score"] + [
        f"{s},{0.1 * s},{1.0 / s},2.0,{0.1 * s if s % 2 else ''}" for s in range(1, 5)]
    wcsv = ["_step,_runtime,train/reward,actor/grad_norm"] + [
        f"{s},{10.0 * s},{0.1 * s},{1.0 / (s + 1)}" for s in range(5)]
    panel = ["Step,runA - train/reward,runA - train/reward__MIN,runB - train/reward"] + [
        f"{s},{0.1 * s},{0.05 * s},{0.2 * s}" for s in range(1, 5)]
    trl = {"global_step": 4, "train_batch_size": 8,
           "log_history": [{"step": s, "reward": 0.1 * s, "grad_norm": 1.0 / s, "learning_rate": 1e-6,
                            "num_tokens": 100.0 * s, "epoch": 0.1 * s} for s in range(1, 5)]
           + [{"step": 4, "eval_reward": 0.4}, {"step": 4, "train_runtime": 12.0, "train_loss": 0.1}]}
    run_json = {"run_id": "r1", "algorithm": "grpo", "prompts_per_step": 4, "group_size": 2, "lr": 1e-6}
    metrics = [json.dumps({"step": s, "reward/mean": 0.1 * s, "grad_norm/actor": 1.0 / s, "time/step_s": 2.0,
                           "time/wall_s": 2.0 * s}) for s in range(1, 5)]
    evals = [json.dumps({"step": 4, "eval/score": 0.5, "samples/retained": 32})]
    nl = "\n".join
    # issue 14's formats: TRL console dicts glued to tqdm, NeMo-RL step blocks, slime records, W&B summary, prime-rl
    trl_console = "".join(f"\r {s * 25}%|##  | {s}/4 [00:0{s}<00:03,  1.2s/it]{{'loss': 0.0, 'grad_norm': {1.0 / s}, "
                          f"'learning_rate': {1e-6 * s}, 'reward': {0.1 * s}, 'reward_std': 0.2, 'epoch': {0.25 * s}}}\n"
                          for s in range(1, 5)) + "{'eval_loss': 0.1, 'eval_reward': 0.4, 'epoch': 1.0}\n"
    nemo = "".join(f"========================= Step {s}/4 =========================\n📊 Training Results:\n"
                   f"  • Loss: 0.01\n  • Avg Reward: {0.1 * s}\n\n⏱️  Timing:\n  • Total step time: 10.0s\n"
                   f"  • exposed_generation: 4.0s (40.0%)\n  • policy_training: 3.0s (30.0%)\n" for s in range(1, 5))
    slime = "".join(f"(RolloutManager pid=1) [2026-01-01 00:00:0{s}] metrics.py:89 - rollout {s}: "
                    f"{{'rollout/raw_reward': {0.1 * s}}}\n(RolloutManager pid=1) perf {s}: {{'perf/rollout_time': "
                    f"5.0, 'perf/train_time': 2.0, 'x': tensor(0.5)}}\n" for s in range(4)) + \
        "eval 3: {'eval/gsm8k': 0.5, 'perf/rollout_time': 9.0}\n"
    wsum = ("wandb: Run history:\nwandb:   train/reward ▁▃▅█\nwandb:\nwandb: Run summary:\n"
            "wandb:   train/global_step 40\nwandb:   train/reward 0.82\nwandb:\nwandb: 🚀 View run x at: https://x\n")
    prime = "".join(f"Generating rollouts (train): 100%|##| 64/64 [00:10<00:00,  6.1it/s]\n"
                    f"02:15:5{s} SUCCESS Step {s} | Time: 7.{s}0s | Reward: 0.{s}400 | Throughput: 2314.0 tokens/s | "
                    f"Seq. Length: 323.7 tokens/sample | Async Level: 1 | Max. Off-Policy Level: 0\n"
                    for s in range(1, 5))
    wrapped = "".join(ln[i:i + 80] + "\n" for ln in "".join(verl).splitlines() for i in range(0, max(len(ln), 1), 80))
    return [
        ("verl", {"gen_verl.log": "".join(verl).encode()}),
        ("verl-jsonl", {"verl.jsonl": (nl(vjsonl) + "\n").encode()}),
        ("jsonl", {"generic.jsonl": (nl(gjsonl) + "\n").encode()}),
        ("csv", {"generic.csv": (nl(csv) + "\n").encode()}),
        ("wandb-csv", {"wandb.csv": (nl(wcsv) + "\n").encode()}),
        ("wandb-csv", {"panel.csv": (nl(panel) + "\n").encode()}),
        ("trl", {"trainer_state.json": json.dumps(trl, indent=2).encode()}),
        ("tensorboard", {"tb/events.out.tfevents.1700000000.host.1.0": tensorboard_bytes()}),
        ("dir", {"logs/a.log": "".join(verl).encode(), "logs/b.jsonl": (nl(vjsonl) + "\n").encode(),
                 "logs/c.csv": (nl(csv) + "\n").encode(), "logs/.hidden": b"\x00junk"}),
        ("rlbatch", {"run/run.json": json.dumps(run_json).encode(), "run/metrics.jsonl": (nl(metrics) + "\n").encode(),
                     "run/eval.jsonl": (nl(evals) + "\n").encode()}),
        # issue 14 (appended: tests index the seeds above by position)
        ("trl-console", {"trl_console.log": trl_console.encode()}),
        ("nemo-rl", {"nemo.log": nemo.encode()}),
        ("slime", {"slime.log": slime.encode()}),
        ("wandb-summary", {"wandb_summary.log": wsum.encode()}),
        ("prime-rl", {"prime.log": prime.encode()}),
        ("verl", {"wrapped_verl.log": wrapped.encode()}),
    ]


def all_seeds() -> list[tuple[str, dict[str, bytes]]]:
    return real_verl_seeds() + real_other_seeds() + generated_seeds()


# -------------------------------------------------------------------------------------------------- mutations
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _pos(data: bytes, frac: float) -> int:
    return min(len(data), max(0, int(frac * len(data))))


def _interleave(data: bytes, seed: int) -> bytes:
    rng = random.Random(seed)
    lines = data.split(b"\n")
    out = []
    for ln in lines:
        r = rng.random()
        actor = rng.choice(ACTORS).encode()
        colour = rng.choice([b"", b"\x1b[36m", b"\x1b[33m"])
        end = b"\x1b[0m " if colour else b" "
        if r < 0.3:  # another actor's line before this one
            out.append(colour + actor + end + b"INFO: gathering weights... step:3 - nothing:here")
        if r < 0.5 and len(ln) > 4:  # another actor's output spliced mid-line (no newline between)
            cut = rng.randrange(1, len(ln))
            ln = ln[:cut] + colour + actor + end + b"Loading checkpoint shards: 50%|" + ln[cut:]
        if rng.random() < 0.5 and not ln.startswith(b"\x1b") and not ln.startswith(b"("):
            ln = colour + actor + end + ln
        out.append(ln)
    return b"\n".join(out)


def _encode(data: bytes, name: str) -> bytes:
    text = data.decode("utf-8", errors="replace")
    if name == "invalid-utf8":
        return data[: len(data) // 2] + b"\xc3\x28\xa0\xa1\xf0\x28\x8c\xbc" + data[len(data) // 2:]
    if name == "cp1252":
        return text.replace("\ufffd", "?").encode("cp1252", errors="replace") + "é€".encode("cp1252")
    if name == "latin-1":
        return (text + "ÿé").encode("latin-1", errors="replace")
    return text.encode(name, errors="replace")


def mutate(data: bytes, ops: list[tuple]) -> bytes:
    """Apply ``ops`` (see the module docstring) in order."""
    for op in ops:
        kind = op[0]
        if kind == "truncate":
            data = data[: _pos(data, op[1])]
        elif kind == "flip":
            p = _pos(data, op[1])
            if p < len(data):
                data = data[:p] + bytes([op[2]]) + data[p + 1:]
        elif kind == "insert":
            p = _pos(data, op[1])
            data = data[:p] + op[2] + data[p:]
        elif kind == "number":
            nums = list(NUMBER.finditer(data))
            if nums:
                m = nums[op[1] % len(nums)]
                data = data[: m.start()] + op[2] + data[m.end():]
        elif kind == "encode":
            data = _encode(data, op[1])
        elif kind == "interleave":
            data = _interleave(data, op[1])
        elif kind == "longline":
            p = _pos(data, op[1])
            data = data[:p] + b"\n" + (b"step:1 - x:" + b"9" * op[2]) + b"\n" + data[p:]
        elif kind == "junk":
            data = random.Random(op[2]).randbytes(op[1])
        elif kind == "empty":
            data = b""
        elif kind == "dup":  # a resumed run re-logging a chunk
            p, q = sorted((_pos(data, op[1]), _pos(data, op[2])))
            data = data[:q] + data[p:q] + data[q:]
        else:
            raise ValueError(f"unknown op {op!r}")
    return data


def random_ops(rng: random.Random, n_max: int = 4) -> list[tuple]:
    """Random ops for the long fuzz run (the property tests draw the same shapes with hypothesis)."""
    ops = []
    for _ in range(rng.randint(1, n_max)):
        k = rng.choice(["truncate", "flip", "flip", "insert", "insert", "number", "number", "encode", "interleave",
                        "longline", "dup", "junk", "empty"])
        if k == "truncate":
            ops.append((k, rng.random()))
        elif k == "flip":
            ops.append((k, rng.random(), rng.randrange(256)))
        elif k == "insert":
            ops.append((k, rng.random(), rng.choice(TOKENS)))
        elif k == "number":
            ops.append((k, rng.randrange(10_000), rng.choice(TOKENS[:14])))
        elif k == "encode":
            ops.append((k, rng.choice(ENCODINGS)))
        elif k == "interleave":
            ops.append((k, rng.randrange(2**31)))
        elif k == "longline":
            ops.append((k, rng.random(), rng.choice([10, 10_000, 1_000_000])))
        elif k == "dup":
            ops.append((k, rng.random(), rng.random()))
        elif k == "junk":
            ops.append((k, rng.randrange(0, 4096), rng.randrange(2**31)))
        else:
            ops.append((k,))
    return ops


# ---------------------------------------------------------------------------------------------------- oracle
def write_case(root: Path, files: dict[str, bytes]) -> Path:
    """Write ``files`` under ``root``; return the path to read (the file, or the directory of a multi-file case)."""
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    rels = list(files)
    if len(rels) == 1 and "/" not in rels[0]:
        return root / rels[0]
    return root / rels[0].split("/")[0]


def check(path: Path, fmt: str | None = None) -> str:
    """Read ``path`` the way ``rlbatch analyze`` does and judge the outcome.

    Returns ``"parsed"`` (runs with a 1-based integer ``step`` column, strictly increasing, canonical or ``raw/``
    columns, a summary computable for each run and the accounting at a target) or ``"error"`` (one ``UserError`` naming the file). Any other
    exception propagates: that is a crash. An error message that does not name the file raises AssertionError.
    """
    from rlbatch.analysis.curves import summarize_run
    from rlbatch.errors import UserError
    from rlbatch.readers import load
    from rlbatch.analysis.accounting import account_runs
    from rlbatch.runstore import CANONICAL_METRICS, Run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            runs = load(path, fmt)
        except UserError as err:
            msg = str(err)
            assert "\n" not in msg.strip(), f"multi-line error: {msg!r}"
            assert path.name in msg, f"error does not name the file {path.name!r}: {msg!r}"
            return "error"
        assert isinstance(runs, list) and runs, runs
        for run in runs:
            assert isinstance(run, Run)
            m = run.metrics
            assert "step" in m.columns and len(m), m.columns
            steps = m["step"].to_numpy()
            assert steps.dtype.kind in "iu", steps.dtype
            assert (steps >= (0 if run.meta.source_format == "rlbatch" else 1)).all(), steps
            assert (steps[1:] > steps[:-1]).all(), steps
            if run.meta.source_format != "rlbatch":
                bad = [c for c in m.columns if c not in CANONICAL_METRICS and not str(c).startswith("raw/")]
                assert not bad, f"non-canonical columns {bad}"
            if len(run.evals) and run.meta.source_format != "rlbatch":
                assert "eval/score" in run.evals.columns
            summarize_run(run)
        account_runs(runs, 0.3, "eval/score")  # what `rlbatch analyze --target 0.3` does next
        account_runs(runs, 0.3, "reward/mean")
    return "parsed"


def run_case(root: Path, kind: str, files: dict[str, bytes], ops: list[tuple], which: int = 0,
             give_format: bool = False) -> tuple[str, Path]:
    """Mutate file number ``which`` of ``files`` with ``ops``, write the case under ``root`` and :func:`check` it
    (with the seed's format given, or detected)."""
    names = list(files)
    target = names[which % len(names)]
    mutated = dict(files)
    mutated[target] = mutate(files[target], ops)
    path = write_case(root, mutated)
    return check(path, kind if give_format and kind != "dir" else None), path


__all__ = ["TOKENS", "ENCODINGS", "all_seeds", "real_verl_seeds", "real_other_seeds", "generated_seeds", "mutate", "random_ops", "check",
           "run_case", "write_case", "verl_log_dir", "tensorboard_bytes"]
