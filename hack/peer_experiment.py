#!/usr/bin/env python3
"""Issue 32 with a real kube-apiserver as the peer (driven by hack/bench-peer.sh).

Starts a crd-apiserver BINARY on DEFINITIONS (a copy, so a live change can be made), registers
it behind the running kube-apiserver of PEER_DIR (shared/kube-apiserver/control-plane.sh) with
Services of type ExternalName (localhost) and one APIService per served group version, all
labelled crd-apiserver.io/bench=peer, and measures:

- ours: seconds to /readyz, RSS at ready and after aggregation plus `kubectl explain` of 20 kinds;
- kube-apiserver: RSS before, at 60 s and at the peak of the first 120 s after the APIServices
  were created, and its CPU seconds over those 120 s (from /proc of its pid);
- Available -> usable: when each APIService turned Available and when a list of each kind
  through kube-apiserver first answered 200, which statuses (404, 503) came before, and when
  the last list that did not answer 200 was sent (from then on every kind answered);
- `kubectl api-resources`, `kubectl explain` and `kubectl create` of a VPC through it;
- a live change of one definition among them: how long until its group version's OpenAPI v2
  slice has a new entity tag, whether every other group's slices kept their tags, and that each
  /openapi/v2 asked while the change was being built answered 200.

--services says how APIServices reach the server: `version` gives every APIService a Service of
its own (`peer-<10 hex of sha256("<group>/<version>")>`: the server answers that name's OpenAPI v2
downloads and /apis fetches with the group version's part, api::openapi::slices), `group` one
Service per group (`peer-<10 hex of sha256(group)>`: the group's part), `one` a single Service
(`peer-crd-apiserver`: the whole documents). Deletes everything it created at the end.
"""

import argparse
import concurrent.futures
import hashlib
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

LABEL = "crd-apiserver.io/bench"
LABEL_VALUE = "peer"
NAMESPACE = "default"


def log(*args):
    print(*args, flush=True)


def slice_suffix(text):
    """The first ten hex digits of sha256(text): of "<group>/<version>" or of a group."""
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def service_name(services, group, version):
    if services == "version":
        return f"peer-{slice_suffix(f'{group}/{version}')}"
    if services == "group":
        return f"peer-{slice_suffix(group)}"
    return "peer-crd-apiserver"


class Proc:
    """RSS (MiB) and CPU seconds of a process, from /proc."""

    def __init__(self, pid):
        self.pid = pid
        self.hz = os.sysconf("SC_CLK_TCK")

    def rss(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024
        return 0

    def cpu(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.hz


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Client:
    """HTTPS requests with a client certificate, one keep-alive connection per thread."""

    def __init__(self, host, port, cert, key, ca=None, server_name=None):
        self.host, self.port, self.server_name = host, port, server_name
        self.context = ssl.create_default_context(cafile=ca) if ca else ssl._create_unverified_context()
        if not ca:
            self.context.check_hostname = False
        self.context.load_cert_chain(cert, key)
        self.local = threading.local()

    def _connection(self):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=120)
            if self.server_name:
                sock = socket.create_connection((self.host, self.port), timeout=120)
                conn.sock = self.context.wrap_socket(sock, server_hostname=self.server_name)
            self.local.conn = conn
        return conn

    def request(self, method, path, body=None, headers=None):
        """(status, headers, body bytes); a broken connection is opened again once."""
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers=headers or {})
                response = conn.getresponse()
                data = response.read()
                return response.status, dict((k.lower(), v) for k, v in response.getheaders()), data
            except (http.client.HTTPException, OSError):
                self.local.conn = None
                conn.close()
                if attempt:
                    raise
        raise RuntimeError("unreachable")


def served_resources(ours):
    """(group, version, plural, kind, namespaced) of every served resource, from our discovery."""
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    status, _, body = ours.request("GET", "/apis", headers={"Accept": accept})
    assert status == 200, (status, body[:200])
    out = []
    for group in json.loads(body)["items"]:
        name = group["metadata"]["name"]
        if name == "crd-apiserver.io":
            continue
        for version in group["versions"]:
            for resource in version["resources"]:
                out.append((name, version["version"], resource["resource"], resource["responseKind"]["kind"],
                            resource["scope"] == "Namespaced"))
    return out


