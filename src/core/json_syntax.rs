//! JSON text as Go's `encoding/json` reads it, which is how kube-apiserver reads every body:
//! the same grammar, the same nesting limit ([`MAX_NESTING_DEPTH`]), the same words for what is
//! wrong (`unexpected end of JSON input`, `invalid character '}' looking for beginning of object
//! key string`), and strings taken as Go takes them: invalid UTF-8 and unpaired `\uD800`-style
//! surrogate escapes are not errors but U+FFFD ([`repair`]).
//!
//! serde_json accepts the same grammar, but words its errors its own way, stops at 128 levels,
//! and refuses what Go repairs; callers parse with serde_json and come here only when it
//! refuses, to learn what Go would have said.
//!
//! Owns the syntax check and the repair; parsing into values stays serde_json's.

use std::fmt;

/// The deepest nesting of objects and arrays Go's scanner accepts (`maxNestingDepth`).
pub const MAX_NESTING_DEPTH: usize = super::nesting::MAX_DEPTH;

/// A Go `*json.SyntaxError`: its message, as `err.Error()` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError(pub String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SyntaxError {}

/// What a valid text holds that serde_json would not take as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// A string holds invalid UTF-8 or an unpaired surrogate escape: [`repair`] it first.
    pub needs_repair: bool,
    /// Where the numbers too large for a float64 are: Go decodes them as an error
    /// (`json: cannot unmarshal number 1e999 into Go value of type float64`), serde_json refuses
    /// the whole text.
    pub overflowing_numbers: Vec<std::ops::Range<usize>>,
}

/// Where the scanner is (the states of Go's `scanner.step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits read.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside the literal `true`, `false` or `null`, at this byte of it.
    Literal(&'static [u8], u8),
}

/// What the innermost open container expects next (Go's `parseState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// Checks `bytes` as `json.Unmarshal` does before decoding (`checkValid`): one value, nothing
/// but white space around it, nested at most [`MAX_NESTING_DEPTH`] deep.
pub fn check(bytes: &[u8]) -> Result<Checked, SyntaxError> {
    let mut scanner = Scanner { state: State::BeginValue, open: Vec::new(), checked: Checked::default() };
    let mut string_start = 0;
    let mut number_start = 0;
    // Go feeds a space at the end, so that a number or literal in progress ends (or fails).
    for (i, &c) in bytes.iter().chain(std::iter::once(&b' ')).enumerate() {
        let (was_in_string, was_in_number) = (scanner.in_string(), scanner.in_number());
        scanner.step(c)?;
        match (was_in_string, scanner.in_string()) {
            (false, true) => string_start = i + 1,
            (true, false) if !scanner.checked.needs_repair => {
                let body = bytes.get(string_start..i).unwrap_or_default();
                scanner.checked.needs_repair = !string_is_go_clean(body);
            }
            _ => {}
        }
        match (was_in_number, scanner.in_number()) {
            (false, true) => number_start = i,
            (true, false) if overflows(bytes.get(number_start..i).unwrap_or_default()) => {
                scanner.checked.overflowing_numbers.push(number_start..i);
            }
            _ => {}
        }
    }
    if scanner.state == State::EndTop {
        Ok(scanner.checked)
    } else {
        Err(SyntaxError("unexpected end of JSON input".to_string()))
    }
}

struct Scanner {
    state: State,
    open: Vec<Open>,
    checked: Checked,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

impl Scanner {
    fn in_string(&self) -> bool {
        matches!(self.state, State::InString | State::InStringEsc | State::InStringEscU(_))
    }

    fn in_number(&self) -> bool {
        matches!(
            self.state,
            State::Neg | State::One | State::Zero | State::Dot | State::Dot0 | State::E | State::ESign | State::E0
        )
    }

    fn error(&self, c: u8, context: &str) -> SyntaxError {
        SyntaxError(format!("invalid character {} {context}", quote_char(c)))
    }

