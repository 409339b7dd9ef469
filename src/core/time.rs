//! Time stamps in the form Kubernetes writes them (`metav1.Time`: RFC 3339, whole seconds, UTC).

/// The current time as `2006-01-02T15:04:05Z`.
pub fn now_rfc3339() -> String {
    format_rfc3339(jiff::Timestamp::now())
}

/// Formats a timestamp with second precision, as `metav1.Time` marshals.
pub fn format_rfc3339(ts: jiff::Timestamp) -> String {
    // Written by hand for 1970 to 9999 (every time a write stamps): strftime costs several
    // times more, and runs twice per create.
    match u64::try_from(ts.as_second()) {
        Ok(seconds) if seconds < 253_402_300_800 => format_seconds(seconds),
        _ => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }
}

/// `seconds` since 1970 (before year 10000) as `YYYY-MM-DDTHH:MM:SSZ`, the civil date from
/// the day count by Howard Hinnant's `civil_from_days`.
fn format_seconds(seconds: u64) -> String {
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let mut out = String::with_capacity(20);
    let mut push = |n: u64, width: u32, after: char| {
        for p in (0..width).rev() {
            out.push(char::from(b'0' + (n / 10u64.pow(p) % 10) as u8));
        }
        out.push(after);
    };
    push(year, 4, '-');
    push(month, 2, '-');
    push(day, 2, 'T');
    push(rest / 3600, 2, ':');
    push(rest / 60 % 60, 2, ':');
    push(rest % 60, 2, 'Z');
    out
}

/// Parses an RFC 3339 time stamp.
pub fn parse_rfc3339(s: &str) -> Option<jiff::Timestamp> {
    s.parse::<jiff::Timestamp>().ok()
}

/// Renders a duration the way kubectl's `AGE` column does (`duration.HumanDuration`).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    let seconds = seconds.max(0);
    let minutes = seconds / 60;
    let hours = seconds / 3600;
    let days = hours / 24;
    let years = days / 365;
    if seconds < 60 * 2 {
        format!("{seconds}s")
    } else if minutes < 10 {
        let s = seconds % 60;
        if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") }
    } else if minutes < 60 * 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        let m = minutes % 60;
        if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 { format!("{days}d") } else { format!("{days}d{h}h") }
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else if hours < 24 * 365 * 8 {
        let d = days % 365;
        if d == 0 { format!("{years}y") } else { format!("{years}y{d}d") }
    } else {
        format!("{years}y")
    }
}

/// The number of days in a month of the proleptic Gregorian calendar (`None`: no such month).
pub fn days_in_month(year: u32, month: u32) -> Option<u32> {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => Some(31),
        4 | 6 | 9 | 11 => Some(30),
        2 if leap => Some(29),
        2 => Some(28),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_formatting_matches_strftime() {
        let strftime = |s: i64| jiff::Timestamp::from_second(s).unwrap().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let mut seconds: Vec<i64> =
            vec![0, 59, 86_399, 86_400, 951_782_400, 951_868_799, 4_107_542_400, 253_402_207_200];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            seconds.push((x % 253_402_207_200) as i64);
        }
        for s in seconds {
            assert_eq!(format_seconds(s as u64), strftime(s), "{s}");
            assert_eq!(format_rfc3339(jiff::Timestamp::from_second(s).unwrap()), strftime(s));
        }
        assert_eq!(format_rfc3339(jiff::Timestamp::from_second(-1).unwrap()), strftime(-1));
    }

    #[test]
    fn formats_whole_seconds() {
        let ts: jiff::Timestamp = "2021-06-20T07:35:27.123Z".parse().unwrap();
        assert_eq!(format_rfc3339(ts), "2021-06-20T07:35:27Z");
        assert_eq!(now_rfc3339().len(), 20);
    }

    #[test]
    fn human_durations_match_kubectl() {
        for (secs, text) in [
            (6, "6s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 120, "3h2m"),
            (12 * 3600 + 1800, "12h"),
            (3 * 86400, "3d"),
            (3 * 86400 + 7200, "3d2h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400, "3y"),
            (-5, "<invalid>"),
        ] {
            assert_eq!(human_duration(secs), text, "{secs}");
        }
    }
}
