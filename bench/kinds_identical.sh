#!/usr/bin/env bash
# medical_record's outputs byte for byte before rubric kinds (6598aa8, or BEFORE=<commit>) and after (HEAD, or the
# commit given):
# issue 24's "byte-identical before and after, on the examples and a 300 x 3 run". Not run in CI (it builds two
# worktrees and scores 300 cases three times on each side); run from the repository:
#   bench/kinds_identical.sh [AFTER_COMMIT]
#   BEFORE=e2b385f bench/kinds_identical.sh       # another starting point (issue 26's plain read models)
# Each side runs its own code (PYTHONPATH=its worktree, the same venv) from its own worktree (its configs,
# prompts, examples). Three comparisons:
#   1. `score examples/cases.jsonl` (default config, the rules judge): every output file byte for byte, except
#      what a live run measures (judgments.jsonl's latency_s; in results.sqlite the calls' latency_s and
#      finished_at) and the minute the reports were written: a file that is not the same byte for byte is
#      compared with those masked ("same (timings masked)"), the store by its schema and rows;
#   2. `score` of 300 cases (tests/big_run.big_cases) with a panel of 3 rules judges, compared the same way;
#   3. one store rebuilt by each side (`rebuild`, from the same results.sqlite: the before side's 300 x 3 run
#      and tests/big_run.build_big_run(300 cases, 3 judges) written by the before side): every output file,
#      judgments.jsonl included, byte for byte; results.sqlite (which the opening side may migrate) by its
#      schema and rows;
#   4. the other kinds: `score` of examples/pdqi9 (likert) and examples/criteria (criteria) with their offline
#      panels (configs/<set>.offline.yaml, simulated judges), compared as in 1.
# Outputs go to folders of the same name on both sides (.../before/out, .../after/out): the reports name it.
# Prints one line per file and exits 1 on any difference.
set -euo pipefail
ROOT=$(git rev-parse --show-toplevel)
PY="$ROOT/.venv/bin/python"
BEFORE=${BEFORE:-6598aa8}
AFTER=${1:-HEAD}
WORK=$(mktemp -d /tmp/kinds_identical.XXXXXX)
trap 'git -C "$ROOT" worktree remove --force "$WORK/before" >/dev/null 2>&1 || true;
      git -C "$ROOT" worktree remove --force "$WORK/after" >/dev/null 2>&1 || true' EXIT
git -C "$ROOT" worktree add --detach "$WORK/before" "$BEFORE" >/dev/null 2>&1
git -C "$ROOT" worktree add --detach "$WORK/after" "$AFTER" >/dev/null 2>&1
echo "before $(git -C "$WORK/before" rev-parse --short HEAD), after $(git -C "$WORK/after" rev-parse --short HEAD), in $WORK"

cli() {  # cli SIDE ARGS...: the side's consensus-eval, run from its worktree
  local side=$1; shift
  (cd "$WORK/$side" && PYTHONPATH="$WORK/$side" "$PY" -c "from consensus_eval.cli import app; app()" "$@")
}

py() {  # py SIDE CODE ARGS...: Python with the side's code, from its worktree
  local side=$1 code=$2; shift 2
  (cd "$WORK/$side" && PYTHONPATH="$WORK/$side" "$PY" -c "$code" "$@")
}

MASK='
import json, re, sqlite3, sys
path, out = sys.argv[1], sys.argv[2]
if path.endswith(".jsonl"):
    text = open(path, encoding="utf-8").read()
    open(out, "w", encoding="utf-8").write(re.sub(r"\"latency_s\": [0-9.e+-]+", "\"latency_s\": null", text))
elif path.endswith((".md", ".html")):  # the reports say when they were written, to the minute
    text = open(path, encoding="utf-8").read()
    open(out, "w", encoding="utf-8").write(re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "<written>", text))
