#!/usr/bin/env bash
# End-to-end tests of the bpcc command line: exit codes, message format, outputs.
# usage: cli_test.sh BPCC FIXTURES_DIR
set -u
BPCC=$1
FIX=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
pass=0
fail=0

# run NAME EXPECTED_STATUS CMD...  -> sets OUT, ERR, STATUS
run() {
    local name=$1 want=$2
    shift 2
    "$@" >"$WORK/out" 2>"$WORK/err"
    STATUS=$?
    OUT=$(cat "$WORK/out")
    ERR=$(cat "$WORK/err")
    if [ "$STATUS" -ne "$want" ]; then
        echo "FAIL $name: exit $STATUS, want $want"
        echo "  stderr: $ERR"
        fail=$((fail + 1))
        return 1
    fi
    return 0
}

ok() { pass=$((pass + 1)); }
bad() {
    echo "FAIL $1"
    fail=$((fail + 1))
}
has() { # has NAME HAYSTACK NEEDLE
    case "$2" in *"$3"*) ok ;; *) bad "$1: output lacks '$3': $2" ;; esac
}
lacks() { # lacks NAME HAYSTACK NEEDLE
    case "$2" in *"$3"*) bad "$1: output has '$3': $2" ;; *) ok ;; esac
}

run "no args" 2 "$BPCC" && has "no args" "$ERR" "usage: bpcc"
run "--help" 0 "$BPCC" --help && has "--help" "$OUT" "usage: bpcc"
run "--version" 0 "$BPCC" --version && has "--version" "$OUT" "bpcc 0."
run "unknown verb" 2 "$BPCC" frobnicate && has "unknown verb" "$ERR" "unknown verb 'frobnicate'"
run "unknown option" 2 "$BPCC" --bogus && has "unknown option" "$ERR" "unknown option '--bogus'"
run "show without model" 2 "$BPCC" show && has "show without model" "$ERR" "missing MODEL"
run "show two models" 2 "$BPCC" show a b && has "show two models" "$ERR" "more than one MODEL"
run "show bad flag" 2 "$BPCC" show --frob "$FIX/cat.bpcc" && has "show bad flag" "$ERR" "unknown option '--frob'"
run "show --help" 0 "$BPCC" show --help && has "show --help" "$OUT" "usage: bpcc show"
run "show missing file" 1 "$BPCC" show "$WORK/missing.bpcc" &&
    has "show missing file" "$ERR" "$WORK/missing.bpcc: error: cannot open"
run "show residual" 0 "$BPCC" show "$FIX/residual.bpcc" && has "show residual" "$OUT" "9 nodes, 5 modules, 12 tensors"
run "show users column" 0 "$BPCC" show "$FIX/residual.bpcc" && has "show users column" "$OUT" "layer_conv1,add"

for f in conv_bn_relu residual cat linear_head rnn literals; do
    if run "show --json $f" 0 "$BPCC" show --json "$FIX/$f.bpcc"; then
        if printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["format"]=="bpcc-model" and len(d["nodes"])==d["summary"]["nodes"]' 2>"$WORK/py"; then
            ok
        else
            bad "show --json $f: not the documented JSON: $(cat "$WORK/py")"
        fi
    fi
done

# a malformed model: message in file:line:col form, exit 1, nothing on stdout
printf 'bpcc-model 1\ngraph\n  %%x = placeholdr x ()\n' >"$WORK/bad.bpcc"
if run "malformed model" 1 "$BPCC" show "$WORK/bad.bpcc"; then
    has "malformed model" "$ERR" "$WORK/bad.bpcc:3:8: error: expected a node kind"
    [ -z "$OUT" ] && ok || bad "malformed model printed to stdout"
fi

# fmt: canonical rewrite, atomic outputs
run "fmt without -o" 2 "$BPCC" fmt "$FIX/cat.bpcc" && has "fmt without -o" "$ERR" "missing -o OUT"
run "fmt -o without name" 2 "$BPCC" fmt "$FIX/cat.bpcc" -o && has "fmt -o without name" "$ERR" "-o needs a file name"
if run "fmt round trip" 0 "$BPCC" fmt "$FIX/literals.bpcc" -o "$WORK/copy.bpcc"; then
    # the same text, naming the new weights file
    sed 's/"literals.safetensors"/"copy.safetensors"/' "$FIX/literals.bpcc" | cmp -s - "$WORK/copy.bpcc" &&
        ok || bad "fmt changed the canonical text"
    cmp -s "$FIX/literals.safetensors" "$WORK/copy.safetensors" && ok || bad "fmt changed the weights"
fi
run "fmt of a bad model" 1 "$BPCC" fmt "$WORK/bad.bpcc" -o "$WORK/never.bpcc"
[ ! -e "$WORK/never.bpcc" ] && [ ! -e "$WORK/never.safetensors" ] && ok || bad "failed fmt left an output"
echo "keep me" >"$WORK/existing.bpcc"
run "fmt over existing, failing" 1 "$BPCC" fmt "$WORK/bad.bpcc" -o "$WORK/existing.bpcc"
[ "$(cat "$WORK/existing.bpcc")" = "keep me" ] && ok || bad "failed fmt touched an existing output"
run "fmt into a missing directory" 1 "$BPCC" fmt "$FIX/cat.bpcc" -o "$WORK/nodir/out.bpcc" &&
    has "fmt into a missing directory" "$ERR" "cannot create output"
# config verbs
CFG=$FIX/../configs
run "config without subcommand" 2 "$BPCC" config && has "config without subcommand" "$ERR" "missing subcommand"
run "config unknown subcommand" 2 "$BPCC" config frob && has "config unknown subcommand" "$ERR" "unknown subcommand 'frob'"
run "config list" 0 "$BPCC" config list && has "config list" "$OUT" "executorch"
[ "$(printf '%s\n' "$OUT" | wc -l)" -eq 7 ] && ok || bad "config list does not list 7 backends"
run "config check good" 0 "$BPCC" config check "$CFG/good/derived.yaml" "$CFG/good/anchors.yaml" &&
    has "config check good" "$OUT" "derived.yaml: ok, backend 'my_npu', 5 patterns"
run "config check bad" 1 "$BPCC" config check "$CFG/bad/unknown_key.yaml" &&
    has "config check bad" "$ERR" "unknown_key.yaml:5:5: error: unknown key 'patern' in a configs entry (did you mean 'pattern'?)"
has "config check bad note" "$ERR" "unknown_key.yaml:4:5: note: in configs entry #1 (pattern torch.nn.Conv2d)"
run "config check mixed" 1 "$BPCC" config check "$CFG/good/base.yaml" "$CFG/bad/empty.yaml" &&
    has "config check mixed" "$OUT" "base.yaml: ok"
