//! No client holds the server's connections for free: a new connection must send its first
//! request head within the header timeout (as must a TLS handshake), a kept-alive one may idle
//! up to the idle timeout and then has the header timeout for its next head (watches are
//! never idle), and at the open-connection cap the connections doing nothing give way to new
//! clients (unused ones first, then anonymous ones), while busy ones are kept and new clients
//! wait. The timeouts are configured here, short or long as each test needs; their defaults
//! are k8s.io/apiserver's (32 s for headers, 90 s idle). `server::connection`'s unit tests
//! check the same timeouts to the second in virtual time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

/// Long enough never to pass during a test.
const NEVER: &str = "1h";
const WATCH: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs?watch=1";

fn server_with(flags: &[&str]) -> TestServer {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    server.spawn(flags);
    server
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Reads until the server closes the connection; returns what was read and when it closed,
/// or None if it was still open at `limit`.
async fn read_until_closed<S: AsyncReadExt + Unpin>(stream: &mut S, limit: Duration) -> Option<(Vec<u8>, Instant)> {
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some((received, Instant::now())),
            Ok(Ok(n)) => received.extend_from_slice(&buffer[..n]),
        }
    }
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let server = server_with(&["--http-header-read-timeout", "1s"]);
    let client = Client::admin(&server);
    runtime().block_on(async {
        let mut slow = client.connect_tls().await.unwrap();
        slow.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
        slow.flush().await.unwrap();
        let started = Instant::now();
        let (_, closed) = read_until_closed(&mut slow, Duration::from_secs(15)).await.expect("slow client kept");
        assert!(closed.duration_since(started) >= Duration::from_millis(900));
        // The server itself is fine.
        let mut fresh = client.connect_tls().await.unwrap();
        fresh.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.unwrap();
        let (answer, _) = read_until_closed(&mut fresh, Duration::from_secs(10)).await.unwrap();
        assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    });
}

#[test]
fn a_client_that_never_finishes_its_tls_handshake_is_disconnected() {
    // Go gives the TLS handshake the header timeout.
    let server = server_with(&["--http-header-read-timeout", "1s", "--http-idle-timeout", NEVER]);
    runtime().block_on(async {
        let mut silent = tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await.unwrap();
        let started = Instant::now();
        let (_, closed) = read_until_closed(&mut silent, Duration::from_secs(60)).await.expect("silent client kept");
        assert!(closed.duration_since(started) >= Duration::from_millis(900), "{:?}", closed.duration_since(started));
    });
    assert_eq!(Client::admin(&server).get("/version").unwrap().status, 200);
}

#[test]
fn a_connection_that_sends_no_request_is_closed_at_the_header_timeout_not_the_idle_one() {
    let server = server_with(&["--http-header-read-timeout", "1s", "--http-idle-timeout", NEVER]);
    let client = Client::admin(&server);
    runtime().block_on(async {
        let mut silent = client.connect_tls().await.unwrap();
        let started = Instant::now();
        let (received, closed) =
            read_until_closed(&mut silent, Duration::from_secs(60)).await.expect("a silent connection was kept");
        assert!(received.is_empty());
        assert!(closed.duration_since(started) >= Duration::from_millis(900));
    });
}

/// One HTTP/1.1 request on an open connection; the answer's status line, read through its
/// Content-Length body so that the connection can carry another.
async fn exchange_on<S: AsyncReadExt + AsyncWriteExt + Unpin>(stream: &mut S, path: &str) -> String {
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&received).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length: ").map(|n| n.trim().parse::<usize>().unwrap())
                })
                .expect("a Content-Length");
            if body.len() >= length {
                return head.lines().next().unwrap().to_string();
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buffer)).await.unwrap().unwrap();
        assert!(n > 0, "closed before answering: {text}");
        received.extend_from_slice(&buffer[..n]);
    }
}

#[test]
fn a_kept_alive_connection_outlives_the_header_timeout_while_it_idles() {
    let server = server_with(&["--http-header-read-timeout", "1s", "--http-idle-timeout", NEVER]);
    let client = Client::admin(&server);
    runtime().block_on(async {
        let mut kept = client.connect_tls().await.unwrap();
        assert_eq!(exchange_on(&mut kept, "/version").await, "HTTP/1.1 200 OK");
        // Idle three header timeouts: a kept-alive connection waits for the idle timeout.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(exchange_on(&mut kept, "/version").await, "HTTP/1.1 200 OK");
        // A next head that never ends is cut at the header timeout from its first bytes.
        kept.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\n").await.unwrap();
        let started = Instant::now();
        let (received, closed) = read_until_closed(&mut kept, Duration::from_secs(60)).await.expect("kept");
        assert!(received.is_empty(), "{}", String::from_utf8_lossy(&received));
        assert!(closed.duration_since(started) >= Duration::from_millis(900));
    });
}

