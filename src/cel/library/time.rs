//! CEL durations and timestamps: parsing (Go duration strings, RFC 3339), printing as CEL
//! prints them, arithmetic within CEL's ranges, and the calendar accessors (`getHours`, ...).
//!
//! Owns: time values. Must not touch: evaluation or cost.

use std::fmt;

const NANOS_PER_SECOND: i128 = 1_000_000_000;
/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999999Z in Unix seconds.
const MIN_TIMESTAMP_SECONDS: i128 = -62_135_596_800;
const MAX_TIMESTAMP_SECONDS: i128 = 253_402_300_799;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub i128);

/// An instant (nanoseconds since the Unix epoch) and the UTC offset, in seconds, it was
/// written with: Go keeps the offset for printing; comparisons use the instant only.
#[derive(Debug, Clone, Copy)]
pub struct Timestamp(pub i128, pub i32);

impl PartialEq for Timestamp {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}

impl Eq for Timestamp {}

impl PartialOrd for Timestamp {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Timestamp {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.cmp(&o.0)
    }
}

impl Duration {
    /// A duration within cel-go's range, Go's `time.Duration` (int64 nanoseconds, about 292
    /// years either way); past it cel-go's arithmetic fails with `integer overflow`.
    pub fn checked(nanos: i128) -> Result<Duration, String> {
        if i64::try_from(nanos).is_err() {
            return Err("integer overflow".into());
        }
        Ok(Duration(nanos))
    }

    /// Parses a Go duration string: `1h2m3.5s`, `-300ms`, `0`; units ns, us, µs, ms, s, m, h.
    pub fn parse_go(s: &str) -> Result<Duration, String> {
        let invalid = || format!("time: invalid duration \"{s}\"");
        let (negative, mut rest) = match s.as_bytes().first() {
            Some(b'-') => (true, s.get(1..).unwrap_or("")),
            Some(b'+') => (false, s.get(1..).unwrap_or("")),
            _ => (false, s),
        };
        if rest == "0" {
            return Ok(Duration(0));
        }
        if rest.is_empty() {
            return Err(invalid());
        }
        let mut total: i128 = 0;
        while !rest.is_empty() {
            let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
            if number_len == 0 {
                return Err(invalid());
            }
            let (number, after) = rest.split_at(number_len);
            let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
            let (unit, after) = after.split_at(unit_len);
            let scale: i128 = match unit {
                "ns" => 1,
                "us" | "µs" | "μs" => 1_000,
                "ms" => 1_000_000,
                "s" => NANOS_PER_SECOND,
                "m" => 60 * NANOS_PER_SECOND,
                "h" => 3600 * NANOS_PER_SECOND,
                "" => return Err(format!("time: missing unit in duration \"{s}\"")),
                other => return Err(format!("time: unknown unit \"{other}\" in duration \"{s}\"")),
            };
            let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
            if whole.is_empty() && frac.is_empty() {
                return Err(invalid());
            }
            let whole: i128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| invalid())? };
            let mut part = whole.checked_mul(scale).ok_or_else(invalid)?;
            let mut divisor = 1i128;
            let mut frac_value = 0i128;
            for c in frac.chars().take(18) {
                frac_value = frac_value * 10 + i128::from(c.to_digit(10).unwrap_or(0));
                divisor *= 10;
            }
            part = part.checked_add(frac_value * scale / divisor).ok_or_else(invalid)?;
            total = total.checked_add(part).ok_or_else(invalid)?;
            rest = after;
        }
        // Go's range: -2^63 ns is the one value whose magnitude exceeds int64's maximum.
        let signed = if negative { -total } else { total };
        Duration::checked(signed).map_err(|_| invalid())
    }

    pub fn seconds(self) -> i128 {
        self.0 / NANOS_PER_SECOND
    }
}

impl fmt::Display for Duration {
    /// CEL prints durations as seconds with the fraction it needs: `60s`, `1.5s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.abs();
        let secs = abs / NANOS_PER_SECOND;
        let nanos = abs % NANOS_PER_SECOND;
        if nanos == 0 {
            write!(f, "{sign}{secs}s")
        } else {
            let frac = format!("{nanos:09}");
            write!(f, "{sign}{secs}.{}s", frac.trim_end_matches('0'))
        }
    }
}

impl Timestamp {
    pub fn checked(nanos: i128) -> Result<Timestamp, String> {
        let secs = nanos.div_euclid(NANOS_PER_SECOND);
        if !(MIN_TIMESTAMP_SECONDS..=MAX_TIMESTAMP_SECONDS).contains(&secs) {
            return Err("timestamp out of range".into());
        }
        Ok(Timestamp(nanos, 0))
    }

    /// The same offset, another instant.
    pub fn shifted(self, nanos: i128) -> Result<Timestamp, String> {
        Timestamp::checked(nanos).map(|t| Timestamp(t.0, self.1))
    }

