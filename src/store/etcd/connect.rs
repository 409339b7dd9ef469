//! Reaching etcd: the client (endpoints, TLS from `--etcd-cafile/certfile/keyfile`), etcd's
//! errors as the storage contract names them, and the first contact at start-up, retried
//! while etcd is unreachable and refused at once when it can never succeed (bad credentials).

use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use super::EtcdOptions;
use crate::store::{Error, Result, Revision};

/// Reads a PEM file named by a flag.
fn read_pem(flag: &str, path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Backend(format!("{flag} {}: {e}", path.display())))
}

/// The TLS settings the flags ask for, or `None` for plain connections.
fn tls_options(options: &EtcdOptions) -> Result<Option<TlsOptions>> {
    let identity = match (&options.cert_file, &options.key_file) {
        (Some(cert), Some(key)) => {
            Some(Identity::from_pem(read_pem("--etcd-certfile", cert)?, read_pem("--etcd-keyfile", key)?))
        }
        (None, None) => None,
        _ => return Err(Error::Backend("--etcd-certfile and --etcd-keyfile must be given together".into())),
    };
    if options.ca_file.is_none() && identity.is_none() {
        return Ok(None);
    }
    let mut tls = TlsOptions::new();
    if let Some(ca) = &options.ca_file {
        tls = tls.ca_certificate(Certificate::from_pem(read_pem("--etcd-cafile", ca)?));
    }
    if let Some(identity) = identity {
        tls = tls.identity(identity);
    }
    Ok(Some(tls))
}

/// A client of the etcd cluster, every call bounded by the request timeout. Connections are
/// made lazily, per call.
pub(super) async fn client(options: &EtcdOptions) -> Result<Client> {
    connect(options, Some(options.request_timeout)).await
}

/// A client whose calls take as long as etcd takes to answer them: an election campaign
/// answers once it wins, which may be much later. A connection that dies still ends its calls
/// (keep-alive pings every 10 s, answered within 5 s).
pub(super) async fn waiting_client(options: &EtcdOptions) -> Result<Client> {
    connect(options, None).await
}

async fn connect(options: &EtcdOptions, timeout: Option<Duration>) -> Result<Client> {
    if options.servers.is_empty() {
        return Err(Error::Backend("--etcd-servers is required with --storage-backend=etcd3".into()));
    }
    let mut connect = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(5))
        .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
        .with_keep_alive_while_idle(true);
    if let Some(timeout) = timeout {
        connect = connect.with_timeout(timeout);
    }
    if let Some(tls) = tls_options(options)? {
        connect = connect.with_tls(tls);
    }
    Client::connect(&options.servers, Some(connect)).await.map_err(|e| Error::Backend(describe(&e)))
}

/// An etcd error with every cause it wraps, so that a TLS or connection failure says why.
pub(super) fn describe(error: &etcd_client::Error) -> String {
    if let etcd_client::Error::GRpcStatus(status) = error {
        let mut text = status.message().to_string();
        let mut source = std::error::Error::source(status);
        while let Some(cause) = source {
            let cause = cause.to_string();
            if !text.contains(&cause) {
                text = format!("{text}: {cause}");
            }
            source = cause_of(source);
        }
        return if text.is_empty() { format!("{:?}", status.code()) } else { text };
    }
    crate::core::error_chain::describe(error)
}

fn cause_of<'a>(error: Option<&'a (dyn std::error::Error + 'static)>) -> Option<&'a (dyn std::error::Error + 'static)> {
    error.and_then(std::error::Error::source)
}

/// etcd's answer for a value over `--max-request-bytes`, which kube-apiserver passes through.
pub(super) const REQUEST_TOO_LARGE: &str = "etcdserver: request is too large";

/// Maps an etcd error onto the storage contract.
pub(super) fn storage_error(error: etcd_client::Error) -> Error {
    use tonic::Code;
    let text = describe(&error);
    match &error {
        etcd_client::Error::GRpcStatus(status) => match status.code() {
            _ if text.contains("request is too large") => Error::RequestTooLarge(REQUEST_TOO_LARGE.into()),
            // gRPC's own limit (etcd's request limit plus its overhead) refuses larger ones.
            Code::ResourceExhausted if text.contains("larger than max") => {
                Error::RequestTooLarge(REQUEST_TOO_LARGE.into())
            }
            Code::Unavailable | Code::Cancelled | Code::Unknown if is_connection_failure(&text) => {
                Error::Unavailable(format!("etcd: {text}"))
            }
            Code::Unavailable => Error::Unavailable(format!("etcd: {text}")),
            Code::DeadlineExceeded => Error::Timeout(format!("etcd: {text}")),
            _ => Error::Backend(format!("etcd: {text}")),
        },
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => {
            Error::Unavailable(format!("etcd: {text}"))
        }
        _ => Error::Backend(format!("etcd: {text}")),
    }
}

fn is_connection_failure(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    ["connect", "connection", "transport", "broken pipe", "unavailable"].iter().any(|w| text.contains(w))
}

/// True for failures that retrying cannot cure: the certificates or credentials are wrong.
pub(super) fn is_permanent(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    ["certificate", "unknownissuer", "handshake", "tls", "permission denied", "authentication"]
        .iter()
        .any(|w| text.contains(w))
}

/// Converts an etcd revision (never negative) to ours.
pub(super) fn revision(etcd: i64) -> Revision {
    u64::try_from(etcd).unwrap_or(0)
}

/// Converts our revision to etcd's.
pub(super) fn etcd_revision(revision: Revision) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}
