//! The binary gateway end to end over real sockets: trading, isolation between users, login
//! rules, bad frames, throttling, back-pressure, admin commands.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{admin, recv_until, start, trader};
use rialto_client::{Client, ClientError};
use rialto_core::{CancelReason, Name, Reason, Side, SymbolId};
use rialto_server::config::ThreadLayout;
use rialto_server::pipeline::Prefetch;
use rialto_wire::{
    ClientMsg, ErrorCode, Liquidity, NewOrder, OrderState, RequestKind, Secret, ServerMsg,
    decode_server, encode_client,
};

const BTC: SymbolId = SymbolId(0);

/// The state and remaining quantity OrderStatus gives for `order`, and the seq it is as of.
fn order_status(c: &mut Client, order: i64) -> (OrderState, i64, u64) {
    match c
        .request(&ClientMsg::OrderStatus { request: 8, order })
        .unwrap()
    {
        ServerMsg::OrderStatus {
            request: 8,
            seq,
            order: answered,
            state,
            remaining,
        } if answered == order => (state, remaining, seq),
        other => panic!("order status of {order}: {other}"),
    }
}

#[test]
fn order_status_tells_a_user_whether_its_order_is_open_ended_or_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut t = trader(&server, 1);
    assert_eq!(order_status(&mut t, 7).0, OrderState::Unknown);
    t.place(NewOrder::limit(7, SymbolId(0), Side::Buy, 400_000, 3))
        .unwrap();
    let placed = match t.recv().unwrap() {
        ServerMsg::Accepted { seq, .. } => seq,
        other => panic!("{other}"),
    };
    assert_eq!(order_status(&mut t, 7), (OrderState::Open, 3, placed));
    // Another user's order of the same id is not this user's.
    let mut other = trader(&server, 2);
    assert_eq!(order_status(&mut other, 7).0, OrderState::Unknown);
    // Cancelled, the id stays taken within the demo venue's order-id window: ended.
    t.cancel(7).unwrap();
    assert!(matches!(
        t.recv().unwrap(),
        ServerMsg::Accepted { order: 7, .. }
    ));
    let (state, remaining, _) = order_status(&mut t, 7);
    assert_eq!((state, remaining), (OrderState::Ended, 0));
}

fn report(c: &mut Client) -> rialto_core::UserReport {
    match c.request(&ClientMsg::MyReport { request: 5 }).unwrap() {
        ServerMsg::Report { report, .. } => report,
        other => panic!("report: {other}"),
    }
}

#[test]
fn two_traders_trade_and_each_sees_its_own_fill() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut seller = trader(&server, 1);
    let mut buyer = trader(&server, 2);

    seller
        .place(NewOrder::limit(11, BTC, Side::Sell, 5_000, 3))
        .unwrap();
    let accepted = seller.recv().unwrap();
    assert!(
        matches!(
            accepted,
            ServerMsg::Accepted {
                order: 11,
                kind: RequestKind::Place,
                ..
            }
        ),
        "{accepted}"
    );
    buyer
        .place(NewOrder::limit(7, BTC, Side::Buy, 5_100, 2))
        .unwrap();
    let ServerMsg::Accepted { seq, order: 7, .. } = buyer.recv().unwrap() else {
        panic!("the buy is accepted first");
    };
    // The taker's fill: at the resting price, with the taker fee (1 per lot in the demo).
    match buyer.recv().unwrap() {
        ServerMsg::Trade {
            seq: s,
            order,
            side,
            price,
            qty,
            fee,
            liquidity,
            ..
        } => {
            assert_eq!(
                (s, order, side, price, qty, fee),
                (seq, 7, Side::Buy, 5_000, 2, 2)
            );
            assert_eq!(liquidity, Liquidity::Taker);
        }
        other => panic!("taker fill: {other}"),
    }
    match seller.recv().unwrap() {
        ServerMsg::Trade {
            order,
            side,
            price,
            qty,
            fee,
            liquidity,
            ..
        } => {
            assert_eq!(
                (order, side, price, qty, fee),
                (11, Side::Sell, 5_000, 2, 0)
            );
            assert_eq!(liquidity, Liquidity::Maker);
        }
        other => panic!("maker fill: {other}"),
    }
    // Balances moved: 2 lots of 1,000 base units each, 2 * 5,000 quote plus the fee.
    let funds = rialto_server::demo::DEMO_FUNDS;
    let buyer_report = report(&mut buyer);
    let usd = buyer_report
        .balances
        .iter()
        .find(|(c, _)| c.as_str() == "USD")
        .unwrap()
        .1;
    assert_eq!(usd.available, funds - 10_002);
    let seller_report = report(&mut seller);
    assert_eq!(seller_report.orders.len(), 1);
    assert_eq!(seller_report.orders[0].remaining, 1);
    server.shutdown().unwrap();
}

#[test]
fn a_user_cannot_cancel_or_see_another_users_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut owner = trader(&server, 1);
    let mut other = trader(&server, 2);
    owner
        .place(NewOrder::limit(42, BTC, Side::Buy, 4_000, 5))
        .unwrap();
    assert!(matches!(owner.recv().unwrap(), ServerMsg::Accepted { .. }));

    other.cancel(42).unwrap();
    match other.recv().unwrap() {
        ServerMsg::Rejected {
            order: 42,
            kind: RequestKind::Cancel,
            reason,
            ..
        } => {
            assert_eq!(reason, Reason::UnknownOrder)
        }
        m => panic!("{m}"),
    }
    other.send(&ClientMsg::MassCancel { symbol: None }).unwrap();
    assert!(matches!(
        other.recv().unwrap(),
        ServerMsg::Accepted {
            kind: RequestKind::MassCancel,
            ..
        }
    ));
    assert!(report(&mut other).orders.is_empty());
    assert_eq!(
        report(&mut owner).orders.len(),
        1,
        "the owner's order is untouched"
    );

    // The owner's own mass cancel reports the cancel.
    owner
        .send(&ClientMsg::MassCancel { symbol: Some(BTC) })
        .unwrap();
    assert!(matches!(owner.recv().unwrap(), ServerMsg::Accepted { .. }));
    match owner.recv().unwrap() {
        ServerMsg::Cancelled {
            order: 42,
            qty: 5,
            reason: CancelReason::User,
            ..
        } => {}
        m => panic!("{m}"),
    }
    server.shutdown().unwrap();
}

