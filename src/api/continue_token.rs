//! Continue tokens of paged lists, both ways: made as Kubernetes' storage layer makes them
//! (unpadded base64url of `{"v","rv","start"}`, plus a count of ours) and read as it reads them
//! (`DecodeContinue`): Go's base64 decoder, then `json.Unmarshal` into its token type (keys
//! matched without regard to case, `null` leaving a field alone, the first type error the one
//! reported), then its checks; every refusal is the 400 `invalid continue token: continue key
//! is not valid...` in Go's words.
//!
//! Owns the token's text; `api::list` pages with it.

use base64::Engine;
use serde_json::json;

use crate::core::json_syntax;
use crate::core::status::ApiError;
use crate::store::Revision;

#[cfg(test)]
mod tests;

/// A decoded continue token: the key to start after (relative to the resource) and the
/// revision to read at (`None`: the newest, which a negative revision asks for).
#[derive(Debug, PartialEq)]
pub struct Continuation {
    pub start: String,
    pub revision: Option<Revision>,
    /// The items that followed the previous page, when its token says.
    pub remaining: Option<u64>,
}

/// The token of the page that ends at `start` (relative to the resource), read at `revision`.
/// `remaining` is ours, not Kubernetes': how many items followed the page, so the next page of
/// the same list (at the same revision) knows its `remainingItemCount` without counting again.
pub fn encode(revision: Revision, start: &str, remaining: Option<u64>) -> String {
    let mut token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": start});
    if let Some(remaining) = remaining {
        crate::api::objects::put(&mut token, "remaining", json!(remaining));
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// Reads a token with the checks and messages of Kubernetes' storage layer.
pub fn decode(text: &str) -> Result<Continuation, ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("invalid continue token: continue key is not valid{why}"));
    let raw = go_base64(text.as_bytes()).map_err(|at| invalid(&format!(": illegal base64 data at input byte {at}")))?;
    let token = unmarshal(&raw).map_err(|e| invalid(&format!(": {e}")))?;
    if token.v != "meta.k8s.io/v1" {
        return Err(invalid(&format!(": server does not recognize this encoded version {}", token.v)));
    }
    if token.rv == 0 {
        return Err(invalid(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
    }
    if token.start.is_empty() {
        return Err(invalid(": encoded start key empty (version meta.k8s.io/v1)"));
    }
    // A key that is not already in its cleanest form could reach outside the resource.
    let rooted = if token.start.starts_with('/') { token.start.clone() } else { format!("/{}", token.start) };
    if crate::core::paths::clean(&rooted) != rooted {
        return Err(invalid(&format!(": {}", token.start)));
    }
    let start = rooted.get(1..).unwrap_or_default().to_string();
    Ok(Continuation { start, revision: u64::try_from(token.rv).ok(), remaining: token.remaining })
}

/// Unpadded base64url as Go's `base64.RawURLEncoding` decodes it: line breaks skipped, bits
/// left over at the end ignored; a refusal is the offset Go names.
fn go_base64(text: &[u8]) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut bits, mut held, mut symbols) = (0u32, 0u32, 0usize);
    for (at, &c) in text.iter().enumerate() {
        let six = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            b'\r' | b'\n' => continue,
            _ => return Err(at),
        };
        bits = (bits << 6) | u32::from(six);
        held += 6;
        symbols += 1;
        if held >= 8 {
            held -= 8;
            out.push(((bits >> held) & 0xff) as u8);
            bits &= (1 << held) - 1;
        }
    }
    // One symbol alone cannot make a byte: Go names the input's last offset.
    if symbols % 4 == 1 {
        return Err(text.len().saturating_sub(1));
    }
    Ok(out)
}

/// The token as `json.Unmarshal` fills Kubernetes' `continueToken` (and our `remaining`).
#[derive(Debug, Default)]
struct Token {
    v: String,
    rv: i64,
    start: String,
    remaining: Option<u64>,
}

/// The kind of a JSON value as Go's type errors name it.
fn kind_of(value: &[u8]) -> &'static str {
    match value.first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "bool",
        Some(b'n') => "null",
        _ => "number",
    }
}

fn unmarshal(raw: &[u8]) -> Result<Token, String> {
    let checked = json_syntax::check(raw).map_err(|e| e.0)?;
    let text = json_syntax::repair(raw, &checked);
    let mut token = Token::default();
    let mut reader = Members { text: &text, at: 0 };
    let top = reader.value();
    match kind_of(top) {
        "null" => return Ok(token),
        "object" => {}
        other => return Err(format!("json: cannot unmarshal {other} into Go value of type storage.continueToken")),
    }
    // Go goes on after a type error and reports the first.
    let mut first_error = None;
    let mut reader = Members { text: top, at: 1 };
    while let Some((key, value)) = reader.member() {
        let kind = kind_of(value);
        if kind == "null" {
            continue;
        }
        let refuse = |field: &str, go_type: &str| {
            format!("json: cannot unmarshal {kind} into Go struct field continueToken.{field} of type {go_type}")
        };
        let string = || serde_json::from_slice::<String>(value).ok();
        let outcome = if key.eq_ignore_ascii_case("v") {
            string().map(|s| token.v = s).ok_or_else(|| refuse("v", "string"))
        } else if key.eq_ignore_ascii_case("start") {
            string().map(|s| token.start = s).ok_or_else(|| refuse("start", "string"))
        } else if key.eq_ignore_ascii_case("rv") {
            match kind {
                "number" => std::str::from_utf8(value).ok().and_then(|n| n.parse::<i64>().ok()).map(|n| token.rv = n).ok_or_else(
                    || {
                        let literal = String::from_utf8_lossy(value);
                        format!("json: cannot unmarshal number {literal} into Go struct field continueToken.rv of type int64")
                    },
                ),
                _ => Err(refuse("rv", "int64")),
            }
        } else {
            if key == "remaining" {
                token.remaining = std::str::from_utf8(value).ok().and_then(|n| n.parse().ok());
            }
            Ok(())
        };
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(token),
    }
}

/// A reader of JSON text already checked by `json_syntax`: values taken whole, an object's
/// members in the order written.
struct Members<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Members<'a> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b',' | b':')) {
            self.at += 1;
        }
    }

    /// The next value, whole (walked without recursion: it may nest 10,000 deep).
    fn value(&mut self) -> &'a [u8] {
        self.skip_space();
        let start = self.at;
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        while let Some(&c) = self.text.get(self.at) {
            if in_string {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => {
                        in_string = false;
                        if depth == 0 {
                            self.at += 1;
                            break;
                        }
                    }
                    _ => {}
                }
            } else {
                match c {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth == 0 => break,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            self.at += 1;
                            break;
                        }
                    }
                    b',' | b' ' | b'\t' | b'\r' | b'\n' | b':' if depth == 0 => break,
                    _ => {}
                }
            }
            self.at += 1;
        }
        self.text.get(start..self.at).unwrap_or_default()
    }

    /// The next member of the object being read (its key decoded), or `None` at its end.
    fn member(&mut self) -> Option<(String, &'a [u8])> {
        self.skip_space();
        if matches!(self.text.get(self.at), None | Some(b'}')) {
            return None;
        }
        let key = serde_json::from_slice::<String>(self.value()).unwrap_or_default();
        Some((key, self.value()))
    }
}
