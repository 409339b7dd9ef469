//! Which group's OpenAPI v2 slice a connection asks for, by the TLS server name it sent.
//!
//! kube-aggregator downloads `/openapi/v2` once per APIService through the APIService's
//! Service (TLS server name `<service>.<namespace>.svc`) and keeps only the paths of that
//! APIService's group version. With one Service per group whose name ends in
//! `-<suffix>` (`suffix`: the first ten hex digits of the group's SHA-256, as Helm's
//! `sha256sum | trunc 10` writes them), each download is that group's slice instead of the
//! whole document. Any other name (or none) gets the whole document. Never sees HTTP.

use std::collections::HashMap;

/// How many hex digits of the group's SHA-256 end a slice Service's name.
const SUFFIX_LEN: usize = 10;

/// The suffix that names `group`'s slice: the first ten lowercase hex digits of its SHA-256.
pub fn suffix(group: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, group.as_bytes());
    let hex: String = digest.as_ref().iter().take(SUFFIX_LEN.div_ceil(2)).map(|b| format!("{b:02x}")).collect();
    hex.chars().take(SUFFIX_LEN).collect()
}

/// The served groups by their slice suffix.
#[derive(Debug, Clone, Default)]
pub struct SliceNames {
    groups: HashMap<String, String>,
}

impl SliceNames {
    pub fn new<'a>(groups: impl Iterator<Item = &'a str>) -> SliceNames {
        SliceNames { groups: groups.map(|g| (suffix(g), g.to_string())).collect() }
    }

    /// The group whose slice `server_name` asks for: its first DNS label ends in `-<suffix>`
    /// of a served group.
    pub fn group(&self, server_name: &str) -> Option<&str> {
        let service = server_name.split('.').next()?;
        let (_, tail) = service.rsplit_once('-')?;
        if tail.len() != SUFFIX_LEN {
            return None;
        }
        self.groups.get(&tail.to_ascii_lowercase()).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_is_helms_sha256sum_truncated() {
        // printf %s ec2.aws.upbound.io | sha256sum | cut -c1-10
        assert_eq!(suffix("ec2.aws.upbound.io"), "3ea6350403");
        assert_eq!(suffix("stable.example.com").len(), 10);
    }

    #[test]
    fn a_service_named_by_a_served_groups_suffix_picks_its_slice() {
        let names = SliceNames::new(["ec2.aws.upbound.io", "stable.example.com"].into_iter());
        let ec2 = format!("crd-apiserver-{}.crd-apiserver.svc", suffix("ec2.aws.upbound.io"));
        assert_eq!(names.group(&ec2), Some("ec2.aws.upbound.io"));
        assert_eq!(names.group(&ec2.to_uppercase()), Some("ec2.aws.upbound.io"), "DNS names ignore case");
        let other = format!("crd-apiserver-{}.crd-apiserver.svc", suffix("s3.aws.upbound.io"));
        assert_eq!(names.group(&other), None, "not a served group");
        assert_eq!(names.group("crd-apiserver.crd-apiserver.svc"), None);
        assert_eq!(names.group("localhost"), None);
        assert_eq!(names.group(""), None);
    }
}
