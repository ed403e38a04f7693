//! `rialto`: serve a venue, replay scenario files through the engine, run benchmarks.

use std::fs::File;
use std::io::{self, BufReader, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use rialto_bench::cli::BenchCommand;
use rialto_cli::bench_recovery::{self, RecoveryArgs};
use rialto_cli::fix::FixCmd;
use rialto_cli::journal;
use rialto_cli::loadgen::LoadgenArgs;
use rialto_cli::replay::{self, ReplayError, ReplayOptions};
use rialto_cli::serve::ServeArgs;
use rialto_server::config::LogBackend;

/// Rialto: a deterministic exchange core (order books, accounts, matching).
#[derive(Parser, Debug)]
#[command(
    name = "rialto",
    version,
    after_help = "Examples:\n  rialto serve --demo\n  rialto replay examples/basic_cross.jsonl --final-state\n  \
cat day.jsonl | rialto replay - --strict\n  rialto bench --help"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the venue: recover from the data directory, then serve the binary gateway
    #[command(
        after_help = "Every setting has a default, so no file is needed. Settings come from \
the defaults, then --config, then --set, then the named flags. docs/operations.md describes them \
all. SIGINT or SIGTERM stops the server cleanly: the batch in flight is finished, the journal \
synced and the sessions closed."
    )]
    Serve(ServeArgs),
    /// Offer orders to a running server at fixed rates; print latency percentiles per rate
    #[command(
        after_help = "Latency is measured from each command's scheduled send time to its \
acknowledgement, so a stall is charged to every command behind it (no coordinated omission). \
The first row is the floor: a bare 64-byte ping-pong over loopback in the same socket mode."
    )]
    Loadgen(LoadgenArgs),
    /// Print a user's login secret, or the admin secret, derived from the venue key
    Secret(SecretArgs),
    /// Sign and place one order over a running venue's REST API; print what became of it
    #[command(
        after_help = "Prices and quantities are decimals (docs/api.md, \"Units\"). Example, on `rialto serve --demo` (the secret is read from ./data):\n  rialto order --user 1 --side sell --price 5000.00 --qty 0.003"
    )]
    Order(rialto_cli::order::OrderArgs),
    /// Apply a scenario (JSON Lines commands) to a fresh engine and write its events as JSON Lines
    #[command(
        after_help = "The format is described in docs/scenario-format.md. A malformed line is \
reported on stderr as `line N: <what>` and skipped, leaving the state unchanged; the exit status \
is 0 unless --strict stopped the replay or the input could not be read."
    )]
    Replay(ReplayArgs),
    /// Run benchmarks
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Inspect the journal and snapshots of a data directory (docs/journal-format.md)
    #[command(subcommand)]
    Journal(JournalCmd),
    /// Run the deterministic simulator: the real pipeline stages on one thread with a simulated
    /// clock, log and clients, faults drawn from the seed (docs/simulation.md)
    #[command(
        after_help = "A failing seed prints the tick and what broke; the same seed and ticks \
replay it bit for bit (same trace hash). Exit status 1 if any seed failed."
    )]
    Sim(rialto_cli::sim::SimArgs),
    /// FIX tools: a session test acceptor, a session's message log, a load generator
    /// (docs/fix.md)
    #[command(subcommand)]
    Fix(FixCmd),
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    #[command(flatten)]
    Core(BenchCommand),
    /// A workload (`single`, or a `multi` venue) through the in-process pipeline (journal on
    /// disk, engine thread, replies), without sockets: throughput and latency per durability
    /// mode
    Pipeline(rialto_cli::pipeline_bench::PipelineBenchArgs),
    /// Time recovery: a snapshot with --orders resting orders plus --commands journaled ones
    Recovery(RecoveryArgs),
    /// The FIX codec: parse the 214-byte NewOrderSingle, write an ExecutionReport (median
    /// ns per operation, the format of QuickFIX/J's CodecBench in interop/quickfixj)
    Fix(rialto_cli::fix_bench::FixBenchArgs),
    /// What the market data feed costs the engine, on `single` or a `multi` venue (alternating
    /// runs with and without it, medians), and how far market data lags behind
    MarketData(rialto_cli::md_bench::MdBenchArgs),
    /// WebSocket fan-out: many subscribers to one book stream at a fixed rate of L2 updates,
    /// delivery latency percentiles
    Ws(rialto_cli::ws_bench::WsBenchArgs),
    /// FIX market data (X) against the WebSocket feed (diffs): latency from each order's
    /// sequencer time, p50/p99, in one server
    FixMd(rialto_cli::fix_md_bench::FixMdBenchArgs),
    /// The history database: fill it with --fills fills, then time reads of a user's last
    /// 100 fills (p50/p99/max, in process)
    History(rialto_cli::history_bench::HistoryBenchArgs),
    /// The replicated command log (docs/replication.md): commands committed per second in
    /// batches and one batch's latency, beside a bare NATS client's publish-ack floor
    Log(rialto_cli::log_bench::LogBenchArgs),
}

