//! A venue stopped cleanly (or from a snapshot plus the journal after it) comes back with
//! exactly the state it had.

mod common;

use common::{start, state_hash, trader};
use rialto_core::{Side, SymbolId};
use rialto_wire::{ClientMsg, NewOrder, ServerMsg};

fn trade_some(server: &rialto_server::RunningServer, first_order: i64) {
    let mut a = trader(server, 1);
    let mut b = trader(server, 2);
    for i in 0..50 {
        let id = first_order + i;
        a.place(NewOrder::limit(
            id,
            SymbolId(0),
            Side::Sell,
            1_000 + i % 7,
            3,
        ))
        .unwrap();
        b.place(NewOrder::limit(id, SymbolId(0), Side::Buy, 1_003, 2))
            .unwrap();
    }
    // Everything acknowledged before we stop.
    for c in [&mut a, &mut b] {
        let mut acks = 0;
        while acks < 50 {
            if let ServerMsg::Accepted { .. } | ServerMsg::Rejected { .. } = c.recv().unwrap() {
                acks += 1;
            }
        }
    }
}

fn open_orders(server: &rialto_server::RunningServer, user: i64) -> usize {
    match trader(server, user)
        .request(&ClientMsg::MyReport { request: 1 })
        .unwrap()
    {
        ServerMsg::Report { report, .. } => report.orders.len(),
        m => panic!("{m}"),
    }
}

#[test]
fn a_clean_restart_recovers_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    trade_some(&server, 1);
    let before = state_hash(&server);
    let orders_before = open_orders(&server, 1);
    assert!(orders_before > 0);
    server.shutdown().unwrap();

    let server = start(dir.path(), |_| {});
    assert_eq!(state_hash(&server), before);
    assert_eq!(open_orders(&server, 1), orders_before);
    server.shutdown().unwrap();
}

#[test]
fn a_restart_after_a_snapshot_replays_only_the_journal_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.journal.segment_bytes = 4096);
    trade_some(&server, 1);
    let _ = state_hash(&server); // takes a snapshot
    trade_some(&server, 1_000);
    let before = state_hash(&server);
    server.shutdown().unwrap();
    assert!(dir.path().join("snapshots").read_dir().unwrap().count() >= 1);

    let server = start(dir.path(), |c| c.journal.segment_bytes = 4096);
    assert_eq!(state_hash(&server), before);
    // Trading goes on with the sequence where it left off.
    let mut t = trader(&server, 3);
    t.place(NewOrder::limit(9, SymbolId(1), Side::Buy, 10, 1))
        .unwrap();
    assert!(matches!(t.recv().unwrap(), ServerMsg::Accepted { .. }));
    server.shutdown().unwrap();
}

#[test]
fn snapshots_taken_every_n_commands_are_where_recovery_starts() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let tweak = |c: &mut rialto_server::config::ServerConfig| {
        c.journal.segment_bytes = 4096;
        c.journal.snapshot_every = 60;
    };
    let server = start(dir.path(), tweak);
    trade_some(&server, 1);
    trade_some(&server, 1_000);
    // Snapshots are written off the engine's thread, and only the files tell when: wait for
    // the ones the commands made due.
    common::eventually(
        "snapshots every 60 commands",
        Duration::from_secs(30),
        || rialto_journal::list_snapshots(dir.path()).unwrap().len() >= 2,
    );
    server.shutdown().unwrap();
    let newest = rialto_journal::list_snapshots(dir.path())
        .unwrap()
        .last()
        .unwrap()
        .0;

    let config = {
        let mut c = rialto_server::config::ServerConfig::default();
        tweak(&mut c);
        c.engine_config()
    };
    let recovered = rialto_journal::recover(dir.path(), config).unwrap();
    assert_eq!(recovered.snapshot_seq, Some(newest));
    assert!(recovered.replayed < recovered.last_seq - 60);
    // The same state as every journaled command (the archived segments too) from the start.
    let mut full = rialto_core::Engine::new(config);
    let mut events = Vec::new();
    for record in rialto_journal::JournalReader::open(dir.path(), true).unwrap() {
        let record = record.unwrap();
        events.clear();
        let _ = full.apply(record.seq, record.ts_ns, &record.command, &mut events);
    }
    assert_eq!(full.last_seq(), recovered.last_seq);
    assert_eq!(recovered.state_hash, full.state_hash());

    let server = start(dir.path(), tweak);
    assert_eq!(state_hash(&server), recovered.state_hash);
    server.shutdown().unwrap();
}

/// The engine's L2 book of a symbol, as a trader queries it: (price, qty) per side.
fn engine_book(server: &rialto_server::RunningServer, symbol: SymbolId) -> [Vec<(i64, i64)>; 2] {
    match trader(server, 3)
        .request(&ClientMsg::Book {
            request: 1,
            symbol,
            depth: 1_000,
        })
        .unwrap()
    {
        ServerMsg::Book { bids, asks, .. } => {
            [bids, asks].map(|side| side.iter().map(|l| (l.price, l.qty)).collect())
        }
        m => panic!("{m}"),
    }
}

/// Market data's L2 book once it has replayed everything the engine applied.
fn feed_book(server: &rialto_server::RunningServer, symbol: SymbolId) -> [Vec<(i64, i64)>; 2] {
    server.settle_market_data(std::time::Duration::from_secs(5));
    let l2 = server.market_data.feed().l2(symbol, 1_000).unwrap();
    [l2.bids, l2.asks]
}

#[test]
fn market_data_follows_the_engine_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |_| {});
    trade_some(&server, 1);
    let book = engine_book(&server, SymbolId(0));
    assert!(!book[0].is_empty() || !book[1].is_empty(), "orders rest");
    assert_eq!(feed_book(&server, SymbolId(0)), book);
    server.shutdown().unwrap();

    // The replica starts from the recovered engine and follows what comes after.
    let server = start(dir.path(), |_| {});
    assert_eq!(feed_book(&server, SymbolId(0)), book);
    trade_some(&server, 1_000);
    let book = engine_book(&server, SymbolId(0));
    assert_eq!(feed_book(&server, SymbolId(0)), book);
    server.shutdown().unwrap();
}