fn expect_error_then_close(c: &mut Client, code: ErrorCode) {
    match c.recv() {
        Ok(ServerMsg::Error { code: got, .. }) => assert_eq!(got, code),
        Err(ClientError::Server { code: got, .. }) => assert_eq!(got, code),
        other => panic!("expected error {code}: {other:?}"),
    }
    assert!(matches!(
        c.recv(),
        Err(ClientError::Closed) | Err(ClientError::Io(_))
    ));
}

#[test]
fn logins_are_checked_and_roles_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});

    let mut c = Client::connect(server.order_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let err = c.login(1, b"not the secret").unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Server {
                code: ErrorCode::AuthFailed,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        c.recv(),
        Err(ClientError::Closed) | Err(ClientError::Io(_))
    ));

    // Another user's secret does not open this user.
    let mut c = Client::connect(server.order_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let secret2 = server.credentials.user_secret(2);
    assert!(c.login(1, secret2.as_bytes()).is_err());

    // The first frame must be a login.
    let mut c = Client::connect(server.order_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.cancel(1).unwrap();
    expect_error_then_close(&mut c, ErrorCode::NotLoggedIn);

    // Admin logins only on the admin port, trader logins only on the order port.
    let mut c = Client::connect(server.order_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(c.admin_login(server.admin_secret.as_bytes()).is_err());
    let mut c = Client::connect(server.admin_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let secret1 = server.credentials.user_secret(1);
    assert!(c.login(1, secret1.as_bytes()).is_err());
    // The admin port with a wrong secret: refused, and admin frames go nowhere after it.
    let mut c = Client::connect(server.admin_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(c.admin_login(b"not the admin secret").is_err());
    let mut c = Client::connect(server.admin_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.send(&ClientMsg::AddUser {
        request: 1,
        user: 78,
    })
    .unwrap();
    expect_error_then_close(&mut c, ErrorCode::NotLoggedIn);
    let users = match common::admin(&server).request(&ClientMsg::ListUsers { request: 2 }) {
        Ok(ServerMsg::UserList { users, .. }) => users,
        other => panic!("{other:?}"),
    };
    assert!(!users.contains(&78), "{users:?}");

    // A trader sending an admin frame is refused and stays connected.
    let mut t = trader(&server, 1);
    t.send(&ClientMsg::AddUser {
        request: 1,
        user: 77,
    })
    .unwrap();
    match t.recv() {
        Ok(ServerMsg::Error { code, .. }) | Err(ClientError::Server { code, .. }) => {
            assert_eq!(code, ErrorCode::NotAdmin)
        }
        other => panic!("{other:?}"),
    }
    t.send(&ClientMsg::Heartbeat { nonce: 9 }).unwrap();
    assert_eq!(t.recv().unwrap(), ServerMsg::Heartbeat { nonce: 9 });
    server.shutdown().unwrap();
}

/// A raw connection logged in as user 1, for sending bytes no client would.
fn raw_trader(server: &rialto_server::RunningServer) -> TcpStream {
    let mut s = TcpStream::connect(server.order_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let secret = Secret::new(server.credentials.user_secret(1).as_bytes()).unwrap();
    let mut frame = Vec::new();
    encode_client(&ClientMsg::Login { user: 1, secret }, &mut frame);
    s.write_all(&frame).unwrap();
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::LoginAccepted { .. })
    ));
    s
}

/// One whole frame, or None at end of stream.
fn read_frame(s: &mut TcpStream) -> Option<ServerMsg> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1];
    loop {
        if let Some((msg, _)) = decode_server(&buf).unwrap() {
            return Some(msg);
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(_) => buf.push(chunk[0]),
        }
    }
}

fn heartbeat_frame(nonce: u64) -> Vec<u8> {
    let mut frame = Vec::new();
    encode_client(&ClientMsg::Heartbeat { nonce }, &mut frame);
    frame
}

#[test]
fn bad_frames_get_an_error_and_a_broken_stream_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});

    // An unknown type with a sound length: refused, and the session carries on.
    let mut s = raw_trader(&server);
    s.write_all(&[2, 0, 0, 0, 1, 0x7f]).unwrap();
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::Error {
            code: ErrorCode::UnknownType,
            ..
        })
    ));
    // A body too short for its type, and an unsupported version: same.
    let mut short = heartbeat_frame(1);
    short[0] -= 1;
    short.pop();
    s.write_all(&short).unwrap();
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::Error {
            code: ErrorCode::Malformed,
            ..
        })
    ));
    let mut v9 = heartbeat_frame(2);
    v9[4] = 9;
    s.write_all(&v9).unwrap();
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::Error {
            code: ErrorCode::UnsupportedVersion,
            ..
        })
    ));
    s.write_all(&heartbeat_frame(3)).unwrap();
    assert_eq!(read_frame(&mut s), Some(ServerMsg::Heartbeat { nonce: 3 }));

    // An absurd length cannot be skipped: an error, then the connection closes.
    s.write_all(&u32::MAX.to_le_bytes()).unwrap();
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::Error {
            code: ErrorCode::TooLarge,
            ..
        })
    ));
    assert_eq!(read_frame(&mut s), None);

    // Garbage before any login, and a client that leaves in the middle of a frame.
    let mut g = TcpStream::connect(server.order_addr).unwrap();
    g.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    g.write_all(&[1, 0, 0, 0, 0xff]).unwrap();
    assert!(matches!(read_frame(&mut g), Some(ServerMsg::Error { .. })));
    let mut half = raw_trader(&server);
    half.write_all(&heartbeat_frame(4)[..7]).unwrap();
    drop(half);

    // The venue still serves everyone else.
    let mut t = trader(&server, 2);
    t.place(NewOrder::limit(1, BTC, Side::Buy, 100, 1)).unwrap();
    assert!(matches!(t.recv().unwrap(), ServerMsg::Accepted { .. }));
    server.shutdown().unwrap();
}

