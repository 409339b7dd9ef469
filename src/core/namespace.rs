//! What is known of a namespace, as the namespace lifecycle rules need it.

/// The state of a namespace of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceState {
    Active,
    /// Being deleted (phase Terminating, or a deletionTimestamp): no new content may be made.
    Terminating,
    Missing,
}
