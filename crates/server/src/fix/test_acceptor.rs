//! A FIX session test acceptor (`rialto fix test-acceptor`): the session layer set up the way
//! the session acceptance scripts of QuickFIX and QuickFIX/J expect, behind their test
//! application (QuickFIX's `ATApplication`).
//!
//! - We are `ISLD`, the counterparty is `TW`. FIX.4.0, 4.1, 4.2, 4.3, 4.4 and FIXT.1.1
//!   (DefaultApplVerID 7, 8 or 9: FIX 5.0, 5.0SP1, 5.0SP2) share one port: the first message's
//!   BeginString and CompIDs pick the session, and a first message that names no session is
//!   answered by closing the connection (case 1S.c; QuickFIX's scripts 1c, 1d). The current
//!   QuickFIX scripts name the counterparty per version instead (`TW40` ... `TW44`, `TW50`,
//!   `TW50SP1`, `TW50SP2`): those are sessions too (the three FIXT.1.1 ones take any of the
//!   three DefaultApplVerIDs). A second connection for a session in use is closed (case 1S.b).
//! - No credentials. Sequence numbers go back to 1 on every disconnect, messages are kept in
//!   memory only (for resends within a connection).
//! - NewOrderSingle (D) and SecurityDefinition (d) are echoed: the same fields in the same
//!   order under our header. A NewOrderSingle with PossResend (97) = Y whose ClOrdID was already
//!   seen on this connection is ignored (case 19a). Any other application message gets a
//!   BusinessMessageReject (j) with reason 3, unsupported message type.
//!
//! One thread per connection, blocking reads with a short timeout that drives the session
//! timers. Nothing here trusts the input: a buffer limit, a connection limit, garbage and
//! half messages end in a closed connection, never a panic.

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rialto_fix::app;
use rialto_fix::parse::parse_uint;
use rialto_fix::session::{
    BusinessReject, MemoryStore, Outcome, Reject, Session, SessionConfig, SessionError,
    business_reject_reason, reject_reason,
};
use rialto_fix::{ApplVersion, Frame, Version, next_frame, tags};

use crate::pipeline::now_ns;

/// Our CompID: the SenderCompID we send.
pub const OUR_COMP_ID: &str = "ISLD";
/// The counterparty's CompID (QuickFIX/J's scripts and QuickFIX's older ones).
pub const THEIR_COMP_ID: &str = "TW";
/// The sessions served: a version and the counterparty's CompID. QuickFIX's current scripts
/// use a CompID per version.
pub const SESSIONS: [(Version, &str); 14] = [
    (Version::Fix40, THEIR_COMP_ID),
    (Version::Fix41, THEIR_COMP_ID),
    (Version::Fix42, THEIR_COMP_ID),
    (Version::Fix43, THEIR_COMP_ID),
    (Version::Fix44, THEIR_COMP_ID),
    (Version::Fixt11, THEIR_COMP_ID),
    (Version::Fix40, "TW40"),
    (Version::Fix41, "TW41"),
    (Version::Fix42, "TW42"),
    (Version::Fix43, "TW43"),
    (Version::Fix44, "TW44"),
    (Version::Fixt11, "TW50"),
    (Version::Fixt11, "TW50SP1"),
    (Version::Fixt11, "TW50SP2"),
];
/// The most unprocessed input a connection may hold (and the longest message taken).
pub const MAX_INPUT_BYTES: usize = 1 << 20;
/// Connections open at once; more are closed as they arrive.
pub const MAX_CONNECTIONS: usize = 64;
/// ClOrdIDs remembered per connection for the PossResend check; beyond this the oldest
/// knowledge is dropped (the set is cleared), which only weakens duplicate detection.
pub const MAX_SEEN_CL_ORD_IDS: usize = 100_000;
/// How long a blocking read waits: the granularity of heartbeats and timeouts.
const READ_TIMEOUT: Duration = Duration::from_millis(50);
/// A client that does not read its messages for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection must send its first whole message within this time.
const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// On shutdown, how long a logged-on client has to answer our Logout.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How long a connection waits for its version's session to be given back by a connection
/// that is closing; after that the session is in use and the connection is closed.
const SESSION_WAIT: Duration = Duration::from_millis(300);
/// How often the accept loop looks at the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
/// Bytes read per `read` call.
const READ_CHUNK: usize = 64 * 1024;

