//! The YAML that definition manifests are written in (controller-gen's, kubectl's and helm's
//! output: block and flow collections under string keys, untagged scalars), read straight from
//! the parser's events into JSON values.
//!
//! serde-saphyr reads the same text through its general deserializer, which moves every event
//! through several layers (comments, spans, budgets, key capture): on the 2,065 upjet CRDs
//! (102 MB) that was half of a fresh start's CPU, twice what the parser alone takes. This reads
//! only what it reads exactly as serde-saphyr does (`parse_documents`' fallback) and gives
//! everything else back whole (`None`): tags, anchors, aliases, merge keys, keys that are not
//! strings, duplicate keys, `%YAML` directives, YAML 1.1 booleans other than true and false,
//! numbers other than plain decimal integers, any parse error (so that serde-saphyr words it),
//! and texts that come near serde-saphyr's budget (depth, nodes, events, documents, bytes).
//!
//! Owns that subset and its typing of plain scalars; never sees files or definitions.

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Value};

/// Limits under serde-saphyr's default budget (depth 64, 250,000 nodes, 1,000,000 events,
/// 1,024 documents, 64 MiB of scalars, 256 MiB of input): a text that reaches one is given
/// back, so that serde-saphyr accepts or refuses it as it always did.
pub(super) const MAX_DEPTH: usize = 60;
pub(super) const MAX_NODES: usize = 200_000;
const MAX_EVENTS: usize = 800_000;
pub(super) const MAX_DOCUMENTS: usize = 1_000;
pub(super) const MAX_TEXT_BYTES: usize = 32 << 20;

/// The parser settings serde-saphyr reads with by default (its budget's lookahead and flow
/// nesting, its block nesting floor, no comments, lenient indentation).
fn parser_options() -> granit_parser::Options {
    let block_nesting_limit = granit_parser::Options::default().block_nesting_limit.max(65);
    granit_parser::options! {
        simple_key_max_lookahead: 1024,
        flow_nesting_limit: 255,
        block_nesting_limit: block_nesting_limit,
        emit_comments: false,
        strict_indentation: false,
    }
}

/// The documents of `text` (each document's root; empty documents left out), or `None` when
/// the text is not all in the subset and serde-saphyr must read it.
pub fn documents(text: &str) -> Option<Vec<Value>> {
    if text.len() > MAX_TEXT_BYTES {
        return None;
    }
    let mut reader = Reader::default();
    for (events, event) in Parser::new_from_str_with_options(text, parser_options()).enumerate() {
        let (event, _span) = event.ok()?;
        if events >= MAX_EVENTS {
            return None;
        }
        reader.take(event)?;
    }
    Some(reader.documents)
}

/// A collection being read.
enum Open {
    /// A mapping, and the key whose value comes next.
    Mapping(Map<String, Value>, Option<String>),
    Sequence(Vec<Value>),
}

#[derive(Default)]
struct Reader {
    open: Vec<Open>,
    documents: Vec<Value>,
    nodes: usize,
}

