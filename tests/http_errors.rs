//! Every error case of the resource endpoints answers with Kubernetes' Status: code, reason,
//! message and details; and a refused request changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use serde_json::{Value, json};
use support::http::{Client, Response};
use support::{CRONTAB_CRD, TENANT_CRD, TestServer};

const COLLECTION: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"cronSpec": "* * * * *"}})
}

fn check(response: &Response, code: u16, reason: &str, message: &str) -> Value {
    let status = response.json();
    assert_eq!(response.status, code, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["apiVersion"], "v1");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["code"], code);
    assert_eq!(status["reason"], reason, "{status}");
    assert_eq!(status["message"], message, "{status}");
    status
}

fn count(client: &Client) -> usize {
    client.get(COLLECTION).unwrap().json()["items"].as_array().unwrap().len()
}

#[test]
fn error_statuses() {
    let server = TestServer::start(&[CRONTAB_CRD, TENANT_CRD]);
    let client = Client::admin(&server);
    let created = client.send_json("POST", COLLECTION, &crontab("c1"));
    assert_eq!(created.status, 201, "{}", created.text());
    let rv = created.json()["metadata"]["resourceVersion"].as_str().unwrap().to_string();

    // Malformed JSON.
    let bad = client.send("POST", COLLECTION, "application/json", "{\"apiVersion\":").unwrap();
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["reason"], "BadRequest");

    // Wrong kind: 422 naming the kind found.
    let mut wrong_kind = crontab("c2");
    wrong_kind["kind"] = json!("SomethingElse");
    let status = check(
        &client.send_json("POST", COLLECTION, &wrong_kind),
        422,
        "Invalid",
        "SomethingElse.stable.example.com \"c2\" is invalid: kind: Invalid value: \"SomethingElse\": must be CronTab",
    );
    assert_eq!(status["details"]["causes"][0]["field"], "kind");

    // Wrong version: 400.
    let mut wrong_version = crontab("c2");
    wrong_version["apiVersion"] = json!("stable.example.com/v2");
    check(
        &client.send_json("POST", COLLECTION, &wrong_version),
        400,
        "BadRequest",
        "the API version in the data (stable.example.com/v2) does not match the expected API version (stable.example.com/v1)",
    );

    // Invalid names.
    let status = client.send_json("POST", COLLECTION, &crontab("Not_Valid"));
    let body = status.json();
    assert_eq!(status.status, 422);
    assert!(body["message"].as_str().unwrap().starts_with("CronTab.stable.example.com \"Not_Valid\" is invalid: metadata.name: Invalid value: \"Not_Valid\": a lowercase RFC 1123 subdomain must consist of"));
    assert_eq!(body["details"]["causes"][0]["reason"], "FieldValueInvalid");
    assert_eq!(body["details"]["causes"][0]["field"], "metadata.name");
    let nameless = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {}});
    check(
        &client.send_json("POST", COLLECTION, &nameless),
        422,
        "Invalid",
        "CronTab.stable.example.com \"\" is invalid: metadata.name: Required value: name or generateName is required",
    );

    // Already exists.
    let status = check(
        &client.send_json("POST", COLLECTION, &crontab("c1")),
        409,
        "AlreadyExists",
        "crontabs.stable.example.com \"c1\" already exists",
    );
    assert_eq!(status["details"], json!({"name": "c1", "group": "stable.example.com", "kind": "crontabs"}));

    // Namespace mismatch.
    let mut elsewhere = crontab("c3");
    elsewhere["metadata"]["namespace"] = json!("other");
    check(
        &client.send_json("POST", COLLECTION, &elsewhere),
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
    );

    // Stale resourceVersion on update: 409 Conflict.
    let mut update = crontab("c1");
    update["metadata"]["resourceVersion"] = json!(rv);
    update["spec"]["image"] = json!("v2");
    assert_eq!(client.send_json("PUT", &format!("{COLLECTION}/c1"), &update).status, 200);
    check(
        &client.send_json("PUT", &format!("{COLLECTION}/c1"), &update),
        409,
        "Conflict",
        "Operation cannot be fulfilled on crontabs.stable.example.com \"c1\": the object has been modified; please apply your changes to the latest version and try again",
    );
    // Update without resourceVersion.
    check(
        &client.send_json("PUT", &format!("{COLLECTION}/c1"), &crontab("c1")),
        422,
        "Invalid",
        "crontabs.stable.example.com \"c1\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update",
    );
    // Update of a missing object.
    let mut ghost = crontab("ghost");
    ghost["metadata"]["resourceVersion"] = json!("1");
    check(
        &client.send_json("PUT", &format!("{COLLECTION}/ghost"), &ghost),
        404,
        "NotFound",
        "crontabs.stable.example.com \"ghost\" not found",
    );
    // Name in body differs from the URL.
    check(
        &client.send_json("PUT", &format!("{COLLECTION}/c1"), &ghost),
        400,
        "BadRequest",
        "the name of the object (ghost) does not match the name on the URL (c1)",
    );

    // Oversized body.
    let mut huge = crontab("big");
    huge["spec"]["blob"] = json!("x".repeat(3 * 1024 * 1024));
    check(
        &client.send_json("POST", COLLECTION, &huge),
        413,
        "RequestEntityTooLarge",
        "Request entity too large: limit is 3145728",
    );

    // Unknown resource, unknown version, unknown group.
    for path in [
        "/apis/stable.example.com/v1/namespaces/default/nothings",
        "/apis/stable.example.com/v9/namespaces/default/crontabs",
        "/apis/nowhere.example.com/v1/things",
        "/apis/nowhere.example.com",
    ] {
        check(&client.get(path).unwrap(), 404, "NotFound", "the server could not find the requested resource");
    }
    // A namespaced path to a cluster-scoped resource is not found either.
    check(
        &client.get("/apis/platform.example.com/v1/namespaces/default/tenants").unwrap(),
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    // Unknown subresource.
    check(
        &client.get(&format!("{COLLECTION}/c1/status")).unwrap(),
        404,
        "NotFound",
        "crontabs.stable.example.com \"c1\" not found",
    );

    // Unsupported patch type.
    check(
        &client.send("PATCH", &format!("{COLLECTION}/c1"), "application/strategic-merge-patch+json", "{}").unwrap(),
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    );
    // Unsupported body media type.
    assert_eq!(client.send("POST", COLLECTION, "text/plain", "x").unwrap().status, 415);
    // Methods a path does not take.
    check(
        &client.send("POST", "/apis", "application/json", "{}").unwrap(),
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    );

    // Nothing of the refused requests was stored.
    assert_eq!(count(&client), 1);
    let stored = client.get(&format!("{COLLECTION}/c1")).unwrap().json();
    assert_eq!(stored["spec"]["image"], "v2");
    assert_eq!(stored["metadata"]["generation"], 2);
}

