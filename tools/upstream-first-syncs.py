#!/usr/bin/env python3
"""Measures a stampede of first syncs through the JMAP proxy (issue 45 item
7; ADR 0009): ACCOUNTS accounts logging in at once in front of a Fastview
upstream on SQLite, for each `--upstream-syncs-at-once` given. All on
loopback.

    tools/upstream-first-syncs.py FASTVIEW_BINARY [ACCOUNTS] [MESSAGES] [SYNCS_AT_ONCE...]

Seeds ACCOUNTS (default 100) accounts with MESSAGES (default 50) corpus
messages each (`fastview seed`, from ../shared/corpus), serves them as the
upstream (its default SQLite pool), and for each SYNCS_AT_ONCE (default 4
and 100) starts a fresh proxy in front of it, fetches every account's
session at once (each starts its mirror's first sync), and meanwhile reads
one email of user1 through the proxy every 200 ms (an interactive client;
forwarded until its mirror holds it). Prints, per bound: the time until
every message is mirrored, the interactive reads' p50 and max and how many
failed, the proxy's backoffs by reason, the most syncs seen running and
waiting (sampled every 100 ms), and the upstream's answers other than 200
as the proxy saw them (its warnings), and the upstream's own warnings.
"""

import base64
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from upstream_common import free_port, wait_listening

PASSWORD = "stampede-password"
USING = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"]
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../shared/corpus")


def auth(user):
    return "Basic " + base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()


def http(url, user, body=None, timeout=120):
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": auth(user),
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        values = {}
        for line in response.read().decode().splitlines():
            if line.startswith("fastview_upstream") and " " in line:
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values


def serve(binary, data, port, metrics_port, log, flags):
    return subprocess.Popen(
        [binary, "--data-dir", data, "serve", "--listen", f"127.0.0.1:{port}",
         "--metrics-listen", f"127.0.0.1:{metrics_port}"] + flags,
        stdout=subprocess.DEVNULL, stderr=open(log, "w"))


def stampede(binary, work, upstream_port, accounts, messages, email, syncs_at_once):
    """One proxy with the bound: its figures."""
    port, metrics_port = free_port(), free_port()
    log = f"{work}/proxy-{syncs_at_once}.log"
    proxy = serve(binary, f"{work}/proxy-{syncs_at_once}", port, metrics_port, log,
                  ["--upstream", f"http://127.0.0.1:{upstream_port}/.well-known/jmap",
                   "--upstream-syncs-at-once", str(syncs_at_once)])
    try:
        wait_listening(port)
        base = f"http://127.0.0.1:{port}"
        done = threading.Event()
        reads, failed = [], []

        def interactive():
            body = {"using": USING, "methodCalls": [
                ["Email/get", {"accountId": email[0], "ids": [email[1]],
                               "properties": ["subject", "from"]}, "0"]]}
            while not done.is_set():
                started = time.monotonic()
                try:
                    answer = http(f"{base}/jmap/api", "user1@example.com", body, timeout=60)
                    if answer["methodResponses"][0][1].get("list"):
                        reads.append(time.monotonic() - started)
                    else:
                        failed.append(json.dumps(answer)[:200])
                except (urllib.error.URLError, OSError, KeyError) as error:
                    failed.append(str(error))
                time.sleep(0.2)

        started = time.monotonic()
        logins = [threading.Thread(target=http, args=(f"{base}/jmap/session", f"user{n}@example.com"))
                  for n in range(1, accounts + 1)]
        for login in logins:
            login.start()
        reader = threading.Thread(target=interactive)
        reader.start()
        most_running = most_waiting = 0
        total = accounts * messages
        while True:
            seen = metrics(metrics_port)
            most_running = max(most_running, seen.get("fastview_upstream_syncs_running", 0))
            most_waiting = max(most_waiting, seen.get("fastview_upstream_syncs_waiting", 0))
            if seen.get("fastview_upstream_fetched_messages_total", 0) >= total:
                break
            if time.monotonic() - started > 900:
                print(f"  not mirrored within 900 s: {seen.get('fastview_upstream_fetched_messages_total', 0):.0f} of {total}")
                break
            time.sleep(0.1)
        took = time.monotonic() - started
        done.set()
        reader.join()
        for login in logins:
            login.join()
        seen = metrics(metrics_port)
        backoffs = {k.split('"')[1]: int(v) for k, v in seen.items()
                    if k.startswith("fastview_upstream_backoffs_total")}
        print(f"--upstream-syncs-at-once {syncs_at_once}: {total} messages of {accounts} accounts "
              f"mirrored in {took:.1f} s; syncs running at most {most_running:.0f}, waiting at most "
              f"{most_waiting:.0f}")
        if reads:
            print(f"  interactive Email/get through the proxy meanwhile: {len(reads)} answered, "
                  f"p50 {statistics.median(reads) * 1000:.0f} ms, max {max(reads) * 1000:.0f} ms; "
                  f"{len(failed)} failed")
        for failure in failed[:3]:
            print(f"  failed: {failure}")
        print(f"  backoffs: {backoffs or 'none'}")
        warnings = [line.rstrip() for line in open(log, errors="replace") if "WARN" in line]
        print(f"  proxy warnings: {len(warnings)}")
        for line in warnings[:3]:
            print(f"    {line[:300]}")
        upstream_log = f"{work}/upstream.log"
        upstream_warnings = [line for line in open(upstream_log, errors="replace") if "WARN" in line]
        print(f"  upstream warnings so far: {len(upstream_warnings)}")
        for line in upstream_warnings[-2:]:
            print(f"    {line.rstrip()[:300]}")
    finally:
        proxy.terminate()
        proxy.wait()


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    binary = os.path.abspath(args[0])
    accounts = int(args[1]) if len(args) > 1 else 100
    messages = int(args[2]) if len(args) > 2 else 50
    bounds = [int(a) for a in args[3:]] or [4, 100]
    work = tempfile.mkdtemp(prefix="first-syncs-")
    upstream = None
    try:
        subprocess.run([binary, "seed", "--data-dir", f"{work}/upstream", "--accounts", str(accounts),
                        "--messages-per-account", str(messages), "--from", CORPUS,
                        "--password", PASSWORD], check=True, stdout=subprocess.DEVNULL)
        upstream_port, upstream_metrics = free_port(), free_port()
        upstream = serve(binary, f"{work}/upstream", upstream_port, upstream_metrics,
                         f"{work}/upstream.log", [])
        wait_listening(upstream_port)
        direct = f"http://127.0.0.1:{upstream_port}/jmap/api"
        session = http(f"http://127.0.0.1:{upstream_port}/jmap/session", "user1@example.com")
        account = session["primaryAccounts"]["urn:ietf:params:jmap:mail"]
        ids = http(direct, "user1@example.com", {"using": USING, "methodCalls": [
            ["Email/query", {"accountId": account, "limit": 1}, "0"]]})["methodResponses"][0][1]["ids"]
        for bound in bounds:
            stampede(binary, work, upstream_port, accounts, messages, (account, ids[0]), bound)
    finally:
        if upstream:
            upstream.terminate()
            upstream.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
