//! The pipeline behind the gateways: journal thread (sequencer + write-ahead journal), engine
//! thread, snapshot writer.
//!
//! ```text
//! gateway ──Request──> [inbound ring] ──> journal thread: stamp seq + time, append, commit
//!                                          │ (a batch moves on only once durable per the mode)
//!                                          ├──records──> [market data ring] ──> market data
//!                                          v                 thread: replays them on its own
//!                               [engine ring] ──> engine     copy of the engine, once the
//!                                                 thread:    engine has applied them
//!                                                 apply, build replies
//!                                                   │              └─> snapshot writer thread
//!                                                   v
//! gateway <──Outbound── [outbound ring] <───────────┘
//! ```
//! Each ring has one producer in steady state (the snapshot writer also pushes its rare
//! replies), each piece of state one writer. Queries (book, reports, symbol list) travel the
//! same path so that they see every command before them, but are not journaled and take no
//! sequence number of their own.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

pub use rialto_core::Prefetch;
use rialto_core::{
    Command, Engine, Name, OrderId, OwnedEvent, PREFETCH_LOOKAHEAD, Reason, SymbolId, SymbolKind,
    UserId, UserReport,
};
use rialto_wire::{ErrorCode, Liquidity, Margin, OrderState, RequestKind, Secret};

use crate::auth::Credentials;
pub use crate::event::{Event, Outbound, Target};
use crate::idle::{Bell, Idler, MAX_SLEEP, WaitStrategy};
use crate::metrics::{Metrics, SAMPLE_EVERY};
use crate::replication::{CommandLog, MAX_APPENDS_IN_FLIGHT};
use crate::ring::Ring;

/// Identifies a gateway session; never reused while the server runs.
pub type SessionId = u64;
/// Commands the server issues itself (the demo set-up): their replies are dropped.
pub const SYSTEM_SESSION: SessionId = 0;

/// How the engine thread answers a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// An order command: Accepted or Rejected, carrying the client's order id.
    Order {
        order: OrderId,
        kind: RequestKind,
    },
    /// AdminResult (add symbol, adjust balance).
    Admin {
        request: u64,
    },
    /// UserAdded with the new user's secret, or AdminResult on rejection.
    AddUser {
        request: u64,
    },
    /// Report (a user's balances and open orders).
    Report {
        request: u64,
    },
    /// ReportExt (the same, every field of each open order).
    ReportExt {
        request: u64,
    },
    VenueReport {
        request: u64,
    },
    Book {
        request: u64,
    },
    Symbols {
        request: u64,
    },
    Users {
        request: u64,
    },
    /// OrderStatus (one of the user's orders).
    OrderStatus {
        request: u64,
    },
    Snapshot {
        request: u64,
    },
    /// VenueSettings.
    Settings {
        request: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Command(Command),
    ListSymbols,
    ListUsers,
    TakeSnapshot,
    /// The venue's settings (the order-id window), read from the engine.
    VenueSettings,
    /// What became of one of a user's orders, read from the engine.
    OrderStatus {
        user: UserId,
        order: OrderId,
    },
}

/// A decoded, authenticated request on its way to the journal thread.
#[derive(Clone, Debug)]
pub struct Request {
    pub session: SessionId,
    pub reply: Reply,
    pub op: Op,
}

/// A request with its place in the venue's history.
#[derive(Clone, Debug)]
pub struct Sequenced {
    pub request: Request,
    /// The command's sequence number; for a query, that of the last command before it.
    pub seq: u64,
    pub ts_ns: i64,
}

/// A report's margin figures: the user's cross margin in each currency that quotes a future
/// it holds a position or an open order in, by currency name, at most
/// [`rialto_wire::MAX_REPORT_MARGINS`] (docs/protocol.md, Report). The figures are the ones
/// the engine put in the report (`report.margins`, every currency with futures).
pub fn report_margins(engine: &Engine, report: &UserReport) -> Vec<Margin> {
    let symbols = report.positions.iter().map(|p| p.symbol);
    let mut currencies: Vec<Name> = symbols
        .chain(report.orders.iter().map(|o| o.symbol))
        .filter_map(|name| {
            let spec = engine.symbol(engine.symbol_id(name.as_str()))?;
            matches!(spec.kind, Some(SymbolKind::Future { .. })).then_some(spec.quote)
        })
        .collect();
    currencies.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
    currencies.dedup();
    currencies.truncate(rialto_wire::MAX_REPORT_MARGINS);
    currencies
        .into_iter()
        .filter_map(|currency| {
            let m = report.margins.iter().find(|m| m.currency == currency)?;
            Some(Margin {
                currency,
                equity: m.equity,
                initial: m.initial,
                maintenance: m.maintenance,
            })
        })
        .collect()
}

/// Commands that change state are journaled; queries are not.
pub fn is_journaled(op: &Op) -> bool {
    match op {
        Op::Command(cmd) => !matches!(
            cmd,
            Command::Book { .. } | Command::UserReport { .. } | Command::VenueReport
        ),
        Op::ListSymbols
        | Op::ListUsers
        | Op::TakeSnapshot
        | Op::VenueSettings
        | Op::OrderStatus { .. } => false,
    }
}

/// Flags the threads use to stop in order: intake closes, the journal drains and syncs, the
/// engine drains, the gateway flushes its sessions.
pub struct Shared {
    pub intake_closed: AtomicBool,
    pub journal_done: AtomicBool,
    pub engine_done: AtomicBool,
    /// Set with a message when a thread hit an error it cannot continue after.
    pub failure: Mutex<Option<String>>,
    pub failed: AtomicBool,
    /// The engine's last applied sequence number.
    pub applied_seq: AtomicU64,
    /// When the engine's next order expiry is due (ns since the epoch; `i64::MAX`: none), so
    /// that the journal stage sends a `tick` on a quiet venue (docs/rules.md, "GTD and DAY").
    pub next_expiry_ns: AtomicI64,
    /// State hashes the engine took at checkpoint seqs, for the journal stage to write into a
    /// replicated log (`log.checkpoint_every`).
    pub checkpoints: crossbeam_queue::ArrayQueue<(u64, [u8; 32])>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            intake_closed: AtomicBool::new(false),
            journal_done: AtomicBool::new(false),
            engine_done: AtomicBool::new(false),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
            applied_seq: AtomicU64::new(0),
            next_expiry_ns: AtomicI64::new(0),
            checkpoints: crossbeam_queue::ArrayQueue::new(64),
        }
    }
}

impl Shared {
    pub fn fail(&self, message: String) {
        tracing::error!("{message}");
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert(message);
        self.failed.store(true, Ordering::SeqCst);
    }

    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }
}

pub struct PipelineConfig {
    pub ring_capacity: usize,
    pub batch_max: usize,
    pub wait: WaitStrategy,
    /// Take a snapshot after this many journaled commands (0: never on its own).
    pub snapshot_every: u64,
    /// Where snapshots go, and whether covered journal segments are archived.
    pub data_dir: std::path::PathBuf,
    pub archive: bool,
    /// The latest time already in the journal: sequencer times never go below it.
    pub last_ts_ns: i64,
    /// Whether the journal and engine stages get threads of their own, or run on the
    /// gateway's thread through [`Pipeline::do_inline_work`] (better when cores are few).
    pub dedicated_threads: bool,
    /// Where the journal stage sends the journaled records, when a market data feed runs.
    pub market_data: Option<Arc<MdChannel>>,
    pub metrics: Arc<Metrics>,
    /// `pipeline.prefetch`: for the engine stage, and for the market data replica.
    pub prefetch: Prefetch,
    /// Take the state hash after every this many commands, for the log's checkpoint record
    /// (0: never; the local journal has none).
    pub checkpoint_every: u64,
    /// The intake rings of the gateways that feed the journal stage directly, besides the
    /// gateway thread's own [`Pipeline::inbound`] (the web bridge's: web/bridge.rs). The
    /// journal stage takes from every ring in turn.
    pub intakes: Vec<Arc<Ring<Request>>>,
    /// The web side's outbound ring, when it runs (web/bridge.rs, `WebDelivery`): the web's
    /// replies, and a copy of every user's and public event.
    pub web_outbound: Option<Arc<Ring<Outbound>>>,
}

