//! A connection's timeouts in virtual time, over an in-memory stream: Go's header and idle
//! timeouts, each from the moment Go starts it.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;
use tokio_stream::StreamExt;

use super::*;
use crate::api::body::bytes_response;
use crate::api::watch::pipe;
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
        serve_stream(server, Protocol::Http1, info, handler, settings, shutdown, Streaming::default()).await;
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

/// Ciphertext the in-memory transport takes before a client that does not read blocks the
/// server's writes (a socket's send and receive buffers, which are the kernel's memory).
const TRANSIT: usize = 8 << 10;

/// A watch body over TLS that a client stopped reading: the server holds no more of it than
/// the watch's line budget and one small TLS record, whatever it had to say.
#[tokio::test(start_paused = true)]
async fn a_watch_whose_client_stops_reading_holds_its_line_budget_and_one_small_tls_record() {
    let held = held_for_a_client_that_stops_reading(true).await;
    assert!(
        held <= pipe::BUDGET + TLS_STREAMING_SEND_BUFFER_BYTES,
        "{held} bytes held by the server (budget {}, TLS record {TLS_STREAMING_SEND_BUFFER_BYTES})",
        pipe::BUDGET
    );
}

/// The same body not marked as trickling out (a long list, say) is sealed in full records:
/// the bound above is what the small records bring.
#[tokio::test(start_paused = true)]
async fn a_body_not_marked_as_streamed_is_sealed_in_full_records() {
    let held = held_for_a_client_that_stops_reading(false).await;
    assert!(held > pipe::BUDGET + TLS_STREAMING_SEND_BUFFER_BYTES, "{held} bytes held by the server");
    assert!(
        held <= pipe::BUDGET + TLS_SEND_BUFFER_BYTES,
        "{held} bytes held by the server (budget {}, TLS record {TLS_SEND_BUFFER_BYTES})",
        pipe::BUDGET
    );
}

#[test]
fn a_streaming_response_ends_with_its_body() {
    let streaming = Streaming::default();
    let response = streaming.start();
    assert!(streaming.now());
    drop(response);
    assert!(!streaming.now());
}