#[test]
fn a_session_over_its_message_rate_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| {
        c.gateway.max_msgs_per_sec = 100;
        c.gateway.burst = 20;
    });
    let mut s = raw_trader(&server);
    let flood: Vec<u8> = (0..200).flat_map(heartbeat_frame).collect();
    s.write_all(&flood).unwrap();
    let mut heartbeats = 0;
    loop {
        match read_frame(&mut s) {
            Some(ServerMsg::Heartbeat { .. }) => heartbeats += 1,
            Some(ServerMsg::Error { code, .. }) => {
                assert_eq!(code, ErrorCode::Throttled);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        (19..=25).contains(&heartbeats),
        "{heartbeats} frames before the limit"
    );
    assert_eq!(read_frame(&mut s), None, "then the session is closed");
    server.shutdown().unwrap();
}

#[test]
fn a_full_pipeline_slows_the_sender_and_drops_nothing() {
    // Both ways of running the stages (their own threads, or the gateway's), and with the
    // engine stage holding commands ahead to prefetch them, more than its ring holds.
    let runs = [ThreadLayout::Dedicated, ThreadLayout::Shared]
        .into_iter()
        .flat_map(|layout| [(layout, Prefetch::Auto), (layout, Prefetch::On)]);
    for (layout, prefetch) in runs {
        let dir = tempfile::tempdir().unwrap();
        let server = start(dir.path(), |c| {
            c.pipeline.ring_capacity = 4;
            c.pipeline.batch_max = Some(2);
            c.pipeline.threads = layout;
            c.pipeline.prefetch = prefetch;
        });
        let mut t = trader(&server, 3);
        let orders: Vec<ClientMsg> = (1..=3_000)
            .map(|i| ClientMsg::NewOrder(NewOrder::limit(i, BTC, Side::Buy, 10 + i % 50, 1)))
            .collect();
        for chunk in orders.chunks(500) {
            t.send_batch(chunk).unwrap();
        }
        let mut accepted = Vec::new();
        while accepted.len() < 3_000 {
            match t.recv().unwrap() {
                ServerMsg::Accepted { order, .. } => accepted.push(order),
                other => panic!("{other}"),
            }
        }
        assert_eq!(
            accepted,
            (1..=3_000).collect::<Vec<_>>(),
            "every order, in order"
        );
        // One sell sweeps all 3,000: 6,000 fills, far more than the rings hold.
        let mut s = trader(&server, 4);
        s.place(NewOrder::market(1, BTC, Side::Sell, 3_000))
            .unwrap();
        let mut filled = 0;
        while filled < 3_000 {
            if let ServerMsg::Trade { qty, .. } = t.recv().unwrap() {
                filled += qty;
            }
        }
        server.shutdown().unwrap();
    }
}

#[test]
fn admin_adds_a_symbol_and_a_user_who_can_then_trade() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.demo = false);
    let mut a = admin(&server);
    let spec = common::spot_spec("SOL-EUR", "SOL", "EUR", 10);
    let ok = |m: ServerMsg| {
        assert!(
            matches!(m, ServerMsg::AdminResult { result: Ok(()), .. }),
            "{m}"
        )
    };
    ok(a.request(&ClientMsg::AddSymbol { request: 1, spec })
        .unwrap());
    match a
        .request(&ClientMsg::AddSymbol { request: 2, spec })
        .unwrap()
    {
        ServerMsg::AdminResult {
            request: 2, result, ..
        } => assert_eq!(result, Err(Reason::DuplicateSymbol)),
        m => panic!("{m}"),
    }
    let secret = match a
        .request(&ClientMsg::AddUser {
            request: 3,
            user: 500,
        })
        .unwrap()
    {
        ServerMsg::UserAdded {
            user: 500, secret, ..
        } => secret,
        m => panic!("{m}"),
    };
    let deposit = ClientMsg::AdjustBalance {
        request: 4,
        user: 500,
        currency: Name::new("EUR").unwrap(),
        amount: 1_000,
        tx: 1,
    };
    ok(a.request(&deposit).unwrap());
    match a.request(&deposit).unwrap() {
        ServerMsg::AdminResult { result, .. } => assert_eq!(result, Err(Reason::DuplicateTx)),
        m => panic!("{m}"),
    }
    match a.request(&ClientMsg::ListSymbols { request: 5 }).unwrap() {
        ServerMsg::SymbolList { symbols, .. } => assert_eq!(symbols, vec![(SymbolId(0), spec)]),
        m => panic!("{m}"),
    }

    let mut t = Client::connect(server.order_addr).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    t.login(500, secret.as_bytes()).unwrap();
    t.place(NewOrder::limit(1, SymbolId(0), Side::Buy, 100, 10))
        .unwrap();
    assert!(matches!(t.recv().unwrap(), ServerMsg::Accepted { .. }));
    t.place(NewOrder::limit(2, SymbolId(0), Side::Buy, 1, 1))
        .unwrap();
    match t.recv().unwrap() {
        ServerMsg::Rejected { reason, .. } => assert_eq!(reason, Reason::InsufficientFunds),
        m => panic!("{m}"),
    }
    match a
        .request(&ClientMsg::Book {
            request: 6,
            symbol: SymbolId(0),
            depth: 5,
        })
        .unwrap()
    {
        ServerMsg::Book { bids, asks, .. } => {
            assert_eq!(
                bids,
                vec![rialto_core::Level {
                    price: 100,
                    qty: 10
                }]
            );
            assert!(asks.is_empty());
        }
        m => panic!("{m}"),
    }
    match a.request(&ClientMsg::VenueReport { request: 7 }).unwrap() {
        ServerMsg::VenueReport { totals, .. } => {
            let eur = totals
                .iter()
                .find(|t| t.currency.as_str() == "EUR")
                .unwrap();
            assert_eq!((eur.deposits, eur.held, eur.available), (1_000, 1_000, 0));
        }
        m => panic!("{m}"),
    }
    server.shutdown().unwrap();
}

