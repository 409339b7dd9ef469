//! Tests of the front-proxy authenticator: trust only follows a verified, allowed proxy
//! certificate; headers are read as k8s.io/apiserver reads them.

use super::*;
use crate::cli::pki::{Authority, Leaf};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

struct Fixture {
    proxy_ca: Authority,
    config: RequestHeaderConfig,
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn fixture(allowed: &[&str]) -> Fixture {
    let proxy_ca = Authority::new("front-proxy-ca").unwrap();
    let config = RequestHeaderConfig {
        ca: CaBundle::from_pem(proxy_ca.pem.cert.as_bytes()).unwrap(),
        allowed_names: strings(allowed),
        username_headers: strings(DEFAULT_USERNAME_HEADERS),
        uid_headers: strings(&["x-remote-uid"]),
        group_headers: strings(DEFAULT_GROUP_HEADERS),
        extra_prefixes: strings(DEFAULT_EXTRA_PREFIXES),
    };
    Fixture { proxy_ca, config }
}

fn cert(ca: &Authority, cn: &str, expired: bool) -> CertificateDer<'static> {
    der(&ca.issue(&Leaf { common_name: cn.into(), client: true, expired, ..Leaf::default() }).unwrap().cert)
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
    }
    map
}

fn run(
    config: &RequestHeaderConfig,
    chain: &[CertificateDer<'static>],
    pairs: &[(&str, &str)],
) -> Result<Option<UserInfo>, AuthnError> {
    let headers = headers(pairs);
    authenticate(config, &Credentials { headers: &headers, peer_certificates: chain }, || verify(config, chain))
}

#[test]
fn a_verified_proxy_vouches_for_the_user_in_its_headers() {
    let f = fixture(&["front-proxy-client"]);
    let proxy = cert(&f.proxy_ca, "front-proxy-client", false);
    let user = run(
        &f.config,
        &[proxy],
        &[
            ("X-Remote-User", "alice"),
            ("X-Remote-User", "mallory"),
            ("X-Remote-Uid", "u-1"),
            ("X-Remote-Group", "a,b"),
            ("X-Remote-Group", ""),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes", "read"),
            ("X-Remote-Extra-Scopes", "write"),
            ("X-Remote-Extra-Example.com%2fTeam", "blue"),
            ("X-Remote-Extra-Bad%zz", "x"),
        ],
    )
    .unwrap()
    .unwrap();
    // Only the first value of a username header counts (Go's Header.Get).
    assert_eq!(user.name, "alice");
    assert_eq!(user.uid, "u-1");
    assert_eq!(user.groups, strings(&["a,b", "system:authenticated"]));
    assert_eq!(user.extra.get("scopes").unwrap(), &strings(&["read", "write"]));
    assert_eq!(user.extra.get("example.com/team").unwrap(), &strings(&["blue"]));
    assert_eq!(user.extra.get("bad%zz").unwrap(), &strings(&["x"]));
}

#[test]
fn untrusted_senders_are_not_believed() {
    let f = fixture(&["front-proxy-client"]);
    let claims = [("X-Remote-User", "system:admin"), ("X-Remote-Group", "system:masters")];
    // No certificate at all: not a front-proxy request.
    assert_eq!(run(&f.config, &[], &claims).unwrap(), None);
    // A certificate from another CA.
    let other = Authority::new("other-ca").unwrap();
    let err = run(&f.config, &[cert(&other, "front-proxy-client", false)], &claims).unwrap_err();
    assert_eq!(err.0, "x509: certificate signed by unknown authority");
    // An expired certificate from the right CA.
    let err = run(&f.config, &[cert(&f.proxy_ca, "front-proxy-client", true)], &claims).unwrap_err();
    assert!(err.0.contains("expired"), "{err}");
    // A CN that is not an allowed name.
    let err = run(&f.config, &[cert(&f.proxy_ca, "mallory", false)], &claims).unwrap_err();
    assert_eq!(err.0, "x509: subject with cn=mallory is not in the allowed list");
    // A server-only certificate lacks the client-auth usage.
    let server_only = der(&f
        .proxy_ca
        .issue(&Leaf { common_name: "front-proxy-client".into(), server: true, ..Leaf::default() })
        .unwrap()
        .cert);
    assert!(run(&f.config, &[server_only], &claims).is_err());
    // No CA configured: the authenticator stays out of it.
    assert_eq!(
        run(&RequestHeaderConfig::default(), &[cert(&f.proxy_ca, "front-proxy-client", false)], &claims).unwrap(),
        None
    );
}

#[test]
fn empty_allowed_names_accept_any_cn_and_no_username_means_no_opinion() {
    let f = fixture(&[]);
    let proxy = cert(&f.proxy_ca, "anything", false);
    assert_eq!(run(&f.config, std::slice::from_ref(&proxy), &[("X-Remote-User", "bob")]).unwrap().unwrap().name, "bob");
    assert_eq!(run(&f.config, std::slice::from_ref(&proxy), &[("X-Remote-Group", "g")]).unwrap(), None);
    // An empty first value names nobody, whatever follows it.
    assert_eq!(run(&f.config, &[proxy], &[("X-Remote-User", ""), ("X-Remote-User", "bob")]).unwrap(), None);
}

#[test]
fn configured_header_names_and_prefixes_are_used() {
    let mut f = fixture(&[]);
    f.config.username_headers = strings(&["X-Forwarded-User", "X-Remote-User"]);
    f.config.group_headers = strings(&["X-Groups-1", "X-Groups-2"]);
    f.config.extra_prefixes = strings(&["X-Extra-", "X-Also-"]);
    let proxy = cert(&f.proxy_ca, "p", false);
    let user = run(
        &f.config,
        &[proxy],
        &[
            ("X-Remote-User", "second"),
            ("X-Forwarded-User", "first"),
            ("X-Groups-2", "b"),
            ("X-Groups-1", "a"),
            ("X-Also-K", "2"),
            ("X-Extra-K", "1"),
        ],
    )
    .unwrap()
    .unwrap();
    assert_eq!(user.name, "first");
    assert_eq!(user.groups, strings(&["a", "b"]));
    let mut values = user.extra.get("k").unwrap().clone();
    values.sort();
    assert_eq!(values, strings(&["1", "2"]));
}

#[test]
fn path_unescape_follows_go() {
    assert_eq!(path_unescape("a%2Fb%2f").as_deref(), Some("a/b/"));
    assert_eq!(path_unescape("plus+stays").as_deref(), Some("plus+stays"));
    assert_eq!(path_unescape("%zz"), None);
    assert_eq!(path_unescape("trailing%2"), None);
    assert_eq!(path_unescape("%ff"), None);
}

#[tokio::test]
async fn a_swapped_configuration_is_used_at_once() {
    let f = fixture(&["front-proxy-client"]);
    let shared = Arc::new(ArcSwap::from_pointee(f.config.clone()));
    let authenticator = RequestHeaderAuthenticator::new(shared.clone());
    let proxy = cert(&f.proxy_ca, "front-proxy-client", false);
    let headers = headers(&[("X-Remote-User", "alice")]);
    let chain = [proxy];
    let credentials = Credentials { headers: &headers, peer_certificates: &chain };
    assert!(authenticator.authenticate(&credentials).await.unwrap().is_some());
    assert!(authenticator.authenticate(&credentials).await.unwrap().is_some());
    // A new CA: the remembered verification no longer counts.
    let rotated = fixture(&["front-proxy-client"]);
    shared.store(Arc::new(rotated.config.clone()));
    let refused = authenticator.authenticate(&credentials).await.unwrap_err().0;
    assert!(refused.starts_with("x509: certificate signed by unknown authority"), "{refused}");
    // Same CA, other allowed names: the CN check applies at once.
    let mut renamed = f.config.clone();
    renamed.allowed_names = vec!["aggregator".into()];
    shared.store(Arc::new(renamed));
    assert!(authenticator.authenticate(&credentials).await.unwrap_err().0.contains("not in the allowed list"));
}
