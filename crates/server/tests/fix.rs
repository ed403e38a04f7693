//! The FIX gateway over real sockets: logon rules, orders that trade between two sessions,
//! replace and cancel, rejects, market data, the symbol list, and a restart that keeps
//! sequence numbers and live orders.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::fix::{FixClient, transact_time};
use rialto_fix::{ApplVersion, tags};
use rialto_server::RunningServer;

fn start(data: &std::path::Path) -> RunningServer {
    common::start(data, |_| {})
}

fn fix_addr(server: &RunningServer) -> SocketAddr {
    server.fix_addr.expect("FIX is on by default")
}

#[test]
fn two_sessions_trade_amend_and_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut buyer = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    let mut seller = FixClient::connect(fix_addr(&server), "TRADER2", "FIXT.1.1");
    let logon = buyer.logon(&server, 1);
    assert_eq!(logon.req(tags::HEART_BT_INT), "30");
    seller.logon(&server, 2);

    buyer.new_order("B1", "1", "0.010", "100.00");
    let new = buyer.expect("8");
    assert_eq!(new.req(tags::EXEC_TYPE), "0", "{new:?}");
    assert_eq!(new.req(tags::ORD_STATUS), "0");
    assert_eq!(new.req(tags::CL_ORD_ID), "B1");
    assert_eq!(new.req(tags::LEAVES_QTY), "0.010");
    assert_eq!(new.req(tags::CUM_QTY), "0.000");
    let order_id = new.req(tags::ORDER_ID).to_string();

    seller.new_order("S1", "2", "0.004", "100.00");
    let s_new = seller.expect("8");
    assert_eq!(s_new.req(tags::EXEC_TYPE), "0");
    let s_fill = seller.expect("8");
    assert_eq!(s_fill.req(tags::EXEC_TYPE), "F");
    assert_eq!(s_fill.req(tags::ORD_STATUS), "2");
    assert_eq!(s_fill.req(tags::LAST_PX), "100.00");
    assert_eq!(s_fill.req(tags::LAST_QTY), "0.004");
    assert_eq!(s_fill.req(tags::AVG_PX), "100");
    assert_eq!(s_fill.req(tags::LEAVES_QTY), "0.000");

    let b_fill = buyer.expect("8");
    assert_eq!(b_fill.req(tags::EXEC_TYPE), "F");
    assert_eq!(b_fill.req(tags::ORD_STATUS), "1");
    assert_eq!(b_fill.req(tags::ORDER_ID), order_id);
    assert_eq!(b_fill.req(tags::CUM_QTY), "0.004");
    assert_eq!(b_fill.req(tags::LEAVES_QTY), "0.006");

    // Price only: a move.
    buyer.send(
        "G",
        &[
            (tags::ORIG_CL_ORD_ID, "B1"),
            (tags::CL_ORD_ID, "B2"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::ORDER_QTY, "0.010"),
            (tags::ORD_TYPE, "2"),
            (tags::PRICE, "99.50"),
            (tags::TRANSACT_TIME, &transact_time()),
        ],
    );
    let replaced = buyer.expect("8");
    assert_eq!(replaced.req(tags::EXEC_TYPE), "5");
    assert_eq!(replaced.req(tags::ORIG_CL_ORD_ID), "B1");
    assert_eq!(replaced.req(tags::CL_ORD_ID), "B2");
    assert_eq!(replaced.req(tags::PRICE), "99.50");
    assert_eq!(replaced.req(tags::ORD_STATUS), "1");
    assert_eq!(replaced.req(tags::ORDER_ID), order_id);

    // Quantity up: cancel and new, same OrderID.
    buyer.send(
        "G",
        &[
            (tags::ORIG_CL_ORD_ID, "B2"),
            (tags::CL_ORD_ID, "B3"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::ORDER_QTY, "0.020"),
            (tags::ORD_TYPE, "2"),
            (tags::PRICE, "99.50"),
            (tags::TRANSACT_TIME, &transact_time()),
        ],
    );
    let replaced = buyer.expect("8");
    assert_eq!(replaced.req(tags::EXEC_TYPE), "5", "{replaced:?}");
    assert_eq!(replaced.req(tags::LEAVES_QTY), "0.016");
    assert_eq!(replaced.req(tags::CUM_QTY), "0.004");
    assert_eq!(replaced.req(tags::ORDER_ID), order_id);

    // Unknown order: OrderCancelReject.
    buyer.send(
        "F",
        &[
            (tags::ORIG_CL_ORD_ID, "nope"),
            (tags::CL_ORD_ID, "C0"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::TRANSACT_TIME, &transact_time()),
        ],
    );
    let reject = buyer.expect("9");
    assert_eq!(reject.req(tags::CXL_REJ_REASON), "1");

    buyer.send(
        "F",
        &[
            (tags::ORIG_CL_ORD_ID, "B3"),
            (tags::CL_ORD_ID, "C1"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::TRANSACT_TIME, &transact_time()),
        ],
    );
    let cancelled = buyer.expect("8");
    assert_eq!(cancelled.req(tags::EXEC_TYPE), "4");
    assert_eq!(cancelled.req(tags::ORD_STATUS), "4");
    assert_eq!(cancelled.req(tags::CL_ORD_ID), "C1");
    assert_eq!(cancelled.req(tags::ORIG_CL_ORD_ID), "B3");
    assert_eq!(cancelled.req(tags::LEAVES_QTY), "0.000");
    assert_eq!(cancelled.req(tags::CUM_QTY), "0.004");

    // Off the tick grid, and a duplicate live ClOrdID.
    buyer.new_order("B9", "1", "0.001", "100.005");
    let off = buyer.expect("8");
    assert_eq!(off.req(tags::EXEC_TYPE), "8");
    assert_eq!(off.req(tags::ORD_STATUS), "8");
    buyer.new_order("B10", "1", "0.001", "90");
    buyer.expect("8");
    buyer.new_order("B10", "1", "0.001", "90");
    let dup = buyer.expect("8");
    assert_eq!(dup.req(tags::EXEC_TYPE), "8");
    assert_eq!(dup.req(tags::ORD_REJ_REASON), "6");

    // An application message the venue does not take.
    buyer.send("AE", &[(571, "T1")]);
    let business = buyer.expect("j");
    assert_eq!(business.req(tags::BUSINESS_REJECT_REASON), "3");

    server.shutdown().unwrap();
}

/// 1S.c: a Logon that is not authenticated (a wrong Password, Username or TargetCompID) or
/// names no configured session is closed without a message.
#[test]
fn t1s_c_logon_needs_the_users_password_else_the_connection_closes_without_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut client = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    client.send(
        "A",
        &[
            (tags::ENCRYPT_METHOD, "0"),
            (tags::HEART_BT_INT, "30"),
            (tags::USERNAME, "1"),
            (tags::PASSWORD, "wrong"),
        ],
    );
    client.expect_closed_without_a_message();

    // A wrong Username (another user's).
    let mut client = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    client.logon_with(2, &server.credentials.user_secret(2));
    client.expect_closed_without_a_message();

    // A wrong TargetCompID.
    let mut client = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    let secret = server.credentials.user_secret(1);
    let mut logon = Vec::new();
    let mut w = rialto_fix::MessageWriter::begin(&mut logon, b"FIX.4.4", b"A");
    w.str(tags::SENDER_COMP_ID, b"TRADER1")
        .str(tags::TARGET_COMP_ID, b"SOMEONE")
        .uint(tags::MSG_SEQ_NUM, 1)
        .timestamp(tags::SENDING_TIME, common::fix::now_ns())
        .str(tags::ENCRYPT_METHOD, b"0")
        .str(tags::HEART_BT_INT, b"30")
        .str(tags::USERNAME, b"1")
        .str(tags::PASSWORD, secret.as_bytes());
    w.finish();
    std::io::Write::write_all(&mut client.stream, &logon).unwrap();
    client.expect_closed_without_a_message();

    // An unknown CompID gets no session at all.
    let mut stranger = FixClient::connect(fix_addr(&server), "NOBODY", "FIX.4.4");
    stranger.send(
        "A",
        &[(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")],
    );
    stranger.expect_closed_without_a_message();
    server.shutdown().unwrap();
}

/// 13b: an unsolicited Logout is answered with a Logout, and the venue keeps the connection
/// until the counterparty closes it (or 10 s pass), ignoring what comes meanwhile.
#[test]
fn t13b_an_unsolicited_logout_is_answered_and_the_venue_waits_for_the_close() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut client = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    client.logon(&server, 1);
    client.send("5", &[]);
    let logout = client.expect("5");
    assert_eq!(logout.req(tags::MSG_SEQ_NUM), "2");
    // Ignored: no Heartbeat, and its number is not used.
    client.send("1", &[(tags::TEST_REQ_ID, "after-logout")]);
    let start = Instant::now();
    assert!(client.recv_within(Duration::from_secs(2)).is_none());
    assert!(start.elapsed() >= Duration::from_secs(2), "closed at once");
    drop(client);

    // The session is given back once the venue sees the close: it logs on again where it
    // stopped. Until then a second connection is closed as a session in use (1S.b), and the
    // Logon is tried again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut client, logon) = loop {
        let mut client = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
        client.seq = 3;
        client.logon_with(1, &server.credentials.user_secret(1));
        match client.recv_within(Duration::from_secs(5)) {
            Some(logon) if logon.msg_type == "A" => break (client, logon),
            other => assert!(Instant::now() < deadline, "no Logon: {other:?}"),
        }
    };
    assert_eq!(logon.req(tags::MSG_SEQ_NUM), "3");
    client.send("1", &[(tags::TEST_REQ_ID, "again")]);
    let heartbeat = client
        .recv_within(Duration::from_secs(5))
        .expect("a Heartbeat");
    assert_eq!(heartbeat.msg_type, "0", "{heartbeat:?}");
    assert_eq!(heartbeat.req(tags::TEST_REQ_ID), "again");
    server.shutdown().unwrap();
}

