//! Ownership across the scale subresource (managedfields `ScaleHandler`): a `Scale`'s
//! `.spec.replicas` is the resource's `specReplicasPath`. Before a scale write the
//! resource's managers that own the replicas path are shown as owners of
//! `.spec.replicas` at `autoscaling/v1`; after it, the scale managers are written back as
//! owners of the replicas path, taking it from the resource managers that no longer hold it.

use std::collections::BTreeMap;

use super::managed::{Entry, Managed, VersionedSet};
use super::path::{Path, PathElement};
use super::set::Set;

pub const SCALE_API_VERSION: &str = "autoscaling/v1";

/// The replicas path of each version of a resource (`None`: the version has no scale
/// subresource), and the version of the request.
pub struct ReplicasPaths {
    pub paths: BTreeMap<String, Option<Path>>,
    pub api_version: String,
}

/// A `specReplicasPath` (`.spec.replicas`) as a field path.
pub fn replicas_path(spec_replicas_path: &str) -> Path {
    spec_replicas_path.trim_start_matches('.').split('.').map(PathElement::field).collect()
}

fn scale_replicas() -> Path {
    vec![PathElement::field("spec"), PathElement::field("replicas")]
}

impl ReplicasPaths {
    /// The resource's managers owning the replicas path, as Scale managers.
    pub fn to_subresource(&self, parent: &Managed) -> Managed {
        let mut out = Managed::default();
        for (key, entry) in &parent.entries {
            let Some(Some(path)) = self.paths.get(&entry.fields.api_version) else { continue };
            if entry.fields.set.has(path) {
                let fields = VersionedSet {
                    set: Set::of(&[scale_replicas()]),
                    api_version: SCALE_API_VERSION.to_string(),
                    applied: entry.fields.applied,
                };
                out.entries.insert(key.clone(), Entry { fields, ..entry.clone() });
            }
        }
        out
    }

    /// The resource's managers after a scale write whose managers are `scale`.
    pub fn to_parent(&self, parent: &Managed, scale: &Managed) -> Managed {
        let mut out = Managed::default();
        let mut scale_only: BTreeMap<&String, &Entry> = scale.entries.iter().collect();
        for (key, entry) in &parent.entries {
            let Some(path) = self.paths.get(&entry.fields.api_version) else { continue };
            let Some(path) = path.as_ref().filter(|p| entry.fields.set.has(p)) else {
                out.entries.insert(key.clone(), entry.clone());
                continue;
            };
            if scale_only.remove(key).is_some() {
                out.entries.insert(key.clone(), entry.clone());
                continue;
            }
            // The scale write took the replicas path from this manager.
            let rest = entry.fields.set.difference(&Set::of(std::slice::from_ref(path)));
            if !rest.is_empty() {
                let fields = VersionedSet { set: rest, ..entry.fields.clone() };
                out.entries.insert(key.clone(), Entry { fields, ..entry.clone() });
            }
        }
        let own_path = self.paths.get(&self.api_version).cloned().flatten().unwrap_or_default();
        for (key, entry) in scale_only {
            if !entry.fields.set.has(&scale_replicas()) {
                continue;
            }
            let fields = VersionedSet {
                set: Set::of(std::slice::from_ref(&own_path)),
                api_version: self.api_version.clone(),
                applied: entry.fields.applied,
            };
            // Kubernetes takes the time from the resource's entry of the same identifier.
            let time = parent.entries.get(key).and_then(|e| e.time);
            out.entries.insert(key.clone(), Entry { manager: entry.manager.clone(), fields, time });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::managed::{Manager, Operation};
    use super::*;

    fn entry(manager: &str, op: Operation, version: &str, sub: &str, paths: &[Path]) -> (String, Entry) {
        let m = Manager::new(manager, op, version, sub);
        let fields = VersionedSet { set: Set::of(paths), api_version: version.into(), applied: op == Operation::Apply };
        (m.identifier(), Entry { manager: m, fields, time: None })
    }

    fn mapping() -> ReplicasPaths {
        ReplicasPaths {
            paths: [("g/v1".to_string(), Some(replicas_path(".spec.replicas")))].into_iter().collect(),
            api_version: "g/v1".into(),
        }
    }

    fn p(parts: &[&str]) -> Path {
        parts.iter().map(|s| PathElement::field(s)).collect()
    }

    #[test]
    fn replicas_owners_become_scale_owners_and_back() {
        let parent = Managed {
            entries: [
                entry("test", Operation::Update, "g/v1", "", &[p(&["spec", "replicas"]), p(&["spec", "selector"])]),
                entry("other", Operation::Apply, "g/v1", "", &[p(&["spec", "image"])]),
            ]
            .into_iter()
            .collect(),
        };
        let scale = mapping().to_subresource(&parent);
        assert_eq!(scale.entries.len(), 1);
        let (_, only) = scale.entries.iter().next().unwrap();
        assert_eq!(only.fields.api_version, "autoscaling/v1");

        let written = Managed {
            entries: [entry("scaler", Operation::Update, "autoscaling/v1", "scale", &[p(&["spec", "replicas"])])]
                .into_iter()
                .collect(),
        };
        let back = mapping().to_parent(&parent, &written);
        let mut names: Vec<(String, Vec<String>)> = back
            .entries
            .values()
            .map(|e| {
                (
                    e.manager.manager.clone(),
                    e.fields.set.paths().iter().map(|p| super::super::path::path_string(p)).collect(),
                )
            })
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                ("other".to_string(), vec![".spec.image".to_string()]),
                ("scaler".to_string(), vec![".spec.replicas".to_string()]),
                ("test".to_string(), vec![".spec.selector".to_string()]),
            ]
        );
        assert!(back.entries.values().all(|e| e.fields.api_version == "g/v1"));
    }
}
