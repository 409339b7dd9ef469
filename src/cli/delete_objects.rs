//! `crd-apiserver delete-objects NAME`: deletes the stored objects of a definition that is no
//! longer served. A definition removed from the files stops being served but keeps its objects
//! (a ConfigMap mishap must never destroy data), so deleting them is this explicit admin step:
//! it refuses while the definitions still name the definition, only counts without
//! `--confirm`, and forgets the definition's `status.storedVersions` record with its objects.
//!
//! It opens the store itself: the sled store is one process's at a time (its lock), so it runs
//! against a stopped server's store. Owns no request logic and never touches a served
//! definition's objects.

use std::path::PathBuf;

use clap::Args;

use crate::definitions::reload::{Context, plan};
use crate::definitions::scan::FileCache;
use crate::store::{Backend, ListOptions, Store};

/// Objects listed (and deleted) per page.
const PAGE: usize = 500;

#[derive(Debug, Args)]
pub struct DeleteObjectsArgs {
    /// The definition whose objects go: `<plural>.<group>`, as its `metadata.name`.
    pub name: String,
    /// The stopped server's store: a sled directory (`PATH` or `sled://PATH`).
    #[arg(long)]
    pub storage: String,
    /// The server's definition files or directories: the definition must not be among them.
    #[arg(long = "definitions", required = true)]
    pub definitions: Vec<PathBuf>,
    /// Delete the objects; without it they are only counted.
    #[arg(long)]
    pub confirm: bool,
}

/// Runs the subcommand; returns the process exit code.
pub fn run(args: &DeleteObjectsArgs) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    match runtime.block_on(delete_objects(args)) {
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
    let Some((plural, group)) = args.name.split_once('.').filter(|(p, g)| !p.is_empty() && !g.is_empty()) else {
        return Err(format!("{:?} is not a definition name (<plural>.<group>)", args.name));
    };
    still_named(&args.name, &args.definitions)?;
    let store = open(&args.storage)?;
    let outcome = sweep(&store, &crate::store::key::resource_prefix(group, plural), args.confirm).await;
    let outcome = match outcome {
        Ok(count) if args.confirm => crate::lifecycle::stored_versions::forget(&store, &args.name)
            .await
            .map(|()| format!("deleted {count} objects of {}", args.name))
            .map_err(|e| format!("deleted {count} objects of {}, but not its storedVersions record: {e}", args.name)),
        Ok(count) => Ok(format!("{count} objects of {} would be deleted; add --confirm to delete them", args.name)),
        Err(e) => Err(e),
    };
    let closing = store.clone();
    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
    outcome
}

/// Refuses when the definitions still name the definition (valid or not): the server would
/// serve it, or keep serving it.
fn still_named(name: &str, paths: &[PathBuf]) -> Result<(), String> {
    let no_age = |_: &str| None;
    let no_stored = |_: &str| Vec::new();
    let context = Context { age: &no_age, stored_versions: &no_stored };
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

/// Counts, and with `delete` deletes, every object under `prefix`, page by page. Each delete
/// is conditional on the revision listed: an object written meanwhile is not deleted blind.
async fn sweep(store: &Backend, prefix: &str, delete: bool) -> Result<usize, String> {
    let mut count = 0;
    let mut start_after = None;
    loop {
        let options = ListOptions { start_after: start_after.take(), limit: Some(PAGE), ..ListOptions::default() };
        let page = store.list(prefix, options).await.map_err(|e| format!("listing {prefix}: {e}"))?;
        let Some(last) = page.items.last().map(|kv| kv.key.clone()) else { break };
        for kv in &page.items {
            if delete {
                store.delete(&kv.key, Some(kv.revision)).await.map_err(|e| format!("deleting {}: {e}", kv.key))?;
            }
            count += 1;
        }
        start_after = Some(last);
    }
    Ok(count)
}
