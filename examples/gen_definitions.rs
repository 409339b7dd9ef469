//! Writes N realistic CustomResourceDefinition manifests (one file each) for
//! `hack/bench-definitions.sh`: groups shared by 20 definitions, two versions (one
//! deprecated), a nested spec with defaults, enums, patterns, maps, int-or-string and a
//! list-map of conditions in status, four printer columns, status and scale subresources, and
//! three CEL rules (one a transition rule).
//!
//! Usage: gen_definitions DIR N
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use serde_json::{Value, json};

fn schema(i: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["image"],
                "x-kubernetes-validations": [
                    {"rule": "self.minReplicas <= self.replicas", "message": "replicas below minReplicas"},
                    {"rule": "!has(self.schedule) || self.schedule.size() < 64"},
                    {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable"}
                ],
                "properties": {
                    "image": {"type": "string", "maxLength": 256, "pattern": "^[a-z0-9./:-]+$"},
                    "replicas": {"type": "integer", "default": 1, "minimum": 0, "maximum": 1000},
                    "minReplicas": {"type": "integer", "default": 0, "minimum": 0},
                    "mode": {"type": "string", "enum": ["Fast", "Safe", "Off"], "default": "Safe"},
                    "schedule": {"type": "string"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "resources": {
                        "type": "object",
                        "properties": {
                            "cpu": {"x-kubernetes-int-or-string": true},
                            "memory": {"x-kubernetes-int-or-string": true},
                            "storage": {"type": "object", "properties": {
                                "size": {"type": "string"},
                                "class": {"type": "string", "default": "standard"}
                            }}
                        }
                    },
                    "containers": {
                        "type": "array",
                        "maxItems": 16,
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string", "maxLength": 63},
                                "image": {"type": "string"},
                                "args": {"type": "array", "items": {"type": "string"}},
                                "env": {"type": "array", "items": {"type": "object", "properties": {
                                    "name": {"type": "string"}, "value": {"type": "string"}
                                }}}
                            }
                        }
                    },
                    "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "note": {"type": "string", "description": format!("Widget {i}'s note.")}
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "phase": {"type": "string"},
                    "replicas": {"type": "integer"},
                    "observedGeneration": {"type": "integer", "format": "int64"},
                    "conditions": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                        "items": {
                            "type": "object",
                            "required": ["type", "status"],
                            "properties": {
                                "type": {"type": "string"},
                                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                                "reason": {"type": "string"},
                                "message": {"type": "string", "maxLength": 32768},
                                "lastTransitionTime": {"type": "string", "format": "date-time"}
                            }
                        }
                    }
                }
            }
        }
    })
}

fn version(i: usize, name: &str, storage: bool) -> Value {
    json!({
        "name": name,
        "served": true,
        "storage": storage,
        "deprecated": !storage,
        "schema": {"openAPIV3Schema": schema(i)},
        "subresources": {
            "status": {},
            "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
        },
        "additionalPrinterColumns": [
            {"name": "Image", "type": "string", "jsonPath": ".spec.image"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]
    })
}

/// The definition number `i`: kind `Widget<i>` in group `g<i/20>.bench.example.com`.
fn definition(i: usize) -> Value {
    let group = format!("g{}.bench.example.com", i / 20);
    let plural = format!("widget{i}s");
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "plural": plural,
                "singular": format!("widget{i}"),
                "kind": format!("Widget{i}"),
                "shortNames": [format!("w{i}")],
                "categories": ["bench"]
            },
            "versions": [version(i, "v1", true), version(i, "v1beta1", false)]
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, n) = (std::path::PathBuf::from(&args[1]), args[2].parse::<usize>().unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..n {
        let text = serde_json::to_string_pretty(&definition(i)).unwrap();
        std::fs::write(dir.join(format!("widget{i}.json")), text).unwrap();
    }
}
