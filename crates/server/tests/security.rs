//! The order, admin and FIX ports against an attacker (docs/security.md): a Logon that fails
//! authentication changes nothing, floods of idle sockets do not keep a real login out,
//! failed logins are throttled, resend storms cost what the attacker reads, message logs stay
//! under their cap and hold no password, and no file of the data directory is readable by
//! others.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use common::fix::{FixClient, message as fix_message};
use rialto_client::{Client, ClientError};
use rialto_fix::{next_frame, tags};
use rialto_server::RunningServer;
use rialto_wire::{ClientMsg, ErrorCode, ServerMsg};

/// A connection from `local` (any 127.x.y.z address is loopback) to `to`.
fn connect_from(local: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(IpAddr::V4(local), 0).into())?;
    socket.connect(&to.into())?;
    Ok(socket.into())
}

/// Lets this test process hold thousands of sockets.
fn raise_open_file_limit() {
    rialto_server::process::raise_open_file_limit();
}

fn open_orders(server: &RunningServer, user: i64) -> usize {
    match common::trader(server, user)
        .request(&ClientMsg::MyReport { request: 1 })
        .unwrap()
    {
        ServerMsg::Report { report, .. } => report.orders.len(),
        other => panic!("expected a report, got {other:?}"),
    }
}

fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

fn cancel_on_disconnect_for_trader3(config: &mut rialto_server::config::ServerConfig) {
    config.fix.cancel_on_disconnect = true;
}

#[test]
fn a_logon_with_a_wrong_password_changes_nothing_of_the_session() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), cancel_on_disconnect_for_trader3);
    let fix_addr = server.fix_addr.unwrap();
    let secret = server.credentials.user_secret(3);
    let mut trader = FixClient::connect(fix_addr, "TRADER3", "FIX.4.4");
    trader.logon_with(3, &secret);
    trader.expect("A");
    trader.new_order("O1", "1", "0.001", "50.00");
    trader.new_order("O2", "1", "0.001", "51.00");
    trader.expect("8");
    trader.expect("8");
    // A clean stop logs the session out without cancelling (the orders stay for the restart).
    server.shutdown().unwrap();

    let server = common::start(dir.path(), cancel_on_disconnect_for_trader3);
    let fix_addr = server.fix_addr.unwrap();
    assert_eq!(open_orders(&server, 3), 2);
    let fix_dir = dir.path().join("fix");
    let stored_before = bytes_under(&fix_dir);
    for password in ["wrong", "", &secret[..31]] {
        let mut attacker = FixClient::connect(fix_addr, "TRADER3", "FIX.4.4");
        attacker.logon_with(3, password);
        // Case 1S.c: closed without a message.
        attacker.expect_closed_without_a_message();
    }
    // Another user's valid secret does not open TRADER3's session either.
    let mut other = FixClient::connect(fix_addr, "TRADER3", "FIX.4.4");
    other.logon_with(4, &server.credentials.user_secret(4));
    other.expect_closed_without_a_message();

    assert_eq!(
        open_orders(&server, 3),
        2,
        "orders cancelled by a failed logon"
    );
    assert_eq!(
        bytes_under(&fix_dir),
        stored_before,
        "a failed logon wrote to the session's store or log"
    );
    // The real user logs on where the session stopped: Logon 1, two orders, Logout = 4 in;
    // Logon, two reports and the server's Logout = 4 out, so the reply is number 5.
    let mut trader = FixClient::connect(fix_addr, "TRADER3", "FIX.4.4");
    trader.seq = 5;
    trader.logon_with(3, &secret);
    let logon = trader.expect("A");
    assert_eq!(logon.get(tags::MSG_SEQ_NUM), Some("5"), "{logon:?}");
    server.shutdown().unwrap();
}

#[test]
fn the_message_log_holds_no_password_and_no_file_is_readable_by_others() {
    let _alone = alone();
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let secret = server.credentials.user_secret(2);
    let mut trader = FixClient::connect(server.fix_addr.unwrap(), "TRADER2", "FIX.4.4");
    trader.logon_with(2, &secret);
    trader.expect("A");
    trader.new_order("P1", "1", "0.001", "50.00");
    trader.expect("8");
    server.shutdown().unwrap();

    let mut seen = 0;
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::metadata(&path).unwrap();
        if path != dir.path() {
            let mode = meta.permissions().mode();
            assert_eq!(mode & 0o077, 0, "{} is {mode:o}", path.display());
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.file_name() != Some(rialto_server::demo::SECRETS_FILE.as_ref()) {
            // (The demo's secrets file holds them on purpose, owner-only like the rest.)
            seen += 1;
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds the password",
                path.display()
            );
        }
    }
    assert!(seen >= 4, "journal, key, FIX store and log: {seen} files");
}

