//! Reading the `--definitions` paths again and again: every manifest file is looked at on each
//! scan and read unless its metadata (file, length, times) is what it was when it was last
//! read and it had been still for a second then; only files whose bytes changed are parsed,
//! checked and compiled again; the others give back the very definitions (the same `Arc`s) they
//! gave before, so that an unchanged definition is recognised by identity and its watches go on.
//!
//! At a start, a file whose bytes are those the store's records say gave their accepted forms
//! ([`Origin`]) is not parsed at all: its documents are the records' (`Recall`).
//!
//! Owns the cache of loaded files. Must not decide what is served (`live::plan` does).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::load::{Loaded, Problem, Trusted, load_text_trusting, manifest_files, not_compiled, trust_none};

/// Each document's definition or problem, in document order.
pub type Documents = Vec<Result<Loaded, Problem>>;

/// What one manifest file gave.
#[derive(Debug, Clone)]
pub struct ScannedFile {
    pub path: PathBuf,
    pub documents: Documents,
}

impl ScannedFile {
    /// Whether some of the file's contents could not be told apart as definitions (unreadable,
    /// unparsable, a document without a name): the definitions it held before may be in there.
    pub fn is_murky(&self) -> bool {
        self.documents.iter().any(|d| matches!(d, Err(p) if p.name.is_none()))
    }
}

/// The outcome of one scan.
#[derive(Debug, Clone)]
pub enum Scan {
    /// Every path could be listed: the files found, in order.
    Files(Vec<ScannedFile>),
    /// A path could not be read or listed (a directory being swapped, say): nothing can be
    /// said of the definitions it held.
    Failed(Problem),
}

/// How long a file must have been still before its metadata alone vouches for its bytes: a
/// file changed within the same tick of the file system's clock as it was last read keeps its
/// metadata, so it is read again until it has been still this long (as git treats "racily
/// clean" entries).
const SETTLED: Duration = Duration::from_secs(1);

/// What a file's metadata says of it: the file (device and inode, through symbolic links, so
/// that a ConfigMap volume's swap is a new file), its length, and when it or its contents last
/// changed (`ctime` cannot be set back by a writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }

    /// Whether the file had been still for [`SETTLED`] when it was looked at (`looked_at`).
    fn settled_at(&self, looked_at: SystemTime) -> bool {
        let Some(limit) = looked_at.duration_since(UNIX_EPOCH).ok().and_then(|t| t.checked_sub(SETTLED)) else {
            return false;
        };
        let before = |(seconds, nanos): (i64, i64)| match (u64::try_from(seconds), u32::try_from(nanos)) {
            (Ok(seconds), Ok(nanos)) => Duration::new(seconds, nanos) < limit,
            _ => false,
        };
        before(self.mtime) && before(self.ctime)
    }
}

/// A file's contents, by their SHA-256: enough to tell a changed file, without keeping every
/// file's bytes for as long as it is served.
type Digest = [u8; 32];

fn digest(bytes: &[u8]) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
    out
}

/// A digest as lowercase hexadecimal, as a record keeps it.
fn hex(digest: &Digest) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::with_capacity(64), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// Which bytes gave a loaded definition: the file's digest, the document it was of how many
/// the file has, and the warnings its schemas drew. Kept with the definition's accepted record
/// (`lifecycle::accepted`), so that a start that finds the same bytes takes every document of
/// the file from the records instead of parsing and decoding it again (upjet's 102 MB of YAML
/// are most of a restart's work): what the bytes give is decided by the bytes and the loader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The SHA-256 of the file's bytes, in hexadecimal.
    pub sha256: String,
    /// The loader that read them (`load::FORM`): another reads the file again.
    pub form: String,
    /// The document's position in the file (after `List`s are expanded), from 0.
    pub document: usize,
    /// How many documents the file gave.
    pub documents: usize,
    /// [`Definition::warnings`](super::model::Definition::warnings): they are drawn from the
    /// file's schemas as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// At a start: every document of the file at `path` whose bytes have the SHA-256 given (in
/// hexadecimal), when the store's records hold what those bytes gave; `None` to parse it.
pub type Recall<'a> = dyn Fn(&Path, &str) -> Option<Documents> + Sync + 'a;

/// Recalls nothing: every changed file is parsed.
pub fn recall_none(_: &Path, _: &str) -> Option<Documents> {
    None
}