else:
    db = sqlite3.connect(path)
    with open(out, "w", encoding="utf-8") as f:
        for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name"):
            f.write(" ".join(sql.split()) + "\n")  # the schema, blanks normalised
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = \"table\" ORDER BY name"):
            cols = [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
            keep = [c for c in cols if c not in ("latency_s", "finished_at")]
            f.write(f"== {table} {keep}\n")
            names = ", ".join(keep)
            for row in db.execute(f"SELECT {names} FROM {table} ORDER BY {names}"):
                if table == "meta" and row[0] == "inputs":  # where each side keeps its input files (its worktree)
                    continue
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
'

FAILED=0
compare() {  # compare DIR_BEFORE DIR_AFTER MASKED_FILES...: every file byte for byte (the masked ones masked)
  local a=$1 b=$2; shift 2
  local masked=" $* "
  for f in $(cd "$a" && ls); do
    if [[ ! -f "$b/$f" ]]; then echo "MISSING after: $f"; FAILED=1; continue; fi
    if [[ "$masked" == *" $f "* ]]; then
      "$PY" -c "$MASK" "$a/$f" "$WORK/masked.a"; "$PY" -c "$MASK" "$b/$f" "$WORK/masked.b"
      if cmp -s "$a/$f" "$b/$f"; then echo "same $f"
      elif cmp -s "$WORK/masked.a" "$WORK/masked.b"; then echo "same (timings masked) $f"
      else echo "DIFFERENT $f"; FAILED=1; fi
    elif cmp -s "$a/$f" "$b/$f"; then echo "same $f"; else echo "DIFFERENT $f"; FAILED=1; fi
  done
  for f in $(cd "$b" && ls); do [[ -f "$a/$f" ]] || { echo "EXTRA after: $f"; FAILED=1; }; done
}

echo "== 1. score examples/cases.jsonl, default config"
for side in before after; do cli "$side" score examples/cases.jsonl --out "$WORK/ex/$side/out" >/dev/null 2>&1; done
compare "$WORK/ex/before/out" "$WORK/ex/after/out" judgments.jsonl results.sqlite report.md report.html

echo "== 2. score 300 cases x 3 rules judges"
printf 'rubric: medical_record\nruns: 1\nimportant_runs: 3\njudges:\n  - {name: rules-a, kind: rules}\n  - {name: rules-b, kind: rules}\n  - {name: rules-c, kind: rules}\n' > "$WORK/panel3.yaml"
py before '
import json, sys
from tests.big_run import big_cases
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for c in big_cases(300):
        f.write(json.dumps(c.model_dump(mode="json"), ensure_ascii=False) + "\n")
' "$WORK/cases300.jsonl"
for side in before after; do
  cli "$side" score "$WORK/cases300.jsonl" -c "$WORK/panel3.yaml" --out "$WORK/big/$side/out" >/dev/null 2>&1
done
compare "$WORK/big/before/out" "$WORK/big/after/out" judgments.jsonl results.sqlite report.md report.html

echo "== 3a. the before side's 300 x 3 store, rebuilt by each side"
for side in before after; do
  mkdir -p "$WORK/rb/$side/out" && cp "$WORK/big/before/out/results.sqlite" "$WORK/rb/$side/out/"
  py "$side" 'import sys; from consensus_eval import api; api.rebuild(sys.argv[1])' "$WORK/rb/$side/out"
done
compare "$WORK/rb/before/out" "$WORK/rb/after/out" results.sqlite report.md report.html

echo "== 3b. tests/big_run.build_big_run(300 cases, 3 judges), rebuilt by each side"
py before 'import sys; from pathlib import Path; from tests.big_run import build_big_run; build_big_run(Path(sys.argv[1]), 300, 3)' "$WORK/bb/src"
for side in before after; do
  mkdir -p "$WORK/bb/$side/out" && cp "$WORK/bb/src/results.sqlite" "$WORK/bb/$side/out/"
  py "$side" 'import sys; from consensus_eval import api; api.rebuild(sys.argv[1])' "$WORK/bb/$side/out"
done
compare "$WORK/bb/before/out" "$WORK/bb/after/out" results.sqlite report.md report.html

echo "== 4. examples/pdqi9 (likert) and examples/criteria (criteria), their offline panels"
for set in pdqi9 criteria; do
  for side in before after; do
    cli "$side" score "examples/$set/cases.jsonl" -c "configs/$set.offline.yaml" --out "$WORK/k/$set/$side/out" \
      >/dev/null 2>&1
  done
  compare "$WORK/k/$set/before/out" "$WORK/k/$set/after/out" judgments.jsonl results.sqlite report.md report.html
done

if [[ $FAILED == 0 ]]; then echo "IDENTICAL: every output, before and after"; else echo "DIFFERENCES FOUND"; fi
exit $FAILED
