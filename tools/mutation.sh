#!/usr/bin/env bash
# `make mutation`: mutmut over the scope in pyproject.toml [tool.mutmut], in a copy of the tree.
#
# mutmut writes a mutants/ folder next to the code, so it runs in a temporary copy of the
# working tree (tracked and untracked, not ignored files). A mutant that makes the Feistel
# cycle walk loop forever is not always stopped by mutmut's own timeout, so a watchdog
# kills any mutant worker that runs longer than MUTATION_LIMIT_S seconds (it counts as
# killed: a user would see a hang). The copy is kept (its path is printed) for
# `mutmut show NAME` and for re-running single mutants: `mutmut run NAME`.
set -euo pipefail
MUTMUT=${MUTMUT:-$PWD/.venv/bin/mutmut}
LIMIT=${MUTATION_LIMIT_S:-90}
COPY=${MUTATION_DIR:-$(mktemp -d /tmp/mrecord-mutation.XXXXXX)}
git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$COPY"
cd "$COPY"
"$MUTMUT" run --max-children "${MUTATION_JOBS:-2}" "$@" &
run=$!
(
  while kill -0 "$run" 2>/dev/null; do
    for pid in $(pgrep -P "$run" || true); do
      age=$(ps -o etimes= -p "$pid" 2>/dev/null | tr -d ' ' || true)
      if [[ -n "$age" && "$age" -gt "$LIMIT" ]]; then
        echo "mutation: killing mutant worker $pid after ${age}s: $(ps -o args= -p "$pid" || true)"
        kill -9 "$pid" 2>/dev/null || true
      fi
    done
    sleep 5
  done
) &
watchdog=$!
status=0
wait "$run" || status=$?
wait "$watchdog" || true
echo
echo "mutation: survivors (copy kept in $COPY; 'cd $COPY && $MUTMUT show NAME' shows one):"
"$MUTMUT" results | grep -v "not checked" || true  # a run of named mutants leaves the rest unchecked
exit "$status"