    fn push(&mut self, c: u8, open: Open, next: State) -> Result<(), SyntaxError> {
        self.open.push(open);
        if self.open.len() > MAX_NESTING_DEPTH {
            return Err(self.error(c, "exceeded max depth"));
        }
        self.state = next;
        Ok(())
    }

    fn pop(&mut self) {
        self.open.pop();
        self.state = if self.open.is_empty() { State::EndTop } else { State::EndValue };
    }

    fn step(&mut self, c: u8) -> Result<(), SyntaxError> {
        match self.state {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b']' {
                    return self.end_value(c);
                }
                self.begin_value(c)
            }
            State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b'}' {
                    if let Some(top) = self.open.last_mut() {
                        *top = Open::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => {
                if is_space(c) {
                    Ok(())
                } else {
                    Err(self.error(c, "after top-level value"))
                }
            }
            State::InString => {
                match c {
                    b'"' => self.state = State::EndValue,
                    b'\\' => self.state = State::InStringEsc,
                    c if c < 0x20 => return Err(self.error(c, "in string literal")),
                    _ => {}
                }
                Ok(())
            }
            State::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.state = State::InString;
                    Ok(())
                }
                b'u' => {
                    self.state = State::InStringEscU(0);
                    Ok(())
                }
                _ => Err(self.error(c, "in string escape code")),
            },
            State::InStringEscU(read) => {
                if !c.is_ascii_hexdigit() {
                    return Err(self.error(c, "in \\u hexadecimal character escape"));
                }
                self.state = if read == 3 { State::InString } else { State::InStringEscU(read + 1) };
                Ok(())
            }
            State::Neg => match c {
                b'0' => {
                    self.state = State::Zero;
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.state = State::One;
                    Ok(())
                }
                _ => Err(self.error(c, "in numeric literal")),
            },
            State::One => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.zero(c)
            }
            State::Zero => self.zero(c),
            State::Dot => {
                if c.is_ascii_digit() {
                    self.state = State::Dot0;
                    return Ok(());
                }
                Err(self.error(c, "after decimal point in numeric literal"))
            }
            State::Dot0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                if c == b'e' || c == b'E' {
                    self.state = State::E;
                    return Ok(());
                }
                self.end_value(c)
            }
            State::E => {
                if c == b'+' || c == b'-' {
                    self.state = State::ESign;
                    return Ok(());
                }
                self.e_sign(c)
            }
            State::ESign => self.e_sign(c),
            State::E0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.end_value(c)
            }
            State::Literal(word, at) => {
                let expected = word.get(usize::from(at)).copied().unwrap_or(b' ');
                if c != expected {
                    let name = std::str::from_utf8(word).unwrap_or_default();
                    let context = format!("in literal {name} (expecting {})", quote_char(expected));
                    return Err(self.error(c, &context));
                }
                self.state =
                    if usize::from(at) + 1 == word.len() { State::EndValue } else { State::Literal(word, at + 1) };
                Ok(())
            }
        }
    }

    fn begin_value(&mut self, c: u8) -> Result<(), SyntaxError> {
        if is_space(c) {
            return Ok(());
        }
        match c {
            b'{' => self.push(c, Open::ObjectKey, State::BeginStringOrEmpty),
            b'[' => self.push(c, Open::ArrayValue, State::BeginValueOrEmpty),
            b'"' => {
                self.state = State::InString;
                Ok(())
            }
            b'-' => {
                self.state = State::Neg;
                Ok(())
            }
            b'0' => {
                self.state = State::Zero;
                Ok(())
            }
            b'1'..=b'9' => {
                self.state = State::One;
                Ok(())
            }
            b't' => {
                self.state = State::Literal(b"true", 1);
                Ok(())
            }
            b'f' => {
                self.state = State::Literal(b"false", 1);
                Ok(())
            }
            b'n' => {
                self.state = State::Literal(b"null", 1);
                Ok(())
            }
            _ => Err(self.error(c, "looking for beginning of value")),
        }
    }

    fn begin_string(&mut self, c: u8) -> Result<(), SyntaxError> {
        if is_space(c) {
            return Ok(());
        }
        if c == b'"' {
            self.state = State::InString;
            return Ok(());
        }
        Err(self.error(c, "looking for beginning of object key string"))
    }

    fn end_value(&mut self, c: u8) -> Result<(), SyntaxError> {
        let Some(&top) = self.open.last() else {
            self.state = State::EndTop;
            return self.step(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Ok(());
        }
        match top {
            Open::ObjectKey => {
                if c == b':' {
                    if let Some(top) = self.open.last_mut() {
                        *top = Open::ObjectValue;
                    }
                    self.state = State::BeginValue;
                    return Ok(());
                }
                Err(self.error(c, "after object key"))
            }
            Open::ObjectValue => match c {
                b',' => {
                    if let Some(top) = self.open.last_mut() {
                        *top = Open::ObjectKey;
                    }
                    self.state = State::BeginString;
                    Ok(())
                }
                b'}' => {
                    self.pop();
                    Ok(())
                }
                _ => Err(self.error(c, "after object key:value pair")),
            },
            Open::ArrayValue => match c {
                b',' => {
                    self.state = State::BeginValue;
                    Ok(())
                }
                b']' => {
                    self.pop();
                    Ok(())
                }
                _ => Err(self.error(c, "after array element")),
            },
        }
    }

    fn zero(&mut self, c: u8) -> Result<(), SyntaxError> {
        match c {
            b'.' => {
                self.state = State::Dot;
                Ok(())
            }
            b'e' | b'E' => {
                self.state = State::E;
                Ok(())
            }
            _ => self.end_value(c),
        }
    }

    fn e_sign(&mut self, c: u8) -> Result<(), SyntaxError> {
        if c.is_ascii_digit() {
            self.state = State::E0;
            return Ok(());
        }
        Err(self.error(c, "in exponent of numeric literal"))
    }
}

