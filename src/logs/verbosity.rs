//! klog's verbosity (`-v`) mapped onto `tracing` levels, both ways: which events a `-v`
//! level lets through (as `EnvFilter` directives), and which `-v` level an event belongs to
//! (the `v` of JSON lines).
//!
//! | `-v` | what appears (klog's meaning)                        | `tracing`                          |
//! |------|------------------------------------------------------|------------------------------------|
//! | 0, 1 | start-up, errors, warnings, rare state changes       | ERROR, WARN, INFO                  |
//! | 2    | useful steady-state information                      | DEBUG of this crate                |
//! | 3    | one line per request (kube-apiserver's httplog)      | target `httplog`                   |
//! | 4    | per-connection and per-request detail (debug)        | TRACE of this crate                |
//! | 5    | dependencies' debug lines (HTTP client calls...)     | DEBUG of every crate               |
//! | 6    | dependencies' trace lines                            | TRACE of every crate but the noisy |
//! | 7+   | everything, the TLS, HTTP/2 and store crates too     | TRACE                              |

use tracing::Level;

/// The target of the request log lines (klog's level 3, as kube-apiserver's httplog).
pub const HTTPLOG: &str = "httplog";

/// This crate's target prefix.
const OURS: &str = "crd_apiserver";

/// Crates whose own INFO/DEBUG lines say nothing an admin acts on, unless asked for (-v=7).
const QUIET_CRATES: [&str; 5] = ["sled", "h2", "hyper", "hyper_util", "rustls"];
const QUIET: &str = "sled=warn,h2=warn,hyper=warn,hyper_util=warn,rustls=warn";

/// `EnvFilter` directives that let through what `-v=verbosity` shows.
pub fn directives(verbosity: u32) -> String {
    match verbosity {
        0 | 1 => format!("info,{QUIET}"),
        2 => format!("info,{OURS}=debug,{QUIET}"),
        3 => format!("info,{OURS}=debug,{HTTPLOG}=debug,{QUIET}"),
        4 => format!("info,{OURS}=trace,{HTTPLOG}=debug,{QUIET}"),
        5 => format!("debug,{OURS}=trace,{QUIET}"),
        6 => format!("trace,{QUIET}"),
        _ => "trace".to_string(),
    }
}

/// The `-v` level an event belongs to; `None` for errors, which klog logs at every level and
/// component-base's JSON writes without `v`.
pub fn of(level: &Level, target: &str) -> Option<u32> {
    if target == HTTPLOG {
        return Some(3);
    }
    let crate_name = target.split("::").next().unwrap_or_default();
    let ours = crate_name == OURS;
    match *level {
        Level::ERROR => None,
        Level::WARN => Some(0),
        _ if QUIET_CRATES.contains(&crate_name) => Some(7),
        Level::INFO => Some(0),
        Level::DEBUG => Some(if ours { 2 } else { 5 }),
        _ => Some(if ours { 4 } else { 6 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::layer::SubscriberExt;

    /// The `-v` levels (0 to 9) at which an event of `level` and `target` is let through,
    /// asked of a real subscriber with the level's filter.
    macro_rules! shown_at {
        ($level:expr, $target:literal) => {
            (0..10u32)
                .filter(|v| {
                    let subscriber = tracing_subscriber::registry().with(EnvFilter::new(directives(*v)));
                    tracing::subscriber::with_default(subscriber, || tracing::enabled!(target: $target, $level))
                })
                .collect::<Vec<u32>>()
        };
    }

    fn from(first: u32) -> Vec<u32> {
        (first..10).collect()
    }

    #[test]
    fn each_line_appears_from_its_own_level_on() {
        assert_eq!(shown_at!(Level::ERROR, "crd_apiserver::store::sled::writer"), from(0));
        assert_eq!(shown_at!(Level::WARN, "crd_apiserver::cli::serve"), from(0));
        assert_eq!(shown_at!(Level::INFO, "crd_apiserver::cli::serve"), from(0));
        assert_eq!(shown_at!(Level::INFO, "kube_client::client"), from(0));
        assert_eq!(shown_at!(Level::DEBUG, "crd_apiserver::cli::admission"), from(2));
        assert_eq!(shown_at!(Level::DEBUG, "httplog"), from(3));
        assert_eq!(shown_at!(Level::TRACE, "crd_apiserver::server::connection"), from(4));
        assert_eq!(shown_at!(Level::DEBUG, "kube_client::client"), from(5));
        assert_eq!(shown_at!(Level::TRACE, "kube_client::client"), from(6));
        assert_eq!(shown_at!(Level::INFO, "sled::pagecache"), from(7));
        assert_eq!(shown_at!(Level::WARN, "h2::proto"), from(0));
        assert_eq!(shown_at!(Level::TRACE, "rustls::conn"), from(7));
    }

    #[test]
    fn an_event_says_the_level_that_shows_it() {
        assert_eq!(of(&Level::ERROR, "crd_apiserver::api::body"), None);
        assert_eq!(of(&Level::WARN, "crd_apiserver::cli::serve"), Some(0));
        assert_eq!(of(&Level::DEBUG, "crd_apiserver::cli::admission"), Some(2));
        assert_eq!(of(&Level::DEBUG, HTTPLOG), Some(3));
        assert_eq!(of(&Level::TRACE, "crd_apiserver::server::connection"), Some(4));
        assert_eq!(of(&Level::DEBUG, "kube_client::client"), Some(5));
        assert_eq!(of(&Level::TRACE, "kube_client::client"), Some(6));
        assert_eq!(of(&Level::INFO, "sled::pagecache"), Some(7));
        assert_eq!(of(&Level::WARN, "sled::pagecache"), Some(0));
        // A prefix of the name is not this crate.
        assert_eq!(of(&Level::DEBUG, "crd_apiserver_other"), Some(5));
    }
}
