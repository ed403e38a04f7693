//! Helpers for tests that run a real server on loopback.
#![allow(dead_code)]

pub mod fix;

use std::path::Path;
use std::time::Duration;

use rialto_client::Client;
use rialto_server::RunningServer;
use rialto_server::config::{DurabilityMode, ServerConfig};
use rialto_wire::ServerMsg;

/// A server on free loopback ports over `data_dir`, with the demo venue.
pub fn start(data_dir: &Path, tweak: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let mut config = ServerConfig {
        data_dir: data_dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        demo: true,
        ..ServerConfig::default()
    };
    config.journal.durability = DurabilityMode::Batch;
    config.fix.listen = "127.0.0.1:0".parse().unwrap();
    config.web.listen = "127.0.0.1:0".parse().unwrap();
    tweak(&mut config);
    rialto_server::start(config).expect("server starts")
}

pub fn trader(server: &RunningServer, user: i64) -> Client {
    let mut c = Client::connect(server.order_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let secret = server.credentials.user_secret(user);
    c.login(user, secret.as_bytes()).unwrap();
    c
}

pub fn admin(server: &RunningServer) -> Client {
    let mut c = Client::connect(server.admin_addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.admin_login(server.admin_secret.as_bytes()).unwrap();
    c
}

/// Receives frames until one matches, failing on a timeout; returns the frames before it too.
pub fn recv_until(
    c: &mut Client,
    want: impl Fn(&ServerMsg) -> bool,
) -> (ServerMsg, Vec<ServerMsg>) {
    let mut before = Vec::new();
    loop {
        let msg = c.recv().expect("a frame before the timeout");
        if want(&msg) {
            return (msg, before);
        }
        before.push(msg);
    }
}

/// The venue's state hash, from an admin snapshot.
pub fn state_hash(server: &RunningServer) -> [u8; 32] {
    match admin(server)
        .request(&rialto_wire::ClientMsg::TakeSnapshot { request: 99 })
        .unwrap()
    {
        ServerMsg::SnapshotTaken { state_hash, .. } => state_hash,
        other => panic!("snapshot: {other}"),
    }
}

/// Takes the demo venue's price band off a symbol (an operator's `set_band` 0), for tests of
/// other rules that trade across prices more than 10% apart.
pub fn without_band(server: &RunningServer, symbol: rialto_core::SymbolId) {
    let reply = admin(server)
        .request(&rialto_wire::ClientMsg::SetBand {
            request: 1,
            symbol,
            band_bps: 0,
        })
        .unwrap();
    assert!(
        matches!(reply, ServerMsg::AdminResult { result: Ok(()), .. }),
        "set_band 0: {reply}"
    );
}

/// `target` asking for the engine's integers (`units=int`, docs/api.md "Units"): the tests
/// written before decimal strings check the engine's numbers as they are.
pub fn int_units(target: &str) -> String {
    if !(target.starts_with("/api/") || target.starts_with("/ws")) || target.contains("units=") {
        return target.to_string();
    }
    let sep = if target.contains('?') { '&' } else { '?' };
    format!("{target}{sep}units=int")
}