#[test]
fn idle_connections_are_closed_but_quiet_watches_are_not() {
    let server = server_with(&["--http-idle-timeout", "2s"]);
    let client = Client::admin(&server);
    runtime().block_on(async {
        // A keep-alive connection that made one request and then stays silent.
        let mut idle = client.connect_tls().await.unwrap();
        idle.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
        // A watch on an empty collection: no event for longer than the idle timeout.
        let mut watch = client.raw_get(WATCH).await;
        let started = Instant::now();
        let (answer, closed) = read_until_closed(&mut idle, Duration::from_secs(20)).await.expect("idle kept");
        assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
        assert!(closed.duration_since(started) >= Duration::from_millis(1900));
        assert!(read_until_closed(&mut watch, Duration::from_secs(3)).await.is_none(), "the watch was closed");
    });
}

/// Whether the server closed `stream` (read to its end within the hang guard).
async fn is_closed<S: AsyncReadExt + Unpin>(stream: &mut S) -> bool {
    read_until_closed(stream, Duration::from_secs(60)).await.is_some()
}

/// A server of three connections at most, whose timeouts never pass: only giving way can
/// make room.
fn capped_server() -> TestServer {
    server_with(&["--max-open-connections", "3", "--http-header-read-timeout", NEVER, "--http-idle-timeout", NEVER])
}

#[test]
fn at_the_connection_cap_connections_that_never_sent_a_request_give_way() {
    let server = capped_server();
    let admin = Client::admin(&server);
    runtime().block_on(async {
        // Three connections that never send a request fill the server; a normal request is
        // served at once, in the place of the oldest of them.
        let mut unused = Vec::new();
        for _ in 0..3 {
            unused.push(admin.connect_tls().await.unwrap());
        }
        let served = tokio::task::spawn_blocking({
            let admin = admin.clone();
            move || admin.get("/version").unwrap().status
        });
        assert_eq!(tokio::time::timeout(Duration::from_secs(60), served).await.unwrap().unwrap(), 200);
        assert!(is_closed(&mut unused[0]).await, "the oldest unused connection was kept");
    });
}

#[test]
fn at_the_connection_cap_idle_connections_give_way_anonymous_ones_first() {
    let server = capped_server();
    let admin = Client::admin(&server);
    runtime().block_on(async {
        let mut authenticated = admin.connect_tls().await.unwrap();
        assert_eq!(exchange_on(&mut authenticated, "/version").await, "HTTP/1.1 200 OK");
        let mut anonymous = Client::new(&server, None).connect_tls().await.unwrap();
        assert!(exchange_on(&mut anonymous, "/apis").await.starts_with("HTTP/1.1 403"));
        let mut unused = admin.connect_tls().await.unwrap();
        // The unused connection goes first.
        let mut fourth = admin.connect_tls().await.unwrap();
        assert!(is_closed(&mut unused).await, "the unused connection was kept");
        assert_eq!(exchange_on(&mut fourth, "/version").await, "HTTP/1.1 200 OK");
        // Of idle connections, the one whose requests were all anonymous goes first.
        let mut fifth = admin.connect_tls().await.unwrap();
        assert!(is_closed(&mut anonymous).await, "the anonymous connection was kept");
        for kept in [&mut authenticated, &mut fourth, &mut fifth] {
            assert_eq!(exchange_on(kept, "/version").await, "HTTP/1.1 200 OK");
        }
    });
}

#[test]
fn at_the_connection_cap_busy_connections_are_kept_and_new_clients_wait() {
    let server = server_with(&["--max-open-connections", "2"]);
    let client = Client::admin(&server);
    runtime().block_on(async {
        // Two watches: requests in flight for as long as they stream.
        let mut first = client.raw_get(WATCH).await;
        let mut second = client.raw_get(WATCH).await;
        for watch in [&mut first, &mut second] {
            let mut head = [0u8; 12];
            watch.read_exact(&mut head).await.unwrap();
            assert_eq!(&head, b"HTTP/1.1 200");
        }
        // A third client cannot even finish its handshake while both stream.
        let waiting = tokio::spawn({
            let client = client.clone();
            async move { client.connect_tls().await }
        });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!waiting.is_finished(), "a third connection was accepted");
        // The watches go on.
        assert!(read_until_closed(&mut second, Duration::from_millis(200)).await.is_none(), "a watch was closed");
        // When one ends, its slot goes to the waiting client.
        drop(first);
        let mut third = tokio::time::timeout(Duration::from_secs(60), waiting).await.unwrap().unwrap().unwrap();
        assert_eq!(exchange_on(&mut third, "/version").await, "HTTP/1.1 200 OK");
    });
}