#[test]
fn unauthenticated_requests_are_refused() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let anonymous = Client::new(&server, None);
    assert_eq!(anonymous.get("/healthz").unwrap().status, 200);
    let status = check(
        &anonymous.get(COLLECTION).unwrap(),
        403,
        "Forbidden",
        "crontabs.stable.example.com is forbidden: User \"system:anonymous\" cannot list resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"default\"",
    );
    assert_eq!(status["details"]["kind"], "crontabs");
    check(
        &anonymous.get("/apis").unwrap(),
        403,
        "Forbidden",
        "forbidden: User \"system:anonymous\" cannot get path \"/apis\"",
    );

    // A bearer token nothing can verify (development mode asks no TokenReview) is an invalid
    // credential: 401, as kube-apiserver answers, never a request served as anonymous; even
    // where anonymous requests are allowed.
    let bearer = Client::new(&server, None).header("Authorization", "Bearer not-a-token");
    for path in [COLLECTION, "/apis", "/healthz"] {
        let refused = bearer.get(path).unwrap();
        assert_eq!(refused.status, 401, "{path}: {}", refused.text());
        assert_eq!(
            refused.json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
            "{path}"
        );
    }
    // A client certificate is tried before the token, as Kubernetes' authenticators are.
    let admin_with_token = Client::admin(&server).header("Authorization", "Bearer not-a-token");
    assert_eq!(admin_with_token.get(COLLECTION).unwrap().status, 200);
}