/// Plaintext of a watch-like body (4 KiB lines under the watch's budget) that the server took
/// but did not get through to a client that stopped reading; `streamed`: its response is
/// marked as trickling out.
async fn held_for_a_client_that_stops_reading(streamed: bool) -> usize {
    // The watch's task writes 4 KiB lines for as long as the connection takes them.
    const LINE: usize = 4 << 10;
    let queued = Arc::new(AtomicUsize::new(0));
    let handler = {
        let queued = queued.clone();
        endpoint(move |_request: http::Request<_>| {
            let queued = queued.clone();
            async move {
                let (sink, body) = pipe::channel();
                tokio::spawn(async move {
                    while sink.send(vec![b'x'; LINE]).await {
                        queued.fetch_add(LINE, Ordering::SeqCst);
                    }
                });
                let mut response = http::Response::new(body);
                if streamed {
                    response.extensions_mut().insert(Streamed);
                }
                response
            }
        })
    };
    let (mut client, _stop) = connect_tls(handler, TRANSIT, &[]).await;
    client.write_all(b"GET /watch HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    client.flush().await.unwrap();
    // Virtual time moves only once every task waits: the server is stalled on the transport.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let queued = queued.load(Ordering::SeqCst);
    // What left the server is in transit (plaintext is no longer than its ciphertext).
    let held = queued.saturating_sub(TRANSIT);
    assert!(queued >= TRANSIT + pipe::BUDGET, "the watch filled its budget: {queued} bytes queued");
    drop(client);
    held
}

/// A TLS connection to `handler` served by `serve` over an in-memory transport holding
/// `transit` bytes each way, the client asking for the `alpn` protocols; the client's end,
/// and the server's shutdown switch.
async fn connect_tls(
    handler: Next,
    transit: usize,
    alpn: &[&[u8]],
) -> (tokio_rustls::client::TlsStream<DuplexStream>, watch::Sender<bool>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = certified.cert.der().clone();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = crate::server::tls::provider();
    let mut server_tls = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    server_tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let mut client_tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client_tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();

    let (client, server) = tokio::io::duplex(transit);
    let info = ConnInfo::new(([127, 0, 0, 1], 1).into(), Vec::new());
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(serve(
        server,
        info.remote,
        TlsAcceptor::from(Arc::new(server_tls)),
        handler,
        Arc::new(ConnectionSettings::default()),
        shutdown,
        info.activity,
    ));
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let client = tokio_rustls::TlsConnector::from(Arc::new(client_tls)).connect(name, client).await.unwrap();
    (client, stop)
}

/// HTTP/2's connection preface, as a client that speaks it first sends it.
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the server sends on `client` after the HTTP/2 preface until it closes the connection
/// (at most 4 KiB).
async fn answer_to_the_http2_preface(client: &mut tokio_rustls::client::TlsStream<DuplexStream>) -> Vec<u8> {
    client.write_all(HTTP2_PREFACE).await.unwrap();
    client.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap(); // an empty SETTINGS frame
    client.flush().await.unwrap();
    let mut answer = vec![0; 4096];
    let mut read = 0;
    // An HTTP/2 server answers with its SETTINGS frame (9 bytes of header first).
    while read < 9 {
        match client.read(&mut answer[read..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    answer.truncate(read);
    answer
}

/// The protocol is the one the TLS handshake agreed, as Go's server has it: a client that did
/// not ask for `h2` speaks HTTP/1.1, whatever its first bytes; the HTTP/2 preface is no
/// HTTP/1.1 request, and gets no HTTP/2 frame back.
#[tokio::test(start_paused = true)]
async fn a_client_that_did_not_ask_for_h2_is_not_served_http2() {
    let handler = endpoint(|_request: http::Request<_>| async move {
        bytes_response(StatusCode::OK, "text/plain", Bytes::from_static(b"ok"))
    });
    for alpn in [&[][..], &[&b"http/1.1"[..]][..]] {
        let (mut client, _stop) = connect_tls(handler.clone(), 1 << 16, alpn).await;
        let answer = answer_to_the_http2_preface(&mut client).await;
        assert!(
            answer.len() < 9 || answer[3] != 4,
            "an HTTP/2 SETTINGS frame for a client asking for {alpn:?}: {answer:?}"
        );
        let (mut client, _stop) = connect_tls(handler.clone(), 1 << 16, alpn).await;
        client.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        client.flush().await.unwrap();
        let mut head = [0; 15];
        client.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200 OK");
    }
}

/// A client that asked for `h2` is served HTTP/2 from its first bytes.
#[tokio::test(start_paused = true)]
async fn a_client_that_asked_for_h2_is_served_http2() {
    let handler = endpoint(|_request: http::Request<_>| async move {
        bytes_response(StatusCode::OK, "text/plain", Bytes::from_static(b"ok"))
    });
    let (mut client, _stop) = connect_tls(handler, 1 << 16, &[b"h2"]).await;
    let answer = answer_to_the_http2_preface(&mut client).await;
    assert!(answer.len() >= 9 && answer[3] == 4, "no HTTP/2 SETTINGS frame first: {answer:?}");
}

/// The frames of the first-watch tests' stream, by the test.
type Frames = tokio::sync::mpsc::Sender<Bytes>;

/// The handler of the first-watch tests: `/watch/...` answers a stream whose frames the test
/// sends (empty ones among them) and which ends when the test drops its sender, marked as
/// trickling out; `/refused/watch` a whole 403; anything else `ok`. Counts its calls; each
/// stream's sender comes out of `streams`.
fn watch_handler(streams: tokio::sync::mpsc::UnboundedSender<Frames>, calls: Arc<AtomicUsize>) -> Next {
    endpoint(move |request: http::Request<_>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let path = request.uri().path().to_string();
        let streams = streams.clone();
        async move {
            if path == "/refused/watch" {
                return bytes_response(
                    StatusCode::FORBIDDEN,
                    "application/json",
                    Bytes::from_static(b"{\"code\":403}"),
                );
            }
            if !path.starts_with("/watch/") {
                return bytes_response(StatusCode::OK, "text/plain", Bytes::from_static(b"ok"));
            }
            let (frames, received) = tokio::sync::mpsc::channel::<Bytes>(16);
            streams.send(frames).unwrap();
            let stream = tokio_stream::wrappers::ReceiverStream::new(received)
                .map(|bytes| Ok::<_, Infallible>(http_body::Frame::data(bytes)));
            let mut response = http::Response::new(http_body_util::StreamBody::new(stream).boxed_unsync());
            let headers = response.headers_mut();
            headers.insert(http::header::CONTENT_TYPE, "application/json".parse().unwrap());
            headers.append("x-multi", "a".parse().unwrap());
            headers.insert("audit-id", "7".parse().unwrap());
            headers.append("x-multi", "b".parse().unwrap());
            response.extensions_mut().insert(Streamed);
            response
        }
    })
}

/// A plain connection served by `serve_stream` with `handler`; the client's end.
fn connect_to(handler: Next) -> DuplexStream {
    let (client, server) = tokio::io::duplex(1 << 16);
    let info = ConnInfo::new(([127, 0, 0, 1], 1).into(), Vec::new());
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(async move {
        serve_stream(
            server,
            Protocol::Http1,
            info,
            handler,
            Arc::new(ConnectionSettings::default()),
            shutdown,
            Streaming::default(),
        )
        .await;
        drop(stop);
    });
    client
}

/// Reads from `client` until what was read ends with `end`.
async fn read_until(client: &mut DuplexStream, end: &[u8]) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    while !received.ends_with(end) {
        let n = client.read(&mut buffer).await.unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&received));
        received.extend_from_slice(&buffer[..n]);
    }
    received
}

