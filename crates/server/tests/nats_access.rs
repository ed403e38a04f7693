//! A node proves itself to NATS as `[log]` says (docs/replication.md, "Securing NATS"): a
//! password, a token or TLS, each secret read from a file. Against a single nats-server with
//! JetStream that requires it: the right secret opens the venue's log, none or a wrong one is
//! refused quickly and clearly, and no error repeats the secret.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::nats::NatsNode;
use rialto_server::config::{LogBackend, LogSettings};
use rialto_server::replication::Connection;

/// The venue's log settings on `node`, with no credentials.
fn settings(node: &NatsNode) -> LogSettings {
    LogSettings {
        backend: LogBackend::Jetstream,
        nats: vec![node.url.clone()],
        venue: "access".into(),
        replicas: 1,
        ack_timeout_ms: 2_000,
        ..Default::default()
    }
}

fn secret_file(dir: &Path, name: &str, secret: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("{secret}\n")).unwrap();
    path
}

/// Opening the log must fail at once (not after the 30 s given to reach NATS: a refusal is not
/// worth waiting out), without the secret tried in its message.
fn refused(settings: &LogSettings, tried: Option<&str>) -> String {
    let started = Instant::now();
    let error = match Connection::open(settings, Duration::from_secs(30)) {
        Ok(_) => panic!("NATS let a client in with the wrong credentials"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused only after {:?}",
        started.elapsed()
    );
    if let Some(secret) = tried {
        assert!(
            !error.contains(secret),
            "the error shows the secret: {error}"
        );
    }
    error
}

#[test]
fn a_user_and_password_from_a_file() {
    let server = NatsNode::start(&["--user", "rialto", "--pass", "correct-horse"]);
    let dir = tempfile::tempdir().unwrap();

    let error = refused(&settings(&server), None);
    assert!(error.contains("refused this node"), "{error}");

    let wrong = LogSettings {
        nats_user: Some("rialto".into()),
        nats_password_file: Some(secret_file(dir.path(), "wrong", "battery-staple")),
        ..settings(&server)
    };
    let error = refused(&wrong, Some("battery-staple"));
    assert!(
        error.to_lowercase().contains("authorization violation"),
        "NATS's reason is given: {error}"
    );

    let right = LogSettings {
        nats_user: Some("rialto".into()),
        nats_password_file: Some(secret_file(dir.path(), "right", "correct-horse")),
        ..settings(&server)
    };
    let connection = Connection::open(&right, Duration::from_secs(10)).expect("the log opens");
    assert_eq!(
        connection.last_stream_seq().unwrap(),
        0,
        "a new venue's log"
    );

    // Credentials in the URL are refused before any connection, and not repeated.
    let in_url = LogSettings {
        nats: vec![
            server
                .url
                .replace("nats://", "nats://rialto:correct-horse@"),
        ],
        ..settings(&server)
    };
    let error = refused(&in_url, Some("correct-horse"));
    assert!(error.contains("log.nats_password_file"), "{error}");
}

#[test]
fn a_token_from_a_file() {
    let server = NatsNode::start(&["--auth", "s3cret-token"]);
    let dir = tempfile::tempdir().unwrap();
    let wrong = LogSettings {
        nats_token_file: Some(secret_file(dir.path(), "wrong", "not-the-token")),
        ..settings(&server)
    };
    refused(&wrong, Some("not-the-token"));
    let right = LogSettings {
        nats_token_file: Some(secret_file(dir.path(), "right", "s3cret-token")),
        ..settings(&server)
    };
    Connection::open(&right, Duration::from_secs(10)).expect("the log opens");
}

#[test]
fn tls_trusting_the_servers_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let tls = rialto_server::tls::self_signed(&dir.path().join("tls")).unwrap();
    let cert = tls.cert.display().to_string();
    let key = tls.key.display().to_string();
    let server = NatsNode::start(&["--tls", "--tlscert", &cert, "--tlskey", &key]);

    // A client that does not trust the certificate fails its own TLS check. (This is retried
    // until the deadline: the client library reports it as an I/O error, like a server that
    // is not up yet.)
    let error = match Connection::open(&settings(&server), Duration::from_secs(2)) {
        Ok(_) => panic!("a certificate nobody trusts was accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(error.to_lowercase().contains("certificate"), "{error}");

    let trusting = LogSettings {
        nats_tls_ca: Some(tls.cert.clone()),
        ..settings(&server)
    };
    Connection::open(&trusting, Duration::from_secs(10)).expect("the log opens over TLS");
}