impl PipelineConfig {
    /// The configuration of a pipeline run by [`Pipeline::start_simulated`]: no snapshots,
    /// no checkpoints, no market data or web side, its stages stepped by the caller; set
    /// what a run needs on top of it.
    pub fn simulated(
        ring_capacity: usize,
        batch_max: usize,
        data_dir: std::path::PathBuf,
        intakes: Vec<Arc<Ring<Request>>>,
    ) -> PipelineConfig {
        PipelineConfig {
            ring_capacity,
            batch_max,
            wait: WaitStrategy::Park,
            snapshot_every: 0,
            data_dir,
            archive: false,
            last_ts_ns: 0,
            dedicated_threads: false,
            market_data: None,
            metrics: Default::default(),
            prefetch: Prefetch::Off,
            checkpoint_every: 0,
            intakes,
            web_outbound: None,
        }
    }
}

/// Where the engine stage (and the snapshot writer) send events: the gateway thread's ring,
/// and the web side's ring when the web side runs.
#[derive(Clone)]
struct Outlets {
    gateway: Arc<Ring<Outbound>>,
    web: Option<Arc<Ring<Outbound>>>,
}

#[derive(Clone, Copy, Debug)]
enum Outlet {
    Gateway,
    Web,
}

impl Outlets {
    fn ring(&self, outlet: Outlet) -> &Ring<Outbound> {
        match (outlet, &self.web) {
            (Outlet::Web, Some(web)) => web,
            _ => &self.gateway,
        }
    }

    /// Whether an event for `target` goes to the gateway's ring, and to the web's. Users'
    /// and public events go to both (a user may have binary, FIX and web sessions; the web
    /// keeps order histories and private streams); a web session's reply to the web only.
    fn of(&self, target: Target) -> (bool, bool) {
        let web = self.web.is_some();
        match target {
            Target::Session(id) if web && crate::web::bridge::is_web_session(id) => (false, true),
            Target::Session(_) => (true, false),
            Target::User(_) | Target::Public => (true, web),
            Target::WebStatus => (false, web),
        }
    }

    /// Wakes the consumers whether or not they said they sleep.
    fn ring_always(&self) {
        self.gateway.ring_always();
        if let Some(web) = &self.web {
            web.ring_always();
        }
    }
}

/// The running pipeline: the gateway pushes into `inbound` and drains `outbound`.
pub struct Pipeline {
    pub inbound: Arc<Ring<Request>>,
    /// `inbound` first, then [`PipelineConfig::intakes`].
    intakes: Vec<Arc<Ring<Request>>>,
    pub outbound: Arc<Ring<Outbound>>,
    outlets: Outlets,
    pub shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// The stages, when they run on the caller's thread.
    inline: Option<(JournalStage, EngineStage)>,
}

impl Pipeline {
    /// Starts the threads on a recovered engine and an open journal positioned after the
    /// engine's last command.
    pub fn start(
        config: PipelineConfig,
        engine: Engine,
        journal: impl Into<CommandLog>,
        credentials: Arc<Credentials>,
    ) -> std::io::Result<Pipeline> {
        Pipeline::start_with(
            config,
            engine,
            journal.into(),
            credentials,
            Clock::System,
            false,
        )
    }

    /// The pipeline of `rialto sim` (docs/simulation.md): the same stages on `clock`, with no
    /// thread at all, not even the snapshot writer's (the simulator takes no snapshots). The
    /// caller runs the stages with [`Self::step_journal`] and [`Self::step_engine`].
    pub fn start_simulated(
        config: PipelineConfig,
        engine: Engine,
        journal: CommandLog,
        credentials: Arc<Credentials>,
        clock: Clock,
    ) -> std::io::Result<Pipeline> {
        Pipeline::start_with(config, engine, journal, credentials, clock, true)
    }

    fn start_with(
        config: PipelineConfig,
        engine: Engine,
        journal: CommandLog,
        credentials: Arc<Credentials>,
        clock: Clock,
        simulated: bool,
    ) -> std::io::Result<Pipeline> {
        let inbound = Ring::new(config.ring_capacity);
        let intakes: Vec<_> = std::iter::once(inbound.clone())
            .chain(config.intakes.iter().cloned())
            .collect();
        let to_engine = Ring::new(config.ring_capacity);
        let outbound = Ring::new(config.ring_capacity);
        let outlets = Outlets {
            gateway: outbound.clone(),
            web: config.web_outbound.clone(),
        };
        let shared = Arc::new(Shared::default());
        shared
            .applied_seq
            .store(engine.last_seq(), Ordering::SeqCst);
        shared
            .next_expiry_ns
            .store(engine.next_expiry().unwrap_or(i64::MAX), Ordering::SeqCst);
        let (snapshot_tx, snapshot_rx) = sync_channel::<SnapshotJob>(1);
        let journal_synced = journal.synced_progress();
        // There are no journal segments to archive with a replicated log.
        let archive = config.archive && journal.is_local();
        let uploader = journal.snapshot_uploader();

        let journal_stage = JournalStage {
            intakes: intakes.clone(),
            next_intake: 0,
            to_engine: to_engine.clone(),
            shared: shared.clone(),
            journal,
            seq: engine.last_seq(),
            last_ts_ns: config.last_ts_ns,
            ticked_for: i64::MAX,
            batch: Vec::with_capacity(config.batch_max),
            batch_max: config.batch_max,
            pending: VecDeque::with_capacity(MAX_APPENDS_IN_FLIGHT + 1),
            pending_items: 0,
            pending_appended: 0,
            spare: Vec::with_capacity(MAX_APPENDS_IN_FLIGHT + 1),
            wait: config.wait,
            metrics: config.metrics.clone(),
            market_data: config.market_data.clone().map(JournalTap::new),
            clock,
            #[cfg(feature = "planted-bugs")]
            ack_before_commit: false,
        };
        let engine_stage = EngineStage {
            metrics: config.metrics.clone(),
            applied: 0,
            from_journal: to_engine,
            outlets: outlets.clone(),
            shared: shared.clone(),
            engine,
            credentials,
            events: Vec::with_capacity(64),
            snapshots: snapshot_tx,
            snapshot_every: config.snapshot_every,
            journaled_since_snapshot: 0,
            wait: config.wait,
            spill: VecDeque::with_capacity(1024),
            market_data: config.market_data.clone(),
            prefetch: config.prefetch,
            in_hand: VecDeque::with_capacity(PREFETCH_LOOKAHEAD + 1),
            checkpoint_every: config.checkpoint_every,
        };
        let writer = SnapshotWriter {
            jobs: snapshot_rx,
            journal_synced,
            outlets: outlets.clone(),
            shared: shared.clone(),
            data_dir: config.data_dir.clone(),
            archive,
            uploader,
        };
        let mut threads = Vec::new();
        if !simulated {
            threads.push(
                std::thread::Builder::new()
                    .name("rialto-snapshot".into())
                    .spawn(move || writer.run())?,
            );
        }
        let inline = if config.dedicated_threads && !simulated {
            threads.push(
                std::thread::Builder::new()
                    .name("rialto-journal".into())
                    .spawn(move || journal_stage.run())?,
            );
            threads.push(
                std::thread::Builder::new()
                    .name("rialto-engine".into())
                    .spawn(move || engine_stage.run())?,
            );
            None
        } else {
            Some((journal_stage, engine_stage))
        };
        Ok(Pipeline {
            inbound,
            intakes,
            outbound,
            outlets,
            shared,
            threads,
            inline,
        })
    }

