//! How the web side (tokio) reaches the pipeline.
//!
//! The web side is a gateway of its own, with its own rings. A web request takes a session id
//! of its own, waits for its one reply on a oneshot channel, and travels through the web's
//! intake ring, which the journal stage takes from beside the gateway thread's (pipeline.rs,
//! `JournalStage`). The engine stage sends the web's replies, and every fill and cancellation
//! of any user (whatever gateway the order came from, for order histories and private
//! streams), into the web's outbound ring; [`WebDelivery`], an agent whose duty cycle runs on
//! the gateway's thread, answers the calls and hands the users' messages over, gathered for up
//! to a millisecond.
//!
//! That hand-over is bounded (`[web] user_message_batches` batches): the delivery never waits
//! for the web side. A batch that finds the queue full is dropped and becomes a [`Gap`]: which
//! users lost messages (and up to which seq), whether public ones were lost, how many. The gap
//! rides on the next batch that fits, and the web side turns it into `gap` events on the
//! users' private streams and forgets what it can no longer show correctly (web/history.rs).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rialto_core::UserId;
use tokio::sync::{mpsc, oneshot};

use crate::event::{Event, Outbound, Target};
use crate::metrics::{Metrics, SAMPLE_EVERY};
use crate::pipeline::{Op, Reply, Request, SessionId};
use crate::ring::Ring;

/// Messages for the web side, in pipeline order: a user's (`Some`), or public ones (`None`:
/// phase changes and auction results).
pub type WebMessages = Vec<(Option<UserId>, Event)>;

/// One hand-over to the web side: the gap before these messages, if some were dropped.
pub struct WebBatch {
    pub gap: Option<Gap>,
    pub messages: WebMessages,
}

/// Messages the web side never got because its queue was full.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Gap {
    /// Each user who lost messages: the highest seq among them and how many.
    pub users: BTreeMap<UserId, (u64, u64)>,
    /// The highest seq among the public messages lost (phase changes, auctions, settings).
    pub public_seq: Option<u64>,
    /// Batches of messages dropped (each counted in [`WebBridge::batches_sent`]).
    pub batches: u64,
    /// Messages dropped.
    pub messages: u64,
}

impl Gap {
    pub fn is_empty(&self) -> bool {
        self.batches == 0
    }

    fn add(&mut self, messages: &WebMessages) {
        self.batches += 1;
        self.messages += messages.len() as u64;
        for (user, msg) in messages {
            let seq = message_seq(msg);
            match user {
                Some(user) => {
                    let (last, count) = self.users.entry(*user).or_default();
                    *last = (*last).max(seq);
                    *count += 1;
                }
                None => self.public_seq = Some(self.public_seq.unwrap_or(0).max(seq)),
            }
        }
    }
}

/// The seq of the command a user or public message comes from (0 for others).
pub fn message_seq(msg: &Event) -> u64 {
    match *msg {
        Event::Trade { seq, .. }
        | Event::Cancelled { seq, .. }
        | Event::Amended { seq, .. }
        | Event::Triggered { seq, .. }
        | Event::Liquidated { seq, .. }
        | Event::PhaseChanged { seq, .. }
        | Event::Auction { seq, .. }
        | Event::VenueSettings { seq, .. }
        | Event::SymbolAdded { seq, .. } => seq,
        _ => 0,
    }
}

/// Web sessions are `WEB_SESSION_BASE + n`: above the binary gateway's, below FIX's.
pub const WEB_SESSION_BASE: SessionId = 1 << 40;
/// Requests waiting for the journal stage to take them (the web's intake ring), and the
/// engine stage's events waiting for [`WebDelivery`] (the web's outbound ring).
const QUEUE_CAPACITY: usize = 4096;
/// The longest users' messages wait to be handed to the web side together, and how many may
/// wait: each hand-over may wake a web thread, a system call on the delivering thread.
pub const WEB_MESSAGES_WAIT: Duration = Duration::from_millis(1);
const WEB_MESSAGES_MAX: usize = 1024;

pub fn is_web_session(id: SessionId) -> bool {
    (WEB_SESSION_BASE..crate::fix::FIX_SERVICE_SESSION).contains(&id)
}

