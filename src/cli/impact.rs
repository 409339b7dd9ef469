//! `crd-apiserver impact NEW-DEFINITION.yaml`: what a candidate definition would do to the
//! objects already stored, before it is applied (`impact::analyze`). Against a running server
//! (`--server`, with the credentials `backup` takes) it asks the server
//! (`POST serveddefinitions/<name>/impact`), follows the analysis in the definition's status and
//! prints the report; with `--storage` it opens a stopped server's store itself (sled allows one
//! process per directory), read only, with the server's definition files to know what is
//! served (and, for the candidate's name, the form the store records the server last accepted,
//! which its objects were written under).
//!
//! Exit code: 0 nothing breaks, 1 stored objects would fail, 2 the change would be refused (or
//! is not a valid definition), 3 the analysis could not be made.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::BodyExt;
use serde_json::Value;

use super::server_client::{ServerClient, ServerFlags};
use crate::core::gvr::GroupVersion;
use crate::definitions::builtin;
use crate::definitions::load::Refusal;
use crate::definitions::reload::{Context, Served, plan};
use crate::definitions::scan::FileCache;
use crate::impact::convert::WebhookPace;
use crate::impact::tally::Limits;
use crate::impact::{self, Report, candidate};
use crate::store::Backend;

/// The analysis could not be made.
const UNABLE: i32 = 3;
/// The change would be refused.
const REFUSED: i32 = 2;

#[derive(Debug, Args)]
pub struct ImpactArgs {
    /// The candidate CustomResourceDefinition (YAML or JSON), as it would replace the served one.
    pub file: PathBuf,
    /// A running server (`https://HOST:PORT`) to run the analysis: it reads its own store and
    /// shows the analysis' progress in `serveddefinitions/<name>`'s status.
    #[arg(long, conflicts_with = "storage")]
    pub server: Option<String>,
    /// With --server: its CA and the credentials to call it with.
    #[command(flatten)]
    pub connection: ServerFlags,
    /// A stopped server's store: a sled directory (`PATH` or `sled://PATH`), read only.
    #[arg(long, required_unless_present = "server")]
    pub storage: Option<String>,
    /// With --storage: the server's definition files or directories (what is served now).
    #[arg(long = "definitions", requires = "storage", value_delimiter = ',')]
    pub definitions: Vec<PathBuf>,
    /// How to print the report: `table`, `wide` (with example objects and CEL costs) or `json`.
    #[arg(short = 'o', long = "output", default_value = "table", value_parser = ["table", "wide", "json"])]
    pub output: String,
    /// With --storage: example objects named per kind of error.
    #[arg(long, default_value_t = 5)]
    pub examples: usize,
    /// With --storage: objects sent per second at most to the candidate's conversion webhook
    /// (0: no limit).
    #[arg(long, default_value_t = 200)]
    pub webhook_rate: u32,
    /// With --storage: how long one call of the conversion webhook may take.
    #[arg(long, default_value = "30s", value_parser = super::parse_duration)]
    pub webhook_timeout: Duration,
}

/// Runs the command; returns its exit code.
pub fn run(args: &ImpactArgs) -> i32 {
    let stack = crate::core::nesting::THREAD_STACK_BYTES;
    let runtime = match tokio::runtime::Builder::new_multi_thread().thread_stack_size(stack).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return UNABLE;
        }
    };
    let bytes = match std::fs::read(&args.file) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("error: {}: {e}", args.file.display());
            return UNABLE;
        }
    };
    let outcome = match &args.server {
        Some(server) => runtime.block_on(through_server(args, server, &bytes)),
        // The scan walks stored objects however deep they nest: on a thread with the stack
        // for it (`core::nesting`).
        None => std::thread::scope(|scope| {
            let scan = std::thread::Builder::new().name("impact".into()).stack_size(stack);
            match scan.spawn_scoped(scope, || offline(args, &runtime, &bytes)) {
                Ok(thread) => thread.join().unwrap_or_else(|_| Err((UNABLE, "error: the analysis failed".into()))),
                Err(e) => Err((UNABLE, format!("error: {e}"))),
            }
        }),
    };
    match outcome {
        Ok(report) => {
            print(&report, &args.output);
            report.exit_code()
        }
        Err((code, message)) => {
            eprintln!("{message}");
            code
        }
    }
}

fn print(report: &Report, output: &str) {
    match output {
        "json" => println!("{}", serde_json::to_string_pretty(report).unwrap_or_default()),
        "wide" => print!("{}", report.render_table(true)),
        _ => print!("{}", report.render_table(false)),
    }
}

