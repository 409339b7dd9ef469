//! The label values of k8s.io/apiserver's request metrics, computed from a request the way its
//! `MonitorRequest` cleans them (reported verb, scope, dry run), as small enums that index a
//! resource's series without hashing or allocating.

use crate::core::request_info::RequestInfo;

/// The reported verb: the HTTP method made canonical (GET of a collection is LIST, a watch is
/// WATCH, an apply PATCH is APPLY); anything else is `other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Post,
    Put,
    Patch,
    Apply,
    Delete,
    Other,
}

impl Verb {
    pub const ALL: [Verb; 9] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Post,
        Verb::Put,
        Verb::Patch,
        Verb::Apply,
        Verb::Delete,
        Verb::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Patch => "PATCH",
            Verb::Apply => "APPLY",
            Verb::Delete => "DELETE",
            Verb::Other => "other",
        }
    }
}

/// `resource` (a named object, or a create), `namespace`, `cluster`, or empty for requests
/// that address no resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Resource,
    Namespace,
    Cluster,
    None,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Resource, Scope::Namespace, Scope::Cluster, Scope::None];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Resource => "resource",
            Scope::Namespace => "namespace",
            Scope::Cluster => "cluster",
            Scope::None => "",
        }
    }
}

/// The `dry_run` label: empty, `All` (the one valid value), or `invalid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DryRun {
    No,
    All,
    Invalid,
}

impl DryRun {
    pub const ALL: [DryRun; 3] = [DryRun::No, DryRun::All, DryRun::Invalid];

    pub fn as_str(self) -> &'static str {
        match self {
            DryRun::No => "",
            DryRun::All => "All",
            DryRun::Invalid => "invalid",
        }
    }

    /// From the raw query, as `cleanDryRun` reads it: repeated values are deduplicated, and
    /// any value but `All` makes the label `invalid`.
    pub fn of_query(query: Option<&str>) -> DryRun {
        let Some(query) = query.filter(|q| q.contains("dryRun")) else {
            return DryRun::No;
        };
        let mut seen = DryRun::No;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            if key == "dryRun" {
                if value != "All" {
                    return DryRun::Invalid;
                }
                seen = DryRun::All;
            }
        }
        seen
    }
}

/// Where a request's series live within its resource: one of the resource's subresources.
pub const SUBRESOURCES: [&str; 3] = ["", "status", "scale"];

/// The labels of one request, apart from group, version, resource and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLabels {
    pub verb: Verb,
    pub scope: Scope,
    pub dry_run: DryRun,
    /// Index into the series' subresource names.
    pub subresource: usize,
    /// Kubernetes records response sizes of gets and lists only.
    pub records_size: bool,
}

/// Number of distinct [`RequestLabels`] (without `records_size`, which follows from the verb).
pub const CELLS: usize = Verb::ALL.len() * Scope::ALL.len() * DryRun::ALL.len() * SUBRESOURCES.len();

impl RequestLabels {
    /// The labels of a request as k8s.io/apiserver's metrics clean them.
    pub fn of(method: &http::Method, info: &RequestInfo, query: Option<&str>, content_type: Option<&[u8]>) -> Self {
        let scope = scope_of(info);
        let verb = if info.verb == "watch" {
            Verb::Watch
        } else {
            match *method {
                http::Method::GET | http::Method::HEAD => {
                    if matches!(scope, Scope::Resource | Scope::None) {
                        Verb::Get
                    } else {
                        Verb::List
                    }
                }
                http::Method::POST => Verb::Post,
                http::Method::PUT => Verb::Put,
                http::Method::PATCH if content_type == Some(b"application/apply-patch+yaml") => Verb::Apply,
                http::Method::PATCH => Verb::Patch,
                http::Method::DELETE => Verb::Delete,
                _ => Verb::Other,
            }
        };
        // Emptiness first: comparing two empty strings costs a slow `memcmp` call on some CPUs.
        let subresource = if info.subresource.is_empty() {
            0
        } else {
            SUBRESOURCES.iter().position(|s| *s == info.subresource).unwrap_or(0)
        };
        RequestLabels {
            verb,
            scope,
            dry_run: DryRun::of_query(query),
            subresource,
            records_size: matches!(info.verb.as_str(), "get" | "list"),
        }
    }

