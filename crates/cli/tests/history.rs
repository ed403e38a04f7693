//! `rialto serve`'s durable history survives SIGKILL: every trade a client saw is served after
//! the restart, under the id its seq gives, and trade ids never repeat across restarts
//! (docs/api.md, "Durable history").

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::serve_with;
use rialto_client::Client;
use rialto_core::{Side, SymbolId};
use rialto_server::auth::Credentials;
use rialto_wire::{NewOrder, ServerMsg};
use serde_json::Value;

const ID_PER_SEQ: i64 = 1_000_000;

/// `GET target` on the web address: the JSON body of a 200 answer.
fn get(web: &str, target: &str) -> Value {
    let mut s = TcpStream::connect(web).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let body = out.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}

fn login(orders: &str, data: &Path, user: i64) -> Client {
    let secret = Credentials::load_or_create(data).unwrap().user_secret(user);
    let mut c = Client::connect(orders).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.login(user, secret.as_bytes()).unwrap();
    c
}

/// `n` trades of one lot between users 1 and 2; returns their seqs as the buyer saw them.
fn trade(orders: &str, data: &Path, first_order: i64, n: i64) -> Vec<i64> {
    let mut seller = login(orders, data, 1);
    let mut buyer = login(orders, data, 2);
    let mut seqs = Vec::new();
    for order in first_order..first_order + n {
        seller
            .place(NewOrder::limit(order, SymbolId(0), Side::Sell, 500_000, 1))
            .unwrap();
        while !matches!(seller.recv().unwrap(), ServerMsg::Accepted { .. }) {}
        buyer
            .place(NewOrder::limit(order, SymbolId(0), Side::Buy, 500_000, 1))
            .unwrap();
        loop {
            if let ServerMsg::Trade { seq, .. } = buyer.recv().unwrap() {
                seqs.push(seq as i64);
                break;
            }
        }
    }
    seqs
}

/// Polls the served trade ids until they are `want` (the history may still be rebuilding).
fn served_ids_become(web: &str, want: &[i64]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let trades = get(web, "/api/v1/trades/BTC-USD/history?limit=1000");
        let ids: Vec<i64> = trades
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["trade_id"].as_i64().unwrap())
            .collect();
        if ids == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "served trade ids {ids:?}, expected {want:?}"
        );
        // The history is served over HTTP only, and nothing announces a finished rebuild.
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn history_survives_sigkill_and_trade_ids_never_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let mut want: Vec<i64> = Vec::new();
    for round in 0..3 {
        let server = serve_with(data, "fsync", &[]);
        let (orders, web) = (
            server.address_after("orders on ").to_string(),
            server
                .address_after("web on http://")
                .trim_end_matches('/')
                .to_string(),
        );
        // Everything from before the kill, rebuilt from the journal if the database was behind.
        served_ids_become(&web, &want);
        let seqs = trade(&orders, data, 1_000 * (round + 1), 20);
        want.extend(seqs.iter().map(|seq| seq * ID_PER_SEQ));
        // Killed with SIGKILL at once: the history writer may not have caught up.
        drop(server);
    }
    let server = serve_with(data, "fsync", &["--history", "on"]);
    let web = server
        .address_after("web on http://")
        .trim_end_matches('/')
        .to_string();
    served_ids_become(&web, &want);
    let mut sorted = want.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, want, "ids rise and never repeat");
}

#[test]
fn history_off_serves_no_fills_and_leaves_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve_with(dir.path(), "batch", &["--history", "off"]);
    let web = server
        .address_after("web on http://")
        .trim_end_matches('/')
        .to_string();
    let mut s = TcpStream::connect(&web).unwrap();
    s.write_all(b"GET /api/v1/ticker/24h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 404"), "{out}");
    assert!(out.contains("history_off"), "{out}");
    assert!(!dir.path().join("history.sqlite").exists());
}