#[test]
fn a_client_that_half_closes_still_gets_every_reply() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut s = TcpStream::connect(server.order_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let secret = Secret::new(server.credentials.user_secret(1).as_bytes()).unwrap();
    let mut bytes = Vec::new();
    encode_client(&ClientMsg::Login { user: 1, secret }, &mut bytes);
    for i in 1..=20 {
        encode_client(
            &ClientMsg::NewOrder(NewOrder::limit(i, BTC, Side::Buy, 100, 1)),
            &mut bytes,
        );
    }
    s.write_all(&bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::LoginAccepted { .. })
    ));
    for i in 1..=20 {
        match read_frame(&mut s) {
            Some(ServerMsg::Accepted { order, .. }) => assert_eq!(order, i),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(read_frame(&mut s), None, "then the server closes too");
    server.shutdown().unwrap();
}

#[test]
fn nothing_but_a_login_is_served_before_login() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut s = TcpStream::connect(server.order_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&heartbeat_frame(1)).unwrap();
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::Error {
            code: ErrorCode::NotLoggedIn,
            ..
        })
    ));
    assert_eq!(read_frame(&mut s), None);
    // An unknown frame type before login closes the session too.
    let mut s = TcpStream::connect(server.order_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[2, 0, 0, 0, 1, 0x7f]).unwrap();
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::Error {
            code: ErrorCode::UnknownType,
            ..
        })
    ));
    assert_eq!(read_frame(&mut s), None);
    server.shutdown().unwrap();
}

#[test]
fn a_clean_stop_delivers_every_reply_even_to_a_client_still_sending() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut c = trader(&server, 5);
    let orders: Vec<ClientMsg> = (1..=5_000)
        .map(|i| ClientMsg::NewOrder(NewOrder::limit(i, BTC, Side::Buy, 10 + i % 50, 1)))
        .collect();
    c.send_batch(&orders).unwrap();
    // The stop begins once the gateway is applying the orders (a stop that came before it read
    // any would apply none, and there would be nothing in flight to check).
    let mut accepted = 0u64;
    match c.recv() {
        Ok(ServerMsg::Accepted { .. }) => accepted += 1,
        other => panic!("the first order's answer: {other:?}"),
    }
    let stopper = std::thread::spawn(move || server.shutdown());
    // Keep talking while the server stops: unread input must not turn the close into a reset.
    for nonce in 0..100 {
        if c.send(&ClientMsg::Heartbeat { nonce }).is_err() {
            break;
        }
    }
    let mut told = false;
    loop {
        match c.recv() {
            Ok(ServerMsg::Accepted { .. }) => accepted += 1,
            Ok(ServerMsg::Error { code, .. }) | Err(ClientError::Server { code, .. }) => {
                assert_eq!(code, ErrorCode::ShuttingDown);
                told = true;
            }
            Ok(_) => {}
            Err(ClientError::Closed) => break,
            Err(e) => panic!("after {accepted} acks: {e}"),
        }
    }
    stopper.join().unwrap().unwrap();
    assert!(told, "sessions hear `shutting_down` before the close");
    // Orders the gateway had not read when the stop began were never applied; every one that
    // was applied (is in the journal) was acknowledged.
    let recovered =
        rialto_journal::recover(dir.path(), rialto_core::EngineConfig::default()).unwrap();
    let demo = rialto_server::demo::demo_commands().len() as u64;
    assert_eq!(accepted, recovered.last_seq - demo);
    assert!(accepted > 0);
}

#[test]
fn silent_connections_time_out_and_traders_cannot_use_up_the_admin_port() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| {
        c.gateway.login_timeout_ms = 200;
        c.gateway.max_sessions = 2;
        c.gateway.max_admin_sessions = 1;
    });
    let mut silent = TcpStream::connect(server.order_addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(
        read_frame(&mut silent),
        Some(ServerMsg::Error {
            code: ErrorCode::NotLoggedIn,
            ..
        })
    ));
    assert_eq!(read_frame(&mut silent), None);
    assert!(started.elapsed() >= Duration::from_millis(200));

    // The order port full does not stop an operator; a second operator is turned away. The
    // limit counts logged-in sessions: the login past it is answered `busy`.
    let _t1 = trader(&server, 1);
    let _t2 = trader(&server, 2);
    let mut third = Client::connect(server.order_addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let secret = server.credentials.user_secret(3);
    assert!(matches!(
        third.login(3, secret.as_bytes()),
        Err(ClientError::Server {
            code: ErrorCode::Busy,
            ..
        })
    ));
    let _a = admin(&server);
    let mut second_admin = Client::connect(server.admin_addr).unwrap();
    second_admin
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert!(matches!(
        second_admin.admin_login(server.admin_secret.as_bytes()),
        Err(ClientError::Server {
            code: ErrorCode::Busy,
            ..
        })
    ));
    drop((_t1, _t2, _a));
    server.shutdown().unwrap();
}