/// A file as the last scan saw it.
#[derive(Debug)]
struct Cached {
    /// The digest of its bytes.
    digest: Digest,
    /// Its metadata just before `bytes` were read, and when that was.
    stamp: Option<Stamp>,
    looked_at: SystemTime,
    documents: Documents,
    /// The scan that last found it (`FileCache::scans`).
    seen: u64,
}

/// The files seen at the last scan, by path (its bytes: thousands are looked up at every
/// scan, and the paths of one listing are written one way), with their digests and what they
/// gave.
#[derive(Debug, Default)]
pub struct FileCache {
    files: HashMap<OsString, Cached, foldhash::fast::RandomState>,
    /// How many scans there were.
    scans: u64,
    /// How many files the last scan parsed, and how many it took from the records.
    last: ScanCounts,
}

/// How many files a scan parsed, and how many it took from the store's records (`Recall`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanCounts {
    pub parsed: usize,
    pub recalled: usize,
}

/// What a scan found of one file.
enum Found {
    /// Metadata the same as when the cached bytes were read, the file still since.
    Unchanged,
    Read {
        /// The digest of the bytes read (`None`: they could not be read, or loading them
        /// failed on its thread).
        digest: Option<Digest>,
        stamp: Option<Stamp>,
        /// What the bytes gave, when they are not those cached.
        documents: Option<Documents>,
    },
}

/// What reading a file gave on its worker: the digest of its bytes, and what they gave when
/// they are not the cached ones; and whether the records gave it.
struct Read {
    digest: Option<Digest>,
    documents: Option<Documents>,
    recalled: bool,
}

impl FileCache {
    /// Reads every manifest under `paths` whose metadata does not vouch for what was read
    /// before; changed files are loaded on every core.
    pub fn scan(&mut self, paths: &[PathBuf]) -> Scan {
        self.scan_trusting(paths, &trust_none, &recall_none)
    }

    /// [`FileCache::scan`], not checking again the definitions `trusted` vouches for (a start's,
    /// that the store's records say were accepted in the same form), and taking the documents
    /// of the files whose bytes `recall` knows from it.
    pub fn scan_trusting(&mut self, paths: &[PathBuf], trusted: &Trusted, recall: &Recall) -> Scan {
        let files = match manifest_files(paths) {
            Ok(files) => files,
            Err(problem) => return Scan::Failed(problem),
        };
        let looked_at = SystemTime::now();
        let stamped: Vec<(PathBuf, Option<Stamp>, bool)> = files
            .into_iter()
            .map(|path| {
                let stamp = Stamp::of(&path);
                let cached = self.files.get(path.as_os_str());
                let unchanged = matches!((stamp, cached), (Some(stamp), Some(cached))
                    if cached.stamp == Some(stamp) && stamp.settled_at(cached.looked_at));
                (path, stamp, unchanged)
            })
            .collect();
        // Files are read, digested and (when their bytes changed) loaded on every core, each
        // file's bytes dropped once loaded: a start reads 102 MB of upjet's YAML, which one
        // thread digesting it all first held up for a tenth of the start (issue 32).
        // A file given twice is read once, and gives the same definitions both times.
        let mut distinct = std::collections::HashSet::new();
        let to_read: Vec<&Path> = stamped
            .iter()
            .filter(|(path, _, unchanged)| !unchanged && distinct.insert(path.as_path()))
            .map(|(path, ..)| path.as_path())
            .collect();
        let files = &self.files;
        let read = crate::cel::map_on_compile_stack(&to_read, |path| {
            let bytes = match std::fs::read(path) {
                Ok(bytes) => bytes,
                Err(e) => {
                    let problem = Problem::new(path.display().to_string(), None, vec![format!("cannot read: {e}")]);
                    let documents = vec![Err(problem.because(super::load::reason::UNREADABLE))];
                    return Read { digest: None, documents: Some(documents), recalled: false };
                }
            };
            let digest = digest(&bytes);
            if files.get(path.as_os_str()).is_some_and(|cached| cached.digest == digest) {
                return Read { digest: Some(digest), documents: None, recalled: false };
            }
            let (documents, recalled) = match recall(path, &hex(&digest)) {
                Some(documents) => (documents, true),
                None => (load_text_trusting(path, &bytes, trusted), false),
            };
            Read { digest: Some(digest), documents: Some(documents), recalled }
        });
        let mut counts = ScanCounts::default();
        let read: HashMap<&Path, Read> = to_read
            .iter()
            .zip(read)
            .map(|(path, read)| {
                let read =
                    read.unwrap_or_else(|| Read { digest: None, documents: Some(not_compiled(path)), recalled: false });
                match (&read.documents, read.recalled) {
                    (Some(_), true) => counts.recalled += 1,
                    (Some(_), false) => counts.parsed += 1,
                    (None, _) => {}
                }
                (*path, read)
            })
            .collect();
        let found: Vec<(PathBuf, Found)> = stamped
            .iter()
            .map(|(path, stamp, unchanged)| match read.get(path.as_path()).filter(|_| !unchanged) {
                Some(Read { digest, documents, .. }) => {
                    (path.clone(), Found::Read { digest: *digest, stamp: *stamp, documents: documents.clone() })
                }
                None => (path.clone(), Found::Unchanged),
            })
            .collect();
        self.last = counts;
        // Every file found is marked seen; those not found are forgotten after.
        self.scans += 1;
        let scan = self.scans;
        let mut seen = 0;
        let mut scanned = Vec::with_capacity(found.len());
        for (path, found) in found {
            let key = path.as_os_str();
            let documents = match found {
                Found::Unchanged => self.files.get(key).map(|c| c.documents.clone()).unwrap_or_default(),
                Found::Read { digest, stamp, documents } => {
                    let documents = match documents {
                        Some(documents) => documents,
                        None => self.files.get(key).map(|c| c.documents.clone()).unwrap_or_default(),
                    };
                    match digest {
                        Some(digest) => {
                            let cached = Cached { digest, stamp, looked_at, documents: documents.clone(), seen: 0 };
                            match self.files.get_mut(key) {
                                Some(entry) => *entry = Cached { seen: entry.seen, ..cached },
                                None => {
                                    self.files.insert(key.to_owned(), cached);
                                }
                            }
                        }
                        None => {
                            self.files.remove(key);
                        }
                    }
                    documents
                }
            };
            if let Some(cached) = self.files.get_mut(key)
                && cached.seen != scan
            {
                cached.seen = scan;
                seen += 1;
            }
            scanned.push(ScannedFile { path, documents });
        }
        if self.files.len() > seen {
            self.files.retain(|_, cached| cached.seen == scan);
        }
        Scan::Files(scanned)
    }

