#!/usr/bin/env python3
"""The attack campaign of issue 16 as a table: each case is sent to a running development
server and its answer printed next to what Kubernetes (or the issue) expects.

Run through hack/attack.sh, which builds a release server, starts it and passes:
  attack.py PORT CERT_DIR SERVER_PID DATA_DIR
(the server started with -v=3: the front-proxy cases read the believed user from its log)
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
# The server's log, next to its data directory (hack/lib/dev-server.sh).
LOG = os.path.join(os.path.dirname(sys.argv[4].rstrip("/")), "log")
COLLECTION = "/apis/stable.example.com/v1/namespaces/default/crontabs"
# Answers may carry up to 4 KiB of Warning headers (over a hundred short ones).
http.client._MAXHEADERS = 1000


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


# CASES=text runs only the cases whose name contains it (hack/patch-peaks.sh).
ONLY = os.environ.get("CASES", "")


def case(name, expected, run):
    if ONLY not in name:
        return
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


def peak_during(run):
    """The server's resident memory before `run` and its peak during it (MiB): the peak is
    reset first through /proc/PID/clear_refs."""
    with open(f"/proc/{PID}/clear_refs", "w") as f:
        f.write("5")
    before = rss_mib()[0]
    answer = run()
    return f"{answer} [RSS {before} MiB, peak {rss_mib()[1]} MiB]"


def worst_patch(name, body, content_type, method="PATCH", create=True):
    """Sends one body to a fresh object (or creates with it); the answer and memory peak."""
    def run():
        if create:
            request("POST", COLLECTION, crontab(name))
        path = f"{COLLECTION}/{name}" if method in ("PATCH", "PUT") else COLLECTION
        if method == "PATCH" and content_type == "application/apply-patch+yaml":
            path += "?fieldManager=attack&force=true"
        answer = summary(*request(method, path, body, content_type))
        request("DELETE", f"{COLLECTION}/{name}")
        return answer
    return peak_during(run)


def big_copies():
    # 256 KiB, then 11 copies of it: 2.75 MiB of copies, inside the 3 MiB copy budget.
    ops = [{"op": "add", "path": "/spec/x", "value": ["c" * (256 << 10)]}]
    ops += [{"op": "copy", "from": "/spec/x/0", "path": "/spec/x/-"} for _ in range(11)]
    return worst_patch("copies", ops, "application/json-patch+json")


def many_adds():
    # 10,000 operations (the limit), each adding a 250-byte string: a body just under 3 MiB.
    ops = [{"op": "add", "path": f"/spec/a{i}", "value": "v" * 250} for i in range(10_000)]
    return worst_patch("adds", ops, "application/json-patch+json")


def moves():
    # 10,000 moves of one array back and forth (no copy, so no copy budget).
    ops = [{"op": "add", "path": "/spec/x", "value": ["m" * 1024] * 1000}]
    ops += [{"op": "move", "from": f"/spec/{'xy'[i % 2]}", "path": f"/spec/{'yx'[i % 2]}"} for i in range(9_999)]
    return worst_patch("moves", ops, "application/json-patch+json")


def tiny_numbers(limit=(3 << 20) - 4096):
    """A JSON array of zeros just under the 3 MiB body limit: each 2-byte element becomes a
    whole value in memory."""
    return "[" + ",".join(["0"] * (limit // 2)) + "]"


def merge_numbers():
    body = '{"spec": {"x": ' + tiny_numbers() + "}}"
    return worst_patch("mnum", body.encode(), "application/merge-patch+json")


def merge_objects():
    body = '{"spec": {"x": [' + ",".join(["{}"] * ((3 << 20) // 3 - 2000)) + "]}}"
    return worst_patch("mobj", body.encode(), "application/merge-patch+json")


def merge_labels():
    labels = {f"l{i}": "v" for i in range(150_000)}
    return worst_patch("mlab", {"metadata": {"labels": labels}}, "application/merge-patch+json")


def apply_finalizers():
    # A set list of 180,000 entries: managed fields name each entry.
    doc = {"apiVersion": "stable.example.com/v1", "kind": "CronTab",
           "metadata": {"name": "afin", "finalizers": [f"e.io/f{i}" for i in range(180_000)]}}
    return worst_patch("afin", json.dumps(doc).encode(), "application/apply-patch+yaml")


def apply_yaml_numbers():
    doc = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: anum\nspec:\n  x: " + tiny_numbers()
    return worst_patch("anum", doc.encode(), "application/apply-patch+yaml")


def yaml_aliases():
    # A billion-laughs document: 9 levels of 10 aliases of a 1 KiB string.
    lines = ["apiVersion: stable.example.com/v1", "kind: CronTab", "metadata:", "  name: laughs",
             f"a0: &a0 {'l' * 1024}"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    lines.append("spec:\n  x: *a9")
    return worst_patch("laughs", "\n".join(lines).encode(), "application/yaml", method="POST", create=False)


def yaml_create_numbers():
    doc = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: ynum\nspec:\n  x: " + tiny_numbers()
    return worst_patch("ynum", doc.encode(), "application/yaml", method="POST", create=False)


def http2_indexed_flood(streams=300, refs=1000):
    """Many streams on one HTTP/2 connection, each naming a 4,000-byte header `refs` times by
    one-byte references to HPACK's dynamic table: about 4 MB of header list per stream from a
    kilobyte on the wire. Counts the 431 answers; the server's memory peak is measured around."""
    ctx = context()
    ctx.set_alpn_protocols(["h2"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", PORT)), server_hostname="localhost")

    def frame(kind, flags, stream, payload):
        return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload

    pseudo = b"".join(hpack_literal(n, v) for n, v in
                      [(":method", "GET"), (":scheme", "https"), (":path", COLLECTION), (":authority", "localhost")])
    value = b"a" * 4000
    indexed = b"\x40" + hpack_int(3, 7) + b"x-a" + hpack_int(len(value), 7) + value  # into the table
    out = [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", H2_SETTINGS, H2_WINDOW]
    for n in range(streams):
        block = pseudo + (indexed if n == 0 else b"") + b"\xbe" * refs  # 0xbe: dynamic entry 62
        out.append(frame(1, 0x5, 2 * n + 1, block))  # END_STREAM | END_HEADERS
    sock.settimeout(30)
    sock.sendall(b"".join(out))
    buffer, answered, statuses = b"", 0, {}
    try:
        while answered < streams:
            while len(buffer) < 9:
                chunk = sock.recv(65536)
                if not chunk:
                    raise EOFError
                buffer += chunk
            length, kind, flags = int.from_bytes(buffer[:3], "big"), buffer[3], buffer[4]
            while len(buffer) < 9 + length:
                chunk = sock.recv(65536)
                if not chunk:
                    raise EOFError
                buffer += chunk
            payload, buffer = buffer[9:9 + length], buffer[9 + length:]
            if kind == 4 and not flags & 1:
                sock.sendall(frame(4, 1, 0, b""))
            elif kind == 7:
                return f"GOAWAY after {answered} answers"
            elif kind == 0 and flags & 1:
                answered += 1
                code = json.loads(payload).get("code", "?") if payload.startswith(b"{") else "?"
                statuses[code] = statuses.get(code, 0) + 1
            elif kind == 1 and flags & 1:
                answered += 1  # an answer without a body
                statuses["bodiless"] = statuses.get("bodiless", 0) + 1
            elif kind == 3:
                answered += 1
                statuses["reset"] = statuses.get("reset", 0) + 1
    except (EOFError, OSError) as e:
        return f"connection ended after {answered} answers ({type(e).__name__})"
    finally:
        sock.close()
    return f"{streams} streams: " + ", ".join(f"{v} x {k}" for k, v in sorted(statuses.items(), key=str))


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


class Pki:
    """Certificates for the front-proxy matrix, issued with openssl (validity dates and
    extended key usages of our choosing)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp()
        self.count = 0
        other_key, self.other_ca = f"{self.dir}/other-ca.key", f"{self.dir}/other-ca.crt"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", other_key, "-out",
                        self.other_ca, "-subj", "/CN=front-proxy-ca", "-days", "2"], check=True, capture_output=True)
        self.cas = {"front-proxy": (f"{CERTS}/front-proxy-ca.crt", f"{CERTS}/front-proxy-ca.key"),
                    "other": (self.other_ca, other_key)}

    def issue(self, cn, ca="front-proxy", start="20200101000000Z", end="20991231000000Z", eku="clientAuth"):
        """A leaf for `cn` signed by `ca`, valid from `start` to `end`; `eku` None: no extension."""
        self.count += 1
        d, n = self.dir, self.count
        key, csr, crt = f"{d}/{n}.key", f"{d}/{n}.csr", f"{d}/{n}.crt"
        subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                        "-subj", f"/CN={cn}"], check=True, capture_output=True)
        ext = "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        if eku:
            ext += f"extendedKeyUsage={eku}\n"
        with open(f"{d}/{n}.ext", "w") as f:
            f.write(ext)
        with open(f"{d}/{n}.cnf", "w") as f:
            f.write(f"[ca]\ndefault_ca=leaf\n[leaf]\ndatabase={d}/{n}.index\nnew_certs_dir={d}\nserial={d}/{n}.serial\n"
                    "default_md=sha256\npolicy=any\n[any]\ncommonName=supplied\n")
        open(f"{d}/{n}.index", "w").close()
        with open(f"{d}/{n}.serial", "w") as f:
            f.write(f"{1000 + n:04X}\n")
        ca_crt, ca_key = self.cas[ca]
        subprocess.run(["openssl", "ca", "-batch", "-notext", "-config", f"{d}/{n}.cnf", "-cert", ca_crt, "-keyfile",
                        ca_key, "-in", csr, "-out", crt, "-startdate", start, "-enddate", end, "-extfile",
                        f"{d}/{n}.ext"], check=True, capture_output=True)
        return crt, key


def as_proxy(cert, user="alice", groups=()):
    """Lists crontabs presenting `cert` (a (crt, key) pair, or None) and identity headers."""
    ctx = ssl.create_default_context(cafile=f"{CERTS}/serving-ca.crt")
    if cert:
        ctx.load_cert_chain(*cert)
    conn = http.client.HTTPSConnection("127.0.0.1", PORT, context=ctx, timeout=10)
    headers = {"X-Remote-User": user} if user else {}
    for group in groups:
        headers["X-Remote-Group"] = group  # one group is enough here
    conn.request("GET", COLLECTION, headers=headers)
    response = conn.getresponse()
    answer = summary(response.status, response.read())
    return f"{answer}; user {logged_user(response.getheader('Audit-ID'))}"


def logged_user(audit_id):
    """The user the server's request log (-v=3) names for a request, by its audit ID."""
    needle = f'audit-ID="{audit_id}"'
    for _ in range(20):
        with open(LOG, errors="replace") as f:
            for line in f:
                if needle in line:
                    user = line.split(' user="', 1)[1].split('"', 1)[0] if ' user="' in line else ""
                    return user or "(none)"
        time.sleep(0.05)
    return "not logged"


def hpack_int(value, prefix_bits, first=0):
    """An HPACK integer with an N-bit prefix (RFC 7541 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out, value = [first | limit], value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes(out + [value])


def hpack_literal(name, value):
    """A header field as a literal without indexing, new name, no Huffman coding."""
    name, value = name.encode(), value.encode()
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


# The HPACK static table's :status entries, and the Huffman codes of the digits (RFC 7541
# appendix B), enough to read the status of the first response on a connection.
STATIC_STATUS = {8: "200", 9: "204", 10: "206", 11: "304", 12: "400", 13: "404", 14: "500"}
DIGIT_CODES = {"00000": "0", "00001": "1", "00010": "2", "011001": "3", "011010": "4", "011011": "5",
               "011100": "6", "011101": "7", "011110": "8", "011111": "9"}


def first_status(block):
    """The :status of a response header block (the first field of a fresh connection's)."""
    first = block[0]
    if first & 0x80:
        return STATIC_STATUS.get(first & 0x7F, "?")
    index_bits = 6 if first & 0x40 else 4
    if first & ((1 << index_bits) - 1) not in range(8, 15):
        return "?"
    huffman, length = block[1] & 0x80, block[1] & 0x7F
    value = block[2:2 + length]
    if not huffman:
        return value.decode(errors="replace")
    bits, digits, code = "".join(f"{b:08b}" for b in value), "", ""
    for bit in bits:
        code += bit
        if code in DIGIT_CODES:
            digits, code = digits + DIGIT_CODES[code], ""
    return digits


# The client's SETTINGS (the largest initial stream window) and a connection window as large,
# so that no answer waits for a WINDOW_UPDATE this client would never send.
H2_SETTINGS = (6).to_bytes(3, "big") + bytes([4, 0]) + bytes(4) + (4).to_bytes(2, "big") + (2**31 - 1).to_bytes(4, "big")
H2_WINDOW = (4).to_bytes(3, "big") + bytes([8, 0]) + bytes(4) + (2**31 - 1 - 65535).to_bytes(4, "big")

H2_ERRORS = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 7: "REFUSED_STREAM", 9: "COMPRESSION_ERROR",
             11: "ENHANCE_YOUR_CALM"}


def http2(path=COLLECTION, header_bytes=0, fields=1):
    """One GET over HTTP/2 on a fresh connection, framed by hand so that nothing on the client
    side limits the request (curl's nghttp2 refuses to send header blocks over 64 KiB, hyper's
    URIs over 65,534 bytes): `header_bytes` of header values spread over `fields` fields.
    Answers the status and body kind, or how the stream or connection was ended."""
    ctx = context()
    ctx.set_alpn_protocols(["h2"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", PORT)), server_hostname="localhost")
    if sock.selected_alpn_protocol() != "h2":
        return "no HTTP/2 (ALPN)"
    block = b"".join(hpack_literal(n, v) for n, v in
                     [(":method", "GET"), (":scheme", "https"), (":path", path), (":authority", "localhost")])
    block += b"".join(hpack_literal(f"x-big-{i}", "x" * (header_bytes // fields)) for i in range(fields if header_bytes else 0))

    def frame(kind, flags, stream, payload):
        return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload

    chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)]
    out = [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", H2_SETTINGS, H2_WINDOW]
    out.append(frame(1, 0x1 | (0x4 if len(chunks) == 1 else 0), 1, chunks[0]))  # HEADERS, END_STREAM
    for i, chunk in enumerate(chunks[1:], start=2):
        out.append(frame(9, 0x4 if i == len(chunks) else 0, 1, chunk))  # CONTINUATION
    sock.settimeout(20)
    try:
        sock.sendall(b"".join(out))
    except OSError:
        pass  # the server may close before reading everything: its answer is still there
    buffer, status, body = b"", None, b""

    def read(n):
        nonlocal buffer
        while len(buffer) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError
            buffer += chunk
        data, buffer = buffer[:n], buffer[n:]
        return data

    try:
        while True:
            head = read(9)
            length, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = read(length)
            if kind == 4 and not flags & 1:
                sock.sendall(frame(4, 1, 0, b""))  # SETTINGS ACK
            elif kind == 7:
                code = int.from_bytes(payload[4:8], "big")
                return f"GOAWAY {H2_ERRORS.get(code, code)}" + (f" (after {status})" if status else "")
            elif stream == 1 and kind == 3:
                code = int.from_bytes(payload[:4], "big")
                if status is None:
                    return f"stream reset {H2_ERRORS.get(code, code)}, no answer"
                break
            elif stream == 1 and kind == 1:
                status = first_status(payload)
                if flags & 1:
                    break
            elif stream == 1 and kind == 0:
                body += payload
                if flags & 1:
                    break
    except (EOFError, OSError) as e:
        if status is None:
            return f"connection closed, no answer ({type(e).__name__})"
    finally:
        sock.close()
    if not status or not status.isdigit():
        return f"HTTP/2 status {status!r}, body {body[:30]!r}"
    kind = "Status body" if b'"kind":"Status"' in body else "no Status"
    return f"HTTP/2 {summary(int(status), body)} ({kind})"


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
case("peak: json patch, 11 copies of 256 KiB", "accepted, bounded memory", big_copies)
case("peak: json patch, 10,000 adds", "accepted, bounded memory", many_adds)
case("peak: json patch, 10,000 moves", "accepted, bounded memory", moves)
case("peak: merge patch, 1.5M numbers", "bounded memory", merge_numbers)
case("peak: merge patch, 1M empty objects", "bounded memory", merge_objects)
case("peak: merge patch, 150,000 labels", "bounded memory", merge_labels)
case("peak: apply, 180,000 finalizers", "bounded memory", apply_finalizers)
case("peak: apply YAML, 1.5M numbers", "bounded memory", apply_yaml_numbers)
case("peak: YAML create, 1.5M numbers", "bounded memory", yaml_create_numbers)
case("peak: YAML create, billion laughs", "refused, no memory spent", yaml_aliases)
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
case("HTTP/2: URI of 70,000 bytes", "414 with a Status body",
     lambda: http2(f"{COLLECTION}?x={'a' * 70000}"))
case("HTTP/2: header of 900 KB", "200 (under 1 MiB)", lambda: http2(header_bytes=900_000))
case("HTTP/2: header of 1.5 MiB", "431 with a Status body", lambda: http2(header_bytes=3 << 19))
case("HTTP/2: 2,000 fields, 1.5 MiB", "431 with a Status body",
     lambda: http2(header_bytes=3 << 19, fields=2000))
case("HTTP/2: header of 3 MiB", "431 with a Status body", lambda: http2(header_bytes=3 << 20))
case("HTTP/2: header of 4.5 MiB", "431 (h2's own, past 4 MiB)", lambda: http2(header_bytes=9 << 19))
case("HTTP/2: header of 20 MiB", "connection closed (h2)", lambda: http2(header_bytes=20 << 20))
case("HTTP/2: 300 streams x 4 MB indexed headers", "431 each, bounded memory",
     lambda: peak_during(http2_indexed_flood))
pki = Pki()
case("front proxy: allowed CN", "200, user alice (believed)",
     lambda: as_proxy((f"{CERTS}/front-proxy-client.crt", f"{CERTS}/front-proxy-client.key")))
case("front proxy: CA-signed, CN=mallory", "401, identity not believed", lambda: as_proxy(pki.issue("mallory")))
case("front proxy: another CA", "401", lambda: as_proxy(pki.issue("front-proxy-client", ca="other")))
case("front proxy: expired", "401",
     lambda: as_proxy(pki.issue("front-proxy-client", start="20200101000000Z", end="20210101000000Z")))
case("front proxy: not yet valid", "401",
     lambda: as_proxy(pki.issue("front-proxy-client", start="21000101000000Z", end="21010101000000Z")))
case("front proxy: EKU serverAuth only", "401 (Go: incompatible usage)",
     lambda: as_proxy(pki.issue("front-proxy-client", eku="serverAuth")))
case("front proxy: no EKU extension", "200, user alice (Go: any usage)",
     lambda: as_proxy(pki.issue("front-proxy-client", eku=None)))
case("front proxy: cert, no identity headers", "401 (not a client-CA user)",
     lambda: as_proxy((f"{CERTS}/front-proxy-client.crt", f"{CERTS}/front-proxy-client.key"), user=None))
case("front proxy: headers, no cert", "403, user system:anonymous",
     lambda: as_proxy(None, user="system:admin", groups=["system:masters"]))
case("front proxy: client-CA cert + headers", "200, user dev-admin (headers ignored)",
     lambda: as_proxy((f"{CERTS}/admin.crt", f"{CERTS}/admin.key"), user="alice"))
case("32 clients racing updates (CAS)", "no increment lost", cas_race)
case("watch during 300 creates", "every event once, in order", watch_gaps)
case("200 slowloris connections", "closed at the header timeout", slowloris)
print(f"server resident memory now / peak: {rss_mib()[0]} / {rss_mib()[1]} MiB")
