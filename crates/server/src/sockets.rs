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
        TokenBucket::new_at(burst, Instant::now())
    }

    /// [`TokenBucket::new`] with the time given (sans-IO callers own the clock).
    pub fn new_at(burst: u64, now: Instant) -> TokenBucket {
        TokenBucket {
            tokens: burst.max(1) as f64,
            last: now,
        }
    }

    /// Takes one token if there is one.
    pub fn take(&mut self, rate: u64, burst: u64) -> bool {
        self.take_at(rate, burst, Instant::now())
    }

    /// [`TokenBucket::take`] at the time given (never earlier than the last).
    pub fn take_at(&mut self, rate: u64, burst: u64, now: Instant) -> bool {
        if rate == 0 {
            return true;
        }
        let now = now.max(self.last);
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

    /// Whole tokens left (as of the last take).
    pub fn left(&self) -> u64 {
        self.tokens.max(0.0) as u64
    }

    /// Seconds until the next token, at `rate` a second (at least 1: HTTP's Retry-After counts
    /// whole seconds).
    pub fn seconds_to_next(&self, rate: u64) -> u64 {
        ((1.0 - self.tokens) / rate.max(1) as f64).ceil().max(1.0) as u64
    }

    /// Returns the token of a message that will be handled again later (and charged then).
    pub fn give_back(&mut self) {
        self.tokens += 1.0;
    }
}

/// A connection's byte stream: plain TCP, or TLS over it (docs/security.md, "TLS"), both
/// driven by the same non-blocking reads and writes of the event loop.
pub enum Transport {
    Plain(mio::net::TcpStream),
    Tls(Box<TlsStream>),
}

pub struct TlsStream {
    tls: rustls::ServerConnection,
    tcp: mio::net::TcpStream,
}

impl Transport {
    /// `tcp`, through TLS when the listener has a TLS configuration.
    pub fn new(
        tcp: mio::net::TcpStream,
        tls: Option<&std::sync::Arc<rustls::ServerConfig>>,
    ) -> io::Result<Transport> {
        Ok(match tls {
            None => Transport::Plain(tcp),
            Some(config) => {
                let tls =
                    rustls::ServerConnection::new(config.clone()).map_err(io::Error::other)?;
                Transport::Tls(Box::new(TlsStream { tls, tcp }))
            }
        })
    }

    /// The socket, for the event loop's registry.
    pub fn tcp(&mut self) -> &mut mio::net::TcpStream {
        match self {
            Transport::Plain(tcp) => tcp,
            Transport::Tls(s) => &mut s.tcp,
        }
    }

    /// Whether a read shorter than asked means the socket is drained (plain TCP: epoll(7)).
    /// TLS hands out one record's plaintext at a time, so only `WouldBlock` says so.
    fn short_read_drains(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }

    /// Whether encrypted bytes wait to go out (the socket was full).
    pub fn wants_write(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(s) => s.tls.wants_write(),
        }
    }

    /// Sends what TLS has encrypted, until done or the socket is full (`WouldBlock`).
    fn flush_tls(&mut self) -> io::Result<()> {
        if let Transport::Tls(s) = self {
            while s.tls.wants_write() {
                if s.tls.write_tls(&mut s.tcp)? == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
            }
        }
        Ok(())
    }

    /// Ends our side: a TLS close_notify (best effort), then the TCP FIN.
    pub fn shutdown_write(&mut self) {
        if let Transport::Tls(s) = self {
            s.tls.send_close_notify();
        }
        let _ = self.flush_tls();
        let _ = self.tcp().shutdown(std::net::Shutdown::Write);
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let s = match self {
            Transport::Plain(tcp) => return tcp.read(buf),
            Transport::Tls(s) => s,
        };
        loop {
            // Plaintext already decrypted first; WouldBlock: none.
            match s.tls.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                done => return done,
            }
            if s.tls.read_tls(&mut s.tcp)? == 0 {
                return Ok(0); // TCP EOF without close_notify: the end all the same
            }
            let processed = s.tls.process_new_packets();
            // Handshake messages and alerts go out as soon as they are made.
            while s.tls.wants_write() {
                match s.tls.write_tls(&mut s.tcp) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
            if let Err(e) = processed {
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Transport::Plain(tcp) = self {
            return tcp.write(buf);
        }
        // What was encrypted before goes first; rustls buffers at most 64 KiB of what it
        // takes, so a full socket is `WouldBlock` here as for plain TCP.
        self.flush_tls()?;
        let Transport::Tls(s) = self else {
            unreachable!("plain handled above")
        };
        let n = s.tls.writer().write(buf)?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        match self.flush_tls() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.flush_tls() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            other => other,
        }
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

/// Moves the unhandled bytes `input[*start..*end]` to the front of the buffer.
fn compact(input: &mut [u8], start: &mut usize, end: &mut usize) {
    if *start > 0 {
        input.copy_within(*start..*end, 0);
        *end -= *start;
        *start = 0;
    }
}

/// Copies received `bytes` after the unhandled ones in `input[*start..*end]` (moved to the
/// front first); returns how many fit. The sans-IO state machines' way in for bytes.
pub fn receive_into(input: &mut [u8], start: &mut usize, end: &mut usize, bytes: &[u8]) -> usize {
    compact(input, start, end);
    let n = bytes.len().min(input.len() - *end);
    input[*end..*end + n].copy_from_slice(&bytes[..n]);
    *end += n;
    n
}

/// Moves the unhandled bytes `input[*start..*end]` to the front, then reads after them.
pub fn fill(
    stream: &mut Transport,
    input: &mut [u8],
    start: &mut usize,
    end: &mut usize,
) -> Filled {
    compact(input, start, end);
    if *end == input.len() {
        return Filled::Full;
    }
    loop {
        match stream.read(&mut input[*end..]) {
            Ok(0) => return Filled::Eof,
            Ok(n) => {
                let drained = n < input.len() - *end && stream.short_read_drains();
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
pub fn write_pending(stream: &mut Transport, output: &[u8], pos: &mut usize) -> bool {
    while *pos < output.len() {
        match stream.write(&output[*pos..]) {
            Ok(0) => return false,
            Ok(n) => *pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    // TLS: what the last writes encrypted.
    stream.flush().is_ok()
}
