#!/bin/bash
# tools/jmap-test-suite.sh BIN OUT (see DEVELOPERS.md): fresh data dir, two accounts, serve on :8780, run jmap-test-suite, report to OUT.
# THROUGH_PROXY=1: the server with the accounts listens on :8779 and a second
# one, `serve --upstream http://127.0.0.1:8779/.well-known/jmap` (issue 19),
# on :8780, so the suite runs through the JMAP proxy.
BIN=$1; OUT=$2; D=/tmp/suite-data; rm -rf $D $D-proxy
PORT=8780; [ -n "${THROUGH_PROXY:-}" ] && PORT=8779
echo secret-primary | $BIN --data-dir $D account add primary@example.com --password-stdin >/dev/null
echo secret-secondary | $BIN --data-dir $D account add secondary@example.com --password-stdin >/dev/null
$BIN --data-dir $D serve --listen 127.0.0.1:$PORT --metrics-listen off > /tmp/suite-server.log 2>&1 &
PID=$!
if [ -n "${THROUGH_PROXY:-}" ]; then
  $BIN --data-dir $D-proxy serve --listen 127.0.0.1:8780 --metrics-listen off \
    --upstream http://127.0.0.1:8779/.well-known/jmap > /tmp/suite-proxy.log 2>&1 &
  PID="$PID $!"
fi
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:8780/.well-known/jmap && break; sleep 0.2; done
cd "${SUITE_DIR:-/tmp/suite}" && timeout 900 node --unhandled-rejections=warn dist/cli.js -c cfg.json -f -o $OUT > /tmp/suite-console.log 2>&1
echo "suite exit $?"
kill $PID; wait 2>/dev/null
python3 - "$OUT" <<'PY'
import json,sys,collections
r=json.load(open(sys.argv[1]))
res=r.get("results") or r.get("tests") or []
c=collections.Counter(t.get("status") for t in res)
print(dict(c))
PY