/// 14m: a conditionally required field missing (a limit order without Price):
/// BusinessMessageReject with BusinessRejectReason 5 naming the field; no order, and the
/// session goes on.
#[test]
fn t14m_a_limit_order_without_price_gets_business_message_reject_5() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    for begin in ["FIX.4.2", "FIX.4.4", "FIXT.1.1"] {
        let mut client = FixClient::connect(fix_addr(&server), "TRADER1", begin);
        client.logon(&server, 1);
        let now = transact_time();
        client.send(
            "D",
            &[
                (tags::CL_ORD_ID, "NP1"),
                (tags::HANDL_INST, "1"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "1"),
                (tags::TRANSACT_TIME, &now),
                (tags::ORDER_QTY, "0.001"),
                (tags::ORD_TYPE, "2"),
                (tags::TIME_IN_FORCE, "1"),
            ],
        );
        let reject = client.expect("j");
        assert_eq!(reject.req(tags::BUSINESS_REJECT_REASON), "5", "{begin}");
        assert_eq!(reject.req(tags::REF_MSG_TYPE), "D");
        assert_eq!(reject.req(tags::REF_SEQ_NUM), "2");
        assert_eq!(reject.req(tags::BUSINESS_REJECT_REF_ID), "NP1");
        assert_eq!(
            reject.req(tags::TEXT),
            "Conditionally required field missing, field=44"
        );
        // The session goes on: the same ClOrdID with a Price is a new order.
        client.new_order("NP1", "1", "0.001", "50.00");
        let new = client.expect("8");
        assert_eq!(new.req(tags::EXEC_TYPE), "0", "{begin}: {new:?}");
        client.send(
            "F",
            &[
                (tags::ORIG_CL_ORD_ID, "NP1"),
                (tags::CL_ORD_ID, "NP1-C"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "1"),
                (tags::TRANSACT_TIME, &now),
                (tags::ORDER_QTY, "0.001"),
            ],
        );
        let cancelled = client.expect("8");
        assert_eq!(
            cancelled.req(tags::EXEC_TYPE),
            "4",
            "{begin}: {cancelled:?}"
        );
    }
    server.shutdown().unwrap();
}

#[test]
fn market_data_snapshot_then_increments_and_the_symbol_list() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut watcher = FixClient::connect(fix_addr(&server), "TRADER3", "FIX.4.4");
    watcher.logon(&server, 3);
    watcher.send(
        "x",
        &[
            (tags::SECURITY_REQ_ID, "L1"),
            (tags::SECURITY_LIST_REQUEST_TYPE, "4"),
        ],
    );
    let list = watcher.expect("y");
    let symbols: Vec<&str> = list
        .fields
        .iter()
        .filter(|(t, _)| *t == tags::SYMBOL)
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(symbols, vec!["BTC-PERP", "BTC-USD", "ETH-USD"]);

    let mut trader = FixClient::connect(fix_addr(&server), "TRADER4", "FIX.4.4");
    trader.logon(&server, 4);
    trader.new_order("T1", "1", "0.005", "101.00");
    trader.expect("8");
    // Market data follows the engine a little later: ask for snapshots until the feed has
    // the order, then subscribe.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for attempt in 0.. {
        let id = format!("P{attempt}");
        watcher.send(
            "V",
            &[
                (tags::MD_REQ_ID, id.as_str()),
                (tags::SUBSCRIPTION_REQUEST_TYPE, "0"),
                (tags::MARKET_DEPTH, "0"),
                (tags::NO_MD_ENTRY_TYPES, "1"),
                (tags::MD_ENTRY_TYPE, "0"),
                (tags::NO_RELATED_SYM, "1"),
                (tags::SYMBOL, "BTC-USD"),
            ],
        );
        if watcher.expect("W").req(tags::NO_MD_ENTRIES) == "1" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the feed never showed the order"
        );
    }

    watcher.send(
        "V",
        &[
            (tags::MD_REQ_ID, "M1"),
            (tags::SUBSCRIPTION_REQUEST_TYPE, "1"),
            (tags::MARKET_DEPTH, "0"),
            (tags::NO_MD_ENTRY_TYPES, "3"),
            (tags::MD_ENTRY_TYPE, "0"),
            (tags::MD_ENTRY_TYPE, "1"),
            (tags::MD_ENTRY_TYPE, "2"),
            (tags::NO_RELATED_SYM, "1"),
            (tags::SYMBOL, "BTC-USD"),
        ],
    );
    let snapshot = watcher.expect("W");
    assert_eq!(snapshot.req(tags::NO_MD_ENTRIES), "1");
    assert_eq!(snapshot.req(tags::MD_ENTRY_PX), "101.00");
    assert_eq!(snapshot.req(tags::MD_ENTRY_SIZE), "0.005");

    // A sell (by another user: no self-trade) that trades 0.002: a trade entry and a
    // changed bid.
    let mut seller = FixClient::connect(fix_addr(&server), "TRADER6", "FIX.4.4");
    seller.logon(&server, 6);
    seller.new_order("T2", "2", "0.002", "101.00");
    let mut saw_trade = false;
    let mut bid_size = None;
    let deadline = Instant::now() + Duration::from_secs(10);
    while (!saw_trade || bid_size.is_none()) && Instant::now() < deadline {
        let x = watcher.expect("X");
        let mut entry_type = "";
        for (tag, value) in &x.fields {
            match *tag {
                tags::MD_ENTRY_TYPE => entry_type = value,
                tags::MD_ENTRY_SIZE if entry_type == "2" => {
                    assert_eq!(value, "0.002");
                    saw_trade = true;
                }
                tags::MD_ENTRY_SIZE if entry_type == "0" => bid_size = Some(value.clone()),
                _ => {}
            }
        }
    }
    assert!(saw_trade);
    assert_eq!(bid_size.as_deref(), Some("0.003"));

    // Unknown symbols are refused.
    watcher.send(
        "V",
        &[
            (tags::MD_REQ_ID, "M2"),
            (tags::SUBSCRIPTION_REQUEST_TYPE, "1"),
            (tags::MARKET_DEPTH, "0"),
            (tags::NO_MD_ENTRY_TYPES, "1"),
            (tags::MD_ENTRY_TYPE, "2"),
            (tags::NO_RELATED_SYM, "1"),
            (tags::SYMBOL, "DOGE-USD"),
        ],
    );
    let refused = watcher.expect("Y");
    assert_eq!(refused.req(tags::MD_REQ_REJ_REASON), "0");
    server.shutdown().unwrap();
}

/// A limit buy of one lot at 2 on `symbol` (a symbol with no decimal settings: a tick and a
/// lot are 1).
fn order_on(client: &mut FixClient, cl_ord_id: &str, symbol: &str) -> common::fix::Msg {
    let now = transact_time();
    client.send(
        "D",
        &[
            (tags::CL_ORD_ID, cl_ord_id),
            (tags::HANDL_INST, "1"),
            (tags::SYMBOL, symbol),
            (tags::SIDE, "1"),
            (tags::TRANSACT_TIME, &now),
            (tags::ORDER_QTY, "1"),
            (tags::ORD_TYPE, "2"),
            (tags::PRICE, "2"),
            (tags::TIME_IN_FORCE, "1"),
        ],
    );
    client.recv()
}

#[test]
fn a_symbol_added_on_the_admin_port_is_tradable_over_fix_at_once() {
    use rialto_wire::{ClientMsg, ServerMsg};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut fix = FixClient::connect(fix_addr(&server), "TRADER5", "FIX.4.4");
    fix.logon(&server, 5);
    let refused = order_on(&mut fix, "SOL0", "SOL-USD");
    assert!(
        refused.msg_type != "8" || refused.req(tags::EXEC_TYPE) == "8",
        "an unknown symbol is refused: {refused:?}"
    );
    let mut admin = common::admin(&server);
    let spec = common::spot_spec("SOL-USD", "SOL", "USD", 100);
    let added = admin
        .request(&ClientMsg::AddSymbol { request: 1, spec })
        .unwrap();
    assert!(
        matches!(added, ServerMsg::AdminResult { result: Ok(()), .. }),
        "{added}"
    );
    // No waiting: the FIX gateway heard of the symbol before the admin had its answer.
    let report = order_on(&mut fix, "SOL1", "SOL-USD");
    assert_eq!(report.msg_type, "8", "{report:?}");
    assert_eq!(report.req(tags::EXEC_TYPE), "0", "{report:?}");
    assert_eq!(report.req(tags::SYMBOL), "SOL-USD");
    server.shutdown().unwrap();
}

