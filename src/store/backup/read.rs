//! Reading a backup file: `verify` reads it through once and refuses anything but a complete
//! backup of a format version this build knows (so a restore refuses before it touches a
//! store); `Objects` then reads its object lines back.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::{Entry, Error, FORMAT, Header, Line, OBJECT_PREFIX, STATE_PREFIX, VERSION, hex};

/// Longest line read (a value of etcd's largest request is far below it): a file that is not
/// a backup never makes the reader hold more.
const MAX_LINE: u64 = 1 << 30;

/// A backup file that passed `verify`.
#[derive(Debug, Clone)]
pub struct Verified {
    pub path: PathBuf,
    pub header: Header,
    pub objects: u64,
}

struct Lines {
    path: PathBuf,
    reader: BufReader<File>,
    number: u64,
}

impl Lines {
    fn open(path: &Path) -> Result<Lines, Error> {
        let file = File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        Ok(Lines { path: path.to_path_buf(), reader: BufReader::with_capacity(1 << 20, file), number: 0 })
    }

    /// The next whole line (with its newline), or `None` at the end of the file.
    fn next(&mut self) -> Result<Option<Vec<u8>>, Error> {
        let mut line = Vec::new();
        let read = (&mut self.reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::Io(format!("{}: {e}", self.path.display())))?;
        if read == 0 {
            return Ok(None);
        }
        self.number += 1;
        if line.last() != Some(&b'\n') {
            return Err(self.refused(format!(
                "line {} is cut short: the file is truncated (copy the whole file, or take the backup again)",
                self.number
            )));
        }
        Ok(Some(line))
    }

    fn refused(&self, why: String) -> Error {
        Error::Refused(format!("{}: {why}", self.path.display()))
    }

    fn parse(&self, line: &[u8]) -> Result<Line, Error> {
        crate::core::nesting::from_slice(line).map_err(|e| self.refused(format!("line {}: {e}", self.number)))
    }

    /// The header, after checking that this is a backup of a version this build reads.
    fn header(&mut self) -> Result<(Header, Vec<u8>), Error> {
        let Some(line) = self.next()? else {
            return Err(self.refused("the file is empty: not a crd-apiserver backup".into()));
        };
        let value: serde_json::Value = crate::core::nesting::from_slice(&line)
            .map_err(|_| self.refused("the first line is not JSON: not a crd-apiserver backup".into()))?;
        if value.get("type").and_then(|t| t.as_str()) != Some("header")
            || value.get("format").and_then(|f| f.as_str()) != Some(FORMAT)
        {
            return Err(self.refused(format!("the first line is not a {FORMAT} header: not a crd-apiserver backup")));
        }
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(version) if version > VERSION => {
                return Err(self.refused(format!(
                    "the backup is in format version {version}, newer than this crd-apiserver reads (version \
                     {VERSION} and older): restore it with the crd-apiserver release that wrote it, or a newer one"
                )));
            }
            Some(version) if version >= 1 => {}
            _ => return Err(self.refused("the header has no valid format version".into())),
        }
        let Line::Header(header) = self.parse(&line)? else {
            return Err(self.refused("the first line is not a header".into()));
        };
        for entry in &header.state {
            if !entry.key.starts_with(STATE_PREFIX) {
                return Err(self.refused(format!("the header's state holds {:?}, not a state record", entry.key)));
            }
            entry.bytes()?;
        }
        Ok((header, line))
    }
}

/// Reads the whole file and checks it: a header of a known format version, object lines with
/// objects' keys, and a trailer whose count and SHA-256 match what precedes it, at the very
/// end. Writes nothing anywhere.
pub fn verify(path: &Path) -> Result<Verified, Error> {
    let mut lines = Lines::open(path)?;
    let (header, first) = lines.header()?;
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    digest.update(&first);
    let mut objects = 0u64;
    loop {
        let Some(line) = lines.next()? else {
            return Err(lines.refused(format!(
                "the file ends after {objects} objects without its trailer line: it is truncated (copy the whole \
                 file, or take the backup again)"
            )));
        };
        match lines.parse(&line)? {
            Line::Object(entry) => {
                if !entry.key.starts_with(OBJECT_PREFIX) {
                    return Err(lines.refused(format!("line {}: {:?} is not an object's key", lines.number, entry.key)));
                }
                entry.bytes()?;
                digest.update(&line);
                objects += 1;
            }
            Line::Header(_) => return Err(lines.refused(format!("line {}: a second header", lines.number))),
            Line::Trailer(trailer) => {
                let sha256 = hex(digest.finish().as_ref());
                if trailer.objects != objects {
                    return Err(lines.refused(format!(
                        "the trailer counts {} objects but the file holds {objects}: the file is damaged",
                        trailer.objects
                    )));
                }
                if trailer.sha256 != sha256 {
                    return Err(lines.refused(format!(
                        "the checksum does not match (trailer {}, content {sha256}): the file is damaged",
                        trailer.sha256
                    )));
                }
                if lines.next()?.is_some() {
                    return Err(lines.refused("there are lines after the trailer".into()));
                }
                return Ok(Verified { path: path.to_path_buf(), header, objects });
            }
        }
    }
}

/// The object lines of a verified backup, in file order.
pub struct Objects {
    lines: Lines,
    done: bool,
}

impl Objects {
    pub fn open(verified: &Verified) -> Result<Objects, Error> {
        let mut lines = Lines::open(&verified.path)?;
        lines.header()?;
        Ok(Objects { lines, done: false })
    }
}

impl Iterator for Objects {
    type Item = Result<Entry, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let line = match self.lines.next() {
            Ok(Some(line)) => line,
            Ok(None) => {
                self.done = true;
                return Some(Err(self.lines.refused("the file changed since it was checked".into())));
            }
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        match self.lines.parse(&line) {
            Ok(Line::Object(entry)) => Some(Ok(entry)),
            Ok(Line::Trailer(_)) => {
                self.done = true;
                None
            }
            Ok(Line::Header(_)) => {
                self.done = true;
                Some(Err(self.lines.refused("the file changed since it was checked".into())))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
