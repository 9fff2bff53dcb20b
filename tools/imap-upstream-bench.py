#!/usr/bin/env python3
"""Measures Fastview in front of a real Dovecot (ADR 0008), all on loopback.

    tools/imap-upstream-bench.py FASTVIEW_BINARY [MESSAGES] [CORPUS_DIR]

Starts a throwaway Dovecot (as root, like the tests), APPENDs MESSAGES
(default 1000) messages of the corpus (CRLF line ends) to one user's INBOX,
starts `fastview serve --upstream` and a standalone `fastview serve` that
imported the same files, then reports, in one run:

- the first sync: seconds from the first login until every message is
  listed, and messages per second;
- the lag of another client's change: an imaplib `UID STORE +FLAGS
  (\\Flagged)` until JMAP Email/get shows `$flagged` (20 changes, p50/max);
- a JMAP write through the upstream (Email/set of a keyword) against the same
  write on the standalone server (20 each, p50);
- the list view (Email/query of 30 + Email/get of the list properties) on
  both servers (200 each, p50): the proxy answers from its mirror.
"""

import imaplib
import json
import mailbox
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import base64

from upstream_common import free_port

USER, PASSWORD = "bench@example.com", "bench-password"


def crlf(raw):
    return raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def corpus_messages(corpus, count):
    out = []
    for root, _, files in sorted(os.walk(corpus)):
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.endswith(".eml"):
                out.append(open(path, "rb").read())
            elif name.endswith(".mbox") or "mbox" in name:
                for message in mailbox.mbox(path):
                    out.append(message.as_bytes())
                    if len(out) >= count:
                        return out
            if len(out) >= count:
                return out
    return out


