//! The market data thread: replays the journaled commands on a replica of the engine, applies
//! each with its events (trades, cancellations, phases) to the [`Feed`], and
//! publishes each round's updates as one batch to whoever listens (the WebSocket fan-out,
//! the UDP feed).
//!
//! It runs beside the engine, never in its way: the engine does nothing for market data. The
//! journal stage hands over a copy of each batch's encoded records (one copy per batch), and
//! the replica, deterministic like the engine, produces the very same events. A record is
//! replayed only once the engine has applied it, so market data never shows a command that
//! is not durable as the journal's mode says.
//!
//! With `[history]` on, each command's result and events also become rows of the durable
//! history, handed to its writer once per round without waiting ([`crate::history`]).

pub mod udp;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use rialto_core::{Engine, OwnedEvent, PREFETCH_LOOKAHEAD};
use rialto_journal::format::{RawRecord, parse_record};
use rialto_marketdata::{Feed, Update};
use tokio::sync::broadcast;

use crate::idle::{Bell, Idler, WaitStrategy};
use crate::pipeline::{MdChannel, Prefetch, Shared};

/// Commands applied per lock of the feed: bounds how long a reader (a REST snapshot) waits.
const COMMANDS_PER_ROUND: usize = 4096;
/// Batches a listener may fall behind before it loses some (and must resynchronise).
const BATCH_BACKLOG: usize = 4096;

/// One round's updates, in feed order.
#[derive(Debug)]
pub struct Batch {
    pub updates: Vec<Update>,
    /// The sequencer time of the oldest command in the batch (for delivery latency).
    pub ts_ns: i64,
    /// The feed starts a new epoch after this batch (a read replica, once another node
    /// leads): the updates before it are the old epoch's; the numbers start again.
    pub restart: bool,
}

/// The feed's state and its outlet, shared by the market data thread and its readers.
pub struct MarketData {
    feed: Mutex<Feed>,
    batches: broadcast::Sender<Arc<Batch>>,
    /// When this run of the feed began (ns since the epoch): sequence numbers restart at 0
    /// with every run, so a client that sees a new epoch starts over from a snapshot. On a
    /// read replica, the leader's (it changes when another node leads).
    epoch_ns: AtomicI64,
    /// A read replica's feed restarts: (engine seq, epoch), oldest first, as the leaders
    /// announced them in the log. The feed is rebuilt from the replayed engine at that seq.
    restarts: Mutex<VecDeque<(u64, i64)>>,
    /// The last seq the feed has applied.
    applied_seq: AtomicU64,
    /// Rung after each batch: listeners that sleep in an event loop of their own (the FIX
    /// gateway) rather than on the broadcast queue.
    bells: Mutex<Vec<Arc<Bell>>>,
}

impl MarketData {
    /// Market data for a venue whose engine is `engine`, as it stands.
    pub fn new(engine: &Engine) -> Arc<MarketData> {
        let (batches, _) = broadcast::channel(BATCH_BACKLOG);
        let epoch_ns = crate::pipeline::now_ns();
        Arc::new(MarketData {
            feed: Mutex::new(Feed::from_engine(engine)),
            batches,
            epoch_ns: AtomicI64::new(epoch_ns),
            restarts: Mutex::new(VecDeque::new()),
            applied_seq: AtomicU64::new(engine.last_seq()),
            bells: Mutex::new(Vec::new()),
        })
    }

    /// The feed's epoch: when its run began (ns since the Unix epoch).
    pub fn epoch_ns(&self) -> i64 {
        self.epoch_ns.load(Ordering::Acquire)
    }

    /// Restarts the feed at engine seq `seq` with epoch `epoch_ns`, once the market data
    /// thread has replayed up to it (a read replica, at each feed epoch the log holds). Call
    /// before the engine's applied seq passes `seq`.
    pub fn restart_at(&self, seq: u64, epoch_ns: i64) {
        let mut restarts = self.restarts.lock().unwrap_or_else(|e| e.into_inner());
        restarts.push_back((seq, epoch_ns));
    }

    /// The next restart due, if any.
    fn next_restart(&self) -> Option<(u64, i64)> {
        let restarts = self.restarts.lock().unwrap_or_else(|e| e.into_inner());
        restarts.front().copied()
    }

    /// The feed, for snapshots and queries. Subscribe before taking a snapshot: then every
    /// update after the snapshot's sequence number arrives in a batch.
    pub fn feed(&self) -> MutexGuard<'_, Feed> {
        self.feed.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Batch>> {
        self.batches.subscribe()
    }

    /// Rings `bell` after every batch from now on (it rings only a listener that sleeps).
    pub fn wake_on_batches(&self, bell: &Arc<Bell>) {
        let mut bells = self.bells.lock().unwrap_or_else(|e| e.into_inner());
        if !bells.iter().any(|b| Arc::ptr_eq(b, bell)) {
            bells.push(bell.clone());
        }
    }

