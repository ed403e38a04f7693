//! One WebSocket connection's output. Every frame for the socket goes through its
//! [`Outbox`], in order: written at once when the socket takes it, queued for the
//! connection's flusher when it does not.
//!
//! The fan-out writes each stream message, framed once, straight into the outboxes of a
//! channel's subscribers: while their sockets keep up, no task is woken and nothing is copied
//! per subscriber. A connection with more than its limit of frames queued, or whose socket
//! takes nothing for [`SLOW_WRITE`], is a slow consumer; so is one with more than its limit of
//! bytes queued (a few large snapshots can weigh more than thousands of small diffs).
//!
//! Over TLS the socket cannot be written directly (every byte goes through the TLS stream):
//! frames always queue, and the flusher writes them through the stream.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// The longest a subscriber's socket may take nothing while frames wait for it.
pub const SLOW_WRITE: Duration = Duration::from_secs(5);
/// Frames handed to the socket in one system call by the flusher.
const FLUSH_SLICES: usize = 64;

/// A server's WebSocket frame (RFC 6455: unmasked, the length in its shortest form).
pub fn frame(opcode: u8, payload: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(payload.len() + 10);
    frame.push(0x80 | opcode);
    match payload.len() {
        n @ 0..126 => frame.push(n as u8),
        n @ 126..65536 => {
            frame.push(126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(payload);
    Bytes::from(frame)
}

/// A text frame.
pub fn text_frame(text: &str) -> Bytes {
    frame(0x1, text.as_bytes())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Open,
    /// Too far behind: takes nothing more until the connection says its last words.
    Slow,
    /// The connection is closing: only its own last frames go in.
    Closing,
    /// Closing, and nothing more will come: the flusher ends once the queue is empty.
    Sealed,
    /// The socket failed.
    Broken,
}

struct Queue {
    frames: VecDeque<Bytes>,
    /// Bytes of the first frame already written.
    written: usize,
    /// Bytes queued and not yet written.
    bytes: usize,
    state: State,
}

/// What the outboxes of one server have queued, for /metrics and the tests.
#[derive(Default)]
pub struct QueueStats {
    /// The most bytes any one outbox has held queued.
    pub peak_bytes: AtomicUsize,
}

pub struct Outbox {
    /// The socket, written directly; None over TLS.
    socket: Option<Arc<TcpStream>>,
    /// Frames queued beyond which the connection is a slow consumer.
    limit: usize,
    /// Bytes queued beyond which the connection is a slow consumer (raised when it logs in).
    byte_limit: AtomicUsize,
    stats: Arc<QueueStats>,
    queue: Mutex<Queue>,
    /// Rung for the flusher when frames wait.
    pending: Notify,
    /// Rung for the connection when the outbox turns slow or broken.
    trouble: Notify,
    /// Turned slow because the market data feed started a new epoch, not for lagging.
    restarted: std::sync::atomic::AtomicBool,
}

impl Outbox {
    /// An outbox writing to `socket` directly, or (None) through a TLS stream's flusher.
    pub fn new(
        socket: Option<Arc<TcpStream>>,
        limit: usize,
        byte_limit: usize,
        stats: Arc<QueueStats>,
    ) -> Outbox {
        assert!(limit >= 1 && byte_limit >= 1);
        Outbox {
            socket,
            limit,
            byte_limit: AtomicUsize::new(byte_limit),
            stats,
            queue: Mutex::new(Queue {
                frames: VecDeque::new(),
                written: 0,
                bytes: 0,
                state: State::Open,
            }),
            pending: Notify::new(),
            trouble: Notify::new(),
            restarted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the byte limit (a connection that logs in is allowed more).
    pub fn set_byte_limit(&self, bytes: usize) {
        assert!(bytes >= 1);
        self.byte_limit.store(bytes, Ordering::Relaxed);
    }

    /// Bytes queued now.
    pub fn queued_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Sends a stream message or a reply; false when the connection takes no more (it is
    /// slow, closing or broken).
    pub fn send(&self, frame: Bytes) -> bool {
        self.push(frame, false)
    }

    /// Sends one of the connection's own frames (the WebSocket library's, or its last words),
    /// which a closing connection still takes.
    fn send_own(&self, frame: Bytes) -> bool {
        self.push(frame, true)
    }

    fn push(&self, frame: Bytes, own: bool) -> bool {
        let mut queue = self.lock();
        match queue.state {
            State::Open => {}
            State::Closing if own => {}
            _ => return false,
        }
        if queue.frames.is_empty()
            && let Some(socket) = &self.socket
        {
            let written = match socket.try_write(&frame) {
                Ok(n) if n == frame.len() => return true,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(_) => {
                    queue.state = State::Broken;
                    self.trouble.notify_one();
                    return false;
                }
            };
            queue.written = written;
            self.enqueue(&mut queue, frame, written);
            return true;
        }
        // Checked before the frame goes in: an empty queue takes any one frame (a snapshot
        // may be large), so a queue holds at most the byte limit plus one frame.
        let too_many = queue.frames.len() >= self.limit
            || queue.bytes >= self.byte_limit.load(Ordering::Relaxed);
        if queue.state == State::Open && !queue.frames.is_empty() && too_many {
            queue.state = State::Slow;
            self.trouble.notify_one();
            return false;
        }
        self.enqueue(&mut queue, frame, 0);
        true
    }

    fn enqueue(&self, queue: &mut Queue, frame: Bytes, written: usize) {
        queue.bytes += frame.len() - written;
        queue.frames.push_back(frame);
        self.stats
            .peak_bytes
            .fetch_max(queue.bytes, Ordering::Relaxed);
        self.pending.notify_one();
    }

    /// Marks the connection a slow consumer (a stream it follows left it behind).
    pub fn overflow(&self) {
        let mut queue = self.lock();
        if queue.state == State::Open {
            queue.state = State::Slow;
            self.trouble.notify_one();
        }
    }

    /// The market data feed started a new epoch (a read replica, once another node leads):
    /// its sequence numbers start again, so the connection's subscriptions cannot go on; it
    /// is closed as a slow consumer's is, with its own notice.
    pub fn feed_restarted(&self) {
        self.restarted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.overflow();
    }

    /// Whether [`Self::feed_restarted`] closed it.
    pub fn was_restarted(&self) -> bool {
        self.restarted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until the outbox turns slow or broken; true when slow.
    pub async fn troubled(&self) -> bool {
        loop {
            match self.lock().state {
                State::Slow => return true,
                State::Broken => return false,
                _ => {}
            }
            self.trouble.notified().await;
        }
    }

    /// Stops taking stream messages and replies. A slow consumer's queue is dropped (all but
    /// a frame half written, which must be finished) so that its last words go out at once.
    pub fn close(&self, last_words: Option<Bytes>) {
        let mut queue = self.lock();
        match queue.state {
            State::Open => {}
            State::Slow => {
                let keep = usize::from(queue.written > 0);
                queue.frames.truncate(keep);
                queue.bytes = queue.frames.front().map_or(0, |f| f.len() - queue.written);
            }
            _ => return,
        }
        queue.state = State::Closing;
        drop(queue);
        if let Some(frame) = last_words {
            self.send_own(frame);
        }
    }

    /// Nothing more will be sent: the flusher ends once it has written the queue.
    pub fn seal(&self) {
        let mut queue = self.lock();
        if queue.state != State::Broken {
            queue.state = State::Sealed;
        }
        self.pending.notify_one();
    }

    /// Writes queued frames as the socket takes them, until the outbox is sealed and empty,
    /// or broken. A socket that takes nothing for [`SLOW_WRITE`] makes a slow consumer.
    pub async fn flush(self: Arc<Self>) {
        let Some(socket) = self.socket.clone() else {
            return;
        };
        loop {
            let waiting = {
                let mut queue = self.lock();
                if queue.state == State::Broken
                    || (queue.state == State::Sealed && queue.frames.is_empty())
                {
                    return;
                }
                !queue.frames.is_empty() && !self.write_some(&mut queue)
            };
            if waiting {
                match tokio::time::timeout(SLOW_WRITE, socket.writable()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => self.break_down(),
                    Err(_) => {
                        // Taking nothing for this long: slow if open, given up if closing.
                        let mut queue = self.lock();
                        match queue.state {
                            State::Open => queue.state = State::Slow,
                            _ => queue.state = State::Broken,
                        }
                        self.trouble.notify_one();
                    }
                }
            } else if self.lock().frames.is_empty() {
                self.pending.notified().await;
            }
        }
    }

    /// [`Outbox::flush`] over TLS: writes queued frames through the stream's write half.
    pub async fn flush_tls(self: Arc<Self>, mut writer: impl AsyncWrite + Unpin) {
        loop {
            let (batch, state) = {
                let mut queue = self.lock();
                let n = queue.frames.len().min(FLUSH_SLICES);
                let batch: Vec<Bytes> = queue.frames.drain(..n).collect();
                queue.bytes -= batch.iter().map(Bytes::len).sum::<usize>();
                (batch, queue.state)
            };
            match state {
                State::Broken => return,
                State::Sealed if batch.is_empty() => {
                    let _ = tokio::time::timeout(SLOW_WRITE, writer.shutdown()).await;
                    return;
                }
                _ if batch.is_empty() => {
                    self.pending.notified().await;
                    continue;
                }
                _ => {}
            }
            let write = async {
                for frame in &batch {
                    writer.write_all(frame).await?;
                }
                writer.flush().await
            };
            match tokio::time::timeout(SLOW_WRITE, write).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return self.break_down(),
                Err(_) => {
                    // A frame may be half written: nothing more can follow it on this stream.
                    let mut queue = self.lock();
                    queue.state = match queue.state {
                        State::Open => State::Slow,
                        _ => State::Broken,
                    };
                    self.trouble.notify_one();
                    return;
                }
            }
        }
    }

    fn break_down(&self) {
        self.lock().state = State::Broken;
        self.trouble.notify_one();
    }

    /// Writes what the socket takes; false when it took nothing (it is full).
    fn write_some(&self, queue: &mut Queue) -> bool {
        let slices: Vec<IoSlice> = queue
            .frames
            .iter()
            .take(FLUSH_SLICES)
            .enumerate()
            .map(|(i, f)| IoSlice::new(if i == 0 { &f[queue.written..] } else { f }))
            .collect();
        let Some(socket) = &self.socket else {
            return false;
        };
        let mut n = match socket.try_write_vectored(&slices) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => {
                queue.state = State::Broken;
                self.trouble.notify_one();
                return true;
            }
        };
        queue.bytes -= n;
        while n > 0 {
            let left = queue.frames[0].len() - queue.written;
            if n < left {
                queue.written += n;
                break;
            }
            n -= left;
            queue.frames.pop_front();
            queue.written = 0;
        }
        true
    }
}

/// Where a WebSocket's input comes from: its socket, or its TLS stream's read half.
pub enum Input {
    Tcp(Arc<TcpStream>),
    Tls(Box<dyn AsyncRead + Send + Unpin>),
}

/// The socket as the WebSocket library sees it: reads from the socket (after whatever the
/// HTTP server read past the upgrade request), writes into the outbox, so that the library's
/// frames (pongs, the close handshake) take their turn with everyone else's.
pub struct Duplex {
    pub input: Input,
    pub outbox: Arc<Outbox>,
    pub already_read: Bytes,
}

impl AsyncRead for Duplex {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.already_read.is_empty() {
            let n = this.already_read.len().min(buf.remaining());
            buf.put_slice(&this.already_read.split_to(n));
            return Poll::Ready(Ok(()));
        }
        let socket = match &mut this.input {
            Input::Tcp(socket) => socket,
            Input::Tls(stream) => return Pin::new(stream).poll_read(cx, buf),
        };
        loop {
            ready!(socket.poll_read_ready(cx))?;
            match socket.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale; it is cleared, so the next poll waits.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Duplex {
    /// The library hands over whole frames in one write; the outbox takes all of it or,
    /// when the connection takes no more, nothing.
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.outbox.send_own(Bytes::copy_from_slice(buf)) {
            true => Poll::Ready(Ok(buf.len())),
            false => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_length_in_the_shortest_form() {
        assert_eq!(&text_frame("hi")[..], b"\x81\x02hi");
        let medium = text_frame(&"x".repeat(300));
        assert_eq!(&medium[..4], &[0x81, 126, 1, 44]);
        assert_eq!(medium.len(), 304);
        let long = frame(0x2, &vec![0; 70_000]);
        assert_eq!(&long[..2], &[0x82, 127]);
        assert_eq!(u64::from_be_bytes(long[2..10].try_into().unwrap()), 70_000);
    }
}
