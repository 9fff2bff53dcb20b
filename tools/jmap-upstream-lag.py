#!/usr/bin/env python3
"""Measures how late another client's write shows through the JMAP proxy in
front of a real Cyrus IMAP 3.6, whose event source pushes nothing (issue 45
item 6; ADR 0009). All on loopback.

    tools/jmap-upstream-lag.py FASTVIEW_BINARY CYRUS_ROOT [CHANGES] [-- SERVE_FLAGS...]

CYRUS_ROOT is the folder `tools/cyrus-unpack.sh` unpacked Cyrus into (the one
`FASTVIEW_TEST_CYRUS_ROOT` names). Starts a throwaway Cyrus (HTTP JMAP and
IMAP, as `server/tests/common/cyrus.rs` does; as root it runs as nobody),
APPENDs 20 messages to one user's INBOX, starts `fastview serve --upstream`
in front of Cyrus's JMAP (with SERVE_FLAGS, e.g. `--upstream-poll-active 2`),
and waits until the proxy lists them. Then CHANGES times (default 10), a
random 0-3 s apart: flips `$flagged` on one email through Cyrus's own JMAP
(another client) and reads that email through the proxy every 50 ms (an
active client) until its keywords show the change. Prints each lag, p50 and
max, the proxy's polling metrics and its warnings.
"""

import base64
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import imaplib

from upstream_common import free_port, wait_listening

USER, PASSWORD = "ann@example.com", "lag-password"
FOLDERS = ["Drafts", "Sent", "Trash", "Archive"]
USING = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"]


def cyrus_env(root):
    """LD_LIBRARY_PATH (and SASL_PATH) for the unpacked programs."""
    libraries, plugins = [], []
    for lib in ["lib", "usr/lib"]:
        folder = os.path.join(root, lib)
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name.endswith("-linux-gnu"):
                path = os.path.join(folder, name)
                if os.path.isdir(os.path.join(path, "sasl2")):
                    plugins += [os.path.join(path, "sasl2"), f"/usr/lib/{name}/sasl2"]
                libraries.append(path)
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(libraries))
    if plugins:
        env["SASL_PATH"] = ":".join(plugins)
    return env


def start_cyrus(root, work, imap_port, http_port, users=None):
    """Cyrus's master in a process group of its own (the tests' config),
    with `users` ((login, password) pairs; default USER) in its sasldb."""
    as_root = os.geteuid() == 0
    user = "nobody" if as_root else os.environ.get("USER", "")
    for folder in ["conf/log", "spool", "sieve", "socket"]:
        os.makedirs(f"{work}/{folder}")
    special = "".join(f"xlist-{name.lower()}: {name}\n" for name in FOLDERS)
    open(f"{work}/imapd.conf", "w").write(f"""configdirectory: {work}/conf
defaultpartition: default
partition-default: {work}/spool
sievedir: {work}/sieve
lmtpsocket: {work}/socket/lmtp
idlesocket: {work}/socket/idle
notifysocket: {work}/socket/notify
servername: cyrus
cyrus_user: {user}
admins: cyrus-admin
virtdomains: userid
unixhierarchysep: yes
altnamespace: yes
allowplaintext: yes
sasl_pwcheck_method: auxprop
sasl_auxprop_plugin: sasldb
sasl_sasldb_path: {work}/sasldb2
sasl_mech_list: PLAIN LOGIN
failedloginpause: 0
autocreate_quota: 0
autocreate_inbox_folders: {" | ".join(FOLDERS)}
{special}conversations: yes
conversations_db: twoskip
httpmodules: jmap
httpallowcompress: no
""")
    bin_dir = f"{root}/usr/lib/cyrus/bin"
    config = f"{work}/imapd.conf"
    open(f"{work}/cyrus.conf", "w").write(f"""START {{
}}
SERVICES {{
  imap cmd="{bin_dir}/imapd -C {config}" listen="127.0.0.1:{imap_port}" prefork=0
  http cmd="{bin_dir}/httpd -C {config}" listen="127.0.0.1:{http_port}" prefork=0
}}
EVENTS {{
}}
DAEMON {{
  idled cmd="{bin_dir}/idled -C {config}"
}}
""")
    env = cyrus_env(root)
    for login, password in users or [(USER, PASSWORD)]:
        name, realm = login.rsplit("@", 1)
        subprocess.run([f"{root}/usr/sbin/saslpasswd2", "-p", "-c", "-f", f"{work}/sasldb2",
                        "-u", realm, name], input=password.encode(), env=env, check=True)
    if as_root:
        os.chmod(work, 0o755)
        subprocess.run(["chown", "-R", "nobody:", work], check=True)
    log = open(f"{work}/master.log", "w")
    master = subprocess.Popen([f"{bin_dir}/master", "-C", config, "-M", f"{work}/cyrus.conf",
                               "-p", f"{work}/master.pid"], env=env, stdin=subprocess.DEVNULL,
                              stdout=log, stderr=log, process_group=0)
    wait_listening(imap_port)
    wait_listening(http_port)
    return master


