#!/bin/bash
# tools/jmap-test-suite.sh BIN OUT (see DEVELOPERS.md): fresh data dir, two accounts, serve on :8780, run jmap-test-suite, report to OUT.
BIN=$1; OUT=$2; D=/tmp/suite-data; rm -rf $D
echo secret-primary | $BIN --data-dir $D account add primary@example.com --password-stdin >/dev/null
echo secret-secondary | $BIN --data-dir $D account add secondary@example.com --password-stdin >/dev/null
$BIN --data-dir $D serve --listen 127.0.0.1:8780 --metrics-listen off > /tmp/suite-server.log 2>&1 &
PID=$!
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:8780/.well-known/jmap && break; sleep 0.2; done
cd "${SUITE_DIR:-/tmp/suite}" && timeout 900 node --unhandled-rejections=warn dist/cli.js -c cfg.json -f -o $OUT > /tmp/suite-console.log 2>&1
echo "suite exit $?"
kill $PID; wait $PID 2>/dev/null
python3 - "$OUT" <<'PY'
import json,sys,collections
r=json.load(open(sys.argv[1]))
res=r.get("results") or r.get("tests") or []
c=collections.Counter(t.get("status") for t in res)
print(dict(c))
PY
