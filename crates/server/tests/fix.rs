//! The FIX gateway over real sockets: logon rules, orders that trade between two sessions,
//! replace and cancel, rejects, market data, the symbol list, and a restart that keeps
//! sequence numbers and live orders.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::fix::{FixClient, transact_time};
use rialto_fix::tags;
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

#[test]
fn logon_needs_the_users_password() {
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
    let logout = client.expect("5");
    assert_eq!(logout.req(tags::TEXT), "Logon refused", "{logout:?}");
    assert!(client.recv_within(Duration::from_secs(5)).is_none());

    // An unknown CompID gets no session at all.
    let mut stranger = FixClient::connect(fix_addr(&server), "NOBODY", "FIX.4.4");
    stranger.send(
        "A",
        &[(tags::ENCRYPT_METHOD, "0"), (tags::HEART_BT_INT, "30")],
    );
    assert!(stranger.recv_within(Duration::from_secs(5)).is_none());
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
    assert_eq!(symbols, vec!["BTC-USD", "ETH-USD"]);

    let mut trader = FixClient::connect(fix_addr(&server), "TRADER4", "FIX.4.4");
    trader.logon(&server, 4);
    trader.new_order("T1", "1", "0.005", "101.00");
    trader.expect("8");

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
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_orders(&server, 7) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(open_orders(&server, 7), 0);
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
