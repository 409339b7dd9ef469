//! Text formats: identifiers checked by pattern, checksummed numbers (ISBN, credit cards) and
//! times (`date`, `date-time`, `duration`) as go-openapi parses them.

use std::sync::OnceLock;

use regex::Regex;

/// The patterns formats are checked with (Go syntax, compiled once on first use).
#[derive(Debug, Clone, Copy)]
pub enum Rx {
    Uuid,
    Uuid3,
    Uuid4,
    Uuid5,
    Ssn,
    HexColor,
    RgbColor,
    Base64,
    ShortName,
    LongName,
    Hostname,
    Isbn10,
    Isbn13,
    CreditCard,
    DateTime,
}

const RGB_PART: &str = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*";
const SHORT_NAME: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

fn source(rx: Rx) -> String {
    match rx {
        Rx::Uuid => r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$".into(),
        Rx::Uuid3 => r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$".into(),
        Rx::Uuid4 => r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$".into(),
        Rx::Uuid5 => r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$".into(),
        Rx::Ssn => r"^\d{3}[- ]?\d{2}[- ]?\d{4}$".into(),
        Rx::HexColor => r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$".into(),
        Rx::RgbColor => format!(r"^rgb\({RGB_PART},{RGB_PART},{RGB_PART}\)$"),
        Rx::Base64 => r"^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$".into(),
        Rx::ShortName => format!("^{SHORT_NAME}$"),
        Rx::LongName => format!(r"^{SHORT_NAME}(\.{SHORT_NAME})*$"),
        Rx::Hostname => r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$".into(),
        Rx::Isbn10 => "^(?:[0-9]{9}X|[0-9]{10})$".into(),
        Rx::Isbn13 => "^(?:[0-9]{13})$".into(),
        Rx::CreditCard => r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$".into(),
        Rx::DateTime => r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$".into(),
    }
}

const RX_COUNT: usize = 15;
static COMPILED: [OnceLock<Option<Regex>>; RX_COUNT] = [const { OnceLock::new() }; RX_COUNT];

/// The compiled pattern (`None` only if it failed to compile, which the tests rule out).
pub fn compiled(rx: Rx) -> Option<&'static Regex> {
    COMPILED.get(rx as usize)?.get_or_init(|| super::super::pattern::compile(&source(rx)).ok()).as_ref()
}

pub fn matches(rx: Rx, s: &str) -> bool {
    compiled(rx).is_some_and(|r| r.is_match(s))
}

/// Removes Go's `[\s-]+` (ASCII white space and dashes).
fn without_spaces_and_dashes(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, '\t' | '\n' | '\x0c' | '\r' | ' ' | '-')).collect()
}

fn digit(b: u8) -> i64 {
    i64::from(b.wrapping_sub(b'0'))
}

pub fn is_isbn10(s: &str) -> bool {
    let clean = without_spaces_and_dashes(s);
    if !matches(Rx::Isbn10, &clean) {
        return false;
    }
    let bytes = clean.as_bytes();
    let mut sum: i64 = bytes.iter().take(9).enumerate().map(|(i, b)| (i as i64 + 1) * digit(*b)).sum();
    sum += match bytes.get(9) {
        Some(b'X') => 100,
        Some(b) => 10 * digit(*b),
        None => return false,
    };
    sum % 11 == 0
}

pub fn is_isbn13(s: &str) -> bool {
    let clean = without_spaces_and_dashes(s);
    if !matches(Rx::Isbn13, &clean) {
        return false;
    }
    let bytes = clean.as_bytes();
    let sum: i64 = bytes.iter().take(12).enumerate().map(|(i, b)| if i % 2 == 0 { 1 } else { 3 } * digit(*b)).sum();
    bytes.get(12).is_some_and(|last| digit(*last) - ((10 - sum % 10) % 10) == 0)
}

/// A card number (anything but digits is ignored) of a known issuer with a valid Luhn sum.
pub fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !matches(Rx::CreditCard, &digits) {
        return false;
    }
    let mut sum = 0;
    for (i, b) in digits.bytes().rev().enumerate() {
        let mut d = digit(b);
        if i % 2 == 1 {
            d *= 2;
            if d >= 10 {
                d = d % 10 + 1;
            }
        }
        sum += d;
    }
    sum % 10 == 0
}

/// `2006-01-02` with a day that exists in its month, as Go's `time.Parse` requires.
pub fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return false;
    }
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(range)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
        return false;
    };
    let Some(days) = crate::core::time::days_in_month(year, month) else { return false };
    (1..=days).contains(&day)
}

/// go-openapi's date-time check: a date, a `t`, then a time with a zone.
pub fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let Some(caps) = compiled(Rx::DateTime).and_then(|r| r.captures(time)) else {
        return false;
    };
    let part = |i: usize| caps.get(i).map(|m| m.as_str()).unwrap_or_default();
    part(1) <= "23" && part(2) <= "59" && part(3) <= "59"
}

