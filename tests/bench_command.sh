#!/usr/bin/env bash
# `fxcc bench` on the bench's MLP (bench/make_models.py, made once into WORK):
#   - with the test Python (onnxruntime): exit 0, the JSON has c, interp and ort
#     rows with status ok, ms > 0, outputs within the tolerance, every ratio
#     equal to backend_ms / c_ms and every GFLOP/s to 2 x MACs / ms, the MACs
#     counted here from the model's Gemm weights; two rounds, each row's ms
#     the least of its two round medians;
#   - an input of the wrong shape: exit 1, the error names the file and both
#     types, no JSON file;
#   - --rtol 0 (no difference allowed): a row is WRONG, its time left out,
#     exit 1;
#   - --python /nonexistent: ORT and torch "not available", checked against
#     the interpreter, exit 0;
#   - no work folder is left behind by a run that succeeded.
# Exit 77 (skipped) when PYTHON lacks numpy, onnx or onnxruntime.
# usage: bench_command.sh FXCC WORK PYTHON
set -euo pipefail
fxcc=$1
work=$2
python=$3
cd "$(dirname "$0")/.."
if ! "$python" -c "import numpy, onnx, onnxruntime" 2> /dev/null; then
  echo "skipped: $python cannot import numpy, onnx and onnxruntime"
  exit 77