/// Kubernetes' words for a candidate that is not a valid definition.
fn refusal_message(refusal: &Refusal, name: Option<&str>) -> String {
    let subject = format!("CustomResourceDefinition.apiextensions.k8s.io \"{}\"", name.unwrap_or_default());
    match refusal {
        Refusal::Invalid(errors) => {
            format!("The {subject} is invalid: {}", crate::core::field::aggregate(errors))
        }
        Refusal::Undecodable { misfits, why } if !misfits.is_empty() => {
            format!("The {subject} is invalid: {}\nerror: {why}", crate::core::field::aggregate(misfits))
        }
        Refusal::NotADefinition(why) | Refusal::Undecodable { why, .. } => format!("error: {why}"),
    }
}

type Failure = (i32, String);

/// The analysis over a stopped server's store.
fn offline(args: &ImpactArgs, runtime: &tokio::runtime::Runtime, bytes: &[u8]) -> Result<Report, Failure> {
    let source = args.file.display().to_string();
    let candidate = candidate::parse(bytes, &source).map_err(|refusal| {
        let name = candidate_name(bytes);
        (REFUSED, refusal_message(&refusal, name.as_deref()))
    })?;
    if args.definitions.is_empty() {
        return Err((
            UNABLE,
            "error: --definitions: the server's definition files are needed to know what it serves".into(),
        ));
    }
    let mut served = served_now(&args.definitions);
    let store = open(args.storage.as_deref().unwrap_or_default())?;
    let name = candidate.definition.name.clone();
    let outcome = (|| {
        // What the server served at its stop is what it last accepted: the objects were written
        // under that form, and a start checks the files against it (`definitions::accepted`).
        let accepted = runtime
            .block_on(crate::lifecycle::accepted::read(&store, &name))
            .map_err(|e| (UNABLE, format!("error: reading the last accepted form of {name}: {e}")))?;
        if let Some(last) = accepted.as_ref().and_then(crate::definitions::accepted::served) {
            served.insert(name.clone(), last);
        }
        let stored_versions = runtime
            .block_on(crate::lifecycle::stored_versions::read(&store, &name))
            .map_err(|e| (UNABLE, format!("error: reading status.storedVersions of {name}: {e}")))?;
        let subject = impact::Subject {
            served: &served,
            candidate: &candidate,
            file: &args.file,
            stored_versions: &stored_versions,
        };
        let options = impact::Options {
            limits: Limits { examples: args.examples, ..Limits::default() },
            webhook: WebhookPace { rate: args.webhook_rate, timeout: args.webhook_timeout, ..WebhookPace::default() },
            ..impact::Options::default()
        };
        let mut last = std::time::Instant::now();
        let mut progress = |scanned: u64| {
            if last.elapsed() >= Duration::from_secs(1) {
                last = std::time::Instant::now();
                eprintln!("{name}: {scanned} objects scanned");
            }
        };
        impact::analyze(&store, runtime.handle(), &subject, &options, &AtomicBool::new(false), &mut progress)
            .map_err(|e| (UNABLE, format!("error: {e}")))
    })();
    let closing = store.clone();
    let _ = runtime.block_on(runtime.spawn_blocking(move || closing.close()));
    outcome
}

/// `metadata.name` of a manifest that may not be a valid definition.
fn candidate_name(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let document = crate::definitions::load::parse_documents(text).ok()?.into_iter().next()?;
    document.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string)
}

/// What the server's definition files serve; their problems are printed, as the server logs
/// them.
fn served_now(paths: &[PathBuf]) -> HashMap<String, Served> {
    let no_age = |_: &str| None;
    let no_stored = |_: &str| Vec::new();
    let planned = plan(
        &HashMap::new(),
        &FileCache::default().scan(paths),
        &Context { age: &no_age, stored_versions: &no_stored, accepted: &crate::definitions::reload::nothing_accepted },
    );
    for problem in &planned.problems {
        eprintln!("warning: {problem}");
    }
    planned.served
}

fn open(storage: &str) -> Result<Backend, Failure> {
    match super::StorageUrl::parse(storage).map_err(|e| (UNABLE, format!("error: {e}")))? {
        super::StorageUrl::Sled(dir) => {
            if !dir.is_dir() {
                return Err((UNABLE, format!("error: {}: no store there", dir.display())));
            }
            crate::store::sled::SledStore::open(&dir, Default::default()).map(Backend::Sled).map_err(|e| {
                let why = format!(
                    "opening the store {}: {e} (a running server holds it: stop it, or use --server)",
                    dir.display()
                );
                (UNABLE, format!("error: {why}"))
            })
        }
        super::StorageUrl::Etcd(_) => {
            Err((UNABLE, "error: the impact of a change on etcd is asked of a running server (--server)".into()))
        }
    }
}

