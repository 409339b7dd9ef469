//! `spec.conversion`: the checks Kubernetes makes on it (strategy, the webhook's client config
//! and review versions, with its paths in the internal shape,
//! `spec.conversion.webhookClientConfig...`) and its served form.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, ServiceReference, WebhookClientConfig,
};

use crate::core::field::{FieldError, Path};
use crate::core::names;

/// The ConversionReview versions this server speaks, in Kubernetes' sorted order.
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
/// The webhook URL form in Kubernetes' messages.
const URL_FORM: &str = "; desired format: https://host[/path]";

/// Where a conversion webhook is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Url(String),
    /// A Service in the cluster: `https://<name>.<namespace>.svc:<port><path>`.
    Service {
        name: String,
        namespace: String,
        port: u16,
        path: String,
    },
}

/// A definition's conversion webhook.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Webhook {
    pub endpoint: Endpoint,
    /// PEM roots to trust for the webhook's serving certificate (empty: the system's).
    pub ca_bundle: Vec<u8>,
    /// The ConversionReview version to send: the first of `conversionReviewVersions` this
    /// server speaks.
    pub review_version: String,
}

/// How a definition's objects change version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Conversion {
    /// Only `apiVersion` changes.
    #[default]
    None,
    Webhook(Webhook),
}

/// The served form of a checked `spec.conversion`.
pub fn build(conversion: Option<&CustomResourceConversion>) -> Conversion {
    let Some(webhook) = conversion.filter(|c| c.strategy == "Webhook").and_then(|c| c.webhook.as_ref()) else {
        return Conversion::None;
    };
    let Some(config) = &webhook.client_config else { return Conversion::None };
    let endpoint = match (&config.url, &config.service) {
        (Some(url), _) => Endpoint::Url(url.clone()),
        (None, Some(service)) => Endpoint::Service {
            name: service.name.clone(),
            namespace: service.namespace.clone(),
            port: u16::try_from(service.port.unwrap_or(443)).unwrap_or(443),
            path: service.path.clone().unwrap_or_default(),
        },
        (None, None) => return Conversion::None,
    };
    let review_version = webhook
        .conversion_review_versions
        .iter()
        .find(|v| REVIEW_VERSIONS.contains(&v.as_str()))
        .cloned()
        .unwrap_or_else(|| "v1".to_string());
    Conversion::Webhook(Webhook {
        endpoint,
        ca_bundle: config.ca_bundle.as_ref().map(|b| b.0.clone()).unwrap_or_default(),
        review_version,
    })
}

