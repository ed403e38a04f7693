//! How the web side (tokio) reaches the pipeline, which has one producer: the gateway thread.
//!
//! A web request takes a session id of its own, waits for its one reply on a oneshot channel,
//! and travels through a lock-free queue that the gateway drains into the pipeline each turn.
//! The gateway hands back the replies to web sessions, and every fill and cancellation of any
//! user (whatever gateway the order came from), for order histories and private streams,
//! gathered for up to a millisecond.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_queue::ArrayQueue;
use rialto_core::UserId;
use rialto_wire::ServerMsg;
use tokio::sync::{mpsc, oneshot};

use crate::idle::Bell;
use crate::pipeline::{Op, Reply, Request, SessionId};

/// Messages for the web side, in pipeline order: a user's (`Some`), or public ones (`None`:
/// phase changes and auction results).
pub type WebMessages = Vec<(Option<UserId>, ServerMsg)>;

/// Web sessions are `WEB_SESSION_BASE + n`: above the binary gateway's, below FIX's.
pub const WEB_SESSION_BASE: SessionId = 1 << 40;
/// Requests waiting for the gateway to take them.
const QUEUE_CAPACITY: usize = 4096;

pub fn is_web_session(id: SessionId) -> bool {
    (WEB_SESSION_BASE..crate::fix::FIX_SERVICE_SESSION).contains(&id)
}

#[derive(Debug, PartialEq, Eq)]
pub enum CallError {
    /// The queue to the gateway is full.
    Busy,
    /// The server is stopping: no reply will come.
    ShuttingDown,
    /// No reply within [`super::CALL_TIMEOUT`].
    Timeout,
    /// This node is a read replica: it has no sequencer to send anything to.
    ReadOnlyReplica,
}

/// A read replica's answer to a request, from its own engine; `None`: refused.
pub type ReadOnlyAnswer = dyn Fn(&Reply, &Op) -> Option<ServerMsg> + Send + Sync;

pub struct WebBridge {
    requests: ArrayQueue<Request>,
    closed: std::sync::atomic::AtomicBool,
    /// A read replica's bridge: it leads nowhere; what its engine can answer it answers,
    /// every other call is refused.
    read_only: std::sync::atomic::AtomicBool,
    answer: OnceLock<Box<ReadOnlyAnswer>>,
    gateway_bell: OnceLock<Arc<Bell>>,
    next_session: AtomicU64,
    pending: Mutex<HashMap<SessionId, oneshot::Sender<ServerMsg>>>,
    /// Fills and cancellations for users (and, for `None`, public messages: phase changes and
    /// auction results), in pipeline order, a few at a time.
    user_messages: mpsc::UnboundedSender<WebMessages>,
    /// Batches of user messages handed over so far.
    batches_sent: AtomicU64,
}

impl WebBridge {
    pub fn new() -> (Arc<WebBridge>, mpsc::UnboundedReceiver<WebMessages>) {
        let (user_messages, receiver) = mpsc::unbounded_channel();
        let bridge = Arc::new(WebBridge {
            requests: ArrayQueue::new(QUEUE_CAPACITY),
            closed: std::sync::atomic::AtomicBool::new(false),
            read_only: std::sync::atomic::AtomicBool::new(false),
            answer: OnceLock::new(),
            gateway_bell: OnceLock::new(),
            next_session: AtomicU64::new(WEB_SESSION_BASE),
            pending: Mutex::new(HashMap::new()),
            user_messages,
            batches_sent: AtomicU64::new(0),
        });
        (bridge, receiver)
    }

    /// The gateway's doorbell, set once the gateway exists.
    pub fn set_gateway_bell(&self, bell: Arc<Bell>) {
        let _ = self.gateway_bell.set(bell);
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
    pub async fn call(&self, reply: Reply, op: Op) -> Result<ServerMsg, CallError> {
        if self.is_read_only() {
            let answer = self.answer.get().and_then(|answer| answer(&reply, &op));
            return answer.ok_or(CallError::ReadOnlyReplica);
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(CallError::ShuttingDown);
        }
        let session = self.next_session.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock_pending().insert(session, tx);
        let request = Request { session, reply, op };
        if self.requests.push(request).is_err() {
            self.lock_pending().remove(&session);
            return Err(CallError::Busy);
        }
        if let Some(bell) = self.gateway_bell.get() {
            bell.ring();
        }
        if self.closed.load(Ordering::SeqCst) {
            self.close();
        }
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

    fn lock_pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<SessionId, oneshot::Sender<ServerMsg>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ----- the gateway's side ----------------------------------------------------------------

    /// The next request for the pipeline.
    pub fn pop_request(&self) -> Option<Request> {
        self.requests.pop()
    }

    /// Whether requests wait (the gateway must not sleep long then).
    pub fn has_requests(&self) -> bool {
        !self.requests.is_empty()
    }

    /// A reply to a web session.
    pub fn deliver_reply(&self, session: SessionId, msg: ServerMsg) {
        if let Some(tx) = self.lock_pending().remove(&session) {
            let _ = tx.send(msg);
        }
    }

    /// Fills and cancellations of users' orders, in pipeline order. The gateway gathers them
    /// and sends a few at a time: each send may wake a web thread, which is a system call on
    /// the gateway's thread.
    pub fn deliver_user_messages(&self, messages: WebMessages) {
        self.batches_sent.fetch_add(1, Ordering::SeqCst);
        let _ = self.user_messages.send(messages);
    }

    /// Batches of user messages handed over so far. The gateway hands over what it gathered
    /// before it delivers a web reply, so once a reply is in, every event the pipeline sent
    /// before it is in one of these batches.
    pub fn batches_sent(&self) -> u64 {
        self.batches_sent.load(Ordering::SeqCst)
    }

    /// The gateway is gone: every waiting caller learns it.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.lock_pending().clear();
        while self.requests.pop().is_some() {}
    }
}
