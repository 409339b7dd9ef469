//! Which slice of `/openapi/v2`, of the `/openapi/v3` index and of aggregated `/apis` a
//! connection asks for, by the TLS server name it sent.
//!
//! kube-aggregator downloads `/openapi/v2` once per APIService through the APIService's
//! Service (TLS server name `<service>.<namespace>.svc`), keeps that download whole and a copy
//! filtered to the APIService's group version; it downloads the `/openapi/v3` index once per
//! APIService too and keeps each whole; its discovery manager fetches `/apis` once per Service
//! and keeps that whole too. With one Service per group version whose name ends in `-<suffix>`
//! (`suffix`: the first ten hex digits of the SHA-256 of `<group>/<version>`, as Helm's
//! `sha256sum | trunc 10` writes them), each download is that group version's part alone. Names
//! ending in the suffix of a group (SHA-256 of the group name: installs made before slices were
//! per group version) get the group's part. Any other name (or none) gets the whole document.
//! Never sees HTTP.

use std::collections::HashMap;

/// How many hex digits of the SHA-256 end a slice Service's name.
const SUFFIX_LEN: usize = 10;

/// The first ten lowercase hex digits of the SHA-256 of `text`.
fn hex_prefix(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let hex: String = digest.as_ref().iter().take(SUFFIX_LEN.div_ceil(2)).map(|b| format!("{b:02x}")).collect();
    hex.chars().take(SUFFIX_LEN).collect()
}

/// The suffix that names `group`'s slice (a Service per group, as installs before per group
/// version slices made them).
pub fn suffix(group: &str) -> String {
    hex_prefix(group)
}

/// The suffix that names the slice of `group`'s `version`: of `<group>/<version>` (a group
/// name has no `/`, so it never hashes the same text as a group's suffix does).
pub fn version_suffix(group: &str, version: &str) -> String {
    hex_prefix(&format!("{group}/{version}"))
}

/// The part of a document a server name picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slice<'a> {
    /// Every version of a group.
    Group(&'a str),
    /// One version of a group: `(group, version)`.
    GroupVersion(&'a str, &'a str),
}

impl<'a> Slice<'a> {
    pub fn group(&self) -> &'a str {
        match self {
            Slice::Group(group) | Slice::GroupVersion(group, _) => group,
        }
    }
}

/// The served groups and group versions by their slice suffix.
#[derive(Debug, Clone, Default)]
pub struct SliceNames {
    /// `(group, Some(version))` for a group version, `(group, None)` for a group.
    by_suffix: HashMap<String, (String, Option<String>)>,
}

impl SliceNames {
    /// The names of `groups` (each with its versions). Should a group's suffix equal a group
    /// version's (ten hex digits: one chance in 2^40 per pair), the group version keeps it.
    pub fn new<'a>(groups: impl Iterator<Item = (&'a str, &'a [String])>) -> SliceNames {
        let mut by_suffix = HashMap::new();
        let mut versions = Vec::new();
        for (group, served) in groups {
            by_suffix.insert(suffix(group), (group.to_string(), None));
            versions.extend(served.iter().map(|v| (version_suffix(group, v), (group.to_string(), Some(v.clone())))));
        }
        by_suffix.extend(versions);
        SliceNames { by_suffix }
    }

    /// The slice `server_name` asks for: its first DNS label ends in `-<suffix>` of a served
    /// group version or group.
    pub fn slice(&self, server_name: &str) -> Option<Slice<'_>> {
        let service = server_name.split('.').next()?;
        let (_, tail) = service.rsplit_once('-')?;
        if tail.len() != SUFFIX_LEN {
            return None;
        }
        let (group, version) = self.by_suffix.get(&tail.to_ascii_lowercase())?;
        Some(match version {
            Some(version) => Slice::GroupVersion(group, version),
            None => Slice::Group(group),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_helms_sha256sum_truncated() {
        // printf %s ec2.aws.upbound.io | sha256sum | cut -c1-10
        assert_eq!(suffix("ec2.aws.upbound.io"), "3ea6350403");
        assert_eq!(suffix("stable.example.com").len(), 10);
        // printf %s ec2.aws.upbound.io/v1beta1 | sha256sum | cut -c1-10
        assert_eq!(version_suffix("ec2.aws.upbound.io", "v1beta1"), "a242bfdd9b");
    }

    #[test]
    fn a_service_named_by_a_served_suffix_picks_its_slice() {
        let ec2 = ["v1beta1".to_string(), "v1beta2".to_string()];
        let stable = ["v1".to_string()];
        let names =
            SliceNames::new([("ec2.aws.upbound.io", &ec2[..]), ("stable.example.com", &stable[..])].into_iter());
        let group = format!("crd-apiserver-{}.crd-apiserver.svc", suffix("ec2.aws.upbound.io"));
        assert_eq!(names.slice(&group), Some(Slice::Group("ec2.aws.upbound.io")));
        assert_eq!(
            names.slice(&group.to_uppercase()),
            Some(Slice::Group("ec2.aws.upbound.io")),
            "DNS names ignore case"
        );
        let version = format!("crd-apiserver-{}.crd-apiserver.svc", version_suffix("ec2.aws.upbound.io", "v1beta2"));
        assert_eq!(names.slice(&version), Some(Slice::GroupVersion("ec2.aws.upbound.io", "v1beta2")));
        assert_eq!(names.slice(&version).map(|s| s.group()), Some("ec2.aws.upbound.io"));
        let stable_v1 = format!("x-{}", version_suffix("stable.example.com", "v1"));
        assert_eq!(names.slice(&stable_v1), Some(Slice::GroupVersion("stable.example.com", "v1")));
        let unserved = format!("crd-apiserver-{}.crd-apiserver.svc", version_suffix("stable.example.com", "v2"));
        assert_eq!(names.slice(&unserved), None, "not a served version");
        let other = format!("crd-apiserver-{}.crd-apiserver.svc", suffix("s3.aws.upbound.io"));
        assert_eq!(names.slice(&other), None, "not a served group");
        assert_eq!(names.slice("crd-apiserver.crd-apiserver.svc"), None);
        assert_eq!(names.slice("localhost"), None);
        assert_eq!(names.slice(""), None);
    }
}
