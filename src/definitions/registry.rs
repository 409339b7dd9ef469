//! The immutable set of served resources. A new registry is built whenever the definitions
//! change and swapped in whole; readers hold an `Arc` to the one they started with.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::load::Problem;
use super::model::{Definition, Version};
use super::version_order;
use crate::metrics::requests::SeriesName;

/// A resource at one served version.
#[derive(Debug, Clone)]
pub struct Served {
    pub definition: Arc<Definition>,
    pub version: Arc<Version>,
    /// Where requests to it are counted (the same series across reloads).
    pub series: Arc<crate::metrics::requests::ResourceSeries>,
}

impl Served {
    pub fn new(definition: Arc<Definition>, version: Arc<Version>) -> Served {
        let series = crate::metrics::global().requests.resource(
            &definition.group,
            &version.name,
            &definition.plural,
            &definition.kind,
        );
        Served { definition, version, series }
    }

    /// A version of a definition that is not served (an impact analysis' candidate): the write
    /// path's checks run on it, and no request metrics series is made for it.
    pub fn unserved(definition: Arc<Definition>, version: Arc<Version>) -> Served {
        let series = crate::metrics::requests::Resources::unregistered(
            &definition.group,
            &version.name,
            &definition.plural,
            &definition.kind,
        );
        Served { definition, version, series }
    }
}

/// A map of names: foldhash, as a registry of thousands of definitions is built again at every
/// reload (and looked up on every request) with names from the definitions, not from clients.
type Names<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Served resources by group, version and plural.
#[derive(Debug, Default)]
pub struct Registry {
    definitions: Vec<Arc<Definition>>,
    by_group: BTreeMap<String, Names<String, Names<String, Served>>>,
    /// Served versions of each group, by Kubernetes version priority.
    group_versions: BTreeMap<String, Vec<String>>,
    /// The definitions of each group, in load order: what the group's discovery and OpenAPI
    /// documents are built from (the same `Arc`s, the same documents).
    group_definitions: Names<String, Vec<Arc<Definition>>>,
}

impl Registry {
    /// Builds a registry, refusing definitions whose names clash with earlier ones (in the
    /// order given), as Kubernetes' naming controller refuses them.
    pub fn build(definitions: Vec<Definition>) -> (Registry, Vec<Problem>) {
        Registry::build_shared(definitions.into_iter().map(Arc::new).collect())
    }

    /// [`Registry::build`] over definitions that may be served already (a reload keeps the
    /// unchanged ones as they are).
    pub fn build_shared(definitions: Vec<Arc<Definition>>) -> (Registry, Vec<Problem>) {
        let mut registry = Registry { definitions: Vec::with_capacity(definitions.len()), ..Registry::default() };
        let mut problems = Vec::new();
        // What is taken, borrowed from `definitions` (a reload among many definitions
        // allocates nothing per definition for it): the file of each name, and per group the
        // resource names (plural, singular, short names) and kinds in use.
        let mut by_name: Names<&str, &str> = Names::with_capacity_and_hasher(definitions.len(), Default::default());
        let mut resource_names: Names<&str, HashSet<&str, foldhash::fast::RandomState>> = Names::default();
        let mut kind_names: Names<&str, HashSet<&str, foldhash::fast::RandomState>> = Names::default();
        let mut accepted = Vec::with_capacity(definitions.len());
        for definition in &definitions {
            if let Some(first) = by_name.get(definition.name.as_str()) {
                problems.push(
                    Problem::new(
                        &definition.source,
                        Some(definition.name.clone()),
                        vec![format!(
                            "metadata.name: Duplicate value: \"{}\": already defined in {first}",
                            definition.name
                        )],
                    )
                    .because(super::load::reason::DUPLICATE),
                );
                continue;
            }
            let used = resource_names.entry(definition.group.as_str()).or_default();
            let kinds = kind_names.entry(definition.group.as_str()).or_default();
            let mut mine: Vec<&str> = vec![definition.plural.as_str(), definition.singular.as_str()];
            mine.extend(definition.short_names.iter().map(String::as_str));
            let kind_pair = [definition.kind.as_str(), definition.list_kind.as_str()];
            // Kubernetes' naming controller checks plural, singular, short names, kind and list
            // kind in turn, the last clash naming the reason.
            let clash = kind_pair
                .iter()
                .rev()
                .find(|k| kinds.contains(**k))
                .or_else(|| mine.iter().rev().find(|n| used.contains(**n)));
            if let Some(name) = clash {
                problems.push(Problem::name_in_use(definition, name));
                continue;
            }
            used.extend(mine);
            kinds.extend(kind_pair);
            by_name.insert(definition.name.as_str(), definition.source.as_str());
            accepted.push(definition);
        }
        registry.insert_all(accepted);
        for versions in registry.group_versions.values_mut() {
            versions.sort_by(|a, b| version_order::by_priority(a, b));
            versions.dedup();
        }
        (registry, problems)
    }

