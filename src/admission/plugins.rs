//! The admission plugins that run, chosen with kube-apiserver's flags
//! (`--enable-admission-plugins`, `--disable-admission-plugins`) and names, checked as
//! k8s.io/apiserver checks them.
//!
//! Owns the plugin names and defaults; never decides a request.

/// Which admission plugins run (kube-apiserver's names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plugins {
    pub namespace_lifecycle: bool,
    pub mutating_policies: bool,
    pub mutating_webhooks: bool,
    pub validating_webhooks: bool,
    pub resource_quota: bool,
    pub validating_policies: bool,
}

impl Default for Plugins {
    fn default() -> Self {
        Plugins {
            namespace_lifecycle: true,
            mutating_policies: true,
            mutating_webhooks: true,
            validating_webhooks: true,
            resource_quota: true,
            validating_policies: true,
        }
    }
}

/// The plugins this server knows, in kube-apiserver's order, and whether each is on by
/// default.
pub const KNOWN_PLUGINS: &[(&str, bool)] = &[
    ("NamespaceLifecycle", true),
    ("MutatingAdmissionPolicy", true),
    ("MutatingAdmissionWebhook", true),
    ("ValidatingAdmissionPolicy", true),
    ("ValidatingAdmissionWebhook", true),
    ("ResourceQuota", true),
];

impl Plugins {
    /// The plugins of `--enable-admission-plugins` and `--disable-admission-plugins`, checked
    /// as k8s.io/apiserver checks them (unknown names, overlaps; every problem, aggregated).
    pub fn from_flags(enable: &[String], disable: &[String]) -> Result<Plugins, String> {
        let known = |name: &str| KNOWN_PLUGINS.iter().any(|(n, _)| *n == name);
        let mut errors: Vec<String> = Vec::new();
        errors.extend(
            enable.iter().filter(|n| !known(n)).map(|n| format!("enable-admission-plugins plugin {n:?} is unknown")),
        );
        errors.extend(
            disable.iter().filter(|n| !known(n)).map(|n| format!("disable-admission-plugins plugin {n:?} is unknown")),
        );
        let mut overlap: Vec<&String> = enable.iter().filter(|n| disable.contains(n)).collect();
        overlap.sort();
        overlap.dedup();
        if !overlap.is_empty() {
            let names: Vec<&str> = overlap.iter().map(|s| s.as_str()).collect();
            errors.push(format!(
                "[{}] in enable-admission-plugins and disable-admission-plugins overlapped",
                names.join(" ")
            ));
        }
        match errors.as_slice() {
            [] => {}
            [one] => return Err(one.clone()),
            many => return Err(format!("[{}]", many.join(", "))),
        }
        let on = |name: &str| {
            let default = KNOWN_PLUGINS.iter().any(|(n, d)| *n == name && *d);
            (default || enable.iter().any(|n| n == name)) && !disable.iter().any(|n| n == name)
        };
        Ok(Plugins {
            namespace_lifecycle: on("NamespaceLifecycle"),
            mutating_policies: on("MutatingAdmissionPolicy"),
            mutating_webhooks: on("MutatingAdmissionWebhook"),
            validating_webhooks: on("ValidatingAdmissionWebhook"),
            resource_quota: on("ResourceQuota"),
            validating_policies: on("ValidatingAdmissionPolicy"),
        })
    }

    /// The names of the plugins that run, in order.
    pub fn running(&self) -> Vec<&'static str> {
        let flags = [
            ("NamespaceLifecycle", self.namespace_lifecycle),
            ("MutatingAdmissionPolicy", self.mutating_policies),
            ("MutatingAdmissionWebhook", self.mutating_webhooks),
            ("ValidatingAdmissionPolicy", self.validating_policies),
            ("ValidatingAdmissionWebhook", self.validating_webhooks),
            ("ResourceQuota", self.resource_quota),
        ];
        flags.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_are_checked_as_kubernetes_checks_them() {
        let all = Plugins::from_flags(&[], &[]).unwrap();
        assert_eq!(all, Plugins::default());
        let fewer = Plugins::from_flags(&[], &names(&["ResourceQuota", "ValidatingAdmissionWebhook"])).unwrap();
        assert_eq!(
            fewer.running(),
            ["NamespaceLifecycle", "MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy"]
        );
        assert_eq!(
            Plugins::from_flags(&names(&["PodSecurity"]), &[]).unwrap_err(),
            "enable-admission-plugins plugin \"PodSecurity\" is unknown"
        );
        assert_eq!(
            Plugins::from_flags(&names(&["ResourceQuota", "Nope"]), &names(&["ResourceQuota"])).unwrap_err(),
            "[enable-admission-plugins plugin \"Nope\" is unknown, [ResourceQuota] in enable-admission-plugins and disable-admission-plugins overlapped]"
        );
    }
}
