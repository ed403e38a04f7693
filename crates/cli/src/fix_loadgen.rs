//! `rialto fix loadgen`: NewOrderSingle → ExecutionReport(New) round trips over N FIX 4.4
//! sessions at a fixed rate, against Rialto or any acceptor that takes the same sessions
//! (TRADER1.. → RIALTO), such as the QuickFIX/J baseline in interop/quickfixj.
//!
//! Latency runs from each order's scheduled send time to its ExecutionReport, so a stall is
//! charged to every order behind it (no coordinated omission). Every acknowledged order is
//! cancelled at once, so the book stays small; cancels are load, not measured.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use rialto_fix::{MessageWriter, next_frame, tags};

use crate::loadgen::{IoMode, Row, histogram, measure_floor, table, table_line};

#[derive(Args, Debug)]
pub struct FixLoadgenArgs {
    /// The FIX acceptor
    #[arg(long, default_value = "127.0.0.1:9878")]
    pub addr: SocketAddr,
    /// Sessions TRADER1..TRADERn, each logged on as user n
    #[arg(long, default_value_t = 5)]
    pub sessions: usize,
    /// Offered rates, orders per second over all sessions, one table row each
    #[arg(long, value_delimiter = ',', default_value = "10000")]
    pub rates: Vec<u64>,
    /// Measured seconds per rate
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Unmeasured seconds before each rate's measurement
    #[arg(long, default_value_t = 1.0)]
    pub warmup_seconds: f64,
    /// A Rialto data directory, to derive the users' passwords from its venue key (an
    /// acceptor that checks no password needs none)
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The name of this run in the table
    #[arg(long, default_value = "fix")]
    pub label: String,
    /// Round trips of the floor measurement (0: skip it)
    #[arg(long, default_value_t = 50_000)]
    pub floor_round_trips: u64,
    /// Print one JSON object instead of the table
    #[arg(long)]
    pub json: bool,
}

fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

struct FixConn {
    stream: TcpStream,
    comp_id: String,
    seq: u64,
    input: Vec<u8>,
    output: Vec<u8>,
    /// Orders sent and not acknowledged yet.
    outstanding: usize,
}