#[test]
fn a_namespace_that_is_not_a_valid_name_is_refused_on_create_and_found_empty_otherwise() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let bad = "/apis/stable.example.com/v1/namespaces/Bad_NS/crontabs";
    let label_rule = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and \
                      must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used \
                      for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    let message = format!(
        "CronTab.stable.example.com \"x\" is invalid: metadata.namespace: Invalid value: \"Bad_NS\": {label_rule}"
    );
    // Created by POST, and by an apply that finds no object: 422, as BeforeCreate's
    // ValidateObjectMetaAccessor answers; nothing stored.
    let status = check(&client.send_json("POST", bad, &crontab("x")), 422, "Invalid", &message);
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "message": format!("Invalid value: \"Bad_NS\": {label_rule}"), "field": "metadata.namespace"}])
    );
    let applied = client
        .send(
            "PATCH",
            &format!("{bad}/x?fieldManager=test"),
            "application/apply-patch+yaml",
            serde_json::to_vec(&crontab("x")).unwrap(),
        )
        .unwrap();
    check(&applied, 422, "Invalid", &message);
    // Reads and deletes find nothing there, as in any namespace without objects.
    let list = client.get(bad).unwrap();
    assert_eq!(list.status, 200, "{}", list.text());
    assert_eq!(list.json()["items"], json!([]));
    check(&client.get(&format!("{bad}/x")).unwrap(), 404, "NotFound", "crontabs.stable.example.com \"x\" not found");
    let delete = client.request("DELETE", &format!("{bad}/x"), None, None).unwrap();
    check(&delete, 404, "NotFound", "crontabs.stable.example.com \"x\" not found");
}

/// Bodies and query options read as kube-apiserver v1.36 reads them: each text below is its
/// answer to the same request for a custom resource it serves itself.
#[test]
fn bodies_and_options_are_read_and_refused_as_kubernetes_does() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    assert_eq!(client.send_json("POST", COLLECTION, &crontab("c1")).status, 201);
    let object = format!("{COLLECTION}/c1");
    let send = |method: &str, path: &str, content_type: &str, body: &str| {
        client.send(method, path, content_type, body.as_bytes().to_vec()).unwrap()
    };

    // Malformed and truncated bodies: Go's words, wrapped as the create handler wraps them.
    let unrecognized = "the object provided is unrecognized (must be of type CronTab): ";
    for (body, expected) in [
        (
            r#"{"apiVersion":"#,
            "couldn't get version/kind; json parse error: unexpected end of JSON input ({\"apiVersion\":)",
        ),
        (
            r#"{"a":1,}"#,
            "couldn't get version/kind; json parse error: invalid character '}' looking for beginning of object key string ({\"a\":1,})",
        ),
        ("null", "Object 'Kind' is missing in 'null' (6e756c6c)"),
    ] {
        check(
            &send("POST", COLLECTION, "application/json", body),
            400,
            "BadRequest",
            &format!("{unrecognized}{expected}"),
        );
    }
    check(
        &send("POST", COLLECTION, "application/yaml", "kind: CronTab\nspec: [1\n"),
        400,
        "BadRequest",
        &format!(
            "{unrecognized}yaml: line 2: did not find expected ',' or ']' (6b696e643a2043726f6e5461620a737065633a205b310a)"
        ),
    );
    // A lone surrogate escape is U+FFFD, as Go decodes it.
    let lone = r#"{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c2"},"spec":{"image":"x\ud800"}}"#;
    let created = send("POST", COLLECTION, "application/json", lone);
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(created.json()["spec"]["image"], "x\u{fffd}");

    // Patches: what is not a list of operations is 400 in Go's words, an operation that does
    // not apply the generic 422.
    let json_patch = "application/json-patch+json";
    check(
        &send("PATCH", &object, json_patch, r#"[{"op":5}]"#),
        400,
        "BadRequest",
        "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string",
    );
    for patch in [r#"[{"op":"explode","path":"/spec"}]"#, r#"[{"op":"add","value":1}]"#] {
        check(
            &send("PATCH", &object, json_patch, patch),
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        );
    }
    check(&send("PATCH", &object, "application/merge-patch+json", "null"), 400, "BadRequest", "Invalid JSON Patch");

    // A DELETE body must be DeleteOptions; with a body, the query is not read.
    check(
        &send("DELETE", &object, "application/json", r#"{"kind":"Pod","apiVersion":"v1"}"#),
        400,
        "BadRequest",
        r#"no kind "Pod" is registered for version "v1" in scheme "pkg/apis/meta/internalversion/scheme/register.go:27""#,
    );
    check(
        &send("DELETE", &object, "application/json", r#"{"dryRun":"All"}"#),
        400,
        "BadRequest",
        "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type []string",
    );
    assert_eq!(client.get(&object).unwrap().status, 200, "nothing was deleted");

    // Query options: a resourceVersion that is not a number, integers that are not integers.
    let get = |path: &str| client.get(path).unwrap();
    let unknown = get(&format!("{object}?resourceVersion=abc"));
    assert_eq!(unknown.status, 500);
    assert_eq!(
        unknown.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 500,
               "message": "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"})
    );
    check(
        &get(&format!("{COLLECTION}?resourceVersion=-1")),
        400,
        "BadRequest",
        "invalid resource version: resourceVersion: Invalid value: \"-1\": strconv.ParseUint: parsing \"-1\": invalid syntax",
    );
    for query in ["timeoutSeconds=abc", "watch=1&timeoutSeconds=abc"] {
        check(
            &get(&format!("{COLLECTION}?{query}")),
            400,
            "BadRequest",
            "strconv.ParseInt: parsing \"abc\": invalid syntax",
        );
    }
    check(&get(&format!("{COLLECTION}?limit=")), 400, "BadRequest", "strconv.ParseInt: parsing \"\": invalid syntax");
    // Booleans are false only when they say so: `watch=maybe` watches, `force=maybe` forces.
    let watched = get(&format!("{COLLECTION}?watch=maybe&timeoutSeconds=1"));
    let first: Value = serde_json::from_str(watched.text().lines().next().unwrap_or_default()).unwrap();
    assert_eq!(first["type"], "ADDED", "{}", watched.text());
    let mine = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "c1"}, "spec": {"image": "applied"}});
    let forced = send(
        "PATCH",
        &format!("{object}?fieldManager=other&force=maybe"),
        "application/apply-patch+yaml",
        &mine.to_string(),
    );
    assert_eq!(forced.status, 200, "{}", forced.text());
    assert_eq!(forced.json()["spec"]["image"], "applied");
}

