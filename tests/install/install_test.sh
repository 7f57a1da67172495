#!/usr/bin/env bash
# meson install into a DESTDIR, then build a program against it with pkg-config alone.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
BUILD=$1
SRC=$2
DEST=$(mktemp -d)
trap 'rm -rf "$DEST"' EXIT
meson install -C "$BUILD" --no-rebuild --destdir "$DEST" >"$DEST.log" 2>&1 || { cat "$DEST.log"; exit 1; }
rm -f "$DEST.log"
pcdir=$(dirname "$(find "$DEST" -name bpcc.pc | head -n 1)")
[ -f "$pcdir/bpcc.pc" ] || { echo "FAIL: no bpcc.pc installed"; exit 1; }
hdr=$(find "$DEST" -path '*/include/bpcc.h' | head -n 1)
[ -n "$hdr" ] || { echo "FAIL: no bpcc.h installed"; exit 1; }
find "$DEST" -name 'libbpcc.so*' | grep -q . || { echo "FAIL: no shared library installed"; exit 1; }
find "$DEST" -name 'libbpcc.a' | grep -q . || { echo "FAIL: no static library installed"; exit 1; }
find "$DEST" -path '*/share/bpcc/patterns' -type d | grep -q . || { echo "FAIL: no share/bpcc/patterns"; exit 1; }
find "$DEST" -path '*/bin/bpcc' | grep -q . || { echo "FAIL: no bpcc executable installed"; exit 1; }
export PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$DEST"
flags=$(pkg-config --cflags --libs bpcc)
cc -std=c11 -Wall -Wextra -Werror "$SRC/tests/install/consumer.c" $flags -o "$DEST/consumer"
libdir=$(dirname "$(find "$DEST" -name 'libbpcc.so' | head -n 1)")
out=$(LD_LIBRARY_PATH="$libdir" "$DEST/consumer" "$SRC/tests/fixtures/residual.bpcc")
case "$out" in
    *"9 nodes, 5 modules"*) echo "install test passed: $out" ;;
    *) echo "FAIL: unexpected output: $out"; exit 1 ;;
esac
# the shared library exports the API and hides internals
if nm -D --defined-only "$libdir/libbpcc.so" | grep -q ' bpcc_arena_alloc$'; then
    echo "FAIL: internal symbol bpcc_arena_alloc is exported"; exit 1
fi
nm -D --defined-only "$libdir/libbpcc.so" | grep -q ' bpcc_graph_load$' || { echo "FAIL: bpcc_graph_load not exported"; exit 1; }
