//! Tests of the health checks: texts, exclusions, one check by name, informer-sync.

use http_body_util::BodyExt;

use super::*;

fn failing(name: &str, reason: &str) -> Arc<NamedCheck> {
    let reason = reason.to_string();
    NamedCheck::new(name, move || Err(reason.clone()))
}

fn health(shutting_down: bool) -> Health {
    let shutdown = if shutting_down { failing("shutdown", "process is shutting down") } else { ping_named("shutdown") };
    Health {
        healthz: vec![ping(), log()],
        livez: vec![ping(), log()],
        readyz: vec![ping(), log(), ping_named("sled"), shutdown],
    }
}

fn ping_named(name: &str) -> Arc<NamedCheck> {
    NamedCheck::new(name, || Ok(()))
}

/// Status, body and the headers every answer carries.
async fn answer(health: &Health, probe: Probe, path_and_query: &str) -> Option<(u16, String)> {
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    let response = health.serve(probe, path, &Query::parse(Some(query)))?;
    assert_eq!(response.headers()[header::CONTENT_TYPE], "text/plain; charset=utf-8");
    assert_eq!(response.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Some((status, String::from_utf8(body.to_vec()).unwrap()))
}

#[tokio::test]
async fn passing_checks_answer_ok_or_list_themselves() {
    let health = health(false);
    assert_eq!(answer(&health, Probe::Readyz, "/readyz").await.unwrap(), (200, "ok".into()));
    assert_eq!(
        answer(&health, Probe::Readyz, "/readyz?verbose").await.unwrap(),
        (200, "[+]ping ok\n[+]log ok\n[+]sled ok\n[+]shutdown ok\nreadyz check passed\n".into())
    );
    assert_eq!(
        answer(&health, Probe::Livez, "/livez?verbose=1").await.unwrap(),
        (200, "[+]ping ok\n[+]log ok\nlivez check passed\n".into())
    );
    assert_eq!(answer(&health, Probe::Healthz, "/healthz").await.unwrap(), (200, "ok".into()));
}

#[tokio::test]
async fn a_failure_is_listed_with_its_reason_withheld() {
    let health = health(true);
    // Verbose or not: failures always list every check.
    for path in ["/readyz", "/readyz?verbose"] {
        assert_eq!(
            answer(&health, Probe::Readyz, path).await.unwrap(),
            (
                500,
                "[+]ping ok\n[+]log ok\n[+]sled ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n".into()
            )
        );
    }
    let report = health.report(Probe::Readyz, []);
    assert_eq!(report.failures, vec![("shutdown".to_string(), "process is shutting down".to_string())]);
    // The other paths do not run readiness-only checks.
    assert_eq!(answer(&health, Probe::Livez, "/livez").await.unwrap(), (200, "ok".into()));
}

#[tokio::test]
async fn excluded_checks_are_skipped_and_unknown_ones_warned_about() {
    let health = health(true);
    assert_eq!(
        answer(&health, Probe::Readyz, "/readyz?verbose&exclude=shutdown").await.unwrap(),
        (200, "[+]ping ok\n[+]log ok\n[+]sled ok\n[+]shutdown excluded: ok\nreadyz check passed\n".into())
    );
    assert_eq!(answer(&health, Probe::Readyz, "/readyz?exclude=shutdown").await.unwrap(), (200, "ok".into()));
    assert_eq!(
        answer(&health, Probe::Readyz, "/readyz?verbose&exclude=shutdown&exclude=zeta&exclude=etcd&exclude=sled")
            .await
            .unwrap(),
        (
            200,
            "[+]ping ok\n[+]log ok\n[+]sled excluded: ok\n[+]shutdown excluded: ok\n\
             warn: some health checks cannot be excluded: no matches for \"etcd\",\"zeta\"\n\
             readyz check passed\n"
                .into()
        )
    );
    // A comma does not separate names: Kubernetes takes each value whole.
    let (status, body) = answer(&health, Probe::Readyz, "/readyz?exclude=shutdown,log").await.unwrap();
    assert_eq!(status, 500);
    assert!(body.contains("no matches for \"shutdown,log\"\n"), "{body}");
}

#[tokio::test]
async fn one_check_by_name() {
    let health = health(true);
    assert_eq!(answer(&health, Probe::Readyz, "/readyz/ping").await.unwrap(), (200, "ok".into()));
    assert_eq!(
        answer(&health, Probe::Readyz, "/readyz/shutdown").await.unwrap(),
        (500, "internal server error: process is shutting down\n".into())
    );
    assert_eq!(answer(&health, Probe::Livez, "/livez/log").await.unwrap(), (200, "ok".into()));
    // Unknown names, checks of another path and malformed paths are not found.
    for (probe, path) in [
        (Probe::Readyz, "/readyz/etcd"),
        (Probe::Livez, "/livez/shutdown"),
        (Probe::Readyz, "/readyz/"),
        (Probe::Readyz, "/readyz/ping/more"),
        (Probe::Readyz, "/readyzz"),
    ] {
        assert!(answer(&health, probe, path).await.is_none(), "{path}");
    }
}

#[test]
fn informer_sync_names_the_followers_without_their_first_list() {
    let informers = Arc::new(Informers::default());
    let check = informers.check();
    assert_eq!(check.name(), "informer-sync");
    assert_eq!(check.run(), Ok(()));
    let namespaces = informers.flag("*v1.Namespace");
    let quotas = Arc::new(AtomicBool::new(false));
    let read = quotas.clone();
    informers.register("*v1.ResourceQuota", move || read.load(Ordering::SeqCst));
    assert_eq!(check.run(), Err("2 informers not started yet: [*v1.Namespace *v1.ResourceQuota]".into()));
    namespaces.mark();
    assert_eq!(check.run(), Err("1 informers not started yet: [*v1.ResourceQuota]".into()));
    quotas.store(true, Ordering::SeqCst);
    assert_eq!(check.run(), Ok(()));
}

#[test]
fn names_are_quoted_as_go_quotes_them() {
    assert_eq!(go_quote("etcd"), "\"etcd\"");
    assert_eq!(go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
}
