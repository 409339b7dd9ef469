//! A reader of JSON text in the exact form `serde_json` writes a `Value`: compact, object keys
//! in strictly ascending byte order, escapes and numbers as its writer produces them. Every
//! object this server stores was written that way, and text in this form comes back byte for
//! byte when it is parsed into a `Value` and written again. Text in any other form is
//! refused ([`Refused`]): the caller then takes the general path, which accepts any JSON.
//!
//! Owns the JSON grammar only; what the values mean is the caller's.

/// The text is not in the form this reader proves things about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused;

pub type Scan<T> = Result<T, Refused>;

/// Values nested deeper than this are refused (serde_json itself stops at 128).
pub const MAX_DEPTH: usize = 100;

/// The kind of the next value, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

/// A number, as `serde_json::Value` would hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Number {
    /// An integer that fits `i64`.
    Signed(i64),
    /// A positive integer above `i64::MAX`.
    Unsigned(u64),
    /// Anything with a fraction or an exponent.
    Float,
}

/// A string's contents as written between the quotes.
#[derive(Debug, Clone, Copy)]
pub struct Text<'a> {
    pub raw: &'a str,
    pub escaped: bool,
}

impl<'a> Text<'a> {
    /// The string itself, when it needed no escapes.
    pub fn plain(&self) -> Option<&'a str> {
        (!self.escaped).then_some(self.raw)
    }
}

/// Where the members of an object are, one key at a time.
#[derive(Debug, Default)]
pub struct Members<'a> {
    previous: Option<&'a str>,
}

/// Where the items of an array are.
#[derive(Debug, Default)]
pub struct Items {
    started: bool,
}