/// Application messages are checked against the data dictionary of their version (on
/// FIXT.1.1, the one their ApplVerID or the Logon's DefaultApplVerID names), as the QuickFIX
/// acceptance scripts expect (their 14x cases: bad tags, missing fields, values out of range).
pub fn validate_app(session: &Session<MemoryStore>, frame: &Frame<'_>) -> Result<(), app::Invalid> {
    let version = session.appl_version_of(frame).ok_or(app::Invalid {
        reason: reject_reason::VALUE_INCORRECT,
        ref_tag: tags::APPL_VER_ID,
        text: "ApplVerID (1128) not supported: only 7, 8 or 9",
    })?;
    let options = session.config().validation();
    rialto_fix::dict::validate_with(version, frame, options).map_err(app::Invalid::from)
}

/// The configuration of one session.
pub fn session_config(version: Version, their_comp_id: &str) -> SessionConfig {
    let mut config = SessionConfig::new(version, OUR_COMP_ID, their_comp_id);
    config.reset_on_disconnect = true;
    config
}

/// A bound test acceptor; [`TestAcceptor::run`] serves it until the stop flag is set.
pub struct TestAcceptor {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// What the connection threads share: the sessions, each taken by the connection using it.
struct Shared {
    slots: [Mutex<Option<Slot>>; SESSIONS.len()],
    connections: AtomicUsize,
}

/// One version's session and its test application.
struct Slot {
    session: Session<MemoryStore>,
    app: EchoApp,
}

impl TestAcceptor {
    pub fn bind(addr: SocketAddr) -> io::Result<TestAcceptor> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let slot = |(version, their_comp_id)| {
            Mutex::new(Some(Slot {
                session: Session::new(session_config(version, their_comp_id), MemoryStore::new()),
                app: EchoApp::default(),
            }))
        };
        Ok(TestAcceptor {
            listener,
            shared: Arc::new(Shared {
                slots: SESSIONS.map(slot),
                connections: AtomicUsize::new(0),
            }),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections until `stop` is set, then logs the sessions out and returns when
    /// every connection is closed.
    pub fn run(self, stop: Arc<AtomicBool>) -> io::Result<()> {
        let mut threads: Vec<thread::JoinHandle<()>> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            threads.retain(|t| !t.is_finished());
            match self.listener.accept() {
                Ok((stream, peer)) => self.admit(stream, peer, &stop, &mut threads),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(ACCEPT_POLL),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin or die.
                    tracing::warn!("test acceptor: accept failed: {e}");
                    thread::sleep(ACCEPT_POLL);
                }
            }
        }
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }

    fn admit(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        stop: &Arc<AtomicBool>,
        threads: &mut Vec<thread::JoinHandle<()>>,
    ) {
        if self.shared.connections.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            tracing::warn!(%peer, "test acceptor: too many connections, closed");
            return;
        }
        self.shared.connections.fetch_add(1, Ordering::Relaxed);
        let shared = self.shared.clone();
        let stop = stop.clone();
        let spawned = thread::Builder::new()
            .name(format!("fix-test-{peer}"))
            .spawn(move || {
                let _count = ConnectionCount(shared.clone());
                if let Err(e) = Connection::new(stream, peer, shared).and_then(|c| c.run(&stop)) {
                    tracing::debug!(%peer, "test acceptor connection: {e}");
                }
            });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                // The closure (and the stream with it) is dropped: the connection closes.
                tracing::warn!(%peer, "test acceptor: cannot start a thread: {e}");
                self.shared.connections.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// Gives the connection's place back when its thread ends, however it ends.
struct ConnectionCount(Arc<Shared>);

impl Drop for ConnectionCount {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A session taken by a connection. Dropping it ends the session's connection
/// (`on_disconnect`: sequence numbers back to 1), forgets the ClOrdIDs and puts it back.
struct Attached {
    shared: Arc<Shared>,
    index: usize,
    slot: Option<Slot>,
}

impl Attached {
    fn take(shared: &Arc<Shared>, index: usize) -> Option<Attached> {
        let slot = lock(&shared.slots[index]).take()?;
        Some(Attached {
            shared: shared.clone(),
            index,
            slot: Some(slot),
        })
    }

