#!/usr/bin/env python3
"""Live changes among many real definitions, for hack/bench-live-upjet.sh.

Against a running crd-apiserver serving a copy of a directory of definitions (the upjet AWS
provider's 2,065), changes one definition file ROUNDS times (a served version `v1alpha9`, a
copy of its first, added, then taken away again; the file written beside it and renamed over
it) and measures, from the rename:

- served: until a GET of the new version's collection answers as the file now says (200 when
  added, 404 when taken away), polled over a keep-alive connection;
- slice: until the definition's group's OpenAPI v2 slice (asked as kube-aggregator asks it,
  through a Service name that picks the group, with If-None-Match) has a new entity tag, polled
  on a connection of its own at the same time.

Before the changes, the slices and aggregated discovery of the changed group and of SAMPLE
other groups are read (so that they are built, as the aggregator's downloads build them); after
them, whether every other group's slice and discovery kept its entity tag, and whether any
answer while a change was being built was not 200 or 304.
"""

import argparse
import hashlib
import os
import sys
import threading
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_experiment import Client  # noqa: E402

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def service_name(group):
    return f"crd-apiserver-{hashlib.sha256(group.encode()).hexdigest()[:10]}.crd-apiserver.svc"


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--file", required=True, help="the definition file to change")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sample", type=int, default=20, help="other groups whose entity tags are checked")
    args = parser.parse_args()
    creds = (args.cert, args.key)

    with open(args.file) as f:
        original_text = f.read()
    original = yaml.safe_load(original_text)
    group = original["spec"]["group"]
    plural = original["spec"]["names"]["plural"]
    namespaced = original["spec"]["scope"] == "Namespaced"
    collection = (f"/apis/{group}/v1alpha9/namespaces/default/{plural}" if namespaced
                  else f"/apis/{group}/v1alpha9/{plural}")
    with_extra = yaml.safe_load(original_text)
    extra = dict(with_extra["spec"]["versions"][0])
    extra.update({"name": "v1alpha9", "storage": False})
    with_extra["spec"]["versions"].append(extra)
    variants = [yaml.safe_dump(with_extra, sort_keys=False), original_text]

    plain = Client("127.0.0.1", args.port, *creds)
    status, _, body = plain.request("GET", "/apis", headers={"Accept": AGGREGATED})
    assert status == 200, status
    import json
    groups = sorted(g["metadata"]["name"] for g in json.loads(body)["items"])
    others = [g for g in groups if g != group and g != "crd-apiserver.io"]
    step = max(1, len(others) // args.sample)
    sample = others[::step][: args.sample]

    def tags(g):
        client = Client("127.0.0.1", args.port, *creds, server_name=service_name(g))
        s1, h1, _ = client.request("GET", "/openapi/v2", headers={"Accept": "application/json"})
        s2, h2, _ = client.request("GET", "/apis", headers={"Accept": AGGREGATED})
        assert s1 == 200 and s2 == 200, (g, s1, s2)
        return h1.get("etag"), h2.get("etag")

    started = time.time()
    before = {g: tags(g) for g in [group] + sample}
    print(f"{len(groups)} groups served; slices and discovery of {group} and {len(sample)} others read "
          f"in {time.time() - started:.1f} s", flush=True)

    prober = Client("127.0.0.1", args.port, *creds)
    slicer = Client("127.0.0.1", args.port, *creds, server_name=service_name(group))
    served_ms, slice_ms, odd = [], [], {}
    etag = before[group][0]
    for round in range(args.rounds):
        adding = round % 2 == 0
        expect = 200 if adding else 404
        staged = args.file + ".staged"
        with open(staged, "w") as f:
            f.write(variants[round % 2])
        result = {}

        def watch_slice(start):
            while time.time() - start < 30:
                status, headers, _ = slicer.request(
                    "GET", "/openapi/v2", headers={"Accept": "application/json", "If-None-Match": etag})
                if status not in (200, 304):
                    odd[status] = odd.get(status, 0) + 1
                if status == 200 and headers.get("etag") != etag:
                    result["slice"] = time.time() - start
                    result["etag"] = headers.get("etag")
                    return
                time.sleep(0.001)

        start = time.time()
        os.rename(staged, args.file)
        thread = threading.Thread(target=watch_slice, args=(start,))
        thread.start()
        while time.time() - start < 30:
            status, _, _ = prober.request("GET", collection)
            if status == expect:
                served_ms.append((time.time() - start) * 1000)
                break
            time.sleep(0.001)
        else:
            raise SystemExit(f"round {round}: {collection} did not answer {expect} in 30 s")
        thread.join()
        if "slice" not in result:
            raise SystemExit(f"round {round}: the slice of {group} kept its entity tag for 30 s")
        slice_ms.append(result["slice"] * 1000)
        etag = result["etag"]
        time.sleep(0.3)

    after = {g: tags(g) for g in sample}
    kept_slices = sum(1 for g in sample if after[g][0] == before[g][0])
    kept_discovery = sum(1 for g in sample if after[g][1] == before[g][1])

    def line(name, values):
        return (f"{name:<28} p50={percentile(values, 0.5):8.1f} ms  max={max(values):8.1f} ms  "
                f"({len(values)} changes)")

    print(line("change served (collection)", served_ms))
    print(line("its group's v2 slice new", slice_ms))
    print(f"other groups' v2 slice ETags kept: {kept_slices}/{len(sample)}, "
          f"aggregated discovery ETags kept: {kept_discovery}/{len(sample)}; "
          f"answers other than 200/304 while changes were built: {odd or 'none'}")


if __name__ == "__main__":
    main()