    /// The same registry plus the server's own read-only resources (`builtin`), unless a
    /// definition of the files already uses their group. Every served registry goes through this.
    pub fn with_builtin(mut self) -> Registry {
        for builtin in super::builtin::shared() {
            if let Some(taken) = self.definitions.iter().find(|d| d.group == builtin.group) {
                tracing::warn!(definition = %taken.name, "the group {} of the server's own resources is taken by a definition of the files; {} is not served", builtin.group, builtin.name);
                continue;
            }
            self.insert(builtin.clone());
        }
        for versions in self.group_versions.values_mut() {
            versions.sort_by(|a, b| version_order::by_priority(a, b));
            versions.dedup();
        }
        self
    }

    fn insert(&mut self, definition: Arc<Definition>) {
        self.insert_all(vec![&definition]);
    }

    /// Adds definitions, their request series looked up (or made) all at once.
    fn insert_all(&mut self, definitions: Vec<&Arc<Definition>>) {
        let names: Vec<SeriesName<'_>> = definitions
            .iter()
            .flat_map(|d| {
                d.served_versions().map(|v| SeriesName {
                    group: &d.group,
                    version: &v.name,
                    resource: &d.plural,
                    kind: &d.kind,
                })
            })
            .collect();
        let mut series = crate::metrics::global().requests.resources(&names).into_iter();
        for definition in definitions {
            // Keys are cloned only when first inserted.
            if !self.by_group.contains_key(&definition.group) {
                self.by_group.insert(definition.group.clone(), Names::default());
                self.group_definitions.insert(definition.group.clone(), Vec::new());
            }
            for version in definition.served_versions() {
                let Some(series) = series.next() else { break };
                let served = Served { definition: definition.clone(), version: version.clone(), series };
                let Some(group) = self.by_group.get_mut(&definition.group) else { break };
                match group.get_mut(&version.name) {
                    Some(resources) => resources.insert(definition.plural.clone(), served),
                    None => group.entry(version.name.clone()).or_default().insert(definition.plural.clone(), served),
                };
                match self.group_versions.get_mut(&definition.group) {
                    Some(versions) if versions.contains(&version.name) => {}
                    Some(versions) => versions.push(version.name.clone()),
                    None => {
                        self.group_versions.insert(definition.group.clone(), vec![version.name.clone()]);
                    }
                }
            }
            if let Some(definitions) = self.group_definitions.get_mut(&definition.group) {
                definitions.push(definition.clone());
            }
            self.definitions.push(definition.clone());
        }
    }