/// The path of the served definition `name` (and a subresource of it) on the server.
fn served_definition_path(name: &str, subresource: Option<&str>) -> String {
    let collection = crate::core::paths::collection_path(
        &GroupVersion::new(builtin::GROUP, builtin::VERSION),
        None,
        builtin::SERVED_DEFINITIONS,
    );
    match subresource {
        Some(sub) => format!("{collection}/{name}/{sub}"),
        None => format!("{collection}/{name}"),
    }
}

/// Asks the running server at `server`, follows the analysis and returns its report.
async fn through_server(args: &ImpactArgs, server: &str, bytes: &[u8]) -> Result<Report, Failure> {
    let unable = |message: String| (UNABLE, format!("error: {message}"));
    let text = std::str::from_utf8(bytes).map_err(|e| (REFUSED, format!("error: {}: {e}", args.file.display())))?;
    let mut documents = crate::definitions::load::parse_documents(text)
        .map_err(|e| (REFUSED, format!("error: cannot parse: {e}")))?
        .into_iter();
    let document = documents.next().ok_or_else(|| (REFUSED, "error: no CustomResourceDefinition found".to_string()))?;
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| (REFUSED, "error: the candidate has no metadata.name".to_string()))?;
    let base = server.trim_end_matches('/');
    let client = ServerClient::new(&args.connection).map_err(unable)?;
    let impact_uri: http::Uri = format!("{base}{}", served_definition_path(&name, Some(builtin::IMPACT)))
        .parse()
        .map_err(|e| unable(format!("--server: {e}")))?;
    let body = Bytes::from(serde_json::to_vec(&document).map_err(|e| unable(e.to_string()))?);
    let answer = client.send_body(http::Method::POST, &impact_uri, Some(body)).await.map_err(unable)?;
    let started = match answer {
        Ok(body) => read_json(body).await.map_err(unable)?,
        Err(refused) if refused.status.as_u16() == 422 || refused.status.as_u16() == 400 => {
            return Err((REFUSED, format!("error: {}", refused.message)));
        }
        Err(refused) => return Err(unable(refused.to_string())),
    };
    let id = started.pointer("/details/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    let status_uri: http::Uri = format!("{base}{}", served_definition_path(&name, None))
        .parse()
        .map_err(|e| unable(format!("--server: {e}")))?;
    let mut shown_progress = None;
    loop {
        let object = match client.send_body(http::Method::GET, &status_uri, None).await.map_err(unable)? {
            Ok(body) => read_json(body).await.map_err(unable)?,
            Err(refused) => return Err(unable(refused.to_string())),
        };
        let impact = object.pointer("/status/impact").cloned().unwrap_or(Value::Null);
        if impact.get("id").and_then(Value::as_str) != Some(id.as_str()) {
            return Err(unable(format!("another impact analysis of {name} replaced this one")));
        }
        match impact.get("state").and_then(Value::as_str).unwrap_or_default() {
            "Done" => {
                let report = impact.get("report").cloned().unwrap_or(Value::Null);
                return serde_json::from_value(report).map_err(|e| unable(format!("the server's report: {e}")));
            }
            "Running" => {
                let scanned = impact.get("scannedObjects").and_then(Value::as_u64).unwrap_or(0);
                if shown_progress != Some(scanned) {
                    shown_progress = Some(scanned);
                    let total = impact
                        .get("totalObjects")
                        .and_then(Value::as_u64)
                        .map_or(String::new(), |t| format!(" of {t}"));
                    eprintln!("{name}: {scanned}{total} objects scanned");
                }
            }
            other => {
                let why = impact.get("error").and_then(Value::as_str).unwrap_or_default();
                return Err(unable(
                    format!("the impact analysis of {name} ended {other} {why}").trim_end().to_string(),
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn read_json(body: hyper::body::Incoming) -> Result<Value, String> {
    let bytes = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| format!("the server's answer is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_impact_subresource_path() {
        let path = served_definition_path("crontabs.stable.example.com", Some("impact"));
        let version = crate::core::paths::group_version_path(&GroupVersion::new("crd-apiserver.io", "v1alpha1"));
        assert_eq!(path, format!("{version}/serveddefinitions/crontabs.stable.example.com/impact"));
    }

    #[test]
    fn an_invalid_candidate_is_refused_in_kubernetes_words() {
        let refusal = Refusal::Invalid(vec![crate::core::field::FieldError::required(
            crate::core::field::Path::new("spec").child("group"),
            "",
        )]);
        assert_eq!(
            refusal_message(&refusal, Some("x.example.com")),
            "The CustomResourceDefinition.apiextensions.k8s.io \"x.example.com\" is invalid: spec.group: Required value"
        );
    }
}
