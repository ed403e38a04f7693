//! Rialto's deterministic simulator, first slice (docs/simulation.md).
//!
//! One thread runs the server's real pipeline stages (the journal stage, the engine stage and
//! the market data replica) step by step, in an order drawn from the seed, with everything
//! else the simulator's: the clock (`Clock::Simulated`), the command log
//! (`CommandLog::Simulated`: the journal's record encoding on a disk that fails as the seed
//! says), the traders (connected through the binary gateway's session state machine,
//! server/src/session.rs, its login decision and its routing, over a simulated network that
//! drops connections and has slow readers: `net.rs`), crashes
//! and recovery (the journal crate's `recover_with`, as `rialto serve` recovers). Checkers run
//! after every step; a seed's run is a pure function of the seed, so a failure replays bit for
//! bit.

pub mod client;
pub mod fix_client;
pub mod net;
pub mod rng;
pub mod web_client;

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rialto_core::{Engine, EngineConfig, Prefetch, SymbolId};
use rialto_journal::RecoverOptions;
use rialto_server::admission::{LoginAttempt, Logins, PeerKey, ThrottleSettings};
use rialto_server::auth::Credentials;
use rialto_server::feed::{MarketData, SteppedReplica};
use rialto_server::pipeline::{
    Clock, MdChannel, Op, Pipeline, PipelineConfig, Reply, Request, SYSTEM_SESSION, SessionId,
};
use rialto_server::replication::CommandLog;
use rialto_server::ring::Ring;
use rialto_server::route::{Route, Router};
use rialto_server::session::{Action, Limits, Role, Sent};
use rialto_server::simlog::{CommitFault, SimDisk, SimulatedLog};
use rialto_wire::{ClientMsg, ErrorCode, Secret, ServerMsg};
use sha2::{Digest, Sha256};

use crate::client::{Client, Link};
use crate::net::Conn;
use crate::rng::Rng;
use crate::web_client::{WebProcess, WebTraders};

/// Chances per tick, in millionths.
const COMMIT_FAULT_PPM: u64 = 3_000;
const CRASH_PPM: u64 = 2_000;
/// A client drops its connection.
const DISCONNECT_PPM: u64 = 5_000;
/// A client stops reading for a while.
const SLOW_READER_PPM: u64 = 3_000;
/// A client logs in with a wrong secret (at most [`WRONG_LOGINS_MAX`] times a run), per login.
const WRONG_SECRET_PPM: u64 = 50_000;
/// Fewer than the throttle's burst of failures (docs/protocol.md: 10 from one address), so
/// that a trader's right secret must never be refused.
const WRONG_LOGINS_MAX: u32 = 5;
/// How long a slow reader reads nothing at most.
const STALL_NS_MAX: i64 = 5_000_000_000;
/// Steps of the end-of-run drain before it gives up.
const DRAIN_STEPS_MAX: u32 = 100_000;
/// The gateway numbers sessions from here (server/src/gateway.rs).
const FIRST_SESSION: SessionId = 16;
/// Logged-in sessions the gateway allows on the order port: more than the traders ever hold
/// (each holds one, and one closing).
const MAX_SESSIONS: usize = 64;
/// Chance that a recovery first reads the log with one bit flipped, in millionths.
const BIT_FLIP_PPM: u64 = 300_000;
/// The simulated time starts here (2026-01-01) and each tick moves it 1 µs to 20 ms.
const EPOCH_NS: i64 = 1_767_225_600_000_000_000;
const TICK_NS_MAX: i64 = 20_000_000;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub ticks: u64,
    /// Plant the bug "acknowledge before the journal commit" (only builds of rialto-server
    /// with the `planted-bugs` feature can; others make the run fail at once).
    pub plant_ack_before_commit: bool,
    /// Plant the bug "a gateway that drops a reply on a partial write" (as above).
    pub plant_drop_on_partial_write: bool,
    /// Print the trace (every step's events) on stderr.
    pub print_trace: bool,
}

/// Faults injected, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub fsync_failed: u64,
    pub no_space: u64,
    /// Power lost during a commit (a torn write).
    pub power_loss: u64,
    /// The process killed between steps.
    pub crashes: u64,
    /// Recoveries that first read the log with a bit flipped.
    pub bit_flips: u64,
    /// Connections a client dropped (at any point, inside a frame included).
    pub disconnects: u64,
    /// Clients that stopped reading for a while.
    pub slow_readers: u64,
    /// Sessions the gateway closed for passing their output bound (slow readers, or bursts on
    /// a small bound).
    pub output_overflows: u64,
    /// Sessions refused for passing the message rate limit.
    pub rate_limited: u64,
    /// Logins with a wrong secret.
    pub wrong_secrets: u64,
}

impl Faults {
    pub fn total(&self) -> u64 {
        self.fsync_failed
            + self.no_space
            + self.power_loss
            + self.crashes
            + self.bit_flips
            + self.disconnects
            + self.slow_readers
            + self.output_overflows
            + self.rate_limited
            + self.wrong_secrets
    }