def start_dovecot(root, port, mail_format=None):
    """A throwaway Dovecot in `root` on `port`; `mail_format` (default
    $DOVECOT_FORMAT, else maildir) is Dovecot's mailbox format: maildir
    rereads a changed folder's directory on every SELECT and STORE (tens of
    ms at 10,000 messages), mdbox does not."""
    mail_format = mail_format or os.environ.get("DOVECOT_FORMAT", "maildir")
    os.chmod(root, 0o755)
    os.mkdir(f"{root}/mail")
    os.chmod(f"{root}/mail", 0o777)
    open(f"{root}/passwd", "w").write(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
    open(f"{root}/dovecot.conf", "w").write(f"""protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = dovenull
default_internal_user = dovecot
mail_uid = dovecot
mail_gid = dovecot
first_valid_uid = 1
mail_location = {mail_format}:{root}/mail/%u
protocol imap {{
  mail_max_userip_connections = 100
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid=dovecot gid=dovecot home={root}/mail/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
""")
    subprocess.run(["dovecot", "-c", f"{root}/dovecot.conf"], check=True)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("dovecot did not start")


def jmap(base, calls):
    body = json.dumps({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                       "methodCalls": calls}).encode()
    request = urllib.request.Request(f"{base}/jmap/api", data=body, headers={
        "Content-Type": "application/json",
        "Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)["methodResponses"]


def wait_port(port):
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def list_view(base):
    return jmap(base, [
        ["Email/query", {"accountId": "a1", "sort": [{"property": "receivedAt", "isAscending": False}],
                         "limit": 30}, "0"],
        ["Email/get", {"accountId": "a1", "#ids": {"resultOf": "0", "name": "Email/query", "path": "/ids"},
                       "properties": ["threadId", "mailboxIds", "keywords", "hasAttachment", "from", "to",
                                      "subject", "receivedAt", "size", "preview"]}, "1"]])


def main():
    binary = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    corpus = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
        os.path.dirname(__file__), "../../shared/corpus")
    work = tempfile.mkdtemp(prefix="fastview-upstream-bench-")
    os.chmod(work, 0o755)  # Dovecot's processes run as the dovecot user
    processes = []
    try:
        imap_port, proxy_port, alone_port = free_port(), free_port(), free_port()
        os.mkdir(f"{work}/dovecot")
        start_dovecot(f"{work}/dovecot", imap_port)
        # Distinct bytes: one mailbox holding the same message twice is one Email.
        messages = list(dict.fromkeys(crlf(m) for m in corpus_messages(corpus, count)))
        imap = imaplib.IMAP4("127.0.0.1", imap_port)
        imap.login(USER, PASSWORD)
        os.mkdir(f"{work}/eml")
        for i, raw in enumerate(messages):
            assert imap.append("INBOX", None, imaplib.Time2Internaldate(1_600_000_000 + i), raw)[0] == "OK"
            open(f"{work}/eml/{i:06}.eml", "wb").write(raw)
        # The standalone server: the same files imported.
        subprocess.run([binary, "--data-dir", f"{work}/alone", "account", "add", USER, "--password",
                        PASSWORD], check=True, capture_output=True)
        subprocess.run([binary, "--data-dir", f"{work}/alone", "import", "--account", USER,
                        f"{work}/eml"], check=True, capture_output=True)
        for port, args in [(alone_port, [f"{work}/alone"]), (proxy_port, [f"{work}/proxy"])]:
            command = [binary, "--data-dir", args[0], "serve", "--listen", f"127.0.0.1:{port}",
                       "--metrics-listen", "off"]
            if port == proxy_port:
                command += ["--upstream", f"imap://127.0.0.1:{imap_port}"]
            processes.append(subprocess.Popen(command, stderr=open(f"{work}/{port}.log", "w")))
            wait_port(port)
        proxy, alone = f"http://127.0.0.1:{proxy_port}", f"http://127.0.0.1:{alone_port}"

        started = time.monotonic()
        while True:
            got = jmap(proxy, [["Email/query", {"accountId": "a1", "calculateTotal": True, "limit": 1}, "0"]])
            if got[0][1].get("total") == len(messages):
                break
            time.sleep(0.05)
        first_sync = time.monotonic() - started
        print(f"first sync: {len(messages)} messages in {first_sync:.2f} s "
              f"({len(messages) / first_sync:.0f} messages/s)")

        ids = jmap(proxy, [["Email/query", {"accountId": "a1", "sort": [
            {"property": "receivedAt", "isAscending": True}], "limit": 20}, "0"]])[0][1]["ids"]
        imap.select("INBOX")
        lags = []
        for i, email in enumerate(ids):
            t = time.monotonic()
            imap.uid("STORE", str(i + 1), "+FLAGS", "(\\Flagged)")
            while True:
                got = jmap(proxy, [["Email/get", {"accountId": "a1", "ids": [email],
                                                  "properties": ["keywords"]}, "0"]])
                if got[0][1]["list"][0]["keywords"].get("$flagged"):
                    break
                time.sleep(0.005)
            lags.append(time.monotonic() - t)
        print(f"another client's flag in JMAP: p50 {statistics.median(lags) * 1000:.0f} ms, "
              f"max {max(lags) * 1000:.0f} ms ({len(lags)} changes)")

        for name, base in [("proxy", proxy), ("standalone", alone)]:
            ids = jmap(base, [["Email/query", {"accountId": "a1", "limit": 20}, "0"]])[0][1]["ids"]
            times = []
            for email in ids:
                t = time.monotonic()
                got = jmap(base, [["Email/set", {"accountId": "a1",
                                                 "update": {email: {"keywords/$answered": True}}}, "0"]])
                times.append(time.monotonic() - t)
                assert email in got[0][1]["updated"], got
            print(f"Email/set of a keyword, {name}: p50 {statistics.median(times) * 1000:.1f} ms")
        for name, base in [("proxy", proxy), ("standalone", alone)]:
            list_view(base)
            times = []
            for _ in range(200):
                t = time.monotonic()
                list_view(base)
                times.append(time.monotonic() - t)
            print(f"list view (query 30 + get), {name}: p50 {statistics.median(times) * 1000:.2f} ms")
        imap.logout()
    finally:
        for process in processes:
            process.terminate()
            process.wait()
        subprocess.run(["doveadm", "-c", f"{work}/dovecot/dovecot.conf", "stop"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
