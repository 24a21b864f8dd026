#!/usr/bin/env bash
# The study on one GPU, in one prepared script that ends within 9 minutes on an H200 (each phase time-boxed, so a
# slow phase costs only its own box):
#   0. setup    missing wheels; the machine (torch, CUDA, GPU), its ceilings (copy bandwidth, bf16 matmul) -> machine.json
#   1. warm     the gpu-small preset's warm start on the GPU (rlbatch.train.gpu_model; cached for the later phases)
#   2. profile  rlbatch profile: prefill / decode / update time per B = 1..16384 against the roofline at the H200's
#               datasheet 4.8 TB/s and 990 TFLOP/s bf16 dense                                        -> profile.json
#   3. study    rlbatch demo --model gpu-small: the GRPO batch study B = 32..16384 (sqrt rule, 2 seeds) plus the
#               fixed-LR control, bf16 autocast, then its report                       -> report.md, report.json
#   4. report   only if the study's box ran out: the report of the trials that finished
#   5. async    benchmarks/async_vs_sync.py: asynchronous (K = 1) vs synchronous rollouts at B = 1024 -> async.json
#   6. pack     the run stores without checkpoints, the profile figure, the HTML report            -> runs.tar.gz
#   7. fill     benchmarks/gpu_study_report.py: the results page filled from these files          -> gpu_h200.md
# and the whole log -> gpu_study.log. At most 8 files, none over 16 MiB (what the device tool brings back).
#
#   bash benchmarks/gpu_study.sh                 # on the GPU machine; writes to $OUT (default runs/gpu_study)
#   bash benchmarks/gpu_study.sh --tiny          # CPU rehearsal of every phase at toy sizes (~80 CPU-s)
#   bash benchmarks/gpu_study.sh --out DIR       # another output folder
# Environment: PY (default python3), GPU_STUDY_WORK (scratch: run stores, checkpoints, model cache; default a temp
# folder, removed at the end), GPU_STUDY_END (seconds after the start when the study phase must end), RLBATCH_CACHE.
#
# Bare machine (the device image: Python 3.12, torch 2.11 + CUDA, transformers 5, numpy, pandas, scipy, rich, typer,
# matplotlib; no pydantic, no internet): rlbatch runs from src/ (PYTHONPATH, no install), and its one missing
# dependency, pydantic, travels as wheels in .whl/ (fetched here by benchmarks/gpu_wheels.sh), installed in phase 0
# into a scratch folder only when `import pydantic` fails. Exit code: the number of phases that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TINY=0
OUT_DIR=${OUT:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --tiny) TINY=1 ;;
    --out) OUT_DIR=$2; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_study.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$OUT_DIR" ]; then
  if [ "$TINY" = 1 ]; then OUT_DIR=runs/gpu_study_tiny; else OUT_DIR=runs/gpu_study; fi
