#!/bin/bash
# loadtest/proxy-compare.sh [SCENARIO...]   (default: adr-0013 webmail)
#
# Issue 19, ADR 0009: a JMAP server without partial reads or a projection
# (a standalone Fastview started with --read-levels off --fast-view off,
# like James before its ADRs) measured directly and through a Fastview JMAP
# proxy in front of it, in one run. The upstream seeds ACCOUNTS x MESSAGES
# of CORPUS; upstream and proxy share core 0, the load test runs on core 1.
# The proxy's mirror is filled first (every account's session fetched once,
# then the proxy's metrics watched until every message is stored). Per
# scenario, each side warmed up for 5 s first: `capacity` directly (from START_DIRECT users/hour, default 1,800),
# then through the proxy (from START_PROXY, default 36,000), each search up
# to MAX_RATE users/hour (default 14,400,000), then `--compare` of the two
# at RATE users/hour (default: the direct capacity).
#
# UPSTREAM=cyrus (issue 45 item 5): the upstream is a real Cyrus IMAP 3.6's
# JMAP instead, from CYRUS_ROOT (default $FASTVIEW_TEST_CYRUS_ROOT; see
# tools/cyrus-unpack.sh), run by tools/cyrus-serve.py on core 0 with users
# user1..userACCOUNTS@example.com in its sasldb and MESSAGES .eml files of
# CORPUS APPENDed over IMAP to each INBOX (the few whose preview Cyrus leaves
# out destroyed: the load test would fail each read of them); the rest is the
# same. P99_MS defaults to 500 there: Cyrus's own list view (Email/get of 30 with
# preview) takes ~50 ms alone, and no rate holds at 50.
set -euo pipefail
SCENARIOS=${*:-adr-0013 webmail}
ACCOUNTS=${ACCOUNTS:-100}; MESSAGES=${MESSAGES:-100}; P99=${P99_MS:-50}
CORPUS=${CORPUS:-$(dirname "$0")/../../shared/corpus}
BIN=${BIN:-$(dirname "$0")/../target/release/fastview}
LOADTEST=${LOADTEST:-$(dirname "$0")/../target/release/fastview-loadtest}
UP=127.0.0.1:18201; PROXY=127.0.0.1:18202; METRICS=127.0.0.1:18203
WORK=$(mktemp -d)
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
PIDS=(); trap cleanup EXIT
if [ "${UPSTREAM:-fastview}" = cyrus ]; then
  root=${CYRUS_ROOT:-${FASTVIEW_TEST_CYRUS_ROOT:?UPSTREAM=cyrus needs CYRUS_ROOT}}
  P99=${P99_MS:-500}
  chmod 755 "$WORK"  # Cyrus runs as nobody under root
  UP=127.0.0.1:18204
  taskset -c 0 python3 "$(dirname "$0")/../tools/cyrus-serve.py" "$root" "$WORK/cyrus" 18205 18204 \
    "$ACCOUNTS" "$MESSAGES" "$CORPUS" secret & PIDS+=($!)
  while [ ! -e "$WORK/cyrus/ready" ]; do
    kill -0 "${PIDS[0]}" 2>/dev/null || { echo "cyrus did not start"; exit 1; }
    sleep 1
  done
else
  "$BIN" --data-dir "$WORK/upstream" seed --accounts "$ACCOUNTS" --messages-per-account "$MESSAGES" \
    --from "$CORPUS" --password secret | tail -1
  taskset -c 0 "$BIN" --data-dir "$WORK/upstream" serve --listen $UP --metrics-listen off \
    --read-levels off --fast-view off > "$WORK/upstream.log" 2>&1 & PIDS+=($!)
fi
taskset -c 0 "$BIN" --data-dir "$WORK/proxy" serve --listen $PROXY --metrics-listen $METRICS \
  --upstream "http://$UP/.well-known/jmap" > "$WORK/proxy.log" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do
  curl -s -o /dev/null "http://$UP/.well-known/jmap" && curl -s -o /dev/null "http://$PROXY/.well-known/jmap" && break
  sleep 0.2
done
started=$(date +%s.%N)
for n in $(seq "$ACCOUNTS"); do
  curl -s -o /dev/null -u "user$n@example.com:secret" "http://$PROXY/.well-known/jmap"
done
want=$((ACCOUNTS * MESSAGES))
[ -e "$WORK/cyrus/ready" ] && want=$(cat "$WORK/cyrus/ready")
while :; do
  have=$(curl -s "http://$METRICS/metrics" | awk '/^fastview_upstream_fetched_messages_total /{print $2}')
  [ "${have%.*}" -ge "$want" ] 2>/dev/null && break
  sleep 0.5
done
echo "mirror filled: $want messages in $(echo "$(date +%s.%N) - $started" | bc) s"
for scenario in $SCENARIOS; do
  for side in direct proxy; do
    host=$UP; start=${START_DIRECT:-1800}
    [ $side = proxy ] && host=$PROXY && start=${START_PROXY:-36000}
    echo "== $scenario, $side (http://$host)"
    # Warm-up, not counted: 5 s at WARM users/hour (default 360,000), so the
    # proxy's first step is not each account's first query, forwarded and
    # compared (ADR 0009), and both sides start with warm caches.
    taskset -c 1 "$LOADTEST" --host "http://$host" --scenario "$scenario" \
      --users-per-hour "${WARM:-360000}" --duration 5s --accounts "$ACCOUNTS" --password secret \
      > /dev/null 2>&1 || true
    taskset -c 1 "$LOADTEST" capacity --host "http://$host" --scenario "$scenario" \
      --start-users-per-hour "$start" --max-users-per-hour "${MAX_RATE:-14400000}" \
      --p99-ms "$P99" --accounts "$ACCOUNTS" --password secret \
      | tee "$WORK/$scenario-$side.txt" || true
  done
  rate=${RATE:-$(sed -n 's/^highest rate that held: \([0-9]*\) users.*/\1/p' "$WORK/$scenario-direct.txt")}
  if [ -n "$rate" ]; then
    echo "== $scenario at $rate users/hour: direct (A) vs proxy (B)"
    taskset -c 1 "$LOADTEST" --host "http://$UP" --compare "http://$PROXY" --scenario "$scenario" \
      --users-per-hour "$rate" --duration 30s --accounts "$ACCOUNTS" --password secret || true
  fi
done
curl -s "http://$METRICS/metrics" | grep -E '^fastview_upstream_round_trips_total' || true
grep -E 'WARN|ERROR' "$WORK/proxy.log" | sort | uniq -c | sort -rn | head -20 || true