    /// Runs one duty cycle of the journal and engine stages on this thread, when they have no
    /// threads of their own (otherwise does nothing). Returns the work done.
    pub fn do_inline_work(&mut self) -> usize {
        let Some((journal, engine)) = &mut self.inline else {
            return 0;
        };
        let mut work = 0;
        if !self.shared.journal_done.load(Ordering::Relaxed) {
            work += journal.step().0;
            // Batches waiting for their appends: the next duty cycle waits for the answers,
            // so this thread must not sleep.
            work += usize::from(!journal.pending.is_empty());
        }
        if !self.shared.engine_done.load(Ordering::Relaxed) {
            work += engine.step().0;
        }
        work
    }

    /// The gateway thread's doorbell, for the other intakes' producers to ring when the
    /// journal stage runs on that thread (with threads of its own, the journal thread sets
    /// its own bell on them instead).
    pub fn set_inline_bell(&self, bell: Arc<Bell>) {
        if self.inline.is_some() {
            for intake in &self.intakes[1..] {
                intake.set_bell(bell.clone());
            }
        }
    }

    /// Whether requests wait in another gateway's intake for the stages on this thread (the
    /// caller must not sleep then).
    pub fn inline_intake_waiting(&self) -> bool {
        self.inline.is_some() && self.intakes[1..].iter().any(|intake| !intake.is_empty())
    }

    /// One duty cycle of the journal stage alone (inline stages only; the simulator's step).
    pub fn step_journal(&mut self) -> usize {
        match &mut self.inline {
            Some((journal, _)) if !self.shared.journal_done.load(Ordering::Relaxed) => {
                journal.step().0
            }
            _ => 0,
        }
    }

    /// One duty cycle of the engine stage alone (inline stages only; the simulator's step).
    pub fn step_engine(&mut self) -> usize {
        match &mut self.inline {
            Some((_, engine)) if !self.shared.engine_done.load(Ordering::Relaxed) => {
                engine.step().0
            }
            _ => 0,
        }
    }

    /// The engine, when the stages run on the caller's thread (the simulator's checkers).
    pub fn inline_engine(&self) -> Option<&Engine> {
        self.inline.as_ref().map(|(_, stage)| &stage.engine)
    }

    /// Plants the bug "acknowledge before the journal commit": the journal stage passes each
    /// batch to the engine before its commit. For the simulator's own test: returns whether it
    /// was planted, which only a build with the `planted-bugs` feature can do.
    pub fn plant_ack_before_commit(&mut self) -> bool {
        #[cfg(feature = "planted-bugs")]
        if let Some((journal, _)) = &mut self.inline {
            journal.ack_before_commit = true;
            return true;
        }
        false
    }

    /// Applies commands the server issues itself (the demo venue, a benchmark's set-up): each
    /// is journaled like any other and its reply dropped. Waits for room in the inbound ring
    /// and then until all are applied, running the stages on this thread when they share it.
    pub fn apply_system_commands(
        &mut self,
        commands: impl IntoIterator<Item = Command>,
        timeout: std::time::Duration,
    ) -> Result<(), String> {
        let started = std::time::Instant::now();
        let mut target = self.shared.applied_seq.load(Ordering::SeqCst);
        for cmd in commands {
            let mut request = Request {
                session: SYSTEM_SESSION,
                reply: Reply::Admin { request: 0 },
                op: Op::Command(cmd),
            };
            while let Err(back) = self.inbound.try_push(request) {
                request = back;
                self.wait_a_moment(started, timeout)?;
            }
            target += 1;
        }
        self.inbound.ring_always();
        while self.shared.applied_seq.load(Ordering::SeqCst) < target {
            self.wait_a_moment(started, timeout)?;
        }
        Ok(())
    }

    /// One pause of [`Self::apply_system_commands`]: run the inline stages or yield.
    fn wait_a_moment(
        &mut self,
        started: std::time::Instant,
        timeout: std::time::Duration,
    ) -> Result<(), String> {
        if self.shared.has_failed() {
            return Err("the pipeline failed".into());
        }
        if started.elapsed() >= timeout {
            return Err(format!("system commands not applied within {timeout:?}"));
        }
        self.inbound.ring_always();
        if self.do_inline_work() == 0 {
            std::thread::yield_now();
        }
        Ok(())
    }

    /// The gateway will push nothing more: the journal drains, syncs and stops, then the
    /// engine drains and stops.
    pub fn close_intake(&self) {
        self.shared.intake_closed.store(true, Ordering::SeqCst);
        for intake in &self.intakes {
            intake.ring_always();
        }
    }

    /// Whether everything pushed so far has been applied and its replies queued.
    pub fn drained(&self) -> bool {
        self.shared.engine_done.load(Ordering::SeqCst)
    }

    /// Waits for the threads (after [`Self::close_intake`]); the error of the first failure.
    pub fn join(mut self) -> Result<(), String> {
        // Inline stages finish on this thread: drain them (the gateway has stopped pushing).
        while self.inline.is_some() && !self.shared.engine_done.load(Ordering::SeqCst) {
            if self.do_inline_work() == 0 {
                std::thread::yield_now();
            }
            while self.outbound.pop().is_some() {}
            if let Some(web) = &self.outlets.web {
                while web.pop().is_some() {}
            }
        }
        // Dropping the engine stage closes the snapshot writer's channel.
        self.inline = None;
        for t in self.threads {
            if t.join().is_err() {
                self.shared
                    .fail("a pipeline thread panicked (see the log above)".into());
            }
        }
        match self.shared.failure.lock() {
            Ok(f) => f.clone().map_or(Ok(()), Err),
            Err(_) => Err("a pipeline thread panicked".into()),
        }
    }
}

/// The wall clock, ns since the Unix epoch: the sequencer's time, and every other wall time
/// the server reads.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The clock the journal stage stamps batches with and decides expiry ticks by: the wall
/// clock in every server, a time the simulator sets and moves in `rialto sim`
/// (docs/simulation.md).
#[derive(Clone, Debug, Default)]
pub enum Clock {
    #[default]
    System,
    /// ns since the epoch, as the simulator last set it.
    Simulated(Arc<AtomicI64>),
}

impl Clock {
    #[inline]
    pub fn now_ns(&self) -> i64 {
        match self {
            Clock::System => now_ns(),
            Clock::Simulated(t) => t.load(Ordering::Relaxed),
        }
    }
}

// ----- journal thread ------------------------------------------------------------------------

