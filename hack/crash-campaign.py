#!/usr/bin/env python3
"""The crash campaign of issue 11: N rounds of `kill -9` of a running server at a random moment
under concurrent creates, updates and deletes; after each restart every acknowledged write
must be there with its content, every acknowledged delete must stay deleted, the store must
open cleanly and new resourceVersions must be higher than every one acknowledged.

Run through hack/crash-campaign.sh (which builds the release server); by hand:
  crash-campaign.py --server target/release/crd-apiserver --rounds 100 [--backend etcd]
Standard library only. Exits 1 and says precisely what was lost if anything ever is.

Each writer thread owns its object names, so the state each name must have is exact: the state
after the last acknowledged (2xx) operation, or, for the one operation per name that was in
flight when the server died (no answer, or a connection error), either that state or the one
it would have made. Whichever is found for such a name becomes the state the next rounds
expect.
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

COLLECTION = "/apis/stable.example.com/v1/namespaces/default/crontabs"
GONE = None  # The expected state of a deleted (or never created) name.


class Server:
    """One crd-apiserver process in development mode, restarted on the same store."""

    def __init__(self, binary, work, port, extra):
        self.binary, self.work, self.port, self.extra = binary, work, port, extra
        self.process = None
        self.starts = 0

    def start(self):
        log = open(os.path.join(self.work, "server.log"), "ab")
        args = [self.binary, "serve", "--dev", "--secure-port", str(self.port), "--bind-address", "127.0.0.1",
                *self.extra]
        self.process = subprocess.Popen(args, cwd=self.work, stdout=subprocess.DEVNULL, stderr=log)
        self.starts += 1
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited with {self.process.returncode} on start {self.starts}:\n"
                                 + self.log_tail())
            try:
                status, body = request(self.port, self.work, "GET", "/readyz", timeout=2)
                if status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.02)
        raise SystemExit("the server did not become ready in 120 s:\n" + self.log_tail())

    def kill9(self):
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()

    def log_tail(self, lines=40):
        with open(os.path.join(self.work, "server.log"), errors="replace") as f:
            return "".join(f.readlines()[-lines:])


_contexts = {}


def context(work):
    if work not in _contexts:
        certs = os.path.join(work, "certs", "dev")
        ctx = ssl.create_default_context(cafile=f"{certs}/serving-ca.crt")
        ctx.load_cert_chain(f"{certs}/admin.crt", f"{certs}/admin.key")
        _contexts[work] = ctx
    return _contexts[work]


def request(port, work, method, path, body=None, timeout=10, content_type="application/json"):
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context(work), timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": content_type})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def crontab(name, image, rv=None):
    meta = {"name": name}
    if rv is not None:
        meta["resourceVersion"] = str(rv)
    return {"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": meta,
            "spec": {"cronSpec": "* * * * */5", "image": image}}


class Writer(threading.Thread):
    """Creates, updates and deletes its own objects until told to stop; records what the
    server acknowledged and what was in flight when it stopped answering."""

    def __init__(self, index, port, work, expected, rng, big_every):
        super().__init__(daemon=True)
        self.index, self.port, self.work = index, port, work
        self.expected = expected  # this writer's names -> (image, rv) or GONE, kept across rounds
        self.rng = rng
        self.big_every = big_every
        self.stop_flag = threading.Event()
        self.in_flight = {}  # name -> the state the unanswered operation would have made
        self.acked = {"create": 0, "update": 0, "delete": 0}
        self.refused = []
        self.max_rv = 0
        self.serial = 0

    def names(self):
        return [n for n, s in self.expected.items() if s is not GONE]

    def image(self, name):
        self.serial += 1
        text = f"{name}@{self.serial}"
        # Now and then a value over sled's 128 KiB blob threshold (written to its own file).
        if self.big_every and self.serial % self.big_every == 0:
            text += "#" + "x" * 200_000
        return text

    def run(self):
        while not self.stop_flag.is_set():
            live = self.names()
            roll = self.rng.random()
            # Creates outnumber deletes until a writer holds 80 objects, then they balance.
            if len(live) < 10 or (roll < 0.4 and len(live) < 80):
                name = f"w{self.index}-{self.serial}-{self.rng.randrange(1 << 30)}"
                image = self.image(name)
                op = ("create", name, "POST", COLLECTION, crontab(name, image), (image,))
            elif roll < 0.75:
                name = self.rng.choice(live)
                image = self.image(name)
                rv = self.expected[name][1]
                op = ("update", name, "PUT", f"{COLLECTION}/{name}", crontab(name, image, rv), (image,))
            else:
                name = self.rng.choice(live)
                op = ("delete", name, "DELETE", f"{COLLECTION}/{name}", None, GONE)
            if not self.perform(*op):
                return

    def perform(self, verb, name, method, path, body, after):
        self.in_flight[name] = after
        try:
            status, payload = request(self.port, self.work, method, path, body, timeout=10)
        except (OSError, http.client.HTTPException):
            # No answer: the server died (or is dying). The outcome is unknown.
            return False
        if 200 <= status < 300:
            if after is GONE:
                self.expected[name] = GONE
            else:
                rv = int(json.loads(payload)["metadata"]["resourceVersion"])
                self.max_rv = max(self.max_rv, rv)
                self.expected[name] = (after[0], rv)
            self.acked[verb] += 1
        elif status >= 500:
            # A 5xx from a dying server: unknown outcome as well; keep it in flight.
            return False
        else:
            # The writer owns its names: a refusal means the state it expects is wrong.
            self.refused.append(f"{verb} {name} answered {status}: {payload[:200]!r}")
        del self.in_flight[name]
        return True


def list_all(port, work):
    """Every stored CronTab: name -> (image, resourceVersion), and the list's resourceVersion."""
    found, token, list_rv = {}, "", 0
    while True:
        path = f"{COLLECTION}?limit=500" + (f"&continue={token}" if token else "")
        status, payload = request(port, work, "GET", path, timeout=60)
        if status != 200:
            raise SystemExit(f"listing after restart answered {status}: {payload[:300]!r}")
        doc = json.loads(payload)
        for item in doc["items"]:
            found[item["metadata"]["name"]] = (item["spec"]["image"], int(item["metadata"]["resourceVersion"]))
        list_rv = max(list_rv, int(doc["metadata"]["resourceVersion"]))
        token = doc["metadata"].get("continue", "")
        if not token:
            return found, list_rv


