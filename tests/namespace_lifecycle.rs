//! Namespace lifecycle behind the control-plane double: no content in missing or terminating
//! namespaces, and nothing left behind by a namespace that is gone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use support::cluster::TestCluster;
use support::{CRONTAB_CRD, stderr};

const CRONTAB: &str =
    "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: nightly\nspec:\n  cronSpec: '0 0 * * *'\n";

#[test]
fn creating_needs_a_live_namespace() {
    let cluster = TestCluster::start_with(&[CRONTAB_CRD], &["--namespace-sweep-interval=1s"]);
    cluster.grant("bob", &["*"], "stable.example.com", &["*"], None);
    let bob = cluster.user("bob", &[]);

    let out = cluster.kubectl_stdin(&bob, &["create", "-n", "ghost", "-f", "-"], CRONTAB);
    assert_eq!(
        stderr(&out).trim(),
        "Error from server (NotFound): error when creating \"STDIN\": namespaces \"ghost\" not found"
    );

    cluster.plane.state().create_namespace("doomed").unwrap();
    let out = cluster.kubectl_stdin(&bob, &["create", "-n", "doomed", "-f", "-"], CRONTAB);
    assert!(out.status.success(), "{}", stderr(&out));
    // Terminating: reads and deletes go on, creates are refused.
    cluster.plane.state().delete_namespace("doomed").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let refused = loop {
        let out =
            cluster.kubectl_stdin(&bob, &["create", "-n", "doomed", "-f", "-"], &CRONTAB.replace("nightly", "late"));
        if !out.status.success() || Instant::now() > deadline {
            break out;
        }
        cluster.kubectl_ok(&bob, &["delete", "crontab", "late", "-n", "doomed"]);
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        stderr(&refused).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": crontabs.stable.example.com \"late\" is forbidden: \
         unable to create new content in namespace doomed because it is being terminated"
    );
    assert!(cluster.kubectl_ok(&bob, &["get", "crontabs", "-n", "doomed"]).contains("nightly"));

    // The namespace goes away without anyone emptying it: the server removes its objects.
    cluster.plane.state().finalize_namespace("doomed");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = cluster.kubectl(&bob, &["get", "crontab", "nightly", "-n", "doomed"]);
        if stderr(&out).contains("NotFound") {
            break;
        }
        assert!(Instant::now() < deadline, "objects of the deleted namespace were not removed");
        std::thread::sleep(Duration::from_millis(200));
    }
}