    /// The labels of a non-resource endpoint Kubernetes instruments (aggregated discovery).
    pub fn non_resource(verb: Verb, subresource: usize) -> Self {
        RequestLabels { verb, scope: Scope::None, dry_run: DryRun::No, subresource, records_size: false }
    }

    /// The position of these labels in a series' table of cells.
    pub fn index(&self) -> usize {
        let verb = self.verb as usize;
        let scope = self.scope as usize;
        let dry_run = self.dry_run as usize;
        ((verb * Scope::ALL.len() + scope) * DryRun::ALL.len() + dry_run) * SUBRESOURCES.len() + self.subresource
    }
}

/// `CleanScope`: a named object or a create is `resource`, then the namespace, then `cluster`.
fn scope_of(info: &RequestInfo) -> Scope {
    if !info.name.is_empty() || info.verb == "create" {
        Scope::Resource
    } else if !info.namespace.is_empty() {
        Scope::Namespace
    } else if info.is_resource_request {
        Scope::Cluster
    } else {
        Scope::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(verb: &str, namespace: &str, name: &str, subresource: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            namespace: namespace.into(),
            name: name.into(),
            subresource: subresource.into(),
            ..RequestInfo::default()
        }
    }

    #[test]
    fn verbs_and_scopes_are_cleaned_as_kubernetes_does() {
        let get = RequestLabels::of(&http::Method::GET, &info("get", "ns", "a", ""), None, None);
        assert_eq!((get.verb, get.scope, get.records_size), (Verb::Get, Scope::Resource, true));
        let list = RequestLabels::of(&http::Method::GET, &info("list", "ns", "", ""), None, None);
        assert_eq!((list.verb, list.scope), (Verb::List, Scope::Namespace));
        let watch = RequestLabels::of(&http::Method::GET, &info("watch", "", "", ""), Some("watch=true"), None);
        assert_eq!((watch.verb, watch.scope, watch.records_size), (Verb::Watch, Scope::Cluster, false));
        let create = RequestLabels::of(&http::Method::POST, &info("create", "ns", "", ""), None, None);
        assert_eq!((create.verb, create.scope), (Verb::Post, Scope::Resource));
        let apply = RequestLabels::of(
            &http::Method::PATCH,
            &info("patch", "ns", "a", "status"),
            None,
            Some(b"application/apply-patch+yaml"),
        );
        assert_eq!((apply.verb, SUBRESOURCES[apply.subresource]), (Verb::Apply, "status"));
        // A deletecollection is reported as DELETE, as Kubernetes reports it.
        let sweep = RequestLabels::of(&http::Method::DELETE, &info("deletecollection", "ns", "", ""), None, None);
        assert_eq!((sweep.verb, sweep.scope), (Verb::Delete, Scope::Namespace));
    }

    #[test]
    fn dry_run_values() {
        assert_eq!(DryRun::of_query(None), DryRun::No);
        assert_eq!(DryRun::of_query(Some("fieldManager=x")), DryRun::No);
        assert_eq!(DryRun::of_query(Some("dryRun=All&dryRun=All")), DryRun::All);
        assert_eq!(DryRun::of_query(Some("dryRun=Bogus")), DryRun::Invalid);
    }

    #[test]
    fn every_label_combination_has_its_own_cell() {
        let mut seen = std::collections::HashSet::new();
        for verb in Verb::ALL {
            for scope in Scope::ALL {
                for dry_run in DryRun::ALL {
                    for subresource in 0..SUBRESOURCES.len() {
                        let labels = RequestLabels { verb, scope, dry_run, subresource, records_size: false };
                        assert!(labels.index() < CELLS);
                        assert!(seen.insert(labels.index()));
                    }
                }
            }
        }
    }
}
