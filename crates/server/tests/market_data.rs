//! The UDP multicast feed on loopback: a receiver that loses packets on purpose recovers them
//! from the TCP replay service, a receiver that joins late starts from the snapshot channel,
//! and both end with exactly the venue's books.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rialto_core::{Side, SymbolId};
use rialto_marketdata::Receiver;
use rialto_marketdata::codec::{Channel, decode_header};
use rialto_server::RunningServer;
use rialto_server::feed::udp::replay_request;
use rialto_wire::{ClientMsg, NewOrder};
use socket2::{Domain, Protocol, Socket, Type};

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn join(group: SocketAddrV4) -> UdpSocket {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
    socket.set_reuse_address(true).unwrap();
    socket
        .bind(&SocketAddr::from((*group.ip(), group.port())).into())
        .unwrap();
    socket
        .join_multicast_v4(group.ip(), &Ipv4Addr::LOCALHOST)
        .unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    socket.into()
}

/// Reads both channels into one queue of packets, until told to stop.
fn listen(groups: [SocketAddrV4; 2], stop: Arc<AtomicBool>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    for group in groups {
        let socket = join(group);
        let tx = tx.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = socket.recv(&mut buf)
                    && tx.send(buf[..n].to_vec()).is_err()
                {
                    return;
                }
            }
        });
    }
    rx
}

/// Fetches missed incremental packets from the replay service (none when it turned the
/// connection away).
fn replay(addr: SocketAddr, first: u64, count: u64) -> Vec<Vec<u8>> {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut bytes = Vec::new();
    let asked = s.write_all(&replay_request(first, count.min(10_000) as u32));
    if let Err(e) = asked.and_then(|_| s.read_to_end(&mut bytes)) {
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
        return Vec::new();
    }
    let mut packets = Vec::new();
    let mut pos = 0;
    while pos + 2 <= bytes.len() {
        let len = u16::from_le_bytes([bytes[pos], bytes[pos + 1]]) as usize;
        packets.push(bytes[pos + 2..pos + 2 + len].to_vec());
        pos += 2 + len;
    }
    packets
}

struct Follower {
    receiver: Receiver,
    packets: mpsc::Receiver<Vec<u8>>,
    /// Drop every n-th incremental packet as it arrives (0: none).
    drop_every: u64,
    dropped: u64,
    replayed: u64,
    seen: u64,
}

impl Follower {
    fn pump(&mut self, replay_addr: SocketAddr, for_: Duration) {
        let until = Instant::now() + for_;
        while Instant::now() < until {
            let Ok(packet) = self.packets.recv_timeout(Duration::from_millis(5)) else {
                continue;
            };
            let header = decode_header(&packet).unwrap();
            if header.channel == Channel::Incremental {
                self.seen += 1;
                if self.drop_every > 0 && self.seen.is_multiple_of(self.drop_every) {
                    self.dropped += 1;
                    continue;
                }
            }
            self.receiver.on_packet(&packet).unwrap();
            while let Some((first, count)) = self.receiver.missing() {
                let packets = replay(replay_addr, first, count);
                if packets.is_empty() {
                    self.receiver.give_up(first + count);
                }
                for p in packets {
                    self.replayed += 1;
                    self.receiver.on_packet(&p).unwrap();
                }
            }
        }
    }
}

/// Whether the follower's books are exactly the venue's.
fn matches(server: &RunningServer, receiver: &Receiver) -> bool {
    let feed = server.market_data.feed();
    (0..2).all(|s| {
        let id = SymbolId(s);
        let venue = feed.l3(id).unwrap();
        let Some(book) = receiver.books.get(&id) else {
            return venue.bids.is_empty() && venue.asks.is_empty();
        };
        let mirrored = |side| book.l3.book().orders_in_priority(side);
        book.synced()
            && mirrored(Side::Buy) == venue.bids
            && mirrored(Side::Sell) == venue.asks
            && book.l2.bids() == feed.l2(id, usize::MAX).unwrap().bids
            && book.l2.asks() == feed.l2(id, usize::MAX).unwrap().asks
            && book.last_trade == feed.last_trade(id).unwrap()
    })
}

/// A server with the UDP feed on: both channels on `group` (free ports), the replay service,
/// and a snapshot every 50 ms.
struct UdpFeedServer {
    server: RunningServer,
    incremental: SocketAddrV4,
    snapshot: SocketAddrV4,
    replay_addr: SocketAddr,
}