#[derive(Subcommand, Debug)]
enum JournalCmd {
    /// Write the journal as scenario JSON Lines (docs/scenario-format.md), one command a line
    /// from seq 1, ready for `rialto replay`
    #[command(
        after_help = "Fails if the journal does not start at seq 1, e.g. when its first segments \
were archived after a snapshot and --include-archive was not given. A torn tail is left out and \
reported on stderr. A history with a hole fails too (exit 1, the hole on stderr): seqs lost and \
accepted (journal/accepted-losses, listed by `rialto journal verify`), or a journal that ends \
before the newest snapshot; --allow-gaps writes it up to the hole instead, with a warning."
    )]
    Dump {
        /// Data directory (holds journal/ and snapshots/)
        #[arg(long, default_value = "data")]
        data: PathBuf,
        /// Read journal/archive/ first, for the full history
        #[arg(long)]
        include_archive: bool,
        /// Write a history with a hole (seqs lost, accepted or not) up to the hole, with a
        /// warning, instead of failing: the output then does not replay to the venue's state
        #[arg(long)]
        allow_gaps: bool,
        #[command(flatten)]
        venue: journal::VenueArgs,
    },
    /// Check every segment and snapshot, recover without changing anything, print a summary;
    /// exit status 1 on corruption
    Verify {
        /// Data directory (holds journal/ and snapshots/)
        #[arg(long, default_value = "data")]
        data: PathBuf,
        #[command(flatten)]
        venue: journal::VenueArgs,
    },
}

#[derive(Args, Debug)]
struct ReplayArgs {
    /// Scenario file to read, or `-` for stdin
    file: PathBuf,
    /// End the output with a `final` line: balances, fees, resting orders, state hash
    #[arg(long)]
    final_state: bool,
    /// Stop at the first malformed line and exit with status 1
    #[arg(long)]
    strict: bool,
    /// The venue's `rialto serve` configuration file: the scenario is applied with its engine
    /// limits (`[engine]`), as the venue applied its log
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Any setting of the venue, as `rialto serve --set` takes it (repeatable), e.g.
    /// `--set engine.max_symbols=1024`
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

#[derive(Args, Debug)]
struct SecretArgs {
    /// Data directory holding venue.key
    #[arg(long, default_value = "data")]
    data: PathBuf,
    /// The user whose secret to print
    #[arg(long, conflicts_with = "admin", required_unless_present = "admin")]
    user: Option<i64>,
    /// Print the admin secret (unless the config sets its own)
    #[arg(long)]
    admin: bool,
}

/// Logs to stderr, filtered by RIALTO_LOG, else at `default_level`.
fn init_logging(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RIALTO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .init();
}

fn run_secret(args: &SecretArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.data.join("venue.key").exists(),
        "{} has no venue.key: start `rialto serve --data {}` once first",
        args.data.display(),
        args.data.display()
    );
    let credentials = rialto_server::auth::Credentials::load_or_create(&args.data)?;
    match args.user {
        Some(user) => println!("{}", credentials.user_secret(user)),
        None => println!("{}", credentials.admin_secret()),
    }
    Ok(ExitCode::SUCCESS)
}

#[global_allocator]
static ALLOCATOR: rialto_cli::huge_pages::HugePageAlloc = rialto_cli::huge_pages::HugePageAlloc;