#[test]
fn failed_logons_are_not_logged_and_logs_stay_under_their_cap() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |config| {
        config.fix.message_log_max_bytes = 1 << 20;
        config.fix.message_log_files = 1;
    });
    let fix_addr = server.fix_addr.unwrap();
    let secret = server.credentials.user_secret(5);
    let mut trader = FixClient::connect(fix_addr, "TRADER5", "FIX.4.4");
    trader.logon_with(5, &secret);
    trader.expect("A");
    let fix_dir = dir.path().join("fix");
    let before = bytes_under(&fix_dir);
    // Wrong-password Logons with a 60 KB field, from many addresses (past the throttle).
    let padding = "x".repeat(60_000);
    for i in 0..200u32 {
        let local = Ipv4Addr::new(127, 1, (i / 250) as u8, (i % 250 + 1) as u8);
        let mut s = connect_from(local, fix_addr).unwrap();
        let logon = fix_message(
            "FIX.4.4",
            "A",
            "TRADER5",
            1,
            &[
                (tags::HEART_BT_INT, "30"),
                (tags::USERNAME, "5"),
                (tags::PASSWORD, "wrong"),
                (tags::TEXT, &padding),
            ],
        );
        s.write_all(&logon).unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink); // the Logout, then the close
    }
    assert_eq!(bytes_under(&fix_dir), before, "refused logons were logged");
    // The session's own traffic rotates within its cap: 1 MiB files, one kept.
    for i in 0..1_200 {
        let id = format!("{i}-{padding:.1000}");
        trader.send("1", &[(tags::TEST_REQ_ID, &id)]);
        while trader
            .recv_within(Duration::from_secs(10))
            .expect("a heartbeat")
            .get(tags::TEST_REQ_ID)
            != Some(&id)
        {}
    }
    let log = std::fs::metadata(fix_dir.join("FIX.4.4-RIALTO-TRADER5.log")).unwrap();
    assert!(log.len() <= 1 << 20);
    assert!(fix_dir.join("FIX.4.4-RIALTO-TRADER5.log.1").exists());
    assert!(!fix_dir.join("FIX.4.4-RIALTO-TRADER5.log.2").exists());
    server.shutdown().unwrap();
}

/// Round trips of a binary Heartbeat, in µs, sorted.
fn round_trips(client: &mut Client, n: usize) -> Vec<u64> {
    let mut samples: Vec<u64> = (0..n)
        .map(|i| {
            let sent = Instant::now();
            client
                .send(&ClientMsg::Heartbeat { nonce: i as u64 })
                .unwrap();
            match client.recv().unwrap() {
                ServerMsg::Heartbeat { .. } => sent.elapsed().as_micros() as u64,
                other => panic!("{other}"),
            }
        })
        .collect();
    samples.sort_unstable();
    samples
}

/// Held by every test here: some measure time and some flood the machine, so they run one at
/// a time.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn p99(sorted: &[u64]) -> u64 {
    sorted[sorted.len() * 99 / 100]
}

