#!/usr/bin/env python3
"""Measures the IMAP proxy in front of Dovecot or Cyrus (issue 45, ADR 0008),
all on loopback, in one run.

    tools/imap-proxy-bench.py FASTVIEW_BINARY dovecot|cyrus [MESSAGES] [OUTAGE_SECONDS]

MESSAGES (default 10000) distinct corpus messages are APPENDed to one user's
INBOX and 20 to a folder `Work`; then `fastview serve --upstream` starts in
front of the server and the script reports:

- the first sync: seconds from the first login until every message is listed;
- the lag of another client's change (imaplib `UID STORE +FLAGS`) until
  JMAP Email/changes names the email, in INBOX and in `Work` (10 each,
  p50/max): NOTIFY on Dovecot, IDLE + STATUS on Cyrus;
- a JMAP write through the upstream (Email/set of a new keyword, 20, p50;
  a move from INBOX to `Work`, 10, p50);
- reads during an outage of OUTAGE_SECONDS (default 300): the upstream is
  stopped, the list view (Email/query 30 + Email/get) asked every second
  with a fresh session GET every 10 s, and how many were answered; then the
  upstream is started again and the seconds until a write goes through.

Dovecot's mailbox format is $DOVECOT_FORMAT (default mdbox: maildir rereads a
folder's directory on every SELECT, tens of ms at 10,000 messages, which is
Dovecot's cost, not the proxy's). Cyrus comes from CYRUS_ROOT
(or $FASTVIEW_TEST_CYRUS_ROOT; `tools/cyrus-unpack.sh` prints it).
"""

import base64
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import imaplib

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dovecot_tools = load("dovecot_tools", "imap-upstream-bench.py")
cyrus_tools = load("cyrus_tools", "jmap-upstream-lag.py")


class Upstream:
    """A throwaway Dovecot or Cyrus: start, stop (an outage), start again."""

    def __init__(self, kind, work):
        self.kind, self.work = kind, work
        self.port = dovecot_tools.free_port()
        if kind == "dovecot":
            self.user, self.password = dovecot_tools.USER, dovecot_tools.PASSWORD
            os.mkdir(f"{work}/dovecot")
            dovecot_tools.start_dovecot(f"{work}/dovecot", self.port,
                                        os.environ.get("DOVECOT_FORMAT", "mdbox"))
        else:
            self.user, self.password = cyrus_tools.USER, cyrus_tools.PASSWORD
            self.root = os.environ.get("CYRUS_ROOT") or os.environ["FASTVIEW_TEST_CYRUS_ROOT"]
            self.http_port = dovecot_tools.free_port()
            self.master = cyrus_tools.start_cyrus(self.root, f"{work}/cyrus", self.port,
                                                  self.http_port)

    def imap(self):
        m = imaplib.IMAP4("127.0.0.1", self.port)
        m.login(self.user, self.password)
        return m

    def stop(self):
        if self.kind == "dovecot":
            subprocess.run(["doveadm", "-c", f"{self.work}/dovecot/dovecot.conf", "stop"],
                           capture_output=True)
        else:
            os.killpg(self.master.pid, signal.SIGTERM)
            self.master.wait()
        while True:
            try:
                imaplib.IMAP4("127.0.0.1", self.port).logout()
                time.sleep(0.1)
            except OSError:
                return

    def start(self):
        if self.kind == "dovecot":
            subprocess.run(["dovecot", "-c", f"{self.work}/dovecot/dovecot.conf"], check=True)
            cyrus_tools.wait_listening(self.port)
        else:
            bin_dir = f"{self.root}/usr/lib/cyrus/bin"
            log = open(f"{self.work}/cyrus/master.log", "a")
            self.master = subprocess.Popen(
                [f"{bin_dir}/master", "-C", f"{self.work}/cyrus/imapd.conf", "-M",
                 f"{self.work}/cyrus/cyrus.conf", "-p", f"{self.work}/cyrus/master.pid"],
                env=cyrus_tools.cyrus_env(self.root), stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, process_group=0)
            cyrus_tools.wait_listening(self.port)