impl Reader {
    /// Takes one event; `None` when it is outside the subset.
    fn take(&mut self, event: Event<'_>) -> Option<()> {
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => Some(()),
            Event::DocumentStart(_, None) => (self.documents.len() < MAX_DOCUMENTS).then_some(()),
            Event::MappingStart(_, 0, None) => self.open(Open::Mapping(Map::new(), None)),
            Event::SequenceStart(_, 0, None) => self.open(Open::Sequence(Vec::new())),
            Event::MappingEnd => match self.open.pop()? {
                Open::Mapping(fields, None) => self.place(Value::Object(fields)),
                _ => None,
            },
            Event::SequenceEnd => match self.open.pop()? {
                Open::Sequence(items) => self.place(Value::Array(items)),
                Open::Mapping(..) => None,
            },
            Event::Scalar(text, style, 0, None) => {
                self.count()?;
                if let Some(Open::Mapping(_, key @ None)) = self.open.last_mut() {
                    *key = Some(key_text(text, style)?);
                    return Some(());
                }
                let value = match style {
                    ScalarStyle::Plain => plain(&text)?,
                    _ => Value::String(text.into_owned()),
                };
                self.place(value)
            }
            // Anchors, aliases, tags, comments, directives: serde-saphyr's to read.
            _ => None,
        }
    }

    fn count(&mut self) -> Option<()> {
        self.nodes += 1;
        (self.nodes < MAX_NODES).then_some(())
    }

    /// Opens a collection, which must not be a mapping's key.
    fn open(&mut self, collection: Open) -> Option<()> {
        self.count()?;
        if matches!(self.open.last(), Some(Open::Mapping(_, None))) || self.open.len() >= MAX_DEPTH {
            return None;
        }
        self.open.push(collection);
        Some(())
    }

    /// Puts a finished node where it belongs: its mapping's value, its sequence's next item,
    /// or a document's root.
    fn place(&mut self, value: Value) -> Option<()> {
        match self.open.last_mut() {
            None => {
                // An empty document's root is null, which a manifest's reader skips as well.
                if !value.is_null() {
                    self.documents.push(value);
                }
            }
            Some(Open::Mapping(fields, key)) => {
                // A key given twice: serde-saphyr's duplicate-key policy decides.
                if fields.insert(key.take()?, value).is_some() {
                    return None;
                }
            }
            Some(Open::Sequence(items)) => items.push(value),
        }
        Some(())
    }
}

/// A mapping key: a scalar that is a string as serde-saphyr types it, and not the merge key.
fn key_text(text: std::borrow::Cow<'_, str>, style: ScalarStyle) -> Option<String> {
    match style {
        ScalarStyle::Plain => match plain(&text)? {
            Value::String(name) if name != "<<" => Some(name),
            _ => None,
        },
        _ => Some(text.into_owned()),
    }
}

/// An untagged plain scalar's value as serde-saphyr types it into a JSON value (null, then
/// YAML 1.1 booleans, then integers, then floats, else a string), for the forms this reads:
/// `None` for other YAML 1.1 booleans (`yes`, `off`...) and for anything that starts as a
/// number does but is not a plain decimal integer (floats, `0x1F`, `017`, `1_000`, `+1`).
pub(super) fn plain(text: &str) -> Option<Value> {
    // Every word typed below has five letters or fewer, and numbers do not start with a letter:
    // a longer text that does (most keys and words of a manifest) is a string.
    if text.len() > 5 && text.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Some(Value::String(text.to_string()));
    }
    if text.is_empty() || text == "~" || text.eq_ignore_ascii_case("null") {
        return Some(Value::Null);
    }
    if text.eq_ignore_ascii_case("true") {
        return Some(Value::Bool(true));
    }
    if text.eq_ignore_ascii_case("false") {
        return Some(Value::Bool(false));
    }
    if ["y", "yes", "on", "n", "no", "off"].iter().any(|word| text.eq_ignore_ascii_case(word)) {
        return None;
    }
    // Integers and floats start with a digit, or a `.` and a digit, after an optional sign; so
    // do YAML's `.inf` and `.nan` (Rust's `inf` and `nan` are strings to serde-saphyr).
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let digit = |rest: &str| rest.starts_with(|c: char| c.is_ascii_digit());
    let number = digit(unsigned)
        || unsigned
            .strip_prefix('.')
            .is_some_and(|rest| digit(rest) || rest.eq_ignore_ascii_case("inf") || rest.eq_ignore_ascii_case("nan"));
    if number {
        return decimal_integer(text);
    }
    // A sign before anything but a letter is left to serde-saphyr (`-`, `+.`).
    if unsigned.len() < text.len() && !unsigned.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    Some(Value::String(text.to_string()))
}

/// `0`, or an optional `-` and digits without a leading zero, within 64 bits.
fn decimal_integer(text: &str) -> Option<Value> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    if !plain || (digits.starts_with('0') && digits.len() > 1) || (digits == "0" && digits.len() != text.len()) {
        return None;
    }
    if text.starts_with('-') {
        text.parse::<i64>().ok().map(Value::from)
    } else {
        text.parse::<u64>().ok().map(Value::from)
    }
}

#[cfg(test)]
pub(super) mod tests;