#[test]
fn a_resend_storm_costs_what_its_sender_reads() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let fix_addr = server.fix_addr.unwrap();
    let secret = server.credentials.user_secret(1);
    // About 500 KB of stored execution reports.
    let mut trader = FixClient::connect(fix_addr, "TRADER1", "FIX.4.4");
    trader.logon_with(1, &secret);
    trader.expect("A");
    let orders = 1_200;
    for i in 0..orders {
        trader.new_order(&format!("S{i}"), "1", "0.001", "40.00");
    }
    trader.send("1", &[(tags::TEST_REQ_ID, "sync")]);
    while trader
        .recv_within(Duration::from_secs(10))
        .expect("reports")
        .get(tags::TEST_REQ_ID)
        != Some("sync")
    {}
    let next_seq = trader.seq;
    drop(trader);

    let mut other = common::trader(&server, 2);
    let before = round_trips(&mut other, 2_000);
    let log = dir.path().join("fix/FIX.4.4-RIALTO-TRADER1.log");
    let log_before = std::fs::metadata(&log).unwrap().len();

    // The attacker logs on, then asks for everything 300 times in one write, and never reads.
    let mut attacker = FixClient::connect(fix_addr, "TRADER1", "FIX.4.4");
    attacker.seq = next_seq;
    attacker.logon_with(1, &secret);
    attacker.expect("A");
    let mut storm = Vec::new();
    for _ in 0..300 {
        storm.extend(fix_message(
            "FIX.4.4",
            "2",
            "TRADER1",
            attacker.seq,
            &[(tags::BEGIN_SEQ_NO, "1"), (tags::END_SEQ_NO, "0")],
        ));
        attacker.seq += 1;
    }
    attacker.stream.write_all(&storm).unwrap();
    let during = round_trips(&mut other, 2_000);
    // The storm has been handled once a TestRequest behind it is answered.
    attacker.send("1", &[(tags::TEST_REQ_ID, "after")]);
    while attacker
        .recv_within(Duration::from_secs(10))
        .expect("the heartbeat")
        .get(tags::TEST_REQ_ID)
        != Some("after")
    {}
    let log_grew = std::fs::metadata(&log).unwrap().len() - log_before;
    assert!(
        log_grew < 4 << 20,
        "the storm wrote {log_grew} bytes to the log: resends were not bounded by reading"
    );
    let next_seq = attacker.seq;
    drop(attacker);
    // The baseline: the worse of the p99s before and after the storm (this machine is shared).
    let after = round_trips(&mut other, 2_000);
    let baseline = p99(&before).max(p99(&after)).max(1);
    // The stall this guards against took seconds (issue 27: 3.3 s against 0.3 ms); a shared
    // 2-core machine moves a p99 by several times on its own, so the bound is ten times the
    // baseline, and never below 20 ms.
    let bound = (10 * baseline).max(20_000);
    eprintln!(
        "resend storm: p99 {} µs before, {} µs during, {} µs after; the log grew {log_grew} bytes",
        p99(&before),
        p99(&during),
        p99(&after)
    );
    assert!(
        p99(&during) <= bound,
        "p99 {} µs during the storm against {} µs before and {} µs after",
        p99(&during),
        p99(&before),
        p99(&after)
    );

    // A reader's long resend arrives whole and in order, chunk after chunk.
    let mut reader = FixClient::connect(fix_addr, "TRADER1", "FIX.4.4");
    reader.seq = next_seq;
    reader.logon_with(1, &secret);
    let logon = reader.expect("A");
    let logon_seq: u64 = logon.get(tags::MSG_SEQ_NUM).unwrap().parse().unwrap();
    reader.send("2", &[(tags::BEGIN_SEQ_NO, "1"), (tags::END_SEQ_NO, "0")]);
    let mut covered = 1;
    let mut reports = 0;
    while covered <= logon_seq {
        let msg = reader
            .recv_within(Duration::from_secs(10))
            .expect("the resend goes on");
        let seq: u64 = msg.get(tags::MSG_SEQ_NUM).unwrap().parse().unwrap();
        assert_eq!(seq, covered, "{msg:?}");
        assert_eq!(msg.get(tags::POSS_DUP_FLAG), Some("Y"));
        covered = match msg.msg_type.as_str() {
            "4" => msg.get(tags::NEW_SEQ_NO).unwrap().parse().unwrap(),
            "8" => {
                reports += 1;
                seq + 1
            }
            other => panic!("resent a {other}"),
        };
    }
    assert_eq!(reports, orders);
    server.shutdown().unwrap();
}

