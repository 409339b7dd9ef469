//! Backups of a store: one file, JSON lines, consistent at one revision (the format is
//! documented in `docs/backup.md`): a header (format name and version, the backend, the
//! revision, and the per-definition state records such as storedVersions and accepted
//! names), one line per object with its key, revision and stored bytes, and a trailer with the
//! object count and a SHA-256 of every byte before it, so that a truncated or altered file is
//! refused.
//!
//! `dump` writes a backup of any `Store` (a running server's, through its `/backup`
//! endpoint, or a stopped one's); `read` checks a file and reads it back. Loading a backup
//! into a store is each backend's (`sled::restore`, `etcd::restore`): only they can keep
//! revisions above the backup's.
//!
//! Owns the file format. Like the rest of `store`, never sees object structure: values are
//! bytes.

mod dump;
mod read;

pub use dump::{Sink, Summary, dump};
pub use read::{Objects, Verified, verify};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::Revision;

/// The `format` of the header line.
pub const FORMAT: &str = "crd-apiserver-backup";

/// The newest format version this build writes and reads.
pub const VERSION: u64 = 1;

/// Where the store keeps what is not an object (storedVersions, accepted names, migration
/// progress): every key outside the resources' keys (which start with `/`) starts with it.
pub const STATE_PREFIX: &str = "crd-apiserver/";

/// Where objects live: every resource key starts with it.
pub const OBJECT_PREFIX: &str = "/";

/// What can go wrong making or reading a backup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] super::Error),
    /// The file is not a complete backup this build can read; nothing was written.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
    /// Whoever received the backup went away.
    #[error("the backup's reader went away")]
    Closed,
}

/// The first line of a backup.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u64,
    /// The backend the backup was taken from (`sled`, `etcd`).
    pub backend: String,
    /// The store's revision the backup is consistent at.
    pub revision: Revision,
    /// When the backup was taken (RFC 3339).
    pub created: String,
    /// Every record under `STATE_PREFIX` at `revision`, in key order.
    pub state: Vec<Entry>,
}

/// One key and its stored bytes, at the revision that last wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub key: String,
    pub revision: Revision,
    /// The stored bytes when they are UTF-8 (as a JSON string: every byte kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The stored bytes in base64 otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_base64: Option<String>,
}

impl Entry {
    pub fn new(key: String, revision: Revision, value: &[u8]) -> Entry {
        match std::str::from_utf8(value) {
            Ok(text) => Entry { key, revision, value: Some(text.to_string()), value_base64: None },
            Err(_) => {
                use base64::Engine;
                let encoded = base64::engine::general_purpose::STANDARD.encode(value);
                Entry { key, revision, value: None, value_base64: Some(encoded) }
            }
        }
    }

    /// The stored bytes.
    pub fn bytes(&self) -> Result<Bytes, Error> {
        use base64::Engine;
        match (&self.value, &self.value_base64) {
            (Some(text), None) => Ok(Bytes::copy_from_slice(text.as_bytes())),
            (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .map(Bytes::from)
                .map_err(|e| Error::Refused(format!("{}: valueBase64 is not base64: {e}", self.key))),
            _ => Err(Error::Refused(format!("{}: exactly one of value and valueBase64 must be given", self.key))),
        }
    }
}

/// The last line of a backup.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trailer {
    /// Object lines between the header and the trailer.
    pub objects: u64,
    /// SHA-256 (hex) of every byte of the file before this line.
    pub sha256: String,
}

/// One line of a backup file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    Header(Header),
    Object(Entry),
    Trailer(Trailer),
}

/// How a store is loaded from a backup.
#[derive(Debug, Clone, Copy)]
pub struct RestoreOptions {
    /// Restore into a store that holds keys, removing them first.
    pub replace: bool,
    /// How far above the backup's revision (and the store's own) the restored store's
    /// revisions start, so that resourceVersions handed out after the backup was taken are
    /// never handed out again (etcd's `--bump-revision`).
    pub bump_revision: u64,
}

/// What a restore did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    pub objects: u64,
    pub state: u64,
    /// The store's revision after the restore: every resourceVersion it hands out is above it.
    pub revision: Revision,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