    pub fn from_seconds(secs: i64) -> Result<Timestamp, String> {
        Timestamp::checked(i128::from(secs) * NANOS_PER_SECOND)
    }

    pub fn parse_rfc3339(s: &str) -> Result<Timestamp, String> {
        let ts: jiff::Timestamp = s.parse().map_err(|e| format!("failed to parse timestamp {s:?}: {e}"))?;
        let offset = rfc3339_offset(s);
        Timestamp::checked(ts.as_nanosecond()).map(|t| Timestamp(t.0, offset))
    }

    /// A `date` (`2021-01-01`) as midnight UTC.
    pub fn parse_date(s: &str) -> Result<Timestamp, String> {
        let date: jiff::civil::Date = s.parse().map_err(|e| format!("failed to parse date {s:?}: {e}"))?;
        let zoned = date.to_zoned(jiff::tz::TimeZone::UTC).map_err(|e| e.to_string())?;
        Timestamp::checked(zoned.timestamp().as_nanosecond())
    }

    fn jiff(self) -> Result<jiff::Timestamp, String> {
        jiff::Timestamp::from_nanosecond(self.0).map_err(|e| e.to_string())
    }

    /// The civil time in a zone: `UTC`, an offset (`01:00`, `-08:00`) or an IANA name.
    pub fn in_zone(self, zone: Option<&str>) -> Result<jiff::civil::DateTime, String> {
        let tz = match zone {
            None => jiff::tz::TimeZone::UTC,
            Some(z) => parse_zone(z)?,
        };
        Ok(self.jiff()?.to_zoned(tz).datetime())
    }
}

/// The offset an RFC 3339 text ends with, in seconds (`Z` is 0).
fn rfc3339_offset(s: &str) -> i32 {
    let tail = s.get(s.len().saturating_sub(6)..).unwrap_or("");
    let sign = match tail.as_bytes().first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return 0,
    };
    let h: i32 = tail.get(1..3).and_then(|h| h.parse().ok()).unwrap_or(0);
    let m: i32 = tail.get(4..6).and_then(|m| m.parse().ok()).unwrap_or(0);
    sign * (h * 3600 + m * 60)
}

fn parse_zone(z: &str) -> Result<jiff::tz::TimeZone, String> {
    if z == "UTC" || z == "Z" {
        return Ok(jiff::tz::TimeZone::UTC);
    }
    let offset_text = z.strip_prefix('+').unwrap_or(z);
    if let Some((h, m)) = offset_text.trim_start_matches('-').split_once(':') {
        if let (Ok(h), Ok(m)) = (h.parse::<i32>(), m.parse::<i32>()) {
            let mut secs = h * 3600 + m * 60;
            if z.starts_with('-') {
                secs = -secs;
            }
            let offset = jiff::tz::Offset::from_seconds(secs).map_err(|e| e.to_string())?;
            return Ok(jiff::tz::TimeZone::fixed(offset));
        }
    }
    jiff::tz::TimeZone::get(z).map_err(|_| format!("invalid timezone: {z}"))
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in the offset it was written with, with only the fraction needed:
    /// `2000-01-01T00:00:00Z`, `2011-08-18T19:03:37.01+01:00` (Go's `RFC3339Nano`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Ok(ts) = self.jiff() else { return f.write_str("<invalid timestamp>") };
        if self.1 == 0 {
            return write!(f, "{ts}");
        }
        let Ok(offset) = jiff::tz::Offset::from_seconds(self.1) else { return write!(f, "{ts}") };
        let dt = ts.to_zoned(jiff::tz::TimeZone::fixed(offset)).datetime();
        let sign = if self.1 < 0 { '-' } else { '+' };
        let abs = self.1.abs();
        write!(f, "{dt}{sign}{:02}:{:02}", abs / 3600, abs % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(Duration::parse_go("1h2m3s").unwrap().seconds(), 3723);
        assert_eq!(Duration::parse_go("1.5s").unwrap().to_string(), "1.5s");
        assert_eq!(Duration::parse_go("-300ms").unwrap().to_string(), "-0.3s");
        assert_eq!(Duration::parse_go("1m").unwrap().to_string(), "60s");
        assert!(Duration::parse_go("1nns").is_err());
        assert!(Duration::parse_go("").is_err());
    }

    #[test]
    fn timestamps_print_in_utc() {
        let ts = Timestamp::parse_rfc3339("2011-08-18T19:03:37.010+01:00").unwrap();
        assert_eq!(ts.to_string(), "2011-08-18T19:03:37.01+01:00");
        assert_eq!(Timestamp::parse_date("2000-01-01").unwrap().to_string(), "2000-01-01T00:00:00Z");
        assert!(Timestamp::from_seconds(-62135596801).is_err());
    }
}
