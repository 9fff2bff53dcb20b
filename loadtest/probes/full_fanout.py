"""Concurrent full-level fan-outs from one account (ADR 0005): CONCURRENCY requests at once,
each of CALLS Email/get calls of every id at the full level; prints the call outcomes and the
server's VmHWM/VmRSS from /proc (the server must run on this machine).
usage: full_fanout.py BASE USER PASSWORD SERVER_PID [CONCURRENCY=32] [CALLS=16]"""
import base64, json, sys, threading, urllib.request, collections
base, user, password, pid = sys.argv[1:5]
conc = int(sys.argv[5]) if len(sys.argv) > 5 else 32
calls = int(sys.argv[6]) if len(sys.argv) > 6 else 16
auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
def post(body):
    req = urllib.request.Request(base + "/jmap/api", data=json.dumps(body).encode(),
        headers={"Authorization": auth, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None
sess = json.loads(urllib.request.urlopen(urllib.request.Request(base + "/jmap/session", headers={"Authorization": auth})).read())
acc = next(iter(sess["accounts"]))
U = ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"]
st, q = post({"using": U, "methodCalls": [["Email/query", {"accountId": acc, "limit": 1000}, "q"]]})
ids = q["methodResponses"][0][1]["ids"]
body = {"using": U, "methodCalls": [["Email/get", {"accountId": acc, "ids": ids,
    "properties": ["id", "bodyValues", "textBody", "htmlBody", "attachments", "bodyStructure"],
    "fetchAllBodyValues": True}, f"g{i}"] for i in range(calls)]}
outcomes = collections.Counter()
def run():
    st, r = post(body)
    if r is None:
        outcomes[f"http {st}"] += 1; return
    for name, args, _ in r["methodResponses"]:
        outcomes[name if name != "error" else "error:" + args["type"]] += 1
ts = [threading.Thread(target=run) for _ in range(conc)]
[t.start() for t in ts]; [t.join() for t in ts]
hwm = [l for l in open(f"/proc/{pid}/status") if l.startswith(("VmHWM", "VmRSS"))]
print(len(ids), "ids;", dict(outcomes), "".join(hwm).replace("\n", " "))