def jmap(base, auth, calls):
    body = json.dumps({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                       "methodCalls": calls}).encode()
    request = urllib.request.Request(f"{base}/jmap/api", data=body, headers={
        "Authorization": auth, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["methodResponses"]


def status_of(url, auth):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": auth}),
                                    timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def lag(base, auth, m, folder, uids):
    """Seconds until each `UID STORE +FLAGS` in `folder` shows in Email/changes."""
    m.select(folder)
    lags = []
    for n, uid in enumerate(uids):
        state = jmap(base, auth, [["Email/get", {"accountId": "a1", "ids": []}, "0"]])[0][1]["state"]
        started = time.monotonic()
        m.uid("STORE", str(uid), "+FLAGS", f"(bench{n})")
        while True:
            got = jmap(base, auth, [["Email/changes", {"accountId": "a1", "sinceState": state}, "0"]])
            if got[0][1].get("updated"):
                break
            time.sleep(0.02)
        lags.append(time.monotonic() - started)
    m.unselect()
    return lags


def main():
    binary, kind = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    outage = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    work = tempfile.mkdtemp(prefix="fastview-imap-proxy-bench-")
    os.chmod(work, 0o755)
    proxy = None
    upstream = Upstream(kind, work)
    try:
        corpus = os.path.join(HERE, "../../shared/corpus")
        messages = list(dict.fromkeys(dovecot_tools.crlf(m)
                                      for m in dovecot_tools.corpus_messages(corpus, count + 20)))
        m = upstream.imap()
        m.create("Work")
        for i, raw in enumerate(messages):
            folder = "Work" if i >= len(messages) - 20 else "INBOX"
            assert m.append(folder, None, imaplib.Time2Internaldate(1_600_000_000 + i), raw)[0] == "OK"
        port, metrics_port = dovecot_tools.free_port(), dovecot_tools.free_port()
        proxy = subprocess.Popen(
            [binary, "--data-dir", f"{work}/proxy", "serve", "--listen", f"127.0.0.1:{port}",
             "--metrics-listen", f"127.0.0.1:{metrics_port}",
             "--upstream", f"imap://127.0.0.1:{upstream.port}"],
            stderr=open(f"{work}/proxy.log", "w"))
        cyrus_tools.wait_listening(port)
        base = f"http://127.0.0.1:{port}"
        auth = "Basic " + base64.b64encode(f"{upstream.user}:{upstream.password}".encode()).decode()
        started = time.monotonic()
        while True:
            got = jmap(base, auth, [["Email/query", {"accountId": "a1", "calculateTotal": True,
                                                     "limit": 1}, "0"]])
            if got[0][1].get("total") == len(messages):
                break
            time.sleep(0.05)
        first = time.monotonic() - started
        print(f"{kind}, {len(messages)} messages: first sync {first:.1f} s "
              f"({len(messages) / first:.0f} messages/s)")
        for folder, uids in [("INBOX", range(1, 11)), ("Work", range(1, 11))]:
            lags = lag(base, auth, m, folder, uids)
            print(f"another client's flag in {folder} to Email/changes: "
                  f"p50 {statistics.median(lags) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms")
        m.logout()
        mailboxes = jmap(base, auth, [["Mailbox/get", {"accountId": "a1"}, "0"]])[0][1]["list"]
        inbox_id = next(mb["id"] for mb in mailboxes if mb.get("role") == "inbox")
        work_id = next(mb["id"] for mb in mailboxes if mb["name"] == "Work")
        ids = jmap(base, auth, [["Email/query", {"accountId": "a1", "limit": 20,
                                                 "filter": {"inMailbox": inbox_id}}, "0"]])[0][1]["ids"]
        times = []
        for n, email in enumerate(ids):
            t = time.monotonic()
            got = jmap(base, auth, [["Email/set", {"accountId": "a1",
                                                   "update": {email: {f"keywords/w{n}": True}}}, "0"]])
            times.append(time.monotonic() - t)
            assert email in got[0][1]["updated"], got
        print(f"Email/set of a keyword: p50 {statistics.median(times) * 1000:.1f} ms")
        times = []
        for email in ids[:10]:
            t = time.monotonic()
            got = jmap(base, auth, [["Email/set", {"accountId": "a1", "update": {
                email: {"mailboxIds": {work_id: True}}}}, "0"]])
            times.append(time.monotonic() - t)
            assert email in got[0][1]["updated"], got
        print(f"Email/set moving to another folder: p50 {statistics.median(times) * 1000:.1f} ms")

        upstream.stop()
        answered = asked = sessions = sessions_ok = 0
        down = time.monotonic()
        while time.monotonic() - down < outage:
            asked += 1
            try:
                got = jmap(base, auth, [
                    ["Email/query", {"accountId": "a1", "limit": 30}, "q"],
                    ["Email/get", {"accountId": "a1", "#ids": {"resultOf": "q", "name": "Email/query",
                                                              "path": "/ids"},
                                   "properties": ["subject", "from", "receivedAt", "keywords",
                                                  "preview"]}, "g"]])
                answered += len(got[1][1].get("list", [])) == 30
            except urllib.error.HTTPError:
                pass
            if asked % 10 == 0:
                sessions += 1
                sessions_ok += status_of(f"{base}/.well-known/jmap", auth) == 200
            time.sleep(1)
        print(f"outage of {outage} s: list views answered {answered}/{asked}, "
              f"session GETs {sessions_ok}/{sessions}")
        upstream.start()
        back = time.monotonic()
        while True:
            got = jmap(base, auth, [["Email/set", {"accountId": "a1",
                                                   "update": {ids[0]: {"keywords/back": True}}}, "0"]])
            if ids[0] in got[0][1].get("updated", {}):
                break
            time.sleep(0.1)
        print(f"a write goes through {time.monotonic() - back:.1f} s after the upstream is back")
    finally:
        if proxy:
            proxy.terminate()
            proxy.wait()
        try:
            upstream.stop()
        except Exception:
            pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
