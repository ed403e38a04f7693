//! The client against a scripted server on 127.0.0.1: a thread that decodes client frames with
//! `decode_client` and answers with `encode_server`. Every socket has a read timeout, so a bug
//! fails a test instead of hanging it.

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rialto_client::{Client, ClientError};
use rialto_core::{Balance, CancelReason, Name, Side, SymbolId, UserReport};
use rialto_wire::{ClientMsg, ErrorCode, NewOrder, Secret, ServerMsg, WireError, encode_server};

mod common;

use common::{ScriptedConn as FakeConn, TIMEOUT};

/// Serves one connection with `script`, then closes it.
fn fake_server(script: impl FnOnce(&mut FakeConn) + Send + 'static) -> (Client, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let mut conn = FakeConn::accept(&listener);
        script(&mut conn);
    });
    let mut client = Client::connect(addr).unwrap();
    client.set_read_timeout(Some(TIMEOUT)).unwrap();
    (client, server)
}

fn report(request: u64, user: i64) -> ServerMsg {
    ServerMsg::Report {
        request,
        seq: 7,
        report: UserReport {
            user,
            suspended: false,
            balances: vec![(
                Name::new("USD").unwrap(),
                Balance {
                    available: 100,
                    held: 0,
                },
            )],
            orders: vec![],
            positions: Vec::new(),
            margins: Vec::new(),
        },
        margins: Vec::new(),
    }
}

fn cancelled(order: i64) -> ServerMsg {
    ServerMsg::Cancelled {
        seq: 9,
        ts_ns: 10,
        order,
        symbol: SymbolId(0),
        side: Side::Buy,
        qty: 3,
        reason: CancelReason::User,
    }
}

#[test]
fn login_accepted_returns_the_last_seq() {
    let (mut client, server) = fake_server(|conn| {
        let login = conn.recv();
        assert_eq!(
            login,
            ClientMsg::Login {
                user: 7,
                secret: Secret::new(b"s3cret").unwrap()
            }
        );
        conn.send(&ServerMsg::LoginAccepted {
            user: 7,
            last_seq: 42,
        });
    });
    assert_eq!(client.login(7, b"s3cret").unwrap(), 42);
    server.join().unwrap();
}

#[test]
fn admin_login_sends_admin_login() {
    let (mut client, server) = fake_server(|conn| {
        assert!(matches!(conn.recv(), ClientMsg::AdminLogin { .. }));
        conn.send(&ServerMsg::LoginAccepted {
            user: 0,
            last_seq: 3,
        });
    });
    assert_eq!(client.admin_login(b"root").unwrap(), 3);
    server.join().unwrap();
}

#[test]
fn login_rejected_is_a_server_error() {
    let (mut client, server) = fake_server(|conn| {
        conn.recv();
        conn.send(&ServerMsg::Error {
            code: ErrorCode::AuthFailed,
            message: "bad secret".into(),
        });
    });
    match client.login(7, b"wrong") {
        Err(ClientError::Server { code, message }) => {
            assert_eq!(code, ErrorCode::AuthFailed);
            assert_eq!(message, "bad secret");
        }
        other => panic!("{other:?}"),
    }
    server.join().unwrap();
    // The server hung up after the error.
    assert!(matches!(client.recv(), Err(ClientError::Closed)));
}

#[test]
fn a_bad_secret_is_refused_before_sending() {
    let (mut client, server) = fake_server(|_| {});
    assert!(matches!(
        client.login(1, &[0; 65]),
        Err(ClientError::Unexpected(_))
    ));
    assert!(matches!(
        client.login(1, b""),
        Err(ClientError::Unexpected(_))
    ));
    server.join().unwrap();
}

#[test]
fn request_waits_for_its_own_reply_and_queues_the_rest() {
    let (mut client, server) = fake_server(|conn| {
        assert_eq!(conn.recv(), ClientMsg::MyReport { request: 5 });
        conn.send(&cancelled(1));
        conn.send(&report(4, 7)); // a reply to some other request
        conn.send(&report(5, 7));
        conn.send(&ServerMsg::Heartbeat { nonce: 1 });
    });
    let reply = client.request(&ClientMsg::MyReport { request: 5 }).unwrap();
    assert_eq!(reply, report(5, 7));
    // Received meanwhile, kept in order, then the socket again.
    assert_eq!(client.recv().unwrap(), cancelled(1));
    assert_eq!(client.recv().unwrap(), report(4, 7));
    assert_eq!(client.recv().unwrap(), ServerMsg::Heartbeat { nonce: 1 });
    server.join().unwrap();
}

