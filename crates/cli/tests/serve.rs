//! The README's run command, `rialto serve --demo`, as a user runs it: a client trades on it,
//! SIGTERM stops it cleanly, a restart recovers what was acknowledged, and SIGINT stops it cleanly
//! too.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rialto_client::Client;
use rialto_core::{Side, SymbolId};
use rialto_wire::{ClientMsg, NewOrder, ServerMsg};

/// Kills the server if a test fails before stopping it.
struct Server {
    child: Child,
    orders: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(data: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
        .args([
            "serve",
            "--demo",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--fix-listen",
            "127.0.0.1:0",
            "--web-listen",
            "127.0.0.1:0",
        ])
        .arg("--data")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // "rialto serving: orders on ADDR, admin on ADDR (stop with Ctrl-C)"
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let orders = line
        .split_whitespace()
        .nth(4)
        .and_then(|a| a.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
    Server { child, orders }
}

fn login(server: &Server, data: &Path, user: i64) -> Client {
    let credentials = rialto_server::auth::Credentials::load_or_create(data).unwrap();
    let mut c = Client::connect(server.orders).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.login(user, credentials.user_secret(user).as_bytes())
        .unwrap();
    c
}

/// Stops the server with a signal (`-TERM`, `-INT`) and waits for a clean exit.
fn stop(mut server: Server, signal: &str) -> String {
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = server.child.wait().unwrap();
    let mut log = String::new();
    std::io::Read::read_to_string(server.child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(status.success(), "exit {status}: {log}");
    log
}

#[test]
fn a_client_trades_on_the_readme_server_which_stops_cleanly_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = serve(&data);
    let mut seller = login(&server, &data, 1);
    let mut buyer = login(&server, &data, 2);
    seller
        .place(NewOrder::limit(1, SymbolId(0), Side::Sell, 5_000, 3))
        .unwrap();
    assert!(matches!(seller.recv().unwrap(), ServerMsg::Accepted { .. }));
    buyer
        .place(NewOrder::limit(1, SymbolId(0), Side::Buy, 5_100, 2))
        .unwrap();
    assert!(matches!(buyer.recv().unwrap(), ServerMsg::Accepted { .. }));
    match buyer.recv().unwrap() {
        ServerMsg::Trade { price, qty, .. } => assert_eq!((price, qty), (5_000, 2)),
        other => panic!("{other}"),
    }
    assert!(matches!(
        seller.recv().unwrap(),
        ServerMsg::Trade { qty: 2, .. }
    ));
    let log = stop(server, "-TERM");
    assert!(log.contains("stopped cleanly"), "{log}");
    // Sessions are told before they are closed.
    match seller.recv() {
        Ok(ServerMsg::Error { code, .. }) => assert_eq!(code, rialto_wire::ErrorCode::ShuttingDown),
        other => panic!("{other:?}"),
    }

    // The resting remainder of the sell is still there after a restart.
    let server = serve(&data);
    let mut seller = login(&server, &data, 1);
    match seller.request(&ClientMsg::MyReport { request: 1 }).unwrap() {
        ServerMsg::Report { report, .. } => {
            assert_eq!(report.orders.len(), 1);
            assert_eq!(report.orders[0].remaining, 1);
        }
        other => panic!("{other}"),
    }
    // Ctrl-C stops it as cleanly.
    let log = stop(server, "-INT");
    assert!(log.contains("stopped cleanly"), "{log}");
}

/// The README's tour with the binary alone: `rialto order` signs and places orders over REST,
/// reading the secret from the data directory, and prints what became of each.
#[test]
fn rialto_order_places_signed_orders_and_prints_their_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rialto"))
        .args(["serve", "--demo", "--data", data.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--fix-listen", "127.0.0.1:0", "--web-listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Server {
        child,
        orders: "127.0.0.1:1".parse().unwrap(),
    };
    let web = line
        .split("web on http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|w| w.trim_end_matches([',', '/']).to_string())
        .unwrap_or_else(|| panic!("no web address in {line:?}"));
    // `rialto order` signed as `signer` says: whether it succeeded, its answer, its stderr.
    let run_order = |signer: &[&str], extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_rialto"))
            .args(["order", "--web", &web])
            .args(signer)
            .args(extra)
            .output()
            .unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (
            out.status.success(),
            answer,
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let order = |user: &str, extra: &[&str]| {
        run_order(&["--data", data.to_str().unwrap(), "--user", user], extra)
    };
    let (ok, sell, err) = order(
        "1",
        &["--side", "sell", "--price", "5000.00", "--qty", "0.003"],
    );
    assert!(ok, "{err}");
    assert_eq!(sell["status"], "new", "{sell}");
    let buy = [
        "--side",
        "buy",
        "--price",
        "5100.00",
        "--qty",
        "0.002",
        "--client-order-id",
        "tour-1",
    ];
    let (ok, bought, err) = order("2", &buy);
    assert!(ok, "{err}");
    assert_eq!(bought["status"], "filled", "{bought}");
    assert_eq!(bought["fills"][0]["price"], "5000.00", "{bought}");
    // The same client order id again: refused, with the first order's status.
    let (ok, _, err) = order("2", &buy);
    assert!(
        !ok && err.contains("duplicate_order_id") && err.contains("filled"),
        "{err}"
    );
    let (ok, _, err) = order(
        "1",
        &["--side", "sell", "--price", "5000.001", "--qty", "0.001"],
    );
    assert!(!ok && err.contains("invalid_price"), "{err}");

    // An issued API key signs as well; a read-only one cannot trade.
    let credentials = rialto_server::auth::Credentials::load_or_create(&data).unwrap();
    let issue = |permissions: serde_json::Value| {
        let body = serde_json::json!({"user": 1, "permissions": permissions}).to_string();
        let (status, answer) = rialto_cli::order::signed_request(
            &web,
            "admin",
            &credentials.admin_secret(),
            "POST",
            "/api/v1/admin/keys",
            &body,
        )
        .unwrap();
        assert_eq!(status, 200, "{answer}");
        let key: serde_json::Value = serde_json::from_str(&answer).unwrap();
        (
            key["key"].as_str().unwrap().to_string(),
            key["secret"].as_str().unwrap().to_string(),
        )
    };
    let with_key = |(key, secret): &(String, String), extra: &[&str]| {
        run_order(&["--key", key, "--secret", secret], extra)
    };
    let sell = ["--side", "sell", "--price", "5200.00", "--qty", "0.001"];
    let (ok, placed, err) = with_key(&issue(serde_json::json!(["trade"])), &sell);
    assert!(ok, "{err}");
    assert_eq!(placed["status"], "new", "{placed}");
    let (ok, _, err) = with_key(&issue(serde_json::json!(["read"])), &sell);
    assert!(!ok && err.contains("permission_denied"), "{err}");
    // A key without its secret is refused before anything is sent.
    let (ok, _, err) = run_order(&["--key", "rkx"], &sell);
    assert!(!ok && err.contains("--secret"), "{err}");
    drop(server);
}