run "config check missing file" 1 "$BPCC" config check "$WORK/nope.yaml" && has "config check missing file" "$ERR" "cannot read backend config"
run "config dump yaml" 0 "$BPCC" config dump qnnpack && has "config dump yaml" "$OUT" "name: qnnpack"
printf '%s\n' "$OUT" >"$WORK/q.yaml"
run "config dump of the dump" 0 "$BPCC" config dump "$WORK/q.yaml"
[ "$OUT" = "$(cat "$WORK/q.yaml")" ] && ok || bad "dump -> load -> dump changed the YAML"
if run "config dump json" 0 "$BPCC" config dump --json native; then
    printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["name"]=="native" and len(d["configs"])==185' 2>/dev/null && ok || bad "config dump --json is not the native config"
fi
run "config diff" 0 "$BPCC" config diff native fbgemm && has "config diff" "$OUT" "- torch.nn.LayerNorm"
run "config diff same" 0 "$BPCC" config diff native native && has "config diff same" "$OUT" "no differences"
run "config strict" 1 "$BPCC" config check --strict "$CFG/bad/unknown_op_strict.yaml"
run "config non-strict warns" 0 "$BPCC" config check "$CFG/bad/unknown_op_strict.yaml" && has "config non-strict warns" "$ERR" "warning: unknown op 'torch.nn.Conv2D'"

# fuse
run "fuse without backend" 2 "$BPCC" fuse "$FIX/torch/tiny_resnet.bpcc" -o "$WORK/f.bpcc" && has "fuse without backend" "$ERR" "missing -b BACKEND"
run "fuse without output" 2 "$BPCC" fuse "$FIX/torch/tiny_resnet.bpcc" -b native && has "fuse without output" "$ERR" "missing -o OUT"
run "fuse unknown backend" 1 "$BPCC" fuse "$FIX/torch/tiny_resnet.bpcc" -b nope -o "$WORK/f.bpcc" && has "fuse unknown backend" "$ERR" "cannot read backend config"
has "fuse unknown backend lists the built-ins" "$ERR" "note: 'nope' is not a built-in backend either (native, fbgemm, qnnpack"
[ ! -e "$WORK/f.bpcc" ] && ok || bad "failed fuse wrote an output"
if run "fuse" 0 "$BPCC" fuse "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -o "$WORK/fused.bpcc"; then
    sed 's/"fused.safetensors"/"tiny_resnet_fused.safetensors"/' "$WORK/fused.bpcc" | cmp -s - "$FIX/torch/tiny_resnet_fused.bpcc" &&
        ok || bad "bpcc fuse differs from PyTorch's fuse_fx output (tests/fixtures/torch/tiny_resnet_fused.bpcc)"
fi
run "fuse --explain" 0 "$BPCC" fuse "$FIX/torch/tiny_resnet.bpcc" -b native --explain &&
    has "fuse --explain" "$OUT" "conv1 -> torch.ao.nn.intrinsic.ConvReLU2d (fuse_conv_bn_relu): conv1, bn1, relu  pattern [torch.nn.Conv2d, torch.nn.BatchNorm2d, torch.nn.ReLU]  (native.yaml:"
run "fuse --qat" 0 "$BPCC" fuse "$FIX/conv_bn_relu.bpcc" -b native --qat --explain && has "fuse --qat" "$OUT" "ConvBnReLU2d"
run "fuse with a vendor config" 0 "$BPCC" fuse "$FIX/torch/tiny_resnet.bpcc" -b "$CFG/good/base.yaml" --explain && has "fuse with a vendor config" "$OUT" "no fusion pattern matched"

# qconfig
QC=$FIX/../qconfigs
run "qconfig list" 0 "$BPCC" qconfig list && has "qconfig list" "$OUT" "onednn"
run "qconfig check good" 0 "$BPCC" qconfig check "$QC/good/custom.yaml" && has "qconfig check good" "$OUT" "custom.yaml: ok"
run "qconfig check bad" 1 "$BPCC" qconfig check "$QC/bad/unknown_observer.yaml" &&
    has "qconfig check bad" "$ERR" "unknown_observer.yaml:3:26: error: unknown observer 'MinMaxObserverr'"
if run "qconfig dump" 0 "$BPCC" qconfig dump qnnpack; then
    printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["global"]["activation"]["quant_max"]==255' 2>/dev/null &&
        ok || bad "qconfig dump qnnpack: unexpected JSON"
fi
run "qconfig unknown name" 1 "$BPCC" qconfig dump fbgemmm && has "qconfig unknown name" "$ERR" "not a built-in qconfig mapping"
run "qconfig assign" 0 "$BPCC" qconfig assign "$FIX/torch/tiny_resnet.bpcc" -q fbgemm -b fbgemm &&
    has "qconfig assign fused" "$OUT" "%conv1    quantized  fused_object_type (fbgemm.yaml:8)" &&
    has "qconfig assign global" "$OUT" "%add      quantized  global"
if run "qconfig assign json" 0 "$BPCC" qconfig assign "$FIX/torch/tiny_resnet.bpcc" -q qnnpack --json; then
    printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); n={e["name"]: e for e in d["nodes"]}; assert n["x"]["qconfig"] is None and n["bn1"]["rule"]["kind"]=="object_type" and n["add"]["rule"]["kind"]=="global" and n["conv1"]["qconfig"]["activation"]["quant_max"]==255' 2>/dev/null &&
        ok || bad "qconfig assign --json: unexpected JSON"
fi
printf 'global: {activation: {observer: MinMaxObserver}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}\nmodule_name:\n  - {name: blocks.1, qconfig: null}\n' > "$WORK/blocks1_float.yaml"
run "qconfig assign scopes" 0 "$BPCC" qconfig assign "$FIX/torch/tiny_blocks.bpcc" -q "$WORK/blocks1_float.yaml" &&
    has "qconfig assign scoped function" "$OUT" "%add_2          float      module_name ($WORK/blocks1_float.yaml:3)" &&
    has "qconfig assign other scope" "$OUT" "%add            quantized  global"
run "show scopes" 0 "$BPCC" show "$FIX/torch/tiny_blocks.bpcc" &&
    has "show scope column" "$OUT" "add_1                blocks.0 (__main__.Block)"
run "qconfig assign needs -q" 2 "$BPCC" qconfig assign "$FIX/torch/tiny_resnet.bpcc" && has "qconfig assign needs -q" "$ERR" "needs -q QCONFIG"
printf 'global: {activation: {observer: MinMaxObserver}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}\nobject_type:\n  - {type: torch.nn.Conv2d, qconfig: {activation: {observer: MinMaxObserver}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}}\n  - {type: torch.nn.ReLU, qconfig: null}\n' > "$WORK/relu_float.yaml"
run "qconfig assign fused parts disagree" 1 "$BPCC" qconfig assign "$FIX/torch/tiny_resnet.bpcc" -q "$WORK/relu_float.yaml" -b fbgemm &&
    has "qconfig assign fused parts disagree" "$ERR" "different object_type qconfigs"

# prepare and explain
run "prepare" 0 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/prep.bpcc" --plan "$WORK/plan.json" &&
    run "prepared model loads" 0 "$BPCC" show "$WORK/prep.bpcc" &&
    has "prepared model has observers" "$OUT" "torch.ao.quantization.HistogramObserver"
