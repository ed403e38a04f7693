//! The simulated network between the traders and the binary gateway: each connection is the
//! server's real session state machine (server/src/session.rs, `BinarySession`) with a byte
//! pipe each way. The seed decides how many bytes each pipe moves when (latency, partial
//! writes: the socket takes part of what the session has to send), in which order the
//! connections are served (reordering across connections), when a client drops its
//! connection (anywhere, inside a frame included) and when it stops reading.

use std::time::{Duration, Instant};

use rialto_core::Command;
use rialto_server::pipeline::{Op, Request, SessionId};
use rialto_server::session::{BinarySession, Limits};
use rialto_wire::{ClientMsg, NewOrder, ServerMsg, decode_server, encode_client};

use crate::rng::Rng;

/// What one connection's client may have written and the server not yet read (a socket's
/// buffers): a client with more waits.
pub const MAX_UNREAD_BYTES: usize = 16 * 1024;

/// One connection: the client's end and the server's session.
pub struct Conn {
    pub id: SessionId,
    /// The client's index.
    pub client: usize,
    pub session: BinarySession,
    /// Bytes the client wrote that the server has not read yet.
    up: Vec<u8>,
    /// Bytes the server wrote that the client has not read yet.
    down: Vec<u8>,
    /// The client dropped the connection: the server reads what reached it, then the end of
    /// the stream; what it writes goes nowhere.
    pub dropped: bool,
    /// The server saw the end of the stream (`BinarySession::on_eof`).
    pub eof_seen: bool,
    /// The client reads nothing until this simulated time (a slow reader), in ns.
    pub stalled_until_ns: i64,
}

impl Conn {
    pub fn new(id: SessionId, client: usize, limits: Limits, now: Instant) -> Conn {
        Conn {
            id,
            client,
            session: BinarySession::new(id, false, limits, now),
            up: Vec::new(),
            down: Vec::new(),
            dropped: false,
            eof_seen: false,
            stalled_until_ns: i64::MIN,
        }
    }

    /// Whether the client may write another frame.
    pub fn has_room(&self) -> bool {
        self.up.len() < MAX_UNREAD_BYTES
    }

    /// The client writes a frame.
    pub fn write_frame(&mut self, msg: &ClientMsg) {
        encode_client(msg, &mut self.up);
    }

    /// The client writes a request's frame.
    pub fn write(&mut self, request: &Request) {
        self.write_frame(&frame_of(request));
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
    /// all when `all`), which reaches the client unless it dropped the connection. A client
    /// that stopped reading takes nothing. Returns the bytes moved.
    pub fn carry_down(&mut self, rng: &mut Rng, all: bool, now_ns: i64) -> usize {
        let pending = self.session.pending_output();
        let n = if self.dropped {
            pending.len() // into the void: the peer is gone
        } else if now_ns < self.stalled_until_ns {
            0
        } else if all {
            pending.len()
        } else {
            part(rng, pending.len())
        };
        if !self.dropped {
            self.down.extend_from_slice(&pending[..n]);
        }
        self.session.wrote(n);
        if self.dropped { 0 } else { n }
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

    /// The client drops the connection: of what it wrote, the first `keep` bytes reached the
    /// server (cut anywhere, inside a frame included); the rest, and everything on its way
    /// down, is lost.
    pub fn drop_by_client(&mut self, keep: usize) {
        self.up.truncate(keep);
        self.down.clear();
        self.dropped = true;
    }

    /// Bytes the client wrote that the server has not read.
    pub fn unread(&self) -> usize {
        self.up.len()
    }
}

/// The simulated time as the sessions' clock.
pub fn instant(base: Instant, simulated_ns: i64) -> Instant {
    base + Duration::from_nanos(simulated_ns.max(0) as u64)
}

/// Nothing (a quarter of the time: the bytes are delayed), everything (a quarter), or a part
/// cut anywhere.
pub(crate) fn part(rng: &mut Rng, len: usize) -> usize {
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
