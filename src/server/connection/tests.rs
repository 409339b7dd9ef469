//! A connection's timeouts in virtual time, over an in-memory stream: Go's header and idle
//! timeouts, each from the moment Go starts it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

use super::*;
use crate::api::body::bytes_response;
use crate::server::filters::endpoint;

const HEADER: Duration = Duration::from_secs(32);
const IDLE: Duration = Duration::from_secs(90);

/// A connection served with k8s.io/apiserver's timeouts and a handler that answers `/slow`
/// after 200 s and anything else at once; the client's end.
fn connect() -> DuplexStream {
    connect_watched().0
}

/// [`connect`], with the connection's activity.
fn connect_watched() -> (DuplexStream, Arc<Activity>) {
    let (client, server) = tokio::io::duplex(1 << 16);
    let handler = endpoint(|request: http::Request<_>| async move {
        if request.uri().path() == "/slow" {
            tokio::time::sleep(Duration::from_secs(200)).await;
        }
        bytes_response(StatusCode::OK, "text/plain", Bytes::from_static(b"ok"))
    });
    let info = ConnInfo::new(([127, 0, 0, 1], 1).into(), Vec::new());
    let activity = info.activity.clone();
    let settings = Arc::new(ConnectionSettings::default());
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(async move {
        serve_stream(server, info, handler, settings, shutdown).await;
        drop(stop);
    });
    (client, activity)
}

/// Reads the answer to one request (its head and a two-byte body).
async fn answer(client: &mut DuplexStream) -> String {
    let mut received = Vec::new();
    let mut buffer = [0u8; 1024];
    while !received.ends_with(b"\r\n\r\nok") {
        let n = client.read(&mut buffer).await.unwrap();
        assert!(n > 0, "closed before answering: {}", String::from_utf8_lossy(&received));
        received.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8(received).unwrap()
}

/// How long after `since` the server closed the connection (reading nothing more).
async fn closed_after(client: &mut DuplexStream, since: Instant) -> Duration {
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    Instant::now() - since
}

const GET: &[u8] = b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n";

#[tokio::test(start_paused = true)]
async fn a_new_connection_has_the_header_timeout_to_send_its_first_head() {
    let mut silent = connect();
    assert_eq!(closed_after(&mut silent, Instant::now()).await, HEADER);

    let mut slow = connect();
    let opened = Instant::now();
    tokio::time::sleep(Duration::from_secs(20)).await;
    slow.write_all(b"GET /version HTTP/1.1\r\nHo").await.unwrap();
    assert_eq!(closed_after(&mut slow, opened).await, HEADER);
}

#[tokio::test(start_paused = true)]
async fn a_kept_alive_connection_waits_the_idle_timeout_then_the_header_timeout_for_its_next_head() {
    let mut client = connect();
    client.write_all(GET).await.unwrap();
    assert!(answer(&mut client).await.starts_with("HTTP/1.1 200 OK"));
    let answered = Instant::now();
    // Quiet for longer than the header timeout: still served.
    tokio::time::sleep(Duration::from_secs(80)).await;
    client.write_all(GET).await.unwrap();
    assert!(answer(&mut client).await.starts_with("HTTP/1.1 200 OK"));
    assert_eq!(Instant::now() - answered, Duration::from_secs(80));
    // Then silent: closed at the idle timeout.
    assert_eq!(closed_after(&mut client, Instant::now()).await, IDLE);

    // A next head that begins and never ends: the header timeout from its first bytes.
    let mut partial = connect();
    partial.write_all(GET).await.unwrap();
    answer(&mut partial).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    partial.write_all(b"GET /version HTTP/1.1\r\n").await.unwrap();
    assert_eq!(closed_after(&mut partial, Instant::now()).await, HEADER);
}

#[tokio::test(start_paused = true)]
async fn a_request_in_flight_is_never_timed_out() {
    let mut client = connect();
    client.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let sent = Instant::now();
    assert!(answer(&mut client).await.starts_with("HTTP/1.1 200 OK"));
    assert_eq!(Instant::now() - sent, Duration::from_secs(200));
    assert_eq!(closed_after(&mut client, Instant::now()).await, IDLE);
}

#[tokio::test(start_paused = true)]
async fn an_evicted_connection_goes_at_once_when_idle_and_after_its_request_when_busy() {
    // Idle after a request, and new without one: closed, and dropped, at once.
    let (mut idle, activity) = connect_watched();
    idle.write_all(GET).await.unwrap();
    answer(&mut idle).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    activity.evict();
    assert_eq!(closed_after(&mut idle, Instant::now()).await, Duration::ZERO);
    let (mut unused, activity) = connect_watched();
    activity.evict();
    assert_eq!(closed_after(&mut unused, Instant::now()).await, Duration::ZERO);

    // Asked to go while its request runs: the answer still comes, then the close.
    let (mut busy, activity) = connect_watched();
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    activity.evict();
    let asked = Instant::now();
    let answer = answer(&mut busy).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert_eq!(closed_after(&mut busy, asked).await, Duration::from_secs(199));
}
