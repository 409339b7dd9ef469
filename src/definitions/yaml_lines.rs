//! The block-style YAML that generators write (controller-gen's, kubectl's, helm's: block
//! mappings and sequences, plain, quoted and literal scalars), read line by line into JSON
//! values.
//!
//! Even through [`super::yaml_subset`], a fresh start on the 2,065 upjet CRDs (102 MB) spent a
//! third of its CPU in the YAML scanner: a general scanner tracks simple keys, flow levels and
//! token queues for every character. Generated manifests need none of that, and reading them
//! line by line is several times faster. This reads only what it can read exactly as
//! serde-saphyr does, and gives the whole text back (`None`) at anything else: flow
//! collections other than `{}` and `[]`, folded and kept block scalars, indentation
//! indicators, escapes in double quotes, comments (other than whole lines at the margin
//! between documents), tabs, carriage returns, characters YAML does not print, multi-line
//! keys, scalars that start on the line after their key, and whatever
//! [`super::yaml_subset`] gives back too (tags, anchors, aliases, keys that are not strings,
//! duplicate keys, numbers other than plain decimal integers, texts near serde-saphyr's
//! budget). `parse_documents` then tries the subset, then serde-saphyr.
//!
//! Owns that line reader; never sees files or definitions.

use super::yaml_subset::{MAX_DEPTH, MAX_DOCUMENTS, MAX_NODES, MAX_TEXT_BYTES, plain};
use serde_json::{Map, Value};

/// The longest key YAML allows a simple (implicit) key to be, in characters; counted here in
/// bytes, which is stricter.
const MAX_KEY_BYTES: usize = 1024;

/// The documents of `text` (each document's root; empty documents left out), or `None` when
/// the text is not all in the forms this reads.
pub fn documents(text: &str) -> Option<Vec<Value>> {
    if text.len() > MAX_TEXT_BYTES || !printable(text) {
        return None;
    }
    let mut reader = Reader { lines: text.split('\n').collect(), at: 0, nodes: 0, depth: 0 };
    let mut documents = Vec::new();
    let mut markers = 0;
    while let Some(&line) = reader.lines.get(reader.at) {
        // Between documents: blank lines, comments at the margin, and `---` alone on its line.
        if line == "---" {
            markers += 1;
            if markers >= MAX_DOCUMENTS {
                return None;
            }
            reader.at += 1;
            continue;
        }
        if line.starts_with('#') || blank(line) {
            reader.at += 1;
            continue;
        }
        // A document's root: a collection at the margin, ended by `---` or the text's end.
        if indent(line) > 0 {
            return None;
        }
        documents.push(reader.collection(0)?);
        match reader.next_content()? {
            None => break,
            Some(_) if reader.rest(0)? == "---" => {}
            Some(_) => return None,
        }
    }
    (documents.len() < MAX_DOCUMENTS).then_some(documents)
}