fi
mkdir -p "$work"
[ -f "$work/mlp.onnx" ] || "$python" bench/make_models.py "$work" --models mlp > "$work/make_models.log"
model=$work/mlp.onnx
input=$work/mlp_input.npy
rm -rf "$work/tmp" "$work"/*.json
mkdir "$work/tmp"
export TMPDIR=$work/tmp
# Short runs: the figures are checked for consistency, not for speed.
fast=(--repeat 3 --min-round-ms 0 --warmup 1 --rounds 2)

fail() {
  echo "FAIL: $*"
  exit 1
}
# fxcc bench's work folders in TMPDIR (other files there are the children's:
# ONNX Runtime writes a .ses file)
leftovers() {
  find "$work/tmp" -maxdepth 1 -name 'fxcc-bench-*'
}

# fxcc bench --help and a bad option
"$fxcc" bench --help | grep -q "usage: fxcc bench" || fail "--help"
rc=0
"$fxcc" bench "$model" --skip gpu > /dev/null 2> "$work/usage.err" || rc=$?
[ $rc -eq 2 ] || fail "--skip gpu gave exit $rc, not 2"
grep -q "skip" "$work/usage.err" || fail "--skip gpu: $(cat "$work/usage.err")"
rc=0
"$fxcc" bench "$model" --rounds 0 > /dev/null 2> "$work/usage.err" || rc=$?
[ $rc -eq 2 ] || fail "--rounds 0 gave exit $rc, not 2"
grep -q "rounds" "$work/usage.err" || fail "--rounds 0: $(cat "$work/usage.err")"

# 1. the full run
"$fxcc" bench "$model" "$input" --python "$python" "${fast[@]}" --json "$work/ok.json" \
  > "$work/ok.out" 2> "$work/ok.err" || fail "bench exited $?: $(cat "$work/ok.err")"
cat "$work/ok.out"
for want in "threads=1" "Identity model" "MACs per run: 268800" "generated C" "onnxruntime"; do
  grep -q "$want" "$work/ok.out" || fail "the table has no '$want'"
done
"$python" - "$work/ok.json" "$model" << 'EOF'
import json, sys
import onnx
from onnx import numpy_helper
j = json.load(open(sys.argv[1]))
m = onnx.load(sys.argv[2])
# MACs of the MLP: one per weight element of each Gemm, batch 1.
w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
macs = sum(w[n.input[1]].size for n in m.graph.node if n.op_type == "Gemm")
assert macs == 784 * 256 + 256 * 256 + 256 * 10, macs
assert j["macs"] == macs, (j["macs"], macs)
assert j["threads"] == 1 and j["reference"] == "ort" and j["rtol"] == 1e-3, j
assert j["rounds"] == 2, j["rounds"]
assert j["ort_binding_subtracted"] in (True, False) and j["ort_binding_ms"] > 0, j
rows = {r["name"]: r for r in j["backends"]}
assert list(rows) == ["c", "interp", "ort", "torch"], list(rows)
c_ms = rows["c"]["ms"]
for name in ("c", "interp", "ort"):
    r = rows[name]
    assert r["status"] == "ok", r
    assert r["ms"] > 0 and r["repeat"] == 3, r
    assert len(r["round_ms"]) == 2 and r["ms"] == min(r["round_ms"]), r
    assert r["max_abs"] is not None and 0 <= r["max_rel"] <= 1e-3, r
    assert abs(r["ratio"] - r["ms"] / c_ms) <= 1e-6 * r["ratio"], r
    gflops = 2 * macs / (r["ms"] * 1e6)
    assert abs(r["gflops"] - gflops) <= 1e-6 * gflops, (r, gflops)
assert rows["ort"]["max_abs"] == 0, rows["ort"]  # the reference
t = rows["torch"]
assert t["status"] == "ok" or (t["status"] == "not available" and t["reason"] and t["ms"] is None), t
print("ok.json: consistent")
EOF
[ -z "$(leftovers)" ] || fail "a work folder was left: $(leftovers)"

# 2. an input of the wrong shape: a clear error, nothing written
"$python" -c "import numpy as np; np.save('$work/wrong_input.npy', np.zeros((1, 10), np.float32))"
rc=0
"$fxcc" bench "$model" "$work/wrong_input.npy" --python "$python" "${fast[@]}" \
  --json "$work/wrong_shape.json" > /dev/null 2> "$work/wrong_shape.err" || rc=$?
cat "$work/wrong_shape.err"
[ $rc -eq 1 ] || fail "a wrong input shape gave exit $rc, not 1"
grep -q "wrong_input.npy: holds float32\[1, 10\], but input 0 ('input') of .*mlp.onnx is float32\[1, 784\]" \
  "$work/wrong_shape.err" || fail "the wrong-shape error does not name the file and both types"
[ ! -e "$work/wrong_shape.json" ] || fail "a failed bench wrote its JSON file"
[ -z "$(leftovers)" ] || fail "a failed bench left a work folder: $(leftovers)"

# 3. no difference allowed: the C (or the interpreter) is WRONG, exit 1
rc=0
"$fxcc" bench "$model" "$input" --python "$python" "${fast[@]}" --rtol 0 \
  --json "$work/rtol0.json" > "$work/rtol0.out" 2> "$work/rtol0.err" || rc=$?
cat "$work/rtol0.out" "$work/rtol0.err"
[ $rc -eq 1 ] || fail "--rtol 0 gave exit $rc, not 1"
grep -q "^WRONG: " "$work/rtol0.out" || fail "--rtol 0: no WRONG line before the table"
grep -q "differ from the reference" "$work/rtol0.err" || fail "--rtol 0: no error on stderr"
"$python" - "$work/rtol0.json" << 'EOF'
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))["backends"]}
wrong = [r for r in rows.values() if r["status"] == "wrong"]
assert wrong, rows
for r in wrong:
    assert r["ms"] is None and r["ratio"] is None and r["gflops"] is None, r
    assert r["max_abs"] > 0 and "differs from onnxruntime" in r["reason"], r
assert rows["ort"]["status"] == "ok", rows["ort"]
print("rtol0.json: %s wrong" % ", ".join(r["name"] for r in wrong))
EOF
[ -n "$(leftovers)" ] || fail "the WRONG run did not keep its work folder"
rm -rf "$work"/tmp/fxcc-bench-*

# 4. no Python: ORT and torch not available, the interpreter is the reference
"$fxcc" bench "$model" --python /nonexistent "${fast[@]}" --json "$work/nopython.json" \
  > "$work/nopython.out" 2> "$work/nopython.err" || fail "bench without Python exited $?: $(cat "$work/nopython.err")"
cat "$work/nopython.out"
grep -q "not available: cannot run /nonexistent" "$work/nopython.out" || fail "no 'not available' row"
"$python" - "$work/nopython.json" << 'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["reference"] == "interp", j["reference"]
assert j["inputs"][0]["file"] is None, j["inputs"]  # random inputs
rows = {r["name"]: r for r in j["backends"]}
for name in ("ort", "torch"):
    assert rows[name]["status"] == "not available" and "/nonexistent" in rows[name]["reason"], rows[name]
assert rows["c"]["status"] == "ok" and rows["c"]["max_rel"] <= 1e-3, rows["c"]
assert rows["interp"]["status"] == "ok" and rows["interp"]["max_abs"] == 0, rows["interp"]
print("nopython.json: ok")
EOF
[ -z "$(leftovers)" ] || fail "a work folder was left: $(leftovers)"
echo "bench_command: all checks passed"