#[derive(Debug, PartialEq, Eq)]
pub enum CallError {
    /// The web's intake ring is full.
    Busy,
    /// The server is stopping: no reply will come.
    ShuttingDown,
    /// No reply within [`super::CALL_TIMEOUT`].
    Timeout,
    /// This node is a read replica: it has no sequencer to send anything to.
    ReadOnlyReplica,
}

/// A read replica's answer to a request, from its own engine; `None`: refused.
pub type ReadOnlyAnswer = dyn Fn(&Reply, &Op) -> Option<Event> + Send + Sync;

pub struct WebBridge {
    /// The web's intake ring into the pipeline: many producers (the web's tasks), one
    /// consumer (the journal stage).
    requests: Arc<Ring<Request>>,
    /// The engine stage's events for the web side: one producer (the engine stage; the
    /// snapshot writer's rare replies too), one consumer ([`WebDelivery`]).
    events: Arc<Ring<Outbound>>,
    /// The server stops: no new call is taken (those in the ring are still answered).
    refusing: std::sync::atomic::AtomicBool,
    /// The gateway is gone: nothing more is answered.
    closed: std::sync::atomic::AtomicBool,
    /// A read replica's bridge: it leads nowhere; what its engine can answer it answers,
    /// every other call is refused.
    read_only: std::sync::atomic::AtomicBool,
    answer: OnceLock<Box<ReadOnlyAnswer>>,
    next_session: AtomicU64,
    pending: Mutex<HashMap<SessionId, oneshot::Sender<Event>>>,
    /// Fills and cancellations for users (and, for `None`, public messages: phase changes and
    /// auction results), in pipeline order, a few at a time; bounded.
    user_messages: mpsc::Sender<WebBatch>,
    /// Batches of user messages handed over (or dropped) so far.
    batches_sent: AtomicU64,
    /// User messages dropped because the web side's queue was full.
    dropped_messages: AtomicU64,
    /// Held by a test to stall the web side's reading of user messages.
    stall: tokio::sync::RwLock<()>,
}

impl WebBridge {
    /// A bridge whose user-message queue holds `user_message_batches` batches (at least 1).
    pub fn new(user_message_batches: usize) -> (Arc<WebBridge>, mpsc::Receiver<WebBatch>) {
        let (user_messages, receiver) = mpsc::channel(user_message_batches.max(1));
        let bridge = Arc::new(WebBridge {
            requests: Ring::new(QUEUE_CAPACITY),
            events: Ring::new(QUEUE_CAPACITY),
            refusing: std::sync::atomic::AtomicBool::new(false),
            closed: std::sync::atomic::AtomicBool::new(false),
            read_only: std::sync::atomic::AtomicBool::new(false),
            answer: OnceLock::new(),
            next_session: AtomicU64::new(WEB_SESSION_BASE),
            pending: Mutex::new(HashMap::new()),
            user_messages,
            batches_sent: AtomicU64::new(0),
            dropped_messages: AtomicU64::new(0),
            stall: tokio::sync::RwLock::new(()),
        });
        (bridge, receiver)
    }

    /// The web's intake ring, for the pipeline's journal stage to take from
    /// (`PipelineConfig::intakes`).
    pub fn intake(&self) -> Arc<Ring<Request>> {
        self.requests.clone()
    }

    /// The web's outbound ring, for the engine stage to send the web's events into
    /// (`PipelineConfig::web_outbound`).
    pub fn outlet(&self) -> Arc<Ring<Outbound>> {
        self.events.clone()
    }

    /// Makes this the bridge of a read replica (no gateway, no pipeline): `answer` answers
    /// what the replica's engine can, every other call is refused with
    /// [`CallError::ReadOnlyReplica`], and the web side refuses what would write.
    pub fn set_read_only(&self, answer: Box<ReadOnlyAnswer>) {
        let _ = self.answer.set(answer);
        self.read_only.store(true, Ordering::SeqCst);
    }

