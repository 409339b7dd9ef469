//! Durations written as Go writes a `time.Duration` (`850ns`, `1.5µs`, `12.003ms`, `2.5s`,
//! `1m30s`, `1h0m0s`): how kube-apiserver's logs show latencies, so log queries written for
//! them read ours.

use std::fmt;
use std::time::Duration;

/// A duration that displays as Go's `Duration.String()` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoDuration(pub Duration);

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        match nanos {
            0 => f.write_str("0s"),
            1..1_000 => write!(f, "{nanos}ns"),
            1_000..1_000_000 => write_fraction(f, nanos, 1_000, 3).and_then(|()| f.write_str("µs")),
            1_000_000..1_000_000_000 => write_fraction(f, nanos, 1_000_000, 6).and_then(|()| f.write_str("ms")),
            _ => {
                let seconds = nanos / 1_000_000_000;
                let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
                if hours > 0 {
                    write!(f, "{hours}h")?;
                }
                if hours > 0 || minutes > 0 {
                    write!(f, "{minutes}m")?;
                }
                write_fraction(f, nanos % 60_000_000_000, 1_000_000_000, 9)?;
                f.write_str("s")
            }
        }
    }
}

/// Writes `value / unit` with the remainder as decimals (`digits` of them at most), without
/// trailing zeros.
fn write_fraction(f: &mut fmt::Formatter<'_>, value: u128, unit: u128, digits: usize) -> fmt::Result {
    write!(f, "{}", value / unit)?;
    let rest = value % unit;
    if rest == 0 {
        return Ok(());
    }
    let decimals = format!("{rest:0digits$}");
    write!(f, ".{}", decimals.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_writes_them() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(850), "850ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_micros(1), "1µs"),
            (Duration::from_nanos(12_003_000), "12.003ms"),
            (Duration::from_nanos(1_061_598), "1.061598ms"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_millis(2_500), "2.5s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_nanos(3_723_000_000_001), "1h2m3.000000001s"),
        ];
        for (duration, expected) in cases {
            assert_eq!(GoDuration(duration).to_string(), expected, "{duration:?}");
        }
    }
}