fn main() -> ExitCode {
    if std::env::var_os("RIALTO_HUGE_PAGES").is_some_and(|v| v == "0") {
        rialto_cli::huge_pages::set_enabled(false);
    }
    rialto_bench::mem::set_heap_trim(rialto_cli::huge_pages::release_free_memory);
    // `serve --help` lists every setting with its default, read off the defaults themselves.
    let command = Cli::command().mut_subcommand("serve", |serve| {
        serve.after_long_help(rialto_cli::serve::settings_help())
    });
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // The journal tools print their findings; only warnings belong beside them.
    init_logging(match cli.command {
        Cmd::Journal(_) | Cmd::Fix(FixCmd::Log(_)) => "warn",
        // The faults the simulator injects make the pipeline log errors by design.
        Cmd::Sim(_) => "off",
        _ => "info",
    });
    let outcome = match cli.command {
        Cmd::Serve(args) => rialto_cli::serve::run(&args).map(|()| ExitCode::SUCCESS),
        Cmd::Secret(args) => run_secret(&args),
        Cmd::Order(args) => rialto_cli::order::run(&args).map(|()| ExitCode::SUCCESS),
        Cmd::Loadgen(args) => rialto_cli::loadgen::run(&args).map(|()| ExitCode::SUCCESS),
        Cmd::Replay(args) => run_replay(&args),
        Cmd::Bench(BenchCmd::Core(cmd)) => rialto_bench::cli::run(cmd).map(|()| ExitCode::SUCCESS),
        Cmd::Bench(BenchCmd::Pipeline(args)) => {
            rialto_cli::pipeline_bench::run(&args).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::Recovery(args)) => {
            bench_recovery::run(&args).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::MarketData(args)) => {
            rialto_cli::md_bench::run(&args).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::Ws(args)) => {
            rialto_cli::ws_bench::run(&args).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::History(args)) => {
            rialto_cli::history_bench::run(&args).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::FixMd(args)) => {
            rialto_cli::fix_md_bench::run(&args).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::Log(args)) => {
            rialto_cli::log_bench::run(&args).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Bench(BenchCmd::Fix(args)) => {
            rialto_cli::fix_bench::run(&args).map(|()| ExitCode::SUCCESS)
        }
        Cmd::Journal(cmd) => run_journal(cmd),
        Cmd::Fix(cmd) => rialto_cli::fix::run(&cmd).map(|()| ExitCode::SUCCESS),
        Cmd::Sim(args) => match rialto_cli::sim::run(&args, &mut io::stdout().lock()) {
            Ok(true) => Ok(ExitCode::SUCCESS),
            Ok(false) => Ok(ExitCode::FAILURE),
            Err(e) => Err(e.into()),
        },
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rialto: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_journal(cmd: JournalCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        JournalCmd::Dump {
            data,
            include_archive,
            allow_gaps,
            venue,
        } => {
            let settings = venue.settings()?;
            let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
            let diag = &mut io::stderr();
            if settings.log.backend == LogBackend::Jetstream {
                return match journal::dump_stream(&settings, &mut out) {
                    Ok(_) => Ok(ExitCode::SUCCESS),
                    Err(e) if is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
                    Err(e) => Err(e.context("dumping the log on NATS JetStream")),
                };
            }
            let engine = settings.engine_config();
            match journal::dump(&data, engine, include_archive, allow_gaps, &mut out, diag) {
                Ok(_) => Ok(ExitCode::SUCCESS),
                Err(e) if is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
                Err(e) => Err(e.context(format!("dumping the journal of {}", data.display()))),
            }
        }
        JournalCmd::Verify { data, venue } => {
            let settings = venue.settings()?;
            let ok = match settings.log.backend {
                LogBackend::Jetstream => {
                    journal::verify_stream(&settings, &mut io::stdout().lock())?
                }
                LogBackend::Local => {
                    journal::verify(&data, settings.engine_config(), &mut io::stdout().lock())?
                }
            };
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

fn run_replay(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let settings = rialto_cli::serve::file_settings(args.config.as_deref(), &args.overrides)?;
    settings.validate()?;
    let options = ReplayOptions {
        final_state: args.final_state,
        strict: args.strict,
        engine: Some(settings.engine_config()),
    };
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut diag = io::stderr().lock();
    let result = if args.file.as_os_str() == "-" {
        replay::replay(&mut io::stdin().lock(), &mut out, &mut diag, options)
    } else {
        let file = File::open(&args.file)
            .with_context(|| format!("cannot open {}", args.file.display()))?;
        replay::replay(&mut BufReader::new(file), &mut out, &mut diag, options)
    };
    match result {
        Ok(_) => Ok(ExitCode::SUCCESS),
        // The line itself is already reported on stderr.
        Err(ReplayError::Stopped(_)) => {
            eprintln!("rialto: --strict: stopped at the first malformed line");
            Ok(ExitCode::FAILURE)
        }
        // A reader that closed the pipe (`rialto replay f | head`) is not an error.
        Err(ReplayError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(ReplayError::Io(e)) => {
            Err(e).with_context(|| format!("replaying {}", args.file.display()))
        }
    }
}
