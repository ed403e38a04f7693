//! The engine benchmark: generate a workload, then apply it to fresh engines on this thread,
//! once for throughput (no per-command timing) and once for per-command latency.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
pub use rialto_core::Prefetch;
use rialto_core::{Command, Engine, Event, EventSink};

use crate::clock::{Clock, InstantClock, TscClock};
use crate::mem;
use crate::workload::{self, Mix, MultiParams, SingleParams, Size, Workload};

/// Which workload to run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WorkloadSpec {
    Single(SingleParams),
    /// `single` on a future (`rialto bench engine --workload futures`).
    Futures(SingleParams),
    /// `size` is what the parameters started from (overrides may have changed them).
    Multi {
        size: Size,
        params: MultiParams,
    },
}

impl WorkloadSpec {
    pub fn generate(&self, seed: u64) -> Workload {
        match self {
            WorkloadSpec::Single(p) => workload::single(p, seed),
            WorkloadSpec::Futures(p) => workload::futures(p, seed),
            WorkloadSpec::Multi { params, .. } => workload::multi(params, seed),
        }
    }

    fn label(&self) -> String {
        match self {
            WorkloadSpec::Single(_) => "single".to_string(),
            WorkloadSpec::Futures(_) => "futures".to_string(),
            WorkloadSpec::Multi { size, params } => {
                let standard = MultiParams {
                    mix: params.mix,
                    ..MultiParams::size(*size)
                };
                if *params == standard {
                    format!("multi {}", size.as_str())
                } else {
                    "multi custom".to_string()
                }
            }
        }
    }
}

/// Per-command latency percentiles, nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
}

impl Percentiles {
    fn of(h: &Histogram<u64>) -> Percentiles {
        Percentiles {
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            p9999: h.value_at_quantile(0.9999),
            max: h.max(),
        }
    }

    pub fn is_ordered(&self) -> bool {
        self.p50 <= self.p90
            && self.p90 <= self.p99
            && self.p99 <= self.p999
            && self.p999 <= self.p9999
            && self.p9999 <= self.max
    }
}

/// Everything one run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub workload: String,
    pub mix: String,
    pub mix_realised: String,
    pub seed: u64,
    pub symbols: u64,
    pub users: u64,
    pub accounts: u64,
    /// Benchmark commands applied in each pass.
    pub commands: u64,
    /// Throughput pass: seconds to apply `commands` (no per-command timing); with several
    /// passes, the median pass.
    pub seconds: f64,
    pub throughput_per_s: f64,
    /// Each throughput pass's commands a second, in the order run (each on a fresh engine).
    pub throughput_passes_per_s: Vec<f64>,
    /// Whether both passes prefetched ahead (in the latency pass the prefetch before a command is
    /// timed with it, as the server's engine stage runs it).
    pub prefetch: bool,
    /// Latency pass: service time of each command, clock cost included.
    pub latency_ns: Percentiles,
    pub latency_mean_ns: f64,
    /// The clock of the latency pass: "tsc" or "instant".
    pub clock: String,
    /// Median of an empty timed region (a start and a stop read of the same clock).
    pub clock_overhead_ns: u64,
    /// Peak RSS after generation (the peak is reset once the generation engine is dropped when
    /// the kernel allows it; see `peak_rss_reset`).
    pub peak_rss_bytes: u64,
    pub peak_rss_reset: bool,
    /// RSS growth while the engine took the setup (symbols, users, deposits).
    pub setup_rss_bytes: u64,
    /// RSS growth while the engine took the prefill orders.
    pub prefill_rss_bytes: u64,
    /// RSS growth over the whole throughput pass' engine (setup, prefill and the commands).
    pub engine_rss_bytes: u64,
    /// Of the RSS at the end of the throughput pass, how much is on transparent huge pages (the
    /// `rialto` binary asks for them for large blocks: crates/cli/src/huge_pages.rs).
    pub anon_huge_bytes: u64,
    /// Heap held by the generated commands, alive during both passes.
    pub workload_bytes: u64,
    pub generate_seconds: f64,
    pub setup_seconds: f64,
    pub setup_commands: u64,
    pub prefill_seconds: f64,
    pub prefill_orders: u64,
    pub resting_after_prefill: u64,
    pub resting_end: u64,
    pub levels_after_prefill: u64,
    /// Events of the benchmark commands (identical in both passes).
    pub events: u64,
    pub trades: u64,
    pub trading_fraction: f64,
    /// Rejected benchmark commands (a sound workload has none).
    pub rejected: u64,
    /// `--mix rulebook`: stops triggered, cascade trades and the cascade cost per stop.
    pub cascade: Option<CascadeFigures>,
}

