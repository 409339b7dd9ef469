//! Writing a backup: every key of the store as of one revision, page by page, into a channel
//! of chunks (a file or an HTTP body on the other end), while writers go on.

use bytes::Bytes;

use super::{Entry, Error, FORMAT, Header, Line, OBJECT_PREFIX, STATE_PREFIX, Trailer, VERSION, hex};
use crate::store::{ListOptions, Revision, Store};

/// Keys read per list call.
const PAGE: usize = 1000;

/// Bytes gathered before a chunk is handed to the sink.
const CHUNK: usize = 256 << 10;

/// Where the backup's bytes go, in order.
pub type Sink = tokio::sync::mpsc::Sender<Bytes>;

/// What a backup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub revision: Revision,
    pub objects: u64,
    pub state: u64,
}

/// The lines written so far, their digest, and the chunk being gathered.
struct Out<'a> {
    sink: &'a Sink,
    buffer: Vec<u8>,
    digest: ring::digest::Context,
}

impl Out<'_> {
    fn encode(line: &Line) -> Result<Vec<u8>, Error> {
        let mut bytes = serde_json::to_vec(line).map_err(|e| Error::Io(format!("encoding a backup line: {e}")))?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    async fn line(&mut self, line: &Line) -> Result<(), Error> {
        let bytes = Self::encode(line)?;
        self.digest.update(&bytes);
        self.buffer.extend_from_slice(&bytes);
        if self.buffer.len() >= CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Error> {
        let chunk = Bytes::from(std::mem::take(&mut self.buffer));
        self.sink.send(chunk).await.map_err(|_| Error::Closed)
    }
}

/// The next page of a listing at `revision`, after `start_after`.
fn page_after(revision: Revision, start_after: Option<String>) -> ListOptions {
    ListOptions { revision: Some(revision), start_after, limit: Some(PAGE), ..Default::default() }
}

/// Every key under `prefix` as of `revision`, in key order.
async fn read_all<S: Store>(store: &S, prefix: &str, revision: Revision) -> Result<Vec<Entry>, Error> {
    let mut entries = Vec::new();
    let mut start_after = None;
    loop {
        let options = page_after(revision, start_after.take());
        let page = store.list(prefix, options).await?;
        start_after = page.items.last().map(|kv| kv.key.clone());
        entries.extend(page.items.into_iter().map(|kv| Entry::new(kv.key, kv.revision, &kv.value)));
        if !page.more || start_after.is_none() {
            return Ok(entries);
        }
    }
}

/// Writes a backup of `store` as of `revision` into `sink`. The caller keeps `revision`
/// readable meanwhile (a sled store's pin; etcd keeps it until a compaction passes it, which
/// fails the backup with `Expired`). A failure ends the stream without its trailer, so the
/// partial file is refused on restore.
pub async fn dump<S: Store>(store: &S, backend: &str, revision: Revision, sink: &Sink) -> Result<Summary, Error> {
    let state = read_all(store, STATE_PREFIX, revision).await?;
    let state_count = state.len() as u64;
    let header = Header {
        format: FORMAT.to_string(),
        version: VERSION,
        backend: backend.to_string(),
        revision,
        created: jiff::Timestamp::now().to_string(),
        state,
    };
    let mut out = Out {
        sink,
        buffer: Vec::with_capacity(CHUNK + (64 << 10)),
        digest: ring::digest::Context::new(&ring::digest::SHA256),
    };
    out.line(&Line::Header(header)).await?;
    let mut objects = 0u64;
    let mut start_after = None;
    loop {
        let options = page_after(revision, start_after.take());
        let page = store.list(OBJECT_PREFIX, options).await?;
        start_after = page.items.last().map(|kv| kv.key.clone());
        for kv in page.items {
            out.line(&Line::Object(Entry::new(kv.key, kv.revision, &kv.value))).await?;
            objects += 1;
        }
        if !page.more || start_after.is_none() {
            break;
        }
    }
    let sha256 = hex(out.digest.clone().finish().as_ref());
    let trailer = Out::encode(&Line::Trailer(Trailer { objects, sha256 }))?;
    out.buffer.extend_from_slice(&trailer);
    out.flush().await?;
    Ok(Summary { revision, objects, state: state_count })
}