/// `msg` with its sequencer time cleared: the one thing two runs of the same commands differ in.
fn without_time(mut msg: ServerMsg) -> ServerMsg {
    if let ServerMsg::Accepted { ts_ns, .. }
    | ServerMsg::Rejected { ts_ns, .. }
    | ServerMsg::Trade { ts_ns, .. }
    | ServerMsg::Cancelled { ts_ns, .. } = &mut msg
    {
        *ts_ns = 0;
    }
    msg
}

/// Everything `c` receives up to the report it asks for last, with times cleared, and that
/// report.
fn replies_and_report(c: &mut Client) -> (Vec<ServerMsg>, rialto_core::UserReport) {
    c.send(&ClientMsg::MyReport { request: 99 }).unwrap();
    let (last, before) = recv_until(c, |m| matches!(m, ServerMsg::Report { request: 99, .. }));
    let ServerMsg::Report { report, .. } = last else {
        unreachable!()
    };
    (before.into_iter().map(without_time).collect(), report)
}

#[test]
fn the_engine_stage_answers_the_same_with_and_without_prefetching() {
    // A small venue never prefetches on `auto`: `on` forces the path a big venue takes, where
    // the engine stage keeps the next commands in hand and loads what they touch.
    let run = |prefetch: Prefetch| {
        let dir = tempfile::tempdir().unwrap();
        let server = start(dir.path(), |c| c.pipeline.prefetch = prefetch);
        common::without_band(&server, BTC);
        let mut seller = trader(&server, 4);
        let sells: Vec<ClientMsg> = (1..=300)
            .map(|i| ClientMsg::NewOrder(NewOrder::limit(i, BTC, Side::Sell, 30 + i % 40, 2)))
            .collect();
        seller.send_batch(&sells).unwrap();
        let mut buyer = trader(&server, 3);
        let mut mixed = Vec::new();
        for i in 1..=400i64 {
            let price = 10 + i * 7 % 50;
            mixed.push(ClientMsg::NewOrder(NewOrder::limit(
                i,
                BTC,
                Side::Buy,
                price,
                1 + i % 3,
            )));
            if i % 3 == 0 {
                let price = 10 + i * 11 % 50;
                mixed.push(ClientMsg::Move {
                    order: i - 1,
                    price,
                });
            }
            if i % 5 == 0 {
                mixed.push(ClientMsg::Cancel { order: i - 2 });
            }
            if i % 7 == 0 {
                mixed.push(ClientMsg::Reduce {
                    order: i - 3,
                    qty: 1,
                });
            }
        }
        buyer.send_batch(&mixed).unwrap();
        let buyer_side = replies_and_report(&mut buyer);
        let seller_side = replies_and_report(&mut seller);
        server.shutdown().unwrap();
        (buyer_side, seller_side)
    };
    let without = run(Prefetch::Off);
    let with = run(Prefetch::On);
    let count =
        |msgs: &[ServerMsg], want: fn(&ServerMsg) -> bool| msgs.iter().filter(|m| want(m)).count();
    let buyer_msgs = &without.0.0;
    assert!(count(buyer_msgs, |m| matches!(m, ServerMsg::Trade { .. })) > 50);
    assert!(count(buyer_msgs, |m| matches!(m, ServerMsg::Cancelled { .. })) > 50);
    assert!(
        count(buyer_msgs, |m| matches!(
            m,
            ServerMsg::Accepted {
                kind: RequestKind::Move,
                ..
            }
        )) > 50
    );
    assert_eq!(with.0.0.len(), without.0.0.len());
    for (i, (a, b)) in with.0.0.iter().zip(&without.0.0).enumerate() {
        assert_eq!(a, b, "buyer's message {i}");
    }
    assert_eq!(with.0.1, without.0.1, "buyer's report");
    assert_eq!(with.1, without.1, "seller's messages and report");
}

