//! Network formats: URIs (Go's `url.ParseRequestURI`), host names, IP addresses and CIDRs (Kubernetes' "sloppy" parsers that accept leading
//! zeros), MAC addresses (`net.ParseMAC`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::text::{Rx, matches};

/// Go's `url.ParseRequestURI` succeeds: an absolute URI or an absolute path.
pub fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    let (scheme, rest) = match split_scheme(s) {
        Ok(parts) => parts,
        Err(()) => return false,
    };
    let rest = rest.split_once('?').map_or(rest, |(path, _)| path);
    if !rest.starts_with('/') {
        return !scheme.is_empty();
    }
    let mut path = rest;
    if !scheme.is_empty()
        && let Some(after) = rest.strip_prefix("//")
    {
        let end = after.find('/').unwrap_or(after.len());
        let (authority, tail) = after.split_at(end);
        if !valid_authority(authority) {
            return false;
        }
        path = tail;
    }
    valid_escapes(path)
}

/// Splits `scheme:rest`; no scheme when the text does not start with one.
fn split_scheme(s: &str) -> Result<(&str, &str), ()> {
    for (i, c) in s.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err(()),
            ':' => return Ok((s.get(..i).unwrap_or_default(), s.get(i + 1..).unwrap_or_default())),
            _ => return Ok(("", s)),
        }
    }
    Ok(("", s))
}

fn valid_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

fn valid_authority(authority: &str) -> bool {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((_, after)) => ("", after.strip_prefix(':')),
            None => return false,
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if port.is_some_and(|p| !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let host_char = |c: char| !c.is_ascii() || c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:[]<>\"%".contains(c);
    host.chars().all(host_char) && valid_escapes(host) && host_escapes_non_ascii(host)
}

/// In a host, Go accepts `%`-escapes of non-ASCII bytes only (and `%25`, for IPv6 zones).
fn host_escapes_non_ascii(host: &str) -> bool {
    let b = host.as_bytes();
    b.iter().enumerate().filter(|(_, c)| **c == b'%').all(|(i, _)| {
        let first = b.get(i + 1).and_then(|c| (*c as char).to_digit(16)).unwrap_or(0);
        first >= 8 || b.get(i + 1..i + 3) == Some(b"25")
    })
}

pub fn is_hostname(s: &str) -> bool {
    matches(Rx::Hostname, s) && s.len() <= 255 && s.split('.').all(|part| part.len() <= 63)
}

/// An IP address as Kubernetes' `ParseIPSloppy` reads it: IPv4 parts may have leading zeros.
pub fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if s.contains(':') {
        return s.parse::<Ipv6Addr>().ok().map(IpAddr::V6).or_else(|| sloppy_v6(s));
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (octet, part) in octets.iter_mut().zip(&parts) {
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = part.parse().ok()?;
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// An IPv6 address whose embedded IPv4 part has leading zeros.
fn sloppy_v6(s: &str) -> Option<IpAddr> {
    let (head, v4) = s.rsplit_once(':')?;
    let IpAddr::V4(v4) = parse_ip_sloppy(v4)? else { return None };
    format!("{head}:{v4}").parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

pub fn is_cidr(s: &str) -> bool {
    let Some((ip, prefix)) = s.split_once('/') else {
        return false;
    };
    let Some(ip) = parse_ip_sloppy(ip) else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !prefix.is_empty() && prefix.bytes().all(|b| b.is_ascii_digit()) && prefix.parse::<u32>().is_ok_and(|p| p <= max)
}

/// `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx:..`, `xx-xx-..` or `xxxx.xxxx.xxxx`.
pub fn is_mac(s: &str) -> bool {
    let hex = |part: &str, len: usize| part.len() == len && part.bytes().all(|b| b.is_ascii_hexdigit());
    if s.contains('.') {
        let parts: Vec<&str> = s.split('.').collect();
        return matches!(parts.len(), 3 | 4 | 10) && parts.iter().all(|p| hex(p, 4));
    }
    for separator in [':', '-'] {
        if s.contains(separator) {
            let parts: Vec<&str> = s.split(separator).collect();
            return matches!(parts.len(), 6 | 8 | 20) && parts.iter().all(|p| hex(p, 2));
        }
    }
    false
}
