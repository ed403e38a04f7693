//! One binary-protocol session (docs/protocol.md) as a state machine with no socket and no
//! clock: bytes in (split anywhere), time in, the pipeline's events in; requests, login
//! attempts and bytes out. The gateway (server/src/gateway.rs) is the runtime around it: it
//! reads the socket into [`BinarySession::input_buffer`], pushes the requests into the inbound
//! ring, decides logins (credentials, throttles, session limits are the whole gateway's:
//! `Logins::decide`, server/src/admission.rs), and
//! writes [`BinarySession::pending_output`] to the socket, telling the session how much the
//! socket took ([`BinarySession::wrote`]).
//!
//! Bounds. Input: a fixed buffer of [`INPUT_BUFFER`] bytes; while a request waits for room in
//! the inbound ring the session decodes nothing more, so its bytes wait in this buffer and
//! then in the kernel's, slowing its sender and dropping nothing. Output: at most
//! `max_output_bytes` unsent; a session whose unsent output would pass that does not read its
//! replies (a slow reader): its output is dropped, nothing more is queued to it, and it is
//! closed ([`Sent::Overflow`]).

use std::time::{Duration, Instant};

use rialto_core::{AmendOrder, Command, PlaceOrder, UserId};
use rialto_wire::{
    ClientMsg, ErrorCode, RequestKind, Secret, ServerMsg, decode_client, encode_server,
};

use crate::pipeline::{Op, Reply, Request, SessionId};
use crate::sockets::TokenBucket;

/// The input buffer's size: a frame is at most this long (docs/protocol.md).
pub const INPUT_BUFFER: usize = 64 * 1024;
/// How long a closing session waits for the replies to commands it already sent.
pub const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// An error message is cut to this many characters.
const MAX_REJECT_CHARS: usize = 200;

/// What a session may do, once logged in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    AwaitingLogin,
    Trader(UserId),
    Admin,
}

/// A session's fixed limits, from the gateway's configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Frames a second (0: no limit), with bursts of `burst`.
    pub max_msgs_per_sec: u64,
    pub burst: u64,
    /// Unsent output past which the session is closed as a slow reader.
    pub max_output_bytes: usize,
}

/// What the session asks of its runtime.
#[derive(Debug)]
pub enum Action {
    /// A request for the pipeline. The runtime pushes it into the inbound ring and calls
    /// [`BinarySession::taken`], or, when the ring is full, hands it back with
    /// [`BinarySession::blocked`]: it is offered again by the next [`BinarySession::next`].
    Request(Request),
    /// A login attempt (`user` 0 on the admin port). The runtime answers with
    /// [`BinarySession::logged_in`] or [`BinarySession::refuse_login`] before anything else.
    Login { user: UserId, secret: Secret },
}

/// What became of an event sent to the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Queued; the output was empty before (the runtime has a new session to flush).
    First,
    /// Queued behind output not yet written.
    Queued,
    /// It would have passed `max_output_bytes`: the session's output is dropped and it closes.
    Overflow,
    /// Dropped: the session overflowed before, and nothing more is queued to it (a later reply
    /// sent after the dropped ones would leave a gap the client cannot see).
    Dropped,
}

pub struct BinarySession {
    id: SessionId,
    admin_port: bool,
    role: Role,
    limits: Limits,
    /// Received bytes not yet decoded are `input[input_start..input_end]`.
    input: Box<[u8]>,
    input_start: usize,
    input_end: usize,
    output: Vec<u8>,
    output_pos: usize,
    /// A request the inbound ring had no room for (already charged to the rate).
    parked: Option<Request>,
    /// Read nothing more; close once the replies in flight are out.
    closing: bool,
    /// When the session chose to close: the wait for replies in flight is bounded from then
    /// (none after an overflow, which waits for nothing).
    closing_since: Option<Instant>,
    /// Requests taken by the pipeline whose reply has not come back yet.
    in_flight: u32,
    /// Its output passed the bound: nothing more is queued.
    overflowed: bool,
    bucket: TokenBucket,
    opened_at: Instant,
    /// The planted bug "a gateway that drops a reply on a partial write" (only the simulator
    /// sets it, docs/simulation.md).
    #[cfg(feature = "planted-bugs")]
    drop_on_partial_write: bool,
}