    /// Whether this node is a read replica.
    pub fn is_read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }

    /// Sends one request into the pipeline and waits for its reply.
    pub async fn call(&self, reply: Reply, op: Op) -> Result<Event, CallError> {
        if self.is_read_only() {
            let answer = self.answer.get().and_then(|answer| answer(&reply, &op));
            return answer.ok_or(CallError::ReadOnlyReplica);
        }
        let (session, rx) = self.submit(reply, op)?;
        match tokio::time::timeout(super::CALL_TIMEOUT, rx).await {
            Ok(Ok(msg)) => Ok(msg),
            // A dropped sender means the gateway stopped before answering.
            Ok(Err(_)) => Err(CallError::ShuttingDown),
            Err(_) => {
                self.lock_pending().remove(&session);
                Err(CallError::Timeout)
            }
        }
    }

    /// Puts one request into the web's intake ring, under a web session of its own, and
    /// returns that session and where its one reply will come (the half of [`Self::call`]
    /// that does not wait; the simulator's web traders use it without a runtime).
    pub fn submit(
        &self,
        reply: Reply,
        op: Op,
    ) -> Result<(SessionId, oneshot::Receiver<Event>), CallError> {
        if self.is_read_only() {
            return Err(CallError::ReadOnlyReplica);
        }
        if self.refusing.load(Ordering::SeqCst) || self.closed.load(Ordering::SeqCst) {
            return Err(CallError::ShuttingDown);
        }
        let session = self.next_session.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock_pending().insert(session, tx);
        let request = Request { session, reply, op };
        if self.requests.try_push(request).is_err() {
            self.lock_pending().remove(&session);
            return Err(CallError::Busy);
        }
        self.requests.ring();
        // Closed while this call was on its way: the request may sit in the ring for good,
        // and `close` may have come before this call's sender was in `pending`.
        if self.closed.load(Ordering::SeqCst) && self.lock_pending().remove(&session).is_some() {
            return Err(CallError::ShuttingDown);
        }
        Ok((session, rx))
    }

    fn lock_pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<SessionId, oneshot::Sender<Event>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ----- the delivery's side ---------------------------------------------------------------

    /// The server stops: new calls are refused; those already in the ring are journaled and
    /// answered as the pipeline drains.
    pub fn refuse_calls(&self) {
        self.refusing.store(true, Ordering::SeqCst);
    }

    /// A reply to a web session.
    pub fn deliver_reply(&self, session: SessionId, msg: Event) {
        if let Some(tx) = self.lock_pending().remove(&session) {
            let _ = tx.send(msg);
        }
    }

    /// Fills and cancellations of users' orders, in pipeline order. [`WebDelivery`] gathers
    /// them and sends a few at a time. Never waits: when the web side's queue is full the
    /// batch is dropped into `gap`, which goes with the next batch that fits (an empty batch
    /// carries a gap alone).
    pub fn deliver_user_messages(&self, messages: WebMessages, gap: &mut Gap) {
        if messages.is_empty() && gap.is_empty() {
            return;
        }
        if !messages.is_empty() {
            self.batches_sent.fetch_add(1, Ordering::SeqCst);
        }
        let batch = WebBatch {
            gap: (!gap.is_empty()).then(|| std::mem::take(gap)),
            messages,
        };
        match self.user_messages.try_send(batch) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(batch)) => {
                if let Some(before) = batch.gap {
                    *gap = before;
                }
                if !batch.messages.is_empty() {
                    gap.add(&batch.messages);
                }
                self.dropped_messages
                    .fetch_add(batch.messages.len() as u64, Ordering::Relaxed);
            }
            // The web side is gone (the server stops): nobody to tell.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Batches of user messages handed over so far (dropped ones included: the gap that
    /// stands for them counts them). [`WebDelivery`] hands over what it gathered before it
    /// delivers a web reply, so once a reply is in, every event the pipeline sent before it
    /// is in one of these batches.
    pub fn batches_sent(&self) -> u64 {
        self.batches_sent.load(Ordering::SeqCst)
    }

    /// User messages dropped so far because the web side fell behind
    /// (`rialto_web_user_messages_dropped`).
    pub fn dropped_messages(&self) -> u64 {
        self.dropped_messages.load(Ordering::Relaxed)
    }

    /// Stalls the web side's reading of user messages while the guard lives (for tests of a
    /// web side that falls behind).
    #[doc(hidden)]
    pub fn stall_user_messages(&self) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        self.stall.blocking_write()
    }

    /// Waits while a test stalls the web side.
    pub(crate) async fn unstalled(&self) {
        drop(self.stall.read().await);
    }

    /// The gateway is gone (the pipeline has drained): every waiting caller learns it.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.lock_pending().clear();
        while self.requests.pop().is_some() {}
    }
}