pub struct Reader<'a> {
    /// The text, checked to be UTF-8 once, so that strings need no check of their own.
    source: &'a str,
    text: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(source: &'a str) -> Reader<'a> {
        Reader { source, text: source.as_bytes(), pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn at_end(&self) -> bool {
        self.pos == self.text.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> Scan<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Refused)
        }
    }

    /// The kind of the value that starts here.
    pub fn kind(&self) -> Scan<Kind> {
        match self.peek() {
            Some(b'{') => Ok(Kind::Object),
            Some(b'[') => Ok(Kind::Array),
            Some(b'"') => Ok(Kind::String),
            Some(b'-' | b'0'..=b'9') => Ok(Kind::Number),
            Some(b't' | b'f') => Ok(Kind::Bool),
            Some(b'n') => Ok(Kind::Null),
            _ => Err(Refused),
        }
    }

    pub fn begin_object(&mut self) -> Scan<Members<'a>> {
        self.eat(b'{')?;
        Ok(Members::default())
    }

    /// The next key of an object (its value follows), or `None` after the closing brace.
    pub fn next_key(&mut self, members: &mut Members<'a>) -> Scan<Option<&'a str>> {
        match (self.peek(), members.previous) {
            (Some(b'}'), _) => {
                self.pos += 1;
                return Ok(None);
            }
            (Some(b','), Some(_)) => self.pos += 1,
            (_, Some(_)) => return Err(Refused),
            (_, None) => {}
        }
        // Keys with escapes would sort by their decoded bytes; they are rare enough to refuse.
        let key = self.string()?.plain().ok_or(Refused)?;
        if members.previous.is_some_and(|previous| previous >= key) {
            return Err(Refused);
        }
        self.eat(b':')?;
        members.previous = Some(key);
        Ok(Some(key))
    }

    pub fn begin_array(&mut self) -> Scan<Items> {
        self.eat(b'[')?;
        Ok(Items::default())
    }

    /// Whether another item follows (it starts here); false after the closing bracket.
    pub fn next_item(&mut self, items: &mut Items) -> Scan<bool> {
        match (self.peek(), items.started) {
            (Some(b']'), _) => {
                self.pos += 1;
                return Ok(false);
            }
            (Some(b','), true) => self.pos += 1,
            (_, true) => return Err(Refused),
            (_, false) => {}
        }
        items.started = true;
        Ok(true)
    }

    /// A string, with the escapes serde_json writes and no others.
    pub fn string(&mut self) -> Scan<Text<'a>> {
        self.eat(b'"')?;
        let start = self.pos;
        let mut escaped = false;
        loop {
            let rest = self.text.get(self.pos..).ok_or(Refused)?;
            self.pos += plain_run(rest).ok_or(Refused)?;
            match self.peek() {
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    self.escape()?;
                }
                _ => return Err(Refused),
            }
        }
        let raw = self.source.get(start..self.pos).ok_or(Refused)?;
        self.pos += 1;
        Ok(Text { raw, escaped })
    }

    /// One escape sequence: `\"`, `\\`, the short control escapes, or `\u00xx` (lower-case
    /// hex) for the other control characters.
    fn escape(&mut self) -> Scan<()> {
        self.pos += 1;
        match self.peek().ok_or(Refused)? {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.pos += 1;
                Ok(())
            }
            b'u' => {
                let digits = self.text.get(self.pos + 1..self.pos + 5).ok_or(Refused)?;
                let hex = |d: u8| match d {
                    b'0'..=b'9' => Some(d - b'0'),
                    b'a'..=b'f' => Some(d - b'a' + 10),
                    _ => None,
                };
                let value = match digits {
                    [b'0', b'0', high, low] => hex(*high).zip(hex(*low)).map(|(h, l)| h * 16 + l),
                    _ => None,
                };
                match value {
                    Some(v) if v < 0x20 && !matches!(v, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) => {
                        self.pos += 5;
                        Ok(())
                    }
                    _ => Err(Refused),
                }
            }
            _ => Err(Refused),
        }
    }

    /// A number; integers must be in the form and range serde_json keeps as integers, other
    /// numbers must be written as serde_json writes the `f64` they parse to.
    pub fn number(&mut self) -> Scan<Number> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let digits_start = self.pos;
        self.digits()?;
        let integer = self.text.get(digits_start..self.pos).ok_or(Refused)?;
        if integer.len() > 1 && integer.first() == Some(&b'0') {
            return Err(Refused);
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.digits()?;
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.digits()?;
            float = true;
        }
        let token = self.text.get(start..self.pos).ok_or(Refused)?;
        if float {
            return canonical_float(token).then_some(Number::Float).ok_or(Refused);
        }
        let magnitude = integer.iter().try_fold(0u64, |acc, d| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')));
        match (negative, magnitude) {
            // `-0` parses to the float -0.0.
            (true, Some(0)) | (_, None) => Err(Refused),
            (true, Some(m)) => 0i64.checked_sub_unsigned(m).map(Number::Signed).ok_or(Refused),
            (false, Some(m)) => Ok(i64::try_from(m).map_or(Number::Unsigned(m), Number::Signed)),
        }
    }

    fn digits(&mut self) -> Scan<()> {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        if self.pos == start { Err(Refused) } else { Ok(()) }
    }

    pub fn boolean(&mut self) -> Scan<bool> {
        if self.literal(b"true") {
            Ok(true)
        } else if self.literal(b"false") {
            Ok(false)
        } else {
            Err(Refused)
        }
    }

    pub fn null(&mut self) -> Scan<()> {
        if self.literal(b"null") { Ok(()) } else { Err(Refused) }
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        let found = self.text.get(self.pos..self.pos + word.len()) == Some(word);
        if found {
            self.pos += word.len();
        }
        found
    }

    /// Any value, checked for form only.
    pub fn any(&mut self, depth: usize) -> Scan<()> {
        if depth > MAX_DEPTH {
            return Err(Refused);
        }
        match self.kind()? {
            Kind::Object => {
                let mut members = self.begin_object()?;
                while self.next_key(&mut members)?.is_some() {
                    self.any(depth + 1)?;
                }
                Ok(())
            }
            Kind::Array => {
                let mut items = self.begin_array()?;
                while self.next_item(&mut items)? {
                    self.any(depth + 1)?;
                }
                Ok(())
            }
            Kind::String => self.string().map(drop),
            Kind::Number => self.number().map(drop),
            Kind::Bool => self.boolean().map(drop),
            Kind::Null => self.null(),
        }
    }
}

/// The length of the plain run at the start of `text`: the position of the first quote,
/// backslash or control character, which ends it. Lists spent a third of their instructions
/// here, so it looks at eight bytes at a time: in a word, a byte below 0x20 and a byte equal to
/// the quote or the backslash (XORed to zero) are found with the carry tricks of "Bit
/// Twiddling Hacks" (`hasless`, `haszero`), whose lowest flagged byte is always a true one.
fn plain_run(text: &[u8]) -> Option<usize> {
    let mut words = text.chunks_exact(8);
    let mut offset = 0;
    for chunk in words.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if let Some(at) = first_ending(word) {
            return Some(offset + at);
        }
        offset += 8;
    }
    // The last bytes padded with a byte that ends nothing (most strings are shorter than a word).
    let tail = words.remainder();
    let mut word = [b'a'; 8];
    word.get_mut(..tail.len())?.copy_from_slice(tail);
    first_ending(word).map(|at| offset + at)
}