#[test]
fn the_protocol_docs_hold_on_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    // The secret is the 32 hex characters, not the 16 bytes they encode.
    let hex = server.credentials.user_secret(1);
    let raw: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let mut c = Client::connect(server.order_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(matches!(
        c.login(1, &raw),
        Err(ClientError::Server {
            code: ErrorCode::AuthFailed,
            ..
        })
    ));
    // A malformed body before login: its error, then the close (rule 6).
    let mut s = TcpStream::connect(server.order_addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[3, 0, 0, 0, 1, 0x03, 0]).unwrap(); // a Heartbeat with 1 byte of its 8
    assert!(matches!(
        read_frame(&mut s),
        Some(ServerMsg::Error {
            code: ErrorCode::Malformed,
            ..
        })
    ));
    assert_eq!(read_frame(&mut s), None);

    // The admin port: order frames, MyReport, MyReportExt and OrderStatus are refused and the
    // session goes on; ListSymbols and Book work.
    let mut a = admin(&server);
    for frame in [
        ClientMsg::Cancel { order: 1 },
        ClientMsg::MyReport { request: 3 },
        ClientMsg::MyReportExt { request: 3 },
        ClientMsg::OrderStatus {
            request: 3,
            order: 1,
        },
    ] {
        a.send(&frame).unwrap();
        match a.recv() {
            Ok(ServerMsg::Error { code, .. }) | Err(ClientError::Server { code, .. }) => {
                assert_eq!(code, ErrorCode::NotLoggedIn)
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        a.request(&ClientMsg::ListSymbols { request: 4 }).unwrap(),
        ServerMsg::SymbolList { request: 4, .. }
    ));
    // A Book reply's seq is the venue's last seq then: queries take no number of their own.
    let mut t = trader(&server, 1);
    t.place(NewOrder::limit(5, SymbolId(0), Side::Buy, 400_000, 2))
        .unwrap();
    let placed = match t.recv().unwrap() {
        ServerMsg::Accepted { seq, .. } => seq,
        other => panic!("{other}"),
    };
    let book = ClientMsg::Book {
        request: 5,
        symbol: SymbolId(0),
        depth: 10,
    };
    for c in [&mut a, &mut t] {
        match c.request(&book).unwrap() {
            ServerMsg::Book { seq, .. } => assert_eq!(seq, placed),
            other => panic!("{other}"),
        }
    }
    // A Report lists non-zero balances only, sorted by currency.
    let report = report(&mut t);
    let names: Vec<String> = report.balances.iter().map(|(n, _)| n.to_string()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(
        report
            .balances
            .iter()
            .all(|(_, b)| b.available != 0 || b.held != 0)
    );
    server.shutdown().unwrap();
}

fn amend(order: i64, price: Option<i64>, qty: Option<i64>) -> ClientMsg {
    ClientMsg::Amend {
        order,
        price,
        qty,
        stop_price: None,
    }
}

#[test]
fn an_amend_keeps_or_loses_priority_trades_and_is_refused_as_the_rules_say() {
    use rialto_core::Priority;
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    common::without_band(&server, BTC);
    let mut first = trader(&server, 1);
    let mut second = trader(&server, 2);
    let mut buyer = trader(&server, 3);
    first
        .place(NewOrder::limit(1, BTC, Side::Sell, 5_000, 5))
        .unwrap();
    assert!(matches!(first.recv().unwrap(), ServerMsg::Accepted { .. }));
    second
        .place(NewOrder::limit(2, BTC, Side::Sell, 5_000, 5))
        .unwrap();
    assert!(matches!(second.recv().unwrap(), ServerMsg::Accepted { .. }));

    // A smaller total at the same price keeps the order first in its level.
    first.send(&amend(1, None, Some(3))).unwrap();
    let ServerMsg::Accepted {
        seq,
        kind: RequestKind::Amend,
        order: 1,
        ..
    } = first.recv().unwrap()
    else {
        panic!("the amend is accepted");
    };
    match first.recv().unwrap() {
        ServerMsg::Amended {
            seq: s,
            order,
            symbol,
            side,
            price,
            stop_price,
            remaining,
            priority,
            ..
        } => assert_eq!(
            (
                s, order, symbol, side, price, stop_price, remaining, priority
            ),
            (seq, 1, BTC, Side::Sell, 5_000, 0, 3, Priority::Kept)
        ),
        other => panic!("amended: {other}"),
    }
    buyer
        .place(NewOrder::limit(9, BTC, Side::Buy, 5_000, 1))
        .unwrap();
    assert!(matches!(buyer.recv().unwrap(), ServerMsg::Accepted { .. }));
    match first.recv().unwrap() {
        ServerMsg::Trade {
            order: 1, qty: 1, ..
        } => {}
        other => panic!("the kept order trades first: {other}"),
    }

    // A new price loses priority and, crossing, trades at once as a taker.
    buyer
        .place(NewOrder::limit(10, BTC, Side::Buy, 4_500, 1))
        .unwrap();
    recv_until(&mut buyer, |m| {
        matches!(m, ServerMsg::Accepted { order: 10, .. })
    });
    second.send(&amend(2, Some(4_000), None)).unwrap();
    assert!(matches!(
        second.recv().unwrap(),
        ServerMsg::Accepted {
            kind: RequestKind::Amend,
            ..
        }
    ));
    let amended = second.recv().unwrap();
    assert!(
        matches!(
            amended,
            ServerMsg::Amended {
                price: 4_000,
                remaining: 5,
                priority: Priority::Lost,
                ..
            }
        ),
        "{amended}"
    );
    match second.recv().unwrap() {
        ServerMsg::Trade {
            order: 2,
            price: 4_500,
            qty: 1,
            liquidity: Liquidity::Taker,
            ..
        } => {}
        other => panic!("the amended order takes: {other}"),
    }
    // A total at or below what has filled ends the order (cancelled, reason reduce).
    first.send(&amend(1, None, Some(1))).unwrap();
    assert!(matches!(first.recv().unwrap(), ServerMsg::Accepted { .. }));
    match first.recv().unwrap() {
        ServerMsg::Cancelled {
            order: 1,
            qty: 2,
            reason: CancelReason::Reduce,
            ..
        } => {}
        other => panic!("ended by the amend: {other}"),
    }
    // Refusals, in the rules' order, leave the order as it was.
    for (msg, reason) in [
        (amend(1, Some(5_000), None), Reason::UnknownOrder),
        (amend(2, None, None), Reason::InvalidOrder),
        (
            ClientMsg::Amend {
                order: 2,
                price: None,
                qty: None,
                stop_price: Some(4_500),
            },
            Reason::InvalidOrder,
        ),
        (amend(2, Some(-1), Some(0)), Reason::InvalidQty),
        (amend(2, Some(-1), Some(2)), Reason::InvalidPrice),
        (
            amend(2, None, Some(1_000_000_000_000)),
            Reason::InsufficientFunds,
        ),
    ] {
        second.send(&msg).unwrap();
        match second.recv().unwrap() {
            ServerMsg::Rejected {
                kind: RequestKind::Amend,
                reason: r,
                ..
            } => assert_eq!(r, reason, "{msg:?}"),
            other => panic!("{msg:?}: {other}"),
        }
    }
    let orders = report(&mut second).orders;
    assert_eq!(
        (orders[0].order, orders[0].price, orders[0].remaining),
        (2, 4_000, 4)
    );
    // Another user's order is unknown_order.
    buyer.send(&amend(2, Some(4_100), None)).unwrap();
    let (rejected, _) = recv_until(&mut buyer, |m| matches!(m, ServerMsg::Rejected { .. }));
    assert!(
        matches!(
            rejected,
            ServerMsg::Rejected {
                reason: Reason::UnknownOrder,
                ..
            }
        ),
        "{rejected}"
    );
    server.shutdown().unwrap();
}

#[test]
fn the_admin_sets_the_order_id_window_and_a_resent_order_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut a = admin(&server);
    let window =
        |a: &mut Client, request| match a.request(&ClientMsg::VenueSettings { request }).unwrap() {
            ServerMsg::VenueSettings {
                request: r,
                order_id_window_ns,
                ..
            } => {
                assert_eq!(r, request);
                order_id_window_ns
            }
            m => panic!("{m}"),
        };
    // The demo venue starts with a day.
    assert_eq!(window(&mut a, 1), 86_400_000_000_000);
    let mut t = trader(&server, 1);
    let place_and_cancel = |t: &mut Client, order| {
        t.place(NewOrder::limit(order, BTC, Side::Buy, 100, 1))
            .unwrap();
        assert!(matches!(t.recv().unwrap(), ServerMsg::Accepted { .. }));
        t.cancel(order).unwrap();
        assert!(matches!(t.recv().unwrap(), ServerMsg::Accepted { .. }));
        assert!(matches!(t.recv().unwrap(), ServerMsg::Cancelled { .. }));
    };
    place_and_cancel(&mut t, 1);
    // The same id again, as a client would resend after a lost acknowledgement.
    t.place(NewOrder::limit(1, BTC, Side::Buy, 100, 1)).unwrap();
    assert!(matches!(
        t.recv().unwrap(),
        ServerMsg::Rejected {
            reason: Reason::DuplicateOrderId,
            ..
        }
    ));
    // A negative window is refused; 0 forgets every ended id.
    match a
        .request(&ClientMsg::SetOrderIdWindow {
            request: 2,
            window_ns: -1,
        })
        .unwrap()
    {
        ServerMsg::AdminResult { result, .. } => assert_eq!(result, Err(Reason::InvalidQty)),
        m => panic!("{m}"),
    }
    match a
        .request(&ClientMsg::SetOrderIdWindow {
            request: 3,
            window_ns: 0,
        })
        .unwrap()
    {
        ServerMsg::AdminResult { result, .. } => assert_eq!(result, Ok(())),
        m => panic!("{m}"),
    }
    assert_eq!(window(&mut a, 4), 0);
    place_and_cancel(&mut t, 1);
    // Only an admin sets it.
    t.send(&ClientMsg::SetOrderIdWindow {
        request: 5,
        window_ns: 1,
    })
    .unwrap();
    assert!(matches!(
        t.recv().unwrap(),
        ServerMsg::Error {
            code: ErrorCode::NotAdmin,
            ..
        }
    ));
    server.shutdown().unwrap();
}

// ----- rulebook part 2 over the binary protocol ----------------------------------------------

/// Stop orders (docs/rules.md, "Stop and stop-limit orders").
#[test]
fn a_stop_order_sent_as_new_order_ext_triggers_on_a_trade_and_then_trades() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut stopper = trader(&server, 1);
    let mut maker = trader(&server, 2);
    let mut taker = trader(&server, 3);
    let stop = NewOrder {
        order_type: Some(rialto_core::OrderType::Stop),
        tif: Some(rialto_core::Tif::Ioc),
        // A spot stop buy carries its protection price (the most it pays once triggered).
        price: Some(5_200),
        extras: rialto_core::OrderExtras::NONE.with_stop_price(5_100),
        ..NewOrder::limit(1, BTC, Side::Buy, 0, 1)
    };
    stopper.place(stop).unwrap();
    let accepted = stopper.recv().unwrap();
    assert!(
        matches!(accepted, ServerMsg::Accepted { order: 1, .. }),
        "{accepted}"
    );
    maker
        .place(NewOrder::limit(7, BTC, Side::Sell, 5_100, 3))
        .unwrap();
    assert!(matches!(maker.recv().unwrap(), ServerMsg::Accepted { .. }));
    taker
        .place(NewOrder::limit(8, BTC, Side::Buy, 5_100, 1))
        .unwrap();
    match stopper.recv().unwrap() {
        ServerMsg::Triggered {
            order: 1,
            stop_price: 5_100,
            side: Side::Buy,
            ..
        } => {}
        other => panic!("triggered: {other}"),
    }
    match stopper.recv().unwrap() {
        ServerMsg::Trade {
            order: 1,
            price: 5_100,
            qty: 1,
            liquidity: Liquidity::Taker,
            ..
        } => {}
        other => panic!("the triggered stop's fill: {other}"),
    }
    server.shutdown().unwrap();
}

