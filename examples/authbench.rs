//! Benchmark for `hack/bench-auth.sh`: the per-request cost of front-proxy authentication
//! (certificate chain check, CN check, identity headers), checking the chain every time and as
//! the authenticator does it (a verified chain remembered per configuration).
//!
//! Usage: authbench [ROUNDS]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use crd_apiserver::auth::requestheader::{RequestHeaderAuthenticator, RequestHeaderConfig};
use crd_apiserver::auth::x509::{CaBundle, subject};
use crd_apiserver::auth::{Authenticator, Credentials};
use crd_apiserver::cli::pki::{Authority, Leaf};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

fn main() {
    let rounds: u32 = std::env::args().nth(1).and_then(|r| r.parse().ok()).unwrap_or(5000);
    let ca = Authority::new("front-proxy-ca").unwrap();
    let leaf = ca.issue(&Leaf { common_name: "front-proxy-client".into(), client: true, ..Leaf::default() }).unwrap();
    let chain = [CertificateDer::from_pem_slice(leaf.cert.as_bytes()).unwrap()];
    let config = RequestHeaderConfig {
        ca: CaBundle::from_pem(ca.pem.cert.as_bytes()).unwrap(),
        allowed_names: vec!["front-proxy-client".into()],
        username_headers: vec!["x-remote-user".into()],
        uid_headers: Vec::new(),
        group_headers: vec!["x-remote-group".into()],
        extra_prefixes: vec!["x-remote-extra-".into()],
    };
    let mut headers = http::HeaderMap::new();
    headers.insert("x-remote-user", "alice".parse().unwrap());
    headers.append("x-remote-group", "developers".parse().unwrap());
    headers.append("x-remote-group", "system:authenticated".parse().unwrap());

    let started = Instant::now();
    for _ in 0..rounds {
        config.ca.verify_client(&chain).unwrap();
        assert_eq!(subject(&chain[0]).unwrap().0, "front-proxy-client");
    }
    println!("front-proxy chain check: {:?} per request ({rounds} rounds)", started.elapsed() / rounds);

    let authenticator = RequestHeaderAuthenticator::new(Arc::new(ArcSwap::from_pointee(config)));
    let credentials = Credentials { headers: &headers, peer_certificates: &chain };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let started = Instant::now();
    for _ in 0..rounds {
        let user = runtime.block_on(authenticator.authenticate(&credentials)).unwrap().unwrap();
        assert_eq!(user.name, "alice");
    }
    println!(
        "front-proxy authentication, chain remembered: {:?} per request ({rounds} rounds)",
        started.elapsed() / rounds
    );
}