def describe(state):
    if state is GONE:
        return "absent"
    image, rv = state
    return f"image {image[:60]}{'…' if len(image) > 60 else ''} at resourceVersion {rv}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="the crd-apiserver binary")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--backend", choices=["sled", "etcd"], default="sled")
    parser.add_argument("--etcd-servers", help="with --backend etcd: etcd's endpoint (else one is started)")
    parser.add_argument("--min-delay", type=float, default=0.2, help="shortest run before the kill, seconds")
    parser.add_argument("--max-delay", type=float, default=2.5, help="longest run before the kill, seconds")
    parser.add_argument("--big-every", type=int, default=25, help="every Nth value is over 128 KiB (0: never)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix="crash-campaign-")
    shutil.copytree(os.path.join(repo, "manifests"), os.path.join(work, "manifests"))
    etcd = None
    extra = []
    if args.backend == "etcd":
        endpoint = args.etcd_servers
        if not endpoint:
            etcd, endpoint = start_etcd(work)
        extra = ["--storage-backend=etcd3", f"--etcd-servers={endpoint}"]
    port = free_port()
    server = Server(os.path.abspath(args.server), work, port, extra)
    print(f"crash campaign: {args.rounds} rounds, {args.writers} writers, backend {args.backend}, seed {seed}")
    print(f"server: {args.server}; machine: {os.cpu_count()} cores; work dir {work}")
    states = [{} for _ in range(args.writers)]  # per writer: name -> (image, rv) or GONE
    totals = {"create": 0, "update": 0, "delete": 0}
    checked_names = checked_present = checked_deleted = in_flight_total = 0
    max_rv = 0
    lost = []
    started = time.time()
    try:
        server.start()
        for round_no in range(1, args.rounds + 1):
            writers = [Writer(i, port, work, states[i], random.Random(rng.random()), args.big_every)
                       for i in range(args.writers)]
            for w in writers:
                w.start()
            time.sleep(rng.uniform(args.min_delay, args.max_delay))
            server.kill9()
            for w in writers:
                w.stop_flag.set()
            for w in writers:
                w.join(30)
                if w.is_alive():
                    raise SystemExit(f"round {round_no}: writer {w.index} did not stop")
            in_flight = {}
            round_lost = []
            for w in writers:
                round_lost.extend(w.refused)
                for verb, n in w.acked.items():
                    totals[verb] += n
                max_rv = max(max_rv, w.max_rv)
                in_flight.update(w.in_flight)
            in_flight_total += len(in_flight)
            server.start()
            found, list_rv = list_all(port, work)
            expected = {name: state for s in states for name, state in s.items()}
            owner = {name: i for i, s in enumerate(states) for name in s}
            for name, state in sorted(expected.items()):
                actual = found.get(name, GONE)
                if name in in_flight:
                    would = in_flight[name]
                    would_state = GONE if would is GONE else would[0]
                    actual_image = GONE if actual is GONE else actual[0]
                    before_image = GONE if state is GONE else state[0]
                    if actual_image == would_state and actual_image != before_image:
                        states[owner[name]][name] = actual  # the unanswered operation took effect
                        continue
                if actual is GONE and state is GONE:
                    checked_deleted += 1
                elif actual is not GONE and state is not GONE and actual == state:
                    checked_present += 1
                else:
                    round_lost.append(f"{name}: acknowledged {describe(state)}, found {describe(actual)}")
            for name in found:
                if name not in expected:
                    would = in_flight.get(name)
                    if would is not None and would is not GONE and found[name][0] == would[0]:
                        states[int(name[1:].split("-")[0])][name] = found[name]  # an unanswered create
                        continue
                    round_lost.append(f"{name}: never written, found {describe(found[name])}")
            checked_names += len(expected)
            # New writes go above everything acknowledged (and above the list's revision).
            probe = f"probe-{round_no}"
            status, payload = request(port, work, "POST", COLLECTION, crontab(probe, probe))
            if status != 201:
                round_lost.append(f"a create after the restart answered {status}: {payload[:200]!r}")
            else:
                new_rv = int(json.loads(payload)["metadata"]["resourceVersion"])
                if new_rv <= max(max_rv, list_rv):
                    round_lost.append(f"new resourceVersion {new_rv} is not above the acknowledged {max(max_rv, list_rv)}")
                max_rv = max(max_rv, new_rv)
                request(port, work, "DELETE", f"{COLLECTION}/{probe}")
            log = server.log_tail(200)
            for bad in ("panicked", "matches no known state"):
                if bad in log:
                    round_lost.append(f"the server's log says {bad!r}:\n{log}")
                    break
            acked_round = sum(sum(w.acked.values()) for w in writers)
            live = sum(1 for s in expected.values() if s is not GONE)
            print(f"round {round_no:3}: {acked_round:5} acknowledged writes, {len(in_flight)} unanswered at the kill, "
                  f"{live} objects and {len(expected) - live} deleted names checked, lost {len(round_lost)}", flush=True)
            if round_lost:
                lost.extend(f"round {round_no}: {line}" for line in round_lost)
                break
    finally:
        server.stop()
        if etcd:
            etcd.terminate()
            etcd.wait()
        if not args.keep and not lost:
            shutil.rmtree(work, ignore_errors=True)
    elapsed = time.time() - started
    acked = sum(totals.values())
    print()
    print(f"rounds: {round_no} of {args.rounds} (kill -9 each), backend {args.backend}, seed {seed}, {elapsed:.0f} s")
    print(f"acknowledged writes: {acked} (creates {totals['create']}, updates {totals['update']}, "
          f"deletes {totals['delete']}); unanswered at the kill: {in_flight_total}")
    print(f"checks after restarts: {checked_names} name states ({checked_present} present with their content, "
          f"{checked_deleted} deleted and still absent)")
    print(f"lost or wrong: {len(lost)}")
    for line in lost:
        print("  " + line)
    if lost:
        print(f"work directory kept: {work}")
    return 1 if lost else 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_etcd(work):
    client, peer, metrics = free_port(), free_port(), free_port()
    endpoint = f"http://127.0.0.1:{client}"
    log = open(os.path.join(work, "etcd.log"), "ab")
    process = subprocess.Popen(
        ["etcd", "--name", "crash", "--data-dir", os.path.join(work, "etcd"),
         "--listen-client-urls", endpoint, "--advertise-client-urls", endpoint,
         "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
         f"http://127.0.0.1:{peer}", f"--initial-cluster=crash=http://127.0.0.1:{peer}",
         f"--listen-metrics-urls=http://127.0.0.1:{metrics}"],
        stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", metrics, timeout=2)
            conn.request("GET", "/health")
            if b'"health":"true"' in conn.getresponse().read():
                return process, endpoint
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("etcd did not become healthy")


if __name__ == "__main__":
    sys.exit(main())
