"""Hostile Email/query filters from one account while another works (issue 43 items 2 and 3,
ADR 0005). User A (the attacker) runs, one phase after the other, CONCURRENCY requests at a time:
  header-values   subject/from/to/cc/bcc/header filters with values at the bound (4096 octets),
                  over every email of A (and one value past the bound, which must be refused);
  many-conditions an OR of 127 header/subject conditions (128 with the operator, the bound) of
                  values at the bound, and one of 129 (refused);
  full-text       an OR of 16 text conditions (the bound) of A's most common words, and one of 500
                  (refused);
while user B (the victim) loops over a session GET, a small Email/query (inbox, limit 10) and an
Email/get of 10 ids (list-view properties). A baseline phase runs B alone first. Prints, per
phase, B's latency p50/p95/max in ms (each call, and all) and A's outcome counts (method response
names, error types, HTTP statuses). Expected with the bounds: B's p95 <= 100 ms in every phase.
usage: query_attack.py BASE A_USER A_PASSWORD B_USER B_PASSWORD [SECONDS=10] [CONCURRENCY=8]
e.g.   python3 loadtest/probes/query_attack.py http://127.0.0.1:8765 ann@example.com secret \\
           bob@example.com secret 10 8"""
import base64, collections, http.client, json, re, sys, threading, time, urllib.parse

base, a_user, a_password, b_user, b_password = sys.argv[1:6]
seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 10.0
concurrency = int(sys.argv[7]) if len(sys.argv) > 7 else 8
USING = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"]
BOUND = 4096
url = urllib.parse.urlsplit(base)


class Client:
    """One keep-alive connection as one user."""

    def __init__(self, user, password):
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.connection = None

    def request(self, method, path, body=None):
        for attempt in (0, 1):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
            try:
                headers = {"Authorization": self.auth, "Content-Type": "application/json"}
                data = json.dumps(body).encode() if body is not None else None
                self.connection.request(method, path, body=data, headers=headers)
                response = self.connection.getresponse()
                text = response.read()
                try:
                    return response.status, json.loads(text)
                except ValueError:
                    return response.status, None
            except (http.client.HTTPException, OSError):
                self.connection.close()
                self.connection = None
                if attempt:
                    return 0, None

    def session(self):
        return self.request("GET", "/jmap/session")

    def api(self, calls):
        return self.request("POST", "/jmap/api", {"using": USING, "methodCalls": calls})


def account_of(client):
    status, session = client.session()
    assert status == 200, f"session: {status}"
    return next(iter(session["primaryAccounts"].values()))


a, b = Client(a_user, a_password), Client(b_user, b_password)
a_account, b_account = account_of(a), account_of(b)
_, r = b.api([["Mailbox/get", {"accountId": b_account, "properties": ["role"]}, "m"],
              ["Email/query", {"accountId": b_account, "limit": 10}, "q"]])
b_inbox = next(m["id"] for m in r["methodResponses"][0][1]["list"] if m["role"] == "inbox")
b_ids = r["methodResponses"][1][1]["ids"]
# A's most common words (of four letters or more) in subjects, for the full-text attack.
_, r = a.api([["Email/query", {"accountId": a_account, "limit": 500}, "q"],
              ["Email/get", {"accountId": a_account, "#ids": {"resultOf": "q", "name": "Email/query",
               "path": "/ids"}, "properties": ["subject"]}, "g"]])
words = collections.Counter(
    w.lower() for e in r["methodResponses"][1][1]["list"]
    for w in re.findall(r"[A-Za-z]{4,}", e.get("subject") or ""))
common = [w for w, _ in words.most_common(16)] or ["mail"]
common = (common * 16)[:16]


def value(i):
    return (f"{i} " + "x" * BOUND)[:BOUND]


def header_values():
    names = ["subject", "from", "to", "cc", "bcc"]
    calls = [["Email/query", {"accountId": a_account, "filter": {n: value(i)}}, f"q{i}"]
             for i, n in enumerate(names)]
    calls.append(["Email/query", {"accountId": a_account,
                  "filter": {"header": ["Received", value(9)]}}, "h"])
    calls.append(["Email/query", {"accountId": a_account,
                  "filter": {"subject": "x" * (BOUND + 1)}}, "past"])
    return calls


def many_conditions():
    conditions = [{"header": [f"X-Probe-{i}", value(i)]} if i % 2 else {"subject": value(i)}
                  for i in range(127)]
    over = conditions + [{"from": "x"}]
    return [["Email/query", {"accountId": a_account,
             "filter": {"operator": "OR", "conditions": conditions}}, "q"],
            ["Email/query", {"accountId": a_account,
             "filter": {"operator": "OR", "conditions": over}}, "past"]]


def full_text():
    at_bound = [{"text": w} for w in common]
    over = [{"text": f"{common[i % len(common)]} w{i}"} for i in range(500)]
    return [["Email/query", {"accountId": a_account, "calculateTotal": True,
             "filter": {"operator": "OR", "conditions": at_bound}}, "q"],
            ["Email/query", {"accountId": a_account,
             "filter": {"operator": "OR", "conditions": over}}, "past"]]


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def phase(name, calls):
    stop = time.monotonic() + seconds
    latencies = collections.defaultdict(list)
    outcomes = collections.Counter()
    lock = threading.Lock()

    def victim():
        client = Client(b_user, b_password)
        probes = [
            ("session", lambda: client.session()),
            ("query", lambda: client.api([["Email/query", {"accountId": b_account,
                "filter": {"inMailbox": b_inbox}, "limit": 10}, "q"]])),
            ("get", lambda: client.api([["Email/get", {"accountId": b_account, "ids": b_ids,
                "properties": ["subject", "from", "receivedAt", "preview", "keywords"]}, "g"]])),
        ]
        while time.monotonic() < stop:
            for kind, probe in probes:
                started = time.monotonic()
                status, _ = probe()
                elapsed = (time.monotonic() - started) * 1000
                with lock:
                    latencies[kind].append(elapsed)
                    if status != 200:
                        outcomes[f"B http {status}"] += 1
                time.sleep(0.01)

    def attacker():
        client = Client(a_user, a_password)
        while time.monotonic() < stop:
            status, r = client.api(calls)
            with lock:
                if r is None or "methodResponses" not in r:
                    outcomes[f"A http {status}"] += 1
                    continue
                outcomes["A requests"] += 1
                for method, args, call in r["methodResponses"]:
                    key = method if method != "error" else "error:" + args["type"]
                    outcomes[f"A {call}: {key}"] += 1

    threads = [threading.Thread(target=victim)]
    if calls is not None:
        threads += [threading.Thread(target=attacker) for _ in range(concurrency)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    every = [v for kind in latencies.values() for v in kind]
    print(f"== {name}: B {len(every)} calls, all p50 {percentile(every, 50):.1f} "
          f"p95 {percentile(every, 95):.1f} max {max(every, default=float('nan')):.1f} ms")
    for kind, values in latencies.items():
        print(f"   B {kind:8} n={len(values):5} p50 {percentile(values, 50):7.1f} "
              f"p95 {percentile(values, 95):7.1f} max {max(values):7.1f} ms")
    for key, count in sorted(outcomes.items()):
        print(f"   {key}: {count}")
    sys.stdout.flush()


print(f"A {a_user} ({a_account}), B {b_user} ({b_account}); {seconds:g} s per phase, "
      f"{concurrency} attacking requests at a time; full-text words {common}")
phase("baseline (B alone)", None)
phase("header-values", header_values())
phase("many-conditions", many_conditions())
phase("full-text", full_text())
