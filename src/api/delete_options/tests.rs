//! DeleteOptions read as kube-apiserver v1.36.2 reads them; the texts are its answers to the
//! same requests (a real kube-apiserver serving a custom resource).

use super::*;
use crate::core::request_info::Query;

fn call(query: &str, content_type: Option<&str>) -> Call {
    let mut call = crate::api::present::tests::call();
    call.query = Query::parse(Some(query));
    if let Some(content_type) = content_type {
        call.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_str(content_type).unwrap());
    }
    call
}

fn parse(query: &str, body: &str) -> Result<DeleteOptions, ApiError> {
    DeleteOptions::parse(&call(query, None), body.as_bytes())
}

fn refused(query: &str, body: &str) -> (u16, String) {
    let error = parse(query, body).unwrap_err();
    (error.code, error.message)
}

#[test]
fn bodies_of_other_kinds_are_refused() {
    let cases = [
        (
            r#"{"kind":"Pod","apiVersion":"v1"}"#,
            r#"no kind "Pod" is registered for version "v1" in scheme "pkg/apis/meta/internalversion/scheme/register.go:27""#,
        ),
        (
            r#"{"kind":"Pod"}"#,
            r#"no kind "Pod" is registered for version "meta.k8s.io/v1" in scheme "pkg/apis/meta/internalversion/scheme/register.go:27""#,
        ),
        (r#"{"kind":"Status","apiVersion":"v1"}"#, "converting (v1.Status) to (v1.DeleteOptions): unknown conversion"),
        (
            r#"{"kind":"ListOptions","apiVersion":"meta.k8s.io/v1"}"#,
            "converting (v1.ListOptions) to (v1.DeleteOptions): unknown conversion",
        ),
        (
            r#"{"kind":"ListOptions","apiVersion":"apps/v1"}"#,
            r#"no kind "ListOptions" is registered for version "apps/v1" in scheme "pkg/apis/meta/internalversion/scheme/register.go:27""#,
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(refused("", body), (400, expected.to_string()), "{body}");
    }
    // DeleteOptions of any version, or no kind at all, are options.
    for body in
        [r#"{"kind":"DeleteOptions","apiVersion":"bogus/v9","dryRun":["All"]}"#, r#"{"dryRun":["All"]}"#, "null"]
    {
        let dry_run = body.contains("All");
        assert_eq!(parse("", body).unwrap().dry_run, dry_run, "{body}");
    }
}

#[test]
fn malformed_bodies_are_refused_in_gos_words() {
    let cases = [
        ("{", "couldn't get version/kind; json parse error: unexpected end of JSON input"),
        ("   ", "couldn't get version/kind; json parse error: unexpected end of JSON input"),
        (
            "[1]",
            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }",
        ),
        (
            r#"{"dryRun":"All"}"#,
            "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string",
        ),
        (r#"{"dryRun":[5]}"#, "json: cannot unmarshal number into Go struct field DeleteOptions.dryRun of type string"),
        (
            r#"{"preconditions":{"uid":5}}"#,
            "json: cannot unmarshal number into Go struct field Preconditions.preconditions.uid of type types.UID",
        ),
        (
            r#"{"preconditions":"x"}"#,
            "json: cannot unmarshal string into Go struct field DeleteOptions.preconditions of type v1.Preconditions",
        ),
        (
            r#"{"propagationPolicy":5}"#,
            "json: cannot unmarshal number into Go struct field DeleteOptions.propagationPolicy of type v1.DeletionPropagation",
        ),
        (
            r#"{"orphanDependents":"x"}"#,
            "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type bool",
        ),
        (
            r#"{"gracePeriodSeconds":"x"}"#,
            "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64",
        ),
        (
            r#"{"gracePeriodSeconds":1.5}"#,
            "json: cannot unmarshal number 1.5 into Go struct field DeleteOptions.gracePeriodSeconds of type int64",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(refused("", body), (400, expected.to_string()), "{body}");
    }
    let yaml = DeleteOptions::parse(&call("", Some("application/yaml")), b"a: [1").unwrap_err();
    assert_eq!((yaml.code, yaml.message.as_str()), (400, "yaml: line 1: did not find expected ',' or ']'"));
    let yaml = DeleteOptions::parse(&call("", Some("application/yaml")), b"dryRun: [All]").unwrap();
    assert!(yaml.dry_run);
    let other = DeleteOptions::parse(&call("", Some("text/plain")), b"{}").unwrap_err();
    assert_eq!(other.code, 415);
}

#[test]
fn a_body_replaces_the_query() {
    // Kubernetes reads the query only when there is no body.
    assert_eq!(parse("dryRun=All&propagationPolicy=Orphan", "{}").unwrap(), DeleteOptions::default());
    let from_query = parse("dryRun=All&propagationPolicy=Orphan", "").unwrap();
    assert!(from_query.dry_run);
    assert_eq!(from_query.propagation_policy.as_deref(), Some("Orphan"));
    assert_eq!(parse("orphanDependents=maybe", "").unwrap().propagation_policy.as_deref(), Some("Orphan"));
    assert_eq!(
        refused("gracePeriodSeconds=abc", ""),
        (400, r#"strconv.ParseInt: parsing "abc": invalid syntax"#.to_string())
    );
    assert_eq!(
        refused("gracePeriodSeconds=", ""),
        (400, r#"strconv.ParseInt: parsing "": invalid syntax"#.to_string())
    );
}

#[test]
fn options_are_validated() {
    assert_eq!(
        refused("", r#"{"propagationPolicy":"Nope","dryRun":["All"]}"#),
        (
            422,
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Nope": supported values: "Foreground", "Background", "Orphan", "nil""#
                .to_string()
        )
    );
    assert_eq!(
        refused("dryRun=maybe", ""),
        (
            422,
            r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["maybe"]: supported values: "All""#
                .to_string()
        )
    );
    assert_eq!(
        refused("", r#"{"orphanDependents":true,"propagationPolicy":"Foreground"}"#),
        (
            422,
            r#"DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Foreground": orphanDependents and deletionPropagation cannot be both set"#
                .to_string()
        )
    );
    let preconditions = parse("", r#"{"preconditions":{"uid":"u","resourceVersion":"7"}}"#).unwrap();
    assert_eq!((preconditions.uid.as_deref(), preconditions.resource_version.as_deref()), (Some("u"), Some("7")));
}