/// Sends the test's frames, then ends the stream.
async fn stream_frames(streams: &mut tokio::sync::mpsc::UnboundedReceiver<Frames>) {
    let frames = streams.recv().await.unwrap();
    for frame in [&b"{\"type\":\"ADDED\"}\n"[..], b"", &[b'x'; 20_000], b"z"] {
        frames.send(Bytes::copy_from_slice(frame)).await.unwrap();
    }
}

/// `answer` with its date's value blanked.
fn without_date(answer: &[u8]) -> String {
    let text = String::from_utf8(answer.to_vec()).unwrap();
    let at = text.find("\r\ndate: ").unwrap() + "\r\ndate: ".len();
    let end = at + text[at..].find("\r\n").unwrap();
    format!("{}DATE{}", &text[..at], &text[end..])
}

const WATCH: &[u8] = b"GET /watch/things?watch=true HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n";

/// A watch that opens an HTTP/1.1 connection is served without hyper, and its client gets the
/// very bytes hyper sends for the same watch later on a kept-alive connection; once it ends,
/// the connection is kept alive and hyper serves it.
#[tokio::test(start_paused = true)]
async fn a_first_watch_is_sent_as_hyper_sends_it_and_the_connection_is_kept_alive() {
    let (streams, mut streamed) = tokio::sync::mpsc::unbounded_channel();
    let calls = Arc::new(AtomicUsize::new(0));
    let handler = watch_handler(streams, calls.clone());

    // Served by hyper: the watch as a kept-alive connection's second request.
    let mut client = connect_to(handler.clone());
    client.write_all(GET).await.unwrap();
    assert!(answer(&mut client).await.starts_with("HTTP/1.1 200 OK"));
    client.write_all(WATCH).await.unwrap();
    stream_frames(&mut streamed).await;
    let by_hyper = read_until(&mut client, b"\r\n0\r\n\r\n").await;

    // The first request of its connection: served by `first_watch`, which gives the connection
    // to hyper once the watch is over, with nothing to replay.
    let (mut client, mut server) = tokio::io::duplex(1 << 16);
    let info = ConnInfo::new(([127, 0, 0, 1], 1).into(), Vec::new());
    let activity = info.activity.clone();
    let responder = Responder { info, handler: handler.clone(), streaming: Streaming::default() };
    let (_stop, mut shutdown) = watch::channel(false);
    let first = tokio::spawn(async move {
        let settings = ConnectionSettings::default();
        match first_watch(&mut server, &responder, &settings, &mut shutdown).await {
            FirstWatch::Hyper { replay, prepared } => Some((replay, prepared.is_some())),
            FirstWatch::Gone => None,
        }
    });
    client.write_all(WATCH).await.unwrap();
    stream_frames(&mut streamed).await;
    let by_us = read_until(&mut client, b"\r\n0\r\n\r\n").await;
    assert_eq!(first.await.unwrap(), Some((Vec::new(), false)), "served without hyper");
    assert_eq!(without_date(&by_us), without_date(&by_hyper));
    assert!(by_us.starts_with(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-multi: a\r\nx-multi: b\r\n"));
    assert_eq!(activity.deadline(HEADER, IDLE).map(|(_, expiry)| expiry), Some(Expiry::Close), "the watch is over");

    // Through `serve_stream`: the watch, then a request hyper answers on the same connection.
    let mut client = connect_to(handler);
    client.write_all(WATCH).await.unwrap();
    stream_frames(&mut streamed).await;
    let again = read_until(&mut client, b"\r\n0\r\n\r\n").await;
    assert_eq!(without_date(&again), without_date(&by_hyper));
    client.write_all(GET).await.unwrap();
    assert!(answer(&mut client).await.starts_with("HTTP/1.1 200 OK"));
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

/// A client that closes its connection in the middle of a first watch ends the watch (its
/// body is dropped), as hyper ends it; one that sends its next request meanwhile gets it
/// answered once the watch is over.
#[tokio::test(start_paused = true)]
async fn a_first_watch_ends_with_its_client_and_keeps_what_it_sends_meanwhile() {
    let (streams, mut streamed) = tokio::sync::mpsc::unbounded_channel();
    let handler = watch_handler(streams, Arc::new(AtomicUsize::new(0)));

    let mut client = connect_to(handler.clone());
    client.write_all(WATCH).await.unwrap();
    let frames = streamed.recv().await.unwrap();
    frames.send(Bytes::from_static(b"one\n")).await.unwrap();
    read_until(&mut client, b"one\n\r\n").await;
    drop(client);
    tokio::time::timeout(Duration::from_secs(3600), frames.closed()).await.expect("the watch's body is dropped");

    let mut client = connect_to(handler);
    client.write_all(WATCH).await.unwrap();
    let frames = streamed.recv().await.unwrap();
    frames.send(Bytes::from_static(b"one\n")).await.unwrap();
    read_until(&mut client, b"one\n\r\n").await;
    client.write_all(GET).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    frames.send(Bytes::from_static(b"two\n")).await.unwrap();
    drop(frames);
    let rest = String::from_utf8(read_until(&mut client, b"\r\n\r\nok").await).unwrap();
    assert!(rest.starts_with("4\r\ntwo\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"), "{rest}");
}

/// A watch answered with a whole response (a refusal) is answered by hyper, as before, with
/// its length; the handler runs once for it, and the connection goes on.
#[tokio::test(start_paused = true)]
async fn a_first_watch_answered_whole_is_sent_by_hyper() {
    let (streams, _streamed) = tokio::sync::mpsc::unbounded_channel();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut client = connect_to(watch_handler(streams, calls.clone()));
    client.write_all(b"GET /refused/watch?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let refused = String::from_utf8(read_until(&mut client, b"{\"code\":403}\n").await).unwrap();
    assert!(refused.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{refused}");
    assert!(refused.contains("\r\ncontent-length: 13\r\n"), "{refused}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    client.write_all(GET).await.unwrap();
    assert!(answer(&mut client).await.starts_with("HTTP/1.1 200 OK"));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// The task of a connection lasts as long as the connection (a watch's, for as long as the
/// watch): the TLS handshake's locals take no room in it beside the served connection (it was
/// 6.4 KiB with them in this test's build, the TLS stream alone being 1.2 KiB).
#[test]
fn a_connection_s_task_keeps_nothing_of_its_handshake() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _guard = runtime.enter();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let tls = rustls::ServerConfig::builder_with_provider(crate::server::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
    let handler = endpoint(|_request: http::Request<_>| async move {
        bytes_response(StatusCode::OK, "text/plain", Bytes::from_static(b"ok"))
    });
    let (_client, server) = tokio::io::duplex(16);
    let info = ConnInfo::new(([127, 0, 0, 1], 1).into(), Vec::new());
    let (_stop, shutdown) = watch::channel(false);
    let settings = Arc::new(ConnectionSettings::default());
    let connection =
        serve(server, info.remote, TlsAcceptor::from(Arc::new(tls)), handler, settings, shutdown, info.activity);
    let stream = std::mem::size_of::<tokio_rustls::server::TlsStream<DuplexStream>>();
    assert!(
        std::mem::size_of_val(&connection) < 4096,
        "the connection's task holds {} bytes (its TLS stream {stream})",
        std::mem::size_of_val(&connection)
    );
}