#[test]
fn an_idle_session_gets_a_heartbeat_every_heart_bt_int() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut client = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    let password = server.credentials.user_secret(1);
    client.send(
        "A",
        &[
            (tags::ENCRYPT_METHOD, "0"),
            (tags::HEART_BT_INT, "1"),
            (tags::USERNAME, "1"),
            (tags::PASSWORD, password.as_str()),
        ],
    );
    let logon = client.expect("A");
    assert_eq!(logon.req(tags::HEART_BT_INT), "1");
    // Nothing else happens on the venue: each Heartbeat comes on its timer, about a second
    // after the last message the venue sent (the allowance is for a loaded machine). The
    // client sends its own, so that the venue has no silence to test.
    for _ in 0..2 {
        client.send("0", &[]);
        let since = Instant::now();
        let heartbeat = client
            .recv_within(Duration::from_secs(5))
            .expect("a Heartbeat");
        let waited = since.elapsed();
        assert_eq!(heartbeat.msg_type, "0", "{heartbeat:?}");
        assert_eq!(heartbeat.get(tags::TEST_REQ_ID), None);
        assert!(
            waited >= Duration::from_millis(800) && waited <= Duration::from_millis(1_600),
            "a Heartbeat after {waited:?} with a HeartBtInt of 1 s"
        );
    }
    server.shutdown().unwrap();
}

#[test]
fn a_restart_keeps_sequence_numbers_and_live_orders() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut client = FixClient::connect(fix_addr(&server), "TRADER5", "FIX.4.4");
    client.logon(&server, 5);
    client.new_order("R1", "1", "0.003", "95.00");
    let new = client.expect("8");
    assert_eq!(new.req(tags::EXEC_TYPE), "0", "{new:?}");
    let order_id = new.req(tags::ORDER_ID).to_string();
    client.send("5", &[]);
    client.expect("5");
    let next_in = client.seq;
    server.shutdown().unwrap();

    let server = start(dir.path());
    let mut client = FixClient::connect(fix_addr(&server), "TRADER5", "FIX.4.4");
    client.seq = next_in;
    let logon = client.logon(&server, 5);
    // Our Logon, ER New and Logout came before: the venue's numbers go on from there.
    assert_eq!(logon.req(tags::MSG_SEQ_NUM), "4");
    client.send(
        "F",
        &[
            (tags::ORIG_CL_ORD_ID, "R1"),
            (tags::CL_ORD_ID, "R2"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::TRANSACT_TIME, &transact_time()),
        ],
    );
    let cancelled = client.expect("8");
    assert_eq!(cancelled.req(tags::EXEC_TYPE), "4");
    assert_eq!(cancelled.req(tags::ORDER_ID), order_id);
    server.shutdown().unwrap();
}

/// The user's open orders, seen through the binary gateway.
fn open_orders(server: &RunningServer, user: i64) -> usize {
    let mut client = common::trader(server, user);
    match client
        .request(&rialto_wire::ClientMsg::MyReport { request: 1 })
        .unwrap()
    {
        rialto_wire::ServerMsg::Report { report, .. } => report.orders.len(),
        other => panic!("expected a report, got {other:?}"),
    }
}

#[test]
fn cancel_on_disconnect_cancels_the_sessions_orders() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |config| {
        for s in &mut config.fix.sessions {
            s.cancel_on_disconnect = Some(s.comp_id == "TRADER7");
        }
    });
    // TRADER7 cancels on disconnect; TRADER8 keeps its orders.
    for (comp_id, user) in [("TRADER7", 7), ("TRADER8", 8)] {
        let mut client = FixClient::connect(fix_addr(&server), comp_id, "FIX.4.4");
        client.logon(&server, user);
        client.new_order("K1", "1", "0.001", "50.00");
        client.new_order("K2", "1", "0.001", "51.00");
        client.expect("8");
        client.expect("8");
        assert_eq!(open_orders(&server, user), 2);
        drop(client); // the connection drops without a Logout
    }
    // The session is offline, so no message tells when its orders are gone: ask the venue.
    common::eventually(
        "TRADER7's orders cancelled",
        Duration::from_secs(10),
        || open_orders(&server, 7) == 0,
    );
    assert_eq!(open_orders(&server, 8), 2);

    // The cancels were reported to the offline session: its Logon reply is numbered after
    // them (Logon 1, two News 2-3, two Canceleds 4-5), and a resend brings them.
    let mut client = FixClient::connect(fix_addr(&server), "TRADER7", "FIX.4.4");
    client.seq = 4; // Logon, two orders
    let logon = client.logon(&server, 7);
    assert_eq!(logon.req(tags::MSG_SEQ_NUM), "6");
    client.send("2", &[(tags::BEGIN_SEQ_NO, "4"), (tags::END_SEQ_NO, "0")]);
    for _ in 0..2 {
        let cancelled = client.expect("8");
        assert_eq!(cancelled.req(tags::EXEC_TYPE), "4");
        assert_eq!(cancelled.req(tags::POSS_DUP_FLAG), "Y");
        assert_eq!(cancelled.req(tags::LEAVES_QTY), "0.000");
    }
    server.shutdown().unwrap();
}

#[test]
fn malformed_application_messages_get_session_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut client = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    client.logon(&server, 1);
    // No Side, sent on behalf of a client: the Reject names the field, and goes back to it.
    client.send(
        "D",
        &[
            (tags::ON_BEHALF_OF_COMP_ID, "CLIENT1"),
            (tags::CL_ORD_ID, "M1"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::TRANSACT_TIME, &transact_time()),
            (tags::ORDER_QTY, "0.001"),
            (tags::ORD_TYPE, "2"),
            (tags::PRICE, "10"),
        ],
    );
    let reject = client.expect("3");
    assert_eq!(reject.req(tags::SESSION_REJECT_REASON), "1");
    assert_eq!(reject.req(tags::REF_TAG_ID), "54");
    assert_eq!(reject.req(tags::TEXT), "Required tag missing, field=54");
    assert_eq!(reject.req(tags::DELIVER_TO_COMP_ID), "CLIENT1");
    // A tag no version defines, and a user-defined one (not allowed by default).
    for (tag, text) in [("999", "field=999"), ("5001", "field=5001")] {
        client.send("0", &[(tag.parse().unwrap(), "HI")]);
        let reject = client.expect("3");
        assert_eq!(reject.req(tags::SESSION_REJECT_REASON), "0");
        assert_eq!(reject.req(tags::REF_TAG_ID), tag);
        assert_eq!(
            reject.req(tags::TEXT),
            format!("Invalid tag number, {text}")
        );
    }
    // A value outside the enumeration.
    client.new_order("M2", "Z", "0.001", "10");
    let reject = client.expect("3");
    assert_eq!(reject.req(tags::SESSION_REJECT_REASON), "5");
    // A quantity that is not a number.
    client.new_order("M3", "1", "0.0x1", "10");
    let reject = client.expect("3");
    assert_eq!(reject.req(tags::SESSION_REJECT_REASON), "6");
    // A side FIX defines but the venue does not trade: a rejected order, echoing it, and
    // routed back to the desk it came through.
    let now = transact_time();
    client.send(
        "D",
        &[
            (tags::DELIVER_TO_COMP_ID, "DESK9"),
            (tags::CL_ORD_ID, "M5"),
            (tags::HANDL_INST, "1"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "5"),
            (tags::TRANSACT_TIME, &now),
            (tags::ORDER_QTY, "0.001"),
            (tags::ORD_TYPE, "2"),
            (tags::PRICE, "10"),
        ],
    );
    let rejected = client.expect("8");
    assert_eq!(rejected.req(tags::EXEC_TYPE), "8");
    assert_eq!(rejected.req(tags::SIDE), "5");
    assert_eq!(rejected.req(tags::ON_BEHALF_OF_COMP_ID), "DESK9");
    // The session goes on: a good order is taken.
    client.new_order("M4", "1", "0.001", "10");
    assert_eq!(client.expect("8").req(tags::EXEC_TYPE), "0");
    server.shutdown().unwrap();
}

/// A MarketDataRequest for one symbol: `types` are the MDEntryTypes, one character each.
fn market_data_request(client: &mut FixClient, md_req_id: &str, request_type: &str, types: &str) {
    let count = types.len().to_string();
    let mut fields = vec![
        (tags::MD_REQ_ID, md_req_id),
        (tags::SUBSCRIPTION_REQUEST_TYPE, request_type),
        (tags::MARKET_DEPTH, "0"),
        (tags::NO_MD_ENTRY_TYPES, count.as_str()),
    ];
    for i in 0..types.len() {
        fields.push((tags::MD_ENTRY_TYPE, &types[i..i + 1]));
    }
    fields.extend([(tags::NO_RELATED_SYM, "1"), (tags::SYMBOL, "BTC-USD")]);
    client.send("V", &fields);
}

/// The entries of a W or X: (MDUpdateAction or None, MDEntryType, price, size, RptSeq).
type MdEntry = (Option<String>, String, String, String, Option<u64>);

fn md_entries(msg: &common::fix::Msg) -> Vec<MdEntry> {
    let mut entries: Vec<MdEntry> = Vec::new();
    let mut action = None;
    for (tag, value) in &msg.fields {
        match *tag {
            tags::MD_UPDATE_ACTION => action = Some(value.clone()),
            tags::MD_ENTRY_TYPE => entries.push((
                action.take(),
                value.clone(),
                String::new(),
                String::new(),
                None,
            )),
            tags::MD_ENTRY_PX => entries.last_mut().unwrap().2 = value.clone(),
            tags::MD_ENTRY_SIZE => entries.last_mut().unwrap().3 = value.clone(),
            83 => entries.last_mut().unwrap().4 = Some(value.parse().unwrap()),
            _ => {}
        }
    }
    entries
}