/// How this binary was built, for the reports: "debug", "release", or "release,
/// profile-guided" (scripts/build-pgo.sh; see build.rs).
pub fn build_kind() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else if env!("RIALTO_PROFILE_GUIDED") == "1" {
        "release, profile-guided"
    } else {
        "release"
    }
}

impl Report {
    pub fn to_json(&self) -> serde_json::Value {
        let p = &self.latency_ns;
        let mut v = serde_json::json!({
            "build": build_kind(),
            "commands": self.commands,
            "seconds": self.seconds,
            "throughput_per_s": self.throughput_per_s,
            "throughput_passes_per_s": self.throughput_passes_per_s,
            "prefetch": self.prefetch,
            "latency_ns": {
                "p50": p.p50, "p90": p.p90, "p99": p.p99,
                "p999": p.p999, "p9999": p.p9999, "max": p.max,
            },
            "peak_rss_bytes": self.peak_rss_bytes,
            "workload": self.workload,
            "mix": self.mix,
            "mix_realised": self.mix_realised,
            "seed": self.seed,
            "symbols": self.symbols,
            "users": self.users,
            "accounts": self.accounts,
            "latency_mean_ns": self.latency_mean_ns,
            "clock": self.clock,
            "clock_overhead_ns": self.clock_overhead_ns,
            "peak_rss_reset_after_generation": self.peak_rss_reset,
            "setup_rss_bytes": self.setup_rss_bytes,
            "prefill_rss_bytes": self.prefill_rss_bytes,
            "engine_rss_bytes": self.engine_rss_bytes,
            "anon_huge_bytes": self.anon_huge_bytes,
            "workload_bytes": self.workload_bytes,
            "generate_seconds": self.generate_seconds,
            "setup_seconds": self.setup_seconds,
            "setup_commands": self.setup_commands,
            "prefill_seconds": self.prefill_seconds,
            "prefill_orders": self.prefill_orders,
            "resting_after_prefill": self.resting_after_prefill,
            "resting_end": self.resting_end,
            "levels_after_prefill": self.levels_after_prefill,
            "events": self.events,
            "trades": self.trades,
            "trading_fraction": self.trading_fraction,
            "rejected": self.rejected,
        });
        if let Some(c) = &self.cascade {
            v["stops_triggered"] = c.stops_triggered.into();
            v["cascade_trades"] = c.cascade_trades.into();
            v["cascade_ns_per_stop"] = c.cost_per_stop_ns.into();
            v["triggering_commands"] = c.triggering_commands.into();
            v["triggering_ns"] = c.triggering_ns.into();
            v["triggering_baseline_ns"] = c.baseline_ns.into();
            v["baseline_fallbacks"] = c.baseline_fallbacks.into();
            v["expired"] = c.expired.into();
            v["stops_pending_end"] = c.stops_pending_end.into();
        }
        v
    }

