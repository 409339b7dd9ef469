//! Time stamps in the form Kubernetes writes them (`metav1.Time`: RFC 3339, whole seconds, UTC).

/// The current time as `2006-01-02T15:04:05Z`.
pub fn now_rfc3339() -> String {
    format_rfc3339(jiff::Timestamp::now())
}

/// Formats a timestamp with second precision, as `metav1.Time` marshals.
pub fn format_rfc3339(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
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
