#!/usr/bin/env bash
# Fetch, HERE (where pip reaches PyPI), the wheels that the bare GPU machine lacks for benchmarks/gpu_study.sh, into
# .whl/ (git-ignored; the device tool carries it: run(..., carry=[".whl"])). The device image has Python 3.12,
# torch, transformers, numpy, pandas, scipy, matplotlib, rich, typer, pyyaml, typing-extensions; rlbatch itself runs
# from src/ (PYTHONPATH), so only pydantic and its own dependencies travel (~2.8 MB):
#   pydantic, pydantic-core (compiled: cp312 manylinux x86_64), annotated-types, typing-inspection, and a
#   typing-extensions new enough for this pydantic (the image's may be older).
# gpu_study.sh installs them with pip --no-index --no-deps --target into its scratch folder, first on PYTHONPATH,
# only when `import pydantic` fails there.
#
#   bash benchmarks/gpu_wheels.sh        # then: run(command="bash benchmarks/gpu_study.sh --out $OUT", carry=[".whl"])
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
rm -rf .whl && mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  "pydantic==2.14.4" "pydantic-core==2.50.5" "annotated-types==0.8.0" "typing-inspection==0.4.5" \
  "typing-extensions==4.16.0"
ls -la .whl
du -sh .whl