    pub fn to_table(&self) -> String {
        let p = &self.latency_ns;
        let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
        let mut s = String::new();
        s += &format!(
            "rialto bench engine: {} ({} symbols, {} users, {} accounts), seed {}; {} build\n",
            self.workload,
            self.symbols,
            self.users,
            self.accounts,
            self.seed,
            build_kind()
        );
        s += &format!("mix:        {}\n", self.mix);
        s += &format!("realised:   {}\n", self.mix_realised);
        s += &format!(
            "generated:  {} commands in {:.2} s (not measured); {:.2}% trade, {} trades, {} events, {} rejected\n",
            self.commands,
            self.generate_seconds,
            self.trading_fraction * 100.0,
            self.trades,
            self.events,
            self.rejected
        );
        s += &format!(
            "setup:      {} commands in {:.3} s\n",
            self.setup_commands, self.setup_seconds
        );
        s += &format!(
            "prefill:    {} orders in {:.3} s ({} resting, {} levels in the busiest book)\n",
            self.prefill_orders,
            self.prefill_seconds,
            self.resting_after_prefill,
            self.levels_after_prefill
        );
        s += &format!(
            "throughput: {} commands in {:.3} s = {:.2} M commands/s (one thread, no per-command timing, prefetch {})\n",
            self.commands,
            self.seconds,
            self.throughput_per_s / 1e6,
            if self.prefetch { "on" } else { "off" }
        );
        if self.throughput_passes_per_s.len() > 1 {
            let passes: Vec<String> = self
                .throughput_passes_per_s
                .iter()
                .map(|t| format!("{:.2}", t / 1e6))
                .collect();
            s += &format!(
                "            the median of {} passes: {} M commands/s\n",
                passes.len(),
                passes.join(", ")
            );
        }
        s += &format!(
            "latency:    per command, ns (clock: {}; an empty timed region costs {} ns, included; prefetch {})\n",
            self.clock,
            self.clock_overhead_ns,
            if self.prefetch { "on" } else { "off" }
        );
        s += "            p50     p90     p99   p99.9  p99.99        max    mean\n";
        s += &format!(
            "        {:>7} {:>7} {:>7} {:>7} {:>7} {:>10} {:>7.1}\n",
            p.p50, p.p90, p.p99, p.p999, p.p9999, p.max, self.latency_mean_ns
        );
        s += &format!(
            "memory:     peak RSS {:.1} MiB{}; engine {:.1} MiB (setup {:.1}, prefill {:.1}); commands held {:.1} MiB; on huge pages {:.1} MiB\n",
            mb(self.peak_rss_bytes),
            if self.peak_rss_reset {
                " (after generation)"
            } else {
                " (including generation)"
            },
            mb(self.engine_rss_bytes),
            mb(self.setup_rss_bytes),
            mb(self.prefill_rss_bytes),
            mb(self.workload_bytes),
            mb(self.anon_huge_bytes)
        );
        s += &format!("resting:    {} at the end\n", self.resting_end);
        if let Some(c) = &self.cascade {
            s += &format!(
                "stops:      {} triggered by {} commands, {} cascade trades ({:.2} a stop); {} pending at the end; {} orders expired\n",
                c.stops_triggered,
                c.triggering_commands,
                c.cascade_trades,
                c.cascade_trades as f64 / c.stops_triggered.max(1) as f64,
                c.stops_pending_end,
                c.expired
            );
            s += &format!(
                "cascade:    {:.1} ns a triggered stop (triggering commands {:.1} ms against {:.1} ms for their classes' medians; {} fallbacks)\n",
                c.cost_per_stop_ns,
                c.triggering_ns as f64 / 1e6,
                c.baseline_ns as f64 / 1e6,
                c.baseline_fallbacks
            );
        }
        s
    }
}

/// Counts events; allocation free.
#[derive(Default)]
pub struct CountingSink {
    pub events: u64,
    pub trades: u64,
}

impl EventSink for CountingSink {
    fn on_event(&mut self, event: &Event<'_>) {
        self.events += 1;
        if let Event::Trade(_) = event {
            self.trades += 1;
        }
    }
}

/// The sink of a measuring pass: told where each command starts, it reports what it counted.
pub trait PassSink: EventSink {
    fn new_pass(expected_stops: usize) -> Self;
    /// Called before each command, outside any timed region.
    fn begin(&mut self) {}
    fn counts(&self, rejected: u64) -> PassCounts;
}

impl PassSink for CountingSink {
    fn new_pass(_: usize) -> Self {
        CountingSink::default()
    }

    fn counts(&self, rejected: u64) -> PassCounts {
        PassCounts {
            events: self.events,
            trades: self.trades,
            rejected,
            ..PassCounts::default()
        }
    }
}

