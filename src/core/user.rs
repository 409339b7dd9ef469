//! The authenticated identity of a request (`user.Info`).

use std::collections::BTreeMap;

/// Who made a request. Put into request extensions by the authentication filter; handlers and
/// the authorizer only read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The group of every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The group that bypasses authorization.
pub const MASTERS_GROUP: &str = "system:masters";
pub const ANONYMOUS_USER: &str = "system:anonymous";
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";

impl UserInfo {
    pub fn new(name: impl Into<String>, groups: Vec<String>) -> Self {
        UserInfo { name: name.into(), groups, ..UserInfo::default() }
    }

    /// The anonymous user, for requests without credentials.
    pub fn anonymous() -> Self {
        UserInfo::new(ANONYMOUS_USER, vec![UNAUTHENTICATED_GROUP.to_string()])
    }

    pub fn is_anonymous(&self) -> bool {
        self.name == ANONYMOUS_USER
    }

    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Appends `system:authenticated` unless it is there already, as every authenticator chain
    /// of Kubernetes does after a success.
    pub fn with_authenticated_group(mut self) -> Self {
        if !self.in_group(AUTHENTICATED_GROUP) {
            self.groups.push(AUTHENTICATED_GROUP.to_string());
        }
        self
    }
}