/// A patched or updated document the decoder refuses (metadata of the wrong types) is refused
/// before its name is compared with the URL's, as kube-apiserver v1.36 does: an update's is the
/// create handler's 400, a patch's the 422 of no kind showing the patched document (the stored
/// object as read, the patch applied, keys sorted).
#[test]
fn documents_the_decoder_refuses_are_refused_before_their_names_are_compared() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    assert_eq!(client.send_json("POST", COLLECTION, &crontab("c1")).status, 201);
    let object = format!("{COLLECTION}/c1");
    let stored = client.get(&object).unwrap().json();
    let send = |method: &str, content_type: &str, body: &str| {
        client.send(method, &object, content_type, body.as_bytes().to_vec()).unwrap()
    };

    let mut renamed = crontab("elsewhere");
    renamed["metadata"]["labels"] = json!({"a": 5});
    check(
        &send("PUT", "application/json", &renamed.to_string()),
        400,
        "BadRequest",
        "CronTab in version \"v1\" cannot be handled as a CronTab: json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string",
    );

    let refused_patch = |content_type: &str, patch: &str, patched: &Value, detail: &str| {
        let shown = serde_json::to_string(&Value::String(patched.to_string())).unwrap();
        let message = format!("Invalid value: {shown}: {detail}");
        let response = send("PATCH", content_type, patch);
        assert_eq!(
            response.json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": format!(" \"\" is invalid: patch: {message}"), "reason": "Invalid",
                   "details": {"causes": [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}]},
                   "code": 422}),
            "{content_type} {patch}"
        );
    };
    let mut patched = stored.clone();
    patched["metadata"]["name"] = json!("elsewhere");
    patched["metadata"]["labels"] = json!({"a": 5});
    refused_patch(
        "application/merge-patch+json",
        r#"{"metadata":{"name":"elsewhere","labels":{"a":5}}}"#,
        &patched,
        "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string",
    );
    let mut patched = stored.clone();
    patched["metadata"]["generation"] = json!("x");
    refused_patch(
        "application/json-patch+json",
        r#"[{"op":"replace","path":"/metadata/generation","value":"x"}]"#,
        &patched,
        "json: cannot unmarshal string into Go struct field ObjectMeta.generation of type int64",
    );
    let mut patched = stored.clone();
    patched["metadata"] = json!("x");
    refused_patch(
        "application/merge-patch+json",
        r#"{"metadata":"x"}"#,
        &patched,
        "json: cannot unmarshal string into Go value of type v1.ObjectMeta",
    );
    assert_eq!(client.get(&object).unwrap().json(), stored, "nothing changed");
}