    pub fn add(&mut self, other: &Faults) {
        self.fsync_failed += other.fsync_failed;
        self.no_space += other.no_space;
        self.power_loss += other.power_loss;
        self.crashes += other.crashes;
        self.bit_flips += other.bit_flips;
        self.disconnects += other.disconnects;
        self.slow_readers += other.slow_readers;
        self.output_overflows += other.output_overflows;
        self.rate_limited += other.rate_limited;
        self.wrong_secrets += other.wrong_secrets;
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub tick: u64,
    pub message: String,
}

/// What a run did, counted as it goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub faults: Faults,
    /// Client requests written to the network.
    pub commands: u64,
    /// Logins the gateway's decision granted.
    pub logins: u64,
    pub recoveries: u64,
    /// Bit-flipped reads that recovery refused (the rest stopped before the flipped record).
    pub flips_refused: u64,
    /// Times every client's view was compared with the engine's.
    pub view_checks: u64,
    /// Of those, the times the FIX traders' views were compared too (fix_client.rs).
    pub fix_view_checks: u64,
    /// Times the FIX traders' L2 books, rebuilt from their W and X messages, were compared
    /// with the market data replica's (fix_client.rs).
    pub fix_book_checks: u64,
    /// Times the market data replica's state was compared with the engine's.
    pub replica_checks: u64,
    /// Batches of users' messages to the web side that carried a gap (web_client.rs).
    pub web_gaps: u64,
}

impl Counts {
    pub fn add(&mut self, other: &Counts) {
        self.faults.add(&other.faults);
        self.commands += other.commands;
        self.logins += other.logins;
        self.recoveries += other.recoveries;
        self.flips_refused += other.flips_refused;
        self.view_checks += other.view_checks;
        self.fix_view_checks += other.fix_view_checks;
        self.fix_book_checks += other.fix_book_checks;
        self.replica_checks += other.replica_checks;
        self.web_gaps += other.web_gaps;
    }
}

#[derive(Clone, Debug)]
pub struct Outcome {
    pub seed: u64,
    /// Ticks run (all of them unless a checker failed).
    pub ticks: u64,
    pub simulated_ns: i64,
    pub counts: Counts,
    /// SHA-256 of everything the run did: same seed, same hash.
    pub trace_hash: [u8; 32],
    pub failure: Option<Failure>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at tick {}: {}", self.tick, self.message)
    }
}

/// Runs one seed. Never panics on a finding: a broken invariant is the outcome's `failure`.
pub fn run(config: &SimConfig) -> Outcome {
    let mut sim = match Sim::new(config) {
        Ok(sim) => sim,
        Err(message) => return Outcome::failed_at_start(config.seed, message),
    };
    let mut failure = sim
        .genesis()
        .err()
        .map(|message| Failure { tick: 0, message });
    let mut ticks = 0;
    while failure.is_none() && ticks < config.ticks {
        ticks += 1;
        if let Err(message) = sim.tick(ticks) {
            failure = Some(Failure {
                tick: ticks,
                message,
            });
        }
    }
    if failure.is_none()
        && let Err(message) = sim.finish()
    {
        failure = Some(Failure {
            tick: ticks,
            message,
        });
    }
    Outcome {
        seed: config.seed,
        ticks,
        simulated_ns: sim.clock.load(Ordering::Relaxed) - EPOCH_NS,
        counts: sim.counts_with_fix(),
        trace_hash: sim.trace.finalize().into(),
        failure,
    }
}

impl Outcome {
    fn failed_at_start(seed: u64, message: String) -> Outcome {
        Outcome {
            seed,
            ticks: 0,
            simulated_ns: 0,
            counts: Counts::default(),
            trace_hash: [0; 32],
            failure: Some(Failure { tick: 0, message }),
        }
    }