/// Counts events, and for `--mix rulebook` the stops triggered and their trades (a trade whose
/// taker is a stop the same command triggered). Allocation free once built.
pub struct RulebookSink {
    pub events: u64,
    pub trades: u64,
    pub triggered: u64,
    pub cascade_trades: u64,
    pub expired: u64,
    /// The stops the current command has triggered so far.
    pub current: Vec<(rialto_core::UserId, rialto_core::OrderId)>,
    /// Trades of the current command, of which `current_cascade` by triggered stops.
    pub current_trades: u64,
    pub current_cascade: u64,
}

impl EventSink for RulebookSink {
    fn on_event(&mut self, event: &Event<'_>) {
        self.events += 1;
        match event {
            Event::Trade(t) => {
                self.trades += 1;
                self.current_trades += 1;
                if self
                    .current
                    .iter()
                    .any(|&(u, o)| u == t.taker_user && o == t.taker_order)
                {
                    self.cascade_trades += 1;
                    self.current_cascade += 1;
                }
            }
            Event::Triggered(t) => {
                self.triggered += 1;
                if self.current.len() < self.current.capacity() {
                    self.current.push((t.user, t.order));
                }
            }
            Event::Cancelled(c) if c.reason == rialto_core::CancelReason::Expired => {
                self.expired += 1;
            }
            _ => {}
        }
    }
}

impl PassSink for RulebookSink {
    fn new_pass(expected_stops: usize) -> Self {
        RulebookSink {
            events: 0,
            trades: 0,
            triggered: 0,
            cascade_trades: 0,
            expired: 0,
            current: Vec::with_capacity(expected_stops.max(16)),
            current_trades: 0,
            current_cascade: 0,
        }
    }

    fn begin(&mut self) {
        self.current.clear();
        self.current_trades = 0;
        self.current_cascade = 0;
    }

    fn counts(&self, rejected: u64) -> PassCounts {
        PassCounts {
            events: self.events,
            trades: self.trades,
            rejected,
            triggered: self.triggered,
            cascade_trades: self.cascade_trades,
            expired: self.expired,
        }
    }
}

/// A fresh engine that has taken the workload's setup and prefill.
pub struct Prepared {
    pub engine: Engine,
    /// The sequence number of the last command applied.
    pub seq: u64,
    pub setup_seconds: f64,
    pub prefill_seconds: f64,
    pub setup_rss_bytes: u64,
    pub prefill_rss_bytes: u64,
}

/// Builds a fresh engine and applies setup and prefill; any rejection is an error (the
/// workload does not fit the engine).
pub fn prepare(w: &Workload) -> anyhow::Result<Prepared> {
    let rss0 = mem::rss_bytes().unwrap_or(0);
    let mut engine = Engine::new(w.config);
    let mut seq = 0u64;
    let start = Instant::now();
    for cmd in w.setup_commands() {
        seq += 1;
        engine
            .apply(seq, seq as i64 * w.ts_step, &cmd, &mut ())
            .map_err(|r| anyhow::anyhow!("setup command {seq} rejected ({r}): {cmd:?}"))?;
    }
    let setup_seconds = start.elapsed().as_secs_f64();
    let rss1 = mem::rss_bytes().unwrap_or(0);
    let start = Instant::now();
    for cmd in &w.prefill {
        seq += 1;
        engine
            .apply(seq, seq as i64 * w.ts_step, cmd, &mut ())
            .map_err(|r| anyhow::anyhow!("prefill command {seq} rejected ({r}): {cmd:?}"))?;
    }
    let prefill_seconds = start.elapsed().as_secs_f64();
    let rss2 = mem::rss_bytes().unwrap_or(0);
    Ok(Prepared {
        engine,
        seq,
        setup_seconds,
        prefill_seconds,
        setup_rss_bytes: rss1.saturating_sub(rss0),
        prefill_rss_bytes: rss2.saturating_sub(rss1),
    })
}

/// What a pass over the benchmark commands saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassCounts {
    pub events: u64,
    pub trades: u64,
    pub rejected: u64,
    /// `--mix rulebook` only (0 otherwise): stops triggered, trades whose taker is a triggered
    /// stop, orders expired.
    pub triggered: u64,
    pub cascade_trades: u64,
    pub expired: u64,
}