/// A byte in single quotes as Go's scanner shows it (`quoteChar`): `'\''`, `'"'`, and
/// otherwise `strconv.Quote` of the byte taken as a character.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        // Go's `IsPrint` leaves out the no-break space and the soft hyphen too.
        0xA0 | 0xAD => format!("'\\u00{c:02x}'"),
        c => {
            let quoted = super::field::go_quote(&char::from(c).to_string());
            let inner = quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default();
            format!("'{inner}'")
        }
    }
}

/// Whether a string's raw body (between its quotes) decodes in Go exactly as serde_json decodes
/// it: valid UTF-8 and no unpaired surrogate escape.
fn string_is_go_clean(body: &[u8]) -> bool {
    if std::str::from_utf8(body).is_err() {
        return false;
    }
    let mut rest = body;
    while let Some(at) = rest.iter().position(|&b| b == b'\\') {
        let Some(&kind) = rest.get(at + 1) else { return true };
        if kind != b'u' {
            rest = rest.get(at + 2..).unwrap_or_default();
            continue;
        }
        let unit = hex4(rest.get(at + 2..at + 6));
        match unit {
            Some(0xD800..=0xDBFF) => {
                let next = rest.get(at + 6..at + 12);
                let low = next.filter(|n| n.starts_with(b"\\u")).and_then(|n| hex4(n.get(2..6)));
                if !matches!(low, Some(0xDC00..=0xDFFF)) {
                    return false;
                }
                rest = rest.get(at + 12..).unwrap_or_default();
            }
            Some(0xDC00..=0xDFFF) => return false,
            _ => rest = rest.get(at + 6..).unwrap_or_default(),
        }
    }
    true
}

/// Whether a number literal is one Go's decoder refuses: not an int64, and past a float64's
/// range (`strconv.ParseFloat` answers ±Inf with `ErrRange`; an underflow is only 0).
fn overflows(literal: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(literal) else { return false };
    text.parse::<i64>().is_err() && text.parse::<f64>().is_ok_and(f64::is_infinite)
}