struct JournalStage {
    /// The gateways' rings, taken from in turn: each batch starts at the ring after the one
    /// the last batch started at, and takes from a ring until it is empty, so that a flood on
    /// one gateway cannot shut another out.
    intakes: Vec<Arc<Ring<Request>>>,
    next_intake: usize,
    to_engine: Arc<Ring<Sequenced>>,
    shared: Arc<Shared>,
    journal: CommandLog,
    seq: u64,
    last_ts_ns: i64,
    /// The expiry time the last expiry tick was sent for: one tick per expiry.
    ticked_for: i64,
    batch: Vec<Sequenced>,
    batch_max: usize,
    /// Batches handed to the log and not passed on yet, oldest first: a batch goes on to the
    /// engine (and so is acknowledged) only once its append and every earlier one committed.
    pending: VecDeque<Pending>,
    /// Requests held in `pending` (they will need room in the engine ring).
    pending_items: usize,
    /// How many of `pending` were appended to the log (the others hold queries only).
    pending_appended: usize,
    /// Emptied batch buffers, for reuse.
    spare: Vec<Vec<Sequenced>>,
    wait: WaitStrategy,
    metrics: Arc<Metrics>,
    market_data: Option<JournalTap>,
    clock: Clock,
    /// The planted bug "acknowledge before the journal commit" (only the simulator sets it).
    #[cfg(feature = "planted-bugs")]
    ack_before_commit: bool,
}

impl JournalStage {
    fn run(mut self) {
        let bell = Bell::for_thread(std::thread::current());
        for intake in &self.intakes {
            intake.set_bell(bell.clone());
        }
        let mut idler = Idler::new(self.wait);
        loop {
            let (work, done) = self.step();
            if done {
                break;
            }
            let intakes = &self.intakes;
            // With market data spilled, look again soon: its thread drains without ringing;
            // with batches waiting for their appends, the next step waits for the answers.
            let busy = self.md_spilled() || !self.pending.is_empty();
            idler.idle_thread(work, &bell, MAX_SLEEP, || {
                busy || intakes.iter().any(|intake| !intake.is_empty())
            });
        }
    }

    /// One duty cycle, then whether this stage has finished (drained after intake closed, or
    /// failed). Finishing syncs the journal and tells the engine stage.
    fn step(&mut self) -> (usize, bool) {
        // Read the flag before draining: intake closed and then found empty means done.
        let closing = self.shared.intake_closed.load(Ordering::SeqCst);
        let work = match self.do_work() {
            Ok(n) => n,
            Err(e) => {
                self.shared.fail(format!("journal write failed: {e}"));
                0
            }
        };
        let drained =
            work == 0 && self.intakes_empty() && !self.md_spilled() && self.pending.is_empty();
        let done = self.shared.has_failed() || (closing && drained);
        if done {
            if let Err(e) = self.journal.sync() {
                self.shared
                    .fail(format!("journal sync at shutdown failed: {e}"));
            }
            self.shared.journal_done.store(true, Ordering::SeqCst);
            self.to_engine.ring_always();
        }
        (work, done)
    }

    fn intakes_empty(&self) -> bool {
        self.intakes.iter().all(|intake| intake.is_empty())
    }

    /// Puts a request into the batch being built with its sequence number, appending it to
    /// the log if it is journaled. Returns the commands appended (0 or 1).
    #[inline]
    fn sequence(&mut self, request: Request, ts_ns: i64) -> usize {
        let journaled = match &request.op {
            Op::Command(cmd) if is_journaled(&request.op) => {
                self.seq += 1;
                self.journal.append(self.seq, ts_ns, cmd);
                1
            }
            _ => 0,
        };
        self.batch.push(Sequenced {
            request,
            seq: self.seq,
            ts_ns,
        });
        journaled
    }

    fn md_spilled(&self) -> bool {
        self.market_data
            .as_ref()
            .is_some_and(|tap| tap.spilled() > 0)
    }

    /// Take a batch, stamp it, make it durable, pass it on.
    fn do_work(&mut self) -> std::io::Result<usize> {
        let md_moved = match &mut self.market_data {
            Some(tap) if tap.spilled() > 0 => tap.hand_off(),
            _ => 0,
        };
        Ok(md_moved + self.journal_batch()?)
    }

    fn journal_batch(&mut self) -> std::io::Result<usize> {
        // Batches whose appends were answered go on; with as many appends in flight as the
        // log allows, or nothing new to send, wait for the oldest one's answer.
        let mut passed = 0;
        if !self.pending.is_empty() {
            let at_bound = self.journal.in_flight() >= self.journal.max_in_flight();
            self.journal.poll(at_bound || self.intakes_empty())?;
            passed = self.pass_on_committed();
        }
        // This stage is the engine ring's only producer: take no more than fits beside the
        // batches still waiting for their appends, so that passing them on never waits (the
        // engine may run on this very thread).
        let room =
            (self.to_engine.capacity() - self.to_engine.len()).saturating_sub(self.pending_items);
        // Market data too far behind (its spill at its bound): take nothing until it catches
        // up, so that its queue stays bounded; senders wait in the inbound ring.
        let md_full = self.market_data.as_ref().is_some_and(JournalTap::is_full);
        let take = if md_full { 0 } else { self.batch_max.min(room) };
        let intakes_empty = self.intakes_empty();
        let tick = if intakes_empty {
            self.expiry_tick()
        } else {
            None
        };
        // The engine's checkpoint hashes go into the log (a replicated one) behind the
        // batches they follow.
        while let Some((seq, hash)) = self.shared.checkpoints.pop() {
            self.journal.checkpoint(seq, &hash)?;
        }
        if take == 0 || (intakes_empty && tick.is_none()) {
            if self.pending.is_empty() {
                // Quiet: in fsync mode, bring the journal's checkpoint up to the last commit
                // (with a replicated log: stop if the lease is lost).
                self.journal.on_quiet(std::time::Instant::now())?;
            }
            return Ok(passed);
        }
        // One time for the whole batch: the moment the sequencer took it. Time never runs
        // backwards in the log, whatever the wall clock does.
        let ts_ns = self.clock.now_ns().max(self.last_ts_ns);
        self.last_ts_ns = ts_ns;
        let mut journaled = 0;
        if let Some(request) = tick {
            journaled += self.sequence(request, ts_ns);
        }
        // Ring by ring from the one after the last batch's first, each until it is empty or
        // the batch is full.
        let rings = self.intakes.len();
        let first = self.next_intake;
        self.next_intake = if first + 1 == rings { 0 } else { first + 1 };
        let mut ring = first;
        for _ in 0..rings {
            while self.batch.len() < take {
                let Some(request) = self.intakes[ring].pop() else {
                    break;
                };
                journaled += self.sequence(request, ts_ns);
            }
            if self.batch.len() >= take {
                break;
            }
            ring = if ring + 1 == rings { 0 } else { ring + 1 };
        }
        let n = self.batch.len();
        let started = std::time::Instant::now();
        if journaled > 0 {
            if let Some(tap) = &mut self.market_data {
                // Market data replays the batch as journaled (copied now: the commit may
                // reuse the buffer). Its thread applies a record only once the engine has,
                // so only once it is durable as the mode says.
                tap.send(self.journal.uncommitted());
            }
            #[cfg(feature = "planted-bugs")]
            if self.ack_before_commit {
                self.pass_on();
            }
            // Group commit: one write (and in fsync mode one fsync) for the whole batch; with
            // JetStream one message, sent now and acknowledged later.
            self.metrics.log_appended(self.journal.uncommitted().len());
            self.journal.submit()?;
            if let Some(tap) = &mut self.market_data {
                tap.hand_off();
            }
        }
        if !self.batch.is_empty() {
            let batch = std::mem::replace(&mut self.batch, self.spare.pop().unwrap_or_default());
            self.pending.push_back(Pending {
                batch,
                appended: journaled > 0,
                started,
            });
            self.pending_items += n;
            self.pending_appended += usize::from(journaled > 0);
        }
        Ok(passed + self.pass_on_committed() + n)
    }

