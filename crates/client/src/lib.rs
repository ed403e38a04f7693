//! A blocking client for Rialto's binary protocol (`docs/protocol.md`) over one TCP connection
//! (TCP_NODELAY on, so each order leaves at once), plain or TLS ([`Client::connect_tls`], for a
//! server with `[tls]` on).
//!
//! ```no_run
//! use rialto_client::Client;
//! use rialto_core::{Side, SymbolId};
//! use rialto_wire::{ClientMsg, NewOrder, ServerMsg};
//!
//! # fn main() -> Result<(), rialto_client::ClientError> {
//! let mut client = Client::connect("127.0.0.1:9100")?;
//! client.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
//! let last_seq = client.login(1, b"secret")?;
//! println!("logged in, venue at seq {last_seq}");
//!
//! client.place(NewOrder::limit(1, SymbolId(0), Side::Buy, 100, 10))?;
//! // Exactly one Accepted or Rejected answers the order; fills follow as Trade frames.
//! println!("{}", client.recv()?);
//!
//! // Queries carry a request id; the reply carries it back. Frames that arrive meanwhile wait
//! // in a queue for later `recv` calls.
//! if let ServerMsg::Report { report, .. } = client.request(&ClientMsg::MyReport { request: 1 })? {
//!     println!("{} open orders", report.orders.len());
//! }
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod failover;

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rialto_core::{OrderId, UserId};
use rialto_wire::{
    ClientMsg, ErrorCode, NewOrder, Secret, ServerMsg, WireError, decode_server, encode_client,
};

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 64 * 1024;
/// Most frames kept aside while [`Client::request`] waits for its reply.
pub const MAX_QUEUED_FRAMES: usize = 1 << 16;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A socket error; a read that timed out is `WouldBlock` or `TimedOut`.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The server sent a frame this client cannot decode.
    #[error("bad frame from the server: {0}")]
    Wire(#[from] WireError),
    /// The server answered with a protocol-level Error.
    #[error("server error {code}: {message}")]
    Server { code: ErrorCode, message: String },
    /// The server closed the connection (possibly in the middle of a frame).
    #[error("connection closed by the server")]
    Closed,
    /// A frame or an argument that makes no sense here.
    #[error("unexpected: {0}")]
    Unexpected(String),
}

impl ClientError {
    /// Whether this is a read that ran into the read timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, ClientError::Io(e)
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }
}

