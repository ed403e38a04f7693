//! The HTTP listener under abuse, over real sockets: floods of idle and half-sent
//! connections, timeouts, connection caps; and TLS. A test binary of its own, so that its
//! floods and timings do not share the process with the other web tests.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rialto_server::RunningServer;
use rialto_server::web::auth::{now_ms, sign, signed_text};
use serde_json::{Value, json};

static WINDOWS: AtomicU64 = AtomicU64::new(0);

/// A receive window of its own: the same request twice in one millisecond is two requests.
fn window() -> String {
    (10_000 + WINDOWS.fetch_add(1, Ordering::SeqCst) % 50_000).to_string()
}

/// A signed GET over `stream`, HTTP/1.1 with `Connection: close`; returns the answer.
fn signed_get(
    stream: &mut (impl Read + Write),
    server: &RunningServer,
    user: i64,
    target: &str,
) -> String {
    let secret = server.credentials.user_secret(user);
    let (key, ts, n) = (user.to_string(), now_ms().to_string(), window());
    let sig = sign(&secret, &signed_text(&key, &ts, &n, "GET", target, b""));
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nRialto-Key: {key}\r\n\
         Rialto-Timestamp: {ts}\r\nRialto-Recv-Window: {n}\r\nRialto-Signature: {sig}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    // A TLS peer may close without close_notify: what was read is the answer all the same.
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

fn get(addr: SocketAddr, target: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A server that refuses the connection may close it before the request is written.
    let _ = write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

fn metric(addr: SocketAddr, name: &str) -> u64 {
    let text = get(addr, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// What /metrics and REST report has no event to wait on: checks until it holds (up to 20 s).
fn eventually(what: &str, f: impl FnMut() -> bool) {
    common::eventually(what, Duration::from_secs(20), f);
}

type Ws<S> = tungstenite::WebSocket<S>;

/// A WebSocket login; returns the answer.
fn ws_login<S: Read + Write>(ws: &mut Ws<S>, server: &RunningServer, user: i64) -> Value {
    let secret = server.credentials.user_secret(user);
    let (key, ts, n) = (user.to_string(), now_ms().to_string(), window());
    let sig = sign(&secret, &signed_text(&key, &ts, &n, "WS", "/ws", b""));
    let login =
        json!({"id": "login", "op": "login", "key": key, "ts": ts, "recv_window": n, "sig": sig});
    ws.send(tungstenite::Message::text(login.to_string()))
        .unwrap();
    loop {
        if let tungstenite::Message::Text(t) = ws.read().unwrap() {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["id"] == "login" {
                return v;
            }
        }
    }
}

fn ws_connect(addr: SocketAddr) -> Ws<TcpStream> {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    tungstenite::client(format!("ws://{addr}/ws"), stream)
        .unwrap()
        .0
}

/// Lets this process hold the flood's sockets and the server's side of them.
fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a struct of ours.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    assert!(
        limit.rlim_cur >= 6_000,
        "need 6,000 open files, may have {}",
        limit.rlim_cur
    );
}

#[test]
fn a_flood_of_idle_and_half_sent_connections_does_not_keep_a_real_client_out() {
    raise_open_files();
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let addr = server.web_addr.unwrap();
    // 2,000 connections from this address: silent ones, half-sent requests, and WebSocket
    // upgrades that never log in; all held open by the client.
    let mut flood = Vec::new();
    for i in 0..2_000 {
        let mut s = TcpStream::connect(addr).unwrap();
        match i % 3 {
            0 => {}
            1 => s.write_all(b"GET /api/v1/time HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap(),
            _ => s
                .write_all(
                    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                      Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                )
                .unwrap(),
        }
        flood.push(s);
    }
    eventually("the flood accepted", || {
        metric(addr, "rialto_http_connections_total{outcome=\"accepted\"}") >= 2_000
    });
    let pending = metric(addr, "rialto_http_connections{state=\"pending\"}");
    assert!(
        pending <= 64,
        "{pending} pending: at most max_connections_per_address"
    );
    assert!(metric(addr, "rialto_http_connections_total{outcome=\"shed\"}") >= 1_900);

    // A real client, from the same address, gets in at once.
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let answer = signed_get(&mut s, &server, 1, "/api/v1/balances");
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        took < Duration::from_millis(100),
        "a signed request took {took:?}"
    );

    let started = Instant::now();
    let mut ws = ws_connect(addr);
    let login = ws_login(&mut ws, &server, 2);
    let took = started.elapsed();
    assert_eq!(login["result"]["user"], 2, "{login}");
    assert!(
        took < Duration::from_millis(100),
        "a WebSocket login took {took:?}"
    );
    drop(flood);
    server.shutdown().unwrap();
}

/// Reads until the server closes; returns what came, or panics after `limit`.
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(limit)).unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("not closed after {:?}: {e}", started.elapsed()),
        }
    }
}

