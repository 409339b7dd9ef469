//! `crd-apiserver delete-objects NAME`: deletes the stored objects of a definition that is no
//! longer served. A definition removed from the files stops being served but keeps its objects
//! (a ConfigMap mishap must never destroy data), so deleting them is this explicit admin step:
//! it refuses while the definitions still name the definition, only counts without
//! `--confirm`, and forgets the definition's `status.storedVersions` record with its objects.
//!
//! With `--storage` it opens the store itself: the sled store is one process's at a time (its
//! lock), so that is a stopped server's store. With `--server` it asks a running server
//! (`POST /delete-objects`, authenticated and authorized as every request is), which refuses
//! while it serves the definition and does the sweep (`lifecycle::removed`) itself. Owns no
//! request logic and never touches a served definition's objects.

use std::path::PathBuf;

use clap::Args;

use http_body_util::BodyExt;

use super::server_client::{ServerClient, ServerFlags};
use crate::definitions::reload::{Context, nothing_accepted, plan};
use crate::definitions::scan::FileCache;
use crate::lifecycle::removed;
use crate::store::Backend;

#[derive(Debug, Args)]
pub struct DeleteObjectsArgs {
    /// The definition whose objects go: `<plural>.<group>`, as its `metadata.name`.
    pub name: String,
    /// The stopped server's store: a sled directory (`PATH` or `sled://PATH`).
    #[arg(long, required_unless_present = "server", conflicts_with = "server")]
    pub storage: Option<String>,
    /// With --storage, the server's definition files or directories: the definition must not be
    /// among them.
    #[arg(long = "definitions", requires = "storage")]
    pub definitions: Vec<PathBuf>,
    /// A running server (`https://HOST:PORT`) to do it: it refuses while it serves the
    /// definition.
    #[arg(long)]
    pub server: Option<String>,
    /// With --server: its CA and the credentials to call it with.
    #[command(flatten)]
    pub connection: ServerFlags,
    /// Delete the objects; without it they are only counted.
    #[arg(long)]
    pub confirm: bool,
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: &DeleteObjectsArgs) -> i32 {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let outcome = match &args.server {
        Some(server) => runtime.block_on(through_server(args, server)),
        None => runtime.block_on(delete_objects(args)),
    };
    match outcome {
        Ok(message) => {
            println!("{message}");
            0
        }
        Err(message) => {
            eprintln!("error: {message}");
            1
        }
    }
}

async fn delete_objects(args: &DeleteObjectsArgs) -> Result<String, String> {
    if removed::split_name(&args.name).is_none() {
        return Err(format!("{:?} is not a definition name (<plural>.<group>)", args.name));
    }
    if args.definitions.is_empty() {
        return Err(
            "--definitions: the server's definition files are needed to check the definition is not among them".into(),
        );
    }
    still_named(&args.name, &args.definitions)?;
    let store = open(args.storage.as_deref().unwrap_or_default())?;
    if let Err(e) = removed::known(&store, &args.name).await {
        let closing = store.clone();
        let _ = tokio::task::spawn_blocking(move || closing.close()).await;
        return Err(e.to_string());
    }
    let outcome = removed::sweep(&store, &args.name, args.confirm, &|| Ok(()), &mut |_| {})
        .await
        .map(|count| summary(&args.name, count, args.confirm))
        .map_err(|e| e.to_string());
    let closing = store.clone();
    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
    outcome
}

/// Refuses when the definitions still name the definition (valid or not): the server would
/// serve it, or keep serving it.
fn still_named(name: &str, paths: &[PathBuf]) -> Result<(), String> {
    let no_age = |_: &str| None;
    let no_stored = |_: &str| Vec::new();
    let context = Context { age: &no_age, stored_versions: &no_stored, accepted: &nothing_accepted };
    let scan = FileCache::default().scan(paths);
    let checked = plan(&Default::default(), &scan, &context);
    if let Some(served) = checked.served.get(name) {
        return Err(format!(
            "{name} is defined in {}: remove it from the definitions before deleting its objects",
            served.file.display()
        ));
    }
    if let Some(problem) = checked.problems.iter().find(|p| p.name.as_deref() == Some(name) || p.name.is_none()) {
        return Err(format!("the definitions cannot be read through, so {name} may still be among them: {problem}"));
    }
    Ok(())
}

fn open(storage: &str) -> Result<Backend, String> {
    match super::StorageUrl::parse(storage)? {
        super::StorageUrl::Sled(dir) => {
            if !dir.is_dir() {
                return Err(format!("{}: no store there", dir.display()));
            }
            crate::store::sled::SledStore::open(&dir, Default::default()).map(Backend::Sled).map_err(|e| {
                format!("opening the store {}: {e} (a running server holds it: stop the server first)", dir.display())
            })
        }
        super::StorageUrl::Etcd(_) => Err("the etcd backend is not part of this build".into()),
    }
}

/// What a sweep of `count` objects says.
fn summary(name: &str, count: u64, deleted: bool) -> String {
    if deleted {
        format!("deleted {count} objects of {name}")
    } else {
        format!("{count} objects of {name} would be deleted; add --confirm to delete them")
    }
}

/// Asks the running server at `server` to count or delete the objects; prints its progress.
async fn through_server(args: &DeleteObjectsArgs, server: &str) -> Result<String, String> {
    let client = ServerClient::new(&args.connection)?;
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("name", &args.name);
    if args.confirm {
        query.append_pair("confirm", "true");
    }
    let uri: http::Uri = format!("{}/delete-objects?{}", server.trim_end_matches('/'), query.finish())
        .parse()
        .map_err(|e| format!("--server: {e}"))?;
    let mut body = client.send(http::Method::POST, &uri).await?;
    let mut pending = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            format!("POST {uri}: the answer broke off: {e} (the server goes on; run the command again to finish)")
        })?;
        let Ok(data) = frame.into_data() else { continue };
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(&line) else { continue };
            if let Some(progress) = value.get("progress").and_then(|p| p.as_str()) {
                println!("{progress}");
            } else if let Some(error) = value.get("error").and_then(|e| e.as_str()) {
                return Err(error.to_string());
            } else if let Some(report) = value.get("report") {
                let count = report.get("objects").and_then(serde_json::Value::as_u64).unwrap_or(0);
                let deleted = report.get("deleted").and_then(serde_json::Value::as_bool).unwrap_or(false);
                return Ok(summary(&args.name, count, deleted));
            }
        }
    }
    Err(format!("POST {uri}: the answer ended early (run the command again to finish)"))
}