/// Whether every character is one YAML prints and this reads: no tab, no carriage return, no
/// other control character, no byte-order mark or noncharacter.
fn printable(text: &str) -> bool {
    let bytes = text.as_bytes();
    // Most manifests are printable ASCII throughout: a branch-free pass over blocks of bytes
    // (which the compiler vectorizes) says so before the walk that reads other characters.
    let ascii = |&b: &u8| (b' '..=b'~').contains(&b) || b == b'\n';
    if bytes.chunks(64).all(|block| block.iter().fold(true, |all, b| all & ascii(b))) {
        return true;
    }
    bytes.iter().enumerate().all(|(i, &b)| match b {
        b'\n' | b' '..=b'~' => true,
        0..=0x1f | 0x7f => false,
        // U+0080..U+009F (C1 controls, NEL among them).
        0xc2 => !matches!(bytes.get(i + 1), Some(0x80..=0x9f)),
        // U+FEFF, U+FFFE, U+FFFF.
        0xef => {
            !matches!((bytes.get(i + 1), bytes.get(i + 2)), (Some(0xbb), Some(0xbf)) | (Some(0xbf), Some(0xbe..=0xbf)))
        }
        _ => true,
    })
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn blank(line: &str) -> bool {
    line.bytes().all(|b| b == b' ')
}

/// Whether a node's text at its column starts a block sequence's entry.
fn is_entry(content: &str) -> bool {
    content.starts_with("- ") || content.trim_end_matches(' ') == "-"
}

/// Where a block mapping entry's key ends (its `:`, followed by a space or the line's end), if
/// the text is one.
fn key_end(content: &str) -> Option<usize> {
    let bytes = content.as_bytes();
    let colon = |&i: &usize| bytes.get(i) == Some(&b':') && bytes.get(i + 1).is_none_or(|&next| next == b' ');
    (0..bytes.len()).find(colon)
}

/// Characters that start something other than a plain scalar (or may, depending on what
/// follows: `-`, `?` and `:` are handled where they can start one).
fn is_indicator(first: u8) -> bool {
    b"-?:,[]{}#&*!|>'\"%@`".contains(&first)
}

/// One line of a plain scalar: no `: ` or ` #` inside (they end it), no `:` at its end.
fn plain_line(text: &str) -> bool {
    let bytes = text.as_bytes();
    let ends = |i: usize| match bytes.get(i) {
        Some(b':') => bytes.get(i + 1).is_none_or(|&next| next == b' '),
        Some(b'#') => i > 0 && bytes.get(i - 1) == Some(&b' '),
        _ => false,
    };
    !(0..bytes.len()).any(ends)
}

struct Reader<'a> {
    lines: Vec<&'a str>,
    /// The line being read.
    at: usize,
    nodes: usize,
    depth: usize,
}