fn start_with_udp_feed(dir: &std::path::Path, group: Ipv4Addr) -> UdpFeedServer {
    let incremental = SocketAddrV4::new(group, free_udp_port());
    let snapshot = SocketAddrV4::new(group, free_udp_port());
    let server = common::start(dir, |c| {
        c.market_data.udp = true;
        c.market_data.udp_incremental = incremental;
        c.market_data.udp_snapshot = snapshot;
        c.market_data.replay_listen = "127.0.0.1:0".parse().unwrap();
        c.market_data.snapshot_interval_ms = 50;
    });
    let replay_addr = server.replay_addr.expect("the UDP feed is on");
    UdpFeedServer {
        server,
        incremental,
        snapshot,
        replay_addr,
    }
}

#[test]
fn receivers_recover_from_loss_by_replay_and_from_a_late_start_by_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let feed = start_with_udp_feed(dir.path(), Ipv4Addr::new(239, 255, 77, 7));
    let (server, incremental, snapshot, replay_addr) = (
        feed.server,
        feed.incremental,
        feed.snapshot,
        feed.replay_addr,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut lossy = Follower {
        receiver: Receiver::new(),
        packets: listen([incremental, snapshot], stop.clone()),
        drop_every: 7,
        dropped: 0,
        replayed: 0,
        seen: 0,
    };
    lossy.pump(replay_addr, Duration::from_millis(200));

    // Two traders make a busy market on both symbols.
    let mut traders = [common::trader(&server, 1), common::trader(&server, 2)];
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut late: Option<Follower> = None;
    for round in 0..40 {
        for trader in traders.iter_mut() {
            let mut batch = Vec::new();
            for k in 0..25 {
                let order = (round * 100 + k) as i64;
                let symbol = SymbolId((next() % 2) as u32);
                let side = if next() % 2 == 0 {
                    Side::Buy
                } else {
                    Side::Sell
                };
                let price = 500_000 + (next() % 40) as i64;
                batch.push(match next() % 4 {
                    0 if round > 0 => ClientMsg::Cancel { order: order - 100 },
                    1 if round > 0 => ClientMsg::Move {
                        order: order - 100,
                        price,
                    },
                    _ => ClientMsg::NewOrder(NewOrder::limit(
                        order,
                        symbol,
                        side,
                        price,
                        1 + (next() % 5) as i64,
                    )),
                });
            }
            trader.send_batch(&batch).unwrap();
        }
        lossy.pump(replay_addr, Duration::from_millis(10));
        if round == 20 {
            late = Some(Follower {
                receiver: Receiver::new(),
                packets: listen([incremental, snapshot], stop.clone()),
                drop_every: 0,
                dropped: 0,
                replayed: 0,
                seen: 0,
            });
        }
        if let Some(late) = &mut late {
            late.pump(replay_addr, Duration::from_millis(5));
        }
    }
    let mut late = late.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        lossy.pump(replay_addr, Duration::from_millis(50));
        late.pump(replay_addr, Duration::from_millis(50));
        if matches(&server, &lossy.receiver) && matches(&server, &late.receiver) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the receivers did not converge: lossy applied {} (dropped {}, replayed {}), late synced {:?}",
            lossy.receiver.packets_applied,
            lossy.dropped,
            lossy.replayed,
            late.receiver
                .books
                .values()
                .map(|b| b.synced())
                .collect::<Vec<_>>()
        );
    }
    assert!(lossy.dropped > 10, "packets were lost: {}", lossy.dropped);
    assert!(lossy.replayed >= lossy.dropped, "and replayed");
    assert_eq!(lossy.receiver.packets_given_up, 0);
    let trades = server.market_data.feed().last_trade(SymbolId(0)).unwrap();
    assert!(trades > 10, "the market traded: {trades}");
    stop.store(true, Ordering::SeqCst);
    server.shutdown().unwrap();
}

/// Whether the server has closed this connection (a read finds its end).
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let closed = matches!(s.read(&mut byte), Ok(0));
    s.set_nonblocking(false).unwrap();
    closed
}