if [ -f "$WORK/plan.json" ]; then
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); o={x["name"]: x for x in d["observers"]}; assert o["activation_post_process_0"]["observes"]=="x"; assert any(g["pattern"]=="[operator.add, torch.nn.ReLU]" and g["nodes"]==["add","relu_1"] for g in d["groups"]); assert len({x["module"] for x in d["observers"]}) < len(o)' "$WORK/plan.json" 2>/dev/null &&
        ok || bad "prepare --plan: unexpected plan"
else bad "prepare --plan wrote no plan"; fi
run "prepare needs -o" 2 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm && has "prepare needs -o" "$ERR" "missing -o OUT"
run "prepare needs -q" 2 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -o "$WORK/x.bpcc" && has "prepare needs -q" "$ERR" "missing -q QCONFIG"
printf 'global: {activation: {observer: MinMaxObserver}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}\n' > "$WORK/plain.yaml"
run "prepare refuses a plain observer on sigmoid" 1 "$BPCC" prepare "$FIX/torch/tiny_functional.bpcc" -b fbgemm -q "$WORK/plain.yaml" -o "$WORK/refused.bpcc" --plan "$WORK/refused.json" &&
    has "fixed-qparams refusal" "$ERR" "tiny_functional.bpcc:14:3: error: node 'sigmoid' (torch.sigmoid) is a fixed-qparams op" &&
    { [ ! -e "$WORK/refused.bpcc" ] && [ ! -e "$WORK/refused.json" ] && ok || bad "prepare left output behind after an error"; }
printf 'global: {activation: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}\n' > "$WORK/s8.yaml"
run "explain" 0 "$BPCC" explain "$FIX/torch/tiny_resnet.bpcc" -b qnnpack -q "$WORK/s8.yaml" &&
    has "explain names the constraint" "$OUT" "is below backend scale_min_lower_bound 0.000244140625 for dtype qint8 (qnnpack.yaml:" &&
    has "explain names the rule" "$OUT" "qconfig  global ($WORK/s8.yaml)"
run "prepare --strict" 1 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b qnnpack -q "$WORK/s8.yaml" --strict -o "$WORK/strict.bpcc" &&
    has "strict names the node" "$ERR" "would stay float (--strict)"
if run "explain json" 0 "$BPCC" explain "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --json; then
    printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); n={e["name"]: e for e in d["nodes"]}; assert n["conv1"]["status"]=="quantized" and n["conv1"]["pattern"]["file"]=="fbgemm.yaml" and n["x"]["status"]=="not_applicable" and n["conv1"]["rule"]["kind"]=="fused_object_type"' 2>/dev/null &&
        ok || bad "explain --json: unexpected JSON"
fi
run "prepare quantized io" 0 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/io.bpcc" --input-quantized 0 --output-quantized &&
    run "show quantized io" 0 "$BPCC" show "$WORK/io.bpcc" && has "input not observed" "$OUT" "f32[1, 3, 8, 8]  conv1"
run "prepare bad index list" 2 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/io2.bpcc" --input-quantized 0,x &&
    has "bad index list" "$ERR" "wants input positions"
run "prepare trailing comma" 2 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/io2.bpcc" --input-quantized 0, &&
    has "trailing comma" "$ERR" "wants input positions like 0 or 0,2, not '0,'"
run "quantize bad index list" 2 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/io2.bpcc" --input-quantized -1 &&
    has "quantize bad index list" "$ERR" "bpcc quantize: --input-quantized wants input positions"
run "prepare input past the model's" 1 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/io2.bpcc" --input-quantized 0,1 &&
    has "input past the model's" "$ERR" "error: quantized input 1 named, and the model has 1 input" &&
    { [ ! -e "$WORK/io2.bpcc" ] && ok || bad "prepare wrote a model for an input the model has not"; }

# calibrate and run
mkbatch() { # mkbatch FILE NAME D0 D1 ... : a float32 safetensors batch of a ramp
    python3 - "$@" <<'PY'
import json, struct, sys
path, name, dims = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3:]]
n = 1
for d in dims:
    n *= d
data = struct.pack("<%df" % n, *[((i * 7919) % 23 - 11) / 8.0 for i in range(n)])
h = json.dumps({name: {"dtype": "F32", "shape": dims, "data_offsets": [0, len(data)]}}).encode()
h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
}
mkdir -p "$WORK/batches"
mkbatch "$WORK/batches/b0.safetensors" x 1 3 8 8
mkbatch "$WORK/batches/b1.safetensors" x 2 3 8 8
mkbatch "$WORK/wrong.safetensors" x 1 4 8 8
mkbatch "$WORK/noname.safetensors" y 1 3 8 8
run "prepare for calibrate" 0 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/cal_in.bpcc" &&
    run "calibrate" 0 "$BPCC" calibrate "$WORK/cal_in.bpcc" --data "$WORK/batches" -o "$WORK/cal.bpcc" &&
    run "calibrated model loads" 0 "$BPCC" show "$WORK/cal.bpcc" &&
    has "observer statistics" "$OUT" "histogram f32[2048]" &&
    has "observer qparams" "$OUT" "scale f32[1], zero_point i64[1]"
# quantized graph input and output: x dequantized first, the output its quantize node's value
run "quantize quantized io" 0 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" \
    --input-quantized 0 --output-quantized -o "$WORK/io_q.bpcc" &&
    run "show quantized io" 0 "$BPCC" show "$WORK/io_q.bpcc" &&
    { printf '%s\n' "$OUT" | grep -Eq "^x +placeholder +x +f32\[1, 3, 8, 8\] +dequantize +-$" &&
      printf '%s\n' "$OUT" | grep -Eq "^dequantize +call_method +dequantize +f32\[1, 3, 8, 8\] +conv1 +-$" &&
      printf '%s\n' "$OUT" | grep -Eq "^quantize_per_tensor_5 +call_function +torch.quantize_per_tensor +- +output +quint8" &&
      ok || bad "quantized io: input not dequantized or output not left quantized: $OUT"; }
run "calibrate wrong shape" 1 "$BPCC" calibrate "$WORK/cal_in.bpcc" --data "$WORK/batches/b0.safetensors" "$WORK/wrong.safetensors" -o "$WORK/cal2.bpcc" &&
    has "calibrate wrong shape" "$ERR" "wrong.safetensors: error: tensor 'x' has shape [1, 4, 8, 8]; the model input 'x' was traced as [1, 3, 8, 8]" &&
    { [ ! -e "$WORK/cal2.bpcc" ] && ok || bad "calibrate left output after bad data"; }
run "calibrate missing input" 1 "$BPCC" calibrate "$WORK/cal_in.bpcc" --data "$WORK/noname.safetensors" -o "$WORK/cal3.bpcc" &&
    has "calibrate missing input" "$ERR" "no tensor 'x' for the model input 'x'"
run "calibrate needs data" 2 "$BPCC" calibrate "$WORK/cal_in.bpcc" -o "$WORK/cal4.bpcc" && has "calibrate needs data" "$ERR" "missing --data"
run "run" 0 "$BPCC" run "$FIX/torch/tiny_resnet.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/out.safetensors" &&
    python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",f[:8])[0]; h=json.loads(f[8:8+n]); assert h["output"]["shape"]==[2,5], h' "$WORK/out.safetensors" 2>/dev/null &&
    ok || bad "run: unexpected output file"
