//! kubectl as users run it through the control-plane double: one kubectl binary (the one on
//! the PATH, or an older or newer release beside it) with one user's kubeconfig and its own
//! home, long-running commands (`get -w`, `wait`, `delete`) read line by line, printed tables
//! split into cells; and the seeds' scenario: a cluster serving the seeds' CronTab and Shirt
//! with carol, a user RBAC authorizes by SubjectAccessReview.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cluster::TestCluster;
use super::{SHIRT_CRD, stderr, stdout};

/// The seeds' CronTab with everything the seeds show on it in one definition: the `all`
/// category, the printer columns (plus a wide one), the status and scale subresources; and
/// descriptions for `kubectl explain` to print.
pub const SEED_CRONTAB_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A job run on a cron schedule.
        properties:
          spec:
            type: object
            description: When and what to run.
            properties:
              cronSpec:
                type: string
                description: The cron schedule.
              image:
                type: string
              replicas:
                type: integer
                description: How many jobs run at once.
          status:
            type: object
            properties:
              replicas: {type: integer}
              labelSelector: {type: string}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.labelSelector
    additionalPrinterColumns:
    - {name: Spec, type: string, description: The cron spec defining the interval a CronJob is run, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, description: The number of jobs launched by the CronJob, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    - {name: Image, type: string, priority: 1, jsonPath: .spec.image}
"#;

/// The seeds' `my-crontab.yaml`, with replicas as in the scale example.
pub const MY_CRONTAB: &str = r#"apiVersion: "stable.example.com/v1"
kind: CronTab
metadata:
  name: my-new-cron-object
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
  replicas: 3
"#;

/// The seeds' `shirt-resources.yaml`.
pub const SHIRTS: &str = "apiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example1\nspec:\n  color: blue\n  size: S\n---\napiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example2\nspec:\n  color: blue\n  size: M\n---\napiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example3\nspec:\n  color: green\n  size: M\n";

/// A cluster serving the CronTab and the Shirt, and carol, who may do anything with them by
/// RBAC (answered by SubjectAccessReview) but is no cluster admin.
pub struct Setup {
    pub cluster: TestCluster,
    pub carol: Kubectl,
}

pub fn setup() -> Setup {
    let cluster = TestCluster::start(&[SEED_CRONTAB_CRD, SHIRT_CRD]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.plane.state().create_namespace("shop").unwrap();
    let kubeconfig = cluster.user("carol", &["developers"]);
    let carol = Kubectl::new("kubectl", &kubeconfig, &cluster.server.dir.path().join("carol"));
    Setup { cluster, carol }
}

impl Setup {
    /// Creates the seeds' objects: `my-new-cron-object` and the three shirts.
    pub fn seeded(self) -> Setup {
        self.carol.ok_stdin(&["apply", "-f", "-"], MY_CRONTAB);
        self.carol.ok_stdin(&["apply", "-f", "-"], SHIRTS);
        self
    }

    /// carol is no admin: the server asked the cluster about her requests (a member of
    /// system:masters needs no review), naming her groups as the aggregator passed them.
    pub fn assert_reviewed(&self) {
        let reviews: Vec<Value> = self.cluster.plane.sar_log().into_iter().filter(|s| s["user"] == "carol").collect();
        assert!(!reviews.is_empty(), "no SubjectAccessReview for carol");
        for review in &reviews {
            assert_eq!(review["groups"], serde_json::json!(["developers", "system:authenticated"]));
        }
    }
}

/// One kubectl binary with one user's kubeconfig and its own home (discovery cache).
pub struct Kubectl {
    pub binary: PathBuf,
    pub kubeconfig: PathBuf,
    pub home: PathBuf,
}

impl Kubectl {
    pub fn new(binary: impl Into<PathBuf>, kubeconfig: &Path, home: &Path) -> Kubectl {
        std::fs::create_dir_all(home).unwrap();
        Kubectl { binary: binary.into(), kubeconfig: kubeconfig.to_path_buf(), home: home.to_path_buf() }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.home)
            .env_remove("KUBE_EDITOR")
            .current_dir(&self.home)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    pub fn run(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
        use std::io::Write;
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }

    pub fn out(&self, args: &[&str]) -> Output {
        self.run(args, "", &[])
    }

    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_stdin(args, "")
    }

    pub fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run(args, stdin, &[]);
        assert!(out.status.success(), "{} {args:?} failed: {}", self.binary.display(), stderr(&out));
        stdout(&out)
    }

    /// The error kubectl printed, for a command that must fail.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.out(args);
        assert!(!out.status.success(), "{args:?} succeeded: {}", stdout(&out));
        stderr(&out).trim().to_string()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).unwrap()
    }

    /// A long-running kubectl (`get -w`, `wait`) whose output lines arrive on a channel.
    pub fn stream(&self, args: &[&str]) -> Stream {
        let mut child = self.command(args).spawn().unwrap();
        let (sender, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Stream { child, lines, seen: Vec::new() }
    }
}

pub struct Stream {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Stream {
    /// Waits for a line that satisfies `wanted`; returns it.
    pub fn expect(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {what}; lines so far: {:#?}", self.seen),
            }
        }
    }

    /// Waits for the process to end by itself; returns its status and what it wrote on stderr.
    pub fn finish(mut self) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
                return (status, err);
            }
            assert!(Instant::now() < deadline, "kubectl did not finish; output: {:#?}", self.seen);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A printed table's lines, split on runs of two spaces or more (cells may hold spaces).
pub fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect())
        .collect()
}

/// The Google Cloud CLI's kubectl releases beside the `kubectl` on the PATH.
pub fn release(version: &str) -> PathBuf {
    let which = Command::new("sh").args(["-c", "readlink -f \"$(command -v kubectl)\""]).output().unwrap();
    let resolved = PathBuf::from(stdout(&which).trim());
    let binary = resolved.parent().unwrap_or(Path::new("/")).join(format!("kubectl.{version}"));
    assert!(
        binary.is_file(),
        "kubectl {version} is needed at {} (beside the Google Cloud CLI's kubectl, {}); install the Google Cloud CLI's kubectl component",
        binary.display(),
        resolved.display()
    );
    binary
}
