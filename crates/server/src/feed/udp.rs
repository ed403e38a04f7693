//! The UDP multicast feed and its TCP replay service (docs/market-data.md).
//!
//! One thread turns the market data thread's batches into numbered packets on the incremental
//! channel, keeps the recent ones for replay, and every `snapshot_interval_ms` sends every
//! book on the snapshot channel. Another serves replay requests over TCP.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rialto_core::Side;
use rialto_marketdata::codec::{Channel, Message, PacketWriter};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;

use super::{Batch, MarketData};
use crate::admission::{PeerKey, PreAuthBudget};
use crate::config::MarketDataSettings;

/// Most packets one replay request returns.
pub const MAX_REPLAY: u32 = 10_000;
/// A quiet incremental channel sends a heartbeat this often.
const HEARTBEAT: Duration = Duration::from_millis(100);
/// A replay request: channel u8, first packet u64, count u32.
const REQUEST_LEN: usize = 13;

/// Recent incremental packets, by sequence number.
struct History {
    packets: VecDeque<(u64, Vec<u8>)>,
    capacity: usize,
}

impl History {
    fn push(&mut self, seq: u64, packet: &[u8]) {
        if self.packets.len() == self.capacity {
            self.packets.pop_front();
        }
        self.packets.push_back((seq, packet.to_vec()));
    }

    fn range(&self, first: u64, count: u32) -> Vec<Vec<u8>> {
        let Some(&(oldest, _)) = self.packets.front() else {
            return Vec::new();
        };
        let skip = first.saturating_sub(oldest) as usize;
        let skipped_old = oldest.saturating_sub(first);
        let count = (count as u64).saturating_sub(skipped_old) as usize;
        self.packets
            .iter()
            .skip(skip)
            .take(count)
            .map(|(_, p)| p.clone())
            .collect()
    }
}

