//! The two line formats of Kubernetes components (k8s.io/component-base `--logging-format`):
//! klog's text (`I1125 10:11:12.123456    4321 serve.rs:188] "msg" key="value"`) and
//! component-base's JSON (`{"ts":1764065472123.456,"caller":"cli/serve.rs:188","msg":"msg",
//! "v":0,"key":"value"}`; errors carry `err` and no `v`).

use std::fmt::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::{Event, Level, Metadata, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use super::Format;
use super::fields::{EventFields, write_quoted, write_value};

/// Writes events in one of the two formats.
pub struct KubeFormat {
    format: Format,
    /// klog writes local time; the zone is read once.
    zone: jiff::tz::TimeZone,
    pid: u32,
}

impl KubeFormat {
    pub fn new(format: Format) -> KubeFormat {
        KubeFormat { format, zone: jiff::tz::TimeZone::system(), pid: std::process::id() }
    }

    /// A formatter writing times in UTC (tests compare whole lines).
    pub fn utc(format: Format) -> KubeFormat {
        KubeFormat { zone: jiff::tz::TimeZone::UTC, ..KubeFormat::new(format) }
    }
}

impl<S, N> FormatEvent<S, N> for KubeFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        // Records of the `log` crate (sled, rustls) carry their origin in fields.
        let normalized = event.normalized_metadata();
        let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let fields = EventFields::of(event);
        let now = SystemTime::now();
        match self.format {
            Format::Text => self.text(&mut writer, metadata, &fields, now),
            Format::Json => json(&mut writer, metadata, &fields, now),
        }
    }
}

impl KubeFormat {
    /// klog's header (severity, date, time, pid, file and line), then the quoted message and
    /// `key=value` pairs with strings quoted.
    fn text(
        &self,
        out: &mut impl Write,
        metadata: &Metadata<'_>,
        fields: &EventFields,
        now: SystemTime,
    ) -> fmt::Result {
        let severity = match *metadata.level() {
            Level::ERROR => 'E',
            Level::WARN => 'W',
            _ => 'I',
        };
        let time = jiff::Timestamp::try_from(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let t = self.zone.to_datetime(time);
        write!(
            out,
            "{severity}{:02}{:02} {:02}:{:02}:{:02}.{:06} {:>7} {}:{}] ",
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.subsec_nanosecond() / 1000,
            self.pid,
            metadata.file().map(base_name).unwrap_or("???"),
            metadata.line().unwrap_or(1),
        )?;
        write_quoted(out, &fields.message)?;
        if let Some(error) = &fields.error {
            out.write_str(" err=")?;
            write_quoted(out, error)?;
        }
        for (key, value) in &fields.fields {
            write!(out, " {key}=")?;
            write_value(out, value)?;
        }
        out.write_char('\n')
    }
}

/// One JSON object per line: `ts` (milliseconds since the epoch), `caller`, `msg`, `v` (not
/// on errors), `err`, then the fields.
fn json(out: &mut impl Write, metadata: &Metadata<'_>, fields: &EventFields, now: SystemTime) -> fmt::Result {
    let millis = now.duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as f64 / 1e6).unwrap_or_default();
    write!(out, "{{\"ts\":{millis}")?;
    if let Some(file) = metadata.file() {
        out.write_str(",\"caller\":")?;
        write_quoted(out, &format!("{}:{}", short_caller(file), metadata.line().unwrap_or(1)))?;
    }
    out.write_str(",\"msg\":")?;
    write_quoted(out, &fields.message)?;
    if let Some(v) = super::verbosity::of(metadata.level(), metadata.target()) {
        write!(out, ",\"v\":{v}")?;
    }
    if let Some(error) = &fields.error {
        out.write_str(",\"err\":")?;
        write_quoted(out, error)?;
    }
    for (key, value) in &fields.fields {
        out.write_char(',')?;
        write_quoted(out, key)?;
        out.write_char(':')?;
        write_value(out, value)?;
    }
    out.write_str("}\n")
}

fn base_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The file and its directory (`filters/log.rs`), as zap's short caller.
fn short_caller(path: &str) -> &str {
    let mut cuts = path.rmatch_indices(['/', '\\']).map(|(i, _)| i);
    match (cuts.next(), cuts.next()) {
        (Some(_), Some(before)) => path.get(before + 1..).unwrap_or(path),
        _ => path,
    }
}

#[cfg(test)]
pub(crate) mod tests;