/// Every problem with `spec.conversion`.
pub fn check(conversion: &CustomResourceConversion, preserve_unknown_fields: bool, errs: &mut Vec<FieldError>) {
    let path = Path::new("spec").child("conversion");
    match conversion.strategy.as_str() {
        "None" | "Webhook" => {}
        "" => errs.push(FieldError::required(path.child("strategy"), "")),
        other => errs.push(FieldError::not_supported(path.child("strategy"), other, &["None", "Webhook"])),
    }
    let config = conversion.webhook.as_ref().and_then(|w| w.client_config.as_ref());
    let review_versions: &[String] =
        conversion.webhook.as_ref().map(|w| w.conversion_review_versions.as_slice()).unwrap_or_default();
    if conversion.strategy != "Webhook" {
        if config.is_some() {
            errs.push(FieldError::forbidden(
                path.child("webhookClientConfig"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review_versions.is_empty() {
            errs.push(FieldError::forbidden(
                path.child("conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
        return;
    }
    if preserve_unknown_fields {
        errs.push(FieldError::invalid(
            path.child("strategy"),
            "Webhook",
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    match config {
        None => errs
            .push(FieldError::required(path.child("webhookClientConfig"), "required when strategy is set to Webhook")),
        Some(config) => check_client_config(config, &path.child("webhookClientConfig"), errs),
    }
    check_review_versions(review_versions, &path.child("conversionReviewVersions"), errs);
}

fn check_client_config(config: &WebhookClientConfig, path: &Path, errs: &mut Vec<FieldError>) {
    match (&config.url, &config.service) {
        (Some(url), None) => check_url(url, &path.child("url"), errs),
        (None, Some(service)) => check_service(service, &path.child("service"), errs),
        _ => errs.push(FieldError::required(path.clone(), "exactly one of url or service is required")),
    }
    if let Some(bundle) = config.ca_bundle.as_ref().filter(|b| !b.0.is_empty())
        && crate::auth::x509::CaBundle::from_pem(&bundle.0).is_err()
    {
        // Kubernetes keeps such a definition, never Established (InvalidCABundle): not served.
        errs.push(FieldError::invalid(
            path.child("caBundle"),
            String::from_utf8_lossy(&bundle.0).into_owned(),
            "data does not contain any valid RSA or ECDSA certificates",
        ));
    }
}

/// `ValidateWebhookURL` with https forced.
fn check_url(url: &str, path: &Path, errs: &mut Vec<FieldError>) {
    let Some((scheme, rest)) = url.split_once("://") else {
        errs.push(FieldError::invalid(path.clone(), "", format!("'https' is the only allowed URL scheme{URL_FORM}")));
        errs.push(FieldError::invalid(path.clone(), "", format!("host must be specified{URL_FORM}")));
        return;
    };
    if scheme != "https" {
        errs.push(FieldError::invalid(
            path.clone(),
            scheme,
            format!("'https' is the only allowed URL scheme{URL_FORM}"),
        ));
    }
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() {
        errs.push(FieldError::invalid(path.clone(), host, format!("host must be specified{URL_FORM}")));
    }
    if let Some((user, _)) = authority.rsplit_once('@') {
        errs.push(FieldError::invalid(path.clone(), user, "user information is not permitted in the URL"));
    }
    let (before_fragment, fragment) = tail.split_once('#').map_or((tail, ""), |(a, b)| (a, b));
    if !fragment.is_empty() {
        errs.push(FieldError::invalid(path.clone(), fragment, "fragments are not permitted in the URL"));
    }
    if let Some((_, query)) = before_fragment.split_once('?').filter(|(_, q)| !q.is_empty()) {
        errs.push(FieldError::invalid(path.clone(), query, "query parameters are not permitted in the URL"));
    }
}

/// `ValidateWebhookService`. Kubernetes passes the service's name and namespace in swapped
/// order, so a missing name is reported at `namespace` and a missing namespace at `name`;
/// the messages are kept as users see them.
fn check_service(service: &ServiceReference, path: &Path, errs: &mut Vec<FieldError>) {
    if service.namespace.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    }
    if service.name.is_empty() {
        errs.push(FieldError::required(path.child("namespace"), ""));
    }
    let port = service.port.unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            path.child("port"),
            port,
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = service.path.as_deref().filter(|p| !p.is_empty() && *p != "/") else { return };
    let pp = path.child("path");
    if url_path == "//" {
        errs.push(FieldError::invalid(pp, url_path, "segment[0] may not be empty"));
        return;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(pp.clone(), url_path, "must start with a '/'"));
    }
    let trimmed = url_path.get(1..).unwrap_or_default();
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    for (i, step) in trimmed.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(pp.clone(), url_path, format!("segment[{i}] may not be empty")));
            continue;
        }
        for failure in names::dns1123_subdomain(step) {
            errs.push(FieldError::invalid(pp.clone(), url_path, format!("segment[{i}]: {failure}")));
        }
    }
}

fn check_review_versions(versions: &[String], path: &Path, errs: &mut Vec<FieldError>) {
    if versions.is_empty() {
        errs.push(FieldError::required(path.clone(), ""));
        return;
    }
    let mut seen = std::collections::HashSet::new();
    let mut recognized = false;
    for (i, version) in versions.iter().enumerate() {
        if !seen.insert(version.as_str()) {
            errs.push(FieldError::invalid(path.index(i), version.as_str(), "duplicate version"));
            continue;
        }
        for problem in names::dns1035_label(version) {
            errs.push(FieldError::invalid(path.index(i), version.as_str(), problem));
        }
        recognized |= REVIEW_VERSIONS.contains(&version.as_str());
    }
    if !recognized {
        errs.push(FieldError::invalid(
            path.clone(),
            serde_json::json!(versions),
            format!("must include at least one of {}", REVIEW_VERSIONS.join(", ")),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(conversion: serde_json::Value) -> Vec<String> {
        let conversion: CustomResourceConversion = serde_json::from_value(conversion).unwrap();
        let mut errs = Vec::new();
        check(&conversion, false, &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    fn webhook(client_config: serde_json::Value, versions: &[&str]) -> serde_json::Value {
        json!({"strategy": "Webhook", "webhook": {"clientConfig": client_config, "conversionReviewVersions": versions}})
    }

    #[test]
    fn strategies() {
        assert!(errors(json!({"strategy": "None"})).is_empty());
        assert_eq!(
            errors(json!({"strategy": "Sometimes"})),
            [r#"spec.conversion.strategy: Unsupported value: "Sometimes": supported values: "None", "Webhook""#]
        );
        assert_eq!(
            errors(json!({"strategy": "Webhook"})),
            [
                "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
                "spec.conversion.conversionReviewVersions: Required value"
            ]
        );
        assert_eq!(
            errors(
                json!({"strategy": "None", "webhook": {"clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}})
            ),
            [
                "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
                "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook"
            ]
        );
    }

    #[test]
    fn client_configs() {
        assert!(errors(webhook(json!({"url": "https://example.com/webhook"}), &["v1"])).is_empty());
        assert_eq!(
            errors(webhook(
                json!({"url": "https://example.com/webhook", "service": {"name": "n", "namespace": "ns"}}),
                &["v1"]
            )),
            ["spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required"]
        );
        assert_eq!(
            errors(webhook(json!({"url": "http://example.com/w?x=1"}), &["v1"])),
            [
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
                r#"spec.conversion.webhookClientConfig.url: Invalid value: "x=1": query parameters are not permitted in the URL"#
            ]
        );
        assert_eq!(
            errors(webhook(json!({"service": {"name": "n", "namespace": "ns", "port": 0}}), &["v1"])),
            [
                "spec.conversion.webhookClientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"
            ]
        );
        assert_eq!(
            errors(webhook(json!({"service": {"name": "n", "namespace": "ns", "path": "/a//b"}}), &["v1"])),
            [
                r#"spec.conversion.webhookClientConfig.service.path: Invalid value: "/a//b": segment[1] may not be empty"#
            ]
        );
    }

    #[test]
    fn review_versions() {
        let config = json!({"url": "https://example.com/webhook"});
        assert!(errors(webhook(config.clone(), &["invalid-version", "v1beta1"])).is_empty());
        assert_eq!(
            errors(webhook(config.clone(), &["v1beta1", "v1beta1"])),
            [r#"spec.conversion.conversionReviewVersions[1]: Invalid value: "v1beta1": duplicate version"#]
        );
        assert_eq!(
            errors(webhook(config, &["invalid-version"])),
            [
                r#"spec.conversion.conversionReviewVersions: Invalid value: ["invalid-version"]: must include at least one of v1, v1beta1"#
            ]
        );
    }

    #[test]
    fn built_form() {
        let conversion: CustomResourceConversion = serde_json::from_value(webhook(
            json!({"service": {"name": "conv", "namespace": "ops", "path": "/convert"}}),
            &["v2", "v1beta1", "v1"],
        ))
        .unwrap();
        let Conversion::Webhook(w) = build(Some(&conversion)) else { panic!("webhook expected") };
        assert_eq!(w.review_version, "v1beta1");
        assert_eq!(
            w.endpoint,
            Endpoint::Service { name: "conv".into(), namespace: "ops".into(), port: 443, path: "/convert".into() }
        );
        assert_eq!(build(None), Conversion::None);
    }
}
