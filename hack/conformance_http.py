#!/usr/bin/env python3
"""Replays Kubernetes' end-to-end HTTP cases (integration_http.json, kept outside the
repository) against the real server: for each case, start a development-mode server serving
the case's definition, create its objects, send its request, and compare the status code,
reason, message fragments, warning headers, listed names and Table contents. Cases whose
definition names "<test webhook that renames spec.color <-> spec.hue>" get such a webhook,
served here over HTTPS with a throwaway certificate.

Usage: hack/conformance_http.py [DIR] [-v]     (DIR defaults to ../shared/conformance)
"""
import base64
import http.client
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "debug", "crd-apiserver")
AGE_MARK = "<age: small duration"
NAME_DOC = "<ObjectMeta swagger doc for name>"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, crd):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        os.makedirs(os.path.join(d, "defs"))
        with open(os.path.join(d, "defs", "crd.json"), "w") as f:
            json.dump(crd, f)
        self.port = free_port()
        self.log = open(os.path.join(d, "log"), "w")
        self.proc = subprocess.Popen(
            [BINARY, "serve", "--dev", "--bind-address", "127.0.0.1", "--secure-port", str(self.port),
             "--cert-dir", os.path.join(d, "certs"), "--storage", os.path.join(d, "data"),
             "--definitions", os.path.join(d, "defs")],
            cwd=d, stdout=subprocess.DEVNULL, stderr=self.log)
        certs = os.path.join(d, "certs")
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(certs, "admin.key")) and time.time() < deadline:
            time.sleep(0.05)
        self.ctx = ssl.create_default_context(cafile=os.path.join(certs, "serving-ca.crt"))
        self.ctx.load_cert_chain(os.path.join(certs, "admin.crt"), os.path.join(certs, "admin.key"))
        while time.time() < deadline:
            try:
                if self.request("GET", "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPSConnection("localhost", self.port, context=self.ctx, timeout=30)
        data = None if body is None else json.dumps(body)
        hdrs = dict(headers or {})
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        warnings = resp.headers.get_all("Warning") or []
        conn.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return resp.status, parsed, warnings

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        self.dir.cleanup()


def collection(crd, version, namespace):
    spec = crd["spec"]
    base = "/apis/%s/%s" % (spec["group"], version)
    if spec.get("scope") == "Namespaced":
        return "%s/namespaces/%s/%s" % (base, namespace or "default", spec["names"]["plural"])
    return "%s/%s" % (base, spec["names"]["plural"])


def warning_text(value):
    # 299 - "text"
    parts = value.split(" ", 2)
    text = parts[2] if len(parts) == 3 else value
    return json.loads(text) if text.startswith('"') else text


def check_table(expect, body):
    problems = []
    for key in ("kind", "apiVersion"):
        if key in expect and body.get(key) != expect[key]:
            problems.append("%s %r" % (key, body.get(key)))
    columns = body.get("columnDefinitions") or []
    for i, want in enumerate(expect.get("columnDefinitions", [])):
        got = columns[i] if i < len(columns) else {}
        for k, v in want.items():
            if v == NAME_DOC:
                ok = str(got.get(k, "")).startswith("Name must be unique")
            else:
                ok = got.get(k, "" if v == "" else None) == v
            if not ok:
                problems.append("column %d %s: %r != %r" % (i, k, got.get(k), v))
    if len(columns) != len(expect.get("columnDefinitions", columns)):
        problems.append("%d columns" % len(columns))
    rows = body.get("rows") or []
    for i, want in enumerate(expect.get("rows", [])):
        cells = rows[i]["cells"] if i < len(rows) else []
        for j, v in enumerate(want.get("cells", [])):
            got = cells[j] if j < len(cells) else "<missing>"
            ok = isinstance(got, str) and got.endswith("s") if isinstance(v, str) and v.startswith(AGE_MARK) else got == v
            if not ok:
                problems.append("row %d cell %d: %r != %r" % (i, j, got, v))
    return problems


RENAMING_WEBHOOK = "<test webhook that renames spec.color <-> spec.hue>"


class RenamingWebhook(http.server.BaseHTTPRequestHandler):
    """ConversionReview answers: v1 spec.color is v1beta1 spec.hue."""

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        request = review["request"]
        desired = request["desiredAPIVersion"]
        (old, new) = ("color", "hue") if desired.endswith("/v1beta1") else ("hue", "color")
        converted = []
        for obj in request["objects"]:
            spec = obj.get("spec") or {}
            if old in spec:
                spec[new] = spec.pop(old)
            obj["apiVersion"] = desired
            converted.append(obj)
        answer = json.dumps({"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                             "response": {"uid": request["uid"], "result": {"status": "Success"},
                                          "convertedObjects": converted}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def start_webhook():
    """Serves RenamingWebhook over HTTPS; returns its clientConfig."""
    d = tempfile.mkdtemp()
    cert, key = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=webhook",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:FALSE"],
                   check=True, capture_output=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RenamingWebhook)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(cert, "rb") as f:
        bundle = base64.b64encode(f.read()).decode()
    return {"url": "https://127.0.0.1:%d/convert" % server.server_address[1], "caBundle": bundle}