    /// Passes on, in order, the batches at the front whose appends committed (and the
    /// query-only batches between them).
    fn pass_on_committed(&mut self) -> usize {
        let mut committed = self.pending_appended - self.journal.batches_in_flight();
        let mut passed = 0;
        while let Some(front) = self.pending.front() {
            if front.appended {
                if committed == 0 {
                    break;
                }
                committed -= 1;
                self.pending_appended -= 1;
                self.metrics
                    .journal_commit
                    .record(front.started.elapsed().as_nanos() as u64);
            }
            let Some(mut front) = self.pending.pop_front() else {
                break;
            };
            self.pending_items -= front.batch.len();
            passed += front.batch.len();
            for item in front.batch.drain(..) {
                if self.to_engine.try_push(item).is_err() {
                    unreachable!("the engine ring had room for the batch");
                }
            }
            self.spare.push(front.batch);
        }
        if passed > 0 {
            self.to_engine.ring();
        }
        passed
    }

    /// Passes the batch being built to the engine stage (the planted bug only).
    #[cfg(feature = "planted-bugs")]
    fn pass_on(&mut self) {
        let n = self.batch.len();
        for item in self.batch.drain(..) {
            if self.to_engine.try_push(item).is_err() {
                unreachable!("the engine ring had room for the batch");
            }
        }
        if n > 0 {
            self.to_engine.ring();
        }
    }
}

/// A batch handed to the log, waiting for its append to commit.
struct Pending {
    batch: Vec<Sequenced>,
    /// Whether it holds commands appended to the log (else queries only).
    appended: bool,
    /// When it was handed to the log (`rialto_journal_commit_seconds` measures from here).
    started: std::time::Instant,
}

impl JournalStage {
    /// A `tick` of the server's own when an order's expiry has come and nothing else is
    /// coming in: expiry happens at the start of a command, and a quiet venue has none.
    fn expiry_tick(&mut self) -> Option<Request> {
        let due = self.shared.next_expiry_ns.load(Ordering::Acquire);
        if due == self.ticked_for || due > self.clock.now_ns() {
            return None;
        }
        self.ticked_for = due;
        Some(Request {
            session: SYSTEM_SESSION,
            reply: Reply::Admin { request: 0 },
            op: Op::Command(Command::Tick),
        })
    }
}

// ----- engine thread -------------------------------------------------------------------------

/// The engine command an item carries, if it carries one (not a query or a snapshot request).
fn command_of(item: &Sequenced) -> Option<&Command> {
    match &item.request.op {
        Op::Command(cmd) => Some(cmd),
        _ => None,
    }
}

struct EngineStage {
    metrics: Arc<Metrics>,
    /// Commands applied, for sampling latencies.
    applied: u64,
    from_journal: Arc<Ring<Sequenced>>,
    outlets: Outlets,
    shared: Arc<Shared>,
    engine: Engine,
    credentials: Arc<Credentials>,
    /// Reused for every command's events.
    events: Vec<OwnedEvent>,
    snapshots: SyncSender<SnapshotJob>,
    snapshot_every: u64,
    journaled_since_snapshot: u64,
    wait: WaitStrategy,
    /// Replies that found their outbound ring full, and every one after them, in order.
    spill: VecDeque<(Outlet, Outbound)>,
    /// Rung after each round: the market data thread waits for the engine to apply what it
    /// replays.
    market_data: Option<Arc<MdChannel>>,
    prefetch: Prefetch,
    /// Commands taken from `from_journal` and not applied yet, in order: the next ones, whose
    /// memory the engine prefetches while it applies the one before.
    in_hand: VecDeque<Sequenced>,
    checkpoint_every: u64,
}

/// The journal → market data hand-off: chunks of journal records, exactly as the journal
/// stage encoded them, one way; their emptied buffers back. The market data thread replays
/// them on a replica of the engine (see `feed`), so the engine itself does nothing for
/// market data.
pub struct MdChannel {
    pub chunks: Arc<Ring<Vec<u8>>>,
    empties: crossbeam_queue::ArrayQueue<Vec<u8>>,
    /// Bytes of records that may wait in a tap's spill queue (`market_data.max_spill_mib`).
    max_spill_bytes: usize,
}

impl MdChannel {
    pub fn new(capacity: usize, max_spill_bytes: usize) -> Arc<MdChannel> {
        Arc::new(MdChannel {
            chunks: Ring::new(capacity),
            empties: crossbeam_queue::ArrayQueue::new(capacity),
            max_spill_bytes,
        })
    }

    /// Gives a processed chunk's buffer back for reuse.
    pub fn recycle(&self, mut chunk: Vec<u8>) {
        chunk.clear();
        let _ = self.empties.push(chunk);
    }
}

/// The journal stage's side of the market data channel: one copy of each batch's encoded
/// records. A chunk that finds the ring full waits in a spill queue, in order, so nothing is
/// skipped; the spill is bounded: once it holds `max_spill_bytes`, [`Self::is_full`] tells
/// the journal stage (or a replica's follower) to take nothing new until the market data
/// thread has caught up. One batch may take it past the bound, never more.
pub struct JournalTap {
    channel: Arc<MdChannel>,
    spill: VecDeque<Vec<u8>>,
    spilled_bytes: usize,
}

impl JournalTap {
    pub fn new(channel: Arc<MdChannel>) -> JournalTap {
        JournalTap {
            channel,
            spill: VecDeque::new(),
            spilled_bytes: 0,
        }
    }

    /// Chunks waiting for room in the ring.
    pub fn spilled(&self) -> usize {
        self.spill.len()
    }

    /// Whether the spill holds its bound: take no new commands until it drains.
    pub fn is_full(&self) -> bool {
        self.spilled_bytes >= self.channel.max_spill_bytes
    }

    /// Queues a copy of a batch's records.
    pub fn send(&mut self, records: &[u8]) {
        if records.is_empty() {
            return;
        }
        let mut chunk = self.channel.empties.pop().unwrap_or_default();
        chunk.extend_from_slice(records);
        self.spilled_bytes += chunk.len();
        self.spill.push_back(chunk);
    }

    /// Moves queued chunks into the ring while there is room. Returns the chunks moved.
    pub fn hand_off(&mut self) -> usize {
        let mut moved = 0;
        while let Some(chunk) = self.spill.pop_front() {
            let len = chunk.len();
            if let Err(chunk) = self.channel.chunks.try_push(chunk) {
                self.spill.push_front(chunk);
                break;
            }
            self.spilled_bytes -= len;
            moved += 1;
        }
        if moved > 0 {
            self.channel.chunks.ring();
        }
        moved
    }
}

impl EngineStage {
    fn run(mut self) {
        let bell = Bell::for_thread(std::thread::current());
        self.from_journal.set_bell(bell.clone());
        let mut idler = Idler::new(self.wait);
        loop {
            let (work, done) = self.step();
            if done {
                break;
            }
            let ring = &self.from_journal;
            let spilled = !self.spill.is_empty();
            let in_hand = !self.in_hand.is_empty();
            // With replies spilled, look again soon: the gateway drains without ringing.
            idler.idle_thread(work, &bell, MAX_SLEEP, || {
                spilled || in_hand || !ring.is_empty()
            });
        }
    }