/// A connection's bytes: plain TCP or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => &tls.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(tcp) => tcp.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// A TLS client configuration that trusts the certificates in the PEM file at `path` (the
/// server's own certificate, or the authority that signed it).
pub fn tls_trusting(path: &Path) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let bad = |e: String| ClientError::Unexpected(format!("{}: {e}", path.display()));
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))? {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// One connection to a Rialto gateway.
pub struct Client {
    stream: Stream,
    /// Received bytes; those before `read_start` are decoded already.
    read_buf: Vec<u8>,
    read_start: usize,
    write_buf: Vec<u8>,
    /// Frames received while [`Client::request`] waited, for later `recv` calls.
    queue: VecDeque<ServerMsg>,
}

impl Client {
    pub fn connect(addr: impl ToSocketAddrs) -> Result<Client, ClientError> {
        Client::from_stream(TcpStream::connect(addr)?)
    }

    /// A client over a connection made elsewhere (from a chosen local address, say).
    pub fn from_stream(stream: TcpStream) -> Result<Client, ClientError> {
        Client::over(Stream::Plain(stream))
    }

    /// A TLS connection to `addr`, checking that the server's certificate is valid for
    /// `server_name` (a DNS name or an IP address) under `config` ([`tls_trusting`]).
    pub fn connect_tls(
        addr: impl ToSocketAddrs,
        server_name: &str,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Client, ClientError> {
        let name = rustls_pki_types::ServerName::try_from(server_name.to_string())
            .map_err(|e| ClientError::Unexpected(format!("server name {server_name:?}: {e}")))?;
        let tls = rustls::ClientConnection::new(config, name)
            .map_err(|e| ClientError::Io(io::Error::other(e)))?;
        let tcp = TcpStream::connect(addr)?;
        Client::over(Stream::Tls(Box::new(rustls::StreamOwned::new(tls, tcp))))
    }

    fn over(stream: Stream) -> Result<Client, ClientError> {
        stream.tcp().set_nodelay(true)?;
        Ok(Client {
            stream,
            read_buf: Vec::with_capacity(READ_CHUNK),
            read_start: 0,
            write_buf: Vec::with_capacity(256),
            queue: VecDeque::new(),
        })
    }

    /// How long `recv`, `login` and `request` wait for bytes before failing with a timeout
    /// ([`ClientError::is_timeout`]); `None` waits for ever.
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> Result<(), ClientError> {
        self.stream.tcp().set_read_timeout(timeout)?;
        Ok(())
    }

    /// Logs in as a trader; returns the venue's last sequence number.
    pub fn login(&mut self, user: UserId, secret: &[u8]) -> Result<u64, ClientError> {
        let secret = to_secret(secret)?;
        self.send(&ClientMsg::Login { user, secret })?;
        self.await_login()
    }

    /// Logs in on the admin listener; returns the venue's last sequence number.
    pub fn admin_login(&mut self, secret: &[u8]) -> Result<u64, ClientError> {
        let secret = to_secret(secret)?;
        self.send(&ClientMsg::AdminLogin { secret })?;
        self.await_login()
    }

    fn await_login(&mut self) -> Result<u64, ClientError> {
        match self.recv()? {
            ServerMsg::LoginAccepted { last_seq, .. } => Ok(last_seq),
            ServerMsg::Error { code, message } => Err(ClientError::Server { code, message }),
            other => Err(ClientError::Unexpected(format!(
                "{other} in answer to a login"
            ))),
        }
    }

    /// Sends one frame, written fully.
    pub fn send(&mut self, msg: &ClientMsg) -> Result<(), ClientError> {
        self.send_batch(std::slice::from_ref(msg))
    }

    /// Sends the frames in one write.
    pub fn send_batch(&mut self, msgs: &[ClientMsg]) -> Result<(), ClientError> {
        self.write_buf.clear();
        for msg in msgs {
            encode_client(msg, &mut self.write_buf);
        }
        self.stream.write_all(&self.write_buf)?;
        self.stream.flush()?;
        Ok(())
    }

    pub fn place(&mut self, order: NewOrder) -> Result<(), ClientError> {
        self.send(&ClientMsg::NewOrder(order))
    }

    pub fn cancel(&mut self, order: OrderId) -> Result<(), ClientError> {
        self.send(&ClientMsg::Cancel { order })
    }

    /// Amends a live order (docs/protocol.md, Amend): a new price and/or total quantity (fills
    /// included); `None` keeps the field as it is.
    pub fn amend(
        &mut self,
        order: OrderId,
        price: Option<i64>,
        qty: Option<i64>,
    ) -> Result<(), ClientError> {
        self.send(&ClientMsg::Amend {
            order,
            price,
            qty,
            stop_price: None,
        })
    }

    /// The next frame: a queued one, else one from the socket, waiting for it as long as the
    /// read timeout allows. A frame the client cannot decode is an error; when its end is
    /// known it is skipped, so the next call continues with the frame after it.
    pub fn recv(&mut self) -> Result<ServerMsg, ClientError> {
        match self.queue.pop_front() {
            Some(msg) => Ok(msg),
            None => self.read_frame(),
        }
    }

    /// The next frame if one is already queued, buffered or waiting in the socket; never
    /// blocks.
    pub fn try_recv(&mut self) -> Result<Option<ServerMsg>, ClientError> {
        if let Some(msg) = self.queue.pop_front() {
            return Ok(Some(msg));
        }
        if let Some(msg) = self.decode_buffered()? {
            return Ok(Some(msg));
        }
        self.stream.tcp().set_nonblocking(true)?;
        let filled = self.fill();
        self.stream.tcp().set_nonblocking(false)?;
        match filled {
            Ok(()) => self.decode_buffered(),
            Err(e) if e.is_timeout() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Sends a query or admin command and waits for the reply carrying its request id.
    /// Other frames received meanwhile are queued for later `recv` calls, except an Error
    /// frame: the server answers a command it refuses (not admin, throttled, busy) with an
    /// Error that carries no request id, so an Error ends the wait as
    /// [`ClientError::Server`].
    pub fn request(&mut self, msg: &ClientMsg) -> Result<ServerMsg, ClientError> {
        let Some(request) = msg.request_id() else {
            return Err(ClientError::Unexpected(format!(
                "{msg:?} carries no request id"
            )));
        };
        self.send(msg)?;
        loop {
            let reply = self.read_frame()?;
            if reply.request_id() == Some(request) {
                return Ok(reply);
            }
            if let ServerMsg::Error { code, message } = reply {
                return Err(ClientError::Server { code, message });
            }
            if self.queue.len() >= MAX_QUEUED_FRAMES {
                return Err(ClientError::Unexpected(format!(
                    "{MAX_QUEUED_FRAMES} frames arrived before the reply to request {request}"
                )));
            }
            self.queue.push_back(reply);
        }
    }

    /// One frame from the socket, bypassing the queue.
    fn read_frame(&mut self) -> Result<ServerMsg, ClientError> {
        loop {
            if let Some(msg) = self.decode_buffered()? {
                return Ok(msg);
            }
            self.fill()?;
        }
    }

    fn decode_buffered(&mut self) -> Result<Option<ServerMsg>, ClientError> {
        match decode_server(&self.read_buf[self.read_start..]) {
            Ok(Some((msg, used))) => {
                self.read_start += used;
                Ok(Some(msg))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                if let Some(skip) = e.frame_len() {
                    self.read_start += skip;
                }
                Err(e.into())
            }
        }
    }

    /// One read from the socket into the buffer. End of stream is [`ClientError::Closed`].
    fn fill(&mut self) -> Result<(), ClientError> {
        if self.read_start > 0 {
            self.read_buf.drain(..self.read_start);
            self.read_start = 0;
        }
        let filled = self.read_buf.len();
        self.read_buf.resize(filled + READ_CHUNK, 0);
        let result = loop {
            match self.stream.read(&mut self.read_buf[filled..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let read = *result.as_ref().unwrap_or(&0);
        self.read_buf.truncate(filled + read);
        match result {
            Ok(0) => Err(ClientError::Closed),
            Ok(_) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn to_secret(secret: &[u8]) -> Result<Secret, ClientError> {
    Secret::new(secret).ok_or_else(|| {
        ClientError::Unexpected(format!(
            "a secret is 1 to {} bytes, not {}",
            Secret::MAX_LEN,
            secret.len()
        ))
    })
}