WEBHOOK = None


def with_webhook(crd):
    global WEBHOOK
    webhook = crd["spec"].get("conversion", {}).get("webhook")
    if webhook and webhook.get("clientConfig") == RENAMING_WEBHOOK:
        WEBHOOK = WEBHOOK or start_webhook()
        crd = json.loads(json.dumps(crd))
        crd["spec"]["conversion"]["webhook"]["clientConfig"] = WEBHOOK
    return crd


def run_case(case):
    crd = case["crd"]
    if not isinstance(crd, dict):
        return "skip", "fixture not spelled out"
    crd = with_webhook(crd)
    server = Server(crd)
    try:
        req = case["request"]
        version = req["path"].split("/")[3]
        for obj in case.get("objects", []):
            v = obj["apiVersion"].split("/")[-1]
            status, body, _ = server.request("POST", collection(crd, v, obj["metadata"].get("namespace")), obj)
            if status != 201:
                return "fail", "creating %s: %s %s" % (obj["metadata"].get("name"), status, body)
        method = {"list": "GET", "get": "GET", "create": "POST", "update": "PUT", "delete": "DELETE"}[req["verb"]]
        path = req["path"]
        if req.get("query"):
            path += "?" + urllib.parse.urlencode(req["query"])
        status, body, warnings = server.request(method, path, req.get("body"), req.get("headers"))
        expect = case["expect"]
        problems = []
        if status != expect.get("http_status", status):
            problems.append("status %s: %s" % (status, body if isinstance(body, str) else json.dumps(body)[:300]))
        if isinstance(body, dict):
            if "reason" in expect and body.get("reason") != expect["reason"]:
                problems.append("reason %r" % body.get("reason"))
            for fragment in expect.get("error_message_contains", []):
                if fragment not in body.get("message", ""):
                    problems.append("message %r lacks %r" % (body.get("message"), fragment))
            if "item_names" in expect:
                names = [i["metadata"]["name"] for i in body.get("items", [])]
                if names != expect["item_names"]:
                    problems.append("items %r" % names)
            if expect.get("kind") == "Table":
                problems.extend(check_table(expect, body))
        if "warning_headers_exact" in expect:
            got = [warning_text(w) for w in warnings]
            if got != expect["warning_headers_exact"]:
                problems.append("warnings %r" % got)
        return ("fail", "; ".join(problems)) if problems else ("pass", "")
    finally:
        server.close()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    verbose = "-v" in sys.argv
    directory = args[0] if args else os.path.join(ROOT, "..", "shared", "conformance")
    subprocess.run(["cargo", "build", "--quiet", "--bin", "crd-apiserver"], cwd=ROOT, check=True)
    with open(os.path.join(directory, "integration_http.json")) as f:
        cases = json.load(f)["cases"]
    tally = {"pass": 0, "fail": 0, "skip": 0}
    for case in cases:
        verdict, why = run_case(case)
        tally[verdict] += 1
        if verdict != "pass" and (verbose or verdict == "fail"):
            print("  %s %s: %s" % (verdict.upper(), case["name"], why))
    run = tally["pass"] + tally["fail"]
    print("integration_http (replayed over HTTPS): %d/%d passed (%.1f%%), %d skipped"
          % (tally["pass"], run, 100.0 * tally["pass"] / max(run, 1), tally["skip"]))


if __name__ == "__main__":
    main()