#[test]
fn market_data_sends_only_the_entry_types_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut maker = FixClient::connect(fix_addr(&server), "TRADER4", "FIX.4.4");
    maker.logon(&server, 4);
    maker.new_order("M1", "1", "0.005", "101.00");
    maker.expect("8");
    maker.new_order("M2", "2", "0.004", "103.00");
    maker.expect("8");
    // Market data comes from the feed, which may apply the orders a moment after they are
    // acknowledged: another session watches the whole book until it holds both.
    let mut warm_up = FixClient::connect(fix_addr(&server), "TRADER5", "FIX.4.4");
    warm_up.logon(&server, 5);
    market_data_request(&mut warm_up, "ALL", "1", "01");
    let mut book: Vec<(String, String)> = Vec::new();
    while book.len() < 2 {
        let update = warm_up.recv();
        assert!(["W", "X"].contains(&update.msg_type.as_str()), "{update:?}");
        book.extend(md_entries(&update).into_iter().map(|e| (e.1, e.2)));
    }
    drop(warm_up);

    let mut watcher = FixClient::connect(fix_addr(&server), "TRADER3", "FIX.4.4");
    watcher.logon(&server, 3);
    // Bids only, offers only, trades only.
    let asked = [("B", "0"), ("O", "1"), ("T", "2")];
    for (id, types) in asked {
        market_data_request(&mut watcher, id, "1", types);
        let snapshot = watcher.expect("W");
        assert_eq!(snapshot.req(tags::MD_REQ_ID), id);
        let entries = md_entries(&snapshot);
        let expected: Vec<(&str, &str)> = match id {
            "B" => vec![("0", "101.00")],
            "O" => vec![("1", "103.00")],
            _ => vec![],
        };
        let got: Vec<(&str, &str)> = entries
            .iter()
            .map(|e| (e.1.as_str(), e.2.as_str()))
            .collect();
        assert_eq!(got, expected, "snapshot of {id}: {snapshot:?}");
    }
    // An entry type the venue does not publish (4: opening price): MarketDataRequestReject,
    // MDReqRejReason 8.
    market_data_request(&mut watcher, "OPEN", "1", "04");
    let refused = watcher.expect("Y");
    assert_eq!(refused.req(tags::MD_REQ_ID), "OPEN");
    assert_eq!(refused.req(tags::MD_REQ_REJ_REASON), "8");

    // A sell that trades 0.002 at 101 (a trade and a changed bid), then a new offer at 104.
    let mut seller = FixClient::connect(fix_addr(&server), "TRADER6", "FIX.4.4");
    seller.logon(&server, 6);
    seller.new_order("S1", "2", "0.002", "101.00");
    seller.new_order("S2", "2", "0.001", "104.00");
    let wanted: [(&str, MdEntry); 3] = [
        (
            "B",
            (
                Some("1".into()),
                "0".into(),
                "101.00".into(),
                "0.003".into(),
                Some(1),
            ),
        ),
        (
            "O",
            (
                Some("0".into()),
                "1".into(),
                "104.00".into(),
                "0.001".into(),
                Some(1),
            ),
        ),
        (
            "T",
            (
                Some("0".into()),
                "2".into(),
                "101.00".into(),
                "0.002".into(),
                Some(1),
            ),
        ),
    ];
    let mut seen: Vec<(String, MdEntry)> = Vec::new();
    while !wanted
        .iter()
        .all(|(id, e)| seen.iter().any(|(i, s)| i == id && s == e))
    {
        let x = watcher.expect("X");
        let id = x.req(tags::MD_REQ_ID).to_string();
        let (_, types) = asked.iter().find(|(i, _)| *i == id).unwrap();
        for entry in md_entries(&x) {
            assert_eq!(
                &entry.1, types,
                "{id} asked for MDEntryType {types} only: {x:?}"
            );
            seen.push((id.clone(), entry));
        }
    }
    // Exactly those: nothing else changed the book or traded.
    assert_eq!(seen.len(), 3, "{seen:?}");
    server.shutdown().unwrap();
}

/// A small deterministic generator (xorshift64*), so that a failure can be rerun.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

/// The mid price (ticks of 0.01) the random traders trade around.
const MID: i64 = 10_000;

/// One binary trader placing, crossing, moving and cancelling at random around `MID` until
/// `stop`; each batch ends with an order whose answer it waits for, so that when it returns
/// every command it sent has been applied. The client stays open (no cancel on disconnect).
fn random_trader(
    server: &RunningServer,
    user: i64,
    first_order: i64,
    stop: &std::sync::atomic::AtomicBool,
) -> (rialto_client::Client, i64) {
    use rialto_core::{Side, SymbolId};
    use rialto_wire::{ClientMsg, NewOrder, ServerMsg};
    let mut client = common::trader(server, user);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (user * 7919 + first_order) as u64);
    let mut live: Vec<i64> = Vec::new();
    let mut next = first_order;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let mut batch = Vec::new();
        for _ in 0..10 {
            let pick = rng.below(100);
            if live.len() > 30 || (pick < 25 && !live.is_empty()) {
                let order = live.swap_remove(rng.below(live.len() as u64) as usize);
                batch.push(ClientMsg::Cancel { order });
            } else if pick < 35 && !live.is_empty() {
                let order = live[rng.below(live.len() as u64) as usize];
                let price = MID - 15 + rng.below(31) as i64;
                batch.push(ClientMsg::Move { order, price });
            } else {
                // Buys and sells overlap by 10 ticks: about a third of them cross.
                let side = [Side::Buy, Side::Sell][rng.below(2) as usize];
                let price = match side {
                    Side::Buy => MID - 15 + rng.below(21) as i64,
                    Side::Sell => MID - 5 + rng.below(21) as i64,
                };
                next += 1;
                live.push(next);
                let qty = 1 + rng.below(5) as i64;
                let order = NewOrder::limit(next, SymbolId(0), side, price, qty);
                batch.push(ClientMsg::NewOrder(order));
            }
        }
        // The fence: a tiny bid far below, answered after everything before it.
        next += 1;
        let fence = next;
        let order = NewOrder::limit(fence, SymbolId(0), Side::Buy, MID - 100, 1);
        batch.push(ClientMsg::NewOrder(order));
        client.send_batch(&batch).unwrap();
        common::recv_until(
            &mut client,
            |m| matches!(m, ServerMsg::Accepted { order, .. } | ServerMsg::Rejected { order, .. } if *order == fence),
        );
    }
    (client, next)
}

/// A public REST GET, parsed as JSON (a chunked body is joined).
fn rest_get(addr: SocketAddr, target: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let target = common::int_units(target);
    let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, mut rest) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{target}: {head}");
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return serde_json::from_str(rest).unwrap();
    }
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        body.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    serde_json::from_str(&body).unwrap()
}

/// One subscription's book, rebuilt from its W and X messages, in ticks and lots.
#[derive(Default)]
struct RebuiltBook {
    bids: std::collections::BTreeMap<i64, i64>,
    asks: std::collections::BTreeMap<i64, i64>,
    rpt_seq: u64,
    trades: usize,
}

impl RebuiltBook {
    fn units(text: &str, unit: rialto_fix::Decimal) -> i64 {
        rialto_fix::Decimal::parse(text.as_bytes())
            .unwrap()
            .to_units(unit)
            .unwrap()
    }

    /// A W: the whole book again.
    fn snapshot(&mut self, msg: &common::fix::Msg) {
        self.bids.clear();
        self.asks.clear();
        for (_, entry_type, px, size, _) in md_entries(msg) {
            let (price, qty) = Self::level(&px, &size);
            let side = match entry_type.as_str() {
                "0" => &mut self.bids,
                "1" => &mut self.asks,
                other => panic!("a snapshot entry of type {other}"),
            };
            assert!(side.insert(price, qty).is_none(), "level {price} twice");
        }
    }

    fn level(px: &str, size: &str) -> (i64, i64) {
        (
            Self::units(px, rialto_fix::Decimal::new(1, 2)),
            Self::units(size, rialto_fix::Decimal::new(1, 3)),
        )
    }

    /// An X: each entry must follow the book (nothing twice, nothing missed) and the last
    /// RptSeq by one.
    fn apply(&mut self, msg: &common::fix::Msg) {
        for (action, entry_type, px, size, rpt_seq) in md_entries(msg) {
            self.rpt_seq += 1;
            assert_eq!(rpt_seq, Some(self.rpt_seq), "RptSeq gap: {msg:?}");
            let (price, qty) = Self::level(&px, &size);
            let side = match entry_type.as_str() {
                "0" => &mut self.bids,
                "1" => &mut self.asks,
                _ => {
                    self.trades += 1;
                    continue;
                }
            };
            match action.as_deref() {
                Some("0") => assert!(side.insert(price, qty).is_none(), "new level {price} held"),
                Some("1") => assert!(
                    side.insert(price, qty).is_some(),
                    "changed level {price} missing"
                ),
                Some("2") => assert!(
                    side.remove(&price).is_some(),
                    "deleted level {price} missing"
                ),
                other => panic!("MDUpdateAction {other:?}"),
            }
        }
    }

    /// Differences from REST's book.
    fn differences(&self, rest: &serde_json::Value) -> Vec<String> {
        let side = |levels: &serde_json::Value| -> std::collections::BTreeMap<i64, i64> {
            levels
                .as_array()
                .unwrap()
                .iter()
                .map(|l| (l[0].as_i64().unwrap(), l[1].as_i64().unwrap()))
                .collect()
        };
        let mut out = Vec::new();
        for (name, mine, theirs) in [
            ("bids", &self.bids, side(&rest["bids"])),
            ("asks", &self.asks, side(&rest["asks"])),
        ] {
            if *mine != theirs {
                out.push(format!("{name}: rebuilt {mine:?}, REST {theirs:?}"));
            }
        }
        out
    }
}

