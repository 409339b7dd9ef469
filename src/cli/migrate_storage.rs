//! `crd-apiserver migrate-storage`: the storage-version migration the server runs in the
//! background, run to its end over a stopped server's store (sled allows one process per
//! directory), for each definition of the files. Resumes a pass a stopped server left. The
//! files are checked as the server checks them at start (against the last accepted form of
//! each definition): a definition whose file is refused is not migrated, and the command fails.

use std::path::PathBuf;

use clap::Args;

use super::StorageUrl;
use crate::api::{Api, ApiOptions};
use crate::lifecycle::migrate::{self, Stop, progress::State};
use crate::lifecycle::stored_versions;
use crate::store::Backend;
use crate::store::sled::{SledOptions, SledStore};

#[derive(Debug, Args)]
pub struct MigrateStorageArgs {
    /// The stopped server's store: a sled directory (`PATH` or `sled://PATH`).
    #[arg(long)]
    pub storage: String,
    /// Definition files or directories, as the server is given them.
    #[arg(long, required = true, value_delimiter = ',')]
    pub definitions: Vec<PathBuf>,
    /// Objects rewritten per second at most (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub storage_migration_rate: u32,
}

/// Migrates every definition; 0 when every one is done and no file was refused, 1 otherwise.
pub async fn run(args: &MigrateStorageArgs) -> i32 {
    let store = match StorageUrl::parse(&args.storage) {
        Ok(StorageUrl::Sled(dir)) => match SledStore::open(&dir, SledOptions::default()) {
            Ok(store) => Backend::Sled(store),
            Err(e) => {
                eprintln!("opening the store {}: {e}", dir.display());
                return 1;
            }
        },
        Ok(StorageUrl::Etcd(_)) => {
            eprintln!("the etcd backend is not part of this build");
            return 1;
        }
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let reloads = crate::definitions::reload_status::ReloadStatus::new();
    let registry =
        super::live_definitions::LiveDefinitions::new(args.definitions.clone(), store.clone(), reloads.clone())
            .load()
            .await;
    let outcome = reloads.last();
    for error in &outcome.errors {
        eprintln!("{}", error.message);
    }
    let api = Api::new(store.clone(), registry, ApiOptions::default());
    let options = migrate::Options { rate: args.storage_migration_rate, ..migrate::Options::default() };
    // A problem with the definitions is a failure, even if every migration ends.
    let mut failed = !outcome.errors.is_empty();
    let catalog = api.catalog();
    for definition in catalog.registry.definitions().iter().filter(|d| !d.read_only) {
        if outcome.error_of(&definition.name).is_some() {
            // Its file was refused (above): the form it is served in is the last one accepted,
            // whose objects are as they should be; the refused form must not touch them.
            println!("{}: not migrated: its definition was refused", definition.name);
            continue;
        }
        let mut report = |p: &migrate::progress::Progress| {
            println!("{}: {} objects migrated, per version {:?}", definition.name, p.migrated, p.objects_per_version);
        };
        match migrate::migrate(&store, definition, options, &|| true, &mut report).await {
            Ok(progress) if progress.state == State::Done => {
                let stored = stored_versions::read(&store, &definition.name).await.unwrap_or_default();
                println!("{}: done; storedVersions {stored:?}", definition.name);
            }
            Ok(_) => {
                println!("{}: objects were still being written in other versions; run again", definition.name);
                failed = true;
            }
            Err(e @ (Stop::Failed(_) | Stop::Superseded)) => {
                eprintln!("{}: {e}", definition.name);
                failed = true;
            }
        }
    }
    let closing = store.clone();
    if tokio::task::spawn_blocking(move || closing.close()).await.is_err() {
        failed = true;
    }
    i32::from(failed)
}
