//! Stored objects served from their stored bytes. The general read path
//! (`present::from_storage`) parses every object, coerces and defaults it with the schema of the
//! version it is stored in, stamps its `resourceVersion`, converts it, and writes it again. For
//! nearly every object all of that changes nothing but the `resourceVersion`: the write path
//! did the same work before storing it. This module proves it per object, in one pass over the
//! bytes without building a value, and then writes the stored bytes with `resourceVersion`
//! spliced into `metadata` — the same bytes the general path produces.
//!
//! The proof mirrors, step by step, `schema::coerce` (ObjectMeta round trip, pruning, non-nullable
//! `null`s), the generation repair and `schema::default`, and `conversion` (only when the stored
//! version is the requested one); `scan` proves the text is in serde_json's own form. Whatever
//! it cannot prove is refused, and the caller takes the general path. `tests` runs both paths
//! on the same objects.
//!
//! Owns no request semantics: callers decide when a plain JSON object is what is asked for.

mod metadata;
pub mod scan;
#[cfg(test)]
mod tests;

use std::io::Write as _;
use std::sync::Arc;

use bytes::Bytes;

use scan::{Kind, MAX_DEPTH, Reader, Refused, Scan};

use crate::definitions::{Definition, Version};
use crate::schema::Schema;
use crate::schema::node::Cursor;

/// Appends the object stored as `stored` at `revision`, as the general read path renders it
/// in `version` (JSON), to `out`, when the stored bytes prove that path would change nothing
/// but `metadata.resourceVersion`. Returns false (and leaves `out` as it was) otherwise.
pub fn render(definition: &Definition, version: &Version, stored: &[u8], revision: u64, out: &mut Vec<u8>) -> bool {
    let rendered = prove_and_splice(definition, version, stored, revision, out);
    crate::metrics::verbatim(rendered);
    rendered
}

fn prove_and_splice(
    definition: &Definition,
    version: &Version,
    stored: &[u8],
    revision: u64,
    out: &mut Vec<u8>,
) -> bool {
    prove(definition, version, stored).is_some_and(|splice| splice.write(stored, revision, out))
}

/// Where `resourceVersion` goes in `stored`, when the stored bytes prove the general path
/// would change nothing else.
fn prove(definition: &Definition, version: &Version, stored: &[u8]) -> Option<Splice> {
    // The general path reads with the schema of the version named in the object; the proof
    // requires that version to be the requested one, so that conversion changes nothing.
    let schema = definition.version(&version.name).and_then(|v| v.schema().map(Arc::as_ref))?;
    let text = std::str::from_utf8(stored).ok()?;
    let mut reader = Reader::new(text);
    object(&mut reader, &definition.group, &version.name, schema).ok().map(|(splice, _)| splice)
}

/// An object rendered as `render` writes it, in three pieces: the stored bytes before the
/// spliced `resourceVersion`, the splice itself, and the stored bytes after it. The stored
/// pieces are slices of `stored` (no copy), so that what holds a rendered object — a watch
/// whose connection has not written it yet — holds the store's bytes, not its own.
pub struct Shared {
    pub head: Bytes,
    pub splice: Vec<u8>,
    pub tail: Bytes,
}

/// `render`, as pieces sharing `stored`; `None` when the general path must render it.
pub fn render_shared(definition: &Definition, version: &Version, stored: &Bytes, revision: u64) -> Option<Shared> {
    let shared = prove(definition, version, stored).and_then(|splice| {
        let (head_end, tail_start) = splice.around(stored.len())?;
        let mut middle = Vec::with_capacity(SPLICE_BYTES);
        splice.write_splice(revision, &mut middle);
        Some(Shared { head: stored.slice(..head_end), splice: middle, tail: stored.slice(tail_start..) })
    });
    crate::metrics::verbatim(shared.is_some());
    shared
}

