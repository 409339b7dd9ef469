//! Object-count quota (`ResourceQuota` admission, the object-count evaluator): a create in a
//! namespace whose quotas limit `count/<plural>.<group>` is refused when it would exceed
//! `status.hard`, else each such quota's `status.used` is raised by one in the main apiserver
//! with compare-and-swap (retried against the live quota on conflicts, three times, as
//! kube-apiserver's quota evaluator retries), before the object is stored.
//!
//! Owns the decision and its texts; the quotas come through [`QuotaSource`] (`kube` keeps them
//! with list+watch and writes their status).

use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{Denial, Error, Request};

/// How often a conflicting status update is retried against the live quota.
const RETRIES: usize = 3;

/// Why a quota's status could not be written: the main apiserver's status.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateFailure {
    pub conflict: bool,
    pub status: Denial,
}

/// The quotas of the cluster.
pub trait QuotaSource: Send + Sync {
    /// Whether the first list arrived.
    fn is_synced(&self) -> bool;
    /// Whether some quota anywhere limits the count of this group and resource (cheap, no
    /// allocation).
    fn covers(&self, group: &str, resource: &str) -> bool;
    /// The known quotas of a namespace.
    fn quotas<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Vec<ResourceQuota>, String>>;
    /// One quota as the main apiserver has it now (`None`: deleted).
    fn live<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<ResourceQuota>, String>>;
    /// Writes `status` of a quota, compare-and-swap on its resourceVersion.
    fn update_status<'a>(&'a self, quota: &'a ResourceQuota) -> BoxFuture<'a, Result<ResourceQuota, UpdateFailure>>;
}

/// The quota resource name counting a resource (`count/crontabs.stable.example.com`).
pub fn count_name(group: &str, resource: &str) -> String {
    if group.is_empty() { format!("count/{resource}") } else { format!("count/{resource}.{group}") }
}

/// The group and resource a `count/...` name limits, if it is one.
pub fn counted(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("count/")?;
    Some(match rest.split_once('.') {
        Some((resource, group)) => (group, resource),
        None => ("", rest),
    })
}

/// A count quantity in thousandths (`3`, `3k`, `1500m`, `2Ki`); `None` if unreadable.
pub fn parse_count(text: &str) -> Option<i128> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let mut milli: i128 = whole.parse::<i128>().ok()?.checked_mul(1000)?;
    let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
    let sign = if whole.starts_with('-') { -1 } else { 1 };
    milli += sign * digits.parse::<i128>().ok()?;
    let factor: i128 = match suffix {
        "" => return Some(milli),
        "m" => return Some(milli / 1000),
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    milli.checked_mul(factor)
}

/// A count in thousandths written as a quantity (whole numbers as plain digits).
fn format_count(milli: i128) -> String {
    if milli % 1000 == 0 { (milli / 1000).to_string() } else { format!("{milli}m") }
}

fn forbidden(text: String) -> Error {
    Error::Forbidden(text)
}

/// The quotas after charging one object to every quota limiting it, or the refusal.
fn charge(quotas: &[ResourceQuota], name: &str) -> Result<Vec<ResourceQuota>, Error> {
    // Every limiting quota must have counted its usage before any limit is compared.
    for quota in quotas {
        let status = quota.status.as_ref();
        let limits = status.and_then(|s| s.hard.as_ref()).is_some_and(|h| h.contains_key(name));
        let counted = status.and_then(|s| s.used.as_ref()).is_some_and(|u| u.contains_key(name));
        if limits && !counted {
            let quota_name = quota.metadata.name.clone().unwrap_or_default();
            return Err(forbidden(format!("status unknown for quota: {quota_name}, resources: {name}")));
        }
    }
    let mut charged = Vec::new();
    for quota in quotas {
        let status = quota.status.as_ref();
        let Some(hard) = status.and_then(|s| s.hard.as_ref()).and_then(|h| h.get(name)) else { continue };
        let quota_name = quota.metadata.name.clone().unwrap_or_default();
        let Some(used) = status.and_then(|s| s.used.as_ref()).and_then(|u| u.get(name)) else {
            return Err(forbidden(format!("status unknown for quota: {quota_name}, resources: {name}")));
        };
        let (Some(hard_count), Some(used_count)) = (parse_count(&hard.0), parse_count(&used.0)) else {
            return Err(Error::Internal(format!("unreadable quantity in quota {quota_name}")));
        };
        if used_count + 1000 > hard_count {
            return Err(forbidden(format!(
                "exceeded quota: {quota_name}, requested: {name}=1, used: {name}={}, limited: {name}={}",
                used.0, hard.0
            )));
        }
        let mut next = quota.clone();
        if let Some(used) = next.status.as_mut().and_then(|s| s.used.as_mut()) {
            used.insert(name.to_string(), Quantity(format_count(used_count + 1000)));
        }
        charged.push(next);
    }
    Ok(charged)
}

