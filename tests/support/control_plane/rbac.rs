//! The control-plane double's authorization: a small table of RBAC-like rules, each the
//! effect of one binding. It answers SubjectAccessReviews for the project, and guards the
//! double's own endpoints (the ConfigMap, reviews, namespaces) as kube-apiserver's RBAC does.

use serde_json::Value;

/// Who a binding names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    Group(String),
}

/// One binding's grant. `namespaces: None` is cluster-wide (a ClusterRoleBinding); `Some`
/// grants in those namespaces only (RoleBindings).
#[derive(Debug, Clone)]
pub struct Rule {
    /// The binding's name (RBAC's allow reason names it; tests remove bindings by name).
    pub binding: String,
    pub subjects: Vec<Subject>,
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    /// `plural` or `plural/subresource`, `*` for all.
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub namespaces: Option<Vec<String>>,
    pub non_resource_urls: Vec<String>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

impl Rule {
    /// A resource rule.
    pub fn resources(
        binding: &str,
        subjects: Vec<Subject>,
        verbs: &[&str],
        groups: &[&str],
        resources: &[&str],
    ) -> Rule {
        Rule {
            binding: binding.into(),
            subjects,
            verbs: strings(verbs),
            api_groups: strings(groups),
            resources: strings(resources),
            resource_names: Vec::new(),
            namespaces: None,
            non_resource_urls: Vec::new(),
        }
    }

    pub fn in_namespaces(mut self, namespaces: &[&str]) -> Rule {
        self.namespaces = Some(strings(namespaces));
        self
    }

    pub fn named(mut self, names: &[&str]) -> Rule {
        self.resource_names = strings(names);
        self
    }

    /// A non-resource rule (paths; a trailing `*` matches a prefix).
    pub fn paths(binding: &str, subjects: Vec<Subject>, verbs: &[&str], urls: &[&str]) -> Rule {
        Rule {
            binding: binding.into(),
            subjects,
            verbs: strings(verbs),
            api_groups: Vec::new(),
            resources: Vec::new(),
            resource_names: Vec::new(),
            namespaces: None,
            non_resource_urls: strings(urls),
        }
    }
}

/// A user as the double knows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    pub fn new(name: &str, groups: &[&str]) -> User {
        User { name: name.into(), groups: strings(groups), ..User::default() }
    }
}

/// What is asked: the attributes of a SubjectAccessReview.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    pub resource_request: bool,
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub path: String,
}

impl Attributes {
    /// From a SubjectAccessReview spec.
    pub fn from_spec(spec: &Value) -> Attributes {
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        if let Some(r) = spec.get("resourceAttributes") {
            Attributes {
                resource_request: true,
                verb: text(r, "verb"),
                group: text(r, "group"),
                resource: text(r, "resource"),
                subresource: text(r, "subresource"),
                namespace: text(r, "namespace"),
                name: text(r, "name"),
                path: String::new(),
            }
        } else {
            let n = spec.get("nonResourceAttributes").cloned().unwrap_or_default();
            Attributes { verb: text(&n, "verb"), path: text(&n, "path"), ..Attributes::default() }
        }
    }
}

fn matches(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

fn path_matches(urls: &[String], path: &str) -> bool {
    urls.iter().any(|u| match u.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => u == path,
    })
}

impl Rule {
    fn binds(&self, user: &User) -> bool {
        self.subjects.iter().any(|s| match s {
            Subject::User(name) => *name == user.name,
            Subject::Group(group) => user.groups.iter().any(|g| g == group),
        })
    }

    fn grants(&self, attrs: &Attributes) -> bool {
        if !matches(&self.verbs, &attrs.verb) {
            return false;
        }
        if !attrs.resource_request {
            return path_matches(&self.non_resource_urls, &attrs.path);
        }
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        matches(&self.api_groups, &attrs.group)
            && matches(&self.resources, &resource)
            && (self.resource_names.is_empty() || self.resource_names.contains(&attrs.name))
            && self.namespaces.as_ref().is_none_or(|ns| ns.contains(&attrs.namespace))
    }
}

/// RBAC's answer: the binding that allows, if any. `system:masters` is always allowed.
pub fn decide<'a>(rules: &'a [Rule], user: &User, attrs: &Attributes) -> Option<&'a str> {
    if user.groups.iter().any(|g| g == "system:masters") {
        return Some("system:masters");
    }
    rules.iter().find(|r| r.binds(user) && r.grants(attrs)).map(|r| r.binding.as_str())
}

/// The identity the project's server uses at the double (its service account).
pub const SERVICE_ACCOUNT: &str = "system:serviceaccount:crd-apiserver:crd-apiserver";

/// What a cluster set up as the manifests say grants: discovery to everyone authenticated,
/// and the server's service account its three bindings.
pub fn default_rules() -> Vec<Rule> {
    let sa = || vec![Subject::User(SERVICE_ACCOUNT.into())];
    vec![
        Rule::paths(
            "system:discovery",
            vec![Subject::Group("system:authenticated".into())],
            &["get"],
            &[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/openapi",
                "/openapi/*",
                "/version",
                "/version/",
                "/healthz",
                "/livez",
                "/readyz",
            ],
        ),
        Rule::resources(
            "crd-apiserver:system:auth-delegator",
            sa(),
            &["create"],
            &["authentication.k8s.io"],
            &["tokenreviews"],
        ),
        Rule::resources(
            "crd-apiserver:system:auth-delegator",
            sa(),
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
        ),
        Rule::resources(
            "crd-apiserver:extension-apiserver-authentication-reader",
            sa(),
            &["get", "list", "watch"],
            &[""],
            &["configmaps"],
        )
        .in_namespaces(&["kube-system"])
        .named(&["extension-apiserver-authentication"]),
        Rule::resources("crd-apiserver:namespace-reader", sa(), &["get", "list", "watch"], &[""], &["namespaces"]),
        Rule::resources(
            "crd-apiserver:admission",
            sa(),
            &["get", "list", "watch"],
            &["admissionregistration.k8s.io"],
            &[
                "mutatingwebhookconfigurations",
                "validatingwebhookconfigurations",
                "validatingadmissionpolicies",
                "validatingadmissionpolicybindings",
                "mutatingadmissionpolicies",
                "mutatingadmissionpolicybindings",
            ],
        ),
        Rule::resources("crd-apiserver:admission", sa(), &["get", "list", "watch"], &[""], &["resourcequotas"]),
        Rule::resources("crd-apiserver:admission", sa(), &["update"], &[""], &["resourcequotas/status"]),
        Rule::resources(
            "system:controller:namespace-controller",
            vec![Subject::User(NAMESPACE_CONTROLLER.into())],
            &["get", "list", "watch", "delete", "deletecollection"],
            &["*"],
            &["*"],
        ),
    ]
}

/// The identity kube-controller-manager's namespace controller acts as.
pub const NAMESPACE_CONTROLLER: &str = "system:serviceaccount:kube-system:namespace-controller";

/// The grant `--cluster-definitions` needs: reading CustomResourceDefinitions (not in the
/// default rules: the chart grants it only when asked).
pub fn definitions_reader() -> Rule {
    Rule::resources(
        "crd-apiserver:cluster-definitions",
        vec![Subject::User(SERVICE_ACCOUNT.into())],
        &["get", "list", "watch"],
        &["apiextensions.k8s.io"],
        &["customresourcedefinitions"],
    )
}