for t in 0 257 4x ""; do
    run "run --threads '$t'" 2 "$BPCC" run "$FIX/torch/tiny_resnet.bpcc" --data "$WORK/batches/b1.safetensors" \
        -o "$WORK/out_threads.safetensors" --threads "$t" && has "run --threads '$t'" "$ERR" "--threads wants 1..256, not '$t'" &&
        { [ ! -e "$WORK/out_threads.safetensors" ] && ok || bad "run --threads '$t': output written"; }
done
# the tool sets its process up before OpenBLAS starts (src/cli/process.c; OpenBLAS is loaded when the
# first model runs, src/exec/blas.c): OpenBLAS starts once, and on CPUs with the AVX-512 subsets its
# SkylakeX kernels use, with those
run "blas starts once" 0 env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 "$BPCC" run "$FIX/torch/tiny_resnet.bpcc" \
    --data "$WORK/batches/b1.safetensors" -o "$WORK/out_blas.safetensors" &&
    { [ "$(printf '%s\n' "$ERR" | grep -c '^Core: ')" -eq 1 ] && ok || bad "blas starts once: $ERR"; }
if [ "$(grep -m1 '^flags' /proc/cpuinfo | grep -ow 'avx512f\|avx512bw\|avx512dq\|avx512vl\|avx512cd' | sort -u | wc -l)" -eq 5 ]; then
    has "blas kernels" "$ERR" "Core: SkylakeX"
fi
# torch._assert runs: a failed one stops the run at its node, with its message, and writes nothing
printf 'bpcc-model 1\n\ngraph\n  %%x = placeholder x () : f32[1, 3, 8, 8]\n  %%sum = call_method sum (%%x,)\n  %%gt = call_function operator.gt (%%sum, 1000000)\n  %%_assert = call_function torch._assert (%%gt, "the sum is too small")\n  %%output = output output (%%x,)\n' > "$WORK/asserts.bpcc"
run "failed assert" 1 "$BPCC" run "$WORK/asserts.bpcc" --data "$WORK/batches/b0.safetensors" -o "$WORK/out_assert.safetensors" &&
    has "failed assert" "$ERR" "asserts.bpcc:7:3: error: node '_assert' (torch._assert): assertion failed: the sum is too small" &&
    { [ ! -e "$WORK/out_assert.safetensors" ] && ok || bad "failed assert: output written"; }
# the BLAS is loaded when a model first runs, by the name in BPCC_BLAS if set: a verb that runs
# none works without it, one that runs a model says which library it could not load and writes nothing
run "blas: not needed to show" 0 env BPCC_BLAS=/nonexistent/libnoblas.so "$BPCC" show "$FIX/torch/tiny_resnet.bpcc" &&
    has "blas: not needed to show" "$OUT" "12 nodes"
run "blas: cannot load" 1 env BPCC_BLAS=/nonexistent/libnoblas.so "$BPCC" run "$FIX/torch/tiny_resnet.bpcc" \
    --data "$WORK/batches/b1.safetensors" -o "$WORK/out_noblas.safetensors" &&
    has "blas: cannot load" "$ERR" "error: cannot load the BLAS library /nonexistent/libnoblas.so: " &&
    { [ ! -e "$WORK/out_noblas.safetensors" ] && ok || bad "blas: cannot load: output written"; }
run "blas: no cblas_sgemm" 1 env BPCC_BLAS=libc.so.6 "$BPCC" run "$FIX/torch/tiny_resnet.bpcc" \
    --data "$WORK/batches/b1.safetensors" -o "$WORK/out_noblas.safetensors" &&
    has "blas: no cblas_sgemm" "$ERR" "cannot load the BLAS library libc.so.6: it has no cblas_sgemm"
# under valgrind: the same output; not for a sanitized build, which valgrind cannot run
if command -v valgrind >/dev/null && ! grep -qa __asan_init "$BPCC"; then
    run "under valgrind" 0 valgrind -q --error-exitcode=9 "$BPCC" run "$FIX/torch/tiny_resnet.bpcc" \
        --data "$WORK/batches/b1.safetensors" -o "$WORK/out_vg.safetensors" &&
        python3 -c 'import array,json,struct,sys
def load(p):
    f = open(p, "rb").read(); n = struct.unpack("<Q", f[:8])[0]; h = json.loads(f[8:8 + n]); o = h["output"]
    return o["shape"], array.array("f", f[8 + n + o["data_offsets"][0]:8 + n + o["data_offsets"][1]])
(sa, a), (sb, b) = load(sys.argv[1]), load(sys.argv[2])
assert sa == sb and len(a) == len(b) and all(abs(x - y) <= 1e-5 * max(1.0, abs(y)) for x, y in zip(a, b))' \
            "$WORK/out_vg.safetensors" "$WORK/out.safetensors" 2>/dev/null &&
        ok || bad "under valgrind: output differs from the run's"
fi

printf 'bpcc-model 1\n\ngraph\n  %%x = placeholder x ()\n  %%r = call_function torch.relu (%%x,)\n  %%output = output output ({out: %%r, aux: (%%x, %%r)},)\n' > "$WORK/dict_out.bpcc"
run "run: a dict output" 0 "$BPCC" run "$WORK/dict_out.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/dict_out.safetensors" &&
    python3 -c 'import json,struct,sys; f=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",f[:8])[0]; h=json.loads(f[8:8+n]); h.pop("__metadata__", None); assert sorted(h)==["output.aux.0","output.aux.1","output.out"], h; assert all(h[k]["shape"]==[2,3,8,8] for k in h), h' "$WORK/dict_out.safetensors" 2>/dev/null &&
    ok || bad "run: a dict output's tensors, named output.<key>"
printf 'bpcc-model 1\n\ngraph\n  %%x = placeholder x ()\n  %%s = call_method size (%%x, 0)\n  %%output = output output (%%s,)\n' > "$WORK/int_out.bpcc"
run "run: no tensor out" 1 "$BPCC" run "$WORK/int_out.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/int_out.safetensors" &&
    has "run: no tensor out" "$ERR" "int_out.bpcc:6:3: error: the model's output holds no tensor: nothing to write" &&
    { [ ! -e "$WORK/int_out.safetensors" ] && ok || bad "run: an output file without tensors"; }

# convert and quantize
run "convert" 0 "$BPCC" convert "$WORK/cal.bpcc" -b fbgemm -q fbgemm -o "$WORK/conv.bpcc" &&
    run "converted model loads" 0 "$BPCC" show "$WORK/conv.bpcc" &&
    has "quantize points" "$OUT" "torch.quantize_per_tensor" &&
    has "reference modules" "$OUT" "torch.ao.nn.quantized.reference.Conv2d" &&
    has "shown activation qparams" "$OUT" "torch.quantize_per_tensor  -                dequantize             quint8 scale=0.021643 zp=64" &&
    has "shown weight qparams" "$OUT" "weight qint8 axis=0 x8 scale=" &&
    run "converted model json" 0 "$BPCC" show "$WORK/conv.bpcc" --json &&
    printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); q=[n["qparams"] for n in d["nodes"] if "qparams" in n]; w=[n["weight_qparams"] for n in d["nodes"] if "weight_qparams" in n]; assert q and all(x["kind"]=="per_tensor" and x["scale"]>0 and isinstance(x["zero_point"], int) for x in q), q; assert w and all(len(x["scale"])==len(x["zero_point"]) and x["axis"]==0 and x["module"] for x in w), w' 2>/dev/null &&
    ok || bad "show --json: qparams"