/// Reads the watcher's next message into the book of its MDReqID.
fn read_one(watcher: &mut FixClient, books: &mut std::collections::HashMap<String, RebuiltBook>) {
    let msg = watcher.recv();
    let Some(book) = msg.get(tags::MD_REQ_ID).and_then(|id| books.get_mut(id)) else {
        return; // an unsubscribed request's last updates
    };
    match msg.msg_type.as_str() {
        "W" => book.snapshot(&msg),
        "X" => book.apply(&msg),
        other => panic!("unexpected {other}: {msg:?}"),
    }
}

/// Subscribes, follows and unsubscribes again and again while binary traders trade at random;
/// at each quiet point every open subscription's W plus X must be exactly REST's book.
#[test]
fn market_data_rebuilt_from_w_and_x_is_the_rest_book_at_quiet_points() {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    const PHASES: i64 = 3;
    const SUBSCRIPTIONS_PER_PHASE: usize = 12;
    const TRADERS: i64 = 2;
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.web.max_requests_per_sec = 0;
        c.gateway.max_msgs_per_sec = 0;
    });
    let web = server.web_addr.expect("the web API is on by default");
    let mut watcher = FixClient::connect(fix_addr(&server), "TRADER8", "FIX.4.4");
    watcher.logon(&server, 8);
    let mut books: HashMap<String, RebuiltBook> = HashMap::new();
    // Subscriptions in the order they were opened (the oldest is closed first).
    let mut open: Vec<String> = Vec::new();
    let mut subscribed = 0;
    let mut marker = common::trader(&server, TRADERS + 1);
    let mut first_orders = [0; TRADERS as usize];
    let mut trades_seen = 0;
    for phase in 0..PHASES {
        let stop = AtomicBool::new(false);
        let clients = std::thread::scope(|s| {
            let traders: Vec<_> = (1..=TRADERS)
                .map(|user| {
                    let (server, stop) = (&server, &stop);
                    let first = first_orders[user as usize - 1];
                    s.spawn(move || random_trader(server, user, first, stop))
                })
                .collect();
            struct StopOnDrop<'a>(&'a AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let _stop = StopOnDrop(&stop);
            for _ in 0..SUBSCRIPTIONS_PER_PHASE {
                subscribed += 1;
                let id = format!("S{subscribed}");
                books.insert(id.clone(), RebuiltBook::default());
                market_data_request(&mut watcher, &id, "1", "012");
                open.push(id);
                // Follow the stream for a while, then close the oldest beyond three.
                for _ in 0..40 {
                    read_one(&mut watcher, &mut books);
                }
                if open.len() > 3 {
                    let oldest = open.remove(0);
                    trades_seen += books.remove(&oldest).unwrap().trades;
                    watcher.send(
                        "V",
                        &[
                            (tags::MD_REQ_ID, oldest.as_str()),
                            (tags::SUBSCRIPTION_REQUEST_TYPE, "2"),
                        ],
                    );
                }
            }
            stop.store(true, Ordering::SeqCst);
            traders
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        });
        for (i, (_, last)) in clients.iter().enumerate() {
            first_orders[i] = *last;
        }
        // The quiet point: every trader's commands are applied; a marker bid, at a price of
        // its own, comes after all of them.
        let marker_price = MID - 200 - phase;
        marker
            .place(rialto_wire::NewOrder::limit(
                phase + 1,
                rialto_core::SymbolId(0),
                rialto_core::Side::Buy,
                marker_price,
                1,
            ))
            .unwrap();
        common::recv_until(
            &mut marker,
            |m| matches!(m, rialto_wire::ServerMsg::Accepted { order, .. } if *order == phase + 1),
        );
        while !open
            .iter()
            .all(|id| books[id].bids.contains_key(&marker_price))
        {
            read_one(&mut watcher, &mut books);
        }
        let rest = rest_get(web, "/api/v1/book/BTC-USD?depth=1000");
        for id in &open {
            let differences = books[id].differences(&rest);
            assert!(
                differences.is_empty(),
                "phase {phase}, {id}: {differences:?}"
            );
        }
        drop(clients);
    }
    trades_seen += open.iter().map(|id| books[id].trades).sum::<usize>();
    assert_eq!(subscribed, PHASES as usize * SUBSCRIPTIONS_PER_PHASE);
    assert!(
        trades_seen > 50,
        "only {trades_seen} trades: too little trading to prove much"
    );
    server.shutdown().unwrap();
}

/// Every version trades: Logon, an order that fills against a FIX 4.4 seller, and a cancel.
/// Each report holds only fields its version defines (checked against its dictionary, as a
/// validating counterparty would) and the version's own ones (ExecTransType, ExecType,
/// LeavesQty, SecondaryOrderID as far as it has them).
#[test]
fn every_version_logs_on_trades_and_cancels() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut seller = FixClient::connect(fix_addr(&server), "TRADER2", "FIX.4.4");
    seller.logon(&server, 2);
    // (BeginString, DefaultApplVerID, CompID and user): FIXT.1.1 is one session per CompID,
    // so each of its application versions logs on as a user of its own.
    let cases = [
        ("FIX.4.0", ApplVersion::Fix40, "TRADER1", 1),
        ("FIX.4.1", ApplVersion::Fix41, "TRADER1", 1),
        ("FIX.4.2", ApplVersion::Fix42, "TRADER1", 1),
        ("FIX.4.3", ApplVersion::Fix43, "TRADER1", 1),
        ("FIX.4.4", ApplVersion::Fix44, "TRADER1", 1),
        ("FIXT.1.1", ApplVersion::Fix50, "TRADER3", 3),
        ("FIXT.1.1", ApplVersion::Fix50Sp1, "TRADER4", 4),
        ("FIXT.1.1", ApplVersion::Fix50Sp2, "TRADER5", 5),
    ];
    for (n, (begin, version, comp_id, user)) in cases.into_iter().enumerate() {
        let valid = |msg: &common::fix::Msg| {
            let (frame, _) = rialto_fix::next_frame(&msg.bytes, 1 << 20)
                .unwrap()
                .unwrap();
            let checked = rialto_fix::dict::validate(version, &frame);
            assert_eq!(checked, Ok(()), "{version:?}: {msg:?}");
        };
        let mut buyer = FixClient::connect(fix_addr(&server), comp_id, begin);
        buyer.default_appl_ver_id = std::str::from_utf8(version.appl_ver_id()).unwrap();
        let logon = buyer.logon(&server, user);
        assert_eq!(
            logon.get(tags::DEFAULT_APPL_VER_ID),
            (begin == "FIXT.1.1").then_some(buyer.default_appl_ver_id)
        );
        let old = version <= ApplVersion::Fix41;
        let order = |client: &mut FixClient, cl_ord_id: &str, side: &str, old: bool| {
            let now = transact_time();
            let mut fields = vec![
                (tags::CL_ORD_ID, cl_ord_id),
                (tags::HANDL_INST, "1"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, side),
                (tags::ORDER_QTY, "1"),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, "100.00"),
                (tags::TIME_IN_FORCE, "1"),
            ];
            // TransactTime on orders came with FIX 4.2.
            if !old {
                fields.push((tags::TRANSACT_TIME, &now));
            }
            client.send("D", &fields);
        };
        let buy = format!("B{n}");
        order(&mut buyer, &buy, "1", old);
        let new = buyer.expect("8");
        valid(&new);
        assert_eq!(new.req(tags::ORD_STATUS), "0", "{new:?}");
        assert_eq!(
            new.get(tags::EXEC_TRANS_TYPE).is_some(),
            version <= ApplVersion::Fix42
        );
        assert_eq!(
            new.get(tags::EXEC_TYPE).is_some(),
            version >= ApplVersion::Fix41
        );
        assert_eq!(
            new.get(tags::LEAVES_QTY).is_some(),
            version >= ApplVersion::Fix41
        );
        assert_eq!(new.get(198).is_some(), version >= ApplVersion::Fix41);

        let sell = format!("S{n}");
        order(&mut seller, &sell, "2", false);
        seller.expect("8");
        seller.expect("8");
        let fill = buyer.expect("8");
        valid(&fill);
        assert_eq!(fill.req(tags::ORD_STATUS), "2", "{fill:?}");
        let (last_qty, cum_qty) = if old { ("1", "1") } else { ("1.000", "1.000") };
        assert_eq!(fill.req(tags::LAST_QTY), last_qty);
        assert_eq!(fill.req(tags::CUM_QTY), cum_qty);
        let trade = match version {
            ApplVersion::Fix40 => None,
            ApplVersion::Fix41 | ApplVersion::Fix42 => Some("2"),
            _ => Some("F"),
        };
        assert_eq!(fill.get(tags::EXEC_TYPE), trade);

        let rest = format!("R{n}");
        order(&mut buyer, &rest, "1", old);
        valid(&buyer.expect("8"));
        let cancel_id = format!("C{n}");
        let now = transact_time();
        let mut fields = vec![
            (tags::ORIG_CL_ORD_ID, rest.as_str()),
            (tags::CL_ORD_ID, cancel_id.as_str()),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::ORDER_QTY, "1"),
        ];
        if version == ApplVersion::Fix40 {
            fields.push((125, "F"));
        }
        if !old {
            fields.push((tags::TRANSACT_TIME, &now));
        }
        buyer.send("F", &fields);
        let canceled = buyer.expect("8");
        valid(&canceled);
        assert_eq!(canceled.req(tags::ORD_STATUS), "4", "{canceled:?}");
        // An unknown order: OrderCancelReject with that version's fields.
        fields[0].1 = "NOSUCH";
        fields[1].1 = "C-unknown";
        buyer.send("F", &fields);
        let refused = buyer.expect("9");
        valid(&refused);

        // Market data came with FIX 4.2: before it, MsgType V is undefined (Reject, 35=3).
        if old {
            buyer.send("V", &[(262, "MD1"), (263, "0"), (264, "1")]);
            let reject = buyer.expect("3");
            valid(&reject);
            assert_eq!(reject.get(373), None);
        }
        if version == ApplVersion::Fix50Sp2 {
            // A message's ApplVerID picks its dictionary; one not offered is refused.
            buyer.send(
                "H",
                &[
                    (1128, "6"),
                    (tags::CL_ORD_ID, &buy),
                    (tags::SIDE, "1"),
                    (tags::SYMBOL, "BTC-USD"),
                ],
            );
            let reject = buyer.expect("3");
            assert_eq!((reject.req(373), reject.req(371)), ("5", "1128"));
        }
    }
}