/// Writes `command` to `perf record --control fifo:PATH`'s control pipe, when one is named, so
/// that a profile holds the throughput pass alone (docs/benchmarks.md, "Reproducing").
fn tell_perf(control: Option<&std::ffi::OsStr>, command: &str) {
    if let Some(path) = control
        && let Err(e) = std::fs::write(path, format!("{command}\n"))
    {
        eprintln!("[bench] RIALTO_PERF_CONTROL: cannot write {path:?}: {e}");
    }
}

/// Applies `commands` without per-command timing; returns the elapsed time and counts. Never
/// inlined, so that profilers can single it out (`valgrind --toggle-collect='*throughput_pass*'`).
pub fn throughput_pass(
    engine: &mut Engine,
    seq: u64,
    commands: &[Command],
    prefetch: bool,
) -> (Duration, PassCounts) {
    throughput_pass_with::<CountingSink>(engine, seq, 1, 0, commands, prefetch)
}

/// [`throughput_pass`] with a sink of choice, command `seq` at time `seq * ts_step`.
#[inline(never)]
pub fn throughput_pass_with<S: PassSink>(
    engine: &mut Engine,
    mut seq: u64,
    ts_step: i64,
    expected_stops: usize,
    commands: &[Command],
    prefetch: bool,
) -> (Duration, PassCounts) {
    let mut sink = S::new_pass(expected_stops);
    let mut rejected = 0u64;
    let perf_control = std::env::var_os("RIALTO_PERF_CONTROL");
    tell_perf(perf_control.as_deref(), "enable");
    let start = Instant::now();
    for (i, cmd) in commands.iter().enumerate() {
        seq += 1;
        if prefetch {
            engine.prefetch_ahead(&commands[i..]);
        }
        sink.begin();
        rejected += engine
            .apply(seq, seq as i64 * ts_step, cmd, &mut sink)
            .is_err() as u64;
    }
    let elapsed = start.elapsed();
    tell_perf(perf_control.as_deref(), "disable");
    (elapsed, sink.counts(rejected))
}

fn latency_histogram() -> Histogram<u64> {
    // 1 ns to 100 s at 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Applies `commands` timing each one between a start and a stop read of `clock`. With
/// `prefetch`, a command's time includes the prefetching for the commands after it that runs
/// just before it.
pub fn latency_pass<C: Clock>(
    clock: &C,
    engine: &mut Engine,
    seq: u64,
    commands: &[Command],
    prefetch: bool,
) -> (Histogram<u64>, PassCounts) {
    let mut sink = CountingSink::default();
    latency_pass_with(
        clock,
        engine,
        seq,
        1,
        commands,
        prefetch,
        &mut sink,
        |_, _, _| {},
    )
}

/// [`latency_pass`] with a sink of choice, command `seq` at time `seq * ts_step`; `after` sees
/// each command's index, its time (ns) and the sink, outside the timed region.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn latency_pass_with<C: Clock, S: PassSink>(
    clock: &C,
    engine: &mut Engine,
    mut seq: u64,
    ts_step: i64,
    commands: &[Command],
    prefetch: bool,
    sink: &mut S,
    mut after: impl FnMut(usize, u64, &S),
) -> (Histogram<u64>, PassCounts) {
    let mut hist = latency_histogram();
    let mut rejected = 0u64;
    for (i, cmd) in commands.iter().enumerate() {
        seq += 1;
        sink.begin();
        let t0 = clock.start();
        if prefetch {
            engine.prefetch_ahead(&commands[i..]);
        }
        let result = engine.apply(seq, seq as i64 * ts_step, cmd, sink);
        let t1 = clock.stop();
        rejected += result.is_err() as u64;
        let ns = clock.elapsed_ns(t0, t1);
        hist.saturating_record(ns);
        after(i, ns, sink);
    }
    (hist, sink.counts(rejected))
}