fn hex4(digits: Option<&[u8]>) -> Option<u32> {
    let digits = std::str::from_utf8(digits?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// A [`check`]ed text as Go decodes it, in a form serde_json reads the same way: in strings,
/// each byte that does not begin a whole UTF-8 character, and each surrogate escape that is not
/// half of a pair, becomes U+FFFD (written as the character, or as `\ufffd` for an escape);
/// numbers too large for a float64 become `0` (the caller reports the first). Everything else
/// is copied as it is.
pub fn repair(bytes: &[u8], checked: &Checked) -> Vec<u8> {
    if checked.overflowing_numbers.is_empty() {
        return repair_strings(bytes);
    }
    let mut zeroed = Vec::with_capacity(bytes.len());
    let mut copied = 0;
    for number in &checked.overflowing_numbers {
        zeroed.extend_from_slice(bytes.get(copied..number.start).unwrap_or_default());
        zeroed.push(b'0');
        copied = number.end;
    }
    zeroed.extend_from_slice(bytes.get(copied..).unwrap_or_default());
    repair_strings(&zeroed)
}

fn repair_strings(bytes: &[u8]) -> Vec<u8> {
    const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let mut i = 0;
    let mut in_string = false;
    while let Some(&c) = bytes.get(i) {
        if !in_string {
            out.push(c);
            in_string = c == b'"';
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                out.push(c);
                in_string = false;
                i += 1;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'u') => {
                let unit = hex4(bytes.get(i + 2..i + 6));
                let low = match unit {
                    Some(0xD800..=0xDBFF) => bytes
                        .get(i + 6..i + 12)
                        .filter(|n| n.starts_with(b"\\u"))
                        .and_then(|n| hex4(n.get(2..6)))
                        .filter(|u| (0xDC00..=0xDFFF).contains(u)),
                    _ => None,
                };
                match (unit, low) {
                    (Some(0xD800..=0xDBFF), Some(_)) => {
                        out.extend_from_slice(bytes.get(i..i + 12).unwrap_or_default());
                        i += 12;
                    }
                    (Some(0xD800..=0xDFFF), _) => {
                        out.extend_from_slice(b"\\ufffd");
                        i += 6;
                    }
                    _ => {
                        out.extend_from_slice(bytes.get(i..i + 6).unwrap_or_default());
                        i += 6;
                    }
                }
            }
            b'\\' => {
                out.extend_from_slice(bytes.get(i..i + 2).unwrap_or_default());
                i += 2;
            }
            c if c < 0x80 => {
                out.push(c);
                i += 1;
            }
            _ => {
                let width = utf8_width(bytes.get(i..).unwrap_or_default());
                match width {
                    Some(n) => out.extend_from_slice(bytes.get(i..i + n).unwrap_or_default()),
                    None => out.extend_from_slice(REPLACEMENT),
                }
                i += width.unwrap_or(1);
            }
        }
    }
    out
}

/// Bytes as text the way Go writes a string holding them into JSON: each byte that does not
/// begin a whole UTF-8 character is U+FFFD.
pub fn lossy(bytes: &[u8]) -> String {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return text.to_string();
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    let mut i = 0;
    while let Some(&c) = bytes.get(i) {
        let width = if c < 0x80 { Some(1) } else { utf8_width(bytes.get(i..).unwrap_or_default()) };
        match width.and_then(|n| bytes.get(i..i + n)).and_then(|b| std::str::from_utf8(b).ok()) {
            Some(text) => out.push_str(text),
            None => out.push('\u{FFFD}'),
        }
        i += width.unwrap_or(1);
    }
    out
}

/// The length of the whole UTF-8 character `bytes` starts with, if they start with one
/// (Go's `utf8.DecodeRune`: otherwise one byte is taken, as U+FFFD).
fn utf8_width(bytes: &[u8]) -> Option<usize> {
    let lead = *bytes.first()?;
    let width = match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return None,
    };
    let candidate = bytes.get(..width)?;
    std::str::from_utf8(candidate).ok().map(|_| width)
}

#[cfg(test)]
mod tests;
