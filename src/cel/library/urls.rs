//! Kubernetes' URL library on a parser with Go's `net/url` rules: `url`, `isURL`,
//! `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`, `getQuery`.
//!
//! Owns: URL parsing. Must not touch: cost, evaluation.

use std::rc::Rc;

use super::super::ir::Func;
use super::super::value::{EvalError, EvalResult, Value};
use super::map_value;

#[derive(Debug, Clone, PartialEq)]
pub struct Url {
    pub raw: String,
    pub scheme: String,
    pub host: String,
    pub path: String,
    pub query: String,
}

fn valid_scheme(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn unescape(s: &str, plus_is_space: bool) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hex =
                    s.get(i + 1..i + 3).ok_or_else(|| format!("invalid URL escape {:?}", s.get(i..).unwrap_or("")))?;
                let v = u8::from_str_radix(hex, 16).map_err(|_| format!("invalid URL escape \"%{hex}\""))?;
                out.push(v);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| "invalid UTF-8 in URL".to_string())
}

/// Go's `url.ParseRequestURI` followed by `url.Parse`: absolute URLs and absolute paths.
pub fn parse_request_uri(s: &str) -> Result<Url, String> {
    let err = |m: &str| format!("parse {s:?}: {m}");
    let (before_fragment, _) = s.split_once('#').unwrap_or((s, ""));
    let (rest, query) = before_fragment.split_once('?').unwrap_or((before_fragment, ""));
    let (scheme, rest) = match rest.find(':') {
        Some(i) if rest.get(..i).is_some_and(valid_scheme) && !rest.get(..i).unwrap_or("").contains('/') => {
            (rest.get(..i).unwrap_or("").to_ascii_lowercase(), rest.get(i + 1..).unwrap_or(""))
        }
        _ => {
            if !rest.starts_with('/') {
                return Err(err("invalid URI for request"));
            }
            (String::new(), rest)
        }
    };
    let (host, path) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            let authority = after.get(..end).unwrap_or("");
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            check_host(host).map_err(|m| err(&m))?;
            (host.to_string(), after.get(end..).unwrap_or("").to_string())
        }
        None => (String::new(), rest.to_string()),
    };
    unescape(&path, false).map_err(|m| err(&m))?;
    Ok(Url { raw: s.to_string(), scheme, host, path, query: query.to_string() })
}

fn check_host(host: &str) -> Result<(), String> {
    let port = if let Some(rest) = host.strip_prefix('[') {
        let (_, after) = rest.split_once(']').ok_or("missing ']' in host")?;
        if after.is_empty() {
            return Ok(());
        }
        after.strip_prefix(':').ok_or_else(|| format!("invalid port {after:?} after host"))?
    } else {
        match host.rsplit_once(':') {
            Some((_, p)) => p,
            None => return Ok(()),
        }
    };
    if port.chars().all(|c| c.is_ascii_digit()) { Ok(()) } else { Err(format!("invalid port \":{port}\" after host")) }
}

impl Url {
    fn hostname(&self) -> &str {
        if let Some(rest) = self.host.strip_prefix('[') {
            return rest.split_once(']').map_or(rest, |(h, _)| h);
        }
        self.host.rsplit_once(':').map_or(&self.host, |(h, _)| h)
    }

    fn port(&self) -> &str {
        if let Some(rest) = self.host.strip_prefix('[') {
            return rest.split_once("]:").map_or("", |(_, p)| p);
        }
        self.host.rsplit_once(':').map_or("", |(_, p)| p)
    }

    /// The path with the characters Go escapes in paths percent-encoded.
    fn escaped_path(&self) -> String {
        let keep = |c: u8| c.is_ascii_alphanumeric() || b"-._~$&+,/:;=@!'()*%".contains(&c);
        let mut out = String::with_capacity(self.path.len());
        for b in self.path.bytes() {
            if keep(b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    fn query_map<'a>(&self) -> Value<'a> {
        let mut entries: Vec<(String, Vec<String>)> = Vec::new();
        for pair in self.query.split('&').filter(|p| !p.is_empty() && !p.contains(';')) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(k), Ok(v)) = (unescape(k, true), unescape(v, true)) else { continue };
            match entries.iter_mut().find(|(key, _)| *key == k) {
                Some((_, values)) => values.push(v),
                None => entries.push((k, vec![v])),
            }
        }
        map_value(
            entries
                .into_iter()
                .map(|(k, vs)| (Value::string(k), Value::list(vs.into_iter().map(Value::string).collect())))
                .collect(),
        )
    }
}

pub fn call<'a>(func: Func, args: &[Value<'a>]) -> EvalResult<'a> {
    match (func, args.first()) {
        (Func::Url, Some(Value::Str(s))) => parse_request_uri(s.as_str())
            .map(|u| Value::Url(Rc::new(u)))
            .map_err(|e| EvalError::new(format!("URL parse error during conversion from string: {e}"))),
        (Func::IsUrl, Some(Value::Str(s))) => Ok(Value::Bool(parse_request_uri(s.as_str()).is_ok())),
        (Func::GetScheme, Some(Value::Url(u))) => Ok(Value::str(&u.scheme)),
        (Func::GetHost, Some(Value::Url(u))) => Ok(Value::str(&u.host)),
        (Func::GetHostname, Some(Value::Url(u))) => Ok(Value::str(u.hostname())),
        (Func::GetPort, Some(Value::Url(u))) => Ok(Value::str(u.port())),
        (Func::GetEscapedPath, Some(Value::Url(u))) => Ok(Value::string(u.escaped_path())),
        (Func::GetQuery, Some(Value::Url(u))) => Ok(u.query_map()),
        _ => Err(EvalError::no_overload()),
    }
}