def append_messages(imap_port, count):
    m = imaplib.IMAP4("127.0.0.1", imap_port)
    m.login(USER, PASSWORD)
    for n in range(count):
        raw = (f"From: Bob <bob@example.com>\r\nTo: {USER}\r\nSubject: Lag {n}\r\n"
               f"Message-ID: <lag-{n}@example.com>\r\nDate: Tue, 14 Nov 2023 22:13:20 +0000\r\n"
               f"\r\nBody {n}.\r\n").encode()
        assert m.append("INBOX", None, imaplib.Time2Internaldate(1_700_000_000 + n), raw)[0] == "OK"
    m.logout()


AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def http_json(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={
        "Authorization": AUTH, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def call(api_url, method, arguments):
    answer = http_json(api_url, {"using": USING, "methodCalls": [[method, arguments, "0"]]})
    name, arguments, _ = answer["methodResponses"][0]
    assert name == method, answer
    return arguments


def metrics(port, prefixes):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return [line for line in text.splitlines() if line.startswith(prefixes)]


def main():
    args = sys.argv[1:]
    serve_flags = []
    if "--" in args:
        serve_flags = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    if len(args) < 2:
        sys.exit(__doc__)
    binary, root = os.path.abspath(args[0]), os.path.abspath(args[1])
    changes = int(args[2]) if len(args) > 2 else 10
    work = tempfile.mkdtemp(prefix="jmap-lag-")
    os.chmod(work, 0o755)  # Cyrus runs as nobody under root
    master = proxy = None
    try:
        imap_port, http_port = free_port(), free_port()
        master = start_cyrus(root, f"{work}/cyrus", imap_port, http_port)
        append_messages(imap_port, 20)
        cyrus_base = f"http://127.0.0.1:{http_port}"
        direct_api = cyrus_base + http_json(f"{cyrus_base}/.well-known/jmap")["apiUrl"]

        port, metrics_port = free_port(), free_port()
        proxy = subprocess.Popen(
            [binary, "--data-dir", f"{work}/proxy", "serve", "--listen", f"127.0.0.1:{port}",
             "--metrics-listen", f"127.0.0.1:{metrics_port}",
             "--upstream", f"{cyrus_base}/.well-known/jmap"] + serve_flags,
            stdout=subprocess.DEVNULL, stderr=open(f"{work}/proxy.log", "w"))
        wait_listening(port)
        session = http_json(f"http://127.0.0.1:{port}/jmap/session")
        account = session["primaryAccounts"]["urn:ietf:params:jmap:mail"]
        proxy_api = f"http://127.0.0.1:{port}/jmap/api"
        ids = call(direct_api, "Email/query", {"accountId": account})["ids"]
        assert len(ids) == 20, ids
        # The first sync: the mirror at Cyrus's state (Email/get is then
        # answered locally; the script does not need to know).
        time.sleep(3)

        lags = []
        for n in range(changes):
            time.sleep(random.uniform(0, 3))
            email = ids[n % len(ids)]
            read = {"accountId": account, "ids": [email], "properties": ["keywords"]}
            flagged = "$flagged" in call(proxy_api, "Email/get", read)["list"][0]["keywords"]
            patch = {f"keywords/$flagged": None if flagged else True}
            started = time.monotonic()
            call(direct_api, "Email/set", {"accountId": account, "update": {email: patch}})
            while True:
                keywords = call(proxy_api, "Email/get", read)["list"][0]["keywords"]
                if ("$flagged" in keywords) != flagged:
                    break
                if time.monotonic() - started > 120:
                    sys.exit("not visible through the proxy within 120 s")
                time.sleep(0.05)
            lags.append(time.monotonic() - started)
            print(f"change {n + 1}: {lags[-1]:.2f} s", flush=True)
        print(f"lag of another client's write through the proxy ({changes} changes): "
              f"p50 {statistics.median(lags):.2f} s, max {max(lags):.2f} s")
        for line in metrics(metrics_port, ("fastview_upstream_event_source",
                                           "fastview_upstream_polls",
                                           "fastview_upstream_round_trips_total{method=\"poll\"",
                                           "fastview_upstream_round_trips_total{method=\"sync\"",
                                           "fastview_upstream_round_trips_total{method=\"Email/get\"")):
            print(line)
        for line in open(f"{work}/proxy.log", errors="replace"):
            if "WARN" in line:
                print(line.rstrip())
    finally:
        if proxy:
            proxy.terminate()
            proxy.wait()
        if master:
            subprocess.run(["kill", "-TERM", "--", f"-{master.pid}"])
            try:
                master.wait(timeout=5)
            except subprocess.TimeoutExpired:
                subprocess.run(["kill", "-KILL", "--", f"-{master.pid}"])
                master.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