/// The first byte of `word` that ends a plain run.
fn first_ending(word: [u8; 8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    let zero_bytes = |word: u64| word.wrapping_sub(ONES) & !word & HIGHS;
    let word = u64::from_le_bytes(word);
    let controls = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let found = controls | zero_bytes(word ^ QUOTES) | zero_bytes(word ^ BACKSLASHES);
    (found != 0).then(|| found.trailing_zeros() as usize / 8)
}

#[cfg(test)]
fn ends_plain_run(byte: u8) -> bool {
    matches!(byte, 0..=0x1f | b'"' | b'\\')
}

/// Whether the number `token` parses to is written as `token` again (as Kubernetes writes
/// numbers: `crate::core::json`).
fn canonical_float(token: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Number>(token)
        .ok()
        .and_then(|n| crate::core::json::to_vec(&n).ok())
        .is_some_and(|written| written == token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(text: &str) -> bool {
        let mut reader = Reader::new(text);
        reader.any(0).is_ok() && reader.at_end()
    }

    #[test]
    fn plain_runs_end_where_a_byte_at_a_time_scan_ends_them() {
        let naive = |text: &[u8]| text.iter().position(|&b| ends_plain_run(b));
        // Every ending byte at every offset of a word and across words, after bytes whose
        // carries could mislead a word-wide test (0x80 and up, 0x20, 0x21, 0x5b, 0x5d, 0x7f).
        let fillers = [b'a', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xc3, 0xff];
        let enders = [0x00, 0x01, 0x1f, b'"', b'\\'];
        for len in 0..24 {
            for filler in fillers {
                let mut text = vec![filler; len];
                assert_eq!(plain_run(&text), naive(&text), "{text:?}");
                for at in 0..len {
                    for ender in enders {
                        text[at] = ender;
                        assert_eq!(plain_run(&text), naive(&text), "{text:?}");
                        // A second ending byte later on does not move the first.
                        if at + 3 < len {
                            text[at + 3] = b'"';
                            assert_eq!(plain_run(&text), naive(&text), "{text:?}");
                            text[at + 3] = filler;
                        }
                        text[at] = filler;
                    }
                }
            }
        }
        // Every byte value alone in a word and at the end of a word.
        for byte in 0..=u8::MAX {
            for text in [[byte, b'x', b'x', b'x', b'x', b'x', b'x', b'x', b'x'], [byte; 9]] {
                assert_eq!(plain_run(&text), naive(&text), "{text:?}");
            }
            let mut text = [b'q'; 16];
            text[7] = byte;
            text[15] = b'"';
            assert_eq!(plain_run(&text), naive(&text), "{text:?}");
        }
    }

    #[test]
    fn accepts_exactly_what_the_server_writes() {
        for text in [
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
            r#"{"s":"quote \" backslash \\ newline \n tab \t bell \u0007 del  é 😀"}"#,
            r#"[-9223372036854775808,18446744073709551615,0,1.5,-0.25,1e+30,0.000001,1.5e-7]"#,
            "{}",
            "[]",
        ] {
            assert!(accepted(text), "{text}");
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            let written = crate::core::json::to_vec(&value).unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), text, "the test text is canonical");
        }
    }

    #[test]
    fn refuses_every_other_form() {
        for text in [
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{ "a":1}"#,
            r#"{"a":1,}"#,
            "[1,]",
            "[,1]",
            r#"{"a\u0041":1}"#,
            r#"["\/"]"#,
            r#"["\u0041"]"#,
            r#"["\u000a"]"#,
            r#"["\u001F"]"#,
            "[\"\x01\"]",
            "[01]",
            "[-0]",
            "[1E5]",
            "[1e5]",
            "[0.10]",
            "[18446744073709551616]",
            "[-9223372036854775809]",
            "[tru]",
            "{",
        ] {
            assert!(!accepted(text), "{text}");
        }
    }

    #[test]
    fn numbers_come_back_as_serde_json_holds_them() {
        let number = |t: &str| Reader::new(t).number();
        assert_eq!(number("-5"), Ok(Number::Signed(-5)));
        assert_eq!(number("9223372036854775808"), Ok(Number::Unsigned(9_223_372_036_854_775_808)));
        assert_eq!(number("2.5"), Ok(Number::Float));
    }
}
