//! The chart's storage modes: sled (the default) is one StatefulSet replica with its store on a
//! claim; etcd3 is a Deployment of interchangeable replicas with no volume, kube-apiserver's
//! etcd flags, the client certificate from a Secret, a PodDisruptionBudget, anti-affinity and a
//! zone spread; values that cannot run are refused at render time.

use serde_json::{Value, json};

use crate::{find, render, render_refused};

fn args(pod: &Value) -> Vec<String> {
    pod["containers"][0]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array().map(|l| l.iter().map(|v| v["name"].as_str().unwrap()).collect()).unwrap_or_default()
}

const ETCD: [&str; 8] = [
    "--set",
    "storage.backend=etcd3",
    "--set",
    "replicas=3",
    "--set",
    "storage.etcd.servers={https://etcd-0.etcd:2379,https://etcd-1.etcd:2379}",
    "--set",
    "storage.etcd.clientCertSecret=etcd-client",
];

#[test]
fn sled_is_one_replica_with_its_store_on_a_claim() {
    let objects = render(&[]);
    assert!(!objects.iter().any(|o| o["kind"] == "Deployment" || o["kind"] == "PodDisruptionBudget"));
    let set = find(&objects, "StatefulSet", "demo-crd-apiserver");
    assert_eq!(set["spec"]["replicas"], 1);
    let pod = &set["spec"]["template"]["spec"];
    let args = args(pod);
    assert!(args.contains(&"--storage=/var/lib/crd-apiserver".to_string()), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("--etcd") || a.starts_with("--storage-backend")), "{args:?}");
    assert_eq!(names(&pod["containers"][0]["volumeMounts"]), ["data", "definitions", "serving-cert"]);
    // Definitions are served live from the ConfigMap volume: changing them rolls nothing.
    assert!(set["spec"]["template"]["metadata"].get("annotations").is_none(), "{}", set["spec"]["template"]);
    assert!(pod.get("topologySpreadConstraints").is_none() && pod.get("affinity").is_none());
}

#[test]
fn etcd_runs_interchangeable_replicas_spread_over_nodes() {
    let objects = render(&ETCD);
    assert!(!objects.iter().any(|o| o["kind"] == "StatefulSet"));
    let deployment = find(&objects, "Deployment", "demo-crd-apiserver");
    assert_eq!(deployment["spec"]["replicas"], 3);
    // A rollout starts a new replica before it stops an old one.
    assert_eq!(deployment["spec"]["strategy"]["rollingUpdate"], json!({"maxUnavailable": 0, "maxSurge": 1}));
    let pod = &deployment["spec"]["template"]["spec"];
    let args = args(pod);
    for expected in [
        "--storage-backend=etcd3",
        "--etcd-servers=https://etcd-0.etcd:2379,https://etcd-1.etcd:2379",
        "--etcd-prefix=/crd-apiserver",
        "--etcd-compaction-interval=5m",
        "--etcd-cafile=/etc/crd-apiserver/etcd/ca.crt",
        "--etcd-certfile=/etc/crd-apiserver/etcd/tls.crt",
        "--etcd-keyfile=/etc/crd-apiserver/etcd/tls.key",
    ] {
        assert!(args.contains(&expected.to_string()), "{expected} missing from {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("--storage=")), "{args:?}");
    // No store volume; the client certificate comes from the named Secret.
    assert_eq!(names(&pod["containers"][0]["volumeMounts"]), ["etcd-client", "definitions", "serving-cert"]);
    let volumes = pod["volumes"].as_array().unwrap();
    let secret = volumes.iter().find(|v| v["name"] == "etcd-client").unwrap();
    assert_eq!(secret["secret"]["secretName"], "etcd-client");
    assert!(!volumes.iter().any(|v| v["name"] == "data"));

    let selector =
        json!({"matchLabels": {"app.kubernetes.io/name": "crd-apiserver", "app.kubernetes.io/instance": "demo"}});
    assert_eq!(deployment["spec"]["selector"], selector);
    let budget = find(&objects, "PodDisruptionBudget", "demo-crd-apiserver");
    assert_eq!(budget["spec"], json!({"maxUnavailable": 1, "selector": selector}));
    let anti = &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(anti["podAffinityTerm"], json!({"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}));
    assert_eq!(
        pod["topologySpreadConstraints"],
        json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": selector}])
    );
    // The Service selects the replicas as it selected the StatefulSet's pod.
    let service = find(&objects, "Service", "demo-crd-apiserver");
    assert_eq!(service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"]);
}

#[test]
fn etcd_placement_can_be_required_or_replaced() {
    let mut hard = ETCD.to_vec();
    hard.extend(["--set", "highAvailability.podAntiAffinity=hard", "--set", "podDisruptionBudget.maxUnavailable=2"]);
    let objects = render(&hard);
    let pod = &find(&objects, "Deployment", "demo-crd-apiserver")["spec"]["template"]["spec"];
    let required = &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(required["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(find(&objects, "PodDisruptionBudget", "demo-crd-apiserver")["spec"]["maxUnavailable"], 2);

    // The user's own affinity wins, and one replica needs no budget, spread or anti-affinity.
    let objects = render(&[
        "--set",
        "storage.backend=etcd3",
        "--set",
        "storage.etcd.servers={http://etcd:2379}",
        "--set",
        "storage.etcd.compactionInterval=0",
    ]);
    assert!(!objects.iter().any(|o| o["kind"] == "PodDisruptionBudget"));
    let pod = &find(&objects, "Deployment", "demo-crd-apiserver")["spec"]["template"]["spec"];
    assert!(pod.get("affinity").is_none() && pod.get("topologySpreadConstraints").is_none());
    let args = args(pod);
    assert!(args.contains(&"--etcd-compaction-interval=0".to_string()), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("--etcd-cafile")), "no client certificate without the Secret");
    assert_eq!(names(&pod["containers"][0]["volumeMounts"]), ["definitions", "serving-cert"]);
}

#[test]
fn storage_values_that_cannot_run_are_refused() {
    let refused = render_refused(&["--set", "replicas=2"]);
    assert!(refused.contains("replicas=2 needs storage.backend=etcd3"), "{refused}");
    let refused = render_refused(&["--set", "storage.backend=etcd3"]);
    assert!(refused.contains("storage.backend=etcd3 needs storage.etcd.servers"), "{refused}");
    let refused = render_refused(&["--set", "storage.backend=etcd"]);
    assert!(refused.contains("at '/storage/backend': value must be one of 'sled', 'etcd3'"), "{refused}");
    let refused = render_refused(&["--set", "storage.backend=etcd3", "--set", "storage.etcd.servers={etcd-0:2379}"]);
    assert!(refused.contains("/storage/etcd/servers/0"), "a server without a scheme is named: {refused}");
    let refused = render_refused(&["--set", "replicas=0"]);
    assert!(refused.contains("at '/replicas'"), "{refused}");
}
