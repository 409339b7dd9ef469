//! The project's server behind the control-plane double, as in a cluster: started in
//! delegated mode with the double as its main apiserver, and registered with APIServices for
//! every served group version of its definitions.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::control_plane::ControlPlane;
use super::control_plane::rbac::{Rule, Subject, User};
use super::{TestServer, kubectl_with, stderr, stdout};

pub struct TestCluster {
    pub plane: ControlPlane,
    pub server: TestServer,
}

/// The served `(group, version)` pairs of definition manifests.
fn group_versions(definitions: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for text in definitions {
        let crd: serde_json::Value = serde_saphyr::from_str(text).unwrap();
        let group = crd["spec"]["group"].as_str().unwrap().to_string();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            if version["served"] == true {
                out.push((group.clone(), version["name"].as_str().unwrap().to_string()));
            }
        }
    }
    out
}

/// APIServices for every served group version of `definitions`, and for the server's own
/// group, as the chart registers them.
fn register(plane: &ControlPlane, definitions: &[&str]) {
    for (group, version) in group_versions(definitions) {
        plane.register(&group, &version);
    }
    plane.register("crd-apiserver.io", "v1alpha1");
}

impl TestCluster {
    pub fn start(definitions: &[&str]) -> TestCluster {
        TestCluster::start_with(definitions, &[])
    }

    /// Starts the double, then the server (with `extra` flags) behind it.
    pub fn start_with(definitions: &[&str], extra: &[&str]) -> TestCluster {
        TestCluster::start_on(ControlPlane::start(), definitions, extra)
    }

    /// Starts the server behind a double prepared by the caller (objects it already holds
    /// are there when the server first lists them).
    pub fn start_on(plane: ControlPlane, definitions: &[&str], extra: &[&str]) -> TestCluster {
        let server = TestServer::start_delegated(definitions, &plane.server_kubeconfig(), extra);
        plane.register_backend(server.port, &server.pki.serving_ca());
        register(&plane, definitions);
        TestCluster { plane, server }
    }

    /// As `start_on`, without waiting for the server to be ready: it is alive and registered.
    pub fn start_live_on(plane: ControlPlane, definitions: &[&str], extra: &[&str]) -> TestCluster {
        let mut server = TestServer::prepare(definitions, Some(plane.server_kubeconfig()));
        server.spawn_live(extra);
        plane.register_backend(server.port, &server.pki.serving_ca());
        register(&plane, definitions);
        TestCluster { plane, server }
    }

    /// A user known to the double by a bearer token; returns a kubeconfig for them.
    pub fn user(&self, name: &str, groups: &[&str]) -> PathBuf {
        let token = format!("{name}-token");
        self.plane.add_user(&token, User::new(name, groups));
        self.plane.token_kubeconfig(&token)
    }

    /// Grants `user` the verbs on a resource of `group` (in `namespaces`, or everywhere).
    pub fn grant(&self, user: &str, verbs: &[&str], group: &str, resources: &[&str], namespaces: Option<&[&str]>) {
        let rule =
            Rule::resources(&format!("{user}-binding"), vec![Subject::User(user.into())], verbs, &[group], resources);
        self.plane.add_rule(match namespaces {
            Some(ns) => rule.in_namespaces(ns),
            None => rule,
        });
    }

    /// Runs kubectl through the double with a kubeconfig.
    pub fn kubectl(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        kubectl_with(kubeconfig, self.server.dir.path(), args, None)
    }

    pub fn kubectl_stdin(&self, kubeconfig: &Path, args: &[&str], stdin: &str) -> Output {
        kubectl_with(kubeconfig, self.server.dir.path(), args, Some(stdin))
    }

    pub fn kubectl_stdin_ok(&self, kubeconfig: &Path, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_stdin(kubeconfig, args, stdin);
        assert!(out.status.success(), "kubectl {args:?} failed: {}\n{}", stderr(&out), self.server.log());
        stdout(&out)
    }

    pub fn kubectl_ok(&self, kubeconfig: &Path, args: &[&str]) -> String {
        let out = self.kubectl(kubeconfig, args);
        assert!(out.status.success(), "kubectl {args:?} failed: {}\n{}", stderr(&out), self.server.log());
        stdout(&out)
    }
}