run "calibrated model shows qparams" 0 "$BPCC" show "$WORK/cal.bpcc" && has "observer qparams column" "$OUT" "quint8 scale="
run "convert before calibrate" 1 "$BPCC" convert "$WORK/cal_in.bpcc" -b fbgemm -q fbgemm -o "$WORK/conv2.bpcc" &&
    has "convert before calibrate" "$ERR" "calibrate the model first" &&
    { [ ! -e "$WORK/conv2.bpcc" ] && ok || bad "convert left output after an error"; }
run "quantize" 0 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/quant.bpcc" &&
    has "quantize summary" "$OUT" "reference modules, output SQNR" &&
    run "quantized model runs" 0 "$BPCC" run "$WORK/quant.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/qout.safetensors"
# an in-place op nothing reads (x.add_(1) as a statement): kept, with a warning at its line, or
# erased as PyTorch 1.13's convert does with --erase-unused-in-place
cat >"$WORK/in_place.bpcc" <<'MODEL'
bpcc-model 1

graph
  %x = placeholder x () : f32[1, 3, 8, 8]
  %mul = call_function operator.mul (%x, 2.0)
  %add_ = call_method add_ (%mul, 1.0)
  %relu = call_function torch.relu (%mul,)
  %output = output output (%relu,)
MODEL
run "quantize keeps in-place ops" 0 "$BPCC" quantize "$WORK/in_place.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/in_place_q.bpcc" &&
    has "in-place warning" "$ERR" "$WORK/in_place.bpcc:6:3: warning: kept 1 in-place op whose result nothing reads ('add_' (add_))" &&
    has "in-place note" "$ERR" "note: the op changes a value later nodes read" &&
    has "in-place op kept" "$(cat "$WORK/in_place_q.bpcc")" "call_method add_"
run "quantize --erase-unused-in-place" 0 "$BPCC" quantize "$WORK/in_place.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" \
    -o "$WORK/in_place_e.bpcc" --erase-unused-in-place &&
    lacks "no in-place warning" "$ERR" "warning" &&
    lacks "in-place op erased" "$(cat "$WORK/in_place_e.bpcc")" "add_"
# every built-in backend with the mapping of its name runs the whole flow on a residual model;
# onednn fuses each block's conv, batch norm, add and relu into one ConvAddReLU2d, which takes
# the block's input, itself fused just before, as its second input
for b in qnnpack x86 onednn; do
    run "quantize -b $b" 0 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b $b -q $b --data "$WORK/batches" -o "$WORK/quant_$b.bpcc" &&
        has "quantize -b $b summary" "$OUT" "reference modules, output SQNR" &&
        lacks "quantize -b $b warns of nothing" "$ERR" "nothing was quantized" &&
        run "quantized -b $b model runs" 0 "$BPCC" run "$WORK/quant_$b.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/qout_$b.safetensors"
done
has "onednn fuses conv+add" "$(cat "$WORK/quant_onednn.bpcc")" "torch.ao.nn.intrinsic.ConvAddReLU2d"
# dynamic quantization needs no batches: quantize without --data converts directly (the same model
# as with --data), and refuses a mapping whose observers need calibration, writing nothing
cat > "$WORK/dynamic.yaml" <<'YAML'
name: dynamic
global: {activation: {observer: PlaceholderObserver, dtype: quint8, compute_dtype: quint8}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}
YAML
mkbatch "$WORK/head_batch.safetensors" x 2 8 4 4
run "quantize dynamic without --data" 0 "$BPCC" quantize "$FIX/linear_head.bpcc" -b fbgemm -q "$WORK/dynamic.yaml" -o "$WORK/dyn.bpcc" &&
    has "quantize dynamic summary" "$OUT" "(none needs calibration), 2 quantize points, 2 reference modules, output SQNR not measured (no --data)" &&
    run "dynamic model runs" 0 "$BPCC" run "$WORK/dyn.bpcc" --data "$WORK/head_batch.safetensors" -o "$WORK/dyn_out.safetensors" &&
    run "quantize dynamic with --data" 0 "$BPCC" quantize "$FIX/linear_head.bpcc" -b fbgemm -q "$WORK/dynamic.yaml" --data "$WORK/head_batch.safetensors" -o "$WORK/dyn2.bpcc" &&
    has "quantize dynamic sqnr" "$OUT" "output SQNR" &&
    { [ "$(sed 1,2d "$WORK/dyn.bpcc")" = "$(sed 1,2d "$WORK/dyn2.bpcc")" ] && ok || bad "quantize dynamic: another model without --data"; }
# the recurrent modules of dynamic quantization: qparams per weight in show, show --json and
# compare weights; the model runs
run "quantize recurrent dynamic" 0 "$BPCC" quantize "$FIX/rnn.bpcc" -b fbgemm -q "$WORK/dynamic.yaml" -o "$WORK/rec.bpcc" &&
    has "recurrent summary" "$OUT" "3 quantize points, 3 reference modules" &&
    run "show recurrent" 0 "$BPCC" show "$WORK/rec.bpcc" &&
    has "show lstm weights" "$OUT" "weight_ih_l0 qint8 scale=" && has "show lstm hh" "$OUT" "; weight_hh_l0 qint8 scale=" &&
    has "show cell weights" "$OUT" "weight_ih qint8 scale=" &&
    run "show recurrent --json" 0 "$BPCC" show --json "$WORK/rec.bpcc" &&
    { printf '%s' "$OUT" | python3 -c 'import json,sys; n={x["name"]: x for x in json.load(sys.stdin)["nodes"]}; w=n["lstm"]["weights_qparams"]; assert sorted(w)==["weight_hh_l0","weight_ih_l0"] and w["weight_ih_l0"]["dtype"]=="qint8" and w["weight_ih_l0"]["module"]=="lstm" and sorted(n["cell"]["weights_qparams"])==["weight_hh","weight_ih"] and "weight_qparams" in n["fc"]' 2>"$WORK/py" && ok || bad "show --json recurrent: $(cat "$WORK/py")"; } &&
    run "compare weights recurrent" 0 "$BPCC" compare weights "$FIX/rnn.bpcc" "$WORK/rec.bpcc" -b fbgemm &&
    has "compare weights recurrent header" "$OUT" "compare weights: 5 quantized weights" &&
    has "compare weights lstm row" "$OUT" "lstm.weight_hh_l0" && has "compare weights cell row" "$OUT" "cell.weight_ih" &&
    mkbatch "$WORK/rec_batch.safetensors" x 2 5 4 &&
    run "recurrent model runs" 0 "$BPCC" run "$WORK/rec.bpcc" --data "$WORK/rec_batch.safetensors" -o "$WORK/rec_out.safetensors"