/// Whether a create may be counted by the namespace's object-count quotas (when not,
/// [`admit`] has nothing to do).
pub fn applies(source: &dyn QuotaSource, request: &Request<'_>) -> bool {
    let t = &request.target;
    !t.namespace.is_empty() && t.subresource != "status" && source.covers(t.group, t.resource)
}

/// Admits a create against the namespace's object-count quotas.
pub async fn admit(source: &dyn QuotaSource, request: &Request<'_>) -> Result<(), Error> {
    if !applies(source, request) {
        return Ok(());
    }
    let t = &request.target;
    let name = count_name(t.group, t.resource);
    let mut quotas = source.quotas(t.namespace).await.map_err(Error::Internal)?;
    for attempt in 0..=RETRIES {
        let charged = charge(&quotas, &name)?;
        if charged.is_empty() || request.dry_run {
            return Ok(());
        }
        let mut failed = Vec::new();
        let mut last = None;
        for quota in &charged {
            if let Err(failure) = source.update_status(quota).await {
                failed.push(quota.metadata.name.clone().unwrap_or_default());
                last = Some(failure);
            }
        }
        let Some(last) = last else { return Ok(()) };
        if attempt == RETRIES {
            return Err(Error::Denied(Box::new(last.status)));
        }
        // Someone else changed these quotas meanwhile: charge their current state again.
        quotas = Vec::new();
        for quota_name in &failed {
            if let Some(live) = source.live(t.namespace, quota_name).await.map_err(Error::Internal)? {
                quotas.push(live);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quota(name: &str, hard: &str, used: Option<&str>) -> ResourceQuota {
        let resource = "count/crontabs.stable.example.com";
        let mut status = json!({"hard": {resource: hard}});
        if let Some(used) = used {
            status["used"] = json!({resource: used});
        }
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "status": status})).unwrap()
    }

    #[test]
    fn counts_and_texts() {
        let name = "count/crontabs.stable.example.com";
        assert_eq!(counted(name), Some(("stable.example.com", "crontabs")));
        assert_eq!(counted("count/pods"), Some(("", "pods")));
        assert_eq!(counted("pods"), None);
        assert_eq!(
            (parse_count("3"), parse_count("1k"), parse_count("1500m"), parse_count("2Ki")),
            (Some(3000), Some(1_000_000), Some(1500), Some(2_048_000))
        );
        let charged = charge(&[quota("q", "3", Some("2"))], name).unwrap();
        assert_eq!(charged[0].status.as_ref().unwrap().used.as_ref().unwrap()[name].0, "3");
        assert_eq!(
            charge(&[quota("q", "3", Some("3"))], name).unwrap_err(),
            Error::Forbidden(format!("exceeded quota: q, requested: {name}=1, used: {name}=3, limited: {name}=3"))
        );
        assert_eq!(
            charge(&[quota("q", "3", None)], name).unwrap_err(),
            Error::Forbidden(format!("status unknown for quota: q, resources: {name}"))
        );
    }
}
