//! A venue on a NATS that requires a password, end to end through the `rialto` binary
//! (docs/replication.md, "Securing NATS"): `rialto serve` with the `[log]` credentials in its
//! configuration file leads and acknowledges orders; `rialto journal verify --config` reads the
//! log with the same file; without the password, or with a wrong one, both are refused at
//! once and say why, never showing the password.

mod common;
#[path = "../../server/tests/common/nats.rs"]
mod nats;

use std::time::Duration;

use common::{ON_FREE_PORTS, rialto, serve_with};
use nats::NatsNode;
use rialto_client::Client;
use rialto_core::{Side, SymbolId};
use rialto_server::auth::{Credentials, read_key};
use rialto_wire::{NewOrder, ServerMsg};

const PASSWORD: &str = "correct-horse-battery";

#[test]
fn a_venue_on_a_nats_that_requires_a_password() {
    let server = NatsNode::start(&["--user", "rialto", "--pass", PASSWORD]);
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("nats-password");
    std::fs::write(&password, format!("{PASSWORD}\n")).unwrap();
    let config = dir.path().join("rialto.toml");
    std::fs::write(
        &config,
        format!(
            "[log]\nbackend = \"jetstream\"\nnats = [\"{}\"]\nvenue = \"secured\"\nreplicas = 1\n\
             nats_user = \"rialto\"\nnats_password_file = \"{}\"\n",
            server.url,
            password.display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    // The venue leads and acknowledges an order.
    let data = dir.path().join("data");
    let served = serve_with(&data, "batch", &["--config", config]);
    let orders = served.address_after("orders on ");
    let mut client = Client::connect(orders).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let key = read_key(&data).unwrap().expect("the venue key");
    let secret = Credentials::from_key(key).user_secret(1);
    client.login(1, secret.as_bytes()).unwrap();
    client
        .place(NewOrder::limit(1, SymbolId(0), Side::Buy, 990, 1))
        .unwrap();
    let placed = client.recv().unwrap();
    assert!(
        matches!(placed, ServerMsg::Accepted { .. }),
        "the order is acknowledged: {placed:?}"
    );

    // The journal tool reads the log with the same file.
    let verified = rialto(&["journal", "verify", "--config", config], "");
    assert_eq!(verified.code, Some(0), "{verified:?}");
    assert!(verified.stdout.contains("seq: 1..="), "{}", verified.stdout);

    // Without the password, or with a wrong one: refused, saying why, the password not shown.
    let without = rialto(
        &[
            "journal",
            "verify",
            "--nats",
            &server.url,
            "--venue",
            "secured",
        ],
        "",
    );
    assert_ne!(without.code, Some(0), "{without:?}");
    let said = format!("{}{}", without.stdout, without.stderr);
    assert!(said.contains("authorization violation"), "{said}");

    let wrong = dir.path().join("wrong-password");
    std::fs::write(&wrong, "not-it\n").unwrap();
    let wrong_setting = format!("log.nats_password_file={}", wrong.display());
    let refused = rialto(
        &[
            "serve",
            "--config",
            config,
            "--set",
            &wrong_setting,
            "--data",
            dir.path().join("other").to_str().unwrap(),
        ]
        .iter()
        .chain(ON_FREE_PORTS.iter())
        .copied()
        .collect::<Vec<_>>(),
        "",
    );
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(
        refused.stderr.contains("authorization violation"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("not-it"), "{}", refused.stderr);
    assert!(!refused.stderr.contains(PASSWORD), "{}", refused.stderr);
}
