#!/usr/bin/env bash
# `make mutation`: mutmut over the groups of pyproject.toml [tool.mrecord-mutation.*], each in
# a copy of the tree.
#
# mutmut writes a mutants/ folder next to the code, so each group runs in a temporary copy of
# the working tree (tracked and untracked, not ignored files), whose pyproject's [tool.mutmut]
# is rewritten to the group's packages and tests: a mutant of format/ then runs only the
# format tests that cover the mutated function. MUTATION_GROUPS picks groups (default: all,
# in file order); arguments are passed to `mutmut run` (mutant names or globs such as
# 'mrecord.format.page.*'); MUTATION_PATHS (space-separated files or folders) narrows what a
# group mutates. A mutant that makes the Feistel cycle walk loop forever is not always stopped
# by mutmut's own timeout, so a watchdog kills any mutant worker (a process mutmut titles
# "mutmut: NAME") that has used more than MUTATION_LIMIT_S seconds of CPU (it counts as
# killed: a user would see a hang). CPU, not wall-clock, time: on a loaded machine a slow
# worker is not a hung one. The copies are kept (their paths are printed) for
# `mutmut show NAME` and for re-running single mutants: `mutmut run NAME`. MUTATION_DIR
# reuses a folder (and mutmut's cached results).
set -euo pipefail
MUTMUT=${MUTMUT:-$PWD/.venv/bin/mutmut}
PYTHON=${PYTHON:-$(dirname "$MUTMUT")/python}
LIMIT=${MUTATION_LIMIT_S:-90}
ROOT=${MUTATION_DIR:-$(mktemp -d /tmp/mrecord-mutation.XXXXXX)}
GROUPS_WANTED=${MUTATION_GROUPS:-$("$PYTHON" -c '
import tomllib
print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["mrecord-mutation"]))')}

run_group() {
  local group=$1 copy=$2
  shift 2
  mkdir -p "$copy"
  git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$copy"
  cd "$copy"
  # The group's [tool.mutmut]: its packages, and those of its test files that exist.
  "$PYTHON" - "$group" <<'PY'
import json, os, re, sys, tomllib
text = open("pyproject.toml").read()
group = tomllib.loads(text)["tool"]["mrecord-mutation"][sys.argv[1]]
tests = [t for t in group["tests"] if os.path.exists(t)]
paths = os.environ.get("MUTATION_PATHS", "").split() or group["source_paths"]
table = (
    "[tool.mutmut]\n"
    f"source_paths = {json.dumps(paths)}\n"
    f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
    'also_copy = ["reliability", "harness", "examples", "tests", "benchmarks", "mrecord"]\n'
)
text, n = re.subn(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[)", table + "\n", text)
assert n == 1, "pyproject.toml has no [tool.mutmut] table followed by another table"
open("pyproject.toml", "w").write(text)
PY
  local status=0
  "$MUTMUT" run --max-children "${MUTATION_JOBS:-2}" "$@" &
  local run=$!
  (
    while kill -0 "$run" 2>/dev/null; do
      for pid in $(pgrep -P "$run" || true); do
        [[ "$(ps -o args= -p "$pid" 2>/dev/null || true)" == "mutmut: "* ]] || continue
        age=$(ps -o times= -p "$pid" 2>/dev/null | tr -d ' ' || true)
        if [[ -n "$age" && "$age" -gt "$LIMIT" ]]; then
          echo "mutation: killing mutant worker $pid after ${age} CPU s: $(ps -o args= -p "$pid" || true)"
          kill -9 "$pid" 2>/dev/null || true
        fi
      done
      sleep 5
    done
  ) &
  local watchdog=$!
  wait "$run" || status=$?
  wait "$watchdog" || true
  echo
  echo "mutation: $group survivors (copy kept in $copy; 'cd $copy && $MUTMUT show NAME' shows one):"
  "$MUTMUT" results | grep -v "not checked" || true  # a run of named mutants leaves the rest unchecked
  return "$status"
}

status=0
for group in $GROUPS_WANTED; do
  (run_group "$group" "$ROOT/$group" "$@") || status=$?
done
exit "$status"
