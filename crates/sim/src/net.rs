//! The simulated network between the traders and the binary gateway: each trader's
//! connection is the server's real session state machine (server/src/session.rs,
//! `BinarySession`) with a byte pipe each way. The seed decides how many bytes each pipe moves
//! when (latency, partial writes: the socket takes part of what the session has to send) and
//! in which order the connections are served (reordering across connections).

use std::time::{Duration, Instant};

use rialto_core::Command;
use rialto_server::pipeline::{Op, Request, SessionId};
use rialto_server::session::{Action, BinarySession, Limits, Role};
use rialto_wire::{ClientMsg, NewOrder, Secret, ServerMsg, decode_server, encode_client};

use crate::rng::Rng;

/// What one connection's client may have written and the server not yet read (a socket's
/// buffers): a client with more waits.
pub const MAX_UNREAD_BYTES: usize = 16 * 1024;

const LIMITS: Limits = Limits {
    max_msgs_per_sec: 0,
    burst: 1,
    max_output_bytes: 16 << 20,
};

pub struct Conn {
    pub session: BinarySession,
    /// Bytes the client wrote that the server has not read yet.
    up: Vec<u8>,
    /// Bytes the server wrote that the client has not read yet.
    down: Vec<u8>,
}

impl Conn {
    /// A connection that has logged in as `user` (the login decision itself is the gateway
    /// runtime's, not simulated: the session is told it was granted).
    pub fn logged_in(session: SessionId, user: i64, last_seq: u64, now: Instant) -> Conn {
        let mut machine = BinarySession::new(session, false, LIMITS, now);
        let mut login = Vec::new();
        let secret = Secret::new(&[0; 32]).expect("32 bytes");
        encode_client(&ClientMsg::Login { user, secret }, &mut login);
        machine.receive(&login);
        match machine.next(now) {
            Some(Action::Login { user: asked, .. }) if asked == user => {
                machine.logged_in(Role::Trader(user), last_seq)
            }
            other => panic!("a login frame gave {other:?}"),
        }
        Conn {
            session: machine,
            up: Vec::new(),
            down: Vec::new(),
        }
    }

    /// Whether the client may write another frame.
    pub fn has_room(&self) -> bool {
        self.up.len() < MAX_UNREAD_BYTES
    }

    /// The client writes a request's frame.
    pub fn write(&mut self, request: &Request) {
        encode_client(&frame_of(request), &mut self.up);
    }

    /// Moves a part of the client's bytes (drawn from `rng`, all when `all`) to the session.
    /// Returns the bytes moved.
    pub fn carry_up(&mut self, rng: &mut Rng, all: bool) -> usize {
        let n = if all {
            self.up.len()
        } else {
            part(rng, self.up.len())
        };
        let taken = self.session.receive(&self.up[..n]);
        self.up.drain(..taken);
        taken
    }

    /// One write of the session's output: the socket takes a part of it (drawn from `rng`,
    /// all when `all`), which reaches the client. Returns the bytes moved.
    pub fn carry_down(&mut self, rng: &mut Rng, all: bool) -> usize {
        let pending = self.session.pending_output();
        let n = if all {
            pending.len()
        } else {
            part(rng, pending.len())
        };
        self.down.extend_from_slice(&pending[..n]);
        self.session.wrote(n);
        n
    }

    /// The whole messages the client has received, in order; an error for bytes that are not
    /// the protocol.
    pub fn read(&mut self) -> Result<Vec<ServerMsg>, String> {
        let mut msgs = Vec::new();
        let mut at = 0;
        while let Some((msg, len)) = decode_server(&self.down[at..])
            .map_err(|e| format!("the client cannot decode what it received: {e}"))?
        {
            msgs.push(msg);
            at += len;
        }
        self.down.drain(..at);
        Ok(msgs)
    }

    /// Nothing is on its way in either direction.
    pub fn idle(&self) -> bool {
        self.up.is_empty() && self.down.is_empty() && self.session.pending_output().is_empty()
    }
}

/// The simulated time as the sessions' clock.
pub fn instant(base: Instant, simulated_ns: i64) -> Instant {
    base + Duration::from_nanos(simulated_ns.max(0) as u64)
}

/// Nothing (a quarter of the time: the bytes are delayed), everything (a quarter), or a part
/// cut anywhere.
fn part(rng: &mut Rng, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    match rng.below(4) {
        0 => 0,
        1 => len,
        _ => rng.below(len as u64 + 1) as usize,
    }
}

/// The frame a trader sends for one of the simulated clients' requests.
fn frame_of(request: &Request) -> ClientMsg {
    match &request.op {
        Op::Command(Command::Place(p)) => ClientMsg::NewOrder(NewOrder {
            order: p.order,
            symbol: p.symbol,
            side: p.side,
            order_type: p.order_type,
            tif: p.tif,
            stp: p.stp,
            post_only: p.post_only,
            price: p.price,
            qty: p.qty,
            extras: p.extras,
        }),
        Op::Command(Command::Cancel { order, .. }) => ClientMsg::Cancel { order: *order },
        Op::Command(Command::Amend(a)) => ClientMsg::Amend {
            order: a.order,
            price: a.price(),
            qty: a.qty(),
            stop_price: a.stop_price(),
        },
        other => unreachable!("the simulated clients send orders, cancels and amends: {other:?}"),
    }
}