impl FixConn {
    fn message(&mut self, msg_type: &[u8], body: impl FnOnce(&mut MessageWriter<'_>)) {
        let mut w = MessageWriter::begin(&mut self.output, b"FIX.4.4", msg_type);
        w.str(tags::SENDER_COMP_ID, self.comp_id.as_bytes())
            .str(tags::TARGET_COMP_ID, b"RIALTO")
            .uint(tags::MSG_SEQ_NUM, self.seq)
            .timestamp(tags::SENDING_TIME, wall_ns());
        body(&mut w);
        w.finish();
        self.seq += 1;
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut at = 0;
        while at < self.output.len() {
            match self.stream.write(&self.output[at..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.output.clear();
        Ok(())
    }

    /// Reads what is there (non-blocking); false at EOF.
    fn fill(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

fn logon(addr: SocketAddr, n: usize, password: &str) -> anyhow::Result<FixConn> {
    let stream = TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_nodelay(true)?;
    let mut c = FixConn {
        stream,
        comp_id: format!("TRADER{n}"),
        seq: 1,
        input: Vec::new(),
        output: Vec::new(),
        outstanding: 0,
    };
    let user = n.to_string();
    c.message(b"A", |w| {
        w.char(tags::ENCRYPT_METHOD, b'0')
            .uint(tags::HEART_BT_INT, 30)
            .bool(tags::RESET_SEQ_NUM_FLAG, true)
            .str(tags::USERNAME, user.as_bytes())
            .str(tags::PASSWORD, password.as_bytes());
    });
    c.flush()?;
    c.stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    loop {
        if let Ok(Some((frame, len))) = next_frame(&c.input, 1 << 20) {
            let logged_on = frame.msg_type == b"A";
            let text = frame.display();
            c.input.drain(..len);
            if logged_on {
                break;
            }
            bail!("{} was not logged on: {text}", c.comp_id);
        }
        let mut chunk = [0u8; 4096];
        let got = c
            .stream
            .read(&mut chunk)
            .context("waiting for the Logon reply")?;
        if got == 0 {
            bail!("{}: the acceptor closed the connection at logon", c.comp_id);
        }
        c.input.extend_from_slice(&chunk[..got]);
    }
    c.stream.set_nonblocking(true)?;
    Ok(c)
}

/// Offers `rate` orders a second, round robin over the sessions.
fn run_rate(
    conns: &mut [FixConn],
    rate: u64,
    args: &FixLoadgenArgs,
    first: u64,
) -> anyhow::Result<Row> {
    let interval_ns = 1e9 / rate as f64;
    let warmup = (args.warmup_seconds * rate as f64) as u64;
    let total = warmup + (args.seconds * rate as f64) as u64;
    let mut h = histogram();
    let mut rejected = 0u64;
    let start = Instant::now();
    let deadline_ns = ((args.warmup_seconds + args.seconds + 30.0) * 1e9) as u64;
    let mut k = 0u64;
    let mut measured_start_ns = 0;
    let mut cl_ord_id = String::new();
    loop {
        let now_ns = start.elapsed().as_nanos() as u64;
        while k < total && (k as f64 * interval_ns) as u64 <= now_ns {
            if k == warmup {
                measured_start_ns = (k as f64 * interval_ns) as u64;
            }
            let c = &mut conns[(k % conns.len() as u64) as usize];
            cl_ord_id.clear();
            use std::fmt::Write as _;
            let _ = write!(cl_ord_id, "L{}", first + k);
            // Far below any market: rests, never trades.
            let price = format!("1.{:02}", k % 100);
            let now = wall_ns();
            c.message(b"D", |w| {
                w.str(tags::CL_ORD_ID, cl_ord_id.as_bytes())
                    .char(tags::HANDL_INST, b'1')
                    .str(tags::SYMBOL, b"BTC-USD")
                    .char(tags::SIDE, b'1')
                    .timestamp(tags::TRANSACT_TIME, now)
                    .str(tags::ORDER_QTY, b"0.001")
                    .char(tags::ORD_TYPE, b'2')
                    .str(tags::PRICE, price.as_bytes())
                    .char(tags::TIME_IN_FORCE, b'1');
            });
            c.outstanding += 1;
            c.flush()?;
            k += 1;
        }
        let now_ns = start.elapsed().as_nanos() as u64;
        for c in conns.iter_mut() {
            if !c.fill()? {
                bail!("{}: the acceptor closed the connection", c.comp_id);
            }
            let mut at = 0;
            let mut cancels: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            while let Ok(Some((frame, len))) = next_frame(&c.input[at..], 1 << 20) {
                at += len;
                if frame.msg_type != b"8" {
                    continue;
                }
                let exec_type = frame.get(tags::EXEC_TYPE);
                let id = frame.get(tags::CL_ORD_ID).unwrap_or(b"");
                if id.first() != Some(&b'L') {
                    continue; // a cancel's report
                }
                let Some(index) = std::str::from_utf8(&id[1..])
                    .ok()
                    .and_then(|t| t.parse::<u64>().ok())
                    .and_then(|i| i.checked_sub(first))
                else {
                    continue;
                };
                c.outstanding = c.outstanding.saturating_sub(1);
                match exec_type {
                    Some(b"0") => {
                        if index >= warmup {
                            let scheduled = (index as f64 * interval_ns) as u64;
                            h.record(now_ns.saturating_sub(scheduled).max(1)).ok();
                        }
                        let order_id = frame.get(tags::ORDER_ID).unwrap_or(b"").to_vec();
                        cancels.push((id.to_vec(), order_id));
                    }
                    _ => rejected += 1,
                }
            }
            c.input.drain(..at);
            for (id, order_id) in cancels {
                let mut cancel_id = id.clone();
                cancel_id[0] = b'C';
                c.message(b"F", |w| {
                    w.str(tags::ORIG_CL_ORD_ID, &id)
                        .str(tags::ORDER_ID, &order_id)
                        .str(tags::CL_ORD_ID, &cancel_id)
                        .str(tags::SYMBOL, b"BTC-USD")
                        .char(tags::SIDE, b'1')
                        .timestamp(tags::TRANSACT_TIME, wall_ns());
                });
            }
            c.flush()?;
        }
        if k == total && conns.iter().all(|c| c.outstanding == 0) {
            break;
        }
        if now_ns > deadline_ns {
            bail!(
                "the acceptor stopped acknowledging ({} orders outstanding)",
                conns.iter().map(|c| c.outstanding).sum::<usize>()
            );
        }
    }
    let measured_ns = start.elapsed().as_nanos() as u64 - measured_start_ns;
    let achieved = h.len() as f64 / (measured_ns as f64 / 1e9);
    let mut row = Row::from_histogram(format!("{} {rate}/s", args.label), rate, achieved, &h);
    row.rejected = rejected;
    Ok(row)
}

pub fn run(args: &FixLoadgenArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.sessions >= 1, "--sessions must be at least 1");
    anyhow::ensure!(args.rates.iter().all(|&r| r > 0), "rates must be positive");
    let mut rows = Vec::new();
    if args.floor_round_trips > 0 {
        rows.push(measure_floor(IoMode::Spin, args.floor_round_trips, None)?);
        if !args.json {
            eprintln!("{}", table(&rows).trim_end());
        }
    }
    let credentials = match &args.data {
        Some(dir) => Some(rialto_server::auth::Credentials::load_or_create(dir)?),
        None => None,
    };
    let mut conns = Vec::new();
    for n in 1..=args.sessions {
        let password = credentials
            .as_ref()
            .map_or_else(|| "none".to_string(), |c| c.user_secret(n as i64));
        conns.push(logon(args.addr, n, &password)?);
    }
    // ClOrdIDs unique across runs against the same venue (its sessions outlive connections).
    let mut first = (wall_ns() as u64 / 1_000) * 1_000;
    for &rate in &args.rates {
        let row = run_rate(&mut conns, rate, args, first)?;
        first += 1 << 40;
        if !args.json {
            eprintln!("{}", table_line(&row));
        }
        rows.push(row);
    }
    for c in &mut conns {
        c.message(b"5", |_| {});
        let _ = c.flush();
    }
    if args.json {
        let json = serde_json::json!({
            "sessions": args.sessions, "seconds": args.seconds,
            "warmup_seconds": args.warmup_seconds,
            "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
        });
        println!("{json}");
    } else {
        println!("{}", table(&rows));
        println!(
            "latency: scheduled NewOrderSingle send time -> ExecutionReport (New); {} FIX 4.4 sessions, busy-polling",
            args.sessions
        );
    }
    Ok(())
}
