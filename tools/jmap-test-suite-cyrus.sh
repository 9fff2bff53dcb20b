#!/bin/bash
# tools/jmap-test-suite-cyrus.sh BIN CYRUS_ROOT OUT_DIR (see DEVELOPERS.md; issue 45):
# jmapio/jmap-test-suite against a throwaway Cyrus IMAP 3.6's own JMAP
# (tools/cyrus-unpack.sh gives CYRUS_ROOT; accounts primary@ and
# secondary@example.com as in cfg.json) directly, then through
# `BIN serve --upstream` (the JMAP proxy) in front of the same Cyrus; writes
# OUT_DIR/direct.json and OUT_DIR/proxy.json and prints each run's counts
# and every test whose status differs. Cyrus on :8791 (IMAP) and :8792
# (HTTP), the proxy on :8793. The suite reads the session's URLs as
# absolute, Cyrus's are relative (`/jmap/`): run it from a suite whose
# dist/client/session.js resolves them (DEVELOPERS.md says how).
set -u
BIN=$(realpath "$1"); ROOT=$(realpath "$2"); OUT=$(realpath -m "$3"); SUITE=${SUITE_DIR:-/tmp/suite}
W=$(mktemp -d); chmod 755 "$W"; mkdir -p "$OUT"  # Cyrus runs as nobody under root
PYTHONPATH=tools python3 - "$ROOT" "$W/cyrus" <<'PY' > "$W/cyrus.log" 2>&1 &
import importlib.util, imaplib, os, signal, sys, time
here = os.path.join(os.getcwd(), "tools", "jmap-upstream-lag.py")
spec = importlib.util.spec_from_file_location("lag", here)
lag = importlib.util.module_from_spec(spec); spec.loader.exec_module(lag)
users = [("primary@example.com", "secret-primary"), ("secondary@example.com", "secret-secondary")]
master = lag.start_cyrus(sys.argv[1], sys.argv[2], 8791, 8792, users)
signal.signal(signal.SIGTERM, lambda *_: (os.killpg(master.pid, signal.SIGTERM), sys.exit(0)))
lag.wait_listening(8791); lag.wait_listening(8792)
for login, password in users:  # INBOX and the special-use folders
    imap = imaplib.IMAP4("127.0.0.1", 8791); imap.login(login, password); imap.logout()
open(sys.argv[2] + "/ready", "w").write("ready")
while True: time.sleep(3600)
PY
CYRUS=$!
for _ in $(seq 100); do [ -f "$W/cyrus/ready" ] && break; sleep 0.2; done
[ -f "$W/cyrus/ready" ] || { cat "$W/cyrus.log"; kill $CYRUS; exit 1; }
"$BIN" --data-dir "$W/proxy" serve --listen 127.0.0.1:8793 --metrics-listen off \
  --upstream http://127.0.0.1:8792/.well-known/jmap > "$W/proxy.log" 2>&1 &
PROXY=$!
for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:8793/.well-known/jmap && break; sleep 0.2; done
for run in direct:8792 proxy:8793; do
  name=${run%%:*}; port=${run##*:}
  sed "s|\"sessionUrl\": *\"[^\"]*\"|\"sessionUrl\":\"http://127.0.0.1:$port/.well-known/jmap\"|" \
    "$SUITE/cfg.json" > "$W/cfg-$name.json"
  (cd "$SUITE" && timeout 900 node --unhandled-rejections=warn dist/cli.js \
    -c "$W/cfg-$name.json" -f -o "$OUT/$name.json" > "$OUT/$name.log" 2>&1)
done
kill $PROXY; kill $CYRUS; wait 2>/dev/null
python3 - "$OUT/direct.json" "$OUT/proxy.json" <<'PY'
import collections, json, sys
runs = [{t["testId"]: t["status"] for t in json.load(open(p))["results"]} for p in sys.argv[1:]]
for name, run in zip(["direct", "proxy"], runs):
    print(name, dict(collections.Counter(run.values())))
for test in sorted(set(runs[0]) | set(runs[1])):
    if runs[0].get(test) != runs[1].get(test):
        print("differs:", test, runs[0].get(test), "->", runs[1].get(test))
PY
rm -rf "$W"
