//! `rialto bench engine` end to end at tiny sizes, through the library the CLI calls.

use clap::Parser;
use rialto_bench::cli::{self, BenchCommand};
use rialto_bench::harness::{self, ClockChoice, EngineBench, Prefetch, Report, WorkloadSpec};
use rialto_bench::workload::{self, Mix, MultiParams, SingleParams, Size};

fn check(report: &Report, commands: u64) {
    assert_eq!(report.commands, commands);
    assert!(report.seconds > 0.0, "{report:?}");
    assert!(report.throughput_per_s > 0.0);
    let p = report.latency_ns;
    assert!(p.p50 > 0 && p.is_ordered(), "{p:?}");
    assert!(report.peak_rss_bytes > 0);
    assert_eq!(report.rejected, 0, "a sound workload has no rejection");
    assert!(report.trades > 0 && report.events >= report.trades);
    assert!(report.resting_after_prefill > 0 && report.resting_end > 0);

    let json = report.to_json();
    // The build the report names is this test's own ("release" may add ", profile-guided").
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let named = json["build"].as_str().expect("a build kind");
    assert!(named.starts_with(build), "{named}");
    assert!(report.to_table().contains(&format!("; {named} build\n")));
    for field in [
        "commands",
        "seconds",
        "throughput_per_s",
        "throughput_passes_per_s",
        "latency_ns",
        "peak_rss_bytes",
    ] {
        assert!(json.get(field).is_some(), "JSON has {field}: {json}");
    }
    assert_eq!(json["commands"], commands);
    for q in ["p50", "p90", "p99", "p999", "p9999", "max"] {
        assert!(json["latency_ns"][q].is_u64(), "latency_ns.{q}: {json}");
    }
    // One line, parseable back.
    let text = json.to_string();
    assert!(!text.contains('\n'));
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&back), keys(&json));
    // Integers come back exactly (floats may differ in the last digit without serde_json's
    // float_roundtrip feature).
    for field in [
        "commands",
        "latency_ns",
        "peak_rss_bytes",
        "events",
        "trades",
    ] {
        assert_eq!(back[field], json[field], "{field}");
    }
    let throughput = back["throughput_per_s"].as_f64().unwrap();
    assert!((throughput / report.throughput_per_s - 1.0).abs() < 1e-12);
}

#[test]
fn single_at_a_tiny_size() {
    let opts = EngineBench {
        workload: WorkloadSpec::Single(SingleParams {
            users: 100,
            resting_orders: 200,
            commands: 20_000,
            mix: Mix::Generator,
        }),
        seed: 3,
        clock: ClockChoice::Instant,
        prefetch: Prefetch::Off,
        passes: 1,
        progress: false,
    };
    let report = harness::run(&opts).unwrap();
    check(&report, 20_000);
    assert_eq!(report.workload, "single");
    assert_eq!(report.symbols, 1);
    assert_eq!(report.users, 100);
    assert!(report.to_table().contains("p99.99"));
}

#[test]
fn futures_at_a_tiny_size_leaves_many_users_with_positions() {
    let params = SingleParams {
        users: 100,
        resting_orders: 200,
        commands: 20_000,
        mix: Mix::Generator,
    };
    let opts = EngineBench {
        workload: WorkloadSpec::Futures(params),
        seed: 3,
        clock: ClockChoice::Instant,
        prefetch: Prefetch::Off,
        passes: 1,
        progress: false,
    };
    let report = harness::run(&opts).unwrap();
    // No rejection: margin never refuses an order of the mix.
    check(&report, 20_000);
    assert_eq!(report.workload, "futures");
    // The same commands on an engine: most users end with a position, and nobody was
    // liquidated (the mark never moves).
    let w = workload::futures(&params, 3);
    let mut engine = rialto_core::Engine::new(rialto_core::EngineConfig::default());
    let mut events: Vec<rialto_core::OwnedEvent> = Vec::new();
    let all = w
        .setup_commands()
        .chain(w.prefill.iter().cloned())
        .chain(w.commands.iter().cloned());
    for (i, cmd) in all.enumerate() {
        assert_eq!(engine.apply(i as u64 + 1, 0, &cmd, &mut events), Ok(()));
        events.retain(|e| matches!(e, rialto_core::OwnedEvent::Liquidated(_)));
    }
    assert!(events.is_empty(), "{events:?}");
    let holders: std::collections::BTreeSet<_> =
        engine.positions().into_iter().map(|p| p.0).collect();
    assert!(holders.len() > 50, "{} users hold positions", holders.len());
}