/// Status bodies byte for byte as kube-apiserver v1.36 writes them: members in the order of Go's
/// struct, and no `code` in the Status of success a DELETE answers.
#[test]
fn statuses_are_written_as_kubernetes_writes_them() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let missing = client.get(&format!("{COLLECTION}/x")).unwrap();
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.text(),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"crontabs.stable.example.com \"x\" not found","reason":"NotFound","details":{"name":"x","group":"stable.example.com","kind":"crontabs"},"code":404}
"#
    );
    let created = client.send_json("POST", COLLECTION, &crontab("c1"));
    let uid = created.json()["metadata"]["uid"].as_str().unwrap().to_string();
    let deleted = client.request("DELETE", &format!("{COLLECTION}/c1"), None, None).unwrap();
    assert_eq!(deleted.status, 200);
    assert_eq!(
        deleted.text(),
        format!(
            r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Success","details":{{"name":"c1","group":"stable.example.com","kind":"crontabs","uid":"{uid}"}}}}
"#
        )
    );
}

/// A watch's options are validated as kube-apiserver v1.36 validates them, after its defaults:
/// a watch from no revision is one that sends the initial state (`SetListOptionsDefaults`), so
/// a continue token with it is refused; `sendInitialEvents` needs no bookmarks (the state is
/// sent, without the bookmark that ends it); events are written `{"type":…,"object":…}`.
#[test]
fn watch_options_are_validated_after_their_defaults() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    assert_eq!(client.send_json("POST", COLLECTION, &crontab("c1")).status, 201);
    let get = |query: &str| client.get(&format!("{COLLECTION}?{query}")).unwrap();
    let with_continue = "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided";
    check(
        &get("watch=1&continue=x&timeoutSeconds=1"),
        422,
        "Invalid",
        &format!("ListOptions.meta.k8s.io \"\" is invalid: {with_continue}"),
    );
    let status = check(
        &get("watch=1&resourceVersion=1&resourceVersionMatch=Exact&continue=x&timeoutSeconds=1"),
        422,
        "Invalid",
        &format!(
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\", {with_continue}]"
        ),
    );
    assert_eq!(status["details"]["causes"][1]["reason"], "FieldValueNotSupported");
    let watched = get("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1");
    assert_eq!(watched.status, 200, "{}", watched.text());
    let text = watched.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].starts_with(r#"{"type":"ADDED","object":{"#), "{text}");
    let event: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(event["object"]["metadata"]["name"], "c1");
}

/// A body or an `Accept` no serializer takes is refused naming the serializers kube-apiserver
/// has for custom resources, protobuf included, and nothing else.
#[test]
fn media_type_refusals_name_kube_apiservers_serializers() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let types = "application/json, application/yaml, application/vnd.kubernetes.protobuf";
    check(
        &client.send("POST", COLLECTION, "text/plain", crontab("c1").to_string()).unwrap(),
        415,
        "UnsupportedMediaType",
        &format!("the body of the request was in an unknown format - accepted media types include: {types}"),
    );
    check(
        &Client::admin(&server).header("Accept", "application/xml").get(COLLECTION).unwrap(),
        406,
        "NotAcceptable",
        &format!("only the following media types are accepted: {types}"),
    );
    assert_eq!(count(&client), 0);
}

