#!/usr/bin/env bash
# fxcc compile --report and --budget on the digits classifier, portable
# target: the weights-by-layer table must add up to the weight rows of the
# plan's own table (and to the 26,280 bytes of digits' six arrays); a budget
# one byte short of the weights or of the arena fails with exit 1, names the
# largest layer, and leaves the output folder as it was; a budget of exactly
# the sizes passes; malformed budgets are usage errors (exit 2).
# usage: compile_budget.sh FXCC WORK
set -euo pipefail
fxcc=$1
work=$2
here=$(cd "$(dirname "$0")/.." && pwd)
model="$here/examples/digits/digits.onnx"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

report=$("$fxcc" compile "$model" -o "$work/out" --target portable --report)
weights=$(echo "$report" | sed -n 's/^flash: \([0-9]*\) bytes of weights.*/\1/p')
arena=$(echo "$report" | sed -n 's/^RAM: *\([0-9]*\) bytes of arena.*/\1/p')
[ -n "$weights" ] && [ -n "$arena" ] || fail "--report prints no flash/RAM totals:
$report"
table_sum=$(echo "$report" | awk '$3 == "weight" { s += $4 } END { print s + 0 }')
layer_sum=$(echo "$report" | awk '/^weights by layer/ { on = 1; getline; next } /^flash:/ { on = 0 }
                                  on { s += $3 } END { print s + 0 }')
[ "$weights" = "$table_sum" ] && [ "$weights" = "$layer_sum" ] && [ "$weights" = 26280 ] ||
  fail "weights total $weights, layers sum $layer_sum, plan's weight rows $table_sum, digits has 26280"
plan_arena=$(echo "$report" | sed -n 's/^memory plan: arena \([0-9]*\) bytes.*/\1/p')
[ "$arena" = "$plan_arena" ] || fail "RAM line says $arena, the plan $plan_arena"
largest=$(echo "$report" | awk '/^weights by layer/ { getline; getline; print $1; exit }')
echo "ok: --report: $weights bytes of weights in $(echo "$report" | awk '/^weights by layer/ { on = 1; getline; next } /^flash:/ { on = 0 } on { n++ } END { print n }') layers (largest $largest), arena $arena"

"$fxcc" compile "$model" -o "$work/out" --target portable --budget "flash=$weights,ram=$arena" > /dev/null ||
  fail "a budget of exactly the sizes is refused"
before=$(ls -l --time-style=full-iso "$work/out")
for budget in "flash=$((weights - 1))" "ram=$((arena - 1))"; do
  for dir in "$work/out" "$work/fresh"; do
    set +e
    err=$("$fxcc" compile "$model" -o "$dir" --target portable --budget "$budget" 2>&1 > /dev/null)
    rc=$?
    set -e
    [ $rc -eq 1 ] || fail "--budget $budget: exit $rc, not 1"
    echo "$err" | grep -q "digits.onnx: over --budget" || fail "--budget $budget: the error names no file: $err"
  done
  [ ! -e "$work/fresh" ] || fail "--budget $budget: a refused compile wrote $work/fresh"
  [ "$(ls -l --time-style=full-iso "$work/out")" = "$before" ] ||
    fail "--budget $budget: a refused compile changed $work/out"
  case $budget in
    flash=*) echo "$err" | grep -q "largest layers: $largest " || fail "--budget $budget does not name $largest: $err" ;;
    ram=*) echo "$err" | grep -q "largest values in it: t_" || fail "--budget $budget names no arena value: $err" ;;
  esac
  echo "ok: --budget $budget: exit 1, nothing written: $err"
done

for budget in "" "flash=" "flash=0" "rom=1K" "flash=1K,flash=2K" "flash=12Q" "ram=1K,"; do
  set +e
  "$fxcc" compile "$model" -o "$work/bad" --budget "$budget" > /dev/null 2>&1
  rc=$?
  set -e
  [ $rc -eq 2 ] || fail "--budget '$budget': exit $rc, not 2"
done
echo "ok: malformed budgets are usage errors"

# --report-json (the firmware estimate; its figures against a real image are
# firmware_qemu's): the same weights and arena as --report, layers that add
# up, written only for the firmware targets and only by a compile that
# succeeds.
"$fxcc" compile "$model" -o "$work/json" --target cortex-m --report-json "$work/report.json" > /dev/null
json_weights=$(sed -n 's/.*"flash": {.*"weights": \([0-9]*\)}.*/\1/p' "$work/report.json")
json_arena=$(sed -n 's/.*"ram": {.*"arena": \([0-9]*\),.*/\1/p' "$work/report.json")
json_layers=$(grep -o '"weights": [0-9]*, "code"' "$work/report.json" | awk '{ s += $2 } END { print s + 0 }')
json_stack=$(sed -n 's/.*"stack": \([0-9]*\)}.*/\1/p' "$work/report.json" | head -1)
[ "$json_weights" = "$weights" ] && [ "$json_layers" = "$weights" ] ||
  fail "--report-json: weights $json_weights, layers $json_layers, --report $weights"
cm_arena=$("$fxcc" compile "$model" -o "$work/json" --target cortex-m --report |
           sed -n 's/^memory plan: arena \([0-9]*\) bytes.*/\1/p')
[ "$json_arena" = "$cm_arena" ] || fail "--report-json: arena $json_arena, --report $cm_arena"
(( json_stack > 0 )) || fail "--report-json: no stack figure"
for target in host portable; do
  set +e
  "$fxcc" compile "$model" -o "$work/json_$target" --target $target --report-json "$work/$target.json" \
    > /dev/null 2>&1
  rc=$?
  set -e
  if [ $target = host ]; then
    [ $rc -eq 2 ] && [ ! -e "$work/host.json" ] && [ ! -e "$work/json_host" ] ||
      fail "--report-json with --target host: exit $rc, not 2, or something written"
  else
    [ $rc -eq 0 ] && [ -s "$work/portable.json" ] || fail "--report-json with --target portable: exit $rc"
  fi
done
set +e
"$fxcc" compile "$model" -o "$work/json_fail" --target cortex-m --budget flash=1K \
  --report-json "$work/fail.json" > /dev/null 2>&1
rc=$?
set -e
[ $rc -eq 1 ] && [ ! -e "$work/fail.json" ] || fail "a refused compile (exit $rc) wrote --report-json"
echo "ok: --report-json: weights $json_weights in layers, arena $json_arena, stack $json_stack;" \
  "refused for the host, not written when the compile fails"