/// Median cost of an empty timed region: what the clock adds to each latency sample.
pub fn clock_overhead_ns<C: Clock>(clock: &C, samples: u32) -> u64 {
    let mut hist = latency_histogram();
    for _ in 0..samples {
        let t0 = clock.start();
        let t1 = clock.stop();
        hist.saturating_record(clock.elapsed_ns(t0, t1));
    }
    hist.value_at_quantile(0.5)
}

/// The clock of the latency pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClockChoice {
    /// The invariant TSC where there is one, else `Instant`.
    #[default]
    Tsc,
    Instant,
}

/// Options of one run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineBench {
    pub workload: WorkloadSpec,
    pub seed: u64,
    pub clock: ClockChoice,
    /// Whether the throughput pass prefetches ahead ([`Engine::prefetch_ahead`]).
    pub prefetch: Prefetch,
    /// Throughput passes, each on a fresh engine; the median is reported (at least 1).
    pub passes: usize,
    /// Progress lines on stderr.
    pub progress: bool,
}

/// Generates the workload and measures it.
pub fn run(opts: &EngineBench) -> anyhow::Result<Report> {
    let say = |msg: &str| {
        if opts.progress {
            eprintln!("[bench] {msg}");
        }
    };
    say("generating the workload (not measured)...");
    let start = Instant::now();
    let w = opts.workload.generate(opts.seed);
    let generate_seconds = start.elapsed().as_secs_f64();
    say(&format!(
        "generated in {generate_seconds:.1} s: {} setup, {} prefill, {} commands",
        w.setup_len(),
        w.prefill.len(),
        w.commands.len()
    ));
    measure(&w, generate_seconds, opts)
}

