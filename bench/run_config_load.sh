#!/usr/bin/env bash
# Config-load benchmark: bpcc loading each built-in (YAML parse + validation + registry) and,
# in the same run, PyTorch 1.13 building its BackendConfig objects (no parsing: Python code).
# usage: bench/run_config_load.sh BUILD_DIR [RUNS]
set -eu
BUILD=${1:-build}
RUNS=${2:-100}
echo "bpcc (C, one process, $RUNS runs each)"
"$BUILD/bench/bench_config_load" "$RUNS"
echo
echo "PyTorch 1.13 get_*_backend_config() ($RUNS runs each)"
/usr/bin/python3 "$(dirname "$0")/torch_config_build.py" "$RUNS"