/// MyReportExt and UserReportExt answer with every field of each open order (a pending stop,
/// a part-filled GTD iceberg); MyReport keeps answering with the old Report, which has none
/// of them.
#[test]
fn report_ext_lists_each_open_orders_type_tif_stop_shown_filled_and_expiry() {
    use rialto_core::{OrderExtras, OrderType, Tif};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut t = trader(&server, 1);
    let mut taker = trader(&server, 2);
    let expire_ts = 4_102_444_800_000_000_000; // 2100-01-01
    let iceberg = NewOrder {
        tif: Some(Tif::Gtd),
        extras: OrderExtras::NONE
            .with_display_qty(2)
            .with_expire_ts(expire_ts),
        ..NewOrder::limit(1, BTC, Side::Sell, 6_000, 10)
    };
    let stop = NewOrder {
        order_type: Some(OrderType::StopLimit),
        extras: OrderExtras::NONE.with_stop_price(4_000),
        ..NewOrder::limit(2, BTC, Side::Sell, 3_900, 1)
    };
    for order in [iceberg, stop] {
        t.place(order).unwrap();
        let (accepted, _) = recv_until(&mut t, |m| {
            matches!(m, ServerMsg::Accepted { .. } | ServerMsg::Rejected { .. })
        });
        assert!(matches!(accepted, ServerMsg::Accepted { .. }), "{accepted}");
    }
    taker
        .place(NewOrder::limit(9, BTC, Side::Buy, 6_000, 3))
        .unwrap();
    recv_until(&mut t, |m| matches!(m, ServerMsg::Trade { qty: 1, .. }));

    let check = |report: &rialto_core::UserReport| {
        let [ice, stop] = &report.orders[..] else {
            panic!("two open orders: {report:?}")
        };
        assert_eq!(ice.order, 1);
        assert_eq!(
            (ice.order_type, ice.tif, ice.price, ice.stop_price),
            (OrderType::Limit, Tif::Gtd, 6_000, 0)
        );
        // 3 filled: the shown 2, then 1 of the refill, which shows the 1 left of it.
        assert_eq!(
            (ice.remaining, ice.shown, ice.filled, ice.expire_ts),
            (7, 1, 3, expire_ts)
        );
        assert_eq!(stop.order, 2);
        assert_eq!(
            (stop.order_type, stop.tif, stop.price, stop.stop_price),
            (OrderType::StopLimit, Tif::Gtc, 3_900, 4_000)
        );
        assert_eq!(
            (stop.remaining, stop.shown, stop.filled, stop.expire_ts),
            (1, 0, 0, 0)
        );
    };
    match t.request(&ClientMsg::MyReportExt { request: 7 }).unwrap() {
        ServerMsg::ReportExt {
            request: 7, report, ..
        } => check(&report),
        other => panic!("report ext: {other}"),
    }
    let mut a = admin(&server);
    match a
        .request(&ClientMsg::UserReportExt {
            request: 8,
            user: 1,
        })
        .unwrap()
    {
        ServerMsg::ReportExt {
            request: 8, report, ..
        } => check(&report),
        other => panic!("user report ext: {other}"),
    }
    // The old frame: the same orders, as an old client reads them.
    let old = report(&mut t);
    assert_eq!(
        old.orders
            .iter()
            .map(|o| (o.order, o.price, o.remaining))
            .collect::<Vec<_>>(),
        [(1, 6_000, 7), (2, 3_900, 1)]
    );
    server.shutdown().unwrap();
}