run "quantize static without --data" 1 "$BPCC" quantize "$FIX/linear_head.bpcc" -b fbgemm -q fbgemm -o "$WORK/static_nodata.bpcc" &&
    has "static needs data" "$ERR" "linear_head.bpcc: error: observer 'activation_post_process_0' (torch.ao.quantization.HistogramObserver) needs calibration batches: give --data" &&
    { [ ! -e "$WORK/static_nodata.bpcc" ] && ok || bad "quantize static without --data wrote a file"; }
# a qconfig the backend refuses everywhere (quint8 activations, tensorrt's qint8): a float model,
# written, with a warning that says so and where to look
run "quantize nothing" 0 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b tensorrt -q fbgemm --data "$WORK/batches" -o "$WORK/quant_none.bpcc" &&
    has "quantize nothing summary" "$OUT" "0 quantize points, 0 reference modules" &&
    has "quantize nothing warns" "$ERR" "tiny_resnet.bpcc: warning: nothing was quantized" &&
    has "quantize nothing points to --explain" "$ERR" "note: \`bpcc quantize --explain\`"
run "quantize without the sqnr check" 0 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/quant_ns.bpcc" --no-sqnr &&
    has "quantize --no-sqnr summary" "$OUT" "output SQNR not measured (--no-sqnr)" &&
    { cmp -s "$WORK/quant.bpcc" "$WORK/quant_ns.bpcc" 2>/dev/null || [ "$(sed 1,2d "$WORK/quant.bpcc")" = "$(sed 1,2d "$WORK/quant_ns.bpcc")" ]; } && ok || bad "quantize --no-sqnr: another model"
run "quantize --time" 0 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/quant_t.bpcc" --no-sqnr --time &&
    { printf '%s\n' "$OUT" | grep -Eq '^time: load [0-9]+\.[0-9] ms, fuse [0-9]+\.[0-9] ms, prepare [0-9]+\.[0-9] ms, calibrate [0-9]+\.[0-9] ms, convert [0-9]+\.[0-9] ms, sqnr [0-9]+\.[0-9] ms, save [0-9]+\.[0-9] ms; total [0-9]+\.[0-9] ms; peak [1-9][0-9]* MB$' && ok || bad "quantize --time: no step times: $OUT"; } &&
    { [ "$(sed 1,2d "$WORK/quant_ns.bpcc")" = "$(sed 1,2d "$WORK/quant_t.bpcc")" ] && ok || bad "quantize --time: another model"; }
run "quantize without --time prints no times" 0 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/quant_t.bpcc" --no-sqnr &&
    { case "$OUT" in *"time:"*) bad "quantize printed times unasked" ;; *) ok ;; esac; }
# --sync: the same outputs, written after waiting for the disk (fsync of each file and of its
# directory) where the verbs that write a model are asked to; verbs that write no model refuse it
same_files() { # same_files NAME A B: A.bpcc/B.bpcc and their weights hold the same (the weights line aside)
    [ "$(sed 1,2d "$WORK/$2.bpcc")" = "$(sed 1,2d "$WORK/$3.bpcc")" ] && cmp -s "$WORK/$2.safetensors" "$WORK/$3.safetensors" &&
        ok || bad "$1: --sync wrote another model"
}
run "quantize --sync" 0 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/quant_sy.bpcc" --no-sqnr --sync &&
    same_files "quantize --sync" quant_ns quant_sy
run "fmt --sync" 0 "$BPCC" fmt "$WORK/quant_ns.bpcc" -o "$WORK/fmt_sy.bpcc" --sync && same_files "fmt --sync" quant_ns fmt_sy
run "fuse" 0 "$BPCC" fuse "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -o "$WORK/fuse_a.bpcc" &&
    run "fuse --sync" 0 "$BPCC" fuse --sync "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -o "$WORK/fuse_sy.bpcc" && same_files "fuse --sync" fuse_a fuse_sy
run "prepare --sync" 0 "$BPCC" prepare "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/prep_sy.bpcc" --sync --plan "$WORK/plan_sy.json" &&
    same_files "prepare --sync" cal_in prep_sy && python3 -m json.tool "$WORK/plan_sy.json" >/dev/null && ok || bad "prepare --sync: no plan"
run "calibrate --sync" 0 "$BPCC" calibrate "$WORK/cal_in.bpcc" --data "$WORK/batches" --sync -o "$WORK/cal_sy.bpcc" && same_files "calibrate --sync" cal cal_sy
run "prepare a prepared model" 1 "$BPCC" prepare "$WORK/cal_in.bpcc" -b fbgemm -q fbgemm -o "$WORK/prep2.bpcc" &&
    has "prepare a prepared model" "$ERR" "calls an observer (torch.ao.quantization.HistogramObserver): the model is prepared already" &&
    { [ ! -e "$WORK/prep2.bpcc" ] && ok || bad "prepare of a prepared model wrote an output"; }
# a calibrated model calibrated again goes on from its statistics, as PyTorch's observers do: b0
# then b1 in two runs is b0 and b1 in one (and not b1 alone: the histograms' counts differ)
run "calibrate b0" 0 "$BPCC" calibrate "$WORK/cal_in.bpcc" --data "$WORK/batches/b0.safetensors" -o "$WORK/cal_b0.bpcc" &&
    run "calibrate b1 after b0" 0 "$BPCC" calibrate "$WORK/cal_b0.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/cal_b01.bpcc" &&
    run "calibrate b1 alone" 0 "$BPCC" calibrate "$WORK/cal_in.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/cal_b1.bpcc" &&
    { [ "$(sed 1,2d "$WORK/cal.bpcc")" = "$(sed 1,2d "$WORK/cal_b01.bpcc")" ] && cmp -s "$WORK/cal.safetensors" "$WORK/cal_b01.safetensors" &&
        ok || bad "calibrating b0, then b1, is not calibrating both at once"; } &&
    { cmp -s "$WORK/cal.safetensors" "$WORK/cal_b1.safetensors" && bad "calibrating b1 alone gives what both give: the test shows nothing" || ok; }
run "convert --sync" 0 "$BPCC" convert "$WORK/cal.bpcc" -b fbgemm -q fbgemm -o "$WORK/conv_sy.bpcc" --sync && same_files "convert --sync" conv conv_sy
run "run refuses --sync" 2 "$BPCC" run "$FIX/torch/tiny_resnet.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/out_sy.safetensors" --sync &&
    has "run refuses --sync" "$ERR" "unknown option '--sync'"
run "explain refuses --sync" 2 "$BPCC" explain "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --sync &&
    has "explain refuses --sync" "$ERR" "unknown option '--sync'"
