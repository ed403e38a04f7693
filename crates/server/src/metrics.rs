//! Counters and latency histograms for /metrics (Prometheus text format).
//!
//! Everything is a relaxed atomic that the hot threads bump without locks. Latencies on the
//! engine's path are sampled (one command in [`SAMPLE_EVERY`]) so that reading the clock does
//! not cost the engine more than the work it measures.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rialto_core::{Command, Reason};

/// One command in this many has its engine time and round trip measured.
pub const SAMPLE_EVERY: u64 = 64;

/// Bucket upper bounds are 2^k ns for k in this range (64 ns to about 1 s), then +Inf.
const FIRST_POW: u32 = 6;
const LAST_POW: u32 = 30;
const BUCKETS: usize = (LAST_POW - FIRST_POW + 2) as usize;

/// A latency histogram with power-of-two buckets.
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
    count: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn record(&self, ns: u64) {
        let pow = 64 - ns.max(1).saturating_sub(1).leading_zeros(); // ceil(log2)
        let i = pow.clamp(FIRST_POW, LAST_POW + 1) - FIRST_POW;
        self.buckets[i as usize].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let pow = FIRST_POW + i as u32;
            if pow <= LAST_POW {
                let le = (1u64 << pow) as f64 / 1e9;
                let _ = writeln!(out, "{name}_bucket{{le=\"{le:e}\"}} {cumulative}");
            } else {
                let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
            }
        }
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum:e}");
        let _ = writeln!(out, "{name}_count {}", self.count.load(Ordering::Relaxed));
    }
}

/// The command kinds counted apart.
const COMMAND_KINDS: [&str; 21] = [
    "add_symbol",
    "add_user",
    "adjust_balance",
    "place",
    "cancel",
    "move",
    "reduce",
    "mass_cancel",
    "book",
    "user_report",
    "venue_report",
    "tick",
    "amend",
    "set_order_id_window",
    "set_phase",
    "set_band",
    "set_ref_price",
    "suspend_user",
    "resume_user",
    "set_mark_price",
    "fund_insurance",
];

fn command_kind(cmd: &Command) -> usize {
    match cmd {
        Command::AddSymbol(_) => 0,
        Command::AddUser { .. } => 1,
        Command::AdjustBalance { .. } => 2,
        Command::Place(_) => 3,
        Command::Cancel { .. } => 4,
        Command::Move { .. } => 5,
        Command::Reduce { .. } => 6,
        Command::MassCancel { .. } => 7,
        Command::Book { .. } => 8,
        Command::UserReport { .. } => 9,
        Command::VenueReport => 10,
        Command::Tick => 11,
        Command::Amend(_) => 12,
        Command::SetOrderIdWindow { .. } => 13,
        Command::SetPhase { .. } => 14,
        Command::SetBand { .. } => 15,
        Command::SetRefPrice { .. } => 16,
        Command::SuspendUser { .. } => 17,
        Command::ResumeUser { .. } => 18,
        Command::SetMarkPrice { .. } => 19,
        Command::FundInsurance { .. } => 20,
    }
}

/// A gauge read when scraped (ring occupancy, session counts).
type Probe = Box<dyn Fn() -> u64 + Send + Sync>;

#[derive(Default)]
pub struct Metrics {
    commands: [AtomicU64; COMMAND_KINDS.len()],
    rejects: [AtomicU64; 32],
    pub engine_latency: Histogram,
    pub roundtrip_latency: Histogram,
    pub journal_commit: Histogram,
    /// Every fdatasync of the journal (in `batch` mode on its background thread).
    pub journal_fsync: Histogram,
    /// Batches handed to the command log, and the bytes of their records (with JetStream one
    /// message each, its payload): with the first, the append rate; together, the mean size.
    log_appends: AtomicU64,
    log_appended_bytes: AtomicU64,
    ws_connections: AtomicU64,
    ws_slow_consumers: AtomicU64,
    /// Binary (order and admin ports) and FIX connections, as the gateway last counted them.
    pub binary_sessions: AtomicU64,
    pub fix_sessions: AtomicU64,
    gauges: Mutex<Vec<(String, String, Probe)>>,
}

