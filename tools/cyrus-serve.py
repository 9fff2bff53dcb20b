#!/usr/bin/env python3
"""Runs a throwaway Cyrus IMAP 3.6 (IMAP and JMAP) seeded with real mail, for
`loadtest/proxy-compare.sh` with `UPSTREAM=cyrus` (issue 45 item 5; ADR 0009).
All on loopback.

    tools/cyrus-serve.py CYRUS_ROOT WORK IMAP_PORT HTTP_PORT ACCOUNTS MESSAGES CORPUS PASSWORD

Starts Cyrus as `tools/jmap-upstream-lag.py` does (the tests' config: HTTP
`httpmodules: jmap`, `conversations: yes`, sasldb passwords, as root it runs
as nobody) in WORK, with users user1..userACCOUNTS@example.com (the load
test's accounts) and PASSWORD; APPENDs MESSAGES messages of CORPUS (its
`.eml` files, sorted, consecutive ones per account as `fastview seed` takes
them, LF made CRLF, an mbox `From ` line dropped) to each INBOX, with
INTERNALDATEs a second apart, newest last (eight accounts at a time);
destroys the few whose `preview` Cyrus leaves out (the load test would count
each read of them a failure); then writes WORK/ready (the number of
messages left) and serves until
SIGTERM, when it stops Cyrus (its process group).
"""

import base64
import concurrent.futures
import imaplib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("lag", os.path.join(HERE, "jmap-upstream-lag.py"))
lag = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lag)

BASE_TIME = 1_700_000_000


def corpus_messages(corpus, count):
    """The first `count` .eml files of `corpus` (sorted paths), as IMAP
    carries them (CRLF, no mbox envelope line)."""
    paths = []
    for folder, _, files in os.walk(corpus):
        paths += [os.path.join(folder, name) for name in files if name.endswith(".eml")]
    paths.sort()
    if not paths:
        sys.exit(f"no .eml files in {corpus}")
    for path in paths[:count]:
        raw = open(path, "rb").read()
        if raw.startswith(b"From "):
            raw = raw.split(b"\n", 1)[1]
        yield raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def drop_without_preview(http_port, login, password):
    """Destroys the login's messages whose `preview` Cyrus 3.6 leaves out
    (RFC 8621 §4.1.4 says it is always there; Cyrus omits it for 30 of
    the corpus's first 10,000, a multipart/mixed reply among them), since
    the load test counts a missing property as a failed request. Returns
    how many."""
    auth = "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()
    base = f"http://127.0.0.1:{http_port}"

    def api(calls):
        body = json.dumps({"using": lag.USING, "methodCalls": calls}).encode()
        request = urllib.request.Request(f"{base}/jmap/", data=body, headers={
            "Authorization": auth, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["methodResponses"]

    listed = api([
        ["Email/query", {"accountId": login, "limit": 10000}, "q"],
        ["Email/get", {"accountId": login, "properties": ["preview"],
                       "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}}, "g"],
    ])[1][1]["list"]
    missing = [email["id"] for email in listed if "preview" not in email]
    if missing:
        api([["Email/set", {"accountId": login, "destroy": missing}, "d"]])
    return len(missing)


def main():
    if len(sys.argv) != 9:
        sys.exit(__doc__)
    root, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    imap_port, http_port, accounts, messages = map(int, sys.argv[3:7])
    corpus, password = sys.argv[7], sys.argv[8]
    users = [(f"user{n}@example.com", password) for n in range(1, accounts + 1)]
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o755)  # Cyrus runs as nobody under root
    master = lag.start_cyrus(root, f"{work}/cyrus", imap_port, http_port, users)
    stop = lambda *_: (_ for _ in ()).throw(KeyboardInterrupt)
    signal.signal(signal.SIGTERM, stop)
    try:
        sources = list(corpus_messages(corpus, accounts * messages))
        started = time.monotonic()

        def seed(index):
            login = users[index][0]
            m = imaplib.IMAP4("127.0.0.1", imap_port)
            m.login(login, password)
            for i in range(messages):
                raw = sources[(index * messages + i) % len(sources)]
                date = imaplib.Time2Internaldate(BASE_TIME + i)
                status = m.append("INBOX", None, date, raw)[0]
                assert status == "OK", (login, i, status)
            m.logout()

        # Eight accounts at a time: Cyrus syncs each APPEND to disk.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(seed, range(accounts)))
        print(f"cyrus: {accounts} x {messages} messages APPENDed in "
              f"{time.monotonic() - started:.1f} s", flush=True)
        dropped = sum(drop_without_preview(http_port, login, password) for login, _ in users)
        print(f"cyrus: {dropped} messages without a preview destroyed", flush=True)
        open(f"{work}/ready", "w").write(f"{accounts * messages - dropped}\n")
        master.wait()
    except KeyboardInterrupt:
        pass
    finally:
        subprocess.run(["kill", "-TERM", "--", f"-{master.pid}"])
        try:
            master.wait(timeout=5)
        except subprocess.TimeoutExpired:
            subprocess.run(["kill", "-KILL", "--", f"-{master.pid}"])
            master.wait()


if __name__ == "__main__":
    main()