#[test]
fn multi_at_a_tiny_size() {
    let params = MultiParams {
        // More than the engine's default `max_symbols` (256): the bench sizes it.
        symbols: 300,
        accounts: 3_000,
        resting_orders: 2_000,
        commands: 20_000,
        mix: Mix::Published,
    };
    let opts = EngineBench {
        workload: WorkloadSpec::Multi {
            size: Size::Medium,
            params,
        },
        seed: 5,
        clock: ClockChoice::Tsc,
        prefetch: Prefetch::On,
        passes: 3,
        progress: false,
    };
    let report = harness::run(&opts).unwrap();
    check(&report, 20_000);
    assert_eq!(report.workload, "multi custom");
    // Three passes on fresh engines, the median reported.
    let mut passes = report.throughput_passes_per_s.clone();
    assert_eq!(passes.len(), 3);
    passes.sort_by(f64::total_cmp);
    assert!((passes[1] / report.throughput_per_s - 1.0).abs() < 1e-12);
    assert!(report.to_table().contains("the median of 3 passes"));
    // The latency pass prefetched too (and, as `run` checks, saw the same events).
    assert!(report.prefetch);
    assert!(report.to_table().contains("included; prefetch on)"));
    assert_eq!(report.symbols, 300);
    assert_eq!(report.accounts, 3_000);
}

#[test]
fn generation_is_deterministic() {
    let params = SingleParams {
        users: 50,
        resting_orders: 100,
        commands: 5_000,
        mix: Mix::Generator,
    };
    let a = workload::single(&params, 9);
    let b = workload::single(&params, 9);
    let c = workload::single(&params, 10);
    assert_eq!(a.prefill, b.prefill);
    assert_eq!(a.commands, b.commands);
    assert_eq!(a.stats, b.stats);
    assert_ne!(a.commands, c.commands);
}

#[test]
fn the_mix_is_the_stated_one() {
    let w = workload::single(
        &SingleParams {
            commands: 100_000,
            ..SingleParams::default()
        },
        1,
    );
    let total: u64 = w.stats.kinds.iter().sum();
    assert_eq!(total, 100_000);
    for (n, weight) in w.stats.kinds.iter().zip(Mix::Generator.weights()) {
        let expected = weight as f64 / 10_000.0;
        let seen = *n as f64 / total as f64;
        assert!((seen - expected).abs() < 0.005, "{:?}", w.stats.kinds);
    }
    // The book stays near its prefill size.
    assert!(
        w.stats.resting_min > 800 && w.stats.resting_max < 1_200,
        "{:?}",
        w.stats
    );
}

#[test]
fn the_published_mix_holds_the_book_too() {
    let w = workload::single(
        &SingleParams {
            commands: 200_000,
            mix: Mix::Published,
            ..SingleParams::default()
        },
        1,
    );
    let total: u64 = w.stats.kinds.iter().sum();
    for (n, weight) in w.stats.kinds.iter().zip(Mix::Published.weights()) {
        let seen = *n as f64 / total as f64;
        assert!(
            (seen - weight as f64 / 10_000.0).abs() < 0.005,
            "{:?}",
            w.stats.kinds
        );
    }
    assert!(
        w.stats.resting_min > 800 && w.stats.resting_max < 1_200,
        "{:?}",
        w.stats
    );
    assert!(w.stats.trading_commands > 0 && w.stats.rejected == 0);
}

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    bench: BenchCommand,
}

#[test]
fn the_command_line_parses_and_runs() {
    let cli = Cli::try_parse_from([
        "bench",
        "engine",
        "--workload",
        "multi",
        "--size",
        "large",
        "--symbols",
        "10",
        "--accounts",
        "600",
        "--orders",
        "300",
        "--commands",
        "2000",
        "--seed",
        "7",
        "--json",
        "--quiet",
    ])
    .unwrap();
    let BenchCommand::Engine(args) = &cli.bench else {
        panic!("engine");
    };
    let WorkloadSpec::Multi { size, params } = args.spec().unwrap() else {
        panic!("multi");
    };
    assert_eq!(size, Size::Large);
    assert_eq!((params.symbols, params.accounts), (10, 600));
    assert_eq!((params.resting_orders, params.commands), (300, 2_000));
    cli::run(cli.bench).unwrap();

    assert!(Cli::try_parse_from(["bench", "engine", "--workload", "sideways"]).is_err());
    let bad = Cli::try_parse_from(["bench", "engine", "--users", "5", "--workload", "multi"]);
    let BenchCommand::Engine(args) = bad.unwrap().bench else {
        panic!("engine");
    };
    assert!(args.spec().is_err());
}

