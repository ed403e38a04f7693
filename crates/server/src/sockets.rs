//! What both gateways (binary and FIX) do the same way on their non-blocking sockets: a
//! per-connection message rate, reading into a fixed input buffer, writing pending output.

use std::io::{self, Read, Write};
use std::time::Instant;

/// How many connections the kernel may queue for `accept` on a listener (it caps this at
/// net.core.somaxconn). Larger than std's 128 and mio's 1,024: a burst of connections waits
/// in the queue rather than in the peers' SYN retries, so the pre-login budgets see it at once.
pub const LISTEN_BACKLOG: i32 = 4_096;

/// A TCP listener on `addr` (SO_REUSEADDR, as std sets it) with [`LISTEN_BACKLOG`].
pub fn listen(addr: std::net::SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// A non-blocking [`listen`] for mio.
pub fn listen_mio(addr: std::net::SocketAddr) -> io::Result<mio::net::TcpListener> {
    let listener = listen(addr)?;
    listener.set_nonblocking(true)?;
    Ok(mio::net::TcpListener::from_std(listener))
}

/// Allows `rate` messages a second with bursts of `burst` (a rate of 0 means no limit).
pub struct TokenBucket {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket: a new connection may send a whole burst at once.
    pub fn new(burst: u64) -> TokenBucket {
        TokenBucket {
            tokens: burst.max(1) as f64,
            last: Instant::now(),
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, rate: u64, burst: u64) -> bool {
        if rate == 0 {
            return true;
        }
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * rate as f64;
        self.tokens = (self.tokens + refill).min(burst.max(1) as f64);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Returns the token of a message that will be handled again later (and charged then).
    pub fn give_back(&mut self) {
        self.tokens += 1.0;
    }
}

/// What one attempt to read more input found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filled {
    /// New bytes are in the buffer. `drained`: the read took less than it could, so the
    /// socket held no more (epoll(7): for a stream socket a short read means its input is
    /// exhausted, and further bytes bring a new edge-triggered event).
    Bytes { drained: bool },
    /// The peer closed its side.
    Eof,
    /// Nothing more to read for now.
    WouldBlock,
    /// The buffer holds only unhandled bytes: no room to read into.
    Full,
    /// The connection failed.
    Failed,
}

/// Moves the unhandled bytes `input[*start..*end]` to the front, then reads after them.
pub fn fill(
    stream: &mut impl Read,
    input: &mut [u8],
    start: &mut usize,
    end: &mut usize,
) -> Filled {
    if *start > 0 {
        input.copy_within(*start..*end, 0);
        *end -= *start;
        *start = 0;
    }
    if *end == input.len() {
        return Filled::Full;
    }
    loop {
        match stream.read(&mut input[*end..]) {
            Ok(0) => return Filled::Eof,
            Ok(n) => {
                let drained = n < input.len() - *end;
                *end += n;
                return Filled::Bytes { drained };
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Filled::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Filled::Failed,
        }
    }
}

/// Writes `output[*pos..]` until it is all out or the socket would block. False when the
/// connection failed (nothing more can be written to it).
pub fn write_pending(stream: &mut impl Write, output: &[u8], pos: &mut usize) -> bool {
    while *pos < output.len() {
        match stream.write(&output[*pos..]) {
            Ok(0) => return false,
            Ok(n) => *pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}