    /// One duty cycle, then whether this stage has finished (drained after the journal
    /// stage finished, or failed).
    fn step(&mut self) -> (usize, bool) {
        let closing = self.shared.journal_done.load(Ordering::SeqCst);
        let work = self.do_work();
        let drained = work == 0
            && self.in_hand.is_empty()
            && self.from_journal.is_empty()
            && self.spill.is_empty();
        let done = self.shared.has_failed() || (closing && drained);
        if done {
            self.shared.engine_done.store(true, Ordering::SeqCst);
            self.outlets.ring_always();
        }
        (work, done)
    }

    /// Moves spilled replies out, then applies commands while the replies keep flowing.
    fn do_work(&mut self) -> usize {
        let mut work = 0;
        while let Some((outlet, out)) = self.spill.pop_front() {
            if let Err(out) = self.outlets.ring(outlet).try_push(out) {
                self.spill.push_front((outlet, out));
                break;
            }
            work += 1;
        }
        let mut applied = 0;
        let prefetch = self.prefetch.now(&self.engine);
        while self.spill.is_empty() && applied < 1024 {
            if prefetch {
                // Keep the next commands in hand, as far ahead as the prefetch reads.
                while self.in_hand.len() <= PREFETCH_LOOKAHEAD {
                    let Some(item) = self.from_journal.pop() else {
                        break;
                    };
                    self.in_hand.push_back(item);
                }
            }
            let Some(item) = self.in_hand.pop_front().or_else(|| self.from_journal.pop()) else {
                break;
            };
            if prefetch {
                let in_hand = &self.in_hand;
                self.engine.prefetch_upcoming(|ahead| match ahead {
                    0 => command_of(&item),
                    n => in_hand.get(n - 1).and_then(command_of),
                });
            }
            self.handle(item);
            applied += 1;
        }
        if applied > 0 {
            self.shared
                .applied_seq
                .store(self.engine.last_seq(), Ordering::Release);
            self.shared.next_expiry_ns.store(
                self.engine.next_expiry().unwrap_or(i64::MAX),
                Ordering::Release,
            );
            if let Some(md) = &self.market_data {
                md.chunks.ring();
            }
        }
        if work + applied > 0 {
            self.outlets.gateway.ring();
            if let Some(web) = &self.outlets.web {
                web.ring();
            }
        }
        work + applied
    }

    /// Queues a reply, into the gateway's ring, the web's, or both ([`Outlets::of`]). It never
    /// waits for a gateway (which may run on this very thread): a reply that finds its ring
    /// full waits in the spill queue with every one after it, and no further command is
    /// applied until the spill is out. One command's replies bound the spill.
    fn send(&mut self, target: Target, event: Event) {
        if target == Target::Session(SYSTEM_SESSION) {
            return;
        }
        match self.outlets.of(target) {
            (true, true) => {
                let copy = event.clone();
                self.push(
                    Outlet::Web,
                    Outbound {
                        target,
                        event: copy,
                    },
                );
                self.push(Outlet::Gateway, Outbound { target, event });
            }
            (true, false) => self.push(Outlet::Gateway, Outbound { target, event }),
            (false, true) => self.push(Outlet::Web, Outbound { target, event }),
            (false, false) => {}
        }
    }

    // Inlined: an `Outbound` is 192 bytes, and a call would copy it once more on its way
    // into the ring.
    #[inline(always)]
    fn push(&mut self, outlet: Outlet, out: Outbound) {
        if !self.spill.is_empty() {
            self.spill.push_back((outlet, out));
        } else if let Err(out) = self.outlets.ring(outlet).try_push(out) {
            self.spill.push_back((outlet, out));
        }
    }

    fn handle(&mut self, item: Sequenced) {
        let Sequenced {
            request,
            seq,
            ts_ns,
        } = item;
        let session = Target::Session(request.session);
        let cmd = match &request.op {
            Op::Command(cmd) => cmd,
            Op::ListSymbols => {
                let Reply::Symbols { request } = request.reply else {
                    return;
                };
                let mut symbols = self.engine.symbols_by_name();
                symbols.truncate(rialto_wire::MAX_SYMBOL_LIST_ITEMS);
                self.send(session, Event::SymbolList { request, symbols });
                return;
            }
            Op::ListUsers => {
                let Reply::Users { request } = request.reply else {
                    return;
                };
                let mut users = self.engine.users();
                users.truncate(rialto_wire::MAX_USER_LIST_ITEMS);
                self.send(session, Event::UserList { request, users });
                return;
            }
            Op::VenueSettings => {
                let Reply::Settings { request } = request.reply else {
                    return;
                };
                let mut symbols: Vec<_> = self
                    .engine
                    .symbols_by_name()
                    .into_iter()
                    .filter_map(|(id, _)| Some((id, self.engine.symbol_status(id)?)))
                    .collect();
                symbols.sort_by_key(|(id, _)| *id);
                symbols.truncate(rialto_wire::MAX_SYMBOL_LIST_ITEMS);
                let msg = Event::VenueSettings {
                    request,
                    seq,
                    order_id_window_ns: self.engine.order_id_window(),
                    symbols,
                };
                self.send(session, msg);
                return;
            }
            &Op::OrderStatus { user, order } => {
                let Reply::OrderStatus { request } = request.reply else {
                    return;
                };
                let (state, remaining) = match self.engine.order_remaining(user, order) {
                    Some(remaining) => (OrderState::Open, remaining),
                    None if self.engine.order_id_taken(user, order) => (OrderState::Ended, 0),
                    None => (OrderState::Unknown, 0),
                };
                let msg = Event::OrderStatus {
                    request,
                    seq,
                    order,
                    state,
                    remaining,
                };
                self.send(session, msg);
                return;
            }
            Op::TakeSnapshot => {
                let asked_by = match request.reply {
                    Reply::Snapshot { request: id } => Some((request.session, id)),
                    _ => None,
                };
                self.take_snapshot(asked_by);
                return;
            }
        };
        self.events.clear();
        self.applied += 1;
        // A query is not journaled, so it must change nothing: it carries no time, or it would
        // move the engine's clock (and run expiries) where neither the market data replica nor
        // a recovery from the journal ever would.
        let ts_ns = if is_journaled(&request.op) {
            ts_ns
        } else {
            i64::MIN
        };
        let result = if self.applied.is_multiple_of(SAMPLE_EVERY) {
            let started = std::time::Instant::now();
            let result = self.engine.apply(seq, ts_ns, cmd, &mut self.events);
            let ns = started.elapsed().as_nanos() as u64;
            self.metrics.engine_latency.record(ns);
            result
        } else {
            self.engine.apply(seq, ts_ns, cmd, &mut self.events)
        };
        self.metrics.command(cmd, result);
        if is_journaled(&request.op) {
            self.journaled_since_snapshot += 1;
            if self.checkpoint_every > 0 && seq.is_multiple_of(self.checkpoint_every) {
                // Full only if the journal stage stopped taking them: it fails then anyway.
                let _ = self
                    .shared
                    .checkpoints
                    .push((seq, self.engine.state_hash()));
            }
        }
        if let (Ok(()), Command::AddSymbol(spec)) = (result, cmd) {
            // Before the reply: whoever hears that the symbol was added can trade it on
            // every gateway.
            self.announce_symbol(seq, ts_ns, spec.symbol.as_str());
        }
        self.reply(session, request.reply, seq, ts_ns, cmd, result);
        if let (
            Ok(()),
            Command::SetBand { symbol, .. }
            | Command::SetRefPrice { symbol, .. }
            | Command::SetMarkPrice { symbol, .. },
        ) = (result, cmd)
        {
            self.announce_band(seq, *symbol);
        }
        if self.snapshot_every > 0 && self.journaled_since_snapshot >= self.snapshot_every {
            self.take_snapshot(None);
        }
    }
}

