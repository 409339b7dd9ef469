//! Lines of both formats, written by a real subscriber into a buffer.

use std::sync::{Arc, Mutex};

use super::*;
use crate::logs::subscriber;

/// A writer the tests read back.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// The lines `events` write at `-v=verbosity` in `format`.
fn lines(format: Format, verbosity: u32, events: impl FnOnce()) -> Vec<String> {
    let captured = Captured::default();
    let filter = tracing_subscriber::EnvFilter::new(crate::logs::verbosity::directives(verbosity));
    tracing::subscriber::with_default(subscriber(filter, KubeFormat::utc(format), captured.clone()), events);
    captured.text().lines().map(str::to_string).collect()
}

fn events() {
    tracing::info!(address = "127.0.0.1:8443", max = 40u64, "serving securely");
    tracing::warn!(definition = "crontabs.stable.example.com", "a \"quoted\" warning");
    let failure = std::io::Error::other("disk full");
    tracing::error!(error = %failure, first = 7u64, "a write batch failed");
    tracing::debug!(mutating = 2u64, ready = true, "admission webhook configurations");
    tracing::debug!(target: "httplog", verb = "GET", resp = 200u64, "HTTP");
}

#[test]
fn text_lines_are_klog_lines() {
    let lines = lines(Format::Text, 3, events);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    let pid = std::process::id();
    let header =
        regex::Regex::new(&format!(r"^([IWE])\d{{4}} \d\d:\d\d:\d\d\.\d{{6}} +{pid} tests\.rs:\d+\] (.*)$")).unwrap();
    let rest: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            let c = header.captures(l).unwrap_or_else(|| panic!("not a klog line: {l}"));
            (c[1].to_string(), c[2].to_string())
        })
        .collect();
    let expected = [
        ("I", r#""serving securely" address="127.0.0.1:8443" max=40"#),
        ("W", r#""a \"quoted\" warning" definition="crontabs.stable.example.com""#),
        ("E", r#""a write batch failed" err="disk full" first=7"#),
        ("I", r#""admission webhook configurations" mutating=2 ready=true"#),
        ("I", r#""HTTP" verb="GET" resp=200"#),
    ];
    for ((severity, text), (want_severity, want_text)) in rest.iter().zip(expected) {
        assert_eq!((severity.as_str(), text.as_str()), (want_severity, want_text));
    }
}

#[test]
fn json_lines_carry_component_base_keys() {
    let lines = lines(Format::Json, 3, events);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    let parsed: Vec<serde_json::Value> =
        lines.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    for line in &parsed {
        let ts = line["ts"].as_f64().unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as f64;
        assert!((now - ts).abs() < 60_000.0, "{line}");
        assert!(line["caller"].as_str().unwrap().starts_with("format/tests.rs:"), "{line}");
    }
    // Every key, in the order the line writes them.
    let keys = |i: usize| {
        let mut keys: Vec<&str> = parsed[i].as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_by_key(|k| lines[i].find(&format!("\"{k}\":")).unwrap());
        keys
    };
    assert_eq!(keys(0), ["ts", "caller", "msg", "v", "address", "max"]);
    assert_eq!(parsed[0]["msg"], "serving securely");
    assert_eq!(parsed[0]["v"], 0);
    assert_eq!(parsed[0]["max"], 40);
    assert_eq!(parsed[1]["msg"], "a \"quoted\" warning");
    // Errors have `err` and no `v`, as zapr writes them.
    assert_eq!(keys(2), ["ts", "caller", "msg", "err", "first"]);
    assert_eq!(parsed[2]["err"], "disk full");
    assert_eq!(parsed[3]["v"], 2);
    assert_eq!(parsed[3]["ready"], true);
    assert_eq!(parsed[4]["v"], 3);
    assert_eq!(parsed[4]["resp"], 200);
}

#[test]
fn the_level_decides_which_lines_are_written() {
    assert_eq!(lines(Format::Json, 0, events).len(), 3);
    assert_eq!(lines(Format::Json, 2, events).len(), 4);
    assert_eq!(lines(Format::Json, 3, events).len(), 5);
}

#[test]
fn callers_are_short() {
    assert_eq!(short_caller("src/server/filters/log.rs"), "filters/log.rs");
    assert_eq!(short_caller("log.rs"), "log.rs");
    assert_eq!(base_name("src/server/filters/log.rs"), "log.rs");
}
