//! `/healthz`, `/livez` and `/readyz` with named checks, as kube-apiserver answers them: the
//! verbose listings, one check by name, exclusions and the warning for unknown ones, 404 for a
//! check that does not exist, and authorization of checks by name. (`/readyz` during the
//! shutdown delay: `graceful_shutdown.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

/// Status, body and the headers every health answer carries.
fn health(client: &Client, path: &str) -> (u16, String) {
    let response = client.get(path).unwrap();
    if response.status != 404 && response.status != 403 {
        assert_eq!(response.headers["content-type"], "text/plain; charset=utf-8", "{path}");
        assert_eq!(response.headers["x-content-type-options"], "nosniff", "{path}");
    }
    (response.status, response.text())
}

#[test]
fn checks_by_name_as_kubernetes_serves_them() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let anonymous = Client::new(&server, None);
    let admin = Client::admin(&server);
    let ok = |text: &str| (200, text.to_string());

    assert_eq!(health(&anonymous, "/readyz"), ok("ok"));
    assert_eq!(
        health(&anonymous, "/readyz?verbose"),
        ok("[+]ping ok\n[+]log ok\n[+]sled ok\n[+]informer-sync ok\n[+]shutdown ok\nreadyz check passed\n")
    );
    assert_eq!(health(&anonymous, "/livez?verbose"), ok("[+]ping ok\n[+]log ok\nlivez check passed\n"));
    assert_eq!(health(&anonymous, "/healthz?verbose"), ok("[+]ping ok\n[+]log ok\n[+]sled ok\nhealthz check passed\n"));
    assert_eq!(health(&anonymous, "/livez"), ok("ok"));

    // Exclusions: named checks are skipped; unknown names are warned about, sorted and quoted.
    assert_eq!(
        health(&anonymous, "/readyz?verbose&exclude=sled&exclude=etcd&exclude=informer-sync"),
        ok("[+]ping ok\n[+]log ok\n[+]sled excluded: ok\n[+]informer-sync excluded: ok\n[+]shutdown ok\n\
            warn: some health checks cannot be excluded: no matches for \"etcd\"\nreadyz check passed\n")
    );
    assert_eq!(health(&anonymous, "/readyz?exclude=etcd"), ok("ok"));

    // One check by name: authorized like any non-resource path (only the three roots are
    // always allowed), then run alone.
    let refused = anonymous.get("/readyz/sled").unwrap();
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(refused.json()["message"], "forbidden: User \"system:anonymous\" cannot get path \"/readyz/sled\"");
    for path in ["/readyz/ping", "/readyz/log", "/readyz/sled", "/readyz/informer-sync", "/readyz/shutdown"] {
        assert_eq!(health(&admin, path), ok("ok"), "{path}");
    }
    assert_eq!(health(&admin, "/livez/ping"), ok("ok"));
    assert_eq!(health(&admin, "/healthz/sled"), ok("ok"));

    // No such check (or not on that path): 404 with a Status.
    for path in
        ["/readyz/etcd", "/livez/sled", "/livez/shutdown", "/healthz/informer-sync", "/readyz/", "/readyz/ping/x"]
    {
        let response = admin.get(path).unwrap();
        assert_eq!(response.status, 404, "{path}: {}", response.text());
        assert_eq!(response.json()["reason"], "NotFound", "{path}");
    }
}
