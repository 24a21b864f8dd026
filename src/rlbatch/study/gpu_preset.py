"""The GPU study: the demo's batch-size study (:mod:`rlbatch.study.demo`) on the ``gpu-small`` model preset
(:mod:`rlbatch.train.gpu_model`, 25 M parameters, warm-started on the GPU), sized to run in about 5 minutes on one
H200 inside ``benchmarks/gpu_study.sh``, and its CPU rehearsal ``gpu-small-toy``.

    rlbatch demo --model gpu-small --device cuda --workers 1       # one GPU
    rlbatch demo --model gpu-small-toy --device cpu --workers 1    # the same code path at toy size on CPU

Not run on a GPU yet (no device was lent when it was written): ``base_lr`` and the target are first guesses, not a
calibration. lr0 = 3e-5 at B0 = 32: the tiny preset's 1e-4 at B0 = 16 (width 128) scaled by 128 / 512 for the
4x wider model (Adam's per-parameter step wants ~1/width for hidden matrices: Yang et al. 2022, muP) and by
sqrt(2) for the doubled B0. The target (0.45) is the tiny study's, from the same starting score (~0.25: the GPU
warm start stops there). So that a wrong guess costs minutes, not the run: every trial has a wall-clock cap
(``max_time_s``, excluding evaluation) and stops at the target; the trials run seed-major (seed 0 of every B first),
so a study cut short by its time box still spans the whole ladder; ``micro_batch_size`` is a cap (one pass per step
up to B = 2048 responses, whose activations fit an H200 many times over).

The ladder reaches B = 16,384 (9 doublings past B0), where the sqrt rule's lr is 7e-4: far past where the tiny study
found its critical batch (~64-128), so the family's end and the rejected batches are inside the ladder unless the
wider model moves the knee more than 100-fold.
"""

from __future__ import annotations

from typing import Any

#: The GPU demo studies (the same keys as :data:`rlbatch.study.demo.DEMOS`, which includes them).
GPU_DEMOS: dict[str, dict[str, Any]] = {
    "gpu-small": dict(model="gpu-small", task="arithmetic", base_batch=32, base_lr=3e-5,
                      batches=[32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384], rule="sqrt",
                      fixed_lr_control=512, group_sizes=[8], seeds=2, samples=65536, target=0.45,
                      options=dict(eval_every=1024, eval_size=512, eval_batch_size=512, max_new_tokens=5,
                                   micro_batch_size=2048, max_grad_norm=1.0, checkpoint_every=10**6,
                                   stop_at_target=0.45, stop_hold=3, max_time_s=40.0, precision="bf16")),
    # the CPU rehearsal: the same options at toy size (a 0.1 M-parameter model, 4 rungs, 1 seed, a small budget)
    "gpu-small-toy": dict(model="gpu-small-toy", task="arithmetic", base_batch=16, base_lr=1e-4,
                          batches=[16, 64, 256], rule="sqrt", fixed_lr_control=64, group_sizes=[8], seeds=1,
                          samples=2048, target=0.26,
                          options=dict(eval_every=256, eval_size=64, eval_batch_size=64, max_new_tokens=5,
                                       micro_batch_size=2048, max_grad_norm=1.0, checkpoint_every=10**6,
                                       stop_at_target=0.26, stop_hold=3, max_time_s=10.0, precision="bf16")),
}