    fn slot(&mut self) -> &mut Slot {
        self.slot.as_mut().expect("the slot is held until drop")
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        if let Some(mut slot) = self.slot.take() {
            if let Err(e) = slot.session.on_disconnect(now_ns()) {
                tracing::warn!("test acceptor: {e}");
            }
            slot.app.clear();
            *lock(&self.shared.slots[self.index]) = Some(slot);
        }
    }
}

/// A lock that a panicked holder does not spoil: the slot is a plain value.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What to do with the connection after handling some input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    Continue,
    Close,
}

struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    accepted: Instant,
    accepted_ns: i64,
    /// Received bytes not yet handled; at most [`MAX_INPUT_BYTES`].
    input: Vec<u8>,
    out: Vec<u8>,
    attached: Option<Attached>,
}

impl Connection {
    fn new(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) -> io::Result<Connection> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            peer,
            shared,
            accepted: Instant::now(),
            accepted_ns: now_ns(),
            input: Vec::with_capacity(READ_CHUNK),
            out: Vec::new(),
            attached: None,
        })
    }

    fn run(mut self, stop: &AtomicBool) -> io::Result<()> {
        let result = self.serve(stop);
        // What the session said last (a Logout, a Reject) goes out before the close.
        let flushed = self.flush();
        if let Some(a) = &mut self.attached {
            let s = &a.slot().session;
            tracing::info!(
                peer = %self.peer,
                session = %s.config().session_name(),
                reason = s.disconnect_reason().unwrap_or("connection closed"),
                "test acceptor: disconnected"
            );
        }
        // The session goes back (numbers reset) before the client sees the close, so that
        // it can reconnect at once.
        self.attached = None;
        let _ = self.stream.shutdown(Shutdown::Both);
        result.and(flushed)
    }

    fn serve(&mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut chunk = vec![0u8; READ_CHUNK];
        let mut shutdown_by: Option<Instant> = None;
        loop {
            if self.handle_input() == Next::Close {
                return Ok(());
            }
            self.flush()?;
            if shutdown_by.is_none() && stop.load(Ordering::Relaxed) {
                shutdown_by = Some(Instant::now() + SHUTDOWN_GRACE);
                if self.start_logout() == Next::Close {
                    return Ok(());
                }
                self.flush()?;
            }
            if shutdown_by.is_some_and(|t| Instant::now() >= t) {
                return Ok(());
            }
            if self.attached.is_none() && self.accepted.elapsed() >= FIRST_MESSAGE_TIMEOUT {
                tracing::info!(peer = %self.peer, "test acceptor: no message, closed");
                return Ok(());
            }
            let room = MAX_INPUT_BYTES - self.input.len();
            if room == 0 {
                tracing::warn!(peer = %self.peer, "test acceptor: input over the limit, closed");
                return Ok(());
            }
            let want = room.min(chunk.len());
            match self.stream.read(&mut chunk[..want]) {
                Ok(0) => return Ok(()),
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
            if self.on_timer() == Next::Close {
                return Ok(());
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        loop {
            if !self.out.is_empty() {
                let result = self.stream.write_all(&self.out);
                self.out.clear();
                result?;
            }
            // A long resend goes out chunk by chunk, each written before the next is made.
            let Some(a) = &mut self.attached else {
                return Ok(());
            };
            let session = &mut a.slot().session;
            if !session.is_resending() {
                return Ok(());
            }
            let chunk = session.config().resend_chunk_bytes;
            if let Err(e) = session.pump_resend(now_ns(), &mut self.out, chunk) {
                return Err(io::Error::other(e.to_string()));
            }
        }
    }

    /// Handles every whole message in the input, then drops the handled bytes.
    fn handle_input(&mut self) -> Next {
        let input = std::mem::take(&mut self.input);
        let mut at = 0;
        let mut next = Next::Continue;
        while next == Next::Continue && at < input.len() {
            // No length limit here: a message longer than the input buffer never completes,
            // the buffer fills and the connection is closed (rather than resynchronising
            // into the middle of it).
            match next_frame(&input[at..], usize::MAX) {
                Ok(None) => break,
                Ok(Some((frame, len))) => {
                    next = self.on_frame(&frame);
                    at += len;
                }
                Err(garbled) => {
                    let skip = garbled.skip.clamp(1, input.len() - at);
                    next = self.on_garbled(&input[at..at + skip], garbled.reason);
                    at += skip;
                }
            }
        }
        self.input = input;
        self.input.drain(..at);
        next
    }

    fn on_garbled(&mut self, bytes: &[u8], reason: &str) -> Next {
        let Some(a) = &mut self.attached else {
            // Garbage before any message: not a FIX client.
            tracing::info!(peer = %self.peer, reason, "test acceptor: not FIX, closed");
            return Next::Close;
        };
        tracing::debug!(peer = %self.peer, reason, "test acceptor: garbled input ignored");
        match a.slot().session.on_garbled(bytes, now_ns()) {
            Ok(()) => Next::Continue,
            Err(e) => store_failed(e),
        }
    }

    fn on_frame(&mut self, frame: &Frame<'_>) -> Next {
        if self.attached.is_none() {
            let Some(index) = session_index(frame) else {
                tracing::info!(
                    peer = %self.peer,
                    message = %frame.display(),
                    "test acceptor: no such session, closed"
                );
                return Next::Close;
            };
            let Some(mut attached) = self.take_session(index) else {
                tracing::info!(
                    peer = %self.peer,
                    session = %session_config(SESSIONS[index].0, SESSIONS[index].1).session_name(),
                    "test acceptor: session in use, closed"
                );
                return Next::Close;
            };
            attached.slot().session.on_connect(self.accepted_ns);
            self.attached = Some(attached);
        }
        let Some(a) = &mut self.attached else {
            return Next::Close;
        };
        let Slot { session, app } = a.slot();
        let now = now_ns();
        let mut no_credentials = |_: &rialto_fix::session::Logon<'_>| Ok(());
        let outcome = session.on_message(frame, now, &mut no_credentials, &mut self.out);
        let mut next = after(outcome, session, app, frame, now, &mut self.out, self.peer);
        // Messages that arrived above a gap, in order, once it is filled.
        while matches!(next, Next::Continue) {
            let bytes = match session.next_queued(now, &mut self.out) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => break,
                Err(e) => return store_failed(e),
            };
            let Ok(Some((queued, _))) = next_frame(&bytes, usize::MAX) else {
                continue; // it was whole when it arrived
            };
            let outcome =
                session.on_queued_message(&queued, now, &mut no_credentials, &mut self.out);
            next = after(
                outcome,
                session,
                app,
                &queued,
                now,
                &mut self.out,
                self.peer,
            );
        }
        next
    }

    /// The session, waiting a little if it is in use: the connection using it may be
    /// closing (a client that reconnects right after closing must not be refused).
    fn take_session(&self, index: usize) -> Option<Attached> {
        let deadline = Instant::now() + SESSION_WAIT;
        loop {
            if let Some(attached) = Attached::take(&self.shared, index) {
                return Some(attached);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn on_timer(&mut self) -> Next {
        let Some(a) = &mut self.attached else {
            return Next::Continue;
        };
        match a.slot().session.on_timer(now_ns(), &mut self.out) {
            Ok(Outcome::Disconnect) => Next::Close,
            Ok(_) => Next::Continue,
            Err(e) => store_failed(e),
        }
    }

    /// Shutdown: a logged-on session sends Logout and waits for the answer (up to the grace
    /// period); anything else closes now.
    fn start_logout(&mut self) -> Next {
        let Some(a) = &mut self.attached else {
            return Next::Close;
        };
        let session = &mut a.slot().session;
        match session.logout("test acceptor shutting down", now_ns(), &mut self.out) {
            Ok(Outcome::Disconnect) => Next::Close,
            Ok(_) => Next::Continue,
            Err(e) => store_failed(e),
        }
    }
}

/// The session a connection's first message is for: its BeginString, and its CompIDs as the
/// counterparty's and ours. No match: the connection is closed without a reply, as QuickFIX
/// does for a session it does not know.
fn session_index(frame: &Frame<'_>) -> Option<usize> {
    let version = Version::from_begin_string(frame.begin_string)?;
    let sender = frame.get(tags::SENDER_COMP_ID)?;
    if frame.get(tags::TARGET_COMP_ID)? != OUR_COMP_ID.as_bytes() {
        return None;
    }
    SESSIONS
        .iter()
        .position(|&(v, their)| v == version && sender == their.as_bytes())
}

/// What the connection does after the session handled a message.
fn after(
    outcome: Result<Outcome, SessionError>,
    session: &mut Session<MemoryStore>,
    app: &mut EchoApp,
    frame: &Frame<'_>,
    now: i64,
    out: &mut Vec<u8>,
    peer: SocketAddr,
) -> Next {
    match outcome {
        Ok(Outcome::Handled) => Next::Continue,
        Ok(Outcome::LoggedOn) => {
            tracing::info!(
                peer = %peer,
                session = %session.config().session_name(),
                "test acceptor: logon"
            );
            Next::Continue
        }
        Ok(Outcome::Deliver) => match app.on_message(session, frame, now, out) {
            Ok(()) => Next::Continue,
            Err(e) => store_failed(e),
        },
        Ok(Outcome::Disconnect) => Next::Close,
        Err(e) => store_failed(e),
    }
}

fn store_failed(e: SessionError) -> Next {
    tracing::error!("test acceptor: {e}");
    Next::Close
}

/// The test application: QuickFIX's `ATApplication`.
#[derive(Default)]
struct EchoApp {
    /// ClOrdIDs of the NewOrderSingles seen since the Logon.
    seen_cl_ord_ids: HashSet<Vec<u8>>,
}

/// Fields not copied into an echo: the envelope and the header fields the session writes
/// itself (8 9 35 49 56 34 52 10), and the resend marks of the incoming message (43 122).
/// PossResend (97) and the other header fields stay, as QuickFIX's echo keeps them (the
/// scripts of case 19 expect `97=Y` back).
const NOT_ECHOED: [u32; 10] = [
    tags::BEGIN_STRING,
    tags::BODY_LENGTH,
    tags::MSG_TYPE,
    tags::SENDER_COMP_ID,
    tags::TARGET_COMP_ID,
    tags::MSG_SEQ_NUM,
    tags::SENDING_TIME,
    tags::POSS_DUP_FLAG,
    tags::ORIG_SENDING_TIME,
    tags::CHECK_SUM,
];

impl EchoApp {
    fn clear(&mut self) {
        self.seen_cl_ord_ids.clear();
    }

    /// An in-sequence application message from the session.
    fn on_message(
        &mut self,
        session: &mut Session<MemoryStore>,
        frame: &Frame<'_>,
        now_ns: i64,
        out: &mut Vec<u8>,
    ) -> Result<(), SessionError> {
        let ref_seq_num = frame
            .get(tags::MSG_SEQ_NUM)
            .and_then(parse_uint)
            .unwrap_or(0);
        let invalid = validate_app(session, frame)
            .and_then(|()| check_fields(frame))
            .and_then(|()| match frame.msg_type {
                b"D" => frame.get(tags::CL_ORD_ID).map(|_| ()).ok_or(app::Invalid {
                    reason: reject_reason::REQUIRED_TAG_MISSING,
                    ref_tag: tags::CL_ORD_ID,
                    text: "Required tag missing",
                }),
                _ => Ok(()),
            });
        if let Err(invalid) = invalid {
            let reject = Reject {
                ref_seq_num,
                ref_tag: (invalid.ref_tag != 0).then_some(invalid.ref_tag),
                ref_msg_type: Some(frame.msg_type),
                reason: invalid.reason,
                text: invalid.text,
            };
            session.reject(&reject, now_ns, out)?;
            return Ok(());
        }
        match frame.msg_type {
            b"D" => {
                let cl_ord_id = frame.get(tags::CL_ORD_ID).unwrap_or_default();
                let poss_resend = frame.get(tags::POSS_RESEND) == Some(b"Y");
                let new = self.remember(cl_ord_id);
                if poss_resend && !new {
                    tracing::debug!("test acceptor: PossResend duplicate ignored");
                    return Ok(());
                }
                echo(session, frame, now_ns, out)
            }
            b"d" => echo(session, frame, now_ns, out),
            _ => {
                let reject = BusinessReject {
                    ref_seq_num,
                    ref_msg_type: frame.msg_type,
                    ref_id: None,
                    reason: business_reject_reason::UNSUPPORTED_MESSAGE_TYPE,
                    text: "Unsupported Message Type",
                };
                session.business_reject(&reject, now_ns, out)?;
                Ok(())
            }
        }
    }

    /// Whether the ClOrdID is new (then it is remembered).
    fn remember(&mut self, cl_ord_id: &[u8]) -> bool {
        if self.seen_cl_ord_ids.contains(cl_ord_id) {
            return false;
        }
        if self.seen_cl_ord_ids.len() >= MAX_SEEN_CL_ORD_IDS {
            self.seen_cl_ord_ids.clear();
        }
        self.seen_cl_ord_ids.insert(cl_ord_id.to_vec());
        true
    }
}

/// Every field readable (the session rejects malformed fields itself; this keeps the echo
/// from copying half a message if one gets through).
fn check_fields(frame: &Frame<'_>) -> Result<(), app::Invalid> {
    for field in frame.fields() {
        if let Err(e) = field {
            return Err(match e {
                rialto_fix::FieldError::InvalidTag => app::Invalid {
                    reason: reject_reason::INVALID_TAG_NUMBER,
                    ref_tag: 0,
                    text: "Invalid tag number",
                },
                rialto_fix::FieldError::NoValue(tag) => app::Invalid {
                    reason: reject_reason::TAG_WITHOUT_VALUE,
                    ref_tag: tag,
                    text: "Tag specified without a value",
                },
            });
        }
    }
    Ok(())
}

/// A group count of 0: an empty group, which FIX leaves out (case 21 of QuickFIX's scripts).
/// A count is a field that opens a group of the message, or one typed NumInGroup (FIX 4.2
/// types counts as INT).
fn is_empty_group(version: ApplVersion, msg_type: &[u8], field: rialto_fix::Field<'_>) -> bool {
    use rialto_fix::dict;
    if field.value != b"0" {
        return false;
    }
    let (session, app) = dict::dictionaries(version);
    let opens_group = [session, app]
        .into_iter()
        .filter_map(|d| d.message(msg_type))
        .any(|m| {
            m.body
                .position(field.tag)
                .and_then(|i| m.body.entries.get(i))
                .is_some_and(|e| e.group.is_some())
        });
    opens_group || dict::field(version, field.tag).is_some_and(|d| d.kind == dict::Kind::NumInGroup)
}

/// Sends the message back: its fields in their order under our standard header, without
/// empty repeating groups.
fn echo(
    session: &mut Session<MemoryStore>,
    frame: &Frame<'_>,
    now_ns: i64,
    out: &mut Vec<u8>,
) -> Result<(), SessionError> {
    // On FIXT.1.1 the message's ApplVerID (checked before the echo), or the Logon's default.
    let version = session
        .appl_version_of(frame)
        .unwrap_or(session.default_appl_version());
    session.send_app(
        frame.msg_type,
        now_ns,
        |w| {
            for field in frame.fields().map_while(Result::ok) {
                if !NOT_ECHOED.contains(&field.tag)
                    && !is_empty_group(version, frame.msg_type, field)
                {
                    w.str(field.tag, field.value);
                }
            }
        },
        out,
    )?;
    Ok(())
}
