#!/usr/bin/env bash
# The numeric suite's HTML page rendered by headless Chromium: the DOM Chromium builds holds one
# bar per compared node, the five worst highlighted in the chart and the table, and the table in
# the order of the JSON ranks. Exit 77 (skipped) when Chromium is not installed.
# usage: html_test.sh BPCC FIXTURES_DIR
set -u
BPCC=$1
FIX=$2
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$CHROME" ]; then
    echo "chromium not installed: skipping"
    exit 77
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/batches"
python3 - "$WORK/batches" <<'PY' || exit 1
import json, struct, sys
for b in range(2):
    n = 1 * 3 * 8 * 8
    data = struct.pack("<%df" % n, *[(((i + 17 * b) * 7919) % 23 - 11) / 8.0 for i in range(n)])
    h = json.dumps({"x": {"dtype": "F32", "shape": [1, 3, 8, 8], "data_offsets": [0, len(data)]}}).encode()
    h += b" " * (-len(h) % 8)
    open("%s/b%d.safetensors" % (sys.argv[1], b), "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
"$BPCC" quantize "$FIX/torch/tiny_resnet.bpcc" -b fbgemm -q fbgemm --data "$WORK/batches" -o "$WORK/q.bpcc" --no-sqnr >/dev/null || exit 1
"$BPCC" compare shadow "$FIX/torch/tiny_resnet.bpcc" "$WORK/q.bpcc" --data "$WORK/batches" --json --html "$WORK/page.html" >"$WORK/report.json" || exit 1
timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$WORK/profile" \
    --dump-dom "file://$WORK/page.html" >"$WORK/dom.html" 2>"$WORK/chrome.err"
if [ ! -s "$WORK/dom.html" ]; then
    echo "FAIL: Chromium rendered nothing"; cat "$WORK/chrome.err"; exit 1
fi
python3 - "$WORK/report.json" "$WORK/dom.html" <<'PY'
import json, sys
from html.parser import HTMLParser
report = json.load(open(sys.argv[1]))
rows = report["rows"]

class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.bars, self.worst_bars, self.table, self.worst_rows, self.cells = [], [], [], 0, None
        self.in_body = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class") or ""
        if tag == "rect" and "data-name" in a:
            self.bars.append(a["data-name"])
            if "worst" in cls.split():
                self.worst_bars.append(a["data-name"])
        if tag == "tbody":
            self.in_body = True
        if tag == "tr" and self.in_body:
            self.cells = []
            self.worst_rows += cls == "worst"
        if tag == "td" and self.cells is not None:
            self.cells.append("")
    def handle_data(self, data):
        if self.cells is not None and self.cells:
            self.cells[-1] += data
    def handle_endtag(self, tag):
        if tag == "tr" and self.cells:
            self.table.append(self.cells)
            self.cells = None

p = Page()
p.feed(open(sys.argv[2]).read())
fails = []
by_rank = [r["name"] for r in sorted(rows, key=lambda r: r["rank"])]
if p.bars != [r["name"] for r in rows]:
    fails.append("bars %s, want one per row in graph order %s" % (p.bars, [r["name"] for r in rows]))
if sorted(p.worst_bars) != sorted(by_rank[:5]):
    fails.append("highlighted bars %s, want the five worst %s" % (p.worst_bars, by_rank[:5]))
if [c[1] for c in p.table] != by_rank:
    fails.append("table order %s, want %s" % ([c[1] for c in p.table], by_rank))
if p.worst_rows != min(5, len(rows)):
    fails.append("%d highlighted table rows" % p.worst_rows)
if "vs" not in open(sys.argv[2]).read():
    fails.append("no title")
for f in fails:
    print("FAIL", f)
print("%d passed, %d failed" % (5 - len(fails), len(fails)))
sys.exit(1 if fails else 0)
PY