impl<'a> Reader<'a> {
    /// The current line from column `col` (`None` past its end, which the reader's callers never ask).
    fn rest(&self, col: usize) -> Option<&'a str> {
        self.lines.get(self.at)?.get(col..)
    }

    fn count(&mut self) -> Option<()> {
        self.nodes += 1;
        (self.nodes < MAX_NODES).then_some(())
    }

    /// Moves past blank lines to the next line with content and gives its indentation (`None`
    /// inside: the text's end). A comment gives the text back: what it ends depends on where
    /// it stands.
    fn next_content(&mut self) -> Option<Option<usize>> {
        while let Some(line) = self.lines.get(self.at) {
            let content = line.trim_start_matches(' ');
            if content.is_empty() {
                self.at += 1;
                continue;
            }
            if content.starts_with('#') {
                return None;
            }
            return Some(Some(line.len() - content.len()));
        }
        Some(None)
    }

    /// The block collection whose first entry starts at column `col` of the current line (its
    /// indentation, or past a sequence's `- `).
    fn collection(&mut self, col: usize) -> Option<Value> {
        self.count()?;
        self.depth += 1;
        if self.depth >= MAX_DEPTH {
            return None;
        }
        let content = self.rest(col)?;
        let value = if is_entry(content) {
            self.sequence(col)
        } else if key_end(content).is_some() {
            self.mapping(col)
        } else {
            None
        };
        self.depth -= 1;
        value
    }

    /// A block mapping whose keys stand at column `m`.
    fn mapping(&mut self, m: usize) -> Option<Value> {
        let mut fields = Map::new();
        loop {
            let content = self.rest(m)?;
            let end = key_end(content)?;
            let key = content.get(..end)?.trim_end_matches(' ');
            let first = *key.as_bytes().first()?;
            if key.len() > MAX_KEY_BYTES || is_indicator(first) || key.contains(" #") {
                return None;
            }
            // A key that is not a string, and the merge key, are serde-saphyr's to read.
            self.count()?;
            let key = match plain(key)? {
                Value::String(key) if key != "<<" => key,
                _ => return None,
            };
            let after = content.get(end + 1..)?;
            let col = m + end + 1 + (after.len() - after.trim_start_matches(' ').len());
            let value = self.value_after_key(col, m)?;
            // A key given twice: serde-saphyr's duplicate-key policy decides.
            if fields.insert(key, value).is_some() {
                return None;
            }
            match self.next_content()? {
                Some(next) if next == m => {
                    if self.rest(0)? == "---" {
                        break;
                    }
                    // The next key; anything else at this column is an error for the parser.
                }
                Some(next) if next > m => return None,
                _ => break,
            }
        }
        Some(Value::Object(fields))
    }

    /// The value of a key of the mapping at column `m`, which starts at column `col` of the
    /// key's line or, when nothing follows the key there, on the next lines.
    fn value_after_key(&mut self, col: usize, m: usize) -> Option<Value> {
        if !blank(self.rest(col)?) {
            return self.scalar(col, m);
        }
        self.at += 1;
        match self.next_content()? {
            Some(next) if next > m => self.collection(next),
            // A sequence may stand at its key's column.
            Some(next) if next == m && is_entry(self.rest(m)?) => self.collection(m),
            _ => {
                self.count()?;
                Some(Value::Null)
            }
        }
    }

    /// A block sequence whose `-` stand at column `s`.
    fn sequence(&mut self, s: usize) -> Option<Value> {
        let mut items = Vec::new();
        loop {
            let after = self.rest(s + 1)?;
            let col = s + 1 + (after.len() - after.trim_start_matches(' ').len());
            let rest = self.rest(col)?;
            let item = if rest.is_empty() {
                self.at += 1;
                match self.next_content()? {
                    Some(next) if next > s => self.collection(next)?,
                    _ => {
                        self.count()?;
                        Value::Null
                    }
                }
            } else if is_entry(rest) {
                // `- - a`: a compact nested sequence.
                return None;
            } else if key_end(rest).is_some() {
                self.collection(col)?
            } else {
                self.scalar(col, s)?
            };
            items.push(item);
            match self.next_content()? {
                Some(next) if next == s && is_entry(self.rest(s)?) => {}
                Some(next) if next > s => return None,
                _ => break,
            }
        }
        Some(Value::Array(items))
    }

    /// The scalar (or empty flow collection) that starts at column `col` of the current line,
    /// in a collection at column `n`: its further lines must be indented past `n`. Leaves the
    /// reader past its last line.
    fn scalar(&mut self, col: usize, n: usize) -> Option<Value> {
        self.count()?;
        let text = self.rest(col)?.trim_end_matches(' ');
        let value = match *text.as_bytes().first()? {
            b'|' => Value::String(self.literal(text, n)?),
            b'\'' => Value::String(self.quoted(col, n, b'\'')?),
            b'"' => Value::String(self.quoted(col, n, b'"')?),
            _ if text == "{}" => {
                self.at += 1;
                Value::Object(Map::new())
            }
            _ if text == "[]" => {
                self.at += 1;
                Value::Array(Vec::new())
            }
            b'-' if text.as_bytes().get(1).is_some_and(|&b| b != b' ') => self.plain_scalar(text, n)?,
            first if is_indicator(first) => return None,
            _ => self.plain_scalar(text, n)?,
        };
        Some(value)
    }

    /// A plain scalar from `first` (the rest of the current line), over the lines after it
    /// that are indented past `n`: folded, and typed as serde-saphyr types it.
    fn plain_scalar(&mut self, first: &str, n: usize) -> Option<Value> {
        if !plain_line(first) {
            return None;
        }
        self.at += 1;
        let mut folded: Option<String> = None;
        let mut breaks = 0;
        while let Some(line) = self.lines.get(self.at) {
            let content = line.trim_start_matches(' ');
            if content.is_empty() {
                breaks += 1;
                self.at += 1;
                continue;
            }
            if line.len() - content.len() <= n {
                break;
            }
            let content = content.trim_end_matches(' ');
            // A comment ends the scalar; a line that starts like an entry or a key is the
            // parser's to judge.
            let starts_like_indicator = content.starts_with('#')
                || ["- ", "? ", ": "].iter().any(|p| content.starts_with(p))
                || ["-", "?", ":"].contains(&content);
            if starts_like_indicator || !plain_line(content) {
                return None;
            }
            let text = folded.get_or_insert_with(|| first.to_string());
            fold(text, breaks);
            text.push_str(content);
            breaks = 0;
            self.at += 1;
        }
        plain(folded.as_deref().unwrap_or(first))
    }

    /// A single- or double-quoted scalar whose opening quote is at column `col` of the current
    /// line, over the lines it takes (indented past `n`), folded. Double quotes with an escape
    /// are given back.
    fn quoted(&mut self, col: usize, n: usize, quote: u8) -> Option<String> {
        let mut text = String::new();
        let mut line = self.rest(col + 1)?;
        let mut first_line = true;
        loop {
            let bytes = line.as_bytes();
            let mut start = 0;
            let mut i = 0;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'\\' if quote == b'"' => return None,
                    b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => {
                        text.push_str(line.get(start..=i)?);
                        i += 2;
                        start = i;
                    }
                    _ if b == quote => {
                        // Whether a closing quote alone on a further line would add the fold's
                        // space is left to the parser.
                        if i == 0 && !first_line {
                            return None;
                        }
                        text.push_str(line.get(start..i)?);
                        self.at += 1;
                        return blank(line.get(i + 1..)?).then_some(text);
                    }
                    _ => i += 1,
                }
            }
            let segment = line.get(start..)?.trim_end_matches(' ');
            // What an opening quote alone at its line's end folds into is left to the parser.
            if first_line && text.is_empty() && segment.is_empty() {
                return None;
            }
            text.push_str(segment);
            // The next lines: blank ones are kept as line breaks, the one after is folded in.
            let mut breaks = 0;
            loop {
                self.at += 1;
                let next = self.lines.get(self.at)?;
                let content = next.trim_start_matches(' ');
                if content.is_empty() {
                    breaks += 1;
                    continue;
                }
                if next.len() - content.len() <= n {
                    return None;
                }
                fold(&mut text, breaks);
                line = content;
                break;
            }
            first_line = false;
        }
    }

    /// A literal block scalar (`|` or `|-`) after its header `header` on the current line, in
    /// a collection at column `n`: its lines as they are, less their common indentation.
    fn literal(&mut self, header: &str, n: usize) -> Option<String> {
        let strip = match header {
            "|" => false,
            "|-" => true,
            // Folded and kept scalars, indentation indicators, comments after the header.
            _ => return None,
        };
        self.at += 1;
        let mut text = String::new();
        let mut content_indent: Option<usize> = None;
        let mut leading_blank_indent = 0;
        let mut breaks = 0;
        while let Some(line) = self.lines.get(self.at) {
            let content = line.trim_start_matches(' ');
            let indent = line.len() - content.len();
            if content.is_empty() {
                match content_indent {
                    None => leading_blank_indent = leading_blank_indent.max(indent),
                    // Spaces past the indentation on a blank line are the scalar's content,
                    // which the chomping rules treat apart: the parser's to read.
                    Some(m) if indent > m => return None,
                    Some(_) => {}
                }
                breaks += 1;
                self.at += 1;
                continue;
            }
            let m = match content_indent {
                Some(m) if indent >= m => m,
                Some(_) => break,
                None if indent > n => {
                    if leading_blank_indent > indent {
                        return None;
                    }
                    *content_indent.insert(indent)
                }
                None => break,
            };
            for _ in 0..breaks {
                text.push('\n');
            }
            breaks = 0;
            text.push_str(&line[m..]);
            text.push('\n');
            self.at += 1;
        }
        // Blank lines at the end are not kept; `|` keeps the last line break, `|-` does not.
        if strip {
            text.pop();
        }
        Some(text)
    }
}

/// Joins the next line of a folded scalar: a space for a single line break, or one line
/// break for each blank line between.
fn fold(text: &mut String, breaks: usize) {
    if breaks == 0 {
        text.push(' ');
    } else {
        for _ in 0..breaks {
            text.push('\n');
        }
    }
}

#[cfg(test)]
mod tests;