#[test]
fn orders_above_a_gap_are_kept_and_processed_in_order_once_it_is_filled() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut client = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    client.logon(&server, 1);
    // Message 2 is lost on the way: 3 and 4 arrive above the gap.
    client.seq = 3;
    client.new_order("G3", "1", "0.001", "10");
    let request = client.expect("2");
    assert_eq!(request.req(tags::BEGIN_SEQ_NO), "2");
    // Just the gap: what arrived above it is kept, not asked for again.
    assert_eq!(request.req(tags::END_SEQ_NO), "2");
    client.new_order("G4", "1", "0.001", "11");
    // Nothing happens to them until the gap is filled.
    assert!(
        client
            .recv_within(Duration::from_millis(200))
            .is_none_or(|m| m.msg_type == "0")
    );
    // The resend: 2 gap-filled (it was a session message). Then 3 and 4 are processed, in
    // order, without being sent again.
    let orig = transact_time();
    client.seq = 2;
    client.send(
        "4",
        &[
            (tags::POSS_DUP_FLAG, "Y"),
            (tags::ORIG_SENDING_TIME, &orig),
            (tags::GAP_FILL_FLAG, "Y"),
            (tags::NEW_SEQ_NO, "3"),
        ],
    );
    for cl_ord_id in ["G3", "G4"] {
        let new = client.expect("8");
        assert_eq!(new.req(tags::CL_ORD_ID), cl_ord_id);
        assert_eq!(new.req(tags::EXEC_TYPE), "0");
    }
    // The session is in step: the next order is taken at once.
    client.seq = 5;
    client.new_order("G5", "1", "0.001", "12");
    assert_eq!(client.expect("8").req(tags::CL_ORD_ID), "G5");
    server.shutdown().unwrap();
}

fn replace(client: &mut FixClient, orig: &str, id: &str, side: &str, qty: &str, price: &str) {
    client.send(
        "G",
        &[
            (tags::ORIG_CL_ORD_ID, orig),
            (tags::CL_ORD_ID, id),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, side),
            (tags::ORDER_QTY, qty),
            (tags::ORD_TYPE, "2"),
            (tags::PRICE, price),
            (tags::TRANSACT_TIME, &transact_time()),
        ],
    );
}

/// A replace is one `amend`: a smaller quantity keeps the order's place, a new price that
/// crosses trades at once after the Replaced, a total at CumQty ends the order, and a refused
/// amend is an OrderCancelReject that leaves the order as it was.
#[test]
fn a_replace_is_one_amend_that_keeps_or_loses_priority() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut first = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    let mut second = FixClient::connect(fix_addr(&server), "TRADER2", "FIX.4.4");
    let mut taker = FixClient::connect(fix_addr(&server), "TRADER3", "FIXT.1.1");
    first.logon(&server, 1);
    second.logon(&server, 2);
    taker.logon(&server, 3);
    first.new_order("A1", "2", "0.005", "50.00");
    assert_eq!(first.expect("8").req(tags::EXEC_TYPE), "0");
    second.new_order("B1", "2", "0.005", "50.00");
    assert_eq!(second.expect("8").req(tags::EXEC_TYPE), "0");

    // Down to 0.003: Replaced, and A still trades before B.
    replace(&mut first, "A1", "A2", "2", "0.003", "50.00");
    let replaced = first.expect("8");
    assert_eq!(replaced.req(tags::EXEC_TYPE), "5", "{replaced:?}");
    assert_eq!(replaced.req(tags::ORD_STATUS), "0");
    assert_eq!(replaced.req(tags::ORDER_QTY), "0.003");
    assert_eq!(replaced.req(tags::LEAVES_QTY), "0.003");
    assert_eq!(replaced.req(tags::CUM_QTY), "0.000");
    taker.new_order("T1", "1", "0.001", "50.00");
    let fill = first.expect("8");
    assert_eq!(fill.req(tags::EXEC_TYPE), "F", "{fill:?}");
    assert_eq!(fill.req(tags::CL_ORD_ID), "A2");
    assert_eq!(fill.req(tags::LEAVES_QTY), "0.002");

    // B's new price crosses a bid: Replaced first, then its fill as a taker.
    assert_eq!(taker.expect("8").req(tags::EXEC_TYPE), "0");
    assert_eq!(taker.expect("8").req(tags::EXEC_TYPE), "F");
    taker.new_order("T2", "1", "0.002", "49.00");
    assert_eq!(taker.expect("8").req(tags::EXEC_TYPE), "0");
    replace(&mut second, "B1", "B2", "2", "0.005", "48.00");
    let replaced = second.expect("8");
    assert_eq!(replaced.req(tags::EXEC_TYPE), "5", "{replaced:?}");
    assert_eq!(replaced.req(tags::PRICE), "48.00");
    assert_eq!(replaced.req(tags::LEAVES_QTY), "0.005");
    let fill = second.expect("8");
    assert_eq!(fill.req(tags::EXEC_TYPE), "F", "{fill:?}");
    assert_eq!(fill.req(tags::LAST_PX), "49.00");
    assert_eq!(fill.req(tags::LAST_QTY), "0.002");
    assert_eq!(fill.req(tags::ORD_STATUS), "1");
    assert_eq!(fill.req(tags::LEAVES_QTY), "0.003");

    // More than the seller holds: refused, CxlRejResponseTo 2, the order unchanged.
    replace(&mut second, "B2", "B3", "2", "2000000000.000", "48.00");
    let reject = second.expect("9");
    assert_eq!(reject.req(tags::CXL_REJ_RESPONSE_TO), "2", "{reject:?}");
    assert_eq!(reject.req(tags::CL_ORD_ID), "B3");
    assert_eq!(reject.req(tags::ORIG_CL_ORD_ID), "B2");
    assert_eq!(reject.req(tags::ORD_STATUS), "1");
    // A total at CumQty ends the order: Replaced with OrdStatus Filled and nothing left.
    replace(&mut second, "B2", "B4", "2", "0.002", "48.00");
    let replaced = second.expect("8");
    assert_eq!(replaced.req(tags::EXEC_TYPE), "5", "{replaced:?}");
    assert_eq!(replaced.req(tags::ORD_STATUS), "2");
    assert_eq!(replaced.req(tags::LEAVES_QTY), "0.000");
    assert_eq!(replaced.req(tags::CUM_QTY), "0.002");
    server.shutdown().unwrap();
}

/// Case 19a on the venue: a NewOrderSingle resent with PossResend=Y whose ClOrdID the venue
/// has seen is refused as a duplicate (OrdRejReason 6), whether its order is still live or
/// ended within the venue's order-id window (a day on the demo venue): it never trades twice.
#[test]
fn t19a_a_poss_resend_of_a_seen_cl_ord_id_is_refused_as_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = FixClient::connect(fix_addr(&server), "TRADER1", "FIX.4.4");
    c.logon(&server, 1);
    let resend = |c: &mut FixClient, id: &str| {
        c.send(
            "D",
            &[
                (tags::POSS_RESEND, "Y"),
                (tags::CL_ORD_ID, id),
                (tags::HANDL_INST, "1"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "1"),
                (tags::TRANSACT_TIME, &transact_time()),
                (tags::ORDER_QTY, "0.001"),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, "10.00"),
                (tags::TIME_IN_FORCE, "1"),
            ],
        )
    };
    c.new_order("L1", "1", "0.001", "10.00");
    assert_eq!(c.expect("8").req(tags::EXEC_TYPE), "0");
    resend(&mut c, "L1");
    let dup = c.expect("8");
    assert_eq!(dup.req(tags::EXEC_TYPE), "8", "{dup:?}");
    assert_eq!(dup.req(tags::ORD_REJ_REASON), "6");
    c.send(
        "F",
        &[
            (tags::ORIG_CL_ORD_ID, "L1"),
            (tags::CL_ORD_ID, "L1-cancel"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::TRANSACT_TIME, &transact_time()),
        ],
    );
    assert_eq!(c.expect("8").req(tags::EXEC_TYPE), "4");
    // The order has ended; the resend is still refused, by the venue's order-id window.
    resend(&mut c, "L1");
    let dup = c.expect("8");
    assert_eq!(dup.req(tags::EXEC_TYPE), "8", "{dup:?}");
    assert_eq!(dup.req(tags::ORD_REJ_REASON), "6");
    assert_eq!(dup.req(tags::TEXT), "duplicate_order_id");
    // A ClOrdID not seen yet is a new order (case 19b).
    resend(&mut c, "L2");
    assert_eq!(c.expect("8").req(tags::EXEC_TYPE), "0");
    server.shutdown().unwrap();
}