def kube_objects(group_versions, port, ca_bundle, how):
    services, apiservices = {}, []
    for group, version in group_versions:
        service = service_name(how, group, version)
        services[service] = {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": NAMESPACE, "labels": {LABEL: LABEL_VALUE}},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        }
        apiservices.append({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"{version}.{group}", "labels": {LABEL: LABEL_VALUE}},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 15,
                     "service": {"namespace": NAMESPACE, "name": service, "port": port}, "caBundle": ca_bundle},
        })
    return list(services.values()), apiservices


def create_all(kas, objects, path_of):
    def create(obj):
        status, _, body = kas.request("POST", path_of(obj), json.dumps(obj).encode(),
                                      {"Content-Type": "application/json"})
        if status not in (200, 201, 409):
            raise RuntimeError(f"create {obj['metadata']['name']}: {status} {body[:300]!r}")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(create, objects))


def cleanup(kubectl):
    """Deletes what the experiment made (kubectl, patient: kube-apiserver may be busy)."""
    selector = f"{LABEL}={LABEL_VALUE}"
    run(kubectl + ["delete", "vpcs.v1beta1.ec2.aws.upbound.io", "peer-bench-vpc", "--ignore-not-found", "--wait=false"], 60)
    for kind in ["apiservices", "services"]:
        for _ in range(3):
            out = run(kubectl + ["delete", kind, "-n", NAMESPACE, "-l", selector, "--wait=false", "--request-timeout=300s"], 600)
            if out.returncode == 0:
                break


def heap_mib(kas):
    """kube-apiserver's Go heap in use (go_memstats_heap_alloc_bytes), MiB: unlike its RSS, it
    drops as soon as what it held is collected."""
    try:
        status, _, body = kas.request("GET", "/metrics")
    except OSError:
        return -1
    for line in body.decode(errors="replace").splitlines():
        if line.startswith("go_memstats_heap_alloc_bytes "):
            return int(float(line.split()[1])) // (1 << 20)
    return -1


