"""``rlbatch profile``: decode throughput, prefill and update time per batch size, against a roofline lower bound.

No training: for each batch size b the model prefills b random prompts of ``prompt_tokens`` tokens, then decodes
exactly ``new_tokens`` tokens per sequence greedily with its KV cache (a manual loop, so no sequence stops early), and
runs one update (forward + backward over prompt + new tokens, and an AdamW step with lr = 0, so weights never change).

Roofline (Williams, Waterman & Patterson 2009, applied to autoregressive decoding as in Pope et al. 2022,
"Efficiently Scaling Transformer Inference"). One decode step at batch b and context length L must at least

    move   bytes(b) = P_bytes + b * L * kv_bytes_per_token             (weights once, each sequence's KV cache)
    do     flops(b) = 2 * N_params * b + 4 * n_layers * d_attn * L * b   (matmuls with the weights; QK^T and AV)

with P_bytes the parameter bytes (all parameters at their stored precision), N_params the parameter count,
kv_bytes_per_token = 2 (K and V) * n_layers * n_kv_heads * head_dim * bytes per element, d_attn = n_heads * head_dim,
and L the mean context over the decode (prompt_tokens + (new_tokens + 1) / 2). So

    t_step(b) >= max(bytes(b) / bandwidth, flops(b) / peak_flops)
    roofline_tokens_per_s(b) = b / t_step(b)        roofline_fraction = measured tokens/s / roofline tokens/s

At small b the bytes term (the weights) dominates and the bound grows ~linearly in b: this is why generation time
grows sublinearly in B (Li et al. 2026, "accelerate"). Bandwidth and peak FLOP/s are measured on the spot (a large
tensor copy, counting read + write bytes; a square matmul at the model's dtype) unless given.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from rlbatch.analysis.throughput import sublinear_window
from rlbatch.errors import UserError
from rlbatch.output import markdown_table, to_json
from rlbatch.runstore import atomic_write_text
from rlbatch.train.config import check_device
from rlbatch.train.models import load_model


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def resolve_model(spec: str, device: str = "cpu"):
    """Load a model for profiling through :func:`rlbatch.train.models.load_model` (a preset or a local Hugging Face
    directory). Returns the model on ``device``. Raises :class:`UserError` for an unknown preset or a directory
    without a loadable model."""
    model, _tok = load_model(spec, device=device)
    return model


def measure_bandwidth_gbs(device: str = "cpu", nbytes: int | None = None, reps: int = 5) -> float:
    """Memory bandwidth in GB/s (1e9 bytes/s) from timing ``reps`` copies of an ``nbytes`` float32 tensor (best
    rep; counts read + write = 2 x nbytes per copy). Default size 256 MiB on CPU, 1 GiB on CUDA."""
    nbytes = nbytes or (2**30 if device.startswith("cuda") else 2**28)
    x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    y = torch.empty_like(x)
    y.copy_(x)
    _sync(device)
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        y.copy_(x)
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best / 1e9


def measure_peak_tflops(device: str = "cpu", dtype: Any = None, n: int | None = None, reps: int = 3) -> float:
    """Peak matmul throughput in TFLOP/s (1e12 FLOP/s) from the best of ``reps`` n x n matmuls (2 n^3 FLOP each)
    at ``dtype`` (default float32 on CPU, bfloat16 on CUDA). Default n: 1024 on CPU, 8192 on CUDA."""
    cuda = device.startswith("cuda")
    dtype = dtype or (torch.bfloat16 if cuda else torch.float32)
    n = n or (8192 if cuda else 1024)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    a @ b
    _sync(device)
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e12


def model_shape(model: Any) -> dict[str, Any]:
    """Parameter count and bytes, layers, heads and KV-cache bytes per token (all layers, K and V) of a HF model."""
    cfg = model.config
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    param_bytes = sum(p.numel() * p.element_size() for p in params)
    elem = params[0].element_size()
    n_layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer")
    n_heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head")
    hidden = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd")
    head_dim = getattr(cfg, "head_dim", None) or hidden // n_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
    return {"n_params": int(n_params), "param_bytes": int(param_bytes), "bytes_per_element": int(elem),
            "n_layers": int(n_layers), "n_heads": int(n_heads), "n_kv_heads": int(n_kv), "head_dim": int(head_dim),
            "kv_bytes_per_token": int(2 * n_layers * n_kv * head_dim * elem),
            "max_positions": getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)}


def roofline_tokens_per_s(batch: int, context: float, shape: dict[str, Any], bandwidth_gbs: float,
                          peak_tflops: float) -> tuple[float, str]:
    """Upper bound on decode tokens/s at ``batch`` sequences of mean ``context`` tokens (module docstring formula).
    Returns ``(tokens_per_s, "memory" | "compute")`` naming the binding limit."""
    nbytes = shape["param_bytes"] + batch * context * shape["kv_bytes_per_token"]
    flops = 2 * shape["n_params"] * batch + 4 * shape["n_layers"] * shape["n_heads"] * shape["head_dim"] * context * batch
    t_mem, t_cmp = nbytes / (bandwidth_gbs * 1e9), flops / (peak_tflops * 1e12)
    return batch / max(t_mem, t_cmp), ("memory" if t_mem >= t_cmp else "compute")


def _decode(model: Any, ids: Any, new_tokens: int, device: str) -> tuple[float, float]:
    """Prefill ``ids`` (b, T), then greedily decode exactly ``new_tokens`` tokens with the KV cache.
    Returns (prefill seconds, decode seconds). Works with the ``cache`` keyword of recent transformers and the older
    ``past_key_values``; only the last position's logits are computed where the model supports ``logits_to_keep``."""
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    def cache_of(out: Any) -> Any:
        c = getattr(out, "cache", None)
        return c if c is not None else out.past_key_values

    with torch.inference_mode():
        _sync(device)
        t0 = time.perf_counter()
        out = model(input_ids=ids, use_cache=True, **extra)
        nxt = out.logits[:, -1:].argmax(-1)
        _sync(device)
        t1 = time.perf_counter()
        past = cache_of(out)
        for _ in range(new_tokens):
            out = model(input_ids=nxt, use_cache=True, **{cache_kw: past}, **extra)
            past = cache_of(out)
            nxt = out.logits[:, -1:].argmax(-1)
        _sync(device)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def _update(model: Any, opt: Any, ids: Any, device: str) -> float:
    """One update's time: forward + backward of the mean token log-likelihood over ``ids`` and an optimizer step."""
    model.train()
    _sync(device)
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    logits = model(input_ids=ids).logits[:, :-1].float()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    _sync(device)
    dt = time.perf_counter() - t0
    model.eval()
    return dt