#[test]
fn idle_floods_do_not_keep_a_real_login_out() {
    let _alone = alone();
    raise_open_file_limit();
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        let free_port = || {
            std::net::UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let group = Ipv4Addr::new(239, 255, 77, 9);
        c.market_data.udp = true;
        c.market_data.udp_incremental = std::net::SocketAddrV4::new(group, free_port());
        c.market_data.udp_snapshot = std::net::SocketAddrV4::new(group, free_port());
        c.market_data.replay_listen = "127.0.0.1:0".parse().unwrap();
    });
    let defaults = rialto_server::config::ServerConfig::default();
    for (port, addr, budget) in [
        (
            "order",
            server.order_addr,
            defaults.gateway.max_pending_logins,
        ),
        (
            "admin",
            server.admin_addr,
            defaults.gateway.max_pending_admin_logins,
        ),
        (
            "fix",
            server.fix_addr.unwrap(),
            defaults.fix.max_pending_logons,
        ),
        (
            "replay",
            server.replay_addr.unwrap(),
            rialto_server::feed::udp::MAX_REPLAY_WAITING,
        ),
    ] {
        // 5,000 sockets from 250 addresses; every other one sends half a first message.
        let mut flood = Vec::with_capacity(5_000);
        for i in 0..5_000u32 {
            let local = Ipv4Addr::new(127, 2, 0, (i % 250 + 1) as u8);
            let Ok(mut s) = connect_from(local, addr) else {
                continue; // the backlog was full: the flood is what it is
            };
            if i % 2 == 1 {
                let _ = s.write_all(if port == "fix" {
                    b"8=FIX.4.4\x019="
                } else {
                    b"\x00\x00"
                });
            }
            flood.push(s);
        }
        let flooded = flood.len();
        assert!(flooded >= 4_000, "{port}: only {flooded} sockets");
        // Some of the flood reaches the server's accept queue only after the last connect
        // returned (a full queue drops the handshake's last ACK and the kernel retries it):
        // wait until it all has, that is until the server has closed all but `budget`.
        let deadline = Instant::now() + Duration::from_secs(30);
        for s in &flood {
            s.set_nonblocking(true).unwrap();
        }
        let mut open = flood.len();
        while open > budget {
            assert!(
                Instant::now() < deadline,
                "{port}: {open} flood sockets still open"
            );
            flood.retain_mut(|s| match s.read(&mut [0u8; 64]) {
                Ok(0) => false, // closed by the server
                Ok(_) => true,  // a last word before the close
                Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
            });
            open = flood.len();
            // No one event to wait on: thousands of sockets, `budget` of which stay open.
            std::thread::sleep(Duration::from_millis(10));
        }
        let started = Instant::now();
        match port {
            "order" => {
                let mut c = Client::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let secret = server.credentials.user_secret(1);
                c.login(1, secret.as_bytes()).unwrap();
            }
            "admin" => {
                let mut c = Client::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                c.admin_login(server.admin_secret.as_bytes()).unwrap();
            }
            "fix" => {
                let mut c = FixClient::connect(addr, "TRADER6", "FIX.4.4");
                c.logon_with(6, &server.credentials.user_secret(6));
                c.expect("A");
            }
            _ => {
                // A replay request is answered (here with nothing: no packet yet) and closed.
                let mut c = TcpStream::connect(addr).unwrap();
                c.write_all(&rialto_server::feed::udp::replay_request(1, 1))
                    .unwrap();
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut answer = Vec::new();
                c.read_to_end(&mut answer).unwrap();
            }
        }
        let took = started.elapsed();
        eprintln!("{port}: a login after a flood of {flooded} sockets took {took:?}");
        assert!(
            took < Duration::from_millis(100),
            "{port}: a login took {took:?} after a flood of {flooded}"
        );
        drop(flood);
    }
    server.shutdown().unwrap();
}

#[test]
fn failed_logins_are_throttled_per_address_not_for_others() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let guesser = Ipv4Addr::new(127, 3, 0, 1);
    let login_from = |local: Ipv4Addr, secret: &[u8]| -> Result<u64, ClientError> {
        let stream = connect_from(local, server.order_addr).unwrap();
        let mut c = Client::from_stream(stream).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.login(1, secret)
    };
    let mut refused_unread = None;
    for attempt in 0..40 {
        match login_from(guesser, b"0123456789abcdef0123456789abcdef") {
            Err(ClientError::Server {
                code: ErrorCode::AuthFailed,
                message,
            }) => {
                if message.contains("too many failed logins") {
                    refused_unread = Some(attempt);
                    break;
                }
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    let attempt = refused_unread.expect("the guesser is throttled");
    assert!(attempt <= 11, "throttled only after {attempt} failures");
    let secret = server.credentials.user_secret(1);
    // The throttled address is refused even with the right secret...
    assert!(matches!(
        login_from(guesser, secret.as_bytes()),
        Err(ClientError::Server {
            code: ErrorCode::AuthFailed,
            ..
        })
    ));
    // ...and the user logs in from anywhere else.
    login_from(Ipv4Addr::new(127, 3, 0, 2), secret.as_bytes()).unwrap();
    server.shutdown().unwrap();
}

#[test]
fn a_short_admin_secret_is_refused() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let config = rialto_server::config::ServerConfig {
        data_dir: dir.path().to_path_buf(),
        admin_secret: Some("hunter2".into()),
        ..Default::default()
    };
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("admin_secret"), "{error}");
}

