#!/usr/bin/env python3
"""The benchmark harness: every comparison with PyTorch 1.13 in one run, on this machine, and the
generated part of docs/PERFORMANCE.md rewritten with the results (between the bench markers).

  1. graph passes alone (fuse + prepare + qparams + convert; calibration excluded) on resnet18, resnet50,
     mobilenet_v2, efficientnet_b0, densenet121: bpcc's library time against prepare_fx +
     convert_to_reference_fx (bench/passes_bench.py);
  2. the whole `bpcc quantize` process with one batch against PyTorch's flow, Python import
     excluded and included (bench/quantize_bench.py);
  3. calibration throughput, one thread, with MinMax observers and with the default fbgemm mapping
     (HistogramObserver) (bench/calibrate_bench.py);
  4. synthetic graphs of 1k to 1M nodes: time and peak memory of load + passes + print
     (bench/bench_passes --gen);
  5. loading the built-in backend configs (bench/bench_config_load, bench/torch_config_build.py).

usage: bench/run.py [BUILD_DIR] [--quick] [--no-write]
  --quick: fewer runs, two models, scale up to 100k nodes (a smoke run; the document is not
  rewritten).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "densenet121"]
BEGIN, END = "<!-- bench/run.py: begin -->", "<!-- bench/run.py: end -->"


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stderr[-3000:]))
    return r.stdout


def machine():
    cpu = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal"):
            mem = int(line.split()[1]) // (1024 * 1024)
    gcc = sh(["cc", "--version"]).splitlines()[0]
    torch_v = sh([PY, "-c", "import torch; print(torch.__version__)"]).strip()
    blas = "?"
    try:
        blas = sh(["dpkg-query", "-W", "-f=${Version}", "libopenblas0-pthread"]).strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return ("%s, %d cores, %d GiB, Linux %s; %s; PyTorch %s; OpenBLAS %s" %
            (cpu, os.cpu_count(), mem, platform.release(), gcc, torch_v, blas))


def clean_env():
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_NUM_THREADS", None)
    env["PYTHONPATH"] = os.path.join(ROOT, "tools", "python")
    return env


def one_blas_thread():
    """bench_passes's environment: the passes run on one thread, and OpenBLAS's workers (started for
    the calibration batch between them) would share the two cores"""
    env = clean_env()
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def passes(build, models, runs, tmp):
    out = os.path.join(tmp, "passes.json")
    print(sh([PY, os.path.join(HERE, "passes_bench.py"), build, "--runs", str(runs), "--json", out, *models],
             clean_env()), end="", flush=True)
    return json.load(open(out))


def quantize(build, models, runs, tmp):
    out = os.path.join(tmp, "quantize.json")
    env = clean_env()
    if os.path.isdir("/dev/shm"):
        env["TMPDIR"] = "/dev/shm"  # both tools write their output to memory: the tools, not this VM's disk
    print(sh([PY, os.path.join(HERE, "quantize_bench.py"), os.path.join(build, "bpcc"), "--runs", str(runs), "--json",
              out, *models], env), end="", flush=True)
    return json.load(open(out))


def calibrate(build, models, batches, histogram=False):
    rows = []
    for m in models:
        line = sh([PY, os.path.join(HERE, "calibrate_bench.py"), os.path.join(build, "bpcc"), m, str(batches)]
                  + (["--histogram"] if histogram else []), clean_env()).strip().splitlines()[-1]
        print(line, flush=True)
        f = re.findall(r"([0-9.]+) batches/s \[([0-9.]+)-([0-9.]+)\]", line)
        q = re.search(r"ratio ([0-9.]+) \[([0-9.]+)-([0-9.]+)\]", line)
        rows.append({"model": m, "bpcc": [float(x) for x in f[0]],
                     "bpcc_cli": float(re.search(r"; *([0-9.]+) with", line).group(1)),
                     "torch": [float(x) for x in f[-1]], "ratio": [float(x) for x in q.groups()]})
    return rows


# the phases whose instructions are counted: the qparams step runs inside bpcc_calibrate with the
# calibration batch, so it is left out of the count
COUNTED = ["bpcc_graph_load", "bpcc_fuse", "bpcc_prepare", "bpcc_convert", "bpcc_graph_print", "bpcc_graph_print_to"]


def instructions(exe, model, batch, nodes):
    """Instructions per input node of load + fuse + prepare + convert + print (callgrind, one run
    without rollback), or None without valgrind: constant across sizes means the work is linear, and
    the growth of the time per node is memory (cache and TLB misses, page faults)."""
    try:
        with tempfile.NamedTemporaryFile(suffix=".callgrind") as out:
            subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out.name]
                           + ["--toggle-collect=" + f for f in COUNTED]
                           + [exe, model, batch, "1", "-b", "native", "-q", os.path.join(HERE, "minmax.yaml"),
                              "--no-rollback"], capture_output=True, check=True, env=one_blas_thread())
            for line in open(out.name):
                if line.startswith("totals:"):
                    return int(line.split()[1]) / nodes
    except (OSError, subprocess.CalledProcessError):
        pass
    return None


def scale(build, sizes, tmp):
    import torch  # noqa: F401  (the batch file)
    sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
    from bpcc_torch import _safetensors as st
    batch = os.path.join(tmp, "s.safetensors")
    st.write(batch, [("x", torch.randn(1, 4, 4, 4))])
    exe = os.path.join(build, "bench", "bench_passes")
    rows = []
    for n in sizes:
        model = os.path.join(tmp, "s%d.bpcc" % n)
        sh([exe, "--gen", str(n), model])
        runs = 3 if n <= 100000 else 1
        both = []
        for extra in ([], ["--no-rollback"]):  # the library's default, and the bpcc tool's mode
            r = json.loads(sh([exe, model, batch, str(runs), "-b", "native", "-q", os.path.join(HERE, "minmax.yaml"),
                               *extra], one_blas_thread()))
            work = r["load"][0] + r["passes"][0] + r["print"][0]
            r["work_ms"] = work
            r["ns_per_node"] = work * 1e6 / r["nodes"]
            # one flow's peak (the first run's): later runs in the process start from a heap the
            # earlier ones fragmented, which a user's single flow never sees
            r["bytes_per_node"] = (r["peak_rss_after_kib"]["print"] - r["rss_before_kib"]) * 1024 / r["nodes"]
            print("scale %8d nodes%s: load %.1f  fuse %.1f  prepare %.1f  qparams %.1f  convert %.1f  print %.1f ms  = "
                  "%.1f ms (%.0f ns/node)  peak %.0f bytes/node" % (
                      r["nodes"], " without rollback" if extra else "", r["load"][0], r["fuse"][0], r["prepare"][0],
                      r["qparams"][0], r["convert"][0], r["print"][0], work, r["ns_per_node"], r["bytes_per_node"]),
                  flush=True)
            both.append(r)
        both[0]["no_rollback"] = both[1]
        if n <= 100000:
            both[0]["instructions_per_node"] = instructions(exe, model, batch, both[0]["nodes"])
        rows.append(both[0])
        for f in (model, model.replace(".bpcc", ".safetensors")):
            os.unlink(f)
    return rows


def config_load(build, runs):
    b = sh([os.path.join(build, "bench", "bench_config_load"), str(runs)])
    t = sh([PY, os.path.join(HERE, "torch_config_build.py"), str(runs)])
    print(b + t, end="", flush=True)
    return b, t


def ms(x):
    return "%.2f" % x if x < 100 else "%.0f" % x


def calibration_table(rows):
    return ["| model | bpcc (calibration run alone) | bpcc CLI (start, load, save; one run) | PyTorch eager with "
            "observers | ratio |", "|---|---|---|---|---|"] + [
        "| %s | %.2f batches/s [%.2f–%.2f] | %.2f | %.2f [%.2f–%.2f] | %.2f [%.2f–%.2f] |" % (
            r["model"], *r["bpcc"], r["bpcc_cli"], *r["torch"], *r["ratio"]) for r in rows]


def document(res):
    L = ["Generated by `bench/run.py` on %s (%s). Medians of the runs, [min–max] where several." %
         (time.strftime("%Y-%m-%d"), res["machine"]), ""]
    L += ["### 1. Graph passes (fuse + prepare + qparams + convert; calibration excluded)", "",
          "bpcc: library calls on the loaded model (weights already in memory; each pass with its rollback undo log, "
          "the library's default); \"qparams\" is the end of bpcc_calibrate, which turns each observer's statistics "
          "into scale and zero point (HistogramObserver's L2 search included): PyTorch does that inside "
          "convert_fx, so it is counted. PyTorch: prepare_fx (with its "
          "symbolic trace, as called by users) + convert_to_reference_fx; fbgemm backend, fbgemm mapping, one thread. "
          "\"weights read once\" is one pass over every float weight: the floor for passes that must read them "
          "(batch-norm folding reads and writes the conv weights, convert's weight observers read them).", "",
          "| model | nodes | bpcc fuse | prepare | qparams | convert | bpcc passes | weights read once | PyTorch | ratio |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["passes"]:
        b, t = r["bpcc"], r["torch"]
        L.append("| %s | %d | %s ms | %s ms | %s ms | %s ms | %s ms [%s–%s] | %s ms | %s ms [%s–%s] | %.0f× |" % (
            r["model"], b["nodes"], ms(b["fuse"][0]), ms(b["prepare"][0]), ms(b["qparams"][0]), ms(b["convert"][0]),
            ms(b["passes"][0]),
            ms(b["passes"][1]), ms(b["passes"][2]), ms(b["weights_read_ms"]), ms(t["passes"][0]), ms(t["passes"][1]),
            ms(t["passes"][2]), r["ratio"]))
    L += ["", "### 2. Whole process, one calibration batch [1, 3, 224, 224]", "",
          "bpcc: `bpcc quantize -b fbgemm -q fbgemm --no-sqnr --threads 1 --time` as a process (start, load, passes "
          "without rollback undo logs, the batch, save). PyTorch: prepare_fx + the batch + convert_to_reference_fx in a running Python (import "
          "excluded), and as a process that imports torch, loads the model (torch.load) and saves the result "
          "(import included). Outputs go to /dev/shm for both. bpcc's steps: the medians of what `--time` "
          "printed in its runs (load: the configs and the model; calibrate: the batch and the qparams; the "
          "process's start and exit are the rest). Peak memory: each process's peak resident set (its own "
          "rusage, medians), the model's mapped weights file included for bpcc, torch's import for PyTorch.", "",
          "| model | bpcc process | bpcc's steps (load, fuse, prepare, calibrate, convert, save) | PyTorch, import "
          "excluded | ratio | PyTorch process, import included | ratio | peak memory, bpcc / PyTorch's process |",
          "|---|---|---|---|---|---|---|---|"]
    for r in res["quantize"]:
        st = r.get("bpcc_steps_ms", {})
        steps = ", ".join("%.1f" % st[k] for k in ("load", "fuse", "prepare", "calibrate", "convert", "save") if k in st)
        L.append("| %s | %.3f s [%.3f–%.3f] | %s ms | %.3f s | %.1f× | %.2f s | %.1f× | %.0f / %.0f MB |" % (
            r["model"], *r["bpcc_process"], steps, r["torch_in_process"][0], r["ratio_import_excluded"],
            r["torch_process"][0], r["ratio_import_included"], r["bpcc_peak_mb"], r["torch_process_peak_mb"]))
    L += ["", "### 3. Calibration throughput, one thread (%d batches of [1, 3, 224, 224], MinMax observers)" %
          res["calib_batches"], "",
          "Both timed warm (one batch first, not counted), three pairs of runs taken in turn: medians [min–max]; "
          "the ratio is the median of the pairs' ratios [their range].", "",
          *calibration_table(res["calibrate"]),
          "", "The same with the default fbgemm mapping (HistogramObserver activations, per-channel MinMax "
          "weights: get_default_qconfig_mapping(\"fbgemm\"), and `-q fbgemm` in bpcc), the observers most "
          "users calibrate with:", "", *calibration_table(res["calibrate_histogram"])]
    L += ["", "### 4. Synthetic graphs (load + fuse + prepare + qparams + convert + print; one calibration batch "
          "between, not counted)", "",
          "Units of conv → bn → relu → conv → bn → relu → add → cat → conv → relu (convs without bias, batch norms "
          "without affine parameters: 0.7 tensors per node); native backend, MinMax mapping "
          "(bench/minmax.yaml). Memory: the first flow's peak resident set above the process's before the first load, per input node. "
          "The passes as the library runs them by default (each keeps an undo log to roll back with if it fails), and "
          "without rollback (bpcc_graph_set_rollback(g, false), and convert's qparam get_attr nodes left implicit, "
          "bpcc_graph_set_implicit_qparams: as the bpcc tool runs them).",
          "", "| nodes | load | fuse | prepare | qparams | convert | print | total | per node | peak memory per node "
          "| without rollback: total | per node | peak memory per node |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["scale"]:
        o = r["no_rollback"]
        L.append("| %d | %s ms | %s ms | %s ms | %s ms | %s ms | %s ms | %s ms | %.0f ns | %.0f bytes | %s ms | %.0f ns "
                 "| %.0f bytes |"
                 % (r["nodes"], ms(r["load"][0]), ms(r["fuse"][0]), ms(r["prepare"][0]), ms(r["qparams"][0]),
                    ms(r["convert"][0]),
                    ms(r["print"][0]), ms(r["work_ms"]), r["ns_per_node"], r["bytes_per_node"], ms(o["work_ms"]),
                    o["ns_per_node"], o["bytes_per_node"]))
    L += ["", "Where the time per node goes as the graph grows (the runs without rollback): the instructions "
          "per node of load + fuse + prepare + convert + print (callgrind, sizes up to 100k; the qparams step is "
          "left out, it runs inside bpcc_calibrate with the batch), the page faults per node (fresh memory the "
          "kernel zeroes) and the kernel time of the run.", "",
          "| nodes | instructions per node | page faults per node | kernel time |", "|---|---|---|---|"]
    for r in res["scale"]:
        o = r["no_rollback"]
        ipn = r.get("instructions_per_node")
        L.append("| %d | %s | %.2f | %s ms |" % (r["nodes"], "%.1fk" % (ipn / 1e3) if ipn else "not counted",
                                                o["first_run_page_faults"] / o["nodes"], ms(o["first_run_sys_ms"])))
    L += ["", "### 5. Loading the built-in backend configs", "", "```", res["config"][0].rstrip(), "",
          "PyTorch 1.13 get_*_backend_config()", res["config"][1].rstrip(), "```"]
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    models = MODELS[:1] + MODELS[2:3] if a.quick else MODELS
    res = {"machine": machine()}
    print(res["machine"], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        res["passes"] = passes(build, models, 2 if a.quick else 5, tmp)
        res["quantize"] = quantize(build, models, 1 if a.quick else 3, tmp)
        res["calib_batches"] = 2 if a.quick else 10
        res["calibrate"] = calibrate(build, models, res["calib_batches"])
        res["calibrate_histogram"] = calibrate(build, models, res["calib_batches"], histogram=True)
        res["scale"] = scale(build, [1000, 10000] if a.quick else [1000, 10000, 100000, 1000000], tmp)
        res["config"] = config_load(build, 20 if a.quick else 200)
    text = document(res)
    if a.quick or a.no_write:
        print(text)
        return
    path = os.path.join(ROOT, "docs", "PERFORMANCE.md")
    doc = open(path).read()
    if BEGIN in doc and END in doc:
        doc = doc[:doc.index(BEGIN) + len(BEGIN)] + "\n" + text + doc[doc.index(END):]
    else:
        doc = doc.rstrip() + "\n\n## Results\n\n" + BEGIN + "\n" + text + END + "\n"
    with open(path + ".tmp", "w") as f:
        f.write(doc)
    os.replace(path + ".tmp", path)
    print("wrote", path)


if __name__ == "__main__":
    main()