/// Trading phases (docs/rules.md, "Trading phases, halts and auctions").
#[test]
fn the_admin_halts_a_symbol_and_every_session_hears_of_it() {
    use rialto_core::Phase;
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut a = admin(&server);
    let mut t = trader(&server, 1);
    let set = |a: &mut Client, request, phase| match a
        .request(&ClientMsg::SetPhase {
            request,
            symbol: BTC,
            phase,
        })
        .unwrap()
    {
        ServerMsg::AdminResult { result, .. } => result,
        m => panic!("{m}"),
    };
    assert_eq!(set(&mut a, 1, None), Err(Reason::InvalidPhase));
    assert_eq!(set(&mut a, 2, Some(Phase::Halted)), Ok(()));
    match t.recv().unwrap() {
        ServerMsg::PhaseChanged {
            symbol,
            phase: Phase::Halted,
            ..
        } => assert_eq!(symbol, BTC),
        other => panic!("phase: {other}"),
    }
    t.place(NewOrder::limit(1, BTC, Side::Buy, 100, 1)).unwrap();
    let (rejected, _) = recv_until(&mut t, |m| matches!(m, ServerMsg::Rejected { .. }));
    assert!(
        matches!(
            rejected,
            ServerMsg::Rejected {
                reason: Reason::SymbolHalted,
                ..
            }
        ),
        "{rejected}"
    );
    match a.request(&ClientMsg::VenueSettings { request: 3 }).unwrap() {
        ServerMsg::VenueSettings { symbols, .. } => {
            assert_eq!(symbols[0].0, BTC);
            assert_eq!(symbols[0].1.phase, Phase::Halted);
            assert_eq!(symbols[1].1.phase, Phase::Continuous);
        }
        m => panic!("{m}"),
    }
    assert_eq!(set(&mut a, 4, Some(Phase::Continuous)), Ok(()));
    t.place(NewOrder::limit(2, BTC, Side::Buy, 100, 1)).unwrap();
    let (accepted, _) = recv_until(&mut t, |m| matches!(m, ServerMsg::Accepted { .. }));
    assert!(
        matches!(accepted, ServerMsg::Accepted { order: 2, .. }),
        "{accepted}"
    );
    server.shutdown().unwrap();
}

/// Suspension (docs/rules.md, "User suspension").
#[test]
fn a_suspended_user_loses_its_orders_until_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    let mut a = admin(&server);
    let mut t = trader(&server, 1);
    t.place(NewOrder::limit(1, BTC, Side::Buy, 100, 2)).unwrap();
    assert!(matches!(t.recv().unwrap(), ServerMsg::Accepted { .. }));
    let ok = |m: ServerMsg| {
        assert!(
            matches!(m, ServerMsg::AdminResult { result: Ok(()), .. }),
            "{m}"
        )
    };
    ok(a.request(&ClientMsg::SuspendUser {
        request: 1,
        user: 1,
    })
    .unwrap());
    match t.recv().unwrap() {
        ServerMsg::Cancelled {
            order: 1,
            qty: 2,
            reason: CancelReason::Suspended,
            ..
        } => {}
        other => panic!("cancelled: {other}"),
    }
    t.place(NewOrder::limit(2, BTC, Side::Buy, 100, 1)).unwrap();
    assert!(matches!(
        t.recv().unwrap(),
        ServerMsg::Rejected {
            reason: Reason::UserSuspended,
            ..
        }
    ));
    ok(a.request(&ClientMsg::ResumeUser {
        request: 2,
        user: 1,
    })
    .unwrap());
    t.place(NewOrder::limit(3, BTC, Side::Buy, 100, 1)).unwrap();
    assert!(matches!(
        t.recv().unwrap(),
        ServerMsg::Accepted { order: 3, .. }
    ));
    server.shutdown().unwrap();
}