// ----- rulebook part 2 over FIX ---------------------------------------------------------------

/// The ExpireTime (126) of a report, in ns since the Unix epoch.
fn expire_time(msg: &common::fix::Msg) -> i64 {
    let text = msg.req(tags::EXPIRE_TIME);
    rialto_fix::time::parse_utc_timestamp(text.as_bytes()).expect("a UTCTimestamp")
}

/// `msg` holds only fields its version defines, as a validating counterparty checks it.
fn assert_valid(version: ApplVersion, msg: &common::fix::Msg) {
    let (frame, _) = rialto_fix::next_frame(&msg.bytes, 1 << 20)
        .unwrap()
        .unwrap();
    assert_eq!(
        rialto_fix::dict::validate(version, &frame),
        Ok(()),
        "{version:?}: {msg:?}"
    );
}

/// A stop limit GTD order (OrdType 4, StopPx, TimeInForce 6, ExpireTime) is New, then reported
/// triggered when a trade reaches its stop price, then filled; every report echoes OrdType,
/// StopPx, TimeInForce and ExpireTime. The trigger is ExecType L from FIX 5.0, Restated (D)
/// with ExecRestatementReason 4 (FIX 4.2) or 8 (FIX 4.3, 4.4) before, and no report in FIX
/// 4.0 and 4.1, which have neither: there the fill comes next.
#[test]
fn a_fix_stop_order_is_triggered_then_filled_in_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut maker = FixClient::connect(fix_addr(&server), "TRADER2", "FIX.4.4");
    let mut taker = FixClient::connect(fix_addr(&server), "TRADER3", "FIX.4.4");
    maker.logon(&server, 2);
    taker.logon(&server, 3);
    // A stop the gateway refuses (StopPx off the grid) is echoed as sent too.
    maker.send(
        "D",
        &[
            (tags::CL_ORD_ID, "BAD"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "2"),
            (tags::TRANSACT_TIME, &transact_time()),
            (tags::ORDER_QTY, "0.001"),
            (tags::ORD_TYPE, "3"),
            (tags::STOP_PX, "40.005"),
            (tags::MAX_FLOOR, "0.001"),
            (tags::TIME_IN_FORCE, "1"),
        ],
    );
    let rejected = maker.expect("8");
    assert_valid(ApplVersion::Fix44, &rejected);
    assert_eq!(rejected.req(tags::EXEC_TYPE), "8", "{rejected:?}");
    assert_eq!(rejected.req(tags::ORD_TYPE), "3", "{rejected:?}");
    assert_eq!(rejected.req(tags::STOP_PX), "40.005", "{rejected:?}");
    assert_eq!(rejected.req(tags::MAX_FLOOR), "0.001", "{rejected:?}");
    assert_eq!(rejected.req(tags::TIME_IN_FORCE), "1", "{rejected:?}");
    // (BeginString, version, CompID, user, the trigger's ExecType and restatement reason).
    let cases = [
        ("FIX.4.1", ApplVersion::Fix41, "TRADER1", 1, None),
        (
            "FIX.4.2",
            ApplVersion::Fix42,
            "TRADER1",
            1,
            Some(("D", Some("4"))),
        ),
        (
            "FIX.4.4",
            ApplVersion::Fix44,
            "TRADER1",
            1,
            Some(("D", Some("8"))),
        ),
        (
            "FIXT.1.1",
            ApplVersion::Fix50Sp2,
            "TRADER4",
            4,
            Some(("L", None)),
        ),
    ];
    // A day from now, to the second: reports echo it.
    let expire_ns = (common::fix::now_ns() / 1_000_000_000 + 86_400) * 1_000_000_000;
    let mut expire_text = Vec::new();
    rialto_fix::time::write_utc_timestamp(&mut expire_text, expire_ns);
    let expire_text = String::from_utf8(expire_text).unwrap();
    for (n, (begin, version, comp_id, user, trigger)) in cases.into_iter().enumerate() {
        let mut stopper = FixClient::connect(fix_addr(&server), comp_id, begin);
        stopper.default_appl_ver_id = std::str::from_utf8(version.appl_ver_id()).unwrap();
        stopper.logon(&server, user);
        // Each case's stop is above the last trade of the case before it.
        let stop = format!("{}.00", 51 + n);
        let limit = format!("{}.00", 52 + n);
        let cl_ord_id = format!("S{n}");
        let now = transact_time();
        let mut fields = vec![
            (tags::CL_ORD_ID, cl_ord_id.as_str()),
            (tags::HANDL_INST, "1"),
            (tags::SYMBOL, "BTC-USD"),
            (tags::SIDE, "1"),
            (tags::ORDER_QTY, "1"),
            // A stop buy on a spot venue carries its limit (stop limit) or protection price.
            (tags::ORD_TYPE, "4"),
            (tags::PRICE, limit.as_str()),
            (tags::STOP_PX, stop.as_str()),
            (tags::TIME_IN_FORCE, "6"),
            (tags::EXPIRE_TIME, expire_text.as_str()),
        ];
        // TransactTime on orders came with FIX 4.2.
        if version >= ApplVersion::Fix42 {
            fields.push((tags::TRANSACT_TIME, &now));
        }
        stopper.send("D", &fields);
        let echoes = |msg: &common::fix::Msg| {
            assert_valid(version, msg);
            assert_eq!(msg.req(tags::ORD_TYPE), "4", "{msg:?}");
            assert_eq!(msg.req(tags::STOP_PX), stop, "{msg:?}");
            assert_eq!(msg.req(tags::TIME_IN_FORCE), "6", "{msg:?}");
            assert_eq!(expire_time(msg), expire_ns, "{msg:?}");
        };
        let new = stopper.expect("8");
        echoes(&new);
        assert_eq!(new.req(tags::ORD_STATUS), "0", "{new:?}");
        maker.new_order(&format!("M{n}"), "2", "2", &stop);
        assert_eq!(maker.expect("8").req(tags::EXEC_TYPE), "0");
        taker.new_order(&format!("T{n}"), "1", "1", &stop);
        if let Some((exec_type, reason)) = trigger {
            let triggered = stopper.expect("8");
            echoes(&triggered);
            assert_eq!(triggered.req(tags::EXEC_TYPE), exec_type, "{triggered:?}");
            assert_eq!(triggered.get(378), reason, "{triggered:?}");
            assert_eq!(triggered.req(tags::ORD_STATUS), "0", "{triggered:?}");
        }
        let fill = stopper.expect("8");
        echoes(&fill);
        assert_eq!(fill.req(tags::ORD_STATUS), "2", "{fill:?}");
        assert!(
            fill.req(tags::LAST_PX).starts_with(&format!("{}", 51 + n)),
            "{fill:?}"
        );
        // The taker and the maker's two fills.
        taker.expect("8");
        taker.expect("8");
        maker.expect("8");
        maker.expect("8");
    }
    server.shutdown().unwrap();
}

