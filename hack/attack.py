#!/usr/bin/env python3
"""The attack campaign of issue 16 as a table: each case is sent to a running development
server and its answer printed next to what Kubernetes (or the issue) expects.

Run through hack/attack.sh, which builds a release server, starts it and passes:
  attack.py PORT CERT_DIR SERVER_PID DATA_DIR
Standard library only: the point is to see the server's raw answers.
"""
import base64
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time

PORT = int(sys.argv[1])
CERTS = sys.argv[2]
PID = int(sys.argv[3])
COLLECTION = "/apis/stable.example.com/v1/namespaces/default/crontabs"


def context(cert="admin"):
    ctx = ssl.create_default_context(cafile=f"{CERTS}/serving-ca.crt")
    if cert:
        ctx.load_cert_chain(f"{CERTS}/{cert}.crt", f"{CERTS}/{cert}.key")
    return ctx


def request(method, path, body=None, content_type="application/json", headers=None, cert="admin", timeout=60):
    conn = http.client.HTTPSConnection("127.0.0.1", PORT, context=context(cert), timeout=timeout)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    hdrs = {"Content-Type": content_type, **(headers or {})}
    conn.request(method, path, body=data, headers=hdrs)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, payload


def summary(status, payload):
    try:
        doc = json.loads(payload)
        message = doc.get("message", "") if doc.get("kind") == "Status" else doc.get("kind", "")
    except ValueError:
        message = payload[:60].decode(errors="replace") or "(empty body)"
    return f"{status} {message[:90]}"