#[test]
fn with_tls_on_the_order_admin_and_fix_ports_speak_tls_only() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let tls = rialto_server::tls::self_signed(&dir.path().join("tls")).unwrap();
    let cert = tls.cert.clone();
    let server = common::start(dir.path(), |c| c.tls = tls);
    let trust = rialto_client::tls_trusting(&cert).unwrap();

    let mut trader = Client::connect_tls(server.order_addr, "localhost", trust.clone()).unwrap();
    trader
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let secret = server.credentials.user_secret(1);
    trader.login(1, secret.as_bytes()).unwrap();
    let order = rialto_wire::NewOrder::limit(
        1,
        rialto_core::SymbolId(0),
        rialto_core::Side::Buy,
        500_000,
        1,
    );
    trader.place(order).unwrap();
    assert!(matches!(
        trader.recv().unwrap(),
        ServerMsg::Accepted { order: 1, .. }
    ));

    let mut admin = Client::connect_tls(server.admin_addr, "127.0.0.1", trust.clone()).unwrap();
    admin
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    admin.admin_login(server.admin_secret.as_bytes()).unwrap();

    // FIX through a TLS stream.
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(trust.clone(), name).unwrap();
    let tcp = TcpStream::connect(server.fix_addr.unwrap()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut fix = rustls::StreamOwned::new(connection, tcp);
    let user2 = server.credentials.user_secret(2);
    let logon = fix_message(
        "FIX.4.4",
        "A",
        "TRADER2",
        1,
        &[
            (tags::ENCRYPT_METHOD, "0"),
            (tags::HEART_BT_INT, "30"),
            (tags::USERNAME, "2"),
            (tags::PASSWORD, &user2),
        ],
    );
    fix.write_all(&logon).unwrap();
    let mut reply = Vec::new();
    while next_frame(&reply, 1 << 20).ok().flatten().is_none() {
        let mut chunk = [0u8; 4096];
        let n = fix.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the Logon reply");
        reply.extend_from_slice(&chunk[..n]);
    }
    let (frame, _) = next_frame(&reply, 1 << 20).unwrap().unwrap();
    assert_eq!(frame.msg_type, b"A");

    // Plain TCP gets nowhere: the login is not TLS, and the connection closes.
    let mut plain = Client::connect(server.order_addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(plain.login(1, secret.as_bytes()).is_err());
    // A client that does not trust the certificate refuses the server.
    let stranger = rialto_client::tls_trusting(&{
        let other = tempfile::tempdir().unwrap();
        let settings = rialto_server::tls::self_signed(other.path()).unwrap();
        let path = dir.path().join("stranger.pem");
        std::fs::copy(&settings.cert, &path).unwrap();
        path
    })
    .unwrap();
    let mut doubtful = Client::connect_tls(server.order_addr, "localhost", stranger).unwrap();
    doubtful
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(doubtful.login(1, secret.as_bytes()).is_err());
    server.shutdown().unwrap();
}

#[test]
fn failed_fix_logons_are_throttled_per_address() {
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |_| {});
    let fix_addr = server.fix_addr.unwrap();
    let secret = server.credentials.user_secret(4);
    // The answer to a Logon: a message, or None when the connection closes without one.
    let logon_from = |local: Ipv4Addr, password: &str| -> Option<common::fix::Msg> {
        let stream = connect_from(local, fix_addr).unwrap();
        let mut client = FixClient::over(stream, "TRADER4", "FIX.4.4");
        client.logon_with(4, password);
        client.recv_within(Duration::from_secs(10))
    };
    let guesser = Ipv4Addr::new(127, 4, 0, 1);
    for _ in 0..10 {
        assert!(
            logon_from(guesser, "wrong").is_none(),
            "closed without a message"
        );
    }
    // Throttled: even the right password is refused from there, without a message...
    assert!(logon_from(guesser, &secret).is_none());
    // ...and the user logs on from another address.
    assert_eq!(
        logon_from(Ipv4Addr::new(127, 4, 0, 2), &secret)
            .expect("a Logon")
            .msg_type,
        "A"
    );
    server.shutdown().unwrap();
}