    /// How many files the last scan parsed, and how many it took from the records.
    pub fn last_counts(&self) -> ScanCounts {
        self.last
    }

    /// Which bytes gave `loaded`, as the file `path` was last read: when every document of the
    /// file loaded, one of them is `loaded` (the same definition, or the same manifest and
    /// schemas) and its manifest carries no status (a record keeps none). `None` otherwise:
    /// then a start parses the file.
    pub fn origin_of(&self, path: &Path, loaded: &Loaded) -> Option<Origin> {
        let cached = self.files.get(path.as_os_str())?;
        let mut documents = Vec::with_capacity(cached.documents.len());
        for document in &cached.documents {
            documents.push(document.as_ref().ok()?);
        }
        let same = |d: &&Loaded| {
            std::sync::Arc::ptr_eq(&d.definition, &loaded.definition)
                || (d.manifest == loaded.manifest && d.schema_texts() == loaded.schema_texts())
        };
        let document = documents.iter().position(same)?;
        if loaded.manifest.status.is_some() {
            return None;
        }
        Some(Origin {
            sha256: hex(&cached.digest),
            form: super::load::FORM.to_string(),
            document,
            documents: documents.len(),
            warnings: loaded.definition.warnings.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRONTAB: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, kind: CronTab}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
";

    fn definitions(scan: &Scan) -> Vec<&Loaded> {
        match scan {
            Scan::Files(files) => {
                files.iter().flat_map(|f| f.documents.iter().filter_map(|d| d.as_ref().ok())).collect()
            }
            Scan::Failed(p) => panic!("{p}"),
        }
    }

    #[test]
    fn unchanged_files_give_the_same_definitions() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("crontab.yaml");
        std::fs::write(&file, CRONTAB).unwrap();
        let mut cache = FileCache::default();
        let first = cache.scan(&[dir.path().to_path_buf()]);
        let again = cache.scan(&[dir.path().to_path_buf()]);
        assert!(std::sync::Arc::ptr_eq(&definitions(&first)[0].definition, &definitions(&again)[0].definition));
        std::fs::write(&file, CRONTAB.replace("CronTab", "CronTab2")).unwrap();
        let changed = cache.scan(&[dir.path().to_path_buf()]);
        assert_eq!(definitions(&changed)[0].definition.kind, "CronTab2");
    }

    #[test]
    fn a_file_rewritten_at_once_with_the_same_length_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("crontab.yaml");
        std::fs::write(&file, CRONTAB).unwrap();
        let mut cache = FileCache::default();
        let paths = [dir.path().to_path_buf()];
        assert_eq!(definitions(&cache.scan(&paths))[0].definition.kind, "CronTab");
        // Same length, within the same tick of the file system's clock most likely.
        std::fs::write(&file, CRONTAB.replace("CronTab", "CronTac")).unwrap();
        assert_eq!(definitions(&cache.scan(&paths))[0].definition.kind, "CronTac");
        // A ConfigMap volume's swap: another file under the same path.
        let other = dir.path().join("other");
        std::fs::write(&other, CRONTAB.replace("CronTab", "CronTad")).unwrap();
        std::fs::rename(&other, &file).unwrap();
        assert_eq!(definitions(&cache.scan(&paths))[0].definition.kind, "CronTad");
    }

