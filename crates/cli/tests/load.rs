//! The load generators as a user runs them, briefly: `rialto bench pipeline` in both of its
//! modes and on a small `multi` venue, `rialto bench market-data` on one, and `rialto loadgen`
//! against `rialto serve --demo`. They measure; these runs check that every command offered is
//! answered and counted, not how fast.

mod common;

use common::{rialto, serve_demo};
use serde_json::Value;

fn json_of(run: &common::Run) -> Value {
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// A small `multi` venue of 5,000 commands, the engine prefetching although it fits the caches.
const SMALL_MULTI: [&str; 12] = [
    "--workload",
    "multi",
    "--symbols",
    "20",
    "--accounts",
    "3000",
    "--orders",
    "2000",
    "--commands",
    "5000",
    "--prefetch",
    "on",
];

#[test]
fn bench_pipeline_runs_a_small_multi_venue_with_the_engine_stage_prefetching() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("multi");
    let args = [
        ["bench", "pipeline"].as_slice(),
        &SMALL_MULTI,
        &["--json", "--data", data.to_str().unwrap()],
    ]
    .concat();
    let run = json_of(&rialto(&args, ""));
    assert_eq!(run["workload"], "multi custom");
    assert_eq!(run["commands"], 5_000);
    let verify = rialto(&["journal", "verify", "--data", data.to_str().unwrap()], "");
    assert_eq!(verify.code, Some(0), "{}{}", verify.stdout, verify.stderr);
}

#[test]
fn bench_market_data_runs_a_small_multi_venue_with_the_replica_prefetching() {
    let args = [
        ["bench", "market-data"].as_slice(),
        &SMALL_MULTI,
        &["--runs", "1"],
    ]
    .concat();
    // The run fails unless the replica has replayed every command the engine applied.
    let run = rialto(&args, "");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "multi custom, 5000 commands a run; prefetching (engine thread and replica): on"
        ),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("median lag: market data caught up"));
    let none = rialto(&["bench", "market-data", "--runs", "0"], "");
    assert_eq!(none.code, Some(2), "{}", none.stderr);
}

#[test]
fn bench_pipeline_answers_every_command_closed_loop_and_on_a_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("closed");
    let data = data.to_str().unwrap();
    let closed = json_of(&rialto(
        &[
            "bench",
            "pipeline",
            "--commands",
            "20000",
            "--json",
            "--data",
            data,
        ],
        "",
    ));
    assert_eq!(closed["commands"], 20_000);
    assert!(closed["p50_ns"].as_u64().unwrap() <= closed["max_ns"].as_u64().unwrap());

    let data = dir.path().join("fixed");
    let data = data.to_str().unwrap();
    let args = [
        "bench",
        "pipeline",
        "--commands",
        "20000",
        "--rates",
        "4000,8000",
        "--seconds",
        "0.5",
        "--json",
        "--data",
        data,
    ];
    let fixed = json_of(&rialto(&args, ""));
    let rows = fixed["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{fixed}");
    for (row, rate) in rows.iter().zip([4_000u64, 8_000]) {
        assert_eq!(row["offered_per_sec"], rate);
        assert_eq!(row["count"].as_u64(), Some(rate / 2), "{row}");
        assert!(row["p50_ns"].as_u64().unwrap() <= row["p99_ns"].as_u64().unwrap());
        // Each rate ran on a journal of its own, which holds what was offered.
        let journal = format!("{data}/rate-{rate}");
        let verify = rialto(&["journal", "verify", "--data", &journal], "");
        assert_eq!(verify.code, Some(0), "{}{}", verify.stdout, verify.stderr);
    }
}

#[test]
fn loadgen_offers_a_rate_to_a_running_server_beside_the_floor() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = serve_demo(&data);
    let args = [
        "loadgen",
        "--addr",
        server.address_after("orders on "),
        "--admin-addr",
        server.address_after("admin on "),
        "--data",
        data.to_str().unwrap(),
        "--connections",
        "2",
        "--rates",
        "2000",
        "--seconds",
        "0.5",
        "--warmup-seconds",
        "0.2",
        "--floor-round-trips",
        "2000",
        "--io",
        "block",
        "--json",
    ];
    let report = json_of(&rialto(&args, ""));
    let rows = report["rows"].as_array().unwrap();
    let labels: Vec<_> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        ["floor (block)", "floor 2000/s", "rialto 2000/s"],
        "the ping-pong floor, the rate's floor, then the rate: {report}"
    );
    assert_eq!(rows[0]["count"], 2_000, "{report}");
    for row in &rows[1..] {
        assert_eq!(row["offered_per_sec"], 2_000);
        assert_eq!(
            row["count"], 1_000,
            "every measured command (or ping) answered: {report}"
        );
    }
    assert_eq!(report["connections"], 2);

    // Spinning, without the rate's floor.
    let mut args = args.to_vec();
    let io = args.iter().position(|&a| a == "block").unwrap();
    args[io] = "spin";
    args.push("--no-rate-floor");
    let report = json_of(&rialto(&args, ""));
    let labels: Vec<_> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(labels, ["floor (spin)", "rialto 2000/s"], "{report}");
}

#[test]
fn the_rate_floor_answers_every_ping_in_either_socket_mode() {
    for io in ["spin", "block"] {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            loadgen: rialto_cli::loadgen::LoadgenArgs,
        }
        let cli = <Cli as clap::Parser>::parse_from([
            "loadgen",
            "--connections",
            "3",
            "--seconds",
            "0.3",
            "--warmup-seconds",
            "0.1",
            "--io",
            io,
        ]);
        let row = rialto_cli::loadgen::measure_scheduled_floor(&cli.loadgen, 5_000).unwrap();
        assert_eq!(row.label, "floor 5000/s");
        assert_eq!(row.count, 1_500, "{io}: every measured ping echoed");
        assert!(row.p50 > 0 && row.p50 <= row.max, "{io}");
    }
}

#[test]
fn loadgen_runs_on_a_venue_of_its_own_unless_given_a_server() {
    let args = [
        "loadgen",
        "--connections",
        "1",
        "--rates",
        "1000",
        "--seconds",
        "0.2",
        "--warmup-seconds",
        "0.1",
        "--floor-round-trips",
        "0",
        "--no-rate-floor",
        "--io",
        "block",
        "--json",
    ];
    let run = rialto(&args, "");
    let report = json_of(&run);
    assert_eq!(report["rows"][0]["label"], "rialto 1000/s", "{report}");
    assert!(
        run.stderr.contains("a venue of the load generator's own"),
        "{}",
        run.stderr
    );
    // Its data directory is gone afterwards.
    let data = run
        .stderr
        .split("data in ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the venue's data directory is named");
    assert!(
        !std::path::Path::new(data).exists(),
        "{data} was left behind"
    );
}
