//! The `process_*` metrics every Prometheus client exposes (resident and virtual memory, CPU
//! seconds, open and maximum file descriptors, start time), read from `/proc/self` at scrape
//! time as client_golang's process collector reads them. Elsewhere than Linux they are absent.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// Reads the process's figures when scraped.
#[derive(Debug)]
pub struct ProcessCollector;

/// One reading of `/proc/self`.
#[derive(Debug, Default, PartialEq)]
struct Reading {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    start_time_seconds: f64,
    open_fds: u64,
}

/// The fields of `/proc/self/stat` after the command name: utime and stime (ticks), starttime
/// (ticks after boot), vsize (bytes) and rss (pages).
fn parse_stat(stat: &str, ticks_per_second: f64, page_size: u64, boot_time: u64) -> Option<Reading> {
    // The command name is in parentheses and may hold spaces; the fields follow the last ')'.
    let after_name = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Field numbers of proc(5), counted from `state` (field 3) at index 0.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let (utime, stime, start, vsize, rss) = (field(14)?, field(15)?, field(22)?, field(23)?, field(24)?);
    Some(Reading {
        cpu_seconds: (utime + stime) as f64 / ticks_per_second,
        resident_bytes: rss * page_size,
        virtual_bytes: vsize,
        start_time_seconds: boot_time as f64 + start as f64 / ticks_per_second,
        open_fds: 0,
    })
}

fn boot_time() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines().find_map(|line| line.strip_prefix("btime ")).and_then(|v| v.trim().parse().ok())
}

fn read() -> Option<Reading> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let mut reading = parse_stat(&stat, ticks, rustix::param::page_size() as u64, boot_time()?)?;
    reading.open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some(reading)
}

fn max_fds() -> Option<u64> {
    rlimit::getrlimit(rlimit::Resource::NOFILE).ok().map(|(soft, _)| soft)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(reading) = read() else { return Ok(()) };
        let help = "Total user and system CPU time spent in seconds.";
        encoder
            .encode_descriptor("process_cpu_seconds", help, None, MetricType::Counter)?
            .encode_counter::<NoLabelSet, _, u64>(&reading.cpu_seconds, None)?;
        let gauges = [
            ("process_resident_memory_bytes", "Resident memory size in bytes.", reading.resident_bytes as f64),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes.", reading.virtual_bytes as f64),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                reading.start_time_seconds,
            ),
            ("process_open_fds", "Number of open file descriptors.", reading.open_fds as f64),
        ];
        for (name, help, value) in gauges {
            encoder.encode_descriptor(name, help, None, MetricType::Gauge)?.encode_gauge(&value)?;
        }
        if let Some(max) = max_fds() {
            let help = "Maximum number of open file descriptors.";
            encoder.encode_descriptor("process_max_fds", help, None, MetricType::Gauge)?.encode_gauge(&(max as f64))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_name_with_spaces() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss
        let stat = "42 (crd apiserver) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 123456789 300 ...";
        let reading = parse_stat(stat, 100.0, 4096, 1_700_000_000).unwrap();
        assert_eq!(
            reading,
            Reading {
                cpu_seconds: 3.0,
                resident_bytes: 300 * 4096,
                virtual_bytes: 123_456_789,
                start_time_seconds: 1_700_000_010.0,
                open_fds: 0,
            }
        );
    }

    #[test]
    fn this_process_can_be_read() {
        let reading = read().unwrap();
        assert!(reading.resident_bytes > 0 && reading.open_fds > 0 && reading.cpu_seconds >= 0.0);
    }
}