/// Measures a workload generated from `opts`: throughput passes, then a latency pass, each on a
/// fresh engine.
pub fn measure(w: &Workload, generate_seconds: f64, opts: &EngineBench) -> anyhow::Result<Report> {
    let &EngineBench {
        seed,
        clock,
        prefetch,
        passes,
        progress,
        ..
    } = opts;
    let label = opts.workload.label();
    let say = |msg: &str| {
        if progress {
            eprintln!("[bench] {msg}");
        }
    };
    if w.stats.rejected > 0 {
        say(&format!(
            "warning: the generator saw {} rejected commands (they are measured as they are)",
            w.stats.rejected
        ));
    }
    mem::trim_heap();
    let peak_rss_reset = mem::reset_peak_rss();
    let rss_before = mem::rss_bytes().unwrap_or(0);

    say("throughput pass: setup and prefill...");
    let mut p = prepare(w).context("throughput pass")?;
    say(&format!(
        "setup {:.2} s, prefill {:.2} s; applying {} commands...",
        p.setup_seconds,
        p.prefill_seconds,
        w.commands.len()
    ));
    let prefetch = prefetch.now(&p.engine);
    let rulebook = w.mix == Mix::Rulebook;
    let expected_stops = w.stats.stops_pending_max as usize + 16;
    let run_pass = |p: &mut Prepared| {
        if rulebook {
            throughput_pass_with::<RulebookSink>(
                &mut p.engine,
                p.seq,
                w.ts_step,
                expected_stops,
                &w.commands,
                prefetch,
            )
        } else {
            throughput_pass_with::<CountingSink>(
                &mut p.engine,
                p.seq,
                w.ts_step,
                0,
                &w.commands,
                prefetch,
            )
        }
    };
    let (elapsed, counts) = run_pass(&mut p);
    let engine_rss_bytes = mem::rss_bytes().unwrap_or(0).saturating_sub(rss_before);
    let anon_huge_bytes = mem::anon_huge_bytes().unwrap_or(0);
    let resting_end = p.engine.resting_order_count() as u64;
    let first = (
        p.setup_seconds,
        p.prefill_seconds,
        p.setup_rss_bytes,
        p.prefill_rss_bytes,
    );
    drop(p);
    let mut pass_seconds = vec![elapsed.as_secs_f64()];
    for pass in 2..=passes.max(1) {
        mem::trim_heap();
        say(&format!(
            "throughput pass {pass} of {passes} on a fresh engine..."
        ));
        let mut p = prepare(w).context("throughput pass")?;
        let (elapsed, again) = run_pass(&mut p);
        if again != counts {
            bail!(
                "throughput passes disagree: {counts:?} vs {again:?} (engine not deterministic?)"
            );
        }
        pass_seconds.push(elapsed.as_secs_f64());
    }

    mem::trim_heap();
    say("latency pass: setup and prefill on a fresh engine...");
    let mut p = prepare(w).context("latency pass")?;
    let tsc = match clock {
        ClockChoice::Tsc => TscClock::calibrated(),
        ClockChoice::Instant => None,
    };
    if clock == ClockChoice::Tsc && tsc.is_none() {
        say("no invariant TSC here: timing with Instant");
    }
    let mut cascade = rulebook.then(|| CascadeCost::new(w.stats.stops_triggered as usize));
    let (hist, latency_counts, clock_name, clock_overhead_ns) = match &tsc {
        Some(c) => {
            let (h, n) = timed_pass(c, &mut p, w, prefetch, cascade.as_mut());
            (h, n, c.name(), clock_overhead_ns(c, 1_000_000))
        }
        None => {
            let c = &InstantClock;
            let (h, n) = timed_pass(c, &mut p, w, prefetch, cascade.as_mut());
            (h, n, c.name(), clock_overhead_ns(c, 1_000_000))
        }
    };
    drop(p);
    if latency_counts != counts {
        bail!(
            "the two passes disagree: {counts:?} vs {latency_counts:?} (engine not deterministic?)"
        );
    }
    let peak_rss_bytes = mem::peak_rss_bytes().unwrap_or(0);

    let commands = w.commands.len() as u64;
    let per_s = |seconds: f64| commands as f64 / seconds.max(1e-9);
    let throughput_passes_per_s: Vec<f64> = pass_seconds.iter().map(|&s| per_s(s)).collect();
    let mut sorted = pass_seconds.clone();
    sorted.sort_by(f64::total_cmp);
    // The median pass (the faster of the middle two for an even count).
    let seconds = sorted[(sorted.len() - 1) / 2];
    Ok(Report {
        workload: label,
        mix: w.mix.describe().to_string(),
        mix_realised: w.stats.realised_mix(),
        seed,
        symbols: w.symbols as u64,
        users: w.accounts.users() as u64,
        accounts: w.accounts.accounts(),
        commands,
        seconds,
        throughput_per_s: per_s(seconds),
        throughput_passes_per_s,
        prefetch,
        latency_ns: Percentiles::of(&hist),
        latency_mean_ns: hist.mean(),
        clock: clock_name.to_string(),
        clock_overhead_ns,
        peak_rss_bytes,
        peak_rss_reset,
        setup_rss_bytes: first.2,
        prefill_rss_bytes: first.3,
        engine_rss_bytes,
        anon_huge_bytes,
        workload_bytes: w.heap_bytes(),
        generate_seconds,
        setup_seconds: first.0,
        setup_commands: w.setup_len(),
        prefill_seconds: first.1,
        prefill_orders: w.prefill.len() as u64,
        resting_after_prefill: w.stats.resting_after_prefill,
        resting_end,
        levels_after_prefill: w.stats.levels_after_prefill,
        events: counts.events,
        trades: counts.trades,
        trading_fraction: w.stats.trading_fraction(),
        rejected: counts.rejected,
        cascade: cascade.map(|c| c.figures(&counts, w.stats.stops_pending_end)),
    })
}

/// The latency pass: with `cascade` (`--mix rulebook`), also sorts each command's time into
/// [`CascadeCost`].
fn timed_pass<C: Clock>(
    clock: &C,
    p: &mut Prepared,
    w: &Workload,
    prefetch: bool,
    cascade: Option<&mut CascadeCost>,
) -> (Histogram<u64>, PassCounts) {
    match cascade {
        None => latency_pass(clock, &mut p.engine, p.seq, &w.commands, prefetch),
        Some(cost) => {
            let mut sink = RulebookSink::new_pass(w.stats.stops_pending_max as usize + 16);
            latency_pass_with(
                clock,
                &mut p.engine,
                p.seq,
                w.ts_step,
                &w.commands,
                prefetch,
                &mut sink,
                |i, ns, s| cost.record(&w.commands[i], ns, s),
            )
        }
    }
}

