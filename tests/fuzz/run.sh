#!/usr/bin/env bash
# Run each libFuzzer target for a bounded time on seed corpora made from the fixtures.
# usage: tests/fuzz/run.sh [SECONDS_PER_TARGET] [BUILD_DIR]
set -eu
SECS=${1:-60}
BUILD=${2:-build-fuzz}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ ! -d "$BUILD" ]; then
    CC=clang meson setup "$BUILD" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$BUILD" tests/fuzz/fuzz_model_text tests/fuzz/fuzz_config tests/fuzz/fuzz_safetensors tests/fuzz/fuzz_qconfig \
    tests/fuzz/fuzz_prepare tests/fuzz/fuzz_run tests/fuzz/fuzz_quantize >/dev/null
CORPUS=$BUILD/fuzz-corpus
mkdir -p "$CORPUS/model_text" "$CORPUS/config" "$CORPUS/safetensors" "$CORPUS/qconfig" "$CORPUS/prepare" "$CORPUS/run" \
    "$CORPUS/quantize"
cp "$SRC"/tests/fixtures/*.bpcc "$SRC"/tests/fixtures/torch/*.bpcc "$CORPUS/model_text/"
cp "$SRC"/tests/fixtures/*.bpcc "$SRC"/tests/fixtures/torch/*.bpcc "$SRC"/tests/fuzz/seeds/prepare/*.bpcc "$CORPUS/prepare/"
cp "$SRC"/tests/fixtures/*.bpcc "$SRC"/tests/fixtures/torch/*.bpcc "$SRC"/tests/fuzz/seeds/prepare/*.bpcc "$CORPUS/run/"
cp "$SRC"/tests/fixtures/*.bpcc "$SRC"/tests/fixtures/torch/*.bpcc "$SRC"/tests/fuzz/seeds/prepare/*.bpcc "$CORPUS/quantize/"
cp "$SRC"/tests/configs/good/*.yaml "$SRC"/tests/configs/bad/*.yaml "$SRC"/patterns/executorch.yaml "$CORPUS/config/"
cp "$SRC"/tests/qconfigs/good/*.yaml "$SRC"/tests/qconfigs/bad/*.yaml "$SRC"/patterns/qconfig/*.yaml "$CORPUS/qconfig/"
cp "$SRC"/tests/fixtures/*.safetensors "$SRC"/tests/fixtures/torch/*.safetensors "$SRC"/tests/fuzz/seeds/safetensors/*.safetensors \
    "$CORPUS/safetensors/"
# the malformed-input corpus seeds every parser
cp "$SRC"/tests/bad/cases/[mwx]_*.bpcc "$CORPUS/model_text/"
cp "$SRC"/tests/bad/cases/c_*.yaml "$CORPUS/config/"
cp "$SRC"/tests/bad/cases/q_*.yaml "$CORPUS/qconfig/"
cp "$SRC"/tests/bad/cases/*.safetensors "$CORPUS/safetensors/"
for t in ${TARGETS:-model_text config safetensors qconfig prepare run quantize}; do
    echo "== fuzz_$t ($SECS s)"
    "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECS" -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="$BUILD/crash-$t-" "$CORPUS/$t" 2>&1 | grep -E "^#[0-9]+.*(DONE|pulse)|ERROR|SUMMARY|Done" | tail -3
done