def rss_mib():
    with open(f"/proc/{PID}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def crontab(name):
    return {"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
            "spec": {"cronSpec": "* * * * */5", "image": name}}


def raw(data, limit=10):
    """Sends bytes on a fresh TLS connection; the first line of the answer, or how it ended."""
    sock = context().wrap_socket(socket.create_connection(("127.0.0.1", PORT)), server_hostname="localhost")
    try:
        sock.sendall(data)
    except OSError:
        pass
    sock.settimeout(limit)
    out = b""
    try:
        while b"\r\n\r\n" not in out or len(out) < 200:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    except (OSError, socket.timeout) as e:
        if not out:
            return f"no answer ({type(e).__name__})"
    head, _, body = out.partition(b"\r\n\r\n")
    first = head.split(b"\r\n")[0].decode(errors="replace") if head else "(closed, no answer)"
    return f"{first} body={'Status' if b'Status' in body else 'empty'}"


rows = []


def case(name, expected, run):
    started = time.time()
    try:
        answer = run()
    except Exception as e:  # an attack may break the connection: that is an answer too
        answer = f"error: {type(e).__name__}: {e}"[:100]
    rows.append((name, expected, answer, time.time() - started))
    print(f"{name:<34} | {expected:<30} | {answer} ({time.time() - started:.2f}s)", flush=True)


def patch_with_peak(name, ops):
    """JSON-patches a fresh object with `ops`; the answer and the server's peak memory."""
    request("POST", COLLECTION, crontab(name))
    before = rss_mib()[1]
    status, payload = request("PATCH", f"{COLLECTION}/{name}", ops, "application/json-patch+json")
    after = rss_mib()[1]
    request("DELETE", f"{COLLECTION}/{name}")
    return f"{summary(status, payload)} [peak RSS {before}->{after} MiB]"


def amplification(op_count, doubling):
    # Each copy of the array onto its own end doubles it.
    ops = [{"op": "add", "path": "/spec/x", "value": ["a" * 64]}]
    ops += [{"op": "copy", "from": "/spec/x", "path": "/spec/x/-"} for _ in range(doubling)]
    ops += [{"op": "test", "path": "/spec/image", "value": "amp"}] * max(0, op_count - len(ops))
    return patch_with_peak("amp", ops)


def nested_copy():
    # Each copy of /spec/o into a new key of itself doubles it: 40 rounds would be 2^40 seeds.
    ops = [{"op": "add", "path": "/spec/o", "value": {"k": "b" * 100}}]
    ops += [{"op": "copy", "from": "/spec/o", "path": f"/spec/o/k{i}"} for i in range(40)]
    return patch_with_peak("dbl", ops)


def merge_patch_bomb():
    request("POST", COLLECTION, crontab("mp"))
    body = {"spec": {"x": ["y" * 1024] * 3100}}
    status, payload = request("PATCH", f"{COLLECTION}/mp", body, "application/merge-patch+json")
    request("DELETE", f"{COLLECTION}/mp")
    return summary(status, payload)


def double_slash():
    request("POST", COLLECTION, crontab("keep"))
    status, payload = request("DELETE", "/apis/stable.example.com/v1/namespaces/default//crontabs")
    kept, _ = request("GET", f"{COLLECTION}/keep")
    request("DELETE", f"{COLLECTION}/keep")
    return f"{summary(status, payload)}; object still there: {kept == 200}"


def continue_token(rv):
    token = base64.urlsafe_b64encode(json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": "a"}).encode())
    return summary(*request("GET", f"{COLLECTION}?limit=1&continue={token.decode().rstrip('=')}"))


def slowloris():
    socks = []
    for _ in range(200):
        s = context().wrap_socket(socket.create_connection(("127.0.0.1", PORT)), server_hostname="localhost")
        s.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        s.settimeout(0.2)
        socks.append(s)
    started = time.time()
    open_ones = list(socks)
    while open_ones and time.time() - started < 45:
        still = []
        for s in open_ones:
            try:
                if s.recv(1) == b"":
                    continue
            except socket.timeout:
                still.append(s)
                continue
            except OSError:
                continue
        open_ones = still
    for s in socks:
        s.close()
    served, _ = request("GET", "/version")
    return f"{200 - len(open_ones)}/200 closed after {time.time() - started:.0f}s; others served: {served}"


def spoofed_front_proxy():
    """A certificate from the development front-proxy CA with another common name."""
    work = tempfile.mkdtemp()
    key, csr, crt = (f"{work}/x.key", f"{work}/x.csr", f"{work}/x.crt")
    subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                    "-subj", "/CN=mallory"], check=True, capture_output=True)
    with open(f"{work}/ext", "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n")
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", f"{CERTS}/front-proxy-ca.crt", "-CAkey",
                    f"{CERTS}/front-proxy-ca.key", "-CAcreateserial", "-out", crt, "-days", "1",
                    "-extfile", f"{work}/ext"], check=True, capture_output=True)
    ctx = ssl.create_default_context(cafile=f"{CERTS}/serving-ca.crt")
    ctx.load_cert_chain(crt, key)
    conn = http.client.HTTPSConnection("127.0.0.1", PORT, context=ctx, timeout=10)
    conn.request("GET", COLLECTION, headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"})
    response = conn.getresponse()
    return summary(response.status, response.read())


def cas_race(clients=32, increments=10):
    """Read-modify-write increments from many clients, retrying on 409: none may be lost."""
    import threading
    request("POST", COLLECTION, {**crontab("counter"), "metadata": {"name": "counter", "annotations": {"n": "0"}}})
    conflicts = [0]

    def worker():
        done = 0
        while done < increments:
            _, payload = request("GET", f"{COLLECTION}/counter")
            obj = json.loads(payload)
            obj["metadata"]["annotations"]["n"] = str(int(obj["metadata"]["annotations"]["n"]) + 1)
            status, _ = request("PUT", f"{COLLECTION}/counter", obj)
            if status == 200:
                done += 1
            elif status == 409:
                conflicts[0] += 1
            else:
                raise RuntimeError(f"update answered {status}")

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _, payload = request("GET", f"{COLLECTION}/counter")
    final = json.loads(payload)["metadata"]["annotations"]["n"]
    request("DELETE", f"{COLLECTION}/counter")
    return f"counter {final} of {clients * increments}; {conflicts[0]} conflicts retried"


def watch_gaps(creates=300):
    """A watch from a list's resourceVersion sees every acknowledged create once, in order."""
    import threading
    _, payload = request("GET", COLLECTION)
    rv = json.loads(payload)["metadata"]["resourceVersion"]
    conn = http.client.HTTPSConnection("127.0.0.1", PORT, context=context(), timeout=60)
    conn.request("GET", f"{COLLECTION}?watch=1&resourceVersion={rv}&timeoutSeconds=30")
    stream = conn.getresponse()
    acknowledged = []

    def writer(k):
        for i in range(k, creates, 4):
            status, payload = request("POST", COLLECTION, crontab(f"w{i}"))
            if status == 201:
                acknowledged.append(json.loads(payload)["metadata"]["name"])

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seen, revisions = [], []
    while len(seen) < len(acknowledged):
        line = stream.readline()
        if not line:
            break
        event = json.loads(line)
        if event["type"] == "ADDED":
            seen.append(event["object"]["metadata"]["name"])
            revisions.append(int(event["object"]["metadata"]["resourceVersion"]))
    conn.close()
    request("DELETE", f"{COLLECTION}?labelSelector=")
    ordered = revisions == sorted(revisions) and len(set(revisions)) == len(revisions)
    missing = len(set(acknowledged) - set(seen))
    return f"{len(seen)} events for {len(acknowledged)} creates; missing {missing}; in order: {ordered}"


case("json patch: 40 doublings of an array", "422/413, no memory spent", lambda: amplification(41, 40))
case("json patch: 40 doublings of an object", "422/413, no memory spent", nested_copy)
case("json patch: 10,001 operations", "413 (Kubernetes' 10,000 limit)", lambda: amplification(10001, 0))
case("merge patch: 3.2 MB body", "413 (3 MiB body limit)", merge_patch_bomb)
case("DELETE .../default//crontabs", "404, nothing deleted", double_slash)
case("continue token rv=2^64-1", "400 continue key is not valid", lambda: continue_token(2**64 - 1))
case("continue token rv=0", "400 continue key is not valid", lambda: continue_token(0))
case("labelSelector=a notin ()", "200 (valid in Kubernetes)",
     lambda: summary(*request("GET", f"{COLLECTION}?labelSelector=a%20notin%20()")))
case("labelSelector=env in gold", "400 found 'gold' expected: '('",
     lambda: summary(*request("GET", f"{COLLECTION}?labelSelector=env%20in%20gold")))
case("URI of 70,000 bytes", "414 with a Status body",
     lambda: raw(f"GET {COLLECTION}?x={'a' * 70000} HTTP/1.1\r\nHost: x\r\n\r\n".encode()))
case("header of 3 MiB", "431 with a Status body",
     lambda: raw(f"GET {COLLECTION} HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * (3 << 20)}\r\n\r\n".encode()))
case("dev front-proxy cert, CN=mallory", "401, identity not believed", spoofed_front_proxy)
case("32 clients racing updates (CAS)", "no increment lost", cas_race)
case("watch during 300 creates", "every event once, in order", watch_gaps)
case("200 slowloris connections", "closed at the header timeout", slowloris)
print(f"server resident memory now / peak: {rss_mib()[0]} / {rss_mib()[1]} MiB")