/// An iceberg GTD order: every report echoes its shown quantity in the tag the client sent
/// (MaxFloor in FIX 4.2 and 4.4, DisplayQty in FIX 5.0 SP2), its TimeInForce and ExpireTime,
/// through a fill, a replace and its expiry (ExecType C, OrdStatus C).
#[test]
fn an_iceberg_gtd_order_echoes_its_terms_until_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut taker = FixClient::connect(fix_addr(&server), "TRADER3", "FIX.4.4");
    taker.logon(&server, 3);
    let cases = [
        ("FIX.4.2", ApplVersion::Fix42, "TRADER4", 4, tags::MAX_FLOOR),
        ("FIX.4.4", ApplVersion::Fix44, "TRADER1", 1, tags::MAX_FLOOR),
        (
            "FIXT.1.1",
            ApplVersion::Fix50Sp2,
            "TRADER2",
            2,
            tags::DISPLAY_QTY,
        ),
    ];
    for (n, (begin, version, comp_id, user, shown_tag)) in cases.into_iter().enumerate() {
        let mut c = FixClient::connect(fix_addr(&server), comp_id, begin);
        c.default_appl_ver_id = std::str::from_utf8(version.appl_ver_id()).unwrap();
        c.logon(&server, user);
        // Three seconds from now, to the millisecond.
        let expire_ns = (common::fix::now_ns() / 1_000_000 + 3_000) * 1_000_000;
        let mut expire_text = Vec::new();
        rialto_fix::time::write_utc_timestamp(&mut expire_text, expire_ns);
        let expire_text = String::from_utf8(expire_text).unwrap();
        let (first, second) = (format!("I{n}"), format!("J{n}"));
        c.send(
            "D",
            &[
                (tags::CL_ORD_ID, first.as_str()),
                (tags::HANDL_INST, "1"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "2"),
                (tags::TRANSACT_TIME, &transact_time()),
                (tags::ORDER_QTY, "0.005"),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, "300.00"),
                (shown_tag, "0.002"),
                (tags::TIME_IN_FORCE, "6"),
                (tags::EXPIRE_TIME, expire_text.as_str()),
            ],
        );
        let echoes = |msg: &common::fix::Msg| {
            assert_valid(version, msg);
            assert_eq!(msg.req(tags::ORD_TYPE), "2", "{msg:?}");
            assert_eq!(msg.req(shown_tag), "0.002", "{msg:?}");
            assert_eq!(msg.req(tags::TIME_IN_FORCE), "6", "{msg:?}");
            assert_eq!(expire_time(msg), expire_ns, "{msg:?}");
        };
        let new = c.expect("8");
        echoes(&new);
        assert_eq!(new.req(tags::EXEC_TYPE), "0", "{new:?}");
        taker.new_order(&format!("T{n}"), "1", "0.003", "300.00");
        // The shown 0.002, then 0.001 of the refill.
        for (cum, leaves) in [("0.002", "0.003"), ("0.003", "0.002")] {
            let fill = c.expect("8");
            echoes(&fill);
            // FIX 4.2 reports a partial fill as 1, Trade (F) came with FIX 4.3.
            let partial_fill = if version == ApplVersion::Fix42 {
                "1"
            } else {
                "F"
            };
            assert_eq!(fill.req(tags::EXEC_TYPE), partial_fill, "{fill:?}");
            assert_eq!(fill.req(tags::CUM_QTY), cum, "{fill:?}");
            assert_eq!(fill.req(tags::LEAVES_QTY), leaves, "{fill:?}");
        }
        c.send(
            "G",
            &[
                (tags::ORIG_CL_ORD_ID, first.as_str()),
                (tags::CL_ORD_ID, second.as_str()),
                // Required in FIX 4.2.
                (tags::HANDL_INST, "1"),
                (tags::SYMBOL, "BTC-USD"),
                (tags::SIDE, "2"),
                (tags::TRANSACT_TIME, &transact_time()),
                (tags::ORDER_QTY, "0.005"),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, "301.00"),
            ],
        );
        let replaced = c.expect("8");
        echoes(&replaced);
        assert_eq!(replaced.req(tags::EXEC_TYPE), "5", "{replaced:?}");
        assert_eq!(replaced.req(tags::PRICE), "301.00", "{replaced:?}");
        // The server expires it on its own at ExpireTime.
        let expired = c.expect("8");
        echoes(&expired);
        assert_eq!(expired.req(tags::EXEC_TYPE), "C", "{expired:?}");
        assert_eq!(expired.req(tags::ORD_STATUS), "C", "{expired:?}");
        assert_eq!(expired.req(tags::CL_ORD_ID), second, "{expired:?}");
        assert_eq!(expired.req(tags::LEAVES_QTY), "0.000", "{expired:?}");
        assert_eq!(expired.req(tags::CUM_QTY), "0.003", "{expired:?}");
        // The taker's New and two fills.
        for _ in 0..3 {
            taker.expect("8");
        }
    }
    server.shutdown().unwrap();
}

/// Trading phases: a halt reaches every logged-on FIX session as
/// SecurityStatus (f), SecurityTradingStatus 2.
#[test]
fn a_phase_change_is_a_security_status() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut c = FixClient::connect(fix_addr(&server), "TRADER1", "FIXT.1.1");
    c.logon(&server, 1);
    let mut a = common::admin(&server);
    let result = a
        .request(&rialto_wire::ClientMsg::SetPhase {
            request: 1,
            symbol: rialto_core::SymbolId(0),
            phase: Some(rialto_core::Phase::Halted),
        })
        .unwrap();
    assert!(
        matches!(
            result,
            rialto_wire::ServerMsg::AdminResult { result: Ok(()), .. }
        ),
        "{result}"
    );
    let status = c.expect("f");
    assert_eq!(status.req(tags::SYMBOL), "BTC-USD");
    assert_eq!(status.req(326), "2");
    server.shutdown().unwrap();
}

/// A FIX session's user is liquidated on the demo's future (docs/fix.md, "Futures"): its
/// resting order is cancelled (Text `liquidation`), and the close, an order the session never
/// sent, comes as ExecutionReport F for its fill and 4 for the rest the book could not take,
/// under one OrderID of the session's and no ClOrdID. RequestForPositions gets
/// BusinessMessageReject 3.
#[test]
fn a_liquidated_fix_user_gets_reports_of_the_cancel_and_the_close() {
    use rialto_wire::{ClientMsg, NewOrder, ServerMsg};
    let dir = tempfile::tempdir().unwrap();
    let server = common::start(dir.path(), |c| {
        c.fix
            .sessions
            .push(rialto_server::config::FixSessionSettings {
                comp_id: "MARGIN".into(),
                user: 100,
                cancel_on_disconnect: None,
            });
    });
    let mut admin = common::admin(&server);
    let perp = rialto_core::SymbolId(2);
    for msg in [
        ClientMsg::AddUser {
            request: 1,
            user: 100,
        },
        ClientMsg::AdjustBalance {
            request: 2,
            user: 100,
            currency: rialto_core::Name::new("USD").unwrap(),
            amount: 120_000,
            tx: 9_100,
        },
    ] {
        let reply = admin.request(&msg).unwrap();
        assert!(
            matches!(
                reply,
                ServerMsg::UserAdded { .. } | ServerMsg::AdminResult { result: Ok(()), .. }
            ),
            "{reply}"
        );
    }
    let mut fix = FixClient::connect(fix_addr(&server), "MARGIN", "FIX.4.4");
    fix.logon(&server, 100);
    let order = |fix: &mut FixClient, id: &str, side: &str, qty: &str, price: &str| {
        fix.send(
            "D",
            &[
                (tags::CL_ORD_ID, id),
                (tags::HANDL_INST, "1"),
                (tags::SYMBOL, "BTC-PERP"),
                (tags::SIDE, side),
                (tags::TRANSACT_TIME, &transact_time()),
                (tags::ORDER_QTY, qty),
                (tags::ORD_TYPE, "2"),
                (tags::PRICE, price),
                (tags::TIME_IN_FORCE, "1"),
            ],
        );
        let new = fix.expect("8");
        assert_eq!(new.req(tags::EXEC_TYPE), "0", "{new:?}");
    };
    // Long two lots at 5000.00 (margin 1000.00 of its 1200.00), and a sell resting above.
    order(&mut fix, "L1", "1", "0.002", "5000.00");
    let mut other = common::trader(&server, 2);
    other
        .place(NewOrder::limit(
            1,
            perp,
            rialto_core::Side::Sell,
            500_000,
            2,
        ))
        .unwrap();
    let fill = fix.expect("8");
    assert_eq!(fill.req(tags::EXEC_TYPE), "F", "{fill:?}");
    order(&mut fix, "S1", "2", "0.001", "5200.00");
    // One lot bid: the close meets it, and nothing more.
    other
        .place(NewOrder::limit(2, perp, rialto_core::Side::Buy, 470_000, 1))
        .unwrap();
    common::recv_until(&mut other, |m| {
        matches!(m, ServerMsg::Accepted { order: 2, .. })
    });
    // Mark 4600.00: equity 1200.00 − 800.00 = 400.00, under maintenance 500.00.
    let reply = admin
        .request(&ClientMsg::SetMarkPrice {
            request: 3,
            symbol: perp,
            price: 460_000,
        })
        .unwrap();
    assert!(
        matches!(reply, ServerMsg::AdminResult { result: Ok(()), .. }),
        "{reply}"
    );
    let cancelled = fix.expect("8");
    assert_eq!(cancelled.req(tags::EXEC_TYPE), "4", "{cancelled:?}");
    assert_eq!(cancelled.req(tags::CL_ORD_ID), "S1");
    assert_eq!(cancelled.req(tags::TEXT), "liquidation");
    let close = fix.expect("8");
    assert_eq!(close.req(tags::EXEC_TYPE), "F", "{close:?}");
    assert_eq!(
        close.get(tags::CL_ORD_ID),
        None,
        "not an order of the session's"
    );
    assert_eq!(close.req(tags::SIDE), "2");
    assert_eq!(close.req(tags::ORD_TYPE), "1");
    assert_eq!(close.req(tags::LAST_PX), "4700.00");
    assert_eq!(close.req(tags::LAST_QTY), "0.001");
    assert_eq!(close.req(tags::ORD_STATUS), "2");
    assert_eq!(close.req(tags::TEXT), "liquidation");
    // The lot no bid took: the rest of the close, cancelled.
    let rest = fix.expect("8");
    assert_eq!(rest.req(tags::EXEC_TYPE), "4", "{rest:?}");
    assert_eq!(rest.get(tags::CL_ORD_ID), None);
    assert_eq!(
        (
            rest.req(tags::ORDER_QTY),
            rest.req(tags::CUM_QTY),
            rest.req(tags::LEAVES_QTY)
        ),
        ("0.002", "0.001", "0.000")
    );
    assert_eq!(rest.req(tags::TEXT), "liquidation");
    let ids: Vec<&str> = [&fill, &cancelled, &close, &rest]
        .iter()
        .map(|m| m.req(tags::ORDER_ID))
        .collect();
    assert!(
        ids[2] != ids[0] && ids[2] != ids[1],
        "the close has an OrderID of its own: {ids:?}"
    );
    assert_eq!(ids[3], ids[2], "its fill and its rest are one order");
    assert_valid(ApplVersion::Fix44, &close);
    assert_valid(ApplVersion::Fix44, &rest);

    fix.send(
        "AN",
        &[
            (710, "P1"),
            (724, "0"),
            (tags::TRANSACT_TIME, &transact_time()),
        ],
    );
    let reject = fix.expect("j");
    assert_eq!(reject.req(tags::BUSINESS_REJECT_REASON), "3");
    assert_eq!(reject.req(tags::REF_MSG_TYPE), "AN");
}
