#!/usr/bin/env bash
# Every section of the report and of the console, byte for byte, before (BEFORE=<commit>, required) and after (HEAD,
# or the commit given): what bench/kinds_identical.sh does not reach (it scores medical_record with rules judges).
# Not run in CI (two worktrees, five runs scored on each side, about 5 minutes); from the repository:
#   BEFORE=<commit> bench/report_identical.sh [AFTER_COMMIT]
# The run folders (bench/report_fixtures.py: the three rubric kinds' examples with their offline panels, one and
# two systems, a spot check, two reviewers' labels, a calibration, a metrics file) are built once by the before
# side; each side then renders them from the same path, one after the other:
#   - report RUN --lang zh and --lang en: report.md, report.html and what the command prints;
#   - reliability RUN, audit RUN, audit RUN --top 0 --lang en, compare (two runs; two systems of one): printed;
#   - score of each fixture's cases and config: what it prints.
# Printed output is captured at COLUMNS=120. The minute the reports were written is masked. Prints one line per
# output and exits 1 on any difference (the differing files are left in the work folder).
set -euo pipefail
ROOT=$(git rev-parse --show-toplevel)
PY="$ROOT/.venv/bin/python"
BEFORE=${BEFORE:?BEFORE=<commit> is required}
AFTER=${1:-HEAD}
WORK=$(mktemp -d /tmp/report_identical.XXXXXX)
trap 'git -C "$ROOT" worktree remove --force "$WORK/before" >/dev/null 2>&1 || true;
      git -C "$ROOT" worktree remove --force "$WORK/after" >/dev/null 2>&1 || true' EXIT
git -C "$ROOT" worktree add --detach "$WORK/before" "$BEFORE" >/dev/null 2>&1
git -C "$ROOT" worktree add --detach "$WORK/after" "$AFTER" >/dev/null 2>&1
echo "before $(git -C "$WORK/before" rev-parse --short HEAD), after $(git -C "$WORK/after" rev-parse --short HEAD), in $WORK"
export COLUMNS=120

cli() {  # cli SIDE ARGS...: the side's consensus-eval, run from its worktree; prints its stdout, never fails
  local side=$1; shift
  (cd "$WORK/$side" && PYTHONPATH="$WORK/$side" "$PY" -c "from consensus_eval.cli import app; app()" "$@" \
    2>/dev/null) || echo "exit $?"
}

(cd "$WORK/before" && PYTHONPATH="$WORK/before" "$PY" "$ROOT/bench/report_fixtures.py" "$WORK/fixtures")
RUNS="rules med two pdqi9 crit"
for side in before after; do
  got="$WORK/got/$side"; mkdir -p "$got"
  for run in $RUNS; do
    rm -rf "$WORK/run"; mkdir -p "$WORK/run"; cp -r "$WORK/fixtures/$run" "$WORK/run/$run"
    dir="$WORK/run/$run"
    for lang in zh en; do
      cli "$side" report "$dir" --lang "$lang" > "$got/$run.report.$lang.txt"
      src="$dir/report"; [[ -f "$dir/report.$lang.md" ]] && src="$dir/report.$lang"   # another language than the run's
      cp "$src.md" "$got/$run.$lang.md"; cp "$src.html" "$got/$run.$lang.html"
    done
    cli "$side" reliability "$dir" --bootstrap 200 > "$got/$run.reliability.txt"
    cli "$side" audit "$dir" > "$got/$run.audit.txt"
    cli "$side" audit "$dir" --top 0 --lang en > "$got/$run.audit.en.txt"
  done
  rm -rf "$WORK/run"; mkdir -p "$WORK/run"; cp -r "$WORK/fixtures/med" "$WORK/fixtures/rules" "$WORK/fixtures/two" "$WORK/run/"
  cli "$side" compare "$WORK/run/rules" "$WORK/run/med" > "$got/compare.runs.txt"
  cli "$side" compare "$WORK/run/two" --systems scribe-a,scribe-b --lang en > "$got/compare.systems.txt"
  for spec in "rules examples/cases.jsonl configs/default.yaml" "med examples/cases.jsonl configs/offline.yaml" \
              "two examples/cases_two_systems.jsonl configs/offline.yaml" \
              "pdqi9 examples/pdqi9/cases.jsonl configs/pdqi9.offline.yaml" \
              "crit examples/criteria/cases.jsonl configs/criteria.offline.yaml"; do
    set -- $spec
    rm -rf "$WORK/score"
    cli "$side" score "$2" -c "$3" --out "$WORK/score" > "$got/$1.score.txt"
  done
done

FAILED=0
for f in $(cd "$WORK/got/before" && ls); do
  a="$WORK/got/before/$f"; b="$WORK/got/after/$f"
  if [[ ! -f "$b" ]]; then echo "MISSING after: $f"; FAILED=1; continue; fi
  if cmp -s "$a" "$b"; then echo "same $f"; continue; fi
  sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} UTC/<written>/g' "$a" > "$WORK/masked.a"
  sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} UTC/<written>/g' "$b" > "$WORK/masked.b"
  if cmp -s "$WORK/masked.a" "$WORK/masked.b"; then echo "same (minute masked) $f"
  else echo "DIFFERENT $f"; FAILED=1; fi
done
if [[ $FAILED == 0 ]]; then
  echo "IDENTICAL: every report and console output, before and after"
  trap - EXIT; git -C "$ROOT" worktree remove --force "$WORK/before"; git -C "$ROOT" worktree remove --force "$WORK/after"
  rm -rf "$WORK"
else
  echo "DIFFERENCES FOUND (outputs in $WORK/got)"
fi
exit $FAILED
