//! `rialto fix`: the FIX session test acceptor, the message log query, and the group's
//! subcommands (the load generator lives in [`crate::fix_loadgen`]).

use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::{Args, Subcommand};
use rialto_fix::session::log::{self, Direction, LogFilter, LogRecord};
use rialto_fix::time::{parse_utc_timestamp, write_utc_timestamp};
use rialto_server::fix::test_acceptor::TestAcceptor;

#[derive(Subcommand, Debug)]
pub enum FixCmd {
    /// Run a FIX session test acceptor for the QuickFIX / QuickFIX/J session acceptance
    /// scripts: CompID ISLD, counterparty TW (or TW42, TW44, TW50SP2), FIX.4.2, FIX.4.4 and
    /// FIXT.1.1 on one port
    #[command(
        after_help = "Sequence numbers go back to 1 on every disconnect and nothing is kept on \
disk. The test application echoes NewOrderSingle (D) and SecurityDefinition (d), ignores a \
NewOrderSingle with PossResend=Y whose ClOrdID it has seen, and answers any other application \
message with a BusinessMessageReject (reason 3). Prints `test acceptor listening on ADDR` when \
ready; SIGINT or SIGTERM stops it (logged-on sessions are logged out first)."
    )]
    TestAcceptor(TestAcceptorArgs),
    /// Print the messages of one FIX session's message log, in and out, oldest first
    #[command(
        after_help = "The logs of `rialto serve` are <data>/fix/<session>.log, the session \
named <BeginString>-<our CompID>-<their CompID>, e.g. FIX.4.4-RIALTO-TRADER1. Each line is \
`<UTC time> <in|out|garbled> <message with | for SOH>`; --json prints JSON Lines \
{\"time_ns\":..,\"direction\":..,\"message\":..} instead."
    )]
    Log(LogArgs),
    /// NewOrderSingle -> ExecutionReport(New) round trips over N FIX sessions at fixed rates
    Loadgen(crate::fix_loadgen::FixLoadgenArgs),
}

#[derive(Args, Debug)]
pub struct TestAcceptorArgs {
    /// Port to listen on (0: any free port)
    #[arg(long)]
    pub port: u16,
    /// Address or host name to listen on
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
}

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Data directory (its fix/ holds the message logs)
    #[arg(long, value_name = "DIR", default_value = "data")]
    pub data: PathBuf,
    /// Session name, e.g. FIX.4.4-RIALTO-TRADER1
    #[arg(long)]
    pub session: String,
    /// Only messages whose ClOrdID (11) or OrigClOrdID (41) is this
    #[arg(long, value_name = "ID")]
    pub clordid: Option<String>,
    /// Only messages at or after this time: YYYYMMDD-HH:MM:SS[.sss] (UTC) or Unix nanoseconds
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub from: Option<i64>,
    /// Only messages at or before this time: YYYYMMDD-HH:MM:SS[.sss] (UTC) or Unix nanoseconds
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub to: Option<i64>,
    /// JSON Lines: {"time_ns":..,"direction":"in","message":"8=FIX.4.4|9=..."}
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: &FixCmd) -> anyhow::Result<()> {
    match cmd {
        FixCmd::TestAcceptor(args) => run_test_acceptor(args),
        FixCmd::Loadgen(args) => crate::fix_loadgen::run(args),
        FixCmd::Log(args) => {
            let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
            match print_log(args, &mut out).and_then(|_| Ok(out.flush()?)) {
                Err(e) if is_broken_pipe(&e) => Ok(()),
                result => result,
            }
        }
    }
}

fn run_test_acceptor(args: &TestAcceptorArgs) -> anyhow::Result<()> {
    let addr: SocketAddr = (args.host.as_str(), args.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve --host {}", args.host))?
        .next()
        .with_context(|| format!("--host {} has no address", args.host))?;
    let acceptor = TestAcceptor::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())
            .context("cannot install a signal handler")?;
    }
    println!("test acceptor listening on {}", acceptor.local_addr()?);
    acceptor.run(stop).context("test acceptor")?;
    tracing::info!("test acceptor stopped");
    Ok(())
}

/// A UTCTimestamp or Unix nanoseconds.
pub fn parse_time(text: &str) -> Result<i64, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map_err(|_| format!("{text}: too large for Unix nanoseconds"));
    }
    parse_utc_timestamp(text.as_bytes()).ok_or_else(|| {
        format!("{text}: expected YYYYMMDD-HH:MM:SS[.sss] (UTC) or Unix nanoseconds")
    })
}

/// Writes the matching records of the session's log to `out`; returns how many.
pub fn print_log(args: &LogArgs, out: &mut impl Write) -> anyhow::Result<u64> {
    if let (Some(from), Some(to)) = (args.from, args.to) {
        anyhow::ensure!(from <= to, "--from is after --to");
    }
    let dir = args.data.join("fix");
    let path = log::log_path(&dir, &args.session)
        .with_context(|| format!("--session {}", args.session))?;
    if !path.exists() {
        anyhow::bail!(
            "no message log for session {} in {}: {}",
            args.session,
            dir.display(),
            describe_sessions(&dir)
        );
    }
    let filter = LogFilter {
        clordid: args.clordid.clone(),
        from_ns: args.from,
        to_ns: args.to,
    };
    let records = log::query(&dir, &args.session, filter)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut count = 0;
    let mut line = Vec::new();
    for record in records {
        let record = record.with_context(|| format!("reading {}", path.display()))?;
        line.clear();
        if args.json {
            json_line(&record, &mut line);
        } else {
            text_line(&record, &mut line);
        }
        out.write_all(&line)?;
        count += 1;
    }
    Ok(count)
}

/// The sessions that have a log in `dir`, for an error message.
fn describe_sessions(dir: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return "the directory has no message logs (does not exist or cannot be read)".into();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".log").map(str::to_string)
        })
        .collect();
    names.sort();
    if names.is_empty() {
        "the directory has no message logs".into()
    } else {
        format!("the sessions there are {}", names.join(", "))
    }
}

fn direction_name(direction: Direction) -> &'static str {
    match direction {
        Direction::In => "in",
        Direction::Out => "out",
        Direction::InGarbled => "garbled",
    }
}

fn text_line(record: &LogRecord, line: &mut Vec<u8>) {
    write_utc_timestamp(line, record.time_ns);
    line.push(b' ');
    line.extend_from_slice(direction_name(record.direction).as_bytes());
    line.push(b' ');
    line.extend_from_slice(rialto_fix::parse::display(&record.bytes).as_bytes());
    line.push(b'\n');
}

/// Written by hand so that the keys keep this order (serde_json's map sorts them).
fn json_line(record: &LogRecord, line: &mut Vec<u8>) {
    let message = serde_json::Value::String(rialto_fix::parse::display(&record.bytes));
    let text = format!(
        "{{\"time_ns\":{},\"direction\":\"{}\",\"message\":{}}}\n",
        record.time_ns,
        direction_name(record.direction),
        message
    );
    line.extend_from_slice(text.as_bytes());
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_both_ways() {
        assert_eq!(
            parse_time("1795322669123000000"),
            Ok(1_795_322_669_123_000_000)
        );
        assert_eq!(
            parse_time("20261122-04:44:29.123"),
            Ok(1_795_322_669_123_000_000)
        );
        assert_eq!(
            parse_time("20261122-04:44:29"),
            Ok(1_795_322_669_000_000_000)
        );
        assert!(parse_time("2026-11-22").is_err());
        assert!(parse_time("").is_err());
        assert!(parse_time("99999999999999999999").is_err());
    }
}