def run(command, timeout, **kwargs):
    """A command's CompletedProcess; one that outlives `timeout` comes back with returncode -1."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, -1, "", f"timed out after {timeout} s")


def available_names(kas):
    status, _, body = kas.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices?labelSelector={LABEL}={LABEL_VALUE}")
    if status != 200:
        return set()
    return {
        a["metadata"]["name"] for a in json.loads(body)["items"]
        if any(c["type"] == "Available" and c["status"] == "True" for c in a.get("status", {}).get("conditions", []))
    }


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", choices=["version", "group", "one"], default="one")
    parser.add_argument("--peer-dir", default=os.environ.get("PEER_DIR", "/work/peer"))
    parser.add_argument("--kas-pid", type=int, required=True)
    parser.add_argument("--kubectl", required=True)
    parser.add_argument("--usable-within", type=float, default=300, help="give up waiting after this many seconds")
    parser.add_argument("--change", default="ec2.aws.upbound.io_vpcs.yaml", help="the definition file changed live")
    parser.add_argument("--heap-profile", help="write kube-apiserver's /debug/pprof/heap, taken 60 s after the "
                        "APIServices were created, to this file")
    parser.add_argument("--server-flag", action="append", default=[],
                        help="an extra flag for crd-apiserver serve, e.g. --openapi-v2=empty (repeatable)")
    parser.add_argument("definitions")
    parser.add_argument("binary")
    args = parser.parse_args()
    pki = os.path.join(args.peer_dir, "pki")
    admin = (os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
    kubectl = [args.kubectl, "--kubeconfig", os.path.join(args.peer_dir, "kubeconfig-admin")]
    kas = Client("127.0.0.1", 6443, *admin, ca=os.path.join(pki, "ca.crt"))
    kas_proc = Proc(args.kas_pid)
    work = tempfile.mkdtemp(prefix="bench-peer-")
    server = None
    try:
        cleanup(kubectl)
        log("mode: " + {"version": "one Service per group version (slices)", "group": "one Service per group (group slices)",
                        "one": "one Service (whole document)"}[args.services])
        log(f"load before: {load()}")
        log(f"kube-apiserver before: rss {kas_proc.rss()} MiB, heap {heap_mib(kas)} MiB, cpu {kas_proc.cpu():.1f} s")

        # A serving certificate from the peer's backend CA, valid for every Service name.
        definitions = os.path.join(work, "definitions")
        shutil.copytree(args.definitions, definitions)
        cert, key = os.path.join(work, "serving.crt"), os.path.join(work, "serving.key")
        subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-subj",
                        "/CN=crd-apiserver", "-out", os.path.join(work, "serving.csr")], check=True, capture_output=True)
        with open(os.path.join(work, "san.ext"), "w") as f:
            f.write(f"subjectAltName=DNS:*.{NAMESPACE}.svc,DNS:localhost,IP:127.0.0.1\n"
                    "extendedKeyUsage=serverAuth\n")
        subprocess.run(["openssl", "x509", "-req", "-in", os.path.join(work, "serving.csr"), "-CA",
                        os.path.join(pki, "backend-ca.crt"), "-CAkey", os.path.join(pki, "backend-ca.key"),
                        "-CAcreateserial", "-days", "1", "-extfile", os.path.join(work, "san.ext"), "-out", cert],
                       check=True, capture_output=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        kubeconfig = os.path.join(args.peer_dir, "kubeconfig-admin")
        started = time.time()
        server = subprocess.Popen(
            [args.binary, "serve", "--secure-port", str(port), "--bind-address", "127.0.0.1",
             "--tls-cert-file", cert, "--tls-private-key-file", key, "--kubeconfig", kubeconfig,
             "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
             "--storage", os.path.join(work, "data"), "--definitions", definitions, *args.server_flag],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "server.log"), "w"))
        ours_proc = Proc(server.pid)
        ours = Client("127.0.0.1", port, *admin)
        while True:
            try:
                if ours.request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.time() - started > 300:
                raise RuntimeError("crd-apiserver did not become ready:\n" + open(os.path.join(work, "server.log")).read()[-3000:])
            time.sleep(0.05)
        ready = time.time() - started
        log(f"crd-apiserver ready: {ready:.2f} s, rss {ours_proc.rss()} MiB, cpu {ours_proc.cpu():.1f} s")

        resources = served_resources(ours)
        group_versions = sorted({(g, v) for g, v, *_ in resources})
        groups = sorted({g for g, _ in group_versions})
        log(f"served: {len(resources)} resources, {len(group_versions)} group versions, {len(groups)} groups")
        with open(os.path.join(pki, "backend-ca.crt"), "rb") as f:
            import base64
            ca_bundle = base64.b64encode(f.read()).decode()
        services, apiservices = kube_objects(group_versions, port, ca_bundle, args.services)
        create_all(kas, services, lambda o: f"/api/v1/namespaces/{NAMESPACE}/services")
        log(f"created {len(services)} Services")

        # Sample kube-apiserver every half second from here on.
        samples, heaps, stop_sampling = [], [], threading.Event()
        metrics = Client("127.0.0.1", 6443, *admin, ca=os.path.join(pki, "ca.crt"))

        def sample():
            while not stop_sampling.is_set():
                try:
                    samples.append((time.time(), kas_proc.rss(), kas_proc.cpu(), ours_proc.rss(), ours_proc.cpu()))
                    if len(samples) % 4 == 1:
                        heaps.append((time.time(), heap_mib(metrics)))
                except OSError:
                    pass
                stop_sampling.wait(0.5)
        sampler = threading.Thread(target=sample, daemon=True)
        t0 = time.time()
        sampler.start()
        profiler = None
        if args.heap_profile:
            def profile():
                stop_sampling.wait(max(0.0, t0 + 60 - time.time()))
                status, _, body = Client("127.0.0.1", 6443, *admin, ca=os.path.join(pki, "ca.crt")).request(
                    "GET", "/debug/pprof/heap")
                with open(args.heap_profile, "wb") as f:
                    f.write(body)
                log(f"kube-apiserver heap profile at {time.time() - t0:.1f} s: {status}, {len(body)} bytes "
                    f"-> {args.heap_profile}")
            profiler = threading.Thread(target=profile, daemon=True)
            profiler.start()
        create_all(kas, apiservices, lambda o: "/apis/apiregistration.k8s.io/v1/apiservices")
        created = time.time() - t0
        log(f"created {len(apiservices)} APIServices in {created:.1f} s")

        # Available -> usable, polled: APIServices' conditions, and a list of every kind.
        available_at, usable_at, seen = {}, {}, {}
        # When the last list that did not answer 200 was sent: from then on every list did.
        last_failure = [None]
        pending = list(resources)

        def poll_available():
            while len(available_at) < len(apiservices) and time.time() - t0 < args.usable_within:
                for name in available_names(kas) - available_at.keys():
                    available_at[name] = time.time() - t0
                time.sleep(0.25)
        poller = threading.Thread(target=poll_available, daemon=True)
        poller.start()

        def try_list(resource):
            group, version, plural, _, _ = resource
            sent = time.time() - t0
            status, _, _ = kas.request("GET", f"/apis/{group}/{version}/{plural}?limit=1")
            return resource, status, sent, time.time() - t0
        polled_from = time.time() - t0
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            while pending and time.time() - t0 < args.usable_within:
                still = []
                for resource, status, sent, at in pool.map(try_list, pending):
                    name = f"{resource[1]}.{resource[0]}"
                    phase = "after Available" if name in available_at and available_at[name] <= at else "before Available"
                    seen.setdefault((status, phase), 0)
                    seen[(status, phase)] += 1
                    if status == 200:
                        usable_at[resource] = at
                    else:
                        still.append(resource)
                        last_failure[0] = max(last_failure[0] or 0, sent)
                pending = still
        poller.join()
        all_available = max(available_at.values()) if len(available_at) == len(apiservices) else None
        all_usable = max(usable_at.values()) if not pending else None
        gaps = [usable_at[r] - available_at[f"{r[1]}.{r[0]}"] for r in usable_at if f"{r[1]}.{r[0]}" in available_at]
        log(f"APIServices Available: {len(available_at)}/{len(apiservices)}, all by "
            f"{'%.1f s' % all_available if all_available is not None else 'NOT within %.0f s' % args.usable_within}"
            f" (first {min(available_at.values(), default=float('nan')):.1f} s)")
        log(f"kinds answering a list through kube-apiserver: {len(usable_at)}/{len(resources)}, all by "
            f"{'%.1f s' % all_usable if all_usable is not None else 'NOT within %.0f s' % args.usable_within}"
            f" after the APIServices were created (first {min(usable_at.values(), default=float('nan')):.1f} s)")
        log(f"Available -> usable per kind: p50 {percentile(gaps, 50):.1f} s, max {max(gaps, default=float('nan')):.1f} s "
            "(poll resolution: one pass over the kinds still failing)")
        log("statuses seen while polling: " + ", ".join(f"{s} {p}: {n}" for (s, p), n in sorted(seen.items())))
        # The pass over the kinds is bounded by how many lists kube-apiserver proxies a second; the
        # last failure says from when on a request for any kind succeeded.
        if last_failure[0] is not None:
            log(f"every list through kube-apiserver answered 200 from {last_failure[0]:.1f} s on "
                "(the last other answer was to a list sent then)")
        else:
            passed = f"; one pass over all {len(resources)} kinds took {all_usable - polled_from:.1f} s" \
                if all_usable is not None else ""
            log("every list through kube-apiserver answered 200 from the first on: no other answer (the poll "
                f"began {polled_from:.1f} s after the creation began, once the last APIService was created){passed}")

        # kube-apiserver over the first 60 s and 120 s.
        while time.time() - t0 < 120:
            time.sleep(0.5)
        window = [s for s in samples if s[0] - t0 <= 120]
        at60 = min(samples, key=lambda s: abs(s[0] - t0 - 60))
        heap60 = min(heaps, key=lambda s: abs(s[0] - t0 - 60))[1]
        heap_peak = max(h for t, h in heaps if t - t0 <= 120)
        log(f"kube-apiserver: rss {at60[1]} MiB at 60 s, peak {max(s[1] for s in window)} MiB in 120 s; "
            f"heap {heap60} MiB at 60 s, peak {heap_peak} MiB; "
            f"cpu {window[-1][2] - window[0][2]:.1f} s over the first {window[-1][0] - window[0][0]:.0f} s; "
            f"ours: rss {at60[3]} MiB at 60 s, peak {max(s[3] for s in window)} MiB, "
            f"cpu {window[-1][4] - window[0][4]:.1f} s over the same; load {load()}")

        if profiler is not None:
            profiler.join()
        # Clients through kube-apiserver.
        out = run(kubectl + ["api-resources", "--no-headers", "-o", "name"], 300)
        listed = {line.strip() for line in out.stdout.splitlines()}
        ours_listed = sum(1 for g, v, plural, *_ in resources if f"{plural}.{g}" in listed)
        distinct = len({(plural, g) for g, v, plural, *_ in resources})
        log(f"kubectl api-resources: {len(listed)} lines, {ours_listed} of our resources listed "
            f"({distinct} distinct group/resource; {len(resources)} group/version/resource) exit {out.returncode}")
        started = time.time()
        status, headers, body = kas.request("GET", "/openapi/v2", headers={"Accept": "application/json"})
        whole = json.loads(body) if status == 200 else {}
        ours_paths = sum(1 for p in whole.get("paths", {}) if p.split("/")[2:3] and p.split("/")[2] in groups)
        renamed = [name for section in ("definitions", "parameters") for name in whole.get(section, {})
                   if name.rsplit("_v", 1)[-1].isdigit() and "_v" in name]
        log(f"kube-apiserver /openapi/v2: {status}, {len(body)} bytes in {time.time() - started:.1f} s, "
            f"{ours_paths} of our paths, {len(whole.get('definitions', {}))} definitions, "
            f"{len(whole.get('parameters', {}))} parameters, {len(renamed)} renamed by the merge {renamed[:5]}")
        del whole, body
        out = run(kubectl + ["explain", "vpcs.spec.forProvider.cidrBlock", "--api-version", "ec2.aws.upbound.io/v1beta1"], 120)
        log(f"kubectl explain VPC spec.forProvider.cidrBlock: exit {out.returncode}, "
            f"{'FIELD: cidrBlock' in out.stdout and 'ok' or (out.stdout + out.stderr)[:300]}")
        # What a client that reads only OpenAPI v2 sees (kubectl 1.26 and older explained from it).
        out = run(kubectl + ["explain", "vpcs.spec", "--api-version", "ec2.aws.upbound.io/v1beta1",
                             "--output", "plaintext-openapiv2"], 120)
        log(f"kubectl explain --output plaintext-openapiv2 VPC spec: exit {out.returncode}, "
            f"{(out.stdout.splitlines()[:1] or [''])[0] if out.returncode == 0 else out.stderr.strip()[:300]}")
        vpc = {"apiVersion": "ec2.aws.upbound.io/v1beta1", "kind": "VPC", "metadata": {"name": "peer-bench-vpc"},
               "spec": {"forProvider": {"region": "us-east-1", "cidrBlock": "10.0.0.0/16"}}}
        out = run(kubectl + ["create", "-f", "-"], 60, input=json.dumps(vpc))
        log(f"kubectl create VPC: exit {out.returncode}: {(out.stdout + out.stderr).strip()}")
        kinds = sorted({(g, v, plural) for g, v, plural, *_ in resources})
        chosen = [kinds[i * len(kinds) // 20] for i in range(20)]
        started, failures = time.time(), []
        for g, v, plural in chosen:
            out = run(kubectl + ["explain", f"{plural}.spec", "--api-version", f"{g}/{v}"], 120)
            if out.returncode != 0 or "FIELD: spec" not in out.stdout:
                failures.append(f"{plural}.{v}.{g}: {(out.stdout + out.stderr)[:200]}")
                if out.returncode == -1:
                    break
        log(f"kubectl explain of 20 kinds: {20 - len(failures)} ok in {time.time() - started:.1f} s {failures}")
        log(f"crd-apiserver rss after aggregation and explain: {ours_proc.rss()} MiB, cpu {ours_proc.cpu():.1f} s; "
            f"kube-apiserver rss {kas_proc.rss()} MiB, heap {heap_mib(kas)} MiB")

        # A live change among them: one definition's description. The slices compared are those
        # of this mode's Service names (one Service: the whole document, one name).
        slices = sorted({service_name(args.services, g, v): g for g, v in group_versions}.items())

        sizes = {}

        def slice_etags():
            def etag(name):
                client = Client("127.0.0.1", port, *admin, server_name=f"{name}.{NAMESPACE}.svc")
                status, headers, body = client.request("GET", "/openapi/v2", headers={"Accept": "application/json"})
                sizes[name] = len(body)
                return name, (status, headers.get("etag"))
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                return dict(pool.map(etag, [name for name, _ in slices]))
        before = slice_etags()
        _, _, whole_body = ours.request("GET", "/openapi/v2", headers={"Accept": "application/json"})
        log(f"our /openapi/v2: whole {len(whole_body)} bytes; the {len(sizes)} slices {sum(sizes.values())} bytes in all, "
            f"p50 {percentile(list(sizes.values()), 50)}, max {max(sizes.values(), default=0)}")
        del whole_body
        changed_group = args.change.split("_")[0]
        changed_version = next(v for g, v in group_versions if g == changed_group)
        changed_name = service_name(args.services, changed_group, changed_version)
        others = [name for name, g in slices if g != changed_group]
        path = os.path.join(definitions, args.change)
        with open(path) as f:
            text = f.read()
        marker = "VPC is the Schema for the VPCs API."
        assert marker in text, f"{marker!r} not in {args.change}"
        probe = Client("127.0.0.1", port, *admin, server_name=f"{changed_name}.{NAMESPACE}.svc")
        with open(path + ".new", "w") as f:
            f.write(text.replace(marker, marker + " Changed live by hack/bench-peer.sh."))
        statuses = {}
        # With an empty v2 document nothing changes there: the change is watched in the v3
        # index entry of its group version (its document's URL names the document's hash).
        v2_empty = "--openapi-v2=empty" in args.server_flag
        v3_key = f"apis/{changed_group}/{changed_version}"

        def v3_url():
            status, _, body = probe.request("GET", "/openapi/v3", headers={"Accept": "application/json"})
            return status, json.loads(body)["paths"][v3_key]["serverRelativeURL"] if status == 200 else None
        v3_before = v3_url()[1]
        changed_at = time.time()
        os.rename(path + ".new", path)
        served_after = None
        while time.time() - changed_at < 30:
            if v2_empty:
                status, url = v3_url()
                changed = status == 200 and url != v3_before
            else:
                status, headers, _ = probe.request("GET", "/openapi/v2", headers={"Accept": "application/json"})
                changed = status == 200 and headers.get("etag") != before[changed_name][1]
            statuses[status] = statuses.get(status, 0) + 1
            if changed:
                served_after = time.time() - changed_at
                break
        after = slice_etags()
        kept = sum(1 for name in others if after[name] == before[name])
        log(f"live change of {args.change}: its {'v3 document' if v2_empty else 'slice'}'s new ETag served after "
            f"{'%.0f ms' % (served_after * 1000) if served_after is not None else 'NOT within 30 s'}; "
            f"other groups' slices' ETags unchanged: {kept}/{len(others)}; "
            f"answers to its /openapi/v2 while it was rebuilt: {statuses}")
        stop_sampling.set()
        sampler.join()
    finally:
        try:
            cleanup(kubectl)
        finally:
            if server is not None:
                server.terminate()
                try:
                    server.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
            shutil.rmtree(work, ignore_errors=True)
    log(f"cleaned up; load after: {load()}")


if __name__ == "__main__":
    sys.exit(main())
