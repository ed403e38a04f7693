//! `rialto bench log --backend jetstream` against a three-node NATS cluster of its own: it
//! commits every command it was asked to, prints the floor beside it, and leaves no stream
//! behind. (A smoke test: the figures themselves are not checked.)

mod common;

#[path = "../../server/tests/common/nats.rs"]
mod nats;

use std::time::Duration;

use common::rialto;
use nats::NatsCluster;
use rialto_server::config::{LogBackend, LogSettings};
use rialto_server::replication::Connection;

#[test]
fn bench_log_commits_through_jetstream_prints_the_floor_and_cleans_up() {
    let cluster = NatsCluster::start();
    let nats = cluster.urls_arg();
    let run = rialto(
        &[
            "bench",
            "log",
            "--backend",
            "jetstream",
            "--nats",
            &nats,
            "--commands",
            "2500",
            "--batch",
            "1000",
            "--messages",
            "20",
            "--window",
            "4",
            "--floor-rate",
            "400",
            "--floor-bytes",
            "3000",
        ],
        "",
    );
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let committed = run
        .stdout
        .lines()
        .find(|l| l.starts_with("rialto log:"))
        .unwrap_or_else(|| panic!("no rialto log line: {}", run.stdout));
    // 2,500 commands in batches of at most 1,000: three messages.
    assert!(
        committed.contains("(3 batches of up to 1000 commands"),
        "{committed}"
    );
    // The pipelined appender commits them all too.
    let piped = run
        .stdout
        .lines()
        .find(|l| l.starts_with("rialto log, 8 in flight:"))
        .unwrap_or_else(|| panic!("no pipelined rialto log line: {}", run.stdout));
    assert!(
        piped.contains("(3 batches of up to 1000 commands"),
        "{piped}"
    );
    // The floor at the leader's message rate and batch size, as asked.
    let paced = run
        .stdout
        .lines()
        .find(|l| l.starts_with("floor, paced:"))
        .unwrap_or_else(|| panic!("no paced floor line: {}", run.stdout));
    assert!(
        paced.contains("400 messages/s offered")
            && paced.contains("3000 bytes each, 20 messages; publish to ack: p50 "),
        "{paced}"
    );
    for floor in ["floor, one by one:", "floor, pipelined:"] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(floor)),
            "no `{floor}` line: {}",
            run.stdout
        );
    }
    // Its streams and buckets are gone.
    let settings = LogSettings {
        backend: LogBackend::Jetstream,
        nats: cluster.urls.clone(),
        venue: "probe".into(),
        ..LogSettings::default()
    };
    let probe = Connection::open(&settings, Duration::from_secs(30)).unwrap();
    let venue = run
        .stdout
        .split("venue ")
        .nth(1)
        .and_then(|rest| rest.split([' ', ',']).next())
        .unwrap_or_else(|| panic!("no venue named: {}", run.stdout));
    probe.runtime.block_on(async {
        for stream in [format!("RIALTO_{venue}"), format!("RIALTO_{venue}_floor")] {
            assert!(
                probe.js.get_stream(&stream).await.is_err(),
                "{stream} left behind"
            );
        }
        for bucket in [
            format!("rialto_{venue}_lease"),
            format!("rialto_{venue}_venue"),
        ] {
            assert!(
                probe.js.get_key_value(&bucket).await.is_err(),
                "{bucket} left behind"
            );
        }
        let snapshots = format!("rialto_{venue}_snapshots");
        assert!(
            probe.js.get_object_store(&snapshots).await.is_err(),
            "{snapshots} left behind"
        );
    });

    // The paced floor alone, as paired with a loadgen run against a leader.
    let alone = rialto(
        &[
            "bench",
            "log",
            "--nats",
            &nats,
            "--messages",
            "10",
            "--floor-only",
            "--floor-rate",
            "1000",
            "--floor-bytes",
            "500",
        ],
        "",
    );
    assert_eq!(alone.code, Some(0), "{}{}", alone.stdout, alone.stderr);
    let lines: Vec<&str> = alone
        .stdout
        .lines()
        .filter(|l| l.starts_with("floor"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", alone.stdout);
    assert!(
        lines[0].contains("500 bytes each, 10 messages"),
        "{}",
        lines[0]
    );
    assert!(!alone.stdout.contains("rialto log"), "{}", alone.stdout);

    let refused = rialto(&["bench", "log", "--nats", &nats, "--batch", "0"], "");
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stderr.contains("--batch must be 1 to"),
        "{}",
        refused.stderr
    );
}
