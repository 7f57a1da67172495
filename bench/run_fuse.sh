#!/usr/bin/env bash
# Fusion benchmark: bpcc's match + fuse against PyTorch's _fuse_fx on the same torchvision
# graphs in one run, and the qconfig assignment of the fused graph against PyTorch's
# generate_qconfig_map and the prepare pass against PyTorch's prepare(); then bpcc on synthetic conv-bn-relu chains of 1k to 1M nodes.
# usage: bench/run_fuse.sh BUILD_DIR
set -eu
BUILD=${1:-build}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export PYTHONPATH="$HERE/../tools/python"
for m in resnet18 resnet50 mobilenet_v2 efficientnet_b0 densenet121; do
    /usr/bin/python3 -m bpcc_torch export-torchvision "$m" "$TMP/$m.bpcc"
    "$BUILD/bench/bench_fuse" "$TMP/$m.bpcc" 20 -q fbgemm
    /usr/bin/python3 "$HERE/torch_fuse.py" "$m" 10
    /usr/bin/python3 "$HERE/torch_assign.py" "$m" 10
    /usr/bin/python3 "$HERE/torch_prepare.py" "$m" 10
done
for n in 1000 10000 100000 1000000; do
    "$BUILD/bench/bench_fuse" --synthetic "$n" -q fbgemm
done