    pub fn stop_waking(&self, bell: &Arc<Bell>) {
        let mut bells = self.bells.lock().unwrap_or_else(|e| e.into_inner());
        bells.retain(|b| !Arc::ptr_eq(b, bell));
    }

    /// Sends an empty batch: a listener that waits for batches and is stopping wakes up and
    /// looks at its stop flag.
    pub fn nudge(&self) {
        let _ = self.batches.send(Arc::new(Batch {
            updates: Vec::new(),
            ts_ns: crate::pipeline::now_ns(),
            restart: false,
        }));
    }

    /// The last seq the feed has applied.
    pub fn applied_seq(&self) -> u64 {
        self.applied_seq.load(Ordering::Acquire)
    }

    /// Waits until the feed has caught up with the engine (at start-up, so that the first
    /// readers see the recovered venue).
    pub fn settle(&self, shared: &Shared, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while self.applied_seq.load(Ordering::Acquire) < shared.applied_seq.load(Ordering::Acquire)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Runs the market data thread, replaying on `replica` (a copy of the engine as it
    /// stands, which becomes the thread's own) until the engine has finished and everything
    /// it applied is replayed. `prefetch` is `pipeline.prefetch`: the replica meets the same
    /// memory as the engine, and prefetches the same way.
    pub fn spawn(
        self: &Arc<Self>,
        channel: Arc<MdChannel>,
        shared: Arc<Shared>,
        replica: Engine,
        prefetch: Prefetch,
        history: Option<crate::history::HistoryTap>,
    ) -> std::io::Result<JoinHandle<()>> {
        let md = self.clone();
        let mut replay = Replay::new(replica, prefetch, history);
        std::thread::Builder::new()
            .name("rialto-md".into())
            .spawn(move || md.run(&channel, &shared, &mut replay))
    }

    fn run(&self, channel: &MdChannel, shared: &Shared, replay: &mut Replay) {
        let ring = &channel.chunks;
        let bell = Bell::for_thread(std::thread::current());
        ring.set_bell(bell.clone());
        // Market data is not latency-critical enough to spin a core away from the engine.
        let mut idler = Idler::new(WaitStrategy::Backoff);
        loop {
            let finished = shared.engine_done.load(Ordering::SeqCst) || shared.has_failed();
            let work = match self.round(channel, shared, replay) {
                Ok(work) => work,
                Err(problem) => {
                    shared.fail(format!("market data replica: {problem}"));
                    return;
                }
            };
            if work == 0 && finished && ring.is_empty() {
                break;
            }
            idler.idle_thread(work, &bell, Duration::from_millis(1), || !ring.is_empty());
        }
    }

    /// Replays what the engine has applied (up to a bound) and publishes the updates as one
    /// batch. Returns the commands replayed.
    fn round(
        &self,
        channel: &MdChannel,
        shared: &Shared,
        replay: &mut Replay,
    ) -> Result<usize, String> {
        while let Some(chunk) = channel.chunks.pop() {
            replay.chunks.push_back(chunk);
        }
        let applied = shared.applied_seq.load(Ordering::Acquire);
        // Like the engine stage: on a venue that outgrows the caches, read records ahead and
        // prefetch what they touch while the one before is applied.
        let prefetch = replay.prefetch.now(&replay.engine);
        let in_hand = if prefetch { PREFETCH_LOOKAHEAD + 1 } else { 1 };
        let mut feed = self.feed();
        let mut n = 0;
        let mut oldest_ts = None;
        while n < COMMANDS_PER_ROUND {
            // A restart announced for the seq the replay has reached: the feed starts afresh
            // from the replayed engine, as the leader's did (`restart_at`).
            let mut restart_seq = u64::MAX;
            while let Some((seq, epoch_ns)) = self.next_restart() {
                let at = replay.engine.last_seq();
                if seq > at {
                    restart_seq = seq;
                    break;
                }
                if seq == at {
                    if !feed.updates().is_empty() {
                        let updates = feed.take_updates();
                        self.send_batch(updates, oldest_ts.take());
                    }
                    *feed = Feed::from_engine(&replay.engine);
                    self.epoch_ns.store(epoch_ns, Ordering::Release);
                    // Whoever follows the old epoch's numbers must start over (the listeners
                    // read the new epoch when this batch reaches them).
                    let _ = self.batches.send(Arc::new(Batch {
                        updates: Vec::new(),
                        ts_ns: crate::pipeline::now_ns(),
                        restart: true,
                    }));
                    tracing::info!(seq, epoch_ns, "the market data feed starts a new epoch");
                } else {
                    tracing::warn!(
                        seq,
                        at,
                        "a feed epoch for a seq already passed: not applied"
                    );
                }
                let mut restarts = self.restarts.lock().unwrap_or_else(|e| e.into_inner());
                restarts.pop_front();
            }
            while replay.ahead.len() < in_hand && replay.read_record(channel)? {}
            match replay.ahead.front() {
                Some(record) if record.seq <= applied && record.seq <= restart_seq => {}
                _ => break,
            }
            let record = replay.ahead.pop_front().expect("just looked");
            let expected = replay.engine.last_seq() + 1;
            if record.seq != expected {
                return Err(format!(
                    "record seq {} where {expected} was expected",
                    record.seq
                ));
            }
            if prefetch {
                let ahead = &replay.ahead;
                let upcoming = |n| match n {
                    0 => Some(&record.command),
                    n => ahead.get(n - 1).map(|r| &r.command),
                };
                replay.engine.prefetch_upcoming(upcoming);
                feed.prefetch_upcoming(upcoming);
            }
            replay.events.clear();
            let (seq, ts_ns, cmd) = (record.seq, record.ts_ns, record.command);
            // A rejected command's events (the expiries its time brought) count too.
            let result = replay.engine.apply(seq, ts_ns, &cmd, &mut replay.events);
            feed.apply(ts_ns, &cmd, result.is_ok(), &replay.events);
            if let Some(history) = &mut replay.history {
                history.record(seq, ts_ns, &cmd, result, &replay.events);
            }
            oldest_ts.get_or_insert(ts_ns);
            n += 1;
        }
        // Every round, one that replayed nothing too: the rows a busy history writer left
        // waiting go as soon as it has taken what it had.
        if let Some(history) = &mut replay.history {
            history.flush();
        }
        if n > 0 {
            self.applied_seq
                .store(replay.engine.last_seq(), Ordering::Release);
        }
        if !feed.updates().is_empty() {
            let updates = feed.take_updates();
            // Sent under the lock: a reader that subscribed and then took a snapshot sees
            // every later update.
            self.send_batch(updates, oldest_ts);
        }
        Ok(n)
    }

    /// Publishes one batch (with the feed locked) and rings the listeners' bells.
    fn send_batch(&self, updates: Vec<Update>, oldest_ts: Option<i64>) {
        let _ = self.batches.send(Arc::new(Batch {
            updates,
            ts_ns: oldest_ts.unwrap_or_else(crate::pipeline::now_ns),
            restart: false,
        }));
        for bell in self.bells.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            bell.ring();
        }
    }
}

/// The market data thread's work without its thread: the simulator (docs/simulation.md) runs
/// [`MarketData::round`] on its own thread, step by step, and compares the replica's state with
/// the engine's.
pub struct SteppedReplica {
    md: Arc<MarketData>,
    channel: Arc<MdChannel>,
    replay: Replay,
}

impl SteppedReplica {
    /// One round of the market data thread: replays what the engine has applied.
    pub fn step(&mut self, shared: &Shared) -> Result<usize, String> {
        self.md.round(&self.channel, shared, &mut self.replay)
    }

