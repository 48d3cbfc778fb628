#!/usr/bin/env bash
# The wheels the check installs on a lent machine, which reaches no package registry: what
# gputop needs beyond that machine's Python (py-spy; its python3 already has torch, psutil and
# nvidia-ml-py). Run here once; .whl/ is git-ignored and travels with run(carry=[".whl"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d .whl "py-spy==0.4.3"
ls -la .whl
