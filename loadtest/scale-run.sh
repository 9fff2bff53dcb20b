#!/bin/bash
# loadtest/scale-run.sh DATA_DIR [SCENARIO...]
#
# Issue 15's scale run (ADR 0002): ACCOUNTS x MESSAGES of CORPUS seeded into
# DATA_DIR once (skipped when DATA_DIR/seeded exists; with DATABASE_URL the
# rows go to that PostgreSQL database, the blobs to DATA_DIR), then for each
# scenario (default: adr-0013 webmail) the server, pinned to core 0, serves
# while `fastview-loadtest` on core 1 runs it at USERS_PER_HOUR for DURATION
# with every account active (after its warm-up login of each). Prints the
# load test's table, then the server's anonymous memory (RssAnon: the mapped
# database file is not the server's memory), what its caches hold and how
# many Email/get calls were answered from metadata snapshots, and the CPU
# seconds the server and PostgreSQL's processes spent during the scenario
# (user + system, from /proc; PostgreSQL's only when DATABASE_URL is set).
#
# Environment: BIN, LOADTEST (default the release builds), ACCOUNTS (10000),
# MESSAGES (100), USERS_PER_HOUR (300000), DURATION (60s), CORPUS,
# DATABASE_URL, PORT (18104), METRICS_PORT (19104), SERVE_ARGS (more flags
# for `serve`).
set -euo pipefail
DATA=$1; shift
SCENARIOS=("$@"); [ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(adr-0013 webmail)
ROOT=$(dirname "$0")/..
BIN=${BIN:-$ROOT/target/release/fastview}
LOADTEST=${LOADTEST:-$ROOT/target/release/fastview-loadtest}
ACCOUNTS=${ACCOUNTS:-10000}; MESSAGES=${MESSAGES:-100}
USERS_PER_HOUR=${USERS_PER_HOUR:-300000}; DURATION=${DURATION:-60s}
CORPUS=${CORPUS:-$ROOT/../shared/corpus}
PORT=${PORT:-18104}; METRICS_PORT=${METRICS_PORT:-19104}
DB=(); [ -n "${DATABASE_URL:-}" ] && DB=(--database-url "$DATABASE_URL")

if [ ! -e "$DATA/seeded" ]; then
  start=$(date +%s)
  "$BIN" --data-dir "$DATA" "${DB[@]}" seed --accounts "$ACCOUNTS" \
    --messages-per-account "$MESSAGES" --from "$CORPUS" --password secret | tail -1
  echo "seeded in $(( $(date +%s) - start )) s"
  touch "$DATA/seeded"
fi

# shellcheck disable=SC2086
taskset -c 0 "$BIN" --data-dir "$DATA" "${DB[@]}" serve --listen 127.0.0.1:$PORT \
  --metrics-listen 127.0.0.1:$METRICS_PORT ${SERVE_ARGS:-} > "$DATA/server.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$PORT/.well-known/jmap && break; sleep 0.2; done
# CPU seconds (user + system) of the given processes.
cpu_seconds() {
  local ticks=0 pid
  for pid in "$@"; do
    [ -r "/proc/$pid/stat" ] || continue
    ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "scale=2; $ticks / $(getconf CLK_TCK)" | bc
}
postgres_pids() { [ -n "${DATABASE_URL:-}" ] && pgrep -x postgres || true; }
for scenario in "${SCENARIOS[@]}"; do
  echo "== $scenario at $USERS_PER_HOUR users/hour, $ACCOUNTS accounts active"
  server_before=$(cpu_seconds $PID)
  # shellcheck disable=SC2046
  postgres_before=$(cpu_seconds $(postgres_pids))
  taskset -c 1 "$LOADTEST" --host http://127.0.0.1:$PORT --scenario "$scenario" \
    --users-per-hour "$USERS_PER_HOUR" --duration "$DURATION" --accounts "$ACCOUNTS" \
    --password secret || true
  # shellcheck disable=SC2046
  echo "CPU seconds during the scenario: server $(echo "$(cpu_seconds $PID) - $server_before" | bc)," \
    "PostgreSQL $(echo "$(cpu_seconds $(postgres_pids)) - $postgres_before" | bc)"
  grep -E '^(RssAnon|VmRSS)' "/proc/$PID/status"
  curl -s http://127.0.0.1:$METRICS_PORT/metrics | grep -E '^fastview_(cache_(entries|bytes)|metadata_snapshots_total)'
done