/// An object stored in version `from`, rewritten into version `to` by the `None` conversion as
/// the storage-version migrator's general path writes it (`lifecycle::migrate::rewrite`: read
/// with `from`'s schema, `apiVersion` set to `to`, pruned with `to`'s schema, stored without
/// `resourceVersion`), when the stored bytes prove that path changes nothing but `apiVersion`:
/// the stored bytes with `to`'s `apiVersion` in place of `from`'s. `None` when that is not
/// proven (the caller takes the general path). The definition's conversion must be `None`:
/// the caller checks.
pub fn with_api_version(definition: &Definition, from: &Version, to: &Version, stored: &[u8]) -> Option<Vec<u8>> {
    let (Some(read_schema), Some(prune_schema)) = (from.schema(), to.schema()) else {
        return None;
    };
    let text = std::str::from_utf8(stored).ok()?;
    let group = &definition.group;
    // Read as stored: unchanged by coercion, the generation repair and `from`'s defaults.
    let (splice, api_version) = object(&mut Reader::new(text), group, &from.name, read_schema).ok()?;
    // Then pruned with `to`'s schema (apiVersion plays no part in it): unchanged too. Both
    // compiled from the same text, the schemas prune alike.
    if !from.same_schema(to) {
        object(&mut Reader::new(text), group, &from.name, prune_schema).ok()?;
    }
    // A stored resourceVersion would be removed: left to the general path.
    if !matches!(splice, Splice::Insert { .. }) {
        return None;
    }
    let (head, tail) = (stored.get(..api_version.start)?, stored.get(api_version.end..)?);
    // Group and version names are DNS names: written by serde_json without escapes.
    let mut out = Vec::with_capacity(stored.len() + to.name.len());
    out.extend_from_slice(head);
    out.extend_from_slice(group.as_bytes());
    out.push(b'/');
    out.extend_from_slice(to.name.as_bytes());
    out.extend_from_slice(tail);
    Some(out)
}

/// The most an object grows by when rendered from its stored bytes: `,"resourceVersion":"N"`
/// with the largest revision, and a comma. Callers size their buffers with it.
pub const SPLICE_BYTES: usize = 48;

/// Where `resourceVersion` goes in the stored text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Splice {
    /// Inserted at this offset; with a comma before it (after an earlier member) or after it
    /// (before the first member).
    Insert { at: usize, comma_before: bool },
    /// The stored value at `start..end` replaced.
    Replace { start: usize, end: usize },
}

impl Splice {
    /// Where the stored bytes before the splice end and those after it begin, in a text of
    /// `len` bytes; `None` when that text is not the one the splice was found in.
    fn around(self, len: usize) -> Option<(usize, usize)> {
        let (head_end, tail_start) = match self {
            Splice::Insert { at, .. } => (at, at),
            Splice::Replace { start, end } => (start, end),
        };
        (head_end <= tail_start && tail_start <= len).then_some((head_end, tail_start))
    }

    fn write(self, stored: &[u8], revision: u64, out: &mut Vec<u8>) -> bool {
        let Some((head_end, tail_start)) = self.around(stored.len()) else { return false };
        let (Some(head), Some(tail)) = (stored.get(..head_end), stored.get(tail_start..)) else { return false };
        out.reserve(stored.len() + SPLICE_BYTES);
        out.extend_from_slice(head);
        self.write_splice(revision, out);
        out.extend_from_slice(tail);
        true
    }

    /// What goes between the stored bytes before and after the splice.
    fn write_splice(self, revision: u64, out: &mut Vec<u8>) {
        let (inserted, comma_before, comma_after) = match self {
            Splice::Insert { comma_before, .. } => (true, comma_before, !comma_before),
            Splice::Replace { .. } => (false, false, false),
        };
        if inserted {
            if comma_before {
                out.push(b',');
            }
            out.extend_from_slice(b"\"resourceVersion\":");
        }
        out.push(b'"');
        // Digits straight into `out`: no string per object.
        let _ = write!(out, "{revision}");
        out.push(b'"');
        if comma_after {
            out.push(b',');
        }
    }
}

/// The root object: `apiVersion` must name the requested version, `metadata` must survive the
/// ObjectMeta round trip unchanged, every other member must survive pruning and defaulting.
/// Returns where `resourceVersion` goes and where the `apiVersion` string's contents are.
fn object(
    reader: &mut Reader<'_>,
    group: &str,
    version: &str,
    schema: &Schema,
) -> Scan<(Splice, std::ops::Range<usize>)> {
    // Embedded resources have their own metadata rules; a declared `metadata` with defaults
    // would be defaulted. Both are rare: left to the general path.
    if schema.has_embedded || schema.properties.get("metadata").is_some_and(|m| m.has_defaults) {
        return Err(Refused);
    }
    let mut members = reader.begin_object()?;
    let mut defaults = Defaults::of(schema);
    let mut properties = Cursor::new(&schema.properties);
    let mut api_version = None;
    let mut splice = None;
    while let Some(key) = reader.next_key(&mut members)? {
        defaults.saw(key)?;
        match key {
            "apiVersion" => {
                // After the opening quote; the string ends before the closing one.
                let start = reader.pos() + 1;
                let text = reader.string()?.plain().ok_or(Refused)?;
                let named = text.strip_prefix(group).and_then(|rest| rest.strip_prefix('/'));
                api_version = (named == Some(version)).then(|| start..start + text.len());
            }
            "kind" => {
                reader.string()?;
            }
            "metadata" => splice = Some(metadata::check(reader)?),
            _ => member(reader, schema, schema.preserve_unknown_fields, key, &mut properties, 1)?,
        }
    }
    defaults.finish()?;
    match (splice, api_version) {
        (Some(splice), Some(api_version)) if reader.at_end() => Ok((splice, api_version)),
        _ => Err(Refused),
    }
}

