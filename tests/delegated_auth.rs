//! Behind kube-aggregator: kubectl through the control-plane double, authorization by
//! SubjectAccessReview, and what the aggregator itself sends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use support::cluster::TestCluster;
use support::{CRONTAB_CRD, stderr};

#[test]
fn smoke() {
    let cluster = TestCluster::start(&[CRONTAB_CRD]);
    let bob = cluster.user("bob", &[]);
    cluster.grant("bob", &["*"], "stable.example.com", &["*"], None);
    let out = cluster.kubectl(&bob, &["get", "crontabs", "-n", "a"]);
    println!("{}\n{}", stderr(&out), cluster.server.log());
    assert!(out.status.success());
}