impl EngineStage {
    /// A symbol's band, reference price or mark changed: its status, to the web's `status`
    /// channel.
    fn announce_band(&mut self, seq: u64, symbol: SymbolId) {
        if let Some(status) = self.engine.symbol_status(symbol) {
            let msg = Event::VenueSettings {
                request: 0,
                seq,
                order_id_window_ns: self.engine.order_id_window(),
                symbols: vec![(symbol, status)],
            };
            self.send(Target::WebStatus, msg);
        }
    }

    /// A symbol was added: to every gateway (the FIX gateway takes it into its instrument
    /// list). A symbol's terms never change once added, so this is the only symbol event.
    fn announce_symbol(&mut self, seq: u64, ts_ns: i64, name: &str) {
        let symbol = self.engine.symbol_id(name);
        if let Some(&spec) = self.engine.symbol(symbol) {
            let msg = Event::SymbolAdded {
                seq,
                ts_ns,
                symbol,
                spec,
            };
            self.send(Target::Public, msg);
        }
    }

    /// Answers one applied command: the sender's reply first, then the events, so a trader
    /// sees Accepted before the fills it caused.
    fn reply(
        &mut self,
        session: Target,
        reply: Reply,
        seq: u64,
        ts_ns: i64,
        cmd: &Command,
        result: Result<(), Reason>,
    ) {
        let ext = matches!(reply, Reply::ReportExt { .. });
        match reply {
            Reply::Order { order, kind } => {
                let msg = match result {
                    Ok(()) => Event::Accepted {
                        seq,
                        ts_ns,
                        order,
                        kind,
                    },
                    Err(reason) => Event::Rejected {
                        seq,
                        ts_ns,
                        order,
                        kind,
                        reason,
                    },
                };
                self.send(session, msg);
            }
            Reply::Admin { request } => {
                self.send(
                    session,
                    Event::AdminResult {
                        request,
                        seq,
                        result,
                    },
                );
            }
            Reply::AddUser { request } => {
                let msg = match (result, cmd) {
                    (Ok(()), Command::AddUser { user }) => Event::UserAdded {
                        request,
                        seq,
                        user: *user,
                        secret: Secret::new(self.credentials.user_secret(*user).as_bytes())
                            .expect("a derived secret is 32 bytes"),
                    },
                    _ => Event::AdminResult {
                        request,
                        seq,
                        result,
                    },
                };
                self.send(session, msg);
            }
            Reply::Report { request }
            | Reply::ReportExt { request }
            | Reply::VenueReport { request }
            | Reply::Book { request } => {
                let msg = match self.events.pop() {
                    Some(OwnedEvent::UserReport(mut report)) => {
                        let margins = report_margins(&self.engine, &report);
                        // Lists are capped to fit one frame (docs/protocol.md).
                        report.balances.truncate(rialto_wire::MAX_REPORT_BALANCES);
                        report.positions.truncate(rialto_wire::MAX_REPORT_POSITIONS);
                        if ext {
                            report.orders.truncate(rialto_wire::MAX_REPORT_EXT_ORDERS);
                            Event::ReportExt {
                                request,
                                seq,
                                report,
                                margins,
                            }
                        } else {
                            report.orders.truncate(rialto_wire::MAX_REPORT_ORDERS);
                            Event::Report {
                                request,
                                seq,
                                report,
                                margins,
                            }
                        }
                    }
                    Some(OwnedEvent::VenueReport(mut totals)) => {
                        totals.truncate(rialto_wire::MAX_VENUE_CURRENCIES);
                        Event::VenueReport { request, totals }
                    }
                    Some(OwnedEvent::Book { symbol, bids, asks }) => Event::Book {
                        request,
                        seq,
                        symbol,
                        bids,
                        asks,
                    },
                    _ => Event::AdminResult {
                        request,
                        seq,
                        result,
                    },
                };
                self.send(session, msg);
                return;
            }
            Reply::Symbols { request }
            | Reply::Users { request }
            | Reply::OrderStatus { request }
            | Reply::Snapshot { request }
            | Reply::Settings { request } => {
                self.send(
                    session,
                    Event::AdminResult {
                        request,
                        seq,
                        result,
                    },
                );
            }
        }
        for i in 0..self.events.len() {
            match self.events[i] {
                OwnedEvent::Trade(t) => {
                    let common = |order, side, fee, liquidity| Event::Trade {
                        seq,
                        ts_ns,
                        order,
                        symbol: t.symbol,
                        side,
                        price: t.price,
                        qty: t.qty,
                        fee,
                        liquidity,
                    };
                    let maker = common(
                        t.maker_order,
                        t.taker_side.opposite(),
                        t.maker_fee,
                        Liquidity::Maker,
                    );
                    let taker = common(t.taker_order, t.taker_side, t.taker_fee, Liquidity::Taker);
                    self.send(Target::User(t.maker_user), maker);
                    self.send(Target::User(t.taker_user), taker);
                }
                OwnedEvent::Cancelled(c) => {
                    let msg = Event::Cancelled {
                        seq,
                        ts_ns,
                        order: c.order,
                        symbol: c.symbol,
                        side: c.side,
                        qty: c.qty,
                        reason: c.reason,
                    };
                    self.send(Target::User(c.user), msg);
                }
                OwnedEvent::Amended(a) => {
                    let msg = Event::Amended {
                        seq,
                        ts_ns,
                        order: a.order,
                        symbol: a.symbol,
                        side: a.side,
                        price: a.price,
                        stop_price: a.stop_price,
                        remaining: a.qty,
                        priority: a.priority,
                    };
                    self.send(Target::User(a.user), msg);
                }
                OwnedEvent::Triggered(t) => {
                    let msg = Event::Triggered {
                        seq,
                        ts_ns,
                        order: t.order,
                        symbol: t.symbol,
                        side: t.side,
                        stop_price: t.stop_price,
                    };
                    self.send(Target::User(t.user), msg);
                }
                OwnedEvent::Phase(p) => {
                    let msg = Event::PhaseChanged {
                        seq,
                        ts_ns,
                        symbol: p.symbol,
                        phase: p.phase,
                    };
                    self.send(Target::Public, msg);
                }
                OwnedEvent::Auction(a) => {
                    let msg = Event::Auction {
                        seq,
                        ts_ns,
                        symbol: a.symbol,
                        price: a.price,
                        qty: a.qty,
                        imbalance: a.imbalance,
                    };
                    self.send(Target::Public, msg);
                }
                OwnedEvent::Liquidated(l) => {
                    let msg = Event::Liquidated {
                        seq,
                        ts_ns,
                        currency: l.currency,
                        equity: l.equity,
                        maintenance: l.maintenance,
                        shortfall: l.shortfall,
                    };
                    self.send(Target::User(l.user), msg);
                }
                // Queries are answered above; no other command reports these.
                OwnedEvent::Book { .. }
                | OwnedEvent::UserReport(_)
                | OwnedEvent::VenueReport(_) => {}
            }
        }
    }

