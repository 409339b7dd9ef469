//! Apply conflicts and their wording (k8s.io/apimachinery managedfields `conflict.go`): one
//! conflict reads `Apply failed with 1 conflict: conflict with "mgr" using g/v1: .spec.x`;
//! several are grouped by manager, managers sorted by identifier, each path on its own line.
//! Update managers are named with the version they used, subresource writers with their
//! subresource.

use std::collections::BTreeMap;

use super::managed::{Manager, Operation};
use super::path::{Path, path_string};

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The identifier of the manager that owns the field.
    pub identifier: String,
    pub manager: Manager,
    pub path: Path,
}

impl Conflict {
    /// `conflict with "mgr"` (the text of a `FieldManagerConflict` cause).
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", describe(&self.manager))
    }

    /// The conflicting field, as causes name it (`.spec.replicas`).
    pub fn field(&self) -> String {
        path_string(&self.path)
    }
}

/// Every conflict of one apply.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", message(.0))]
pub struct Conflicts(pub Vec<Conflict>);

/// A manager as conflict messages print it.
fn describe(manager: &Manager) -> String {
    let mut text = crate::core::field::go_quote(&manager.manager);
    if !manager.subresource.is_empty() {
        text = format!("{text} with subresource {}", crate::core::field::go_quote(&manager.subresource));
    }
    if manager.operation == Operation::Update {
        text = format!("{text} using {}", manager.api_version);
    }
    text
}

fn message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!("Apply failed with 1 conflict: conflict with {}: {}", describe(&only.manager), only.field());
    }
    let mut by_manager: BTreeMap<&str, (&Manager, Vec<String>)> = BTreeMap::new();
    for c in conflicts {
        by_manager.entry(&c.identifier).or_insert_with(|| (&c.manager, Vec::new())).1.push(c.field());
    }
    let mut lines = Vec::new();
    for (manager, paths) in by_manager.values() {
        lines.push(format!("conflicts with {}:", describe(manager)));
        lines.extend(paths.iter().map(|p| format!("- {p}")));
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::super::path::PathElement;
    use super::*;

    fn conflict(manager: Manager, fields: &[&str]) -> Conflict {
        Conflict {
            identifier: manager.identifier(),
            manager,
            path: fields.iter().map(|f| PathElement::field(f)).collect(),
        }
    }

    #[test]
    fn one_conflict() {
        let c = conflict(
            Manager::new("kubectl-client-side-apply", Operation::Update, "stable.example.com/v1", ""),
            &["spec", "replicas"],
        );
        assert_eq!(
            Conflicts(vec![c.clone()]).to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using stable.example.com/v1: .spec.replicas"
        );
        assert_eq!(c.cause_message(), "conflict with \"kubectl-client-side-apply\" using stable.example.com/v1");
        assert_eq!(c.field(), ".spec.replicas");
    }

    #[test]
    fn several_conflicts_grouped_by_manager() {
        let conflicts = Conflicts(vec![
            conflict(Manager::new("b", Operation::Apply, "", ""), &["spec", "x"]),
            conflict(Manager::new("a", Operation::Update, "g/v1", "status"), &["status", "y"]),
            conflict(Manager::new("b", Operation::Apply, "", ""), &["spec", "z"]),
        ]);
        assert_eq!(
            conflicts.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\" with subresource \"status\" using g/v1:\n- .status.y\nconflicts with \"b\":\n- .spec.x\n- .spec.z"
        );
    }
}
