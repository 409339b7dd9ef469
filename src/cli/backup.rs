//! `crd-apiserver backup` and `crd-apiserver restore` (the file format: `store::backup`,
//! documented in docs/backup.md).
//!
//! A backup is taken online from a running server (`--server`: its `/backup` endpoint,
//! authenticated and authorized as every request is; the only way into a sled store a server
//! holds), or from the store itself: a stopped server's sled directory, or etcd at any time (a
//! range read at one revision). The file is written under a temporary name, checked as a
//! restore would check it, and only then renamed into place.
//!
//! A restore checks the whole file before it touches the store, then loads it through the
//! backend (`store::sled::restore`, `store::etcd::restore`). Holds no request logic.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::BodyExt;

use super::StorageUrl;
use super::server_client::{ServerClient, ServerFlags};
use super::storage_flags::StorageFlags;
use crate::store::backup::{self, Objects, RestoreOptions, Summary};

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The file to write. It appears only once complete and checked.
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// Take the backup from this running server (`https://HOST:PORT`, its `/backup` path),
    /// while it serves writes. Without it, the store the storage flags name is read directly:
    /// a stopped server's sled directory, or etcd (running servers or not).
    #[arg(long)]
    pub server: Option<String>,
    /// With --server: its CA and the credentials to call it with.
    #[command(flatten)]
    pub connection: ServerFlags,
    /// The store to read without --server.
    #[command(flatten)]
    pub storage: StorageFlags,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file.
    pub file: PathBuf,
    /// The store to load: a sled directory (stopped server; created if missing), or etcd.
    #[command(flatten)]
    pub storage: StorageFlags,
    /// Restore into a store that holds keys: they are deleted first. Stop every server on
    /// the store before.
    #[arg(long)]
    pub replace: bool,
    /// How far above the backup's revision the restored store's resourceVersions start, so
    /// that none handed out after the backup was taken is handed out again (as etcd's
    /// `--bump-revision`; Kubernetes advises 1000000000).
    #[arg(long, default_value_t = 1_000_000_000)]
    pub bump_revision: u64,
}

/// Its threads get the stack the deepest object needs (`core::nesting`).
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(crate::core::nesting::THREAD_STACK_BYTES)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// `crd-apiserver backup`; returns the exit code.
pub fn run_backup(args: &BackupArgs) -> i32 {
    let partial = partial_path(&args.output);
    let outcome = runtime().and_then(|rt| {
        rt.block_on(async {
            match &args.server {
                Some(server) => download(args, server, &partial).await.map(|()| None),
                None => from_store(args, &partial).await.map(Some),
            }
        })
    });
    let checked = outcome.and_then(|summary| {
        let verified = backup::verify(&partial).map_err(|e| format!("the backup written is not whole: {e}"))?;
        std::fs::rename(&partial, &args.output).map_err(|e| format!("{}: {e}", args.output.display()))?;
        Ok((summary, verified))
    });
    match checked {
        Ok((_, verified)) => {
            let header = &verified.header;
            println!(
                "backup of the {} store at revision {}: {} objects, {} state records, in {}",
                header.backend,
                header.revision,
                verified.objects,
                header.state.len(),
                args.output.display()
            );
            0
        }
        Err(message) => {
            let _ = std::fs::remove_file(&partial);
            eprintln!("error: {message}");
            1
        }
    }
}

fn partial_path(output: &Path) -> PathBuf {
    let mut name = output.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    output.with_file_name(name)
}

/// Writes chunks from `rx` into a new file at `path`, synced before it returns.
async fn write_file(path: &Path, mut rx: tokio::sync::mpsc::Receiver<Bytes>) -> Result<(), String> {
    let mut file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    while let Some(chunk) = rx.recv().await {
        file.write_all(&chunk).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    file.sync_all().map_err(|e| format!("{}: {e}", path.display()))
}

/// A backup read from the store itself.
async fn from_store(args: &BackupArgs, partial: &Path) -> Result<Summary, String> {
    let url = args.storage.url(None)?;
    // A backup never compacts etcd, nor stands for election.
    let store = args.storage.open(&url, Duration::from_secs(20), None).await.map_err(|e| match &url {
        StorageUrl::Sled(dir) if e.to_string().contains("in use") => format!(
            "{e}: back up a running server through it, with --server https://HOST:PORT (or stop it to read {} \
             directly)",
            dir.display()
        ),
        _ => format!("opening the store: {e}"),
    })?;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let (written, taken) = tokio::join!(write_file(partial, rx), async {
        let taken = store.backup(&tx).await;
        drop(tx);
        taken
    });
    let closing = store.clone();
    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
    let summary = taken.map_err(|e| match e {
        backup::Error::Store(crate::store::Error::Expired { requested, .. }) => format!(
            "revision {requested} was compacted while the backup read it (etcd's compaction, or more writes than a \
             sled store keeps for a backup): take the backup again"
        ),
        e => format!("reading the store: {e}"),
    })?;
    written?;
    Ok(summary)
}

/// A backup streamed from a running server's `/backup`.
async fn download(args: &BackupArgs, server: &str, partial: &Path) -> Result<(), String> {
    let client = ServerClient::new(&args.connection)?;
    let uri: http::Uri =
        format!("{}/backup", server.trim_end_matches('/')).parse().map_err(|e| format!("--server: {e}"))?;
    let mut body = client.send(http::Method::GET, &uri).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let (written, received) = tokio::join!(write_file(partial, rx), async move {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("GET {uri}: the stream broke: {e}"))?;
            if let Ok(data) = frame.into_data()
                && tx.send(data).await.is_err()
            {
                break;
            }
        }
        Ok::<(), String>(())
    });
    received?;
    written
}

/// `crd-apiserver restore`; returns the exit code.
pub fn run_restore(args: &RestoreArgs) -> i32 {
    match restore(args) {
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

fn restore(args: &RestoreArgs) -> Result<String, String> {
    let url = args.storage.url(None)?;
    // The whole file is checked before the store is touched.
    let verified = backup::verify(&args.file).map_err(|e| format!("{e} (nothing was restored)"))?;
    let header = &verified.header;
    let objects = Objects::open(&verified).map_err(|e| e.to_string())?;
    let options = RestoreOptions { replace: args.replace, bump_revision: args.bump_revision };
    let (restored, place) = match &url {
        StorageUrl::Sled(dir) => (
            crate::store::sled::restore(dir, header, objects, options).map_err(|e| match e {
                backup::Error::Store(e) if e.to_string().contains("in use") => {
                    format!("{e}: stop the server before restoring into its store")
                }
                e => e.to_string(),
            })?,
            dir.display().to_string(),
        ),
        StorageUrl::Etcd(servers) => {
            let etcd = args.storage.etcd_options(servers, Duration::from_secs(20), None);
            let restored = runtime()?
                .block_on(crate::store::etcd::restore(&etcd, header, objects, options))
                .map_err(|e| e.to_string())?;
            (restored, format!("etcd {} under {}", servers.join(","), etcd.prefix))
        }
    };
    Ok(format!(
        "restored {} objects and {} state records (the {} backup of revision {}, taken {}) into {place}; the \
         store's revision is now {}: clients holding older resourceVersions get 410 Expired and list again",
        restored.objects, restored.state, header.backend, header.revision, header.created, restored.revision
    ))
}