    /// The replica engine.
    pub fn engine(&self) -> &Engine {
        &self.replay.engine
    }

    pub fn market_data(&self) -> &Arc<MarketData> {
        &self.md
    }
}

impl MarketData {
    /// What [`Self::spawn`] runs, to be stepped by the caller instead (without history).
    pub fn stepped(
        self: &Arc<Self>,
        channel: Arc<MdChannel>,
        replica: Engine,
        prefetch: Prefetch,
    ) -> SteppedReplica {
        SteppedReplica {
            md: self.clone(),
            channel,
            replay: Replay::new(replica, prefetch, None),
        }
    }
}

/// The market data thread's own engine, and the journal records it has yet to replay.
struct Replay {
    engine: Engine,
    events: Vec<OwnedEvent>,
    chunks: VecDeque<Vec<u8>>,
    /// Where the next record starts in the front chunk.
    pos: usize,
    /// Records read from the chunks and not replayed yet, in order.
    ahead: VecDeque<RawRecord>,
    /// `pipeline.prefetch`, as for the engine stage.
    prefetch: Prefetch,
    /// Each command's rows for the history writer (`[history]`), when on.
    history: Option<crate::history::HistoryTap>,
}

impl Replay {
    fn new(
        engine: Engine,
        prefetch: Prefetch,
        history: Option<crate::history::HistoryTap>,
    ) -> Replay {
        Replay {
            engine,
            events: Vec::with_capacity(64),
            chunks: VecDeque::new(),
            pos: 0,
            ahead: VecDeque::with_capacity(PREFETCH_LOOKAHEAD + 1),
            prefetch,
            history,
        }
    }

    /// Reads the next record of the chunks into `ahead`, giving emptied chunks back. Returns
    /// whether there was one.
    fn read_record(&mut self, channel: &MdChannel) -> Result<bool, String> {
        while let Some(chunk) = self.chunks.front() {
            if self.pos < chunk.len() {
                let record = parse_record(chunk, self.pos).map_err(|e| format!("{e:?}"))?;
                self.pos += record.size;
                self.ahead.push_back(record);
                return Ok(true);
            }
            let done = self.chunks.pop_front().expect("just looked");
            channel.recycle(done);
            self.pos = 0;
        }
        Ok(false)
    }
}