#[test]
fn the_memory_command_measures_each_size_and_refuses_unusable_ones() {
    let parse = |args: &[&str]| Cli::try_parse_from([&["bench", "memory"], args].concat());
    let cli = parse(&["--sizes-mib", "1,2", "--reads", "20000", "--chains", "4"]).unwrap();
    let BenchCommand::Memory(args) = &cli.bench else {
        panic!("memory");
    };
    assert_eq!(args.sizes_mib, [1, 2]);
    cli::run(cli.bench).unwrap();

    for bad in ["0", "1,100000000"] {
        let cli = parse(&["--sizes-mib", bad]).unwrap();
        let err = cli::run(cli.bench).unwrap_err().to_string();
        assert!(err.contains("--sizes-mib"), "{bad}: {err}");
    }
    assert!(parse(&["--sizes-mib", "-1"]).is_err());
}

#[test]
fn the_rulebook_mix_triggers_stops_and_expires_day_orders() {
    // 110,000 commands after about 300 of setup and prefill: one day end passes.
    let opts = EngineBench {
        workload: WorkloadSpec::Single(SingleParams {
            users: 100,
            resting_orders: 200,
            commands: 110_000,
            mix: Mix::Rulebook,
        }),
        seed: 3,
        clock: ClockChoice::Instant,
        prefetch: Prefetch::Off,
        passes: 2,
        progress: false,
    };
    let report = harness::run(&opts).unwrap();
    check(&report, 110_000);
    let c = report
        .cascade
        .clone()
        .expect("the rulebook mix reports its cascades");
    assert!(c.stops_triggered > 1_000, "{c:?}");
    assert!(c.cascade_trades > 0, "{c:?}");
    assert!(c.triggering_commands > 0 && c.triggering_commands <= c.stops_triggered);
    assert!(
        c.expired > 0,
        "the day end expires the resting DAY orders: {c:?}"
    );
    assert!(c.cost_per_stop_ns.is_finite());
    let json = report.to_json();
    for field in [
        "stops_triggered",
        "cascade_trades",
        "cascade_ns_per_stop",
        "expired",
    ] {
        assert!(json.get(field).is_some(), "JSON has {field}: {json}");
    }
    assert!(report.to_table().contains("a triggered stop"));
    // The exchange-core mixes report no cascades.
    let plain = harness::run(&EngineBench {
        workload: WorkloadSpec::Single(SingleParams {
            commands: 2_000,
            mix: Mix::Generator,
            users: 100,
            resting_orders: 200,
        }),
        ..opts
    })
    .unwrap();
    assert!(plain.cascade.is_none() && plain.to_json().get("stops_triggered").is_none());
}

#[test]
fn liquidation_at_a_tiny_size_liquidates_the_chosen_share() {
    use rialto_bench::liquidation;
    for (holders, percent) in [(1_000, 1), (2_000, 5)] {
        let mut engine = liquidation::venue(holders, percent).unwrap();
        assert_eq!(engine.positions().len(), holders as usize + 1);
        let seq = engine.last_seq();
        let quiet = liquidation::timed_mark(&mut engine, seq + 1, 99_999).unwrap();
        assert_eq!((quiet.liquidated, quiet.trades), (0, 0));
        let moved =
            liquidation::timed_mark(&mut engine, seq + 2, liquidation::liquidating_mark(percent))
                .unwrap();
        let expected = u64::from(holders) / 100 * u64::from(percent);
        assert_eq!((moved.liquidated, moved.trades), (expected, expected));
        // Nobody was left below maintenance, and the fund paid nothing.
        assert_eq!(engine.venue_totals()[0].insurance, 0);
        for user in 1..=i64::from(holders) {
            let (equity, _, maintenance) = engine.user_margin(user, "USD").unwrap();
            let open = engine.positions().iter().any(|p| p.0 == user);
            assert!(!open || equity >= maintenance, "user {user}");
        }
    }
    let parsed = Cli::try_parse_from([
        "bench",
        "liquidation",
        "--holders",
        "300",
        "--percent",
        "2",
        "--json",
    ]);
    cli::run(parsed.unwrap().bench).unwrap();
}