#: Prompt and decode lengths of a profile when not given, shrunk to fit a model with a shorter context
#: (:func:`fit_lengths`).
DEFAULT_PROMPT_TOKENS = 64
DEFAULT_NEW_TOKENS = 64


def fit_lengths(prompt_tokens: int | None, new_tokens: int | None, max_positions: int | None) -> tuple[int, int]:
    """``(prompt_tokens, new_tokens)``: the given values, and for those not given (None) the defaults (64 each),
    shrunk so that prompt + new + 1 fits ``max_positions`` (the new tokens get the larger half of what is left).
    E.g. the ``tiny`` preset's 32 positions give (15, 16)."""
    p = prompt_tokens if prompt_tokens is not None else DEFAULT_PROMPT_TOKENS
    n = new_tokens if new_tokens is not None else DEFAULT_NEW_TOKENS
    if not max_positions or p + n + 1 <= max_positions:
        return p, n
    room = max_positions - 1
    if prompt_tokens is None and new_tokens is None:
        return max(1, room // 2), max(1, room - room // 2)
    if prompt_tokens is None:
        return max(1, room - n), n
    if new_tokens is None:
        return p, max(1, room - p)
    return p, n


def run_profile(model_spec: str, batches: Sequence[int] = (1, 2, 4, 8), new_tokens: int | None = None,
                prompt_tokens: int | None = None, device: str | None = None, bandwidth_gbs: float | None = None,
                peak_tflops: float | None = None, update: bool = True, seed: int = 0, repeats: int = 1,
                progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Profile decode, prefill and update time per batch size (module docstring); returns the profile dict.

    Keys: model, device, dtype, torch_threads, shape (see :func:`model_shape`), bandwidth_gbs / bandwidth_source
    ("measured" | "given"), peak_tflops / peak_source, prompt_tokens, new_tokens, ``batches`` (one dict per batch
    size: batch_size, prefill_s, decode_s, gen_s, decode_step_ms, decode_tokens_per_s, update_s,
    update_tokens_per_s, roofline_tokens_per_s, roofline_fraction, roofline_bound, gen_time_ratio vs the previous
    batch size, batch_ratio) and ``gen_window`` (:func:`rlbatch.analysis.throughput.sublinear_window` over gen_s).
    Each timing is the best of ``repeats`` (after a warm-up decode and a warm-up update at the smallest batch, so
    allocator growth and optimizer-state creation are not counted). Raises :class:`UserError` for bad sizes
    (non-positive, context longer than the model's positions) or device.
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    check_device(device)  # the one device check of train, demo and sweep
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise UserError(f"--device must be cpu or cuda, got {device!r}", field="device")
    batches = sorted(set(int(b) for b in batches))
    if not batches or batches[0] < 1:
        raise UserError("batch sizes must be positive integers", field="batches")
    if repeats < 1:
        raise UserError("--repeats must be >= 1", field="repeats")
    if (new_tokens is not None and new_tokens < 1) or (prompt_tokens is not None and prompt_tokens < 1):
        raise UserError("--new-tokens and --prompt-tokens must be >= 1", field="new_tokens")
    torch.manual_seed(seed)
    model = resolve_model(model_spec, device)
    if device.startswith("cuda"):
        model = model.to(torch.bfloat16)
    model.eval()
    shape = model_shape(model)
    prompt_tokens, new_tokens = fit_lengths(prompt_tokens, new_tokens, shape["max_positions"])
    ctx = prompt_tokens + new_tokens + 1
    if shape["max_positions"] and ctx > shape["max_positions"]:
        raise UserError(f"prompt_tokens + new_tokens = {ctx - 1} exceeds the model's {shape['max_positions']} "
                        "positions", field="new_tokens")
    dtype = next(model.parameters()).dtype
    bw_src = "given" if bandwidth_gbs else "measured"
    pk_src = "given" if peak_tflops else "measured"
    bandwidth_gbs = bandwidth_gbs or measure_bandwidth_gbs(device)
    peak_tflops = peak_tflops or measure_peak_tflops(device, dtype)
    vocab = model.config.vocab_size
    opt = torch.optim.AdamW(model.parameters(), lr=0.0, weight_decay=0.0) if update else None
    gen = torch.Generator().manual_seed(seed)
    warm = torch.randint(0, vocab, (batches[0], prompt_tokens), generator=gen).to(device)
    _decode(model, warm, min(2, new_tokens), device)
    if update:
        _update(model, opt, warm, device)
    mean_ctx = prompt_tokens + (new_tokens + 1) / 2
    rows: list[dict[str, Any]] = []
    for b in batches:
        ids = torch.randint(0, vocab, (b, prompt_tokens), generator=gen).to(device)
        _decode(model, ids, 1, device)  # per-batch warm-up (allocator, kernels)
        runs = [_decode(model, ids, new_tokens, device) for _ in range(repeats)]
        pre, dec = min(r[0] for r in runs), min(r[1] for r in runs)
        row: dict[str, Any] = {"batch_size": b, "prefill_s": pre, "decode_s": dec, "gen_s": pre + dec,
                               "decode_step_ms": 1e3 * dec / new_tokens, "decode_tokens_per_s": b * new_tokens / dec}
        if update:
            full = torch.randint(0, vocab, (b, prompt_tokens + new_tokens), generator=gen).to(device)
            row["update_s"] = min(_update(model, opt, full, device) for _ in range(repeats))
            row["update_tokens_per_s"] = b * (prompt_tokens + new_tokens) / row["update_s"]
        else:
            row["update_s"] = row["update_tokens_per_s"] = None
        roof, bound = roofline_tokens_per_s(b, mean_ctx, shape, bandwidth_gbs, peak_tflops)
        row.update(roofline_tokens_per_s=roof, roofline_fraction=row["decode_tokens_per_s"] / roof, roofline_bound=bound)
        if rows:
            row["batch_ratio"] = b / rows[-1]["batch_size"]
            row["gen_time_ratio"] = row["gen_s"] / rows[-1]["gen_s"]
        else:
            row["batch_ratio"] = row["gen_time_ratio"] = None
        rows.append(row)
        if progress:
            progress(b)
    window = sublinear_window([r["batch_size"] for r in rows], [r["gen_s"] for r in rows]) if len(rows) > 1 else None
    return {"model": model_spec, "device": device, "dtype": str(dtype).replace("torch.", ""),
            "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
            "torch_threads": torch.get_num_threads(), "shape": shape,
            "bandwidth_gbs": bandwidth_gbs, "bandwidth_source": bw_src, "peak_tflops": peak_tflops,
            "peak_source": pk_src, "repeats": repeats, "prompt_tokens": prompt_tokens, "new_tokens": new_tokens,
            "batches": rows,
            "gen_window": window}


def model_slug(spec: str) -> str:
    """A file-name-safe name for a model spec (a preset, or a directory's last component)."""
    name = Path(spec).name or spec
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "model"


def profile_figure(profile: dict[str, Any]):
    """Figure: decode tokens/s vs batch (measured and roofline, log-log) and generation / update seconds vs batch."""
    # matplotlib is imported only for a figure (slow to import; the Agg backend must be chosen before pyplot)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = profile["batches"]
    b = [r["batch_size"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.loglog(b, [r["decode_tokens_per_s"] for r in rows], "o-", label="measured decode")
    a1.loglog(b, [r["roofline_tokens_per_s"] for r in rows], "--", label="roofline bound")
    a1.set_xlabel("batch size (sequences)")
    a1.set_ylabel("decode tokens / s")
    a1.set_title(f"{profile.get('model')} on {profile.get('device_name', profile.get('device'))}", fontsize=9)
    a1.legend(fontsize=8)
    a2.loglog(b, [r["gen_s"] for r in rows], "o-", label="generation (prefill + decode)")
    if all(r.get("update_s") for r in rows):
        a2.loglog(b, [r["update_s"] for r in rows], "s-", label="one update")
    a2.loglog(b, [rows[0]["gen_s"] * x / b[0] for x in b], ":", color="gray", label="linear in batch")
    a2.set_xlabel("batch size (sequences)")
    a2.set_ylabel("seconds")
    a2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_profile(profile: dict[str, Any], out_dir: Path | str) -> tuple[Path, Path]:
    """Write ``<out_dir>/<model>.json`` and ``<out_dir>/<model>.png``; returns both paths."""
    import matplotlib.pyplot as plt  # after profile_figure chose the Agg backend (see there)

    out_dir = Path(out_dir)
    slug = model_slug(str(profile["model"]))
    jpath, fpath = out_dir / f"{slug}.json", out_dir / f"{slug}.png"
    atomic_write_text(jpath, to_json(profile) + "\n")
    fig = profile_figure(profile)
    fig.savefig(fpath, dpi=110)
    plt.close(fig)
    return jpath, fpath


def json_rows(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``--format json`` output: one object per batch size, each carrying the model, device, bandwidth and peak."""
    keep = {k: profile.get(k) for k in ("model", "device", "dtype", "bandwidth_gbs", "peak_tflops",
                                          "prompt_tokens", "new_tokens")}
    return [{**r, **keep} for r in profile["batches"]]


COLUMNS = [("batch_size", "B", None), ("prefill_s", "prefill s", ".3g"), ("decode_s", "decode s", ".3g"),
           ("gen_time_ratio", "gen time x", ".2f"), ("decode_tokens_per_s", "decode tok/s", ".4g"),
           ("roofline_tokens_per_s", "roofline tok/s", ".4g"), ("roofline_fraction", "of roofline", ".1%"),
           ("roofline_bound", "bound", None), ("update_s", "update s", ".3g")]


def profile_section(profile_json: dict[str, Any] | list[dict[str, Any]] | str | Path) -> dict[str, Any]:
    """The report section of a profile (report contract: title, markdown, figures, json_key "profile", json).

    Accepts the profile dict of :func:`run_profile`, the ``--format json`` list of rows, or a path to a saved
    profile JSON. Raises :class:`UserError` for a file that is not a profile."""
    prof: Any = profile_json
    if isinstance(prof, (str, Path)):
        try:
            prof = json.loads(Path(prof).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise UserError(f"cannot read profile JSON: {err}", path=str(profile_json)) from None
    if isinstance(prof, list):
        prof = {**{k: prof[0].get(k) for k in ("model", "device", "bandwidth_gbs", "peak_tflops")}, "batches": prof} \
            if prof else {"batches": []}
    if not isinstance(prof, dict) or not prof.get("batches"):
        raise UserError("not a profile: expected a 'batches' list", field="batches")
    rows = prof["batches"]
    md = [f"Model `{prof.get('model')}` on {prof.get('device_name', prof.get('device'))}: bandwidth "
          f"{prof.get('bandwidth_gbs') or float('nan'):.3g} GB/s ({prof.get('bandwidth_source', '?')}), peak "
          f"{prof.get('peak_tflops') or float('nan'):.3g} TFLOP/s ({prof.get('peak_source', '?')}).", "",
          markdown_table(rows, COLUMNS), ""]
    first, last = rows[0], rows[-1]
    if len(rows) > 1:
        br = last["batch_size"] / first["batch_size"]
        tr = last.get("gen_s", float("nan")) / first.get("gen_s", float("nan")) if first.get("gen_s") else float("nan")
        md.append(f"Batch {first['batch_size']} -> {last['batch_size']} (x{br:.0f}): generation time x{tr:.2f}, "
                  f"decode throughput x{last['decode_tokens_per_s'] / first['decode_tokens_per_s']:.2f}.")
    md.append(f"Decode reaches {first['roofline_fraction']:.0%} of the roofline at batch {first['batch_size']} and "
              f"{last['roofline_fraction']:.0%} at batch {last['batch_size']}.")
    if prof.get("gen_window") and prof["gen_window"].get("window"):
        w = prof["gen_window"]["window"]
        md.append(f"Sublinear generation window: batch {w[0]} to {w[1]}.")
    fig = profile_figure({"model": prof.get("model"), "device": prof.get("device"), **prof})
    return {"title": "Hardware profile: decode vs roofline", "markdown": "\n".join(md),
            "figures": {"profile": fig}, "json_key": "profile", "json": prof}