#[test]
fn idle_and_slow_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.web.header_read_timeout_ms = 300;
        c.web.ws_login_timeout_ms = 300;
        c.web.ws_idle_timeout_ms = 400;
    });
    let addr = server.web_addr.unwrap();

    // A request whose header never ends, and a connection that says nothing.
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(b"GET /api/v1/time HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut silent = TcpStream::connect(addr).unwrap();
    let started = Instant::now();
    read_until_closed(&mut half, Duration::from_secs(5));
    read_until_closed(&mut silent, Duration::from_secs(5));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // A WebSocket that neither logs in nor subscribes.
    let mut anonymous = ws_connect(addr);
    let closed = loop {
        match anonymous.read() {
            Ok(tungstenite::Message::Close(frame)) => break frame,
            Ok(_) => {}
            Err(e) => panic!("expected a close frame: {e}"),
        }
    };
    assert_eq!(closed.map(|f| u16::from(f.code)), Some(1008));

    // A logged-in WebSocket that answers the server's pings stays; one that does not goes.
    let mut alive = ws_connect(addr);
    assert_eq!(ws_login(&mut alive, &server, 1)["result"]["user"], 1);
    let mut deaf = ws_connect(addr);
    assert_eq!(ws_login(&mut deaf, &server, 2)["result"]["user"], 2);
    alive
        .get_mut()
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let started = Instant::now();
    let mut pinged = false;
    while started.elapsed() < Duration::from_millis(1_500) {
        match alive.read() {
            Ok(tungstenite::Message::Ping(_)) => pinged = true,
            Ok(other) => panic!("unexpected {other:?}"),
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("the connection that answers pings was closed: {e}"),
        }
    }
    assert!(pinged, "the server pings a quiet connection");
    // The deaf one's socket, read raw (no pong): a ping, then a close frame with 1001.
    let raw = read_until_closed(deaf.get_mut(), Duration::from_secs(5));
    let close = raw
        .windows(4)
        .any(|w| w[0] == 0x88 && w[2..4] == 1001u16.to_be_bytes());
    assert!(raw.contains(&0x89) && close, "{raw:?}");
    alive
        .send(tungstenite::Message::text(
            json!({"id": 1, "op": "subscribe", "ch": "bbo.BTC-USD"}).to_string(),
        ))
        .unwrap();
    server.shutdown().unwrap();
}

/// Sends one keep-alive GET and reads its answer's status line and headers (the connection
/// stays open).
fn keep_alive_get(s: &mut TcpStream, target: &str) -> String {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap() == 1 {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).to_string()
}

#[test]
fn an_address_over_its_connection_cap_is_refused_503() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| c.web.max_connections_per_address = 4);
    let addr = server.web_addr.unwrap();
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            let head = keep_alive_get(&mut s, "/api/v1/time");
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            s
        })
        .collect();
    let refused = get(addr, "/api/v1/time");
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("\"busy\""), "{refused}");
    // Another address is not affected; and once one connection closes, there is room again.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
        .unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut other: TcpStream = socket.into();
    assert!(keep_alive_get(&mut other, "/api/v1/time").starts_with("HTTP/1.1 200"));
    held.pop();
    eventually("room again", || {
        get(addr, "/api/v1/time").starts_with("HTTP/1.1 200")
    });
    server.shutdown().unwrap();
}

#[test]
fn tls_serves_https_and_wss_and_refuses_plaintext() {
    use rustls_pki_types::pem::PemObject;
    let dir = tempfile::tempdir().unwrap();
    let tls = rialto_server::tls::self_signed(&dir.path().join("tls")).unwrap();
    let cert = tls.cert.clone();
    let server = common::start(dir.path(), |c| c.tls = tls);
    let addr = server.web_addr.unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_file_iter(&cert).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let client = std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let connect = || {
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let conn = rustls::ClientConnection::new(client.clone(), name).unwrap();
        rustls::StreamOwned::new(conn, tcp)
    };
    let answer = signed_get(&mut connect(), &server, 1, "/api/v1/balances");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"currency\""), "{answer}");

    let (mut wss, _) = tungstenite::client("ws://localhost/ws", connect()).unwrap();
    assert_eq!(ws_login(&mut wss, &server, 1)["result"]["user"], 1);
    wss.send(tungstenite::Message::text(
        json!({"id": 2, "op": "subscribe", "ch": "bbo.BTC-USD"}).to_string(),
    ))
    .unwrap();
    let mut subscribed = false;
    while !subscribed {
        if let tungstenite::Message::Text(t) = wss.read().unwrap() {
            subscribed = serde_json::from_str::<Value>(&t).unwrap()["id"] == 2;
        }
    }

    let plain = get(addr, "/api/v1/time");
    assert!(
        !plain.contains("HTTP/1.1 200"),
        "plaintext HTTP was answered: {plain}"
    );
    server.shutdown().unwrap();
}
