#!/usr/bin/env bash
# The prepared GPU check (tests/gpu/README.md). On a lent machine:
#   bash tests/gpu/check.sh            results in $OUT/gpu-check/
# Anywhere else:
#   bash tests/gpu/check.sh --dry --out DIR    every step on the simulated board
set -uo pipefail
cd "$(dirname "$0")/../.."
py="${GPU_CHECK_PYTHON:-python3}"
PYTHONUNBUFFERED=1 exec "$py" tests/gpu/gpu_check.py "$@"
