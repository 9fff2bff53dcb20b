#!/bin/bash
# loadtest/capacity-before-after.sh BEFORE_BIN AFTER_BIN [SCENARIO]
#
# Capacity of two fastview builds on the same data, in one run: each build
# seeds its own data dir (ACCOUNTS x MESSAGES of CORPUS, so a schema change
# between them does not matter), then serves it pinned to core 0 while
# `fastview-loadtest capacity` runs on core 1 (LOADTEST, default the release
# build). Prints each search and the highest rate that held (ADR 0002).
set -euo pipefail
BEFORE=$1; AFTER=$2; SCENARIO=${3:-webmail}
ACCOUNTS=${ACCOUNTS:-100}; MESSAGES=${MESSAGES:-100}; P99=${P99_MS:-50}
CORPUS=${CORPUS:-$(dirname "$0")/../../shared/corpus}
LOADTEST=${LOADTEST:-$(dirname "$0")/../target/release/fastview-loadtest}
PORT=${PORT:-18101}
WORK=$(mktemp -d)
for side in before after; do
  BIN=$BEFORE; [ $side = after ] && BIN=$AFTER
  DATA=$WORK/$side
  "$BIN" --data-dir "$DATA" seed --accounts "$ACCOUNTS" --messages-per-account "$MESSAGES" \
    --from "$CORPUS" --password secret | tail -1
  taskset -c 0 "$BIN" --data-dir "$DATA" serve --listen 127.0.0.1:$PORT --metrics-listen off \
    > "$WORK/$side-server.log" 2>&1 &
  PID=$!
  for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$PORT/.well-known/jmap && break; sleep 0.2; done
  # serve's first blob collection runs at start, on the same core: measured
  # after it.
  for _ in $(seq 600); do grep -q "blob garbage collection" "$WORK/$side-server.log" && break; sleep 0.2; done
  echo "== $side: $BIN"
  taskset -c 1 "$LOADTEST" capacity --host http://127.0.0.1:$PORT --scenario "$SCENARIO" \
    --p99-ms "$P99" --accounts "$ACCOUNTS" --password secret || true
  kill $PID; wait $PID 2>/dev/null || true
done
rm -rf "$WORK"