/// A patch that changes `apiVersion` or `kind` is refused by the custom resource validator's
/// type check: a 422 under the group and kind the patched document claims, kind first.
#[test]
fn a_patch_changing_the_type_is_invalid() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let created = client.send_json("POST", COLLECTION, &crontab("c1"));
    assert_eq!(created.status, 201, "{}", created.text());
    let object = format!("{COLLECTION}/c1");
    let patch = |body: &str| client.send("PATCH", &object, "application/merge-patch+json", body.to_string()).unwrap();
    let status = check(
        &patch(r#"{"apiVersion":"v1"}"#),
        422,
        "Invalid",
        r#"CronTab "c1" is invalid: apiVersion: Invalid value: "v1": must be stable.example.com/v1"#,
    );
    assert_eq!(
        status["details"],
        json!({"name": "c1", "kind": "CronTab", "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value: \"v1\": must be stable.example.com/v1", "field": "apiVersion"},
        ]})
    );
    check(
        &patch(r#"{"apiVersion":"other.io/v1","kind":"Other"}"#),
        422,
        "Invalid",
        r#"Other.other.io "c1" is invalid: [kind: Invalid value: "Other": must be CronTab, apiVersion: Invalid value: "other.io/v1": must be stable.example.com/v1]"#,
    );
    let unchanged = client.get(&object).unwrap().json();
    assert_eq!(unchanged["metadata"]["resourceVersion"], created.json()["metadata"]["resourceVersion"]);
}

/// The legacy `/watch/namespaces/NS/RESOURCE/NAME` path watches that one object, as
/// kube-apiserver turns the name into a `metadata.name` field selector; a field selector that
/// pins another name is refused.
#[test]
fn a_watch_of_a_named_path_sees_only_that_object() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    for name in ["c1", "c2"] {
        assert_eq!(client.send_json("POST", COLLECTION, &crontab(name)).status, 201);
    }
    let watch_path = "/apis/stable.example.com/v1/watch/namespaces/default/crontabs/c2";
    let watched = client.get(&format!("{watch_path}?timeoutSeconds=1")).unwrap();
    assert_eq!(watched.status, 200, "{}", watched.text());
    let names: Vec<Value> = watched
        .text()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["object"]["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("c2")], "{}", watched.text());
    check(
        &client.get(&format!("{watch_path}?timeoutSeconds=1&fieldSelector=metadata.name%3Dc1")).unwrap(),
        400,
        "BadRequest",
        "fieldSelector metadata.name doesn't match requested name",
    );
    let pinned = client.get(&format!("{watch_path}?timeoutSeconds=1&fieldSelector=metadata.name%3Dc2")).unwrap();
    assert_eq!(pinned.status, 200, "{}", pinned.text());
    assert_eq!(pinned.text().lines().count(), 1, "{}", pinned.text());
}

/// A list's options are validated as kube-apiserver v1.36 validates them, every problem in one
/// 422, before a continue token is read; a token is read as its storage layer reads it.
#[test]
fn list_options_are_validated_before_a_continue_token_is_read() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let list = |query: &str| client.get(&format!("{COLLECTION}?{query}")).unwrap();
    let forbidden = |field: &str, message: &str| json!({"reason": "FieldValueForbidden", "message": format!("Forbidden: {message}"), "field": field});
    let unless = "resourceVersionMatch is forbidden unless resourceVersion is provided";
    let with_continue = "resourceVersionMatch is forbidden when continue is provided";
    let unsupported = r#"Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", """#;
    let for_list = "sendInitialEvents is forbidden for list";
    let status = check(
        &list("resourceVersionMatch=Bogus&continue=abc&sendInitialEvents=false"),
        422,
        "Invalid",
        &format!(
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: {unless}, resourceVersionMatch: Forbidden: {with_continue}, resourceVersionMatch: {unsupported}, sendInitialEvents: Forbidden: {for_list}]"
        ),
    );
    assert_eq!(
        status["details"],
        json!({"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
            forbidden("resourceVersionMatch", unless),
            forbidden("resourceVersionMatch", with_continue),
            {"reason": "FieldValueNotSupported", "message": unsupported, "field": "resourceVersionMatch"},
            forbidden("sendInitialEvents", for_list),
        ]})
    );
    check(
        &list("continue=abc&sendInitialEvents=true"),
        422,
        "Invalid",
        &format!("ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: {for_list}"),
    );
    for (token, error) in [
        ("abc", "invalid character 'i' looking for beginning of value"),
        ("a", "illegal base64 data at input byte 0"),
        ("eyJ2Ijo1fQ", "json: cannot unmarshal number into Go struct field continueToken.v of type string"),
    ] {
        check(
            &list(&format!("limit=1&continue={token}")),
            400,
            "BadRequest",
            &format!("invalid continue token: continue key is not valid: {error}"),
        );
    }
}