    /// The resource served at `/apis/<group>/<version>/<plural>`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&Served> {
        self.by_group.get(group)?.get(version)?.get(plural)
    }

    /// Every accepted definition, in load order.
    pub fn definitions(&self) -> &[Arc<Definition>] {
        &self.definitions
    }

    /// Groups with their served versions, preferred first.
    pub fn groups(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.group_versions.iter().map(|(g, v)| (g.as_str(), v.as_slice()))
    }

    /// The definitions of a group, in load order (served versions or not).
    pub fn definitions_of(&self, group: &str) -> &[Arc<Definition>] {
        self.group_definitions.get(group).map_or(&[], Vec::as_slice)
    }

    /// Served versions of a group, preferred first.
    pub fn versions_of(&self, group: &str) -> Option<&[String]> {
        self.group_versions.get(group).map(Vec::as_slice)
    }

    /// The resources of a group version, by plural.
    pub fn resources(&self, group: &str, version: &str) -> Vec<&Served> {
        let mut out: Vec<&Served> =
            self.by_group.get(group).and_then(|g| g.get(version)).map(|m| m.values().collect()).unwrap_or_default();
        out.sort_by(|a, b| a.definition.plural.cmp(&b.definition.plural));
        out
    }
}

/// Whether two lists hold the very same definitions (`Arc`s), in the same order: then
/// everything built from one holds for the other.
pub fn same_definitions(a: &[Arc<Definition>], b: &[Arc<Definition>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| Arc::ptr_eq(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::load::definition_from_value;
    use serde_json::json;

    fn def(plural: &str, kind: &str, short: &[&str], versions: &[(&str, bool)]) -> Definition {
        let versions: Vec<_> = versions
            .iter()
            .enumerate()
            .map(|(i, (name, served))| json!({"name": name, "served": served, "storage": i == 0, "schema": {"openAPIV3Schema": {"type": "object"}}}))
            .collect();
        definition_from_value(
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.example.com")},
                "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": plural, "kind": kind, "shortNames": short}, "versions": versions}
            }),
            plural,
        )
        .unwrap()
    }

    #[test]
    fn serves_only_served_versions_in_priority_order() {
        let (registry, problems) = Registry::build(vec![
            def("foos", "Foo", &[], &[("v1beta1", true), ("v1", true), ("v2alpha1", false)]),
            def("bars", "Bar", &[], &[("v2", true)]),
        ]);
        assert!(problems.is_empty());
        assert_eq!(registry.versions_of("example.com").unwrap(), &["v2", "v1", "v1beta1"]);
        assert!(registry.lookup("example.com", "v1", "foos").is_some());
        assert!(registry.lookup("example.com", "v2alpha1", "foos").is_none());
        assert!(registry.lookup("example.com", "v2", "foos").is_none());
    }

    #[test]
    fn a_group_is_listed_with_its_served_versions_only() {
        let (registry, problems) = Registry::build(vec![
            def("foos", "Foo", &[], &[("v1", true), ("v2", true), ("v3alpha1", false)]),
            def("bars", "Bar", &[], &[("v2", true), ("v1beta1", true)]),
        ]);
        assert!(problems.is_empty());
        let groups: Vec<(&str, &[String])> = registry.groups().collect();
        assert_eq!(groups, [("example.com", &["v2".to_string(), "v1".into(), "v1beta1".into()][..])]);
        let names = |version| {
            registry.resources("example.com", version).iter().map(|s| s.definition.plural.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names("v2"), ["bars", "foos"]);
        assert_eq!(names("v1"), ["foos"]);
        assert_eq!(names("v1beta1"), ["bars"]);
        assert!(names("v3alpha1").is_empty());
        let kinds: Vec<&str> = registry.definitions_of("example.com").iter().map(|d| d.kind.as_str()).collect();
        assert_eq!(kinds, ["Foo", "Bar"], "in load order");
    }

    #[test]
    fn refuses_clashing_names() {
        let (registry, problems) = Registry::build(vec![
            def("foos", "Foo", &["f"], &[("v1", true)]),
            def("fums", "Fum", &["f"], &[("v1", true)]),
            def("bars", "Foo", &[], &[("v1", true)]),
        ]);
        assert_eq!(registry.definitions().len(), 1);
        assert_eq!(problems.len(), 2);
        assert!(problems[0].errors[0].contains("\"f\" is already in use"));
        // Singular, kind and list kind clash: as Kubernetes' naming controller, the last checked
        // is reported.
        assert!(problems[1].errors[0].contains("\"FooList\" is already in use"));
        assert_eq!(problems[1].reason, super::super::load::reason::LIST_KIND_CONFLICT);
    }
}
