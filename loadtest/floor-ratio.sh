#!/bin/bash
# loadtest/floor-ratio.sh [LEVEL...]
#
# Issue 20's benchmark (ADR 0003): Email/get of 30 ids against the HTTP +
# JSON floor, in one run. fastview (BIN, default the release build) seeds
# ACCOUNTS x MESSAGES of CORPUS and serves on core 0; for each LEVEL
# (default: fastview metadata) its answer to the Email/get is captured and
# `fastview-loadtest floor` (LOADTEST) serves those same octets, also on
# core 0; wrk (4 connections) on core 1 alternates between the two, ROUNDS
# rounds of ROUND each. Prints each round, the medians and fastview's share
# of the floor. LEVEL:
#   fastview  the list view's properties (target: at least 50 % of the floor)
#   metadata  mailboxIds and keywords (target: at least 60 %)
#   open      textBody, htmlBody, attachments, bodyValues, fetchAllBodyValues
# Needs wrk (Debian's package), curl, python3.
set -euo pipefail
LEVELS=("$@"); [ ${#LEVELS[@]} -eq 0 ] && LEVELS=(fastview metadata)
ROOT=$(dirname "$0")/..
BIN=${BIN:-$ROOT/target/release/fastview}
LOADTEST=${LOADTEST:-$ROOT/target/release/fastview-loadtest}
ACCOUNTS=${ACCOUNTS:-100}; MESSAGES=${MESSAGES:-100}
ROUNDS=${ROUNDS:-5}; ROUND=${ROUND:-5s}
CORPUS=${CORPUS:-$ROOT/../shared/corpus}
PORT=${PORT:-18111}
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
AUTH=$(printf 'user1@example.com:secret' | base64)
URL=http://127.0.0.1:$PORT
# shellcheck source=loadtest/email-get-request.sh
. "$(dirname "$0")/email-get-request.sh"
api() { curl -s -H "Authorization: Basic $AUTH" -H 'Content-Type: application/json' "$URL/jmap/api" -d "$1"; }

"$BIN" --data-dir "$WORK/data" seed --accounts "$ACCOUNTS" --messages-per-account "$MESSAGES" \
  --from "$CORPUS" --password secret | tail -1
taskset -c 0 "$BIN" --data-dir "$WORK/data" serve --listen 127.0.0.1:$PORT --metrics-listen off \
  > "$WORK/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do curl -s -o /dev/null $URL/.well-known/jmap && break; sleep 0.2; done
# serve's first blob collection runs at start, on the same core: measured
# after it.
for _ in $(seq 300); do grep -q "blob garbage collection" "$WORK/server.log" && break; sleep 0.2; done

for LEVEL in "${LEVELS[@]}"; do
  email_get_request $URL "$LEVEL" "$WORK/request.lua"
  api "$BODY" > "$WORK/$LEVEL.answer"
  FLOOR_PORT=$((PORT + 1))
  taskset -c 0 "$LOADTEST" floor --listen 127.0.0.1:$FLOOR_PORT --answer "$WORK/$LEVEL.answer" \
    2> "$WORK/floor.log" &
  FLOOR=$!
  for _ in $(seq 50); do curl -s -o /dev/null -d '{}' http://127.0.0.1:$FLOOR_PORT/jmap/api && break; sleep 0.2; done
  echo "== $LEVEL: Email/get of 30 ids, a $(wc -c < "$WORK/$LEVEL.answer")-octet answer"
  rm -f "$WORK"/*.rates
  for round in $(seq "$ROUNDS"); do
    for side in fastview floor; do
      P=$PORT; [ $side = floor ] && P=$FLOOR_PORT
      RATE=$(taskset -c 1 wrk -t 1 -c 4 -d "$ROUND" -s "$WORK/request.lua" http://127.0.0.1:$P/jmap/api \
        | awk '/Requests\/sec/ {print $2}')
      echo "round $round $side $RATE req/s"
      echo "$RATE" >> "$WORK/$side.rates"
    done
  done
  kill $FLOOR; wait $FLOOR 2>/dev/null || true
  median() { sort -n "$WORK/$1.rates" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  FV=$(median fastview); FL=$(median floor)
  echo "$LEVEL median: fastview $FV req/s, floor $FL req/s, fastview at $(python3 -c "print(f'{100 * $FV / $FL:.1f}')") % of the floor"
done