#[test]
fn clients_that_never_ask_hold_up_no_replay() {
    use rialto_server::feed::udp::MAX_REPLAY_WAITING;
    let dir = tempfile::tempdir().unwrap();
    let group = Ipv4Addr::new(239, 255, 77, 8);
    let server = common::start(dir.path(), |c| {
        c.market_data.udp = true;
        c.market_data.udp_incremental = SocketAddrV4::new(group, free_udp_port());
        c.market_data.udp_snapshot = SocketAddrV4::new(group, free_udp_port());
        c.market_data.replay_listen = "127.0.0.1:0".parse().unwrap();
    });
    let replay_addr = server.replay_addr.expect("the UDP feed is on");
    let mut trader = common::trader(&server, 1);
    let order = NewOrder::limit(1, SymbolId(0), Side::Buy, 500_000, 1);
    trader.send_batch(&[ClientMsg::NewOrder(order)]).unwrap();
    common::eventually("a packet to replay", Duration::from_secs(10), || {
        !replay(replay_addr, 1, 1).is_empty()
    });

    // Idle clients: connected, nothing sent, or half a request.
    let mut idle: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(replay_addr).unwrap())
        .collect();
    idle[2].write_all(&replay_request(1, 1)[..5]).unwrap();
    // A full request is answered while they still wait for their turn to end. (No pause
    // needed: the listener accepts connections in the order they were made, so the idle ones
    // are taken up before this one.)
    assert_eq!(replay(replay_addr, 1, 1).len(), 1);
    for s in &mut idle {
        assert!(
            !closed_by_server(s),
            "answered only once an idle client timed out"
        );
    }

    // The publisher has kept up: /metrics says no batch was skipped.
    let mut http = TcpStream::connect(server.web_addr.unwrap()).unwrap();
    http.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut metrics = String::new();
    http.read_to_string(&mut metrics).unwrap();
    assert!(
        metrics.contains("rialto_udp_feed_skipped_batches 0"),
        "{metrics}"
    );

    // Past the limit of connections waiting to ask, the oldest waiting one is closed: idle
    // clients push out each other, and a full request is still answered at once.
    idle.extend((0..2 * MAX_REPLAY_WAITING).map(|_| TcpStream::connect(replay_addr).unwrap()));
    assert_eq!(
        replay(replay_addr, 1, 1).len(),
        1,
        "idle clients kept a request out"
    );
    idle[0]
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert!(
        matches!(idle[0].read(&mut byte), Ok(0) | Err(_)),
        "the oldest idle client was not closed"
    );
    server.shutdown().unwrap();
}

#[test]
fn market_data_follows_the_engine_in_either_thread_layout() {
    use rialto_server::config::ThreadLayout;
    use rialto_server::pipeline::Prefetch;
    use rialto_wire::ServerMsg;
    // Dedicated: journal and engine stages on threads of their own; shared: on the gateway's.
    // Prefetching on: the replica reads records ahead of those it replays, and must still
    // replay every one the engine applied.
    let runs = [ThreadLayout::Dedicated, ThreadLayout::Shared]
        .into_iter()
        .flat_map(|layout| [(layout, Prefetch::Auto), (layout, Prefetch::On)]);
    for (layout, prefetch) in runs {
        let layout = (layout, prefetch);
        let dir = tempfile::tempdir().unwrap();
        let server = common::start(dir.path(), |c| {
            c.pipeline.threads = layout.0;
            c.pipeline.prefetch = prefetch;
        });
        let btc = SymbolId(0);
        let mut batches = server.market_data.subscribe();
        let mut buyer = common::trader(&server, 1);
        let mut seller = common::trader(&server, 2);
        buyer
            .place(NewOrder::limit(1, btc, Side::Buy, 100, 2))
            .unwrap();
        buyer
            .place(NewOrder::limit(2, btc, Side::Buy, 101, 3))
            .unwrap();
        seller
            .place(NewOrder::limit(1, btc, Side::Sell, 101, 1))
            .unwrap();
        // Published without anyone asking: a batch with the trade arrives.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut traded = None;
        while traded.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            let batch = common::next_batch(&mut batches, left)
                .unwrap_or_else(|| panic!("{layout:?}: no trade published"));
            traded = batch.updates.iter().find_map(|u| match *u {
                rialto_marketdata::Update::Trade { price, qty, .. } => Some((price, qty)),
                _ => None,
            });
        }
        assert_eq!(traded, Some((101, 1)), "{layout:?}");
        // The last command is acknowledged, then the server stops at once: market data
        // still shows it.
        seller
            .place(NewOrder::limit(2, btc, Side::Sell, 105, 4))
            .unwrap();
        while !matches!(seller.recv().unwrap(), ServerMsg::Accepted { order: 2, .. }) {}
        let md = server.market_data.clone();
        server.shutdown().unwrap();
        let feed = md.feed();
        let l2 = feed.l2(btc, 10).unwrap();
        assert_eq!(l2.bids, vec![(101, 2), (100, 2)], "{layout:?}");
        assert_eq!(l2.asks, vec![(105, 4)], "{layout:?}");
    }
}

