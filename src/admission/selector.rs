//! `metav1.LabelSelector` (matchLabels and matchExpressions) compiled once from a webhook's
//! `namespaceSelector`/`objectSelector` and matched against label maps, as
//! `metav1.LabelSelectorAsSelector` builds and matches it.
//!
//! Owns label matching only; never sees requests, objects' other fields or the network.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as WireSelector;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A compiled label selector; `Everything` when it has no requirement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Compiles a selector; an unknown operator or a misplaced value list is an error with
    /// Kubernetes' wording.
    pub fn compile(wire: Option<&WireSelector>) -> Result<Selector, String> {
        let Some(wire) = wire else { return Ok(Selector::default()) };
        let mut requirements = Vec::new();
        for (key, value) in wire.match_labels.iter().flatten() {
            requirements.push(Requirement::In(key.clone(), vec![value.clone()]));
        }
        for expression in wire.match_expressions.iter().flatten() {
            let values = expression.values.clone().unwrap_or_default();
            let key = expression.key.clone();
            let requirement = match expression.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err("for 'in', 'notin' operators, values set can't be empty".to_string());
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err("values set must be empty for exists and does not exist".to_string());
                }
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            requirements.push(requirement);
        }
        Ok(Selector(requirements))
    }

    /// Whether it selects everything (no requirement).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches(&self, labels: &dyn Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|requirement| match requirement {
            Requirement::In(k, values) => labels(k).is_some_and(|v| values.contains(&v)),
            Requirement::NotIn(k, values) => labels(k).is_none_or(|v| !values.contains(&v)),
            Requirement::Exists(k) => labels(k).is_some(),
            Requirement::DoesNotExist(k) => labels(k).is_none(),
        })
    }

    /// [`Selector::matches`] over a map.
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches(&|k| labels.get(k).cloned())
    }

    /// [`Selector::matches`] over an object's `metadata.labels`.
    pub fn matches_object(&self, object: &serde_json::Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        self.matches(&|k| labels.and_then(|l| l.get(k)).and_then(serde_json::Value::as_str).map(str::to_string))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(value: serde_json::Value) -> Result<Selector, String> {
        let wire: WireSelector = serde_json::from_value(value).unwrap();
        Selector::compile(Some(&wire))
    }

    #[test]
    fn labels_and_expressions() {
        let selector = compile(json!({"matchLabels": {"team": "a"}, "matchExpressions": [
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "skip", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert!(selector.matches_object(&json!({"metadata": {"labels": {"team": "a"}}})));
        assert!(!selector.matches_object(&json!({"metadata": {"labels": {"team": "a", "env": "prod"}}})));
        assert!(!selector.matches_object(&json!({"metadata": {"labels": {"team": "a", "skip": ""}}})));
        assert!(!selector.matches_object(&json!({"metadata": {}})));
        assert!(compile(json!({})).unwrap().is_empty());
        assert_eq!(
            compile(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})).unwrap_err(),
            "values set must be empty for exists and does not exist"
        );
        assert!(compile(json!({"matchExpressions": [{"key": "a", "operator": "Like"}]})).is_err());
    }
}
