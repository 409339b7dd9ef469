#!/usr/bin/env python3
"""Measures reads through a conversion webhook: a release server serving the Shirt definition
(stored in v1, also served as v1beta1 through a webhook that renames spec.color <-> spec.hue,
the one hack/conformance_http.py serves) lists N objects in the storage version and in the
other one, and gets one object each way. Prints per-request latency (p50/p99).

Usage: hack/bench-conversion.py [OBJECTS] [ROUNDS]
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance_http as harness  # noqa: E402

SHIRTS = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "shirts.tests.example.com"},
    "spec": {
        "group": "tests.example.com", "scope": "Cluster",
        "names": {"plural": "shirts", "singular": "shirt", "kind": "Shirt", "listKind": "ShirtList"},
        "conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"], "clientConfig": harness.RENAMING_WEBHOOK}},
        "versions": [
            {"name": version, "served": True, "storage": version == "v1", "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {
                    field: {"type": "string"}, "size": {"type": "string"}}}}}}}
            for version, field in (("v1", "color"), ("v1beta1", "hue"))
        ],
    },
}


def timed(server, path, rounds):
    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        status, body, _ = server.request("GET", path)
        took.append((time.perf_counter() - start) * 1000)
        assert status == 200, (status, str(body)[:300])
    took.sort()
    return "p50 %7.2f ms  p99 %7.2f ms" % (took[len(took) // 2], took[min(len(took) - 1, len(took) * 99 // 100)])


def main():
    objects = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(harness.ROOT, "target"))
    subprocess.run(["cargo", "build", "--quiet", "--release", "--bin", "crd-apiserver"], cwd=harness.ROOT, check=True)
    harness.BINARY = os.path.join(os.path.abspath(target), "release", "crd-apiserver")
    server = harness.Server(harness.with_webhook(SHIRTS))
    try:
        for i in range(objects):
            shirt = {"apiVersion": "tests.example.com/v1", "kind": "Shirt", "metadata": {"name": "shirt-%05d" % i},
                     "spec": {"color": ["blue", "green", "red"][i % 3], "size": "M"}}
            status, body, _ = server.request("POST", "/apis/tests.example.com/v1/shirts", shirt)
            assert status == 201, (status, body)
        print("machine: %d cores; %d objects, %d rounds each" % (os.cpu_count(), objects, rounds))
        print("list, storage version (no webhook)   ", timed(server, "/apis/tests.example.com/v1/shirts", rounds))
        print("list, other version (one review)     ", timed(server, "/apis/tests.example.com/v1beta1/shirts", rounds))
        print("list, other version, limit=500 pages ",
              timed(server, "/apis/tests.example.com/v1beta1/shirts?limit=500", rounds))
        print("get, storage version                 ", timed(server, "/apis/tests.example.com/v1/shirts/shirt-00001", rounds * 10))
        print("get, other version (one review)      ",
              timed(server, "/apis/tests.example.com/v1beta1/shirts/shirt-00001", rounds * 10))
    finally:
        server.close()


if __name__ == "__main__":
    main()