# where strace can run: the fsync calls themselves, three files and their directories with --sync, none without
if command -v strace >/dev/null && strace -f -o /dev/null true 2>/dev/null; then
    for sync in "" --sync; do
        strace -f -e trace=fsync -o "$WORK/strace" "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm \
            --data "$WORK/batches" -o "$WORK/quant_st.bpcc" --plan "$WORK/plan_st.json" --no-sqnr $sync >/dev/null 2>&1
        n=$(grep -c 'fsync(' "$WORK/strace")
        want=$([ -n "$sync" ] && echo 6 || echo 0)
        [ "$n" -eq "$want" ] && ok || bad "quantize ${sync:-without --sync}: $n fsync calls, want $want"
    done
    # a verb given batches loads the BLAS on a thread of its own while it reads and fuses the model
    # (bpcc_blas_preload): the library is opened by another thread than the main one; a verb that
    # runs no model does not open it at all
    strace -f -e trace=openat -o "$WORK/strace" "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm \
        --data "$WORK/batches" -o "$WORK/quant_bl.bpcc" --no-sqnr >/dev/null 2>&1
    main=$(head -n 1 "$WORK/strace" | cut -d' ' -f1)
    by=$(grep 'libopenblas' "$WORK/strace" | grep -v ENOENT | head -n 1 | cut -d' ' -f1)
    [ -n "$by" ] && [ "$by" != "$main" ] && ok || bad "quantize: libopenblas opened by thread '${by}', the main one is $main"
    strace -f -e trace=openat -o "$WORK/strace" "$BPCC" fuse "$FIX/torch/tiny_resnet.bpcc" -b fbgemm \
        -o "$WORK/fused_bl.bpcc" >/dev/null 2>&1
    [ -s "$WORK/fused_bl.bpcc" ] && ! grep -q libopenblas "$WORK/strace" && ok || bad "fuse opened libopenblas (or failed)"
    # SIGINT while the outputs are being written (at the first fsync: the weights' temporary complete,
    # the text's not begun; at the second: both complete, neither renamed): the process stops by the
    # signal, its temporaries are removed and the earlier output is left as it was (the temporaries
    # stayed behind before)
    printf 'an earlier model\n' > "$WORK/sig.bpcc"
    printf 'earlier weights\n' > "$WORK/sig.safetensors"
    for w in 1 2; do
        strace -f -o /dev/null -e trace=fsync -e inject=fsync:signal=SIGINT:when=$w "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" \
            -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/sig.bpcc" --no-sqnr --sync >/dev/null 2>&1
        rc=$?
        [ "$rc" -eq 130 ] && [ "$(cat "$WORK/sig.bpcc")" = "an earlier model" ] &&
            [ "$(cat "$WORK/sig.safetensors")" = "earlier weights" ] &&
            [ "$(find "$WORK" -maxdepth 1 -name '.sig*.tmp*' | wc -l)" -eq 0 ] && ok ||
            bad "SIGINT at fsync $w: exit $rc, or the earlier output changed, or temporaries left: $(find "$WORK" -maxdepth 1 -name '.sig*.tmp*')"
    done
fi
run "quantize needs data" 1 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm -o "$WORK/q2.bpcc" &&
    has "quantize needs data" "$ERR" "needs calibration batches: give --data"

# bpcc quantize made to fail at each stage: exit 1, the existing output (model and weights) untouched
printf 'an earlier model\n' > "$WORK/keep.bpcc"
printf 'earlier weights\n' > "$WORK/keep.safetensors"
mkbatch "$WORK/nan.safetensors" x 1 3 8 8
python3 -c 'import struct,sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-4:]=struct.pack("<f", float("nan")); open(p,"wb").write(b)' "$WORK/nan.safetensors"
untouched() { # untouched NAME: keep.bpcc / keep.safetensors still hold what they held, no temporary files
    [ "$(cat "$WORK/keep.bpcc")" = "an earlier model" ] && [ "$(cat "$WORK/keep.safetensors")" = "earlier weights" ] &&
        [ "$(find "$WORK" -maxdepth 1 -name '*.tmp*' | wc -l)" -eq 0 ] && ok || bad "$1: the existing output was touched"
}
run "quantize fails loading" 1 "$BPCC" quantize "$WORK/nonexistent.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/keep.bpcc" &&
    untouched "quantize fails loading"
run "quantize fails loading the config" 1 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b nonexistent -q fbgemm --data "$WORK/batches" -o "$WORK/keep.bpcc" &&
    untouched "quantize fails loading the config"
run "quantize fails preparing" 1 "$BPCC" quantize "$FIX/torch/tiny_functional.bpcc" -b fbgemm -q "$WORK/plain.yaml" --data "$WORK/batches" -o "$WORK/keep.bpcc" &&
    has "quantize fails preparing" "$ERR" "is a fixed-qparams op" && untouched "quantize fails preparing"
run "quantize fails calibrating" 1 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/nan.safetensors" -o "$WORK/keep.bpcc" &&
    has "quantize fails calibrating" "$ERR" "holds NaN" && untouched "quantize fails calibrating"
run "quantize fails checking the data" 1 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/wrong.safetensors" -o "$WORK/keep.bpcc" &&
    untouched "quantize fails checking the data"
mkdir -p "$WORK/blocked.safetensors"
printf 'an earlier model\n' > "$WORK/blocked.bpcc"
run "quantize fails saving the weights" 1 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/blocked.bpcc" &&
    { [ "$(cat "$WORK/blocked.bpcc")" = "an earlier model" ] && [ -d "$WORK/blocked.safetensors" ] &&
      [ "$(find "$WORK" -maxdepth 1 -name '*.tmp*' | wc -l)" -eq 0 ] && ok || bad "quantize fails saving: output touched"; }
# the model's own path a directory: refused before anything is written, where the weights file
# took its place first and the text's rename failed after (leaving adir.safetensors over what was there)
mkdir -p "$WORK/adir"
printf 'earlier weights\n' > "$WORK/adir.safetensors"
run "quantize into a directory" 1 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/adir" &&
    has "quantize into a directory" "$ERR" "adir: error: cannot write output: it is a directory" &&
    { [ "$(cat "$WORK/adir.safetensors")" = "earlier weights" ] && [ -z "$(ls -A "$WORK/adir")" ] &&
      [ "$(find "$WORK" -maxdepth 1 -name '*.tmp*' | wc -l)" -eq 0 ] && ok || bad "quantize into a directory: output touched"; }
run "fmt into a directory" 1 "$BPCC" fmt "$FIX/cat.bpcc" -o "$WORK/adir" &&
    { [ "$(cat "$WORK/adir.safetensors")" = "earlier weights" ] && ok || bad "fmt into a directory: weights touched"; }
# nor a FIFO (or a device: -o /dev/null as root replaced /dev/null with a regular file)
mkfifo "$WORK/fifo"
run "fmt into a fifo" 1 "$BPCC" fmt "$FIX/cat.bpcc" -o "$WORK/fifo" && has "fmt into a fifo" "$ERR" "it is not a regular file" &&
    { [ -p "$WORK/fifo" ] && [ ! -e "$WORK/fifo.safetensors" ] && ok || bad "fmt into a fifo: the fifo was replaced"; }