impl Metrics {
    /// Counts an applied command and its result.
    #[inline]
    pub fn command(&self, cmd: &Command, result: Result<(), Reason>) {
        self.commands[command_kind(cmd)].fetch_add(1, Ordering::Relaxed);
        if let Err(reason) = result {
            self.rejects[reason.code() as usize % 32].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Adds a gauge read at each scrape, e.g. `("rialto_ring_occupancy", "ring=\"inbound\"")`.
    pub fn add_gauge(&self, name: &str, labels: &str, probe: Probe) {
        let mut gauges = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        gauges.push((name.to_string(), labels.to_string(), probe));
    }

    /// A batch of `bytes` bytes of records handed to the command log.
    #[inline]
    pub fn log_appended(&self, bytes: usize) {
        self.log_appends.fetch_add(1, Ordering::Relaxed);
        self.log_appended_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn ws_opened(&self) {
        self.ws_connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn ws_closed(&self) {
        self.ws_connections.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn ws_connections(&self) -> u64 {
        self.ws_connections.load(Ordering::Relaxed)
    }

    pub fn ws_slow_consumer(&self) {
        self.ws_slow_consumers.fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8 << 10);
        out.push_str("# HELP rialto_commands_total Commands applied by the engine, by type.\n");
        out.push_str("# TYPE rialto_commands_total counter\n");
        for (kind, count) in COMMAND_KINDS.iter().zip(&self.commands) {
            let n = count.load(Ordering::Relaxed);
            let _ = writeln!(out, "rialto_commands_total{{type=\"{kind}\"}} {n}");
        }
        out.push_str("# HELP rialto_rejects_total Commands the engine rejected, by reason.\n");
        out.push_str("# TYPE rialto_rejects_total counter\n");
        for reason in Reason::ALL {
            let n = self.rejects[reason.code() as usize % 32].load(Ordering::Relaxed);
            let _ = writeln!(out, "rialto_rejects_total{{reason=\"{reason}\"}} {n}");
        }
        self.engine_latency.render(
            &mut out,
            "rialto_engine_latency_seconds",
            "Time the engine took to apply a command (sampled).",
        );
        self.roundtrip_latency.render(
            &mut out,
            "rialto_roundtrip_latency_seconds",
            "From the sequencer's stamp to the reply leaving the gateway (sampled).",
        );
        self.journal_commit.render(
            &mut out,
            "rialto_journal_commit_seconds",
            "Time to commit one journal batch (write, plus fsync in fsync mode).",
        );
        self.journal_fsync.render(
            &mut out,
            "rialto_journal_fsync_seconds",
            "Time of each fdatasync of the journal (in batch mode, on its background thread).",
        );
        out.push_str(
            "# HELP rialto_log_appends_total Batches handed to the command log (local journal: \
             group commits; JetStream: messages appended).\n",
        );
        out.push_str("# TYPE rialto_log_appends_total counter\n");
        let appends = self.log_appends.load(Ordering::Relaxed);
        let _ = writeln!(out, "rialto_log_appends_total {appends}");
        out.push_str(
            "# HELP rialto_log_appended_bytes_total Bytes of records in those batches (with \
             JetStream, the messages' payloads).\n",
        );
        out.push_str("# TYPE rialto_log_appended_bytes_total counter\n");
        let bytes = self.log_appended_bytes.load(Ordering::Relaxed);
        let _ = writeln!(out, "rialto_log_appended_bytes_total {bytes}");
        out.push_str("# HELP rialto_sessions Open connections by protocol.\n");
        out.push_str("# TYPE rialto_sessions gauge\n");
        for (protocol, n) in [
            ("binary", self.binary_sessions.load(Ordering::Relaxed)),
            ("fix", self.fix_sessions.load(Ordering::Relaxed)),
            ("websocket", self.ws_connections()),
        ] {
            let _ = writeln!(out, "rialto_sessions{{protocol=\"{protocol}\"}} {n}");
        }
        out.push_str("# TYPE rialto_ws_slow_consumers_total counter\n");
        let _ = writeln!(
            out,
            "rialto_ws_slow_consumers_total {}",
            self.ws_slow_consumers.load(Ordering::Relaxed)
        );
        let gauges = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        let mut typed = std::collections::BTreeSet::new();
        for (name, labels, probe) in gauges.iter() {
            if typed.insert(name.clone()) {
                let _ = writeln!(out, "# TYPE {name} gauge");
            }
            match labels.is_empty() {
                true => writeln!(out, "{name} {}", probe()),
                false => writeln!(out, "{name}{{{labels}}} {}", probe()),
            }
            .ok();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_powers_of_two() {
        let h = Histogram::default();
        h.record(50); // <= 64 ns
        h.record(100); // <= 128 ns
        h.record(128);
        h.record(u64::MAX / 2); // +Inf
        let mut out = String::new();
        h.render(&mut out, "x", "test");
        assert!(out.contains("x_bucket{le=\"6.4e-8\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"1.28e-7\"} 3\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 4\n"), "{out}");
        assert!(out.contains("x_count 4\n"));
    }
}
