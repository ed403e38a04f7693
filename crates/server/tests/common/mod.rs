//! Helpers for tests that run a real server on loopback.
#![allow(dead_code)]

pub mod fix;
pub mod nats;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rialto_client::Client;
use rialto_server::RunningServer;
use rialto_server::config::{DurabilityMode, ServerConfig};
use rialto_server::feed::Batch;
use rialto_wire::ServerMsg;

/// A server on free loopback ports over `data_dir`, with the demo venue.
/// A spot symbol `symbol` of `base` quoted in `quote`, `base_scale` base minor units a lot, one
/// quote minor unit a tick, no fees, no band: what a test's admin adds.
pub fn spot_spec(
    symbol: &str,
    base: &str,
    quote: &str,
    base_scale: i64,
) -> rialto_core::SymbolSpec {
    let name = |s: &str| rialto_core::Name::new(s).unwrap();
    rialto_core::SymbolSpec {
        symbol: name(symbol),
        base: name(base),
        quote: name(quote),
        base_scale,
        quote_scale: 1,
        maker_fee: 0,
        taker_fee: 0,
        band_bps: 0,
        day_end: 0,
        kind: rialto_core::SymbolSpec::SPOT,
    }
}

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

/// Checks `done` until it holds, failing with `what` after `timeout`. For state that no message
/// announces (what REST or the admin port reports, a file on disk, a counter the server keeps):
/// wherever there is an event (a reply, a frame, a batch), wait for that instead.
pub fn eventually(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until market data has replayed the engine up to `seq` (a reply's sequence number).
/// Safer than `settle_market_data` right after a reply: the engine announces how far it has
/// applied only after its batch, so a reply can arrive before that.
pub fn market_data_reaches(server: &RunningServer, seq: u64) {
    eventually(
        &format!("market data to reach seq {seq}"),
        Duration::from_secs(10),
        || server.market_data.applied_seq() >= seq,
    );
}

/// The next market data batch from `batches` (a subscription to `server.market_data`), or
/// None after `timeout`. Panics if the feed has closed or the receiver lagged.
pub fn next_batch(
    batches: &mut tokio::sync::broadcast::Receiver<Arc<Batch>>,
    timeout: Duration,
) -> Option<Arc<Batch>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime for one receive");
    // The timer is made inside the runtime, which it needs.
    let received = runtime.block_on(async { tokio::time::timeout(timeout, batches.recv()).await });
    match received {
        Ok(Ok(batch)) => Some(batch),
        Ok(Err(e)) => panic!("the market data subscription failed: {e}"),
        Err(_) => None,
    }
}