/// One member of an object read with schema `s` (`preserving`: below
/// x-kubernetes-preserve-unknown-fields), as pruning, null pruning and defaulting treat it.
fn member(
    reader: &mut Reader<'_>,
    s: &Schema,
    preserving: bool,
    key: &str,
    properties: &mut Cursor<'_>,
    depth: usize,
) -> Scan<()> {
    let child = match (properties.get(key), &s.additional_properties) {
        (Some(property), _) => Some(property),
        (None, Some(_)) => s.additional_schema(),
        // Kept and never looked at below x-kubernetes-preserve-unknown-fields.
        (None, None) if preserving => return reader.any(depth),
        // Pruned.
        (None, None) => return Err(Refused),
    };
    if reader.kind()? == Kind::Null {
        // Dropped, or replaced by the default, unless the schema allows null.
        if child.is_some_and(|c| !c.nullable) {
            return Err(Refused);
        }
        return reader.null();
    }
    value(reader, child, depth)
}

/// A value that pruning walks with schema `s` (`prune_node`).
fn value(reader: &mut Reader<'_>, s: Option<&Schema>, depth: usize) -> Scan<()> {
    if depth > MAX_DEPTH {
        return Err(Refused);
    }
    match s {
        None => unspecified(reader, depth),
        Some(s) => structured(reader, s, s.preserve_unknown_fields, depth),
    }
}

/// A value with a schema: members must be specified (unless `preserving`), defaults present,
/// non-nullable members not null.
fn structured(reader: &mut Reader<'_>, s: &Schema, preserving: bool, depth: usize) -> Scan<()> {
    match reader.kind()? {
        Kind::Object => {
            let mut members = reader.begin_object()?;
            let mut defaults = Defaults::of(s);
            let mut properties = Cursor::new(&s.properties);
            while let Some(key) = reader.next_key(&mut members)? {
                defaults.saw(key)?;
                member(reader, s, preserving, key, &mut properties, depth + 1)?;
            }
            defaults.finish()
        }
        Kind::Array => {
            let item_schema = s.items();
            let mut items = reader.begin_array()?;
            while reader.next_item(&mut items)? {
                if reader.kind()? == Kind::Null {
                    // Replaced by the items' default.
                    if item_schema.is_some_and(|i| !i.nullable && i.default.is_some()) {
                        return Err(Refused);
                    }
                    reader.null()?;
                    continue;
                }
                match (preserving, item_schema) {
                    (false, item_schema) => value(reader, item_schema, depth + 1)?,
                    // Items below x-kubernetes-preserve-unknown-fields keep unknown members.
                    (true, Some(i)) if depth < MAX_DEPTH => structured(reader, i, true, depth + 1)?,
                    (true, Some(_)) => return Err(Refused),
                    (true, None) => reader.any(depth + 1)?,
                }
            }
            Ok(())
        }
        _ => reader.any(depth),
    }
}

/// A value pruning walks without a schema: objects lose every member, so only empty ones
/// stay as they are.
fn unspecified(reader: &mut Reader<'_>, depth: usize) -> Scan<()> {
    match reader.kind()? {
        Kind::Object => {
            let mut members = reader.begin_object()?;
            match reader.next_key(&mut members)? {
                None => Ok(()),
                Some(_) => Err(Refused),
            }
        }
        Kind::Array => {
            let mut items = reader.begin_array()?;
            while reader.next_item(&mut items)? {
                if depth >= MAX_DEPTH {
                    return Err(Refused);
                }
                unspecified(reader, depth + 1)?;
            }
            Ok(())
        }
        _ => reader.any(depth),
    }
}

/// The properties of an object schema that have a default, checked off as the object's keys
/// go by (both in ascending order): a missing one would be defaulted.
struct Defaults<'s> {
    /// Properties not passed yet; empty when no property below has a default.
    pending: &'s [(String, Schema)],
}

impl<'s> Defaults<'s> {
    fn of(s: &'s Schema) -> Defaults<'s> {
        Defaults { pending: if s.has_defaults { s.properties.as_slice() } else { &[] } }
    }

    fn saw(&mut self, key: &str) -> Scan<()> {
        while let Some(((name, property), rest)) = self.pending.split_first() {
            match name.as_str().cmp(key) {
                std::cmp::Ordering::Less if property.default.is_some() => return Err(Refused),
                std::cmp::Ordering::Less | std::cmp::Ordering::Equal => self.pending = rest,
                std::cmp::Ordering::Greater => break,
            }
        }
        Ok(())
    }

    fn finish(self) -> Scan<()> {
        if self.pending.iter().any(|(_, p)| p.default.is_some()) { Err(Refused) } else { Ok(()) }
    }
}