    pub fn trace_hex(&self) -> String {
        self.trace_hash.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The engine configuration of every engine the simulator builds: a fixed hash seed, so that
/// nothing depends on a random draw.
fn engine_config() -> EngineConfig {
    EngineConfig {
        hash_seed: 0x5EED_5EED_5EED_5EED,
        ..EngineConfig::default()
    }
}

/// One run of the server process: its pipeline and its market data replica. A crash drops it.
struct Node {
    pipeline: Pipeline,
    /// The FIX gateway's own intake ring into the journal stage, as `rialto serve` has it.
    fix_intake: Arc<Ring<Request>>,
    replica: SteppedReplica,
    /// The binary gateway's login decision and routing: the process's memory.
    logins: Logins,
    router: Router,
    /// The web side's bridge, queue and delivery agent (web_client.rs).
    web: WebProcess,
}

impl Node {
    fn engine(&self) -> &Engine {
        self.pipeline
            .inline_engine()
            .expect("the simulated pipeline's stages are inline")
    }
}

struct Sim {
    rng: Rng,
    clients_rng: Rng,
    plant: bool,
    clock: Arc<AtomicI64>,
    disk: Arc<Mutex<SimDisk>>,
    node: Option<Node>,
    ring_capacity: usize,
    batch_max: usize,
    clients: Vec<Client>,
    /// The FIX gateway and its traders (fix_client.rs).
    fix: Option<fix_client::FixSide>,
    /// The web traders (web_client.rs), and the bound of the web side's queue of users'
    /// messages, drawn per seed (a small one makes gaps).
    web: WebTraders,
    web_batches: usize,
    /// The gateway's sessions (each with its client's end), in id order: a client's current
    /// one, and ones closing.
    conns: Vec<Conn>,
    next_session: SessionId,
    credentials: Arc<Credentials>,
    /// The sessions' limits, drawn per seed: a small output bound makes slow readers, a rate
    /// limit refuses bursts.
    limits: Limits,
    /// Draws of the network (how many bytes move, the order connections are served in).
    net_rng: Rng,
    plant_partial_write: bool,
    /// The sessions' clock: the simulated time from here.
    base: Instant,
    symbols: Vec<SymbolId>,
    /// The highest seq any client was told of: recovery must reach it.
    max_acked_seq: u64,
    tmp: tempfile::TempDir,
    trace: Sha256,
    print_trace: bool,
    counts: Counts,
    conserved_at: u64,
    replica_checked_at: u64,
}

impl Sim {
    fn new(config: &SimConfig) -> Result<Sim, String> {
        let mut rng = Rng::new(config.seed);
        let clients_rng = rng.fork();
        let net_rng = rng.fork();
        let ring_capacity = [4, 16, 256][rng.below(3) as usize];
        let batch_max = [1, 4, 64][rng.below(3) as usize];
        let max_output_bytes = [1 << 10, 16 << 10, 16 << 20][rng.below(3) as usize];
        let web_batches = [1, 2, 1024][rng.below(3) as usize];
        let (max_msgs_per_sec, burst) = match rng.below(3) {
            0 => (rng.range(20, 200) as u64, rng.range(4, 16) as u64),
            _ => (0, 1),
        };
        let limits = Limits {
            max_msgs_per_sec,
            burst,
            max_output_bytes,
        };
        let tmp = tempfile::Builder::new()
            .prefix("rialto-sim-")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        let mut sim = Sim {
            rng,
            clients_rng,
            plant: config.plant_ack_before_commit,
            clock: Arc::new(AtomicI64::new(EPOCH_NS)),
            disk: Arc::new(Mutex::new(SimDisk::new())),
            node: None,
            ring_capacity,
            batch_max,
            clients: Vec::new(),
            fix: None,
            web: WebTraders::new(),
            web_batches,
            conns: Vec::new(),
            next_session: FIRST_SESSION,
            credentials: Arc::new(Credentials::from_key([7; 32])),
            limits,
            net_rng,
            plant_partial_write: config.plant_drop_on_partial_write,
            base: Instant::now(),
            symbols: Vec::new(),
            max_acked_seq: 0,
            tmp,
            trace: Sha256::new(),
            print_trace: config.print_trace,
            counts: Counts::default(),
            conserved_at: 0,
            replica_checked_at: 0,
        };
        sim.trace.update(config.seed.to_le_bytes());
        sim.node = Some(sim.start_node(Engine::new(engine_config()), 0)?);
        Ok(sim)
    }

    fn disk(&self) -> MutexGuard<'_, SimDisk> {
        self.disk.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn node(&mut self) -> &mut Node {
        self.node.as_mut().expect("a node runs between ticks")
    }

    fn start_node(&self, engine: Engine, last_ts_ns: i64) -> Result<Node, String> {
        let channel = MdChannel::new(16, 1 << 20);
        let web = WebProcess::new(self.web_batches, self.now());
        let fix_intake = Ring::new(self.ring_capacity);
        let replica = Engine::decode_snapshot(&engine.encode_snapshot(), engine_config())
            .map_err(|e| format!("the engine's state breaks an invariant: {e}"))?;
        let market_data = MarketData::new(&engine);
        let replica = market_data.stepped(channel.clone(), replica, Prefetch::Off);
        let config = PipelineConfig {
            last_ts_ns,
            market_data: Some(channel),
            web_outbound: Some(web.outlet()),
            ..PipelineConfig::simulated(
                self.ring_capacity,
                self.batch_max,
                self.tmp.path().to_path_buf(),
                vec![fix_intake.clone(), web.intake()],
            )
        };
        let log = CommandLog::Simulated(SimulatedLog::new(self.disk.clone()));
        let mut pipeline = Pipeline::start_simulated(
            config,
            engine,
            log,
            self.credentials.clone(),
            Clock::Simulated(self.clock.clone()),
        )
        .map_err(|e| format!("cannot start the pipeline: {e}"))?;
        if self.plant && !pipeline.plant_ack_before_commit() {
            return Err(
                "this build of rialto-server cannot plant bugs (feature planted-bugs)".into(),
            );
        }
        let logins = Logins::new(
            self.credentials.clone(),
            self.credentials.admin_secret(),
            MAX_SESSIONS,
            1,
            ThrottleSettings::default(),
        );
        Ok(Node {
            pipeline,
            fix_intake,
            replica,
            logins,
            router: Router::new(),
            web,
        })
    }

    /// The demo venue's set-up, journaled like any command, without faults; then the clients.
    fn genesis(&mut self) -> Result<(), String> {
        let mut commands = rialto_server::demo::demo_commands();
        commands.extend(fix_client::genesis_commands());
        commands.extend(
            web_client::WEB_USERS
                .into_iter()
                .flat_map(rialto_server::demo::funded_user),
        );
        let target = commands.len() as u64;
        let mut pending: Vec<Request> = commands
            .into_iter()
            .rev()
            .map(|cmd| Request {
                session: SYSTEM_SESSION,
                reply: Reply::Admin { request: 0 },
                op: Op::Command(cmd),
            })
            .collect();
        let node = self.node();
        while node.engine().last_seq() < target {
            while let Some(request) = pending.pop() {
                if let Err(back) = node.pipeline.inbound.try_push(request) {
                    pending.push(back);
                    break;
                }
            }
            let work = node.pipeline.step_journal() + node.pipeline.step_engine();
            while node.pipeline.outbound.pop().is_some() {}
            if node.pipeline.shared.has_failed() || (work == 0 && pending.is_empty()) {
                return Err("the venue's set-up did not apply".into());
            }
        }
        let engine = self.node().engine();
        self.symbols = ["BTC-USD", "ETH-USD"]
            .iter()
            .map(|name| engine.symbol_id(name))
            .collect();
        let count = 3 + self.rng.below(6) as i64;
        self.clients = (1..=count).map(Client::new).collect();
        for i in 0..self.clients.len() {
            self.connect(i)?;
        }
        self.start_fix()?;
        self.start_web();
        self.check()
    }

    fn tick(&mut self, tick: u64) -> Result<(), String> {
        self.trace.update(tick.to_le_bytes());
        if self.print_trace {
            eprintln!("tick {tick}");
        }
        let dt = self.rng.range(1_000, TICK_NS_MAX);
        self.clock.fetch_add(dt, Ordering::Relaxed);
        // Traders come in bursts, so that the venue is often quiet and their views are checked.
        if self.rng.below(4) == 0 {
            for client in &mut self.clients {
                if client.link == Link::Trading && self.clients_rng.chance(400_000) {
                    client.act(&mut self.clients_rng, &self.symbols);
                }
            }
            if let Some(fix) = &mut self.fix {
                fix.act(self.clock.load(Ordering::Relaxed));
            }
            self.web.act(&mut self.clients_rng, &self.symbols);
        }
        self.send_requests();
        let node = self.node.as_ref().expect("a node runs");
        self.web.send(&node.web);
        self.maybe_plant_fault();
        self.maybe_network_fault()?;
        for _ in 0..1 + self.rng.below(4) {
            match self.rng.below(5) {
                0 => {
                    self.node().pipeline.step_journal();
                }
                1 => {
                    self.node().pipeline.step_engine();
                }
                2 => self.step_replica()?,
                3 => self.deliver()?,
                _ => {
                    self.network(false)?;
                }
            }
            if self.node().pipeline.shared.has_failed() {
                break;
            }
        }
        if self.node().pipeline.shared.has_failed() {
            let fault = self.disk().failed;
            match fault {
                Some(CommitFault::FsyncFailed { .. }) => self.counts.faults.fsync_failed += 1,
                Some(CommitFault::NoSpace { .. }) => self.counts.faults.no_space += 1,
                Some(CommitFault::PowerLoss { .. }) => self.counts.faults.power_loss += 1,
                None => return Err(format!("the pipeline failed: {:?}", self.failure())),
            }
            if !matches!(fault, Some(CommitFault::PowerLoss { .. })) {
                // The process stops on its own: the engine finishes what it was given and the
                // gateway flushes the replies before it exits.
                self.settle_engine()?;
            }
            self.note(format!("failed {fault:?}"));
            return self.restart();
        }
        if self.rng.chance(CRASH_PPM) {
            self.counts.faults.crashes += 1;
            self.note("crash".to_string());
            return self.restart();
        }
        self.check()
    }

    /// Runs the engine stage and delivers its replies until it has nothing left to send (its
    /// spill moves out only once the outbound ring has room), and every byte of them to the
    /// clients.
    fn settle_engine(&mut self) -> Result<(), String> {
        loop {
            self.deliver()?;
            let moved = self.network(true)?;
            if self.node().pipeline.step_engine() == 0 && moved == 0 {
                return Ok(());
            }
        }
    }

    /// The end of the run: the network and the stages run without faults until nothing moves,
    /// then every request a client sent on a connection still open must have been answered
    /// (its login, its report, its orders).
    fn finish(&mut self) -> Result<(), String> {
        self.disk().next_fault = None;
        for conn in &mut self.conns {
            conn.stalled_until_ns = i64::MIN;
        }
        for _ in 0..DRAIN_STEPS_MAX {
            let node = self.node.as_mut().expect("a node runs");
            let mut work = self.web.send(&node.web);
            if node.web.gap_pending() {
                // The web side announces a gap alone once a millisecond has passed.
                self.clock.fetch_add(1_000_000, Ordering::Relaxed);
                work += 1;
            }
            work += node.pipeline.step_journal() + node.pipeline.step_engine();
            self.deliver()?;
            self.deliver_web(true)?;
            work += self.network(true)?;
            if self.node().pipeline.shared.has_failed() {
                return Err(format!("the pipeline failed: {:?}", self.failure()));
            }
            if work == 0 {
                for client in &self.clients {
                    if !client.answered() {
                        return Err(format!(
                            "user {}'s requests on its open session {} were not all answered \
                             ({:?}, {} orders in flight)",
                            client.user,
                            client.session,
                            client.link,
                            client.in_flight.len()
                        ));
                    }
                }
                if !self.web.answered() {
                    return Err("the web traders' calls were not all answered".into());
                }
                return self.check();
            }
        }
        Err("the venue did not settle at the end of the run".into())
    }

    /// Adds a line to the trace (and prints it with `print_trace`).
    fn note(&mut self, line: String) {
        self.trace.update(line.as_bytes());
        if self.print_trace {
            eprintln!("{line}");
        }
    }

    fn failure(&self) -> Option<String> {
        let shared = &self.node.as_ref()?.pipeline.shared;
        let failure = shared.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.clone()
    }

    /// The clients write their requests' frames, oldest first, as far as their connection
    /// has room (a gateway stops reading a session whose request does not fit in the inbound
    /// ring, and then the socket's buffers fill).
    fn send_requests(&mut self) {
        for (i, client) in self.clients.iter_mut().enumerate() {
            let Some(conn) = current_conn(&mut self.conns, client.session, i) else {
                continue;
            };
            while let Some(request) = client.outbox.front() {
                if !conn.has_room() {
                    break;
                }
                conn.write(request);
                if self.print_trace {
                    eprintln!("{} -> {:?}", client.user, request.op);
                }
                client.sent();
                self.counts.commands += 1;
            }
        }
    }

    /// Client `i` connects and writes its login: with its real secret, or now and then a
    /// wrong one (which must be refused, and must not keep the right one out).
    fn connect(&mut self, i: usize) -> Result<(), String> {
        let id = self.next_session;
        self.next_session += 1;
        let now = self.now();
        let mut conn = Conn::new(id, i, self.limits, now);
        if self.plant_partial_write && !conn.session.plant_drop_on_partial_write() {
            return Err(
                "this build of rialto-server cannot plant bugs (feature planted-bugs)".into(),
            );
        }
        let client = &mut self.clients[i];
        let right =
            client.wrong_logins >= WRONG_LOGINS_MAX || !self.clients_rng.chance(WRONG_SECRET_PPM);
        let secret = if right {
            self.credentials.user_secret(client.user)
        } else {
            self.counts.faults.wrong_secrets += 1;
            "not the secret".to_string()
        };
        let secret = Secret::new(secret.as_bytes()).ok_or("a secret of 1 to 64 bytes")?;
        conn.write_frame(&ClientMsg::Login {
            user: client.user,
            secret,
        });
        client.connecting(id, right);
        let line = format!(
            "{} connects as session {id} (right secret: {right})",
            client.user
        );
        self.note(line);
        self.conns.push(conn);
        Ok(())
    }

    /// The sessions' clock.
    fn now(&self) -> Instant {
        net::instant(self.base, self.clock.load(Ordering::Relaxed) - EPOCH_NS)
    }

    /// One turn of the network, the connections in an order drawn from the seed: part of each
    /// client's bytes reach its session, whose requests go into the inbound ring as far as it
    /// has room and whose logins the gateway's decision answers; one write of each session's
    /// output, which the socket takes in part; the client reads the whole messages it has. A
    /// session the gateway closes ends once its output is out (and the replies it waits for
    /// have come); its client then connects again. With `all`, every byte moves. Returns the
    /// bytes moved.
    fn network(&mut self, all: bool) -> Result<usize, String> {
        let now = self.now();
        let now_ns = self.clock.load(Ordering::Relaxed) - EPOCH_NS;
        let mut order: Vec<usize> = (0..self.conns.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, self.net_rng.below(i as u64 + 1) as usize);
        }
        // The FIX gateway first: it takes a message only while its intake ring has room for
        // its follow-ups (fix/mod.rs, RING_ROOM), which the smallest rings have only when empty.
        let mut moved = self.fix_network(all)?;
        let mut ended = Vec::new();
        for at in order {
            moved += self.conns[at].carry_up(&mut self.net_rng, all);
            self.take_actions(at, now);
            let conn = &mut self.conns[at];
            // The gateway reads the end of the stream once it has taken every whole frame.
            if conn.dropped && !conn.eof_seen && conn.unread() == 0 && !conn.session.is_blocked() {
                conn.session.on_eof(now);
                conn.eof_seen = true;
            }
            moved += conn.carry_down(&mut self.net_rng, all, now_ns);
            if !conn.dropped {
                let i = conn.client;
                for msg in conn.read()? {
                    let client = &mut self.clients[i];
                    let line = format!("{} <- {msg:?}", client.user);
                    self.trace.update(&line);
                    if self.print_trace {
                        eprintln!("{line}");
                    }
                    if let ServerMsg::Error {
                        code: ErrorCode::Throttled,
                        ..
                    } = msg
                    {
                        self.counts.faults.rate_limited += 1;
                    }
                    if let Some(request) = client.receive(&msg)? {
                        self.conns[at].write_frame(&ClientMsg::MyReport { request });
                    }
                    if let Some(seq) = seq_of(&msg) {
                        self.max_acked_seq = self.max_acked_seq.max(seq);
                    }
                }
            }
            let conn = &self.conns[at];
            if conn.session.is_closing() && conn.session.ready_to_shut(now) {
                ended.push(at);
            }
        }
        self.end_conns(ended)?;
        Ok(moved)
    }

    /// Acts on what session `at` decoded, as the gateway's `read_session` does: its requests
    /// go into the inbound ring while it has room, its login to the gateway's decision.
    fn take_actions(&mut self, at: usize, now: Instant) {
        loop {
            let node = self.node.as_mut().expect("a node runs");
            let conn = &mut self.conns[at];
            match conn.session.next(now) {
                None => return,
                Some(Action::Request(request)) => {
                    if let Err(request) = node.pipeline.inbound.try_push(request) {
                        conn.session.blocked(request);
                        return;
                    }
                    conn.session.taken();
                }
                Some(Action::Login { user, secret }) => {
                    let logged_in = self.conns_logged_in();
                    let node = self.node.as_mut().expect("a node runs");
                    let conn = &mut self.conns[at];
                    let attempt = LoginAttempt {
                        peer: peer_of(conn.client),
                        admin_port: false,
                        user,
                        secret: secret.as_bytes(),
                    };
                    match node.logins.decide(attempt, logged_in, now) {
                        Ok(role) => {
                            node.router.logged_in(conn.id, role);
                            let seq = node.engine().last_seq();
                            conn.session.logged_in(role, seq);
                            self.counts.logins += 1;
                        }
                        Err(refused) => {
                            conn.session
                                .refuse_login(now, refused.code(), refused.message());
                        }
                    }
                }
            }
        }
    }

    /// Whether a client has stopped reading (its view cannot be compared then).
    fn anyone_stalled(&self) -> bool {
        let now_ns = self.clock.load(Ordering::Relaxed) - EPOCH_NS;
        self.conns
            .iter()
            .any(|c| !c.dropped && now_ns < c.stalled_until_ns)
    }

    /// Sessions logged in on the order port and not closing (what a login is decided
    /// against).
    fn conns_logged_in(&self) -> usize {
        self.conns
            .iter()
            .filter(|c| c.session.role() != Role::AwaitingLogin && !c.session.is_closing())
            .count()
    }

    /// The gateway shuts these sessions (their output is out): they leave the routing, and a
    /// client still connected sees the end of the stream and connects again.
    fn end_conns(&mut self, mut ended: Vec<usize>) -> Result<(), String> {
        ended.sort_unstable();
        for &at in ended.iter().rev() {
            let conn = self.conns.remove(at);
            let node = self.node.as_mut().expect("a node runs");
            node.router.closed(conn.id, conn.session.role());
            let client = conn.client;
            self.note(format!("session {} closed", conn.id));
            if !conn.dropped && self.clients[client].session == conn.id {
                self.clients[client].disconnected();
                self.connect(client)?;
            }
        }
        Ok(())
    }

    /// The network's faults, each with its chance per tick: a client drops its connection
    /// (what it wrote reaches the server up to a point drawn anywhere, inside a frame
    /// included) and connects again at once; a client stops reading for up to
    /// [`STALL_NS_MAX`] (the gateway closes its session if its output passes the bound).
    fn maybe_network_fault(&mut self) -> Result<(), String> {
        if self.rng.chance(DISCONNECT_PPM) {
            let i = self.rng.below(self.clients.len() as u64) as usize;
            let session = self.clients[i].session;
            if let Some(conn) = current_conn(&mut self.conns, session, i) {
                let keep = self.rng.below(conn.unread() as u64 + 1) as usize;
                conn.drop_by_client(keep);
                self.counts.faults.disconnects += 1;
                let user = self.clients[i].user;
                self.note(format!("{user} drops session {session}"));
                self.clients[i].disconnected();
                self.connect(i)?;
            }
        }
        if self.rng.chance(SLOW_READER_PPM) {
            let i = self.rng.below(self.clients.len() as u64) as usize;
            let session = self.clients[i].session;
            let until = self.clock.load(Ordering::Relaxed) - EPOCH_NS
                + self.rng.range(1_000_000, STALL_NS_MAX);
            if let Some(conn) = current_conn(&mut self.conns, session, i) {
                conn.stalled_until_ns = until;
                self.counts.faults.slow_readers += 1;
                let user = self.clients[i].user;
                self.note(format!("{user} stops reading session {session}"));
            }
        }
        Ok(())
    }

    /// The FIX side's turn of the network (fix_client.rs).
    fn fix_network(&mut self, all: bool) -> Result<usize, String> {
        let now_ns = self.clock.load(Ordering::Relaxed);
        let (Some(fix), Some(node)) = (&mut self.fix, &self.node) else {
            return Ok(0);
        };
        let mut note = tracer(&mut self.trace, self.print_trace);
        fix.network(&node.fix_intake, now_ns, all, &mut note)
    }

    /// The FIX gateway and its traders start with the node (fix_client.rs).
    fn start_fix(&mut self) -> Result<(), String> {
        let now_ns = self.clock.load(Ordering::Relaxed);
        let node = self.node.as_ref().expect("a node runs");
        let fix = fix_client::FixSide::start(
            self.fix.take(),
            &mut self.rng,
            self.tmp.path(),
            node.engine(),
            node.replica.market_data().clone(),
            now_ns,
            net::instant(self.base, now_ns - EPOCH_NS),
        )?;
        self.fix = Some(fix);
        Ok(())
    }

    /// The run's counts, the FIX traders' requests and view checks included.
    fn counts_with_fix(&self) -> Counts {
        let mut counts = self.counts;
        if let Some(fix) = &self.fix {
            counts.commands += fix.commands;
            counts.fix_view_checks = fix.view_checks;
            counts.fix_book_checks = fix.book_checks;
        }
        counts.commands += self.web.commands;
        counts.web_gaps = self.web.gaps;
        counts
    }

    fn maybe_plant_fault(&mut self) {
        if !self.rng.chance(COMMIT_FAULT_PPM) {
            return;
        }
        let persisted_permille = match self.rng.below(3) {
            0 => 0,
            1 => 1000,
            _ => self.rng.below(1001) as u16,
        };
        let fault = match self.rng.below(3) {
            0 => CommitFault::FsyncFailed { persisted_permille },
            1 => CommitFault::NoSpace { persisted_permille },
            _ => CommitFault::PowerLoss { persisted_permille },
        };
        let mut disk = self.disk();
        if disk.next_fault.is_none() && disk.failed.is_none() {
            disk.next_fault = Some(fault);
        }
    }

    fn step_replica(&mut self) -> Result<(), String> {
        let node = self.node();
        node.replica
            .step(&node.pipeline.shared)
            .map(|_| ())
            .map_err(|e| format!("market data replica: {e}"))
    }

    /// Routes every event in the outbound ring to the sessions it is for, through the
    /// gateway's own [`Router`]: each becomes the binary protocol's frame in their output.
    fn deliver(&mut self) -> Result<(), String> {
        let node = self.node.as_mut().expect("a node runs");
        let now_ns = self.clock.load(Ordering::Relaxed);
        while let Some(out) = node.pipeline.outbound.pop() {
            if let Some(fix) = &mut self.fix {
                fix.deliver(&out, now_ns);
            }
            let Some(msg) = out.event.into_wire() else {
                continue; // for the gateways themselves (a symbol added)
            };
            let conns = &mut self.conns;
            let faults = &mut self.counts.faults;
            let mut send = |id: SessionId, reply: bool| {
                let Ok(at) = conns.binary_search_by_key(&id, |c| c.id) else {
                    return; // gone: its replies are dropped
                };
                let session = &mut conns[at].session;
                if reply {
                    session.reply_arrived();
                }
                if session.send(&msg) == Sent::Overflow {
                    faults.output_overflows += 1;
                }
            };
            match node.router.route(out.target) {
                Route::Reply(id) => send(id, true),
                Route::Sessions(ids) => {
                    for &id in ids {
                        send(id, false);
                    }
                }
            }
        }
        self.deliver_web(false)
    }

    /// The web side's delivery agent (it runs on the gateway's thread too), and what it
    /// delivered to the web traders; with `flush`, the users' messages it gathered go out now.
    fn deliver_web(&mut self, flush: bool) -> Result<(), String> {
        let now = self.now();
        let node = self.node.as_mut().expect("a node runs");
        let mut note = tracer(&mut self.trace, self.print_trace);
        let seq = self.web.deliver(&mut node.web, now, flush, &mut note)?;
        self.max_acked_seq = self.max_acked_seq.max(seq);
        Ok(())
    }

    /// The checkers that hold after every step.
    fn check(&mut self) -> Result<(), String> {
        let node = self.node.as_ref().expect("a node runs");
        let engine = node.engine();
        let seq = engine.last_seq();
        self.trace.update(seq.to_le_bytes());
        if seq != self.conserved_at {
            // The core's snapshot decoder checks conservation of funds per currency and that
            // every hold is what the open orders need.
            Engine::decode_snapshot(&engine.encode_snapshot(), engine_config())
                .map_err(|e| format!("the engine's state breaks an invariant at seq {seq}: {e}"))?;
            self.conserved_at = seq;
        }
        let replica = node.replica.engine();
        if replica.last_seq() > seq {
            return Err(format!(
                "the market data replica is at seq {} ahead of the engine at {seq}",
                replica.last_seq()
            ));
        }
        if replica.last_seq() == seq && seq != self.replica_checked_at {
            if replica.state_hash() != engine.state_hash() {
                return Err(format!(
                    "the market data replica's state differs from the engine's at seq {seq}"
                ));
            }
            self.replica_checked_at = seq;
            self.counts.replica_checks += 1;
        }
        let quiet = self
            .clients
            .iter()
            .all(|c| c.outbox.is_empty() && c.answered())
            && self.web.answered()
            && !node.web.gap_pending()
            && !self.anyone_stalled();
        if quiet {
            // Every request answered: let the engine stage send what it still holds (and the
            // web side what it gathers for a millisecond), then each client's view must be the
            // engine's.
            self.settle_engine()?;
            self.deliver_web(true)?;
            if !self.clients.iter().all(Client::answered) {
                return Ok(()); // a session closed on the way (its output bound): no view now
            }
            let node = self.node.as_ref().expect("a node runs");
            if !self.web.answered() || node.web.gap_pending() {
                return Ok(()); // the web side lost messages on the way: no web view now
            }
            let engine = node.engine();
            for client in self.clients.iter().chain(self.web.clients()) {
                let open = open_orders(engine, client.user);
                if !client.view_matches(&open) {
                    return Err(format!(
                        "user {}'s view of its open orders {:?} differs from the engine's {:?} \
                         at seq {}",
                        client.user,
                        client.view,
                        open,
                        engine.last_seq()
                    ));
                }
            }
            // The FIX traders' views too, when every one of their requests is answered.
            if let Some(fix) = &mut self.fix {
                fix.check(engine)?;
            }
            self.counts.view_checks += 1;
        }
        Ok(())
    }

    /// The process died: every stage's state is dropped, the venue recovered from the log as
    /// `rialto serve` does, and the clients log in again.
    fn restart(&mut self) -> Result<(), String> {
        let node = self.node.take().expect("a node runs");
        let live = (node.engine().last_seq(), node.engine().state_hash());
        drop(node);
        self.counts.recoveries += 1;
        let bytes = self.disk().bytes.clone();
        if self.rng.chance(BIT_FLIP_PPM) {
            self.counts.faults.bit_flips += 1;
            self.check_bit_flip(&bytes)?;
        }
        let recovered = self.recover(&bytes, true)?;
        let last = recovered.last_seq;
        self.note(format!("recovered {last}"));
        if last < self.max_acked_seq {
            return Err(format!(
                "acknowledged commands lost: clients were told of seq {} but recovery ends at \
                 seq {last}",
                self.max_acked_seq
            ));
        }
        if live.0 == last && live.1 != recovered.state_hash {
            return Err(format!(
                "recovery to seq {last} gives another state than the engine had at that seq"
            ));
        }
        for client in self.clients.iter().chain(self.web.clients()) {
            for &(order, seq) in &client.acked_places {
                let known = recovered
                    .engine
                    .order_remaining(client.user, order)
                    .is_some()
                    || recovered.engine.order_id_taken(client.user, order);
                if seq <= last && !known {
                    return Err(format!(
                        "user {}'s order {order}, accepted at seq {seq}, is unknown after \
                         recovery to seq {last}",
                        client.user
                    ));
                }
            }
        }
        for client in &mut self.clients {
            // The connections went with the process.
            client.node_died();
        }
        self.conns.clear();
        self.conserved_at = u64::MAX;
        self.replica_checked_at = u64::MAX;
        self.node = Some(self.start_node(recovered.engine, recovered.last_ts_ns)?);
        for i in 0..self.clients.len() {
            self.connect(i)?;
        }
        self.start_fix()?;
        self.start_web();
        self.check()
    }

    /// The web traders start over with the node: each asks for its report.
    fn start_web(&mut self) {
        let node = self.node.as_ref().expect("a node runs");
        self.web.start(&node.web);
    }

    /// Recovers from `bytes` as the one journal segment of a data directory, with the journal
    /// crate's start-up recovery (a torn tail is truncated). With `adopt`, the repaired segment
    /// becomes the disk the next node writes to.
    fn recover(&mut self, bytes: &[u8], adopt: bool) -> Result<rialto_journal::Recovered, String> {
        let dir = self
            .tmp
            .path()
            .join(format!("recovery-{}", self.counts.recoveries));
        let result = recover_dir(&dir, bytes);
        let adopted = match (&result, adopt) {
            (Ok(_), true) => {
                Some(std::fs::read(segment_path(&dir)).map_err(|e| format!("reading back: {e}"))?)
            }
            _ => None,
        };
        let _ = std::fs::remove_dir_all(&dir);
        let recovered = result.map_err(|e| format!("recovery refused the log: {e}"))?;
        if let Some(adopted) = adopted {
            let mut disk = self.disk();
            disk.bytes = adopted;
            disk.failed = None;
            disk.next_fault = None;
        }
        Ok(recovered)
    }

    /// Recovery reads the log with one bit flipped (the disk itself is fine: a re-read gives
    /// the right bytes). Real recovery must refuse it, or stop before the flipped record with
    /// exactly the state of the records before it.
    fn check_bit_flip(&mut self, clean: &[u8]) -> Result<(), String> {
        let at = self.rng.below(clean.len() as u64) as usize;
        let bit = self.rng.below(8);
        let mut flipped = clean.to_vec();
        flipped[at] ^= 1 << bit;
        self.note(format!("flip {at} {bit}"));
        // The clean log's records: (start, end, seq).
        let mut records = Vec::new();
        let mut pos = rialto_journal::format::SEGMENT_HEADER_LEN;
        while let Ok(r) = rialto_journal::format::parse_record(clean, pos) {
            records.push((pos, pos + r.size, r.seq));
            pos += r.size;
        }
        let result = recover_dir(&self.tmp.path().join("flipped"), &flipped);
        let _ = std::fs::remove_dir_all(self.tmp.path().join("flipped"));
        let Ok(got) = result else {
            self.counts.flips_refused += 1;
            return Ok(());
        };
        if let Some(&(_, _, seq)) = records.iter().find(|(s, e, _)| (*s..*e).contains(&at))
            && got.last_seq >= seq
        {
            return Err(format!(
                "recovery applied seq {} from a log whose record of seq {seq} has a flipped bit \
                 (byte {at}, bit {bit})",
                got.last_seq
            ));
        }
        let cut = match got.last_seq {
            0 => rialto_journal::format::SEGMENT_HEADER_LEN,
            last => match records.iter().find(|r| r.2 == last) {
                Some(&(_, end, _)) => end,
                None => {
                    return Err(format!(
                        "recovery of a log with a flipped bit ends at seq {last}, which the log \
                         does not hold"
                    ));
                }
            },
        };
        let expected = recover_dir(&self.tmp.path().join("expected"), &clean[..cut]);
        let _ = std::fs::remove_dir_all(self.tmp.path().join("expected"));
        let expected = expected.map_err(|e| format!("recovery refused a clean log: {e}"))?;
        if expected.state_hash != got.state_hash {
            return Err(format!(
                "recovery of a log with a flipped bit (byte {at}, bit {bit}) reached seq {} \
                 with another state than the clean log's",
                got.last_seq
            ));
        }
        Ok(())
    }
}

fn segment_path(data_dir: &Path) -> std::path::PathBuf {
    rialto_journal::format::journal_dir(data_dir).join(rialto_journal::format::segment_name(1))
}

/// Writes `bytes` as `data_dir`'s one journal segment and recovers from it as `rialto serve`
/// does (a torn tail truncated, no loss accepted).
fn recover_dir(data_dir: &Path, bytes: &[u8]) -> Result<rialto_journal::Recovered, String> {
    let journal = rialto_journal::format::journal_dir(data_dir);
    std::fs::create_dir_all(&journal).map_err(|e| format!("{}: {e}", journal.display()))?;
    let path = segment_path(data_dir);
    std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let options = RecoverOptions {
        repair: true,
        durability: rialto_journal::Durability::Fsync,
        accept_loss: false,
    };
    rialto_journal::recover_with(data_dir, engine_config(), options).map_err(|e| e.to_string())
}

/// A user's open orders in the engine: order id → remaining quantity.
fn open_orders(engine: &Engine, user: i64) -> BTreeMap<i64, i64> {
    engine
        .user_report(user)
        .map(|r| r.orders.iter().map(|o| (o.order, o.remaining)).collect())
        .unwrap_or_default()
}

/// The seq a message tells its receiver of, if it carries one.
fn seq_of(msg: &ServerMsg) -> Option<u64> {
    match *msg {
        ServerMsg::Accepted { seq, .. }
        | ServerMsg::Rejected { seq, .. }
        | ServerMsg::Trade { seq, .. }
        | ServerMsg::Cancelled { seq, .. }
        | ServerMsg::Amended { seq, .. } => Some(seq),
        _ => None,
    }
}

/// Client `i`'s connection as `session`, if it still holds it open.
fn current_conn(conns: &mut [Conn], session: SessionId, i: usize) -> Option<&mut Conn> {
    let at = conns.binary_search_by_key(&session, |c| c.id).ok()?;
    let conn = &mut conns[at];
    (conn.client == i && !conn.dropped).then_some(conn)
}

/// Each client connects from its own address, so that one's failed logins never throttle
/// another's.
fn peer_of(client: usize) -> PeerKey {
    PeerKey::of(IpAddr::V4(Ipv4Addr::new(
        10,
        0,
        (client >> 8) as u8,
        client as u8,
    )))
}

/// Adds a line to the run's trace, and prints it with `print`.
fn tracer(trace: &mut Sha256, print: bool) -> impl FnMut(String) + '_ {
    move |line: String| {
        trace.update(line.as_bytes());
        if print {
            eprintln!("{line}");
        }
    }
}