/// Own-trade counts told apart in [`CascadeCost`]'s baselines (the last one is "this many or
/// more").
const OWN_TRADE_CLASSES: usize = 16;

/// The cascade cost per triggered stop (docs/benchmarks.md, "The rulebook mix"): each command
/// that triggered stops is compared with the median time of the commands that triggered none
/// and were of the same kind (place, move, other) with as many trades of their own (trades
/// whose taker is not a triggered stop); the excess, summed over the triggering commands, is
/// divided by the stops they triggered.
pub struct CascadeCost {
    /// Times of the commands that triggered nothing, by class.
    baseline: Vec<Histogram<u32>>,
    /// Class, time and stops triggered of each command that triggered some.
    triggering: Vec<(usize, u64, u64)>,
}

impl CascadeCost {
    fn new(expected_triggering: usize) -> CascadeCost {
        CascadeCost {
            baseline: (0..3 * OWN_TRADE_CLASSES)
                .map(|_| Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds"))
                .collect(),
            triggering: Vec::with_capacity(expected_triggering + 16),
        }
    }

    fn class(cmd: &Command, own_trades: u64) -> usize {
        let kind = match cmd {
            Command::Place(_) => 0,
            Command::Move { .. } => 1,
            _ => 2,
        };
        kind * OWN_TRADE_CLASSES + (own_trades as usize).min(OWN_TRADE_CLASSES - 1)
    }

    fn record(&mut self, cmd: &Command, ns: u64, s: &RulebookSink) {
        let class = Self::class(cmd, s.current_trades - s.current_cascade);
        if s.current.is_empty() {
            self.baseline[class].saturating_record(ns);
        } else {
            self.triggering.push((class, ns, s.current.len() as u64));
        }
    }

    /// The median of a class, or of the nearest class of the same kind with fewer own trades
    /// that has samples (counted in `fallbacks`).
    fn median(&self, class: usize, fallbacks: &mut u64) -> u64 {
        let first = class - class % OWN_TRADE_CLASSES;
        for c in (first..=class).rev() {
            if !self.baseline[c].is_empty() {
                if c != class {
                    *fallbacks += 1;
                }
                return self.baseline[c].value_at_quantile(0.5);
            }
        }
        *fallbacks += 1;
        0
    }

    fn figures(&self, counts: &PassCounts, stops_pending_end: u64) -> CascadeFigures {
        let mut fallbacks = 0;
        let mut time_ns = 0u64;
        let mut baseline_ns = 0u64;
        let mut stops = 0u64;
        for &(class, ns, n) in &self.triggering {
            time_ns += ns;
            baseline_ns += self.median(class, &mut fallbacks);
            stops += n;
        }
        CascadeFigures {
            stops_triggered: counts.triggered,
            cascade_trades: counts.cascade_trades,
            expired: counts.expired,
            stops_pending_end,
            triggering_commands: self.triggering.len() as u64,
            triggering_ns: time_ns,
            baseline_ns,
            baseline_fallbacks: fallbacks,
            cost_per_stop_ns: (time_ns as f64 - baseline_ns as f64) / stops.max(1) as f64,
        }
    }
}

/// What `--mix rulebook` adds to a report.
#[derive(Clone, Debug, PartialEq)]
pub struct CascadeFigures {
    /// `triggered` events (stops that triggered), the same in every pass.
    pub stops_triggered: u64,
    /// Trades whose taker is a stop triggered by the same command.
    pub cascade_trades: u64,
    /// Orders cancelled with reason `expired` (DAY orders at the day ends).
    pub expired: u64,
    pub stops_pending_end: u64,
    /// Commands that triggered at least one stop, and their summed time (latency pass).
    pub triggering_commands: u64,
    pub triggering_ns: u64,
    /// The sum of their classes' medians among commands that triggered nothing.
    pub baseline_ns: u64,
    /// Triggering commands whose own class had no such commands (a class with fewer own trades
    /// stood in).
    pub baseline_fallbacks: u64,
    /// `(triggering_ns - baseline_ns) / stops_triggered`.
    pub cost_per_stop_ns: f64,
}