#[test]
fn a_refused_request_ends_with_the_server_error() {
    let (mut client, server) = fake_server(|conn| {
        conn.recv();
        conn.send(&ServerMsg::Error {
            code: ErrorCode::NotAdmin,
            message: String::new(),
        });
    });
    assert!(matches!(
        client.request(&ClientMsg::VenueReport { request: 1 }),
        Err(ClientError::Server {
            code: ErrorCode::NotAdmin,
            ..
        })
    ));
    assert!(matches!(
        client.request(&ClientMsg::Cancel { order: 1 }),
        Err(ClientError::Unexpected(_))
    ));
    server.join().unwrap();
}

#[test]
fn a_batch_arrives_in_order() {
    let orders: Vec<ClientMsg> = (1..=20)
        .map(|id| ClientMsg::NewOrder(NewOrder::limit(id, SymbolId(1), Side::Sell, 100 + id, 1)))
        .collect();
    let expected = orders.clone();
    let (mut client, server) = fake_server(move |conn| {
        for want in &expected {
            assert_eq!(&conn.recv(), want);
        }
        assert_eq!(conn.recv(), ClientMsg::Cancel { order: 3 });
        conn.send(&cancelled(3));
    });
    client.send_batch(&orders).unwrap();
    client.cancel(3).unwrap();
    assert_eq!(client.recv().unwrap(), cancelled(3));
    server.join().unwrap();
}

#[test]
fn try_recv_never_blocks() {
    let (mut client, server) = fake_server(|conn| {
        let ClientMsg::Heartbeat { nonce } = conn.recv() else {
            panic!("expected a heartbeat")
        };
        conn.send(&ServerMsg::Heartbeat { nonce });
        // Stay connected until the client is done.
        let _ = conn.stream.read(&mut [0u8; 1]);
    });
    let start = Instant::now();
    assert_eq!(client.try_recv().unwrap(), None);
    assert!(start.elapsed() < Duration::from_secs(1));

    client.send(&ClientMsg::Heartbeat { nonce: 99 }).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let echoed = loop {
        if let Some(msg) = client.try_recv().unwrap() {
            break msg;
        }
        assert!(Instant::now() < deadline, "no echo");
        // Polling is what this test is about: try_recv is the call that must not block.
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(echoed, ServerMsg::Heartbeat { nonce: 99 });
    assert_eq!(client.try_recv().unwrap(), None);
    drop(client);
    server.join().unwrap();
}

#[test]
fn a_server_closing_mid_frame_is_closed_not_a_hang() {
    let (mut client, server) = fake_server(|conn| {
        let mut frame = Vec::new();
        encode_server(&report(1, 2), &mut frame);
        conn.send_raw(&frame[..frame.len() / 2]);
    });
    let start = Instant::now();
    let err = client.recv().unwrap_err();
    assert!(
        matches!(err, ClientError::Closed | ClientError::Io(_)),
        "{err:?}"
    );
    assert!(!err.is_timeout(), "{err:?}");
    assert!(start.elapsed() < TIMEOUT);
    server.join().unwrap();
}

#[test]
fn a_silent_server_times_out() {
    let (mut client, server) = fake_server(|conn| {
        // Hold the connection open, silent, until the client goes.
        let _ = conn.stream.read(&mut [0u8; 1]);
    });
    client
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let err = client.recv().unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    drop(client);
    server.join().unwrap();
}

#[test]
fn an_undecodable_frame_is_skipped_when_its_end_is_known() {
    let (mut client, server) = fake_server(|conn| {
        conn.send_raw(&[3, 0, 0, 0, 1, 0x7f, 0]); // unknown type
        conn.send(&ServerMsg::Heartbeat { nonce: 5 });
        conn.send_raw(&[0, 0, 0, 0]); // length 0: no way to resynchronise
    });
    assert!(matches!(
        client.recv(),
        Err(ClientError::Wire(WireError::UnknownType { ty: 0x7f, .. }))
    ));
    assert_eq!(client.recv().unwrap(), ServerMsg::Heartbeat { nonce: 5 });
    assert!(matches!(
        client.recv(),
        Err(ClientError::Wire(WireError::TooShort))
    ));
    server.join().unwrap();
}
