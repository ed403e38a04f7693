//! QuickFIX/J against `rialto serve`: the Java initiator in interop/quickfixj logs on over
//! FIX 4.4 and FIXT.1.1/5.0SP2, trades between two sessions, amends, cancels, checks every
//! ExecutionReport, forces a sequence gap each way, loses an order and its report on the wire
//! (a proxy here drops them) and recovers without a sequence reset, trades the rulebook's
//! orders (a stop triggered by a trade, an iceberg filled across a refill, a GTD order that
//! expires, a replace of a stop-limit GTD order), and exits 0 only if every step passed. The
//! iceberg it leaves resting is checked here, in the engine's book: only its slice shows.
//! Needs a JDK 17 and Maven (`.ci/run` installs them); the first build downloads QuickFIX/J.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use rialto_fix::{next_frame, tags};

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/quickfixj")
}

fn build_java() {
    let status = Command::new("mvn")
        .args(["-q", "-B", "-Dstyle.color=never", "package"])
        .current_dir(interop_dir())
        .status()
        .expect("Maven is needed for the QuickFIX/J interop test (.ci/run installs it)");
    assert!(status.success(), "mvn package failed in interop/quickfixj");
}

#[test]
fn quickfixj_trades_amends_cancels_and_resends_against_rialto() {
    build_java();
    let data = tempfile::tempdir().unwrap();
    let server = common::serve_demo(data.path());
    let fix: SocketAddr = server.address_after("FIX on ").parse().unwrap();
    let proxy = LossyProxy::start(fix);
    let credentials = rialto_server::auth::Credentials::load_or_create(data.path()).unwrap();
    // The run trades BTC-USD from 90 to 130: more than the demo's 10% band allows.
    take_the_band_off(&server, &credentials);
    for begin in ["FIX.4.4", "FIXT.1.1"] {
        let store = tempfile::tempdir().unwrap();
        let output = Command::new("java")
            .args([
                "-cp",
                "target/classes:target/dependency/*",
                "rialto.interop.Interop",
            ])
            .args(["--port", &proxy.addr.port().to_string(), "--begin", begin])
            .args(["--secret1", &credentials.user_secret(1)])
            .args(["--secret2", &credentials.user_secret(2)])
            .arg("--store")
            .arg(store.path())
            .current_dir(interop_dir())
            .output()
            .expect("a JDK is needed for the QuickFIX/J interop test (.ci/run installs it)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "QuickFIX/J interop over {begin} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Every step reported, the forced gaps and the messages lost on the wire among them.
        for step in 0..=16 {
            assert!(stdout.contains(&format!("ok step {step}:")), "{stdout}");
        }
        // Step 13 left TRADER2's iceberg (0.005, showing 0.002, 0.003 filled) resting at this
        // price: the book shows its slice, 0.001, not the 0.002 it still has.
        let price_ticks = if begin == "FIX.4.4" { 13_000 } else { 12_000 };
        assert_iceberg_shows_its_slice_only(&server, &credentials, price_ticks);
    }
}

fn admin_client(
    server: &common::Served,
    credentials: &rialto_server::auth::Credentials,
) -> rialto_client::Client {
    let mut admin = rialto_client::Client::connect(server.address_after("admin on ")).unwrap();
    admin
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    admin
        .admin_login(credentials.admin_secret().as_bytes())
        .unwrap();
    admin
}

/// An operator's `set_band` 0 on BTC-USD.
fn take_the_band_off(server: &common::Served, credentials: &rialto_server::auth::Credentials) {
    use rialto_wire::{ClientMsg, ServerMsg};
    let reply = admin_client(server, credentials).request(&ClientMsg::SetBand {
        request: 1,
        symbol: rialto_core::SymbolId(0),
        band_bps: 0,
    });
    assert!(
        matches!(reply, Ok(ServerMsg::AdminResult { result: Ok(()), .. })),
        "set_band 0: {reply:?}"
    );
}

fn assert_iceberg_shows_its_slice_only(
    server: &common::Served,
    credentials: &rialto_server::auth::Credentials,
    price_ticks: i64,
) {
    use rialto_wire::{ClientMsg, ServerMsg};
    let btc = rialto_core::SymbolId(0);
    let mut trader = rialto_client::Client::connect(server.address_after("orders on ")).unwrap();
    trader
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    trader
        .login(1, credentials.user_secret(1).as_bytes())
        .unwrap();
    let book = trader.request(&ClientMsg::Book {
        request: 1,
        symbol: btc,
        depth: 100,
    });
    let Ok(ServerMsg::Book { asks, .. }) = book else {
        panic!("book: {book:?}")
    };
    let level = asks.iter().find(|l| l.price == price_ticks);
    assert_eq!(level.map(|l| l.qty), Some(1), "asks {asks:?}");

    let report = admin_client(server, credentials).request(&ClientMsg::UserReportExt {
        request: 2,
        user: 2,
    });
    let Ok(ServerMsg::ReportExt { report, .. }) = report else {
        panic!("report: {report:?}")
    };
    let iceberg = report.orders.iter().find(|o| o.price == price_ticks);
    assert_eq!(
        iceberg.map(|o| (o.remaining, o.shown, o.filled)),
        Some((2, 1, 3)),
        "{report:?}"
    );
}

/// Forwards FIX connections to `upstream`, dropping, once per connection, the first
/// NewOrderSingle whose ClOrdID ends in "-lost" (towards the acceptor) and the first
/// ExecutionReport for such an order (back): a message lost on the wire, in each direction.
/// Everything else passes unchanged. Stops accepting when dropped.
struct LossyProxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl LossyProxy {
    fn start(upstream: SocketAddr) -> LossyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        thread::spawn(move || {
            loop {
                let Ok((client, _)) = listener.accept() else {
                    return;
                };
                // Dropping the proxy connects once to wake this accept.
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                thread::spawn(move || forward(client, server, b"D"));
                thread::spawn(move || forward(s2, c2, b"8"));
            }
        });
        LossyProxy { addr, stop }
    }
}

impl Drop for LossyProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies whole FIX messages from `from` to `to`, leaving out the first of type `lose` for a
/// "-lost" ClOrdID. Ends (closing `to` for writing) when `from` ends.
fn forward(mut from: TcpStream, mut to: TcpStream, lose: &[u8]) {
    let mut lost = false;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut chunk) {
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        loop {
            let len = match next_frame(&buf, 1 << 20) {
                Ok(Some((frame, len))) => {
                    let lose_it = !lost
                        && frame.msg_type == lose
                        && frame
                            .get(tags::CL_ORD_ID)
                            .is_some_and(|id| id.ends_with(b"-lost"));
                    lost |= lose_it;
                    if !lose_it && to.write_all(&buf[..len]).is_err() {
                        return;
                    }
                    len
                }
                Ok(None) => break,
                Err(garbled) => {
                    if to.write_all(&buf[..garbled.skip]).is_err() {
                        return;
                    }
                    garbled.skip
                }
            };
            buf.drain(..len);
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