/// The phase and the auction result on the UDP feed: a receiver that follows from the start
/// sees the call auction open and uncross (its result, then continuous trading), one that
/// joins during the call learns the phase from the snapshot channel; both end with the
/// venue's books, both sides of the uncross filled.
#[test]
fn receivers_see_the_phase_and_the_auction_result() {
    use rialto_core::Phase;
    use rialto_wire::ServerMsg;

    let dir = tempfile::tempdir().unwrap();
    let feed = start_with_udp_feed(dir.path(), Ipv4Addr::new(239, 255, 77, 8));
    let (server, incremental, snapshot, replay_addr) = (
        feed.server,
        feed.incremental,
        feed.snapshot,
        feed.replay_addr,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let follower = |stop: &Arc<AtomicBool>| Follower {
        receiver: Receiver::new(),
        packets: listen([incremental, snapshot], stop.clone()),
        drop_every: 0,
        dropped: 0,
        replayed: 0,
        seen: 0,
    };
    let mut early = follower(&stop);
    early.pump(replay_addr, Duration::from_millis(200));
    let btc = SymbolId(0);
    let mut admin = common::admin(&server);
    let mut set = |request, phase| match admin
        .request(&ClientMsg::SetPhase {
            request,
            symbol: btc,
            phase: Some(phase),
        })
        .unwrap()
    {
        ServerMsg::AdminResult { result, .. } => assert_eq!(result, Ok(())),
        m => panic!("{m}"),
    };
    set(1, Phase::Auction);
    // Crossing orders rest during the call.
    let mut seller = common::trader(&server, 1);
    let mut buyer = common::trader(&server, 2);
    seller
        .send_batch(&[ClientMsg::NewOrder(NewOrder::limit(
            1,
            btc,
            Side::Sell,
            500_000,
            3,
        ))])
        .unwrap();
    buyer
        .send_batch(&[ClientMsg::NewOrder(NewOrder::limit(
            1,
            btc,
            Side::Buy,
            500_100,
            5,
        ))])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let crossed = |server: &RunningServer| {
        let book = server.market_data.feed().l2(btc, usize::MAX).unwrap();
        book.bids == [(500_100, 5)] && book.asks == [(500_000, 3)]
    };
    let mut late = follower(&stop);
    while !crossed(&server) || !late.receiver.books.get(&btc).is_some_and(|b| b.synced()) {
        early.pump(replay_addr, Duration::from_millis(20));
        late.pump(replay_addr, Duration::from_millis(20));
        assert!(Instant::now() < deadline, "the call did not fill");
    }
    // The late receiver learnt the phase from a snapshot taken during the call.
    assert_eq!(late.receiver.books[&btc].l2.phase(), Some(Phase::Auction));
    set(2, Phase::Continuous);
    // The uncross: 3 lots at 500_100 (buy pressure), 2 lots of buyers left.
    let opened = |r: &Receiver| {
        r.books.get(&btc).is_some_and(|b| {
            b.l2.phase() == Some(Phase::Continuous) && b.last_auction == Some((500_100, 3, 2))
        })
    };
    loop {
        early.pump(replay_addr, Duration::from_millis(20));
        late.pump(replay_addr, Duration::from_millis(20));
        if opened(&early.receiver)
            && opened(&late.receiver)
            && matches(&server, &early.receiver)
            && matches(&server, &late.receiver)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the receivers did not see the open"
        );
    }
    let book = server.market_data.feed().l2(btc, usize::MAX).unwrap();
    assert_eq!((book.bids, book.asks), (vec![(500_100, 2)], vec![]));
    stop.store(true, Ordering::SeqCst);
    server.shutdown().unwrap();
}
