#!/bin/bash
# loadtest/wrk-email-get.sh BEFORE_BIN AFTER_BIN [LEVEL]
#
# Email/get of 30 ids over HTTP, two fastview builds on the same data in one
# run (issue 15's table, ADR 0002): each build seeds its own data dir
# (ACCOUNTS x MESSAGES of CORPUS); both serve at once, pinned to core 0, and
# wrk (4 connections) posts the same Email/get from core 1 to each in turn,
# ROUNDS rounds of ROUND each, so that a slow spell of the machine falls on
# both alike. LEVEL:
#   open      textBody, htmlBody, attachments, bodyValues, fetchAllBodyValues
#             (the message a user opens: the "full" row of issue 15)
#   fastview  the list view's properties (issue 20)
#   metadata  mailboxIds and keywords
# Prints each round's requests/s and the median of each build.
# Needs wrk (Debian's package), curl, python3.
set -euo pipefail
BEFORE=$1; AFTER=$2; LEVEL=${3:-open}
ACCOUNTS=${ACCOUNTS:-100}; MESSAGES=${MESSAGES:-100}
ROUNDS=${ROUNDS:-5}; ROUND=${ROUND:-5s}
CORPUS=${CORPUS:-$(dirname "$0")/../../shared/corpus}
PORT=${PORT:-18102}
WORK=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
# shellcheck source=loadtest/email-get-request.sh
. "$(dirname "$0")/email-get-request.sh"
AUTH=$(printf 'user1@example.com:secret' | base64)
api() { curl -s -H "Authorization: Basic $AUTH" -H 'Content-Type: application/json' "$1/jmap/api" -d "$2"; }
for side in before after; do
  BIN=$BEFORE; P=$PORT
  if [ $side = after ]; then BIN=$AFTER; P=$((PORT + 1)); fi
  "$BIN" --data-dir "$WORK/$side" seed --accounts "$ACCOUNTS" --messages-per-account "$MESSAGES" \
    --from "$CORPUS" --password secret | tail -1
  taskset -c 0 "$BIN" --data-dir "$WORK/$side" serve --listen 127.0.0.1:$P --metrics-listen off \
    > "$WORK/$side-server.log" 2>&1 &
  PIDS+=($!)
  URL=http://127.0.0.1:$P
  for _ in $(seq 50); do curl -s -o /dev/null $URL/.well-known/jmap && break; sleep 0.2; done
  email_get_request $URL "$LEVEL" "$WORK/$side.lua"
  echo "$side: $BIN at $URL ($LEVEL, 30 ids, a $(api $URL "$BODY" | wc -c)-octet answer)"
done
for round in $(seq "$ROUNDS"); do
  for side in before after; do
    P=$PORT; [ $side = after ] && P=$((PORT + 1))
    RATE=$(taskset -c 1 wrk -t 1 -c 4 -d "$ROUND" -s "$WORK/$side.lua" http://127.0.0.1:$P/jmap/api \
      | awk '/Requests\/sec/ {print $2}')
    echo "round $round $side $RATE req/s"
    echo "$RATE" >> "$WORK/$side.rates"
  done
done
for side in before after; do
  echo "$side median: $(sort -n "$WORK/$side.rates" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') req/s"
done