/// Sends `request` on a fresh connection and returns the answer's head and Status body.
async fn refused(client: &Client, request: Vec<u8>) -> (String, serde_json::Value) {
    let mut stream = client.connect_tls().await.unwrap();
    // The server may answer and close before reading everything: a failed write is fine.
    let _ = stream.write_all(&request).await;
    let _ = stream.flush().await;
    let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(10)).await.expect("connection kept open");
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no answer: {answer:?}"));
    (head.to_string(), serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}")))
}

#[test]
fn requests_too_large_to_read_get_a_status() {
    let server = server_with(&[]);
    let client = Client::admin(&server);
    let collection = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    runtime().block_on(async {
        // A request line longer than 65,534 bytes.
        let long = format!("GET {collection}?labelSelector={} HTTP/1.1\r\nHost: localhost\r\n\r\n", "a".repeat(70_000));
        let (head, status) = refused(&client, long.into_bytes()).await;
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 414);
        assert_eq!(status["message"], "the request URI is longer than the server accepts (65534 bytes)");

        // A head past 1 MiB, as Go's MaxHeaderBytes refuses it; and too many header fields.
        let huge = format!("GET {collection} HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n", "x".repeat(3 << 20));
        let many: String = (0..200).map(|i| format!("X-Field-{i}: v\r\n")).collect();
        let many = format!("GET {collection} HTTP/1.1\r\nHost: localhost\r\n{many}\r\n");
        for request in [huge, many] {
            let (head, status) = refused(&client, request.into_bytes()).await;
            assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{head}");
            assert_eq!(status["code"], 431);
            assert_eq!(status["reason"], "RequestHeaderFieldsTooLarge");
        }
    });
    // Heads below the limit are served, however large.
    let big = Client::admin(&server).header("X-Big", &"x".repeat(600_000));
    assert_eq!(big.get("/apis/stable.example.com/v1/namespaces/default/crontabs").unwrap().status, 200);
}

#[test]
fn http2_header_lists_past_the_limit_get_a_status() {
    let server = server_with(&[]);
    let collection = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    let ask = |client: Client| client.http2().get(collection).unwrap();

    // Below Go's limit (1 MiB and ten fields' overhead): served, over HTTP/2.
    let served = ask(Client::admin(&server).header("X-Big", &"x".repeat(900_000)));
    assert_eq!((served.version, served.status), (http::Version::HTTP_2, 200), "{}", served.text());

    // Past it, as one large field, as many fields, and far past it (3 MiB): a 431 Status, as
    // over HTTP/1.1.
    let many = (0..1800).fold(Client::admin(&server), |c, i| c.header(&format!("x-field-{i}"), &"v".repeat(600)));
    for (case, client) in [
        ("one field", Client::admin(&server).header("X-Big", &"x".repeat((1 << 20) + 1024))),
        ("many fields", many),
        ("3 MiB", Client::admin(&server).header("X-Big", &"x".repeat(3 << 20))),
    ] {
        let refused = ask(client);
        assert_eq!((refused.version, refused.status), (http::Version::HTTP_2, 431), "{case}: {}", refused.text());
        assert_eq!(refused.headers["content-type"], "application/json", "{case}");
        let status = refused.json();
        assert_eq!(status["kind"], "Status", "{case}");
        assert_eq!(status["code"], 431, "{case}");
        assert_eq!(status["reason"], "RequestHeaderFieldsTooLarge", "{case}");
        assert_eq!(status["message"], "the request's header fields are larger than the server accepts", "{case}");
    }

    // Past h2's own limit (4 MiB) h2 answers 431 itself, without a body; the connection and
    // the server go on serving.
    let beyond = ask(Client::admin(&server).header("X-Big", &"x".repeat(4 << 20)));
    assert_eq!(beyond.status, 431);
    assert_eq!(ask(Client::admin(&server)).status, 200);
}