    /// Encodes the state here (the only pause matching sees) and leaves compression and disk
    /// to the snapshot writer. One snapshot at a time: a request while one is being written is
    /// refused with `limit_exceeded`.
    fn take_snapshot(&mut self, asked_by: Option<(SessionId, u64)>) {
        self.journaled_since_snapshot = 0;
        let seq = self.engine.last_seq();
        let job = SnapshotJob {
            seq,
            bytes: self.engine.encode_snapshot(),
            asked_by,
        };
        match self.snapshots.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(job)) => {
                tracing::warn!(
                    seq,
                    "snapshot skipped: the previous one is still being written"
                );
                if let Some((session, request)) = job.asked_by {
                    let result = Err(Reason::LimitExceeded);
                    self.send(
                        Target::Session(session),
                        Event::AdminResult {
                            request,
                            seq,
                            result,
                        },
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                self.shared.fail("the snapshot writer stopped".into());
            }
        }
    }
}

// ----- snapshot writer -----------------------------------------------------------------------

struct SnapshotJob {
    seq: u64,
    bytes: Vec<u8>,
    asked_by: Option<(SessionId, u64)>,
}

struct SnapshotWriter {
    jobs: Receiver<SnapshotJob>,
    /// How far the journal is synced (`None` under durability `none`, which syncs only at a
    /// roll or a stop): a snapshot waits for the journal to be synced through its seq.
    journal_synced: Option<rialto_journal::SyncedProgress>,
    outlets: Outlets,
    shared: Arc<Shared>,
    data_dir: std::path::PathBuf,
    archive: bool,
    /// With JetStream: puts each snapshot into the venue's bucket and trims the stream.
    uploader: Option<crate::snapstore::Uploader>,
}

impl SnapshotWriter {
    fn run(self) {
        // Ends when the engine thread drops its sender.
        while let Ok(job) = self.jobs.recv() {
            let Some(state_hash) = Engine::snapshot_state_hash(&job.bytes) else {
                self.shared
                    .fail("the engine produced a malformed snapshot".into());
                return;
            };
            // A snapshot on disk ahead of the journal it follows would, after a power loss in
            // batch mode, make the journal look cut short; the journal syncs what the engine
            // applied within its batch interval, so the wait is short.
            if let Some(synced) = &self.journal_synced {
                while synced.get() < job.seq {
                    if self.shared.has_failed() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            let started = std::time::Instant::now();
            let written =
                rialto_journal::write_snapshot(&self.data_dir, job.seq, state_hash, &job.bytes);
            let msg = match written {
                Ok(path) => {
                    let ms = started.elapsed().as_millis() as u64;
                    tracing::info!(seq = job.seq, path = %path.display(), ms, "snapshot written");
                    self.tidy();
                    if let Some(uploader) = &self.uploader {
                        match std::fs::read(&path) {
                            Ok(file_bytes) => uploader.upload(job.seq, &state_hash, &file_bytes),
                            Err(e) => tracing::error!(
                                seq = job.seq,
                                "the snapshot stays local only: reading it back failed: {e}"
                            ),
                        }
                    }
                    Event::SnapshotTaken {
                        request: job.asked_by.map_or(0, |(_, r)| r),
                        seq: job.seq,
                        state_hash,
                    }
                }
                Err(e) => {
                    // The journal still holds everything: a failed snapshot loses nothing.
                    tracing::error!(seq = job.seq, "snapshot failed: {e}");
                    Event::Error {
                        code: ErrorCode::Internal,
                        message: format!("snapshot at seq {} failed: {e}", job.seq),
                    }
                }
            };
            if let Some((session, _)) = job.asked_by {
                let shared = &self.shared;
                let target = Target::Session(session);
                let ring = match self.outlets.of(target) {
                    (_, true) => self.outlets.ring(Outlet::Web),
                    _ => self.outlets.ring(Outlet::Gateway),
                };
                let out = Outbound { target, event: msg };
                if ring.push_waiting(out, || shared.has_failed()).is_ok() {
                    ring.ring();
                }
            }
        }
    }

    /// Keeps the newest snapshots and, if configured, archives the journal they cover.
    fn tidy(&self) {
        let kept = rialto_journal::DEFAULT_SNAPSHOTS_KEPT;
        let result = if self.archive {
            rialto_journal::retain(&self.data_dir, kept).map(|_| ())
        } else {
            rialto_journal::prune_snapshots(&self.data_dir, kept).map(|_| ())
        };
        if let Err(e) = result {
            tracing::warn!("tidying snapshots and journal segments failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flood on one gateway's intake does not shut another's out: each batch starts at the
    /// next ring, so the other's request goes out in the second batch, not after the flood.
    #[test]
    fn the_journal_stage_takes_from_every_intake_in_turn() {
        let web = Ring::new(64);
        let config = PipelineConfig::simulated(64, 8, std::env::temp_dir(), vec![web.clone()]);
        let disk = Arc::new(Mutex::new(crate::simlog::SimDisk::new()));
        let mut pipeline = Pipeline::start_simulated(
            config,
            Engine::new(Default::default()),
            CommandLog::Simulated(crate::simlog::SimulatedLog::new(disk)),
            Arc::new(Credentials::from_key([7; 32])),
            Clock::Simulated(Arc::new(AtomicI64::new(1))),
        )
        .unwrap();
        let query = |session| Request {
            session,
            reply: Reply::Symbols { request: 0 },
            op: Op::ListSymbols,
        };
        for session in 1..=40 {
            assert!(pipeline.inbound.try_push(query(session)).is_ok());
        }
        assert!(web.try_push(query(1000)).is_ok());
        while pipeline.step_journal() + pipeline.step_engine() > 0 {}
        let mut order = Vec::new();
        while let Some(Outbound { target, .. }) = pipeline.outbound.pop() {
            if let Target::Session(id) = target {
                order.push(id);
            }
        }
        assert_eq!(order.len(), 41, "every query answered: {order:?}");
        let web_at = order.iter().position(|&id| id == 1000).unwrap();
        assert_eq!(web_at, 8, "right after the first batch of 8: {order:?}");
        // Each intake's own order is kept.
        let binary: Vec<u64> = order.iter().copied().filter(|&id| id != 1000).collect();
        assert_eq!(binary, (1..=40).collect::<Vec<u64>>());
    }

    #[test]
    fn the_market_data_spill_holds_what_the_ring_cannot_and_says_when_it_is_at_its_bound() {
        // A ring of 2 batches and a spill of 100 bytes.
        let channel = MdChannel::new(2, 100);
        let mut tap = JournalTap::new(channel.clone());
        for batch in 0..4u8 {
            tap.send(&[batch; 40]);
            tap.hand_off();
        }
        // Two batches in the ring, two (80 bytes) spilled: under the bound.
        assert_eq!(tap.spilled(), 2);
        assert!(!tap.is_full());
        tap.send(&[4; 40]);
        assert!(tap.is_full(), "120 bytes spilled reach the bound of 100");
        // The market data thread takes one batch: one spilled batch moves into the ring.
        let first = channel.chunks.pop().expect("a batch in the ring");
        assert_eq!(first, vec![0; 40]);
        assert_eq!(tap.hand_off(), 1);
        assert!(!tap.is_full(), "80 bytes spilled");
        // Nothing is skipped or reordered.
        let mut seen = Vec::new();
        while tap.spilled() > 0 || !channel.chunks.is_empty() {
            if let Some(chunk) = channel.chunks.pop() {
                seen.push(chunk[0]);
            }
            tap.hand_off();
        }
        assert_eq!(seen, vec![1, 2, 3, 4]);
    }
}