impl BinarySession {
    pub fn new(id: SessionId, admin_port: bool, limits: Limits, now: Instant) -> BinarySession {
        BinarySession {
            id,
            admin_port,
            role: Role::AwaitingLogin,
            limits,
            input: vec![0; INPUT_BUFFER].into_boxed_slice(),
            input_start: 0,
            input_end: 0,
            output: Vec::with_capacity(4096),
            output_pos: 0,
            parked: None,
            closing: false,
            closing_since: None,
            in_flight: 0,
            overflowed: false,
            bucket: TokenBucket::new_at(limits.burst, now),
            opened_at: now,
            #[cfg(feature = "planted-bugs")]
            drop_on_partial_write: false,
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn admin_port(&self) -> bool {
        self.admin_port
    }

    pub fn opened_at(&self) -> Instant {
        self.opened_at
    }

    /// Reads nothing more: it waits for the replies in flight, then closes.
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// A request waits for room in the inbound ring.
    pub fn is_blocked(&self) -> bool {
        self.parked.is_some()
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// The input buffer and the bounds of its undecoded bytes, for the runtime to read into
    /// in place (`sockets::fill`), advancing the end by what it read.
    pub fn input_buffer(&mut self) -> (&mut [u8], &mut usize, &mut usize) {
        (&mut self.input, &mut self.input_start, &mut self.input_end)
    }

    /// Copies received bytes into the input buffer; returns how many fit (the rest waits with
    /// the caller until frames are decoded).
    pub fn receive(&mut self, bytes: &[u8]) -> usize {
        let (start, end) = (&mut self.input_start, &mut self.input_end);
        crate::sockets::receive_into(&mut self.input, start, end, bytes)
    }

    /// The peer closed its side (or the connection broke while reading). A partial frame in
    /// the buffer is dropped; the replies to what it sent still go out.
    pub fn on_eof(&mut self, now: Instant) {
        self.input_start = self.input_end;
        self.close_after_flush(now);
    }

    /// Decodes buffered frames until one asks something of the runtime. Answers what the
    /// session answers itself (heartbeats, refused frames) into its output on the way.
    pub fn next(&mut self, now: Instant) -> Option<Action> {
        if self.is_closing() {
            return None;
        }
        if let Some(request) = self.parked.take() {
            return Some(Action::Request(request));
        }
        loop {
            let buffered = &self.input[self.input_start..self.input_end];
            match decode_client(buffered) {
                Ok(None) => return None,
                Ok(Some((msg, len))) => {
                    if !self.allow_frame(now) {
                        self.refuse(now, ErrorCode::Throttled, "message rate limit exceeded");
                        return None;
                    }
                    self.input_start += len;
                    match self.frame(msg) {
                        Step::Answered => {}
                        Step::Action(action) => return Some(action),
                        Step::Refuse(code, what) => {
                            self.refuse(now, code, what);
                            return None;
                        }
                    }
                }
                Err(e) => {
                    let message = e.to_string();
                    // Refused frames count against the rate like any other.
                    let allowed = self.allow_frame(now);
                    match e.frame_len() {
                        Some(len) if self.role != Role::AwaitingLogin && allowed => {
                            // The frame's bounds are known: refuse it and carry on.
                            self.reject(e.code(), &message);
                            self.input_start += len;
                        }
                        // A broken stream, a session that has not logged in, or one over its
                        // rate: refuse and close.
                        _ => {
                            self.refuse(now, e.code(), &message);
                            return None;
                        }
                    }
                }
            }
        }
    }

    /// The runtime pushed the request [`BinarySession::next`] gave it.
    pub fn taken(&mut self) {
        self.in_flight += 1;
    }

    /// The inbound ring had no room for the request: it is offered again first.
    pub fn blocked(&mut self, request: Request) {
        debug_assert!(self.parked.is_none());
        self.parked = Some(request);
    }

    /// The runtime granted the login.
    pub fn logged_in(&mut self, role: Role, last_seq: u64) {
        debug_assert!(self.role == Role::AwaitingLogin && role != Role::AwaitingLogin);
        self.role = role;
        let user = match role {
            Role::Trader(user) => user,
            Role::Admin | Role::AwaitingLogin => 0,
        };
        self.send(&ServerMsg::LoginAccepted { user, last_seq });
    }

    /// The runtime refused the login (or closes the session for another reason): the reason
    /// goes out, then the session closes.
    pub fn refuse_login(&mut self, now: Instant, code: ErrorCode, what: &str) {
        self.refuse(now, code, what);
    }

    /// Whether a session that has not logged in has outstayed `timeout`; it is then refused.
    pub fn login_overdue(&mut self, now: Instant, timeout: Duration) -> bool {
        let overdue = self.role == Role::AwaitingLogin
            && !self.is_closing()
            && now.saturating_duration_since(self.opened_at) >= timeout;
        if overdue {
            self.refuse(now, ErrorCode::NotLoggedIn, "no login in time");
        }
        overdue
    }

    /// A reply to one of this session's requests: one fewer in flight.
    pub fn reply_arrived(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Queues one message's frame.
    pub fn send(&mut self, msg: &ServerMsg) -> Sent {
        if self.overflowed {
            return Sent::Dropped;
        }
        let first = self.output_pos == self.output.len();
        if first {
            self.output.clear();
            self.output_pos = 0;
        }
        encode_server(msg, &mut self.output);
        if self.output.len() - self.output_pos > self.limits.max_output_bytes {
            self.output.clear();
            self.output_pos = 0;
            self.closing = true;
            self.overflowed = true;
            self.in_flight = 0; // no reply is waited for any more
            self.parked = None;
            return Sent::Overflow;
        }
        if first { Sent::First } else { Sent::Queued }
    }

    /// The bytes not yet written.
    pub fn pending_output(&self) -> &[u8] {
        &self.output[self.output_pos..]
    }

    /// Plants the bug "a gateway that drops a reply on a partial write": what a write leaves
    /// unsent is dropped as if it had gone out. True if it was planted, which only a build with
    /// the `planted-bugs` feature can do.
    pub fn plant_drop_on_partial_write(&mut self) -> bool {
        #[cfg(feature = "planted-bugs")]
        {
            self.drop_on_partial_write = true;
            true
        }
        #[cfg(not(feature = "planted-bugs"))]
        false
    }

    /// The socket took `n` bytes of [`BinarySession::pending_output`].
    pub fn wrote(&mut self, n: usize) {
        #[cfg(feature = "planted-bugs")]
        let n = if self.drop_on_partial_write && n > 0 {
            self.output.len() - self.output_pos
        } else {
            n
        };
        self.output_pos = (self.output_pos + n).min(self.output.len());
        if self.output_pos == self.output.len() {
            self.output.clear();
            self.output_pos = 0;
        }
    }

    /// The runtime's output buffer and its write position, for `sockets::write_pending`.
    pub fn output_buffer(&mut self) -> (&[u8], &mut usize) {
        (&self.output, &mut self.output_pos)
    }

    /// After the runtime wrote from [`BinarySession::output_buffer`]: frees what is written.
    pub fn written(&mut self) {
        self.wrote(0);
    }

    /// Whether a closing session may shut its write side now: its output is out and the
    /// replies it is owed have come (or [`CLOSE_WAIT`] has passed).
    pub fn ready_to_shut(&self, now: Instant) -> bool {
        let replies_due = self.in_flight > 0
            && self
                .closing_since
                .is_some_and(|since| now.saturating_duration_since(since) < CLOSE_WAIT);
        self.closing && self.output.is_empty() && !replies_due
    }

    /// Whether a closing session has waited for its replies as long as it may.
    pub fn close_wait_over(&self, now: Instant) -> bool {
        self.in_flight == 0
            || self
                .closing_since
                .is_some_and(|since| now.saturating_duration_since(since) >= CLOSE_WAIT)
    }

    /// The server is shutting down: read nothing more (the replies in flight still come).
    pub fn stop_reading(&mut self) {
        self.closing = true;
        self.parked = None;
    }

    /// Reads nothing more; closes once the replies in flight are out.
    pub fn close_after_flush(&mut self, now: Instant) {
        self.closing = true;
        self.closing_since.get_or_insert(now);
        self.parked = None;
    }

    fn refuse(&mut self, now: Instant, code: ErrorCode, what: &str) {
        self.reject(code, what);
        self.close_after_flush(now);
    }

    fn reject(&mut self, code: ErrorCode, message: &str) {
        let message = message.chars().take(MAX_REJECT_CHARS).collect();
        self.send(&ServerMsg::Error { code, message });
    }

    fn allow_frame(&mut self, now: Instant) -> bool {
        let Limits {
            max_msgs_per_sec,
            burst,
            ..
        } = self.limits;
        self.bucket.take_at(max_msgs_per_sec, burst, now)
    }

    fn request(&self, reply: Reply, op: Op) -> Step {
        Step::Action(Action::Request(Request {
            session: self.id,
            reply,
            op,
        }))
    }

    /// Acts on one frame according to who the session is.
    fn frame(&mut self, msg: ClientMsg) -> Step {
        if self.role != Role::AwaitingLogin {
            // Frames that mean the same to traders and operators.
            match msg {
                ClientMsg::Heartbeat { nonce } => {
                    self.send(&ServerMsg::Heartbeat { nonce });
                    return Step::Answered;
                }
                ClientMsg::ListSymbols { request } => {
                    return self.request(Reply::Symbols { request }, Op::ListSymbols);
                }
                ClientMsg::Book {
                    request,
                    symbol,
                    depth,
                } => {
                    let depth = i64::from(depth.min(rialto_wire::MAX_BOOK_LEVELS as u32));
                    let cmd = Command::Book { symbol, depth };
                    return self.request(Reply::Book { request }, Op::Command(cmd));
                }
                ClientMsg::Login { .. } | ClientMsg::AdminLogin { .. } => {
                    self.reject(ErrorCode::AlreadyLoggedIn, "already logged in");
                    return Step::Answered;
                }
                _ => {}
            }
        }
        let mapped = match self.role {
            Role::AwaitingLogin => return self.login(msg),
            Role::Trader(user) => trader_frame(user, msg),
            Role::Admin => admin_frame(msg),
        };
        match mapped {
            Ok((reply, op)) => self.request(reply, op),
            Err((code, what)) => {
                self.reject(code, what);
                Step::Answered
            }
        }
    }

    fn login(&mut self, msg: ClientMsg) -> Step {
        let admin_port = self.admin_port;
        match msg {
            ClientMsg::Login { user, secret } if !admin_port => {
                Step::Action(Action::Login { user, secret })
            }
            ClientMsg::AdminLogin { secret } if admin_port => {
                Step::Action(Action::Login { user: 0, secret })
            }
            ClientMsg::Login { .. } | ClientMsg::AdminLogin { .. } => {
                let what = if admin_port {
                    "this is the admin port: log in with AdminLogin"
                } else {
                    "admin logins are accepted only on the admin port"
                };
                Step::Refuse(ErrorCode::AuthFailed, what)
            }
            _ => Step::Refuse(ErrorCode::NotLoggedIn, "the first frame must be a login"),
        }
    }
}

/// What one decoded frame led to.
enum Step {
    /// Answered by the session itself (or refused, the session carrying on).
    Answered,
    Action(Action),
    /// Refused; the session closes.
    Refuse(ErrorCode, &'static str),
}

type Mapped = Result<(Reply, Op), (ErrorCode, &'static str)>;

/// A trader's frame as the pipeline's request.
fn trader_frame(user: UserId, msg: ClientMsg) -> Mapped {
    let order_reply = |order, kind| Reply::Order { order, kind };
    Ok(match msg {
        ClientMsg::NewOrder(o) => {
            let place = PlaceOrder {
                user,
                order: o.order,
                symbol: o.symbol,
                side: o.side,
                order_type: o.order_type,
                tif: o.tif,
                price: o.price,
                qty: o.qty,
                post_only: o.post_only,
                stp: o.stp,
                extras: o.extras,
            };
            let reply = order_reply(o.order, RequestKind::Place);
            (reply, Op::Command(Command::Place(place)))
        }
        ClientMsg::Cancel { order } => {
            let reply = order_reply(order, RequestKind::Cancel);
            (reply, Op::Command(Command::Cancel { user, order }))
        }
        ClientMsg::Move { order, price } => {
            let reply = order_reply(order, RequestKind::Move);
            (reply, Op::Command(Command::Move { user, order, price }))
        }
        ClientMsg::Reduce { order, qty } => {
            let reply = order_reply(order, RequestKind::Reduce);
            (reply, Op::Command(Command::Reduce { user, order, qty }))
        }
        ClientMsg::Amend {
            order,
            price,
            qty,
            stop_price,
        } => {
            let reply = order_reply(order, RequestKind::Amend);
            let amend = AmendOrder::with_fields(user, order, price, qty, stop_price);
            (reply, Op::Command(Command::Amend(amend)))
        }
        ClientMsg::MassCancel { symbol } => {
            let reply = order_reply(0, RequestKind::MassCancel);
            (reply, Op::Command(Command::MassCancel { user, symbol }))
        }
        ClientMsg::MyReport { request } => (
            Reply::Report { request },
            Op::Command(Command::UserReport { user }),
        ),
        ClientMsg::MyReportExt { request } => (
            Reply::ReportExt { request },
            Op::Command(Command::UserReport { user }),
        ),
        ClientMsg::OrderStatus { request, order } => (
            Reply::OrderStatus { request },
            Op::OrderStatus { user, order },
        ),
        _ => {
            return Err((ErrorCode::NotAdmin, "admin frames go to the admin port"));
        }
    })
}

/// An operator's frame as the pipeline's request.
fn admin_frame(msg: ClientMsg) -> Mapped {
    let admin = |request, cmd| (Reply::Admin { request }, Op::Command(cmd));
    Ok(match msg {
        ClientMsg::AddSymbol { request, spec } => {
            admin(request, Command::AddSymbol(Box::new(spec)))
        }
        ClientMsg::AddUser { request, user } => (
            Reply::AddUser { request },
            Op::Command(Command::AddUser { user }),
        ),
        ClientMsg::AdjustBalance {
            request,
            user,
            currency,
            amount,
            tx,
        } => admin(
            request,
            Command::AdjustBalance {
                user,
                currency,
                amount,
                tx,
            },
        ),
        ClientMsg::TakeSnapshot { request } => (Reply::Snapshot { request }, Op::TakeSnapshot),
        ClientMsg::UserReport { request, user } => (
            Reply::Report { request },
            Op::Command(Command::UserReport { user }),
        ),
        ClientMsg::UserReportExt { request, user } => (
            Reply::ReportExt { request },
            Op::Command(Command::UserReport { user }),
        ),
        ClientMsg::VenueReport { request } => (
            Reply::VenueReport { request },
            Op::Command(Command::VenueReport),
        ),
        ClientMsg::ListUsers { request } => (Reply::Users { request }, Op::ListUsers),
        ClientMsg::SetOrderIdWindow { request, window_ns } => {
            admin(request, Command::SetOrderIdWindow { window: window_ns })
        }
        ClientMsg::VenueSettings { request } => (Reply::Settings { request }, Op::VenueSettings),
        ClientMsg::SetPhase {
            request,
            symbol,
            phase,
        } => admin(request, Command::SetPhase { symbol, phase }),
        ClientMsg::SetBand {
            request,
            symbol,
            band_bps,
        } => admin(request, Command::SetBand { symbol, band_bps }),
        ClientMsg::SetRefPrice {
            request,
            symbol,
            price,
        } => admin(request, Command::SetRefPrice { symbol, price }),
        ClientMsg::SuspendUser { request, user } => admin(request, Command::SuspendUser { user }),
        ClientMsg::ResumeUser { request, user } => admin(request, Command::ResumeUser { user }),
        ClientMsg::SetMarkPrice {
            request,
            symbol,
            price,
        } => admin(request, Command::SetMarkPrice { symbol, price }),
        ClientMsg::FundInsurance {
            request,
            currency,
            amount,
            tx,
        } => admin(
            request,
            Command::FundInsurance {
                currency,
                amount,
                tx,
            },
        ),
        _ => return Err((ErrorCode::NotLoggedIn, "an admin session cannot trade")),
    })
}

#[cfg(test)]
mod tests {
    use rialto_core::{OrderId, Side, SymbolId};
    use rialto_wire::{NewOrder, decode_server, encode_client};

    use super::*;

    const LIMITS: Limits = Limits {
        max_msgs_per_sec: 0,
        burst: 100,
        max_output_bytes: 4096,
    };

    fn frames(msgs: &[ClientMsg]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for msg in msgs {
            encode_client(msg, &mut bytes);
        }
        bytes
    }

    fn login() -> ClientMsg {
        ClientMsg::Login {
            user: 7,
            secret: Secret::new(&[1; 32]).unwrap(),
        }
    }

    fn order(id: OrderId) -> ClientMsg {
        ClientMsg::NewOrder(NewOrder::limit(id, SymbolId(1), Side::Buy, 100, 1))
    }

    /// Every whole message in `bytes`.
    fn decoded(mut bytes: &[u8]) -> Vec<ServerMsg> {
        let mut out = Vec::new();
        while let Some((msg, len)) = decode_server(bytes).unwrap() {
            out.push(msg);
            bytes = &bytes[len..];
        }
        assert!(bytes.is_empty(), "a partial frame is left: {bytes:?}");
        out
    }

    /// Drives a session as its runtime would: logs it in as user 7 when asked, takes every
    /// request (or refuses those `room` has no room for, once each); returns the requests'
    /// order ids.
    fn drain(s: &mut BinarySession, now: Instant, room: &mut usize) -> Vec<OrderId> {
        let mut orders = Vec::new();
        while let Some(action) = s.next(now) {
            match action {
                Action::Login { user, .. } => s.logged_in(Role::Trader(user), 41),
                Action::Request(request) if *room == 0 => {
                    // As the runtime does: the session waits for the next turn.
                    *room = usize::MAX;
                    s.blocked(request);
                    break;
                }
                Action::Request(request) => {
                    let Reply::Order { order, .. } = request.reply else {
                        panic!("not an order: {request:?}");
                    };
                    assert_eq!(request.session, 3);
                    orders.push(order);
                    s.taken();
                    *room -= 1;
                }
            }
        }
        orders
    }

    #[test]
    fn frames_split_anywhere_give_the_same_requests_in_order() {
        let now = Instant::now();
        let bytes = frames(&[login(), order(1), order(2), order(3)]);
        for chunk in [1, 2, 3, 7, 20, bytes.len()] {
            let mut s = BinarySession::new(3, false, LIMITS, now);
            let mut orders = Vec::new();
            let mut room = usize::MAX;
            for piece in bytes.chunks(chunk) {
                assert_eq!(s.receive(piece), piece.len());
                orders.extend(drain(&mut s, now, &mut room));
            }
            assert_eq!(orders, [1, 2, 3], "chunks of {chunk}");
            assert_eq!(s.role(), Role::Trader(7));
            assert_eq!(s.in_flight(), 3);
            assert_eq!(
                decoded(s.pending_output()),
                [ServerMsg::LoginAccepted {
                    user: 7,
                    last_seq: 41
                }]
            );
        }
    }

    #[test]
    fn a_request_the_ring_cannot_take_is_offered_again_before_the_next_frame() {
        let now = Instant::now();
        let mut s = BinarySession::new(3, false, LIMITS, now);
        s.receive(&frames(&[login(), order(1), order(2)]));
        let mut room = 0; // the first request finds the ring full
        assert_eq!(drain(&mut s, now, &mut room), Vec::<OrderId>::new());
        assert!(s.is_blocked());
        assert_eq!(drain(&mut s, now, &mut room), [1, 2]);
        assert!(!s.is_blocked());
        assert_eq!(s.in_flight(), 2);
    }

    #[test]
    fn partial_writes_put_every_frame_out_whole_and_in_order() {
        let now = Instant::now();
        let mut s = BinarySession::new(3, false, LIMITS, now);
        s.receive(&frames(&[login()]));
        drain(&mut s, now, &mut usize::MAX.clone());
        let sent: Vec<ServerMsg> = (0..20)
            .map(|nonce| ServerMsg::Heartbeat { nonce })
            .collect();
        let mut wire = Vec::new();
        for (i, msg) in sent.iter().enumerate() {
            s.send(msg);
            // The socket takes 5 bytes, then nothing, then 3, as a slow socket does.
            let n = [5, 0, 3][i % 3].min(s.pending_output().len());
            wire.extend_from_slice(&s.pending_output()[..n]);
            s.wrote(n);
        }
        wire.extend_from_slice(s.pending_output());
        let len = s.pending_output().len();
        s.wrote(len);
        assert!(s.pending_output().is_empty());
        let mut expected = vec![ServerMsg::LoginAccepted {
            user: 7,
            last_seq: 41,
        }];
        expected.extend(sent);
        assert_eq!(decoded(&wire), expected);
    }

    #[test]
    fn a_slow_reader_past_its_output_bound_loses_its_output_and_is_closed() {
        let now = Instant::now();
        let mut s = BinarySession::new(3, false, LIMITS, now);
        s.receive(&frames(&[login(), order(1)]));
        drain(&mut s, now, &mut usize::MAX.clone());
        assert_eq!(s.in_flight(), 1);
        let big = ServerMsg::Error {
            code: ErrorCode::Internal,
            message: "x".repeat(150),
        };
        let mut results = Vec::new();
        while !s.is_closing() {
            results.push(s.send(&big));
        }
        assert_eq!(results.first(), Some(&Sent::Queued)); // behind the LoginAccepted
        assert_eq!(results.last(), Some(&Sent::Overflow));
        assert!(
            results.len() > 20,
            "{} messages fit in 4 KiB",
            results.len()
        );
        // Its output is gone, nothing more is queued, it reads nothing more, and it waits for
        // no reply.
        assert!(s.pending_output().is_empty());
        assert_eq!(s.send(&ServerMsg::Heartbeat { nonce: 1 }), Sent::Dropped);
        assert!(s.pending_output().is_empty());
        s.receive(&frames(&[order(2)]));
        assert!(s.next(now).is_none());
        assert_eq!(s.in_flight(), 0);
        assert!(s.ready_to_shut(now));
    }

    #[test]
    fn a_disconnect_mid_frame_drops_the_partial_frame_and_still_delivers_the_replies_owed() {
        let now = Instant::now();
        let mut s = BinarySession::new(3, false, LIMITS, now);
        let bytes = frames(&[login(), order(1), order(2)]);
        let cut = bytes.len() - 4; // inside the second order
        s.receive(&bytes[..cut]);
        assert_eq!(drain(&mut s, now, &mut usize::MAX.clone()), [1]);
        s.on_eof(now);
        assert!(s.is_closing());
        assert!(
            s.next(now).is_none(),
            "the partial frame must not be acted on"
        );
        // The reply to order 1 is owed: the session does not shut until it is out.
        let len = s.pending_output().len();
        s.wrote(len);
        assert!(!s.ready_to_shut(now));
        assert!(!s.close_wait_over(now + Duration::from_secs(1)));
        s.reply_arrived();
        let accepted = ServerMsg::Accepted {
            seq: 1,
            ts_ns: 5,
            order: 1,
            kind: RequestKind::Place,
        };
        assert_eq!(s.send(&accepted), Sent::First);
        assert!(!s.ready_to_shut(now), "its reply is not written yet");
        assert_eq!(decoded(s.pending_output()), [accepted]);
        let len = s.pending_output().len();
        s.wrote(len);
        assert!(s.ready_to_shut(now));
    }

    #[test]
    fn a_closing_session_waits_for_its_replies_only_so_long() {
        let now = Instant::now();
        let mut s = BinarySession::new(3, false, LIMITS, now);
        s.receive(&frames(&[login(), order(1)]));
        drain(&mut s, now, &mut usize::MAX.clone());
        s.close_after_flush(now);
        s.wrote(s.pending_output().len());
        assert!(!s.ready_to_shut(now + CLOSE_WAIT - Duration::from_millis(1)));
        assert!(s.ready_to_shut(now + CLOSE_WAIT));
        assert!(s.close_wait_over(now + CLOSE_WAIT));
    }

    #[test]
    fn the_rate_limit_counts_frames_at_the_time_given() {
        let now = Instant::now();
        let limits = Limits {
            max_msgs_per_sec: 10,
            burst: 3,
            ..LIMITS
        };
        let mut s = BinarySession::new(3, false, limits, now);
        s.receive(&frames(&[login(), order(1), order(2)]));
        assert_eq!(drain(&mut s, now, &mut usize::MAX.clone()), [1, 2]);
        // The burst (3 frames, the login one of them) is spent; a second later it is full
        // again, and then spent by the fourth frame at the same time, which is refused.
        s.receive(&frames(&[order(3)]));
        let later = now + Duration::from_secs(1);
        assert_eq!(drain(&mut s, later, &mut usize::MAX.clone()), [3]);
        s.receive(&frames(&[order(4), order(5), order(6), order(7)]));
        assert_eq!(drain(&mut s, later, &mut usize::MAX.clone()), [4, 5]);
        assert!(s.is_closing());
        let out = decoded(s.pending_output());
        assert!(
            matches!(
                out.last(),
                Some(ServerMsg::Error {
                    code: ErrorCode::Throttled,
                    ..
                })
            ),
            "{out:?}"
        );
    }

    #[test]
    fn the_first_frame_must_be_a_login_for_this_port() {
        let now = Instant::now();
        for (admin_port, first, code) in [
            (false, order(1), ErrorCode::NotLoggedIn),
            (true, login(), ErrorCode::AuthFailed),
        ] {
            let mut s = BinarySession::new(3, admin_port, LIMITS, now);
            s.receive(&frames(&[first]));
            assert!(s.next(now).is_none());
            assert!(s.is_closing());
            let out = decoded(s.pending_output());
            assert!(
                matches!(out.as_slice(), [ServerMsg::Error { code: c, .. }] if *c == code),
                "{out:?}"
            );
        }
    }
}