pub struct UdpFeed {
    pub replay_addr: SocketAddr,
    /// Market data batches the publisher fell too far behind to send: their updates never
    /// became packets (receivers resynchronise from the snapshot channel; their trades are
    /// not replayed).
    pub skipped_batches: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl UdpFeed {
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn multicast_sender(interface: Ipv4Addr, ttl: u32) -> std::io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_multicast_if_v4(&interface)?;
    socket.set_multicast_loop_v4(true)?;
    socket.set_multicast_ttl_v4(ttl)?;
    socket.bind(&SocketAddr::from((interface, 0)).into())?;
    Ok(socket.into())
}

/// Starts the publisher and the replay service; they stop when `stop` turns true.
pub fn start(
    md: Arc<MarketData>,
    settings: &MarketDataSettings,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<UdpFeed> {
    let sender = multicast_sender(settings.udp_interface, settings.udp_ttl)?;
    let replay = crate::sockets::listen(settings.replay_listen)?;
    replay.set_nonblocking(true)?;
    let replay_addr = replay.local_addr()?;
    let history = Arc::new(Mutex::new(History {
        packets: VecDeque::with_capacity(settings.replay_packets.min(1 << 16)),
        capacity: settings.replay_packets,
    }));
    let publisher = Publisher {
        md,
        sender,
        incremental_group: settings.udp_incremental,
        snapshot_group: settings.udp_snapshot,
        snapshot_interval: Duration::from_millis(settings.snapshot_interval_ms),
        history: history.clone(),
        skipped_batches: Arc::new(AtomicU64::new(0)),
    };
    let skipped_batches = publisher.skipped_batches.clone();
    let publisher_stop = stop.clone();
    // Subscribed here, not on the thread: every batch published once `start` has returned
    // reaches the feed, however late the thread gets going.
    let batches = publisher.md.subscribe();
    let threads = vec![
        std::thread::Builder::new()
            .name("rialto-udp".into())
            .spawn(move || publisher.run(batches, &publisher_stop))?,
        std::thread::Builder::new()
            .name("rialto-replay".into())
            .spawn(move || serve_replays(replay, &history, &stop))?,
    ];
    Ok(UdpFeed {
        replay_addr,
        skipped_batches,
        threads,
    })
}

struct Publisher {
    md: Arc<MarketData>,
    sender: UdpSocket,
    incremental_group: SocketAddrV4,
    snapshot_group: SocketAddrV4,
    snapshot_interval: Duration,
    history: Arc<Mutex<History>>,
    skipped_batches: Arc<AtomicU64>,
}

impl Publisher {
    fn run(self, mut batches: broadcast::Receiver<Arc<Batch>>, stop: &AtomicBool) {
        let epoch = self.md.epoch_ns();
        let mut incremental = PacketWriter::new(Channel::Incremental, epoch);
        let mut snapshots = PacketWriter::new(Channel::Snapshot, epoch);
        let mut last_snapshot: Option<Instant> = None;
        let mut last_incremental = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if last_snapshot.is_none_or(|t| t.elapsed() >= self.snapshot_interval) {
                last_snapshot = Some(Instant::now());
                self.send_snapshots(&mut snapshots);
            }
            match batches.try_recv() {
                Ok(batch) if batch.restart => {
                    // A read replica's feed started a new epoch (another node leads): packets
                    // are numbered afresh, under the new epoch, from a snapshot round.
                    incremental.flush(&mut |seq, packet: &[u8]| self.send_incremental(seq, packet));
                    let epoch = self.md.epoch_ns();
                    incremental = PacketWriter::new(Channel::Incremental, epoch);
                    snapshots = PacketWriter::new(Channel::Snapshot, epoch);
                    last_snapshot = None;
                    // The old epoch's packets are not replayed under the new one's numbers.
                    self.history
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .packets
                        .clear();
                }
                Ok(batch) => {
                    let mut emit = |seq, packet: &[u8]| self.send_incremental(seq, packet);
                    for update in &batch.updates {
                        incremental.push(&Message::Update(*update), &mut emit);
                    }
                    incremental.flush(&mut emit);
                    last_incremental = Instant::now();
                }
                Err(TryRecvError::Lagged(n)) => {
                    // Receivers see the gap in the books' sequence numbers and resynchronise
                    // from the snapshot channel.
                    self.skipped_batches.fetch_add(n, Ordering::Relaxed);
                    tracing::warn!(batches = n, "the UDP feed fell behind the market data");
                }
                Err(TryRecvError::Empty) => {
                    if last_incremental.elapsed() >= HEARTBEAT {
                        last_incremental = Instant::now();
                        let heartbeat = incremental.heartbeat();
                        let _ = self.sender.send_to(&heartbeat, self.incremental_group);
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(TryRecvError::Closed) => return,
            }
        }
    }

    fn send_incremental(&self, seq: u64, packet: &[u8]) {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(seq, packet);
        // A send that fails is what the replay service is for.
        let _ = self.sender.send_to(packet, self.incremental_group);
    }

    /// Every symbol and its whole book, consistent with the incremental sequences.
    fn send_snapshots(&self, writer: &mut PacketWriter) {
        let mut messages = Vec::new();
        {
            let feed = self.md.feed();
            for info in feed.symbols() {
                let id = info.id;
                let book = feed.l3(id).expect("listed");
                let (l2_seq, _, _) = feed.bbo(id).expect("listed");
                messages.push(Message::Symbol {
                    symbol: id,
                    name: info.spec.symbol,
                });
                messages.push(Message::SnapshotBegin {
                    symbol: id,
                    l3_seq: book.seq,
                    l2_seq,
                    last_trade: feed.last_trade(id).expect("listed"),
                    orders: (book.bids.len() + book.asks.len()) as u32,
                    phase: book.phase,
                });
                for (side, orders) in [(Side::Buy, &book.bids), (Side::Sell, &book.asks)] {
                    for o in orders {
                        messages.push(Message::SnapshotOrder {
                            symbol: id,
                            order: o.order,
                            side,
                            price: o.price,
                            qty: o.qty,
                        });
                    }
                }
                messages.push(Message::SnapshotEnd { symbol: id });
            }
        }
        let mut emit = |_, packet: &[u8]| {
            let _ = self.sender.send_to(packet, self.snapshot_group);
        };
        for m in &messages {
            writer.push(m, &mut emit);
        }
        writer.flush(&mut emit);
    }
}

/// Replay connections waiting for their request, in all and from one address (IPv6: one /64);
/// a new one over either limit closes the oldest waiting, so idle sockets cannot keep a real
/// request out.
pub const MAX_REPLAY_WAITING: usize = 16;
pub const MAX_REPLAY_WAITING_PER_ADDRESS: usize = 4;
/// Replays being written at once; one more is closed at once (the client retries).
pub const MAX_REPLAYS_WRITING: usize = 16;
/// How long a replay connection may take to send its 13-byte request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// The connections waiting for their request: the budget, and a handle of each to close it.
struct Waiting {
    budget: PreAuthBudget<u64>,
    streams: HashMap<u64, TcpStream>,
}

impl Waiting {
    fn leave(&mut self, id: u64) {
        self.budget.leave(id);
        self.streams.remove(&id);
    }
}

/// Accepts replay requests and answers each on a thread of its own, so that a client that
/// is slow to ask or to read holds up nobody else.
fn serve_replays(listener: TcpListener, history: &Arc<Mutex<History>>, stop: &AtomicBool) {
    let writing = Arc::new(AtomicUsize::new(0));
    let waiting = Arc::new(Mutex::new(Waiting {
        budget: PreAuthBudget::new(MAX_REPLAY_WAITING, MAX_REPLAY_WAITING_PER_ADDRESS),
        streams: HashMap::new(),
    }));
    let mut next_id = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                next_id += 1;
                let id = next_id;
                let Ok(handle) = stream.try_clone() else {
                    continue;
                };
                {
                    let mut w = waiting.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(evicted) = w.budget.admit(id, PeerKey::of(peer.ip()))
                        && let Some(old) = w.streams.remove(&evicted)
                    {
                        // Its blocked read returns, and its thread ends.
                        let _ = old.shutdown(std::net::Shutdown::Both);
                    }
                    w.streams.insert(id, handle);
                }
                let (history, writing, waiting_too) =
                    (history.clone(), writing.clone(), waiting.clone());
                let answer = move || {
                    let served = serve_replay(stream, &history, &writing, || {
                        waiting_too
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .leave(id)
                    });
                    waiting_too
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .leave(id);
                    if let Err(e) = served {
                        tracing::debug!(%peer, "replay request: {e}");
                    }
                };
                if let Err(e) = std::thread::Builder::new()
                    .name("rialto-replay-conn".into())
                    .spawn(answer)
                {
                    waiting.lock().unwrap_or_else(|e| e.into_inner()).leave(id);
                    tracing::warn!("replay service: no thread for a request: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                tracing::warn!("replay service: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Answers one request with length-prefixed packets (u16 little-endian), then closes. A
/// request for packets no longer held gets what is still held of its range. `asked` is
/// called once the request is in.
fn serve_replay(
    mut stream: TcpStream,
    history: &Mutex<History>,
    writing: &AtomicUsize,
    asked: impl FnOnce(),
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut request = [0u8; REQUEST_LEN];
    stream.read_exact(&mut request)?;
    asked();
    if request[0] != Channel::Incremental as u8 {
        return Ok(()); // only the incremental channel is replayed
    }
    if writing.fetch_add(1, Ordering::AcqRel) >= MAX_REPLAYS_WRITING {
        writing.fetch_sub(1, Ordering::AcqRel);
        return Ok(()); // busy: closed, the client retries
    }
    let first = u64::from_le_bytes(request[1..9].try_into().expect("8 bytes"));
    let count = u32::from_le_bytes(request[9..13].try_into().expect("4 bytes")).min(MAX_REPLAY);
    let packets = history
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .range(first, count);
    let mut out = Vec::with_capacity(packets.iter().map(|p| p.len() + 2).sum());
    for p in &packets {
        out.extend_from_slice(&(p.len() as u16).to_le_bytes());
        out.extend_from_slice(p);
    }
    let written = stream
        .write_all(&out)
        .and_then(|()| stream.shutdown(std::net::Shutdown::Write));
    writing.fetch_sub(1, Ordering::AcqRel);
    written
}

/// A replay request (for clients and tests).
pub fn replay_request(first: u64, count: u32) -> [u8; REQUEST_LEN] {
    let mut r = [0u8; REQUEST_LEN];
    r[0] = Channel::Incremental as u8;
    r[1..9].copy_from_slice(&first.to_le_bytes());
    r[9..13].copy_from_slice(&count.to_le_bytes());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_answers_what_it_still_holds_of_a_range() {
        let mut h = History {
            packets: VecDeque::new(),
            capacity: 3,
        };
        for seq in 1..=5 {
            h.push(seq, &[seq as u8]);
        }
        // Holds 3, 4, 5.
        assert_eq!(h.range(4, 10), vec![vec![4], vec![5]]);
        assert_eq!(h.range(1, 4), vec![vec![3], vec![4]]);
        assert_eq!(h.range(1, 2), Vec::<Vec<u8>>::new());
        assert_eq!(h.range(6, 1), Vec::<Vec<u8>>::new());
    }
}