/// Go's `time.ParseDuration`, or go-openapi's looser form (`3 days`, `1 hour`).
pub fn is_duration(s: &str) -> bool {
    go_duration(s) || loose_duration(s)
}

/// Go's `time.ParseDuration` succeeds: signed, one or more `<number><unit>`, within an int64 of
/// nanoseconds (larger totals are refused as Go refuses them).
fn go_duration(s: &str) -> bool {
    const LIMIT: u64 = 1 << 63;
    let (negative, s) = match s.as_bytes().first() {
        Some(b'-') => (true, s.get(1..).unwrap_or_default()),
        Some(b'+') => (false, s.get(1..).unwrap_or_default()),
        _ => (false, s),
    };
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return false;
        }
        let int_len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (int, after) = rest.split_at(int_len);
        let mut value: u64 = 0;
        for digit in int.bytes() {
            if value > LIMIT / 10 {
                return false;
            }
            value = value * 10 + u64::from(digit - b'0');
            if value > LIMIT {
                return false;
            }
        }
        // The fraction's digits while they fit, as Go's leadingFraction keeps them.
        let (mut fraction, mut scale, mut fraction_len, mut after) = (0u64, 1f64, 0, after);
        if let Some(a) = after.strip_prefix('.') {
            let n = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
            let mut overflow = false;
            for digit in a.bytes().take(n) {
                if overflow || fraction > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let next = fraction * 10 + u64::from(digit - b'0');
                if next > LIMIT {
                    overflow = true;
                    continue;
                }
                fraction = next;
                scale *= 10.0;
            }
            fraction_len = n;
            after = a.get(n..).unwrap_or_default();
        }
        if int.is_empty() && fraction_len == 0 {
            return false;
        }
        let unit_len = after.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after.len());
        let unit: u64 = match after.get(..unit_len).unwrap_or_default() {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return false,
        };
        if value > LIMIT / unit {
            return false;
        }
        value *= unit;
        if fraction > 0 {
            // Go computes the fraction's nanoseconds in float64 and truncates them.
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > LIMIT {
                return false;
            }
        }
        total += value;
        if total > LIMIT {
            return false;
        }
        rest = after.get(unit_len..).unwrap_or_default();
    }
    negative || total < LIMIT
}

const UNITS: &[&[&str]] = &[
    &["ns", "nano"],
    &["us", "µs", "micro"],
    &["ms", "milli"],
    &["s", "sec"],
    &["m", "min"],
    &["h", "hr", "hour"],
    &["d", "day"],
    &["w", "wk", "week"],
];

fn loose_duration(s: &str) -> bool {
    static PARTS: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(parts) = PARTS.get_or_init(|| super::super::pattern::compile(r"((\d+)\s*([A-Za-zµ]+))").ok()) else {
        return false;
    };
    let mut found = false;
    for caps in parts.captures_iter(s) {
        let count = caps.get(2).map(|m| m.as_str()).unwrap_or_default();
        if count.parse::<i64>().is_err() {
            return false;
        }
        let unit = caps.get(3).map(|m| m.as_str().trim().to_lowercase()).unwrap_or_default();
        for variants in UNITS {
            let last = variants.len() - 1;
            for (i, variant) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(variant)) || variant.eq_ignore_ascii_case(&unit) {
                    found = true;
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for i in 0..RX_COUNT {
            let rx = [
                Rx::Uuid,
                Rx::Uuid3,
                Rx::Uuid4,
                Rx::Uuid5,
                Rx::Ssn,
                Rx::HexColor,
                Rx::RgbColor,
                Rx::Base64,
                Rx::ShortName,
                Rx::LongName,
                Rx::Hostname,
                Rx::Isbn10,
                Rx::Isbn13,
                Rx::CreditCard,
                Rx::DateTime,
            ][i];
            assert_eq!(rx as usize, i);
            assert!(compiled(rx).is_some(), "{rx:?}");
        }
    }

    #[test]
    fn go_durations() {
        assert!(go_duration("1.5h"));
        assert!(go_duration("-3m2s"));
        assert!(!go_duration("3"));
        assert!(!go_duration("h"));
        // An int64 of nanoseconds bounds them, as Go's time.ParseDuration does.
        assert!(go_duration("2562047h"));
        assert!(!go_duration("2562048h"));
        assert!(go_duration("9223372036854775807ns"));
        assert!(!go_duration("9223372036854775808ns"));
        assert!(go_duration("-9223372036854775808ns"));
        assert!(!go_duration("9999999999999999999h"));
        assert!(go_duration(".5s") && go_duration("5.s"));
        assert!(!go_duration("1h-2m") && !go_duration("1 h"));
    }
}
