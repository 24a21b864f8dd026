"""How close does decoding get to the memory-bandwidth roofline? Prints the decode fraction of the roofline bound at
batch 1 and at the largest batch for a model directory or preset (see rlbatch.profile for the formula).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/decode_roofline.py MODEL [--batches 1,4,16] [--new-tokens 32]
        [--prompt-tokens 32] [--device cpu|cuda] [--bandwidth-gbs X] [--peak-tflops Y] [--json OUT.json]
        [--no-trainer]

Besides the bare greedy loop of ``rlbatch profile``, it times the trainer's own sampler
(``rlbatch.train.rollout.generate``: temperature-1 sampling, EOS bookkeeping, decoding of the texts) on the same
prompts at the first and the last batch, with an EOS that never occurs so every sequence runs the full
``new_tokens``; its decode rate is ``b * new_tokens / (generate seconds - prefill seconds)`` and its roofline
fraction uses the same bound.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rlbatch.profile import run_profile  # noqa: E402
from rlbatch.scaling import parse_int_list  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--device", default=None)
    ap.add_argument("--bandwidth-gbs", type=float, default=None)
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default=None, help="also write the full profile here")
    ap.add_argument("--no-trainer", action="store_true", help="skip timing rlbatch.train.rollout.generate")
    a = ap.parse_args()
    p = run_profile(a.model, parse_int_list(a.batches), new_tokens=a.new_tokens, prompt_tokens=a.prompt_tokens,
                    device=a.device, bandwidth_gbs=a.bandwidth_gbs, peak_tflops=a.peak_tflops, update=False,
                    repeats=a.repeats)
    rows = p["batches"]
    print(f"model {a.model} on {p['device_name']} ({p['dtype']}, {p['torch_threads']} threads): "
          f"{p['shape']['param_bytes'] / 1e6:.1f} MB parameters, bandwidth {p['bandwidth_gbs']:.2f} GB/s "
          f"({p['bandwidth_source']}), peak {p['peak_tflops']:.3f} TFLOP/s ({p['peak_source']})")
    for r in rows:
        print(f"  B={r['batch_size']:>4}: decode {r['decode_tokens_per_s']:9.1f} tok/s, roofline "
              f"{r['roofline_tokens_per_s']:9.1f} tok/s ({r['roofline_bound']}), fraction {r['roofline_fraction']:.3f}, "
              f"gen {r['gen_s']:.3f} s")
    first, last = rows[0], rows[-1]
    print(f"roofline fraction at B={first['batch_size']}: {first['roofline_fraction']:.3f}; "
          f"at B={last['batch_size']}: {last['roofline_fraction']:.3f}")
    if len(rows) > 1:
        print(f"generation time ratio B={first['batch_size']}->{last['batch_size']} "
              f"(x{last['batch_size'] / first['batch_size']:.0f} sequences): x{last['gen_s'] / first['gen_s']:.2f}")
    if not a.no_trainer:
        p["trainer_generate"] = trainer_rows(a, p, [first, last] if len(rows) > 1 else [first])
        for r in p["trainer_generate"]:
            print(f"  trainer generate B={r['batch_size']:>4}: {r['generate_s']:.3f} s, decode "
                  f"{r['decode_tokens_per_s']:9.1f} tok/s, fraction {r['roofline_fraction']:.3f} "
                  f"(bare loop {r['bare_fraction']:.3f})")
    if a.json:
        Path(a.json).write_text(json.dumps(p, indent=2, default=str) + "\n")


class _NoStop:
    """Tokenizer stand-in for timing: an EOS id no model emits, pad 0, empty texts."""

    eos_token_id, pad_token_id = -1, 0

    @staticmethod
    def batch_decode(rows, skip_special_tokens=True):
        return ["" for _ in rows]


def trainer_rows(a, p: dict, rows: list[dict]) -> list[dict]:
    """Time ``rlbatch.train.rollout.generate`` (sampling) at each row's batch size; best of ``a.repeats``."""
    import time

    import torch

    from rlbatch.profile import resolve_model
    from rlbatch.train.rollout import generate

    model = resolve_model(a.model, p["device"])
    model.eval()
    vocab = model.get_input_embeddings().weight.shape[0]
    out = []
    for r in rows:
        b = r["batch_size"]
        g = torch.Generator().manual_seed(0)
        prompts = torch.randint(3, vocab, (b, a.prompt_tokens), generator=g).tolist()
        generate(model, _NoStop, prompts, 2, generator=g)  # warm-up
        best = float("inf")
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            ro = generate(model, _NoStop, prompts, a.new_tokens, generator=g)
            best = min(best, time.perf_counter() - t0)
            assert ro.response_ids.shape[1] == a.new_tokens
        dec = b * a.new_tokens / max(best - r["prefill_s"], 1e-9)
        out.append({"batch_size": b, "generate_s": best, "decode_tokens_per_s": dec,
                    "roofline_tokens_per_s": r["roofline_tokens_per_s"],
                    "roofline_fraction": dec / r["roofline_tokens_per_s"], "bare_fraction": r["roofline_fraction"]})
    return out


if __name__ == "__main__":
    main()