/// The web side's delivery agent: takes the engine stage's events from the web's outbound
/// ring, answers each web call with its reply, and hands users' and public messages to the
/// web side in batches. A state machine driven by its caller's duty cycle and clock (the
/// gateway thread runs it, gateway.rs); it never waits for the web side.
pub struct WebDelivery {
    bridge: Arc<WebBridge>,
    events: Arc<Ring<Outbound>>,
    /// Messages gathered for the web side, and when a batch was last handed over.
    messages: WebMessages,
    sent_at: Instant,
    /// Messages the web side's full queue refused, to announce with the next batch.
    gap: Gap,
    metrics: Arc<Metrics>,
    replies: u64,
}

impl WebDelivery {
    pub fn new(bridge: Arc<WebBridge>, metrics: Arc<Metrics>, now: Instant) -> WebDelivery {
        WebDelivery {
            events: bridge.outlet(),
            bridge,
            messages: Vec::new(),
            sent_at: now,
            gap: Gap::default(),
            metrics,
            replies: 0,
        }
    }

    /// The outbound ring (its consumer's doorbell is set on it).
    pub fn ring(&self) -> &Ring<Outbound> {
        &self.events
    }

    /// One duty cycle: every event in the ring, then a hand-over if one is due. Returns the
    /// events taken.
    pub fn do_work(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(Outbound { target, event }) = self.events.pop() {
            n += 1;
            match target {
                Target::Session(session) => {
                    if let Event::Accepted { ts_ns, .. } | Event::Rejected { ts_ns, .. } = event {
                        self.replies += 1;
                        if self.replies.is_multiple_of(SAMPLE_EVERY) {
                            let ns = crate::pipeline::now_ns().saturating_sub(ts_ns);
                            self.metrics.roundtrip_latency.record(ns.max(0) as u64);
                        }
                    }
                    // The web side hears of every event before this reply first: a web call
                    // that waits for them (an order's outcome) then knows it has them all.
                    self.flush(now, true);
                    self.bridge.deliver_reply(session, event);
                }
                Target::User(user) => self.messages.push((Some(user), event)),
                Target::Public | Target::WebStatus => self.messages.push((None, event)),
            }
            // A batch holds at most `WEB_MESSAGES_MAX`: the queue's bound is in batches.
            if self.messages.len() >= WEB_MESSAGES_MAX {
                self.flush(now, true);
            }
        }
        self.flush(now, false);
        n
    }

    /// Hands the gathered messages over: now, or once they waited [`WEB_MESSAGES_WAIT`] (a
    /// gap alone, once that long passed since the last hand-over).
    pub fn flush(&mut self, now: Instant, force: bool) {
        let waited = now.saturating_duration_since(self.sent_at) >= WEB_MESSAGES_WAIT;
        let due = if self.messages.is_empty() {
            !self.gap.is_empty() && waited
        } else {
            force || self.messages.len() >= WEB_MESSAGES_MAX || waited
        };
        if due {
            let messages = std::mem::take(&mut self.messages);
            self.bridge.deliver_user_messages(messages, &mut self.gap);
            self.sent_at = now;
        }
    }

    /// Whether events wait in the ring, or a gap for room in the web side's queue (which
    /// nobody announces: the caller looks again within [`WEB_MESSAGES_WAIT`]).
    pub fn has_work(&self) -> bool {
        !self.events.is_empty()
    }

    pub fn has_gap(&self) -> bool {
        !self.gap.is_empty()
    }

    /// The server refuses new web calls (those in the intake ring are still answered).
    pub fn refuse_calls(&self) {
        self.bridge.refuse_calls();
    }

    /// The pipeline has drained: delivers what is left, then every waiting caller learns that
    /// no more replies come.
    pub fn close(&mut self, now: Instant) {
        self.do_work(now);
        self.flush(now, true);
        self.bridge.close();
    }
}
