//! Logs as an admin of a Kubernetes component reads them: klog's verbosity levels (`-v`),
//! component-base's formats (`--logging-format=text|json`), one line per request at `-v=3`
//! with kube-apiserver's httplog fields (written by `server::filters::log`), slow requests at
//! every level.
//!
//! Owns the `tracing` subscriber: which events pass (`verbosity`) and how lines look
//! (`format`). `RUST_LOG`, when set, replaces the `-v` selection (a developer's tool: it names
//! modules and levels directly); the line format stays the one `--logging-format` asks for.
//! Knows nothing of requests, HTTP or storage.

pub mod duration;
pub mod fields;
pub mod format;
pub mod verbosity;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

pub use duration::GoDuration;
pub use format::KubeFormat;

/// `--logging-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// klog's text lines.
    #[default]
    Text,
    /// component-base's JSON lines.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;

    /// Accepts component-base's format names; refuses others in its words.
    fn from_str(text: &str) -> Result<Format, String> {
        match text {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            other => Err(format!("format: Invalid value: {other:?}: Unsupported log format")),
        }
    }
}

/// The logging flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    pub verbosity: u32,
    pub format: Format,
}

/// What selects the events, and what to say about it once logging runs.
struct Selection {
    filter: EnvFilter,
    note: Option<Note>,
}

enum Note {
    RustLogWins(String),
    RustLogUnreadable(String),
}

/// `RUST_LOG` (when set and readable) wins over `-v`.
fn select(verbosity: u32, rust_log: Option<&str>) -> Selection {
    let by_verbosity = || EnvFilter::new(verbosity::directives(verbosity));
    match rust_log.map(str::trim).filter(|r| !r.is_empty()) {
        None => Selection { filter: by_verbosity(), note: None },
        Some(text) => match EnvFilter::try_new(text) {
            Ok(filter) => Selection { filter, note: Some(Note::RustLogWins(text.to_string())) },
            Err(e) => {
                Selection { filter: by_verbosity(), note: Some(Note::RustLogUnreadable(format!("{text:?}: {e}"))) }
            }
        },
    }
}

/// A subscriber that writes `format`ted lines of the events `filter` lets through.
pub fn subscriber<W>(filter: EnvFilter, format: KubeFormat, writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt().with_env_filter(filter).event_format(format).with_writer(writer).finish()
}

/// Installs the process's subscriber: lines on stderr (as Kubernetes components write them).
pub fn init(options: &Options) {
    let rust_log = std::env::var("RUST_LOG").ok();
    let selection = select(options.verbosity, rust_log.as_deref());
    let installed = tracing::subscriber::set_global_default(subscriber(
        selection.filter,
        KubeFormat::new(options.format),
        std::io::stderr,
    ));
    // The `log` crate's records (sled, rustls) go through the same filter and format; those
    // above the most verbose level anything lets through are dropped at the call.
    let max = tracing_log::AsLog::as_log(&tracing::level_filters::LevelFilter::current());
    let _ = tracing_log::LogTracer::builder().with_max_level(max).init();
    if installed.is_err() {
        return;
    }
    match selection.note {
        Some(Note::RustLogWins(text)) => {
            tracing::info!(rust_log = %text, "RUST_LOG is set: it selects what is logged instead of -v")
        }
        Some(Note::RustLogUnreadable(why)) => {
            tracing::warn!(rust_log = %why, "RUST_LOG cannot be read; logging as -v says")
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_component_base_names() {
        assert_eq!("text".parse::<Format>(), Ok(Format::Text));
        assert_eq!("json".parse::<Format>(), Ok(Format::Json));
        assert_eq!("xml".parse::<Format>().unwrap_err(), r#"format: Invalid value: "xml": Unsupported log format"#);
        assert!("JSON".parse::<Format>().is_err());
    }

    #[test]
    fn rust_log_wins_over_verbosity_when_readable() {
        let selected = select(0, Some("crd_apiserver=trace"));
        assert!(matches!(selected.note, Some(Note::RustLogWins(ref t)) if t == "crd_apiserver=trace"));
        assert_eq!(selected.filter.to_string(), "crd_apiserver=trace");
        let unreadable = select(3, Some("crd_apiserver=loud"));
        assert!(matches!(unreadable.note, Some(Note::RustLogUnreadable(_))));
        assert_eq!(unreadable.filter.to_string(), EnvFilter::new(verbosity::directives(3)).to_string());
        let unset = select(2, Some("  "));
        assert!(unset.note.is_none());
        assert_eq!(unset.filter.to_string(), EnvFilter::new(verbosity::directives(2)).to_string());
    }
}
