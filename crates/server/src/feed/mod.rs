//! The market data thread: applies the engine's accepted commands to the [`Feed`] and
//! publishes each round's updates as one batch to whoever listens (the WebSocket fan-out,
//! the UDP feed).
//!
//! It runs beside the engine, never in its way: the engine only copies a command and its
//! trades and cancellations into a ring (see `pipeline::MdInput`).

pub mod udp;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use rialto_marketdata::{Feed, Update};
use tokio::sync::broadcast;

use crate::idle::{Bell, Idler, WaitStrategy};
use crate::pipeline::{MdChannel, MdInput, Shared};

/// Inputs applied per lock of the feed: bounds how long a reader (a REST snapshot) waits.
const INPUTS_PER_ROUND: usize = 4096;
/// Batches a listener may fall behind before it loses some (and must resynchronise).
const BATCH_BACKLOG: usize = 4096;

/// One round's updates, in feed order.
#[derive(Debug)]
pub struct Batch {
    pub updates: Vec<Update>,
    /// The sequencer time of the oldest command in the batch (for delivery latency).
    pub ts_ns: i64,
}

/// The feed's state and its outlet, shared by the market data thread and its readers.
pub struct MarketData {
    feed: Mutex<Feed>,
    batches: broadcast::Sender<Arc<Batch>>,
    /// When this run of the feed began (ns since the epoch): sequence numbers restart at 0
    /// with every run, so a client that sees a new epoch starts over from a snapshot.
    pub epoch_ns: i64,
}

impl MarketData {
    pub fn new(feed: Feed) -> Arc<MarketData> {
        let (batches, _) = broadcast::channel(BATCH_BACKLOG);
        let epoch_ns = crate::pipeline::now_ns();
        Arc::new(MarketData {
            feed: Mutex::new(feed),
            batches,
            epoch_ns,
        })
    }

    /// The feed, for snapshots and queries. Subscribe before taking a snapshot: then every
    /// update after the snapshot's sequence number arrives in a batch.
    pub fn feed(&self) -> MutexGuard<'_, Feed> {
        self.feed.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Batch>> {
        self.batches.subscribe()
    }

    /// Waits until the thread has applied everything in the ring (at start-up, so that the
    /// first readers see the recovered venue).
    pub fn settle(&self, channel: &MdChannel, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while !channel.batches.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The thread pops under the lock: once we hold it, what it popped is applied.
        drop(self.feed());
    }

    /// Runs the market data thread until the engine has finished and the ring is empty.
    pub fn spawn(
        self: &Arc<Self>,
        channel: Arc<MdChannel>,
        shared: Arc<Shared>,
    ) -> std::io::Result<JoinHandle<()>> {
        let md = self.clone();
        std::thread::Builder::new()
            .name("rialto-md".into())
            .spawn(move || md.run(&channel, &shared))
    }

    fn run(&self, channel: &MdChannel, shared: &Shared) {
        let ring = &channel.batches;
        let bell = Bell::for_thread(std::thread::current());
        ring.set_bell(bell.clone());
        // Market data is not latency-critical enough to spin a core away from the engine.
        let mut idler = Idler::new(WaitStrategy::Backoff);
        loop {
            let finished = shared.engine_done.load(Ordering::SeqCst) || shared.has_failed();
            let work = self.round(channel);
            if work == 0 && finished && ring.is_empty() {
                break;
            }
            idler.idle_thread(work, &bell, Duration::from_millis(1), || !ring.is_empty());
        }
    }

    /// Applies what the ring holds (up to a bound) and publishes the updates as one batch.
    fn round(&self, channel: &MdChannel) -> usize {
        let mut feed = self.feed();
        let mut n = 0;
        let mut oldest_ts = i64::MAX;
        while n < INPUTS_PER_ROUND {
            let Some(batch) = channel.batches.pop() else {
                break;
            };
            n += batch.len();
            for input in &batch {
                match *input {
                    MdInput::Trade(t) => feed.on_event(&rialto_core::OwnedEvent::Trade(t)),
                    MdInput::Cancelled(c) => feed.on_event(&rialto_core::OwnedEvent::Cancelled(c)),
                    MdInput::Applied { ts_ns, cmd } => {
                        oldest_ts = oldest_ts.min(ts_ns);
                        feed.on_applied(ts_ns, &cmd)
                    }
                }
            }
            channel.recycle(batch);
        }
        if !feed.updates().is_empty() {
            let updates = feed.take_updates();
            // Sent under the lock: a reader that subscribed and then took a snapshot sees
            // every later update.
            let _ = self.batches.send(Arc::new(Batch {
                updates,
                ts_ns: oldest_ts,
            }));
        }
        n
    }
}