# an empty output name: the weights went to ./.safetensors and the text's rename failed after
BPCC_ABS=$(cd "$(dirname "$BPCC")" && pwd)/$(basename "$BPCC")
FIX_ABS=$(cd "$FIX" && pwd)
(cd "$WORK" && "$BPCC_ABS" fuse "$FIX_ABS/torch/tiny_resnet.bpcc" -b fbgemm -o "" 2>"$WORK/err_empty"; echo $? >"$WORK/rc_empty")
[ "$(cat "$WORK/rc_empty")" = 1 ] && grep -q "its file name is empty" "$WORK/err_empty" && [ ! -e "$WORK/.safetensors" ] && ok ||
    bad "fuse -o '': exit $(cat "$WORK/rc_empty"), $(cat "$WORK/err_empty")"
run "run into a directory" 1 "$BPCC" run "$FIX/torch/tiny_resnet.bpcc" --data "$WORK/batches/b1.safetensors" -o "$WORK/adir" &&
    has "run into a directory" "$ERR" "it is a directory"
# an output whose weights file is the input model's own (-o model.fused beside model.bpcc writes
# model.safetensors), or whose text would be its own weights file (-o out.safetensors): refused,
# where the first left the input naming weights it no longer held and the second wrote one file over the other
cp "$FIX/torch/tiny_resnet.bpcc" "$FIX/torch/tiny_resnet.safetensors" "$WORK/"
run "fuse over the input's weights" 1 "$BPCC" fuse "$WORK/tiny_resnet.bpcc" -b fbgemm -o "$WORK/tiny_resnet.fused" &&
    has "fuse over the input's weights" "$ERR" "is the weights file of the input model" &&
    cmp -s "$FIX/torch/tiny_resnet.safetensors" "$WORK/tiny_resnet.safetensors" && [ ! -e "$WORK/tiny_resnet.fused" ] && ok ||
    bad "fuse over the input's weights: the input's weights changed or an output was left"
run "quantize as a weights file" 1 "$BPCC" quantize "$WORK/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/q.safetensors" &&
    has "quantize as a weights file" "$ERR" "the model's text and its weights file would both be" &&
    { [ ! -e "$WORK/q.safetensors" ] && ok || bad "quantize as a weights file: an output was left"; }
run "fuse over the input itself" 0 "$BPCC" fuse "$WORK/tiny_resnet.bpcc" -b fbgemm -o "$WORK/tiny_resnet.bpcc" &&
    run "the input fused in place loads" 0 "$BPCC" show "$WORK/tiny_resnet.bpcc" &&
    has "the input fused in place loads" "$OUT" "ConvReLU2d"
run "quantize fails saving into no directory" 1 "$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/no/such/dir/q.bpcc" &&
    has "quantize fails saving into no directory" "$ERR" "no/such/dir"
run "convert fails" 1 "$BPCC" convert "$WORK/cal_in.bpcc" -b fbgemm -q fbgemm -o "$WORK/keep.bpcc" && untouched "convert fails"
run "calibrate fails" 1 "$BPCC" calibrate "$WORK/cal_in.bpcc" --data "$WORK/nan.safetensors" -o "$WORK/keep.bpcc" && untouched "calibrate fails"

# the numeric suite
run "compare weights" 0 "$BPCC" compare weights "$FIX/torch/tiny_resnet.bpcc" "$WORK/quant.bpcc" -b fbgemm &&
    has "compare weights header" "$OUT" "compare weights: 3 quantized weights" &&
    has "compare weights row" "$OUT" "torch.ao.nn.quantized.reference.Conv2d"
run "compare outputs" 0 "$BPCC" compare outputs "$FIX/torch/tiny_resnet.bpcc" "$WORK/quant.bpcc" --data "$WORK/batches" &&
    has "compare outputs header" "$OUT" "compare outputs:" && has "compare outputs batches" "$OUT" "nodes on 2 batches"
run "compare shadow json and html" 0 "$BPCC" compare shadow "$FIX/torch/tiny_resnet.bpcc" "$WORK/quant.bpcc" --data "$WORK/batches" --json --html "$WORK/cmp.html" &&
    printf '%s' "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); r=d["rows"]; assert d["kind"]=="shadow" and d["batches"]==2 and r and sorted(x["rank"] for x in r)==list(range(1,len(r)+1)) and all("shadow_sqnr_db" in x for x in r), d' 2>/dev/null &&
    [ -s "$WORK/cmp.html" ] && grep -q '<svg id="chart"' "$WORK/cmp.html" && ok || bad "compare shadow: json or html"
lacks "compare outputs: every node the same op" "$OUT" "another op"
# an onednn model against the float model fused for native: the blocks' last convs are folded
# convs on one side and conv+bn+add+relu on the other, so they are left out, and said so; fused
# for onednn, every one is compared
run "compare onednn as native" 0 "$BPCC" compare outputs "$FIX/torch/tiny_resnet.bpcc" "$WORK/quant_onednn.bpcc" --data "$WORK/batches" &&
    has "compare onednn as native says so" "$OUT" "another op in each, not compared: fuse FLOAT for QUANT's backend"
n_native=$(printf '%s\n' "$OUT" | sed -n 's/^compare outputs: \([0-9]*\) nodes.*/\1/p')
run "compare onednn" 0 "$BPCC" compare outputs "$FIX/torch/tiny_resnet.bpcc" "$WORK/quant_onednn.bpcc" --data "$WORK/batches" -b onednn &&
    lacks "compare onednn: every node the same op" "$OUT" "another op" &&
    has "compare onednn compares the fused blocks" "$OUT" "torch.ao.nn.intrinsic.ConvAddReLU2d"
n_onednn=$(printf '%s\n' "$OUT" | sed -n 's/^compare outputs: \([0-9]*\) nodes.*/\1/p')
[ -n "$n_native" ] && [ -n "$n_onednn" ] && [ "$n_onednn" -gt "$n_native" ] && ok || bad "compare onednn: $n_onednn nodes, as native $n_native"
run "compare needs data" 2 "$BPCC" compare outputs "$FIX/torch/tiny_resnet.bpcc" "$WORK/quant.bpcc" && has "compare needs data" "$ERR" "missing --data"
run "compare unknown mode" 2 "$BPCC" compare everything a b && has "compare unknown mode" "$ERR" "unknown comparison 'everything'"
run "compare one model" 2 "$BPCC" compare weights "$WORK/quant.bpcc" && has "compare one model" "$ERR" "needs FLOAT and QUANT"
run "compare nothing in common" 1 "$BPCC" compare weights "$FIX/torch/tiny_resnet.bpcc" "$FIX/torch/tiny_resnet.bpcc" &&
    has "compare nothing in common" "$ERR" "have no reference module"
run "compare bad data" 1 "$BPCC" compare outputs "$FIX/torch/tiny_resnet.bpcc" "$WORK/quant.bpcc" --data "$WORK/wrong.safetensors" --html "$WORK/bad.html" &&
    has "compare bad data" "$ERR" "wrong.safetensors: error: tensor 'x' has shape" &&
    { [ ! -e "$WORK/bad.html" ] && ok || bad "compare left a page after an error"; }

leftover=$(find "$WORK" -name '*.tmp*' | wc -l)
[ "$leftover" -eq 0 ] && ok || bad "temporary files left behind"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
