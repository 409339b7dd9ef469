//! How a request's path and head are read before any handler, as Go's server and
//! k8s.io/apiserver read them: percent-escapes decoded before the path is split (names,
//! namespaces, resources and `%2F` alike), and malformed requests (a bad escape, no `Host` on
//! HTTP/1.1, two `Host`s, a malformed one) refused with Go's plain-text 400 and a close.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

const COLLECTION: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

#[test]
fn escaped_path_segments_are_decoded() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "exists"}});
    assert_eq!(client.send_json("POST", COLLECTION, &body).status, 201);

    // A name, a namespace and a resource, each with an escaped letter.
    for path in [
        "/apis/stable.example.com/v1/namespaces/default/crontabs/exist%73",
        "/apis/stable.example.com/v1/namespaces/de%66ault/crontabs/exists",
        "/apis/stable.example.com/v1/namespaces/default/cron%74abs/exists",
    ] {
        let got = client.get(path).unwrap();
        assert_eq!(got.status, 200, "{path}: {}", got.text());
        assert_eq!(got.json()["metadata"]["name"], "exists", "{path}");
        assert_eq!(got.json()["metadata"]["namespace"], "default", "{path}");
    }
    // An escaped slash is a slash once decoded: it separates segments.
    let list = client.get("/apis/stable.example.com/v1/namespaces%2Fdefault%2Fcrontabs").unwrap();
    assert_eq!(list.status, 200, "{}", list.text());
    assert_eq!(list.json()["items"][0]["metadata"]["name"], "exists");
    // Messages name what was decoded.
    let missing = client.get(&format!("{COLLECTION}/nobody%2Dhere")).unwrap();
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["message"], "crontabs.stable.example.com \"nobody-here\" not found");
    // Writes address the decoded name, and delete it.
    let deleted = client.request("DELETE", &format!("{COLLECTION}/%65xists"), None, None).unwrap();
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_eq!(client.get(&format!("{COLLECTION}/exists")).unwrap().status, 404);
    // Paths outside the API decode too.
    assert_eq!(client.get("/heal%74hz").unwrap().text(), "ok");
}

/// Sends `request` on a fresh connection; returns everything read until the server closed it.
fn exchange(client: &Client, request: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut stream = client.connect_tls().await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        stream.flush().await.unwrap();
        let mut received = Vec::new();
        // A hang guard only: the server answers and closes at once.
        let read = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut received)).await;
        assert!(read.is_ok(), "the connection stayed open after {:?}", String::from_utf8_lossy(&received));
        String::from_utf8(received).unwrap()
    })
}

/// The status line, the named headers' values, and the body of an HTTP/1.1 answer.
fn parts(answer: &str) -> (String, Vec<String>, String) {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no answer: {answer:?}"));
    let mut lines = head.lines();
    let status = lines.next().unwrap().to_string();
    let headers: Vec<String> = lines
        .map(str::to_ascii_lowercase)
        .filter(|l| l.starts_with("content-type:") || l.starts_with("connection:"))
        .collect();
    (status, headers, body.to_string())
}

#[test]
fn malformed_requests_are_refused_as_go_refuses_them() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let plain = vec!["connection: close".to_string(), "content-type: text/plain; charset=utf-8".to_string()];
    let cases = [
        (format!("GET {COLLECTION} HTTP/1.1\r\n\r\n"), "400 Bad Request: missing required Host header"),
        (format!("GET {COLLECTION} HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), "400 Bad Request"),
        (format!("GET {COLLECTION} HTTP/1.1\r\nHost: a/b\r\n\r\n"), "400 Bad Request: malformed Host header"),
        (format!("GET {COLLECTION}/a%zz HTTP/1.1\r\nHost: localhost\r\n\r\n"), "400 Bad Request"),
        (format!("GET {COLLECTION}/a%2 HTTP/1.1\r\nHost: localhost\r\n\r\n"), "400 Bad Request"),
    ];
    for (request, refusal) in cases {
        let (status, mut headers, body) = parts(&exchange(&client, &request));
        headers.sort();
        assert_eq!(status, format!("HTTP/1.1 {refusal}"), "{request:?}");
        assert_eq!(headers, plain, "{request:?}");
        assert_eq!(body, refusal, "{request:?}");
    }
    // HTTP/1.0 needs no Host header; a well-formed HTTP/1.1 request is served.
    let (status, _, _) = parts(&exchange(&client, "GET /version HTTP/1.0\r\n\r\n"));
    assert_eq!(status, "HTTP/1.0 200 OK");
    let (status, _, _) =
        parts(&exchange(&client, "GET /version HTTP/1.1\r\nHost: [::1]:6443\r\nConnection: close\r\n\r\n"));
    assert_eq!(status, "HTTP/1.1 200 OK");
}