fi
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK=${GPU_STUDY_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_study.XXXXXX")}  # run stores, checkpoints: never in $OUT
mkdir -p "$WORK"
PY=${PY:-python3}
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export TRANSFORMERS_VERBOSITY=error RLBATCH_CACHE=${RLBATCH_CACHE:-$WORK/cache}
LOG=$OUT_DIR/gpu_study.log
: > "$LOG"

if [ "$TINY" = 1 ]; then  # toy sizes on CPU: every phase and file of the GPU run, in about a minute of CPU
  DEV=cpu MODEL=gpu-small-toy BATCHES=1,4,16,64 PROFILE_REPEATS=1
  ROOF=(--bandwidth-gbs 10 --peak-tflops 0.05)  # nominal CPU ceilings (machine.json has the measured ones)
  ASYNC=(--batch 64 --group 8 --steps 4 --rounds 1 --micro-batch-size 2048 --precision bf16 --configs k1)
  T_SETUP=60 T_WARM=90 T_PROFILE=60 STUDY_END=400 T_REPORT=60 T_ASYNC=90 T_FILL=60
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
else  # one H200: the box of every phase, in seconds. The study runs until STUDY_END s after the start (whatever the
  # phases before it left); then the report (only when the study's box ran out), async, pack and fill: 540 s at most
  DEV=cuda MODEL=gpu-small BATCHES=1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384
  ROOF=(--bandwidth-gbs 4800 --peak-tflops 990) PROFILE_REPEATS=3  # the H200's datasheet ceilings (bf16 dense)
  ASYNC=(--batch 1024 --group 8 --steps 12 --rounds 3 --micro-batch-size 2048 --precision bf16 --configs k1)
  T_SETUP=45 T_WARM=60 T_PROFILE=70 STUDY_END=340 T_REPORT=85 T_ASYNC=75 T_FILL=30
fi
STUDY_END=${GPU_STUDY_END:-$STUDY_END}
T0=$SECONDS
failed=0
note() { echo "[gpu_study $((SECONDS - T0))s] $*" | tee -a "$LOG"; }
phase() {  # phase NAME LIMIT_S CMD...: run CMD under `timeout`, its output into the log (and its tail on the screen
  # when it fails); never stops the script
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  note "== $name (box ${limit}s): $*"
  timeout --kill-after=5 "$limit" "$@" > "$WORK/phase.out" 2>&1
  local rc=$?
  cat "$WORK/phase.out" >> "$LOG"
  local why=""
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why=" (ran out of its ${limit}s box)"
  note "== $name: exit $rc after $((SECONDS - t0)) s$why"
  if [ "$rc" -ne 0 ]; then
    failed=$((failed + 1))
    tail -15 "$WORK/phase.out"
  fi
  return "$rc"
}
note "out $OUT_DIR, scratch $WORK, device $DEV, model $MODEL"

# ---------------------------------------------------------------- 0. setup: missing wheels, the machine, its ceilings
if ! "$PY" -c "import pydantic" 2>/dev/null; then
  if ls "$ROOT"/.whl/*.whl >/dev/null 2>&1; then
    phase install 60 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$WORK/site" "$ROOT"/.whl/*.whl
    export PYTHONPATH="$WORK/site:$PYTHONPATH"  # first: pydantic wants a newer typing_extensions than torch's
  else
    note "pydantic is missing and .whl/ holds no wheels: run benchmarks/gpu_wheels.sh where pip works, carry .whl"
  fi
fi
phase setup "$T_SETUP" "$PY" - "$DEV" "$OUT_DIR/machine.json" <<'EOF'
import json, platform, subprocess, sys, time
import torch, transformers
from rlbatch.profile import measure_bandwidth_gbs, measure_peak_tflops
dev, path = sys.argv[1], sys.argv[2]
cuda = dev == "cuda"
if cuda and not torch.cuda.is_available():
    sys.exit("gpu_study: --device cuda but torch sees no GPU")
info = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
        "cuda": torch.version.cuda, "device": dev, "cpu_count": __import__("os").cpu_count(),
        "device_name": torch.cuda.get_device_name(0) if cuda else platform.processor() or platform.machine(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
if cuda:
    p = torch.cuda.get_device_properties(0)
    info.update(total_memory_bytes=int(p.total_memory), multiprocessors=int(p.multi_processor_count))
    try:
        info["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,"
                                             "power.draw", "--format=csv"], capture_output=True, text=True,
                                            timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        info["nvidia_smi"] = f"unavailable: {err}"
# the ceilings measured here (rlbatch.profile's own measurements): a 1 GiB copy (read + write), an 8192^3 bf16 matmul
info["measured_bandwidth_gbs"] = measure_bandwidth_gbs(dev, reps=10 if cuda else 3, nbytes=None if cuda else 2**26)
info["measured_peak_tflops"] = measure_peak_tflops(dev, reps=10 if cuda else 2)
open(path, "w").write(json.dumps(info, indent=1) + "\n")
print(json.dumps(info, indent=1))
EOF

# ---------------------------------------------------------------- 1. warm start of the preset on the device
phase warm "$T_WARM" "$PY" - "$MODEL" "$DEV" "$OUT_DIR/machine.json" <<'EOF'
import json, sys, time
from pathlib import Path
from rlbatch.train.gpu_model import param_count, warm_start_info
from rlbatch.train.models import load_model
name, dev, machine = sys.argv[1], sys.argv[2], Path(sys.argv[3])
t = time.perf_counter()
load_model(name, dev)
info = {"preset": name, "params": param_count(name), **(warm_start_info(name, dev) or {}),
        "load_s": time.perf_counter() - t}
print("warm start:", json.dumps(info))
if machine.is_file():  # beside the machine's facts (the files that come back are few)
    machine.write_text(json.dumps({**json.loads(machine.read_text()), "warm_start": info}, indent=1) + "\n")
EOF

# ---------------------------------------------------------------- 2. profile: decode / prefill / update per B
phase profile "$T_PROFILE" "$PY" -m rlbatch.cli profile --model "$MODEL" --device "$DEV" --sequences "$BATCHES" \
  --repeats "$PROFILE_REPEATS" "${ROOF[@]}" --out "$WORK/profile" --format markdown \
  && cp "$WORK/profile/$MODEL.json" "$OUT_DIR/profile.json"

# ---------------------------------------------------------------- 3. the GRPO batch study (+ fixed-LR control)
T_STUDY=$((STUDY_END - (SECONDS - T0)))
[ "$T_STUDY" -lt 60 ] && T_STUDY=60
phase study "$T_STUDY" "$PY" -m rlbatch.cli demo --model "$MODEL" --device "$DEV" --workers 1 \
  --out "$WORK/study" --format markdown
if [ ! -f "$WORK/study/report.json" ] && [ -f "$WORK/study/sweep.json" ]; then
  # ---------------------------------------------------------------- 4. the report of the trials that finished
  phase report "$T_REPORT" "$PY" - "$WORK/study" "$MODEL" <<'EOF'
import sys
from rlbatch.study.demo import DEMOS
from rlbatch.study.report import report_sweep
rep = report_sweep(sys.argv[1], target=DEMOS[sys.argv[2]]["target"],
                   title=f"GPU study ({sys.argv[2]}), cut short by its time box: the trials that finished")
print("report written:", sys.argv[1])
EOF
fi
for f in report.md report.json; do [ -f "$WORK/study/$f" ] && cp "$WORK/study/$f" "$OUT_DIR/$f"; done

# ---------------------------------------------------------------- 5. asynchronous vs synchronous rollouts
phase async "$T_ASYNC" "$PY" benchmarks/async_vs_sync.py --model "$MODEL" --device "$DEV" "${ASYNC[@]}" \
  --json "$OUT_DIR/async.json"

# ---------------------------------------------------------------- 6. pack the run stores compactly
(cd "$WORK" && tar -czf "$OUT_DIR/runs.tar.gz" --exclude='checkpoint.pt' --exclude='.lock' --exclude='*.tmp' \
  $(ls -d study/sweep.json study/trials study/report.html study/fig_*.png profile 2>/dev/null)) \
  && note "packed $(du -h "$OUT_DIR/runs.tar.gz" | cut -f1) of run stores (no checkpoints) into runs.tar.gz" \
  || { note "packing failed"; failed=$((failed + 1)); }

# ---------------------------------------------------------------- 7. the results page, filled from these files
phase fill "$T_FILL" "$PY" benchmarks/gpu_study_report.py "$OUT_DIR" --out "$OUT_DIR/gpu_h200.md"

[ -f "$OUT_DIR/gpu_h200.md" ] && head -c 9000 "$OUT_DIR/gpu_h200.md"  # the results, also on the screen
echo
note "done in $((SECONDS - T0)) s, $failed phase(s) failed; wrote:"
ls -la "$OUT_DIR" | tee -a "$LOG"
[ -z "${GPU_STUDY_WORK:-}" ] && [ "${GPU_STUDY_KEEP:-0}" != 1 ] && rm -rf "$WORK"
exit "$failed"