    #[test]
    fn metadata_vouches_only_for_files_still_for_a_while() {
        let now = SystemTime::now();
        let at = |t: SystemTime| {
            let t = t.duration_since(UNIX_EPOCH).unwrap();
            (i64::try_from(t.as_secs()).unwrap(), i64::from(t.subsec_nanos()))
        };
        let stamp = |changed: SystemTime| Stamp { dev: 1, ino: 2, len: 3, mtime: at(changed), ctime: at(changed) };
        assert!(stamp(now - Duration::from_secs(2)).settled_at(now));
        assert!(!stamp(now - Duration::from_millis(10)).settled_at(now));
        assert!(!stamp(now + Duration::from_secs(5)).settled_at(now), "a time ahead of the clock vouches for nothing");
        let mut recent_ctime = stamp(now - Duration::from_secs(2));
        recent_ctime.ctime = at(now);
        assert!(!recent_ctime.settled_at(now), "mtime set back by a writer");
    }

    #[test]
    fn files_gone_are_forgotten_and_a_file_given_twice_gives_the_same_definitions() {
        let dir = tempfile::tempdir().unwrap();
        let (crontab, other) = (dir.path().join("crontab.yaml"), dir.path().join("other.yaml"));
        std::fs::write(&crontab, CRONTAB).unwrap();
        std::fs::write(&other, CRONTAB.replace("crontabs", "others").replace("CronTab", "Other")).unwrap();
        let mut cache = FileCache::default();
        let both = [dir.path().to_path_buf(), crontab.clone()];
        let first = cache.scan(&both);
        let kinds = |scan: &Scan| definitions(scan).iter().map(|l| l.definition.kind.clone()).collect::<Vec<_>>();
        assert_eq!(kinds(&first), ["CronTab", "Other", "CronTab"]);
        let found = definitions(&first);
        assert!(std::sync::Arc::ptr_eq(&found[0].definition, &found[2].definition), "loaded once");
        assert_eq!(cache.files.len(), 2);
        let again = cache.scan(&both);
        assert!(std::sync::Arc::ptr_eq(&definitions(&again)[2].definition, &found[0].definition));
        std::fs::remove_file(&other).unwrap();
        assert_eq!(kinds(&cache.scan(&both)), ["CronTab", "CronTab"]);
        assert_eq!(cache.files.len(), 1, "the file gone is forgotten");
        // Back under the same path: read again, whatever its metadata says.
        std::fs::write(&other, CRONTAB.replace("crontabs", "others").replace("CronTab", "Other")).unwrap();
        assert_eq!(kinds(&cache.scan(&both)), ["CronTab", "Other", "CronTab"]);
        assert_eq!(cache.files.len(), 2);
    }

    #[test]
    fn a_half_written_file_is_murky_and_a_missing_path_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("crontab.yaml"), &CRONTAB[..60]).unwrap();
        let mut cache = FileCache::default();
        match cache.scan(&[dir.path().to_path_buf()]) {
            Scan::Files(files) => assert!(files[0].is_murky(), "{:?}", files[0].documents),
            Scan::Failed(p) => panic!("{p}"),
        }
        assert!(matches!(cache.scan(&[dir.path().join("gone")]), Scan::Failed(_)));
    }
}
