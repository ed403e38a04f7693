//! A feed receiver: the client side of the UDP feed (docs/market-data.md).
//!
//! Incremental packets are applied in packet order. A packet that arrives early waits while
//! the receiver reports the missing ones ([`Receiver::missing`]) for the caller to fetch from
//! the TCP replay service; what the service no longer has is given up
//! ([`Receiver::give_up`]), and the books it may have touched wait for the snapshot channel.
//! A book starts from a snapshot: updates that arrive before its first snapshot are kept and
//! applied after it, so joining mid-stream loses nothing.

use std::collections::{BTreeMap, HashMap};

use rialto_core::{Name, SymbolId};

use crate::codec::{Channel, CodecError, Message, decode_packet};
use crate::mirror::{L2Mirror, L3Mirror, MirrorError};
use crate::update::{L3Order, L3Snapshot, Update};

/// Updates kept per book while it waits for a snapshot; more and it starts over.
const MAX_BUFFERED: usize = 1 << 20;
/// Early packets kept while waiting for a gap to fill.
const MAX_HELD: usize = 1 << 16;

#[derive(Default)]
pub struct Book {
    /// The levels and the phase.
    pub l2: L2Mirror,
    pub l3: L3Mirror,
    pub last_trade: u64,
    /// The last auction result heard since the book was synced: (price, qty, imbalance).
    pub last_auction: Option<(i64, i64, i64)>,
    synced: bool,
    /// Updates seen while not synced, to apply after the next snapshot.
    buffered: Vec<Update>,
}

impl Book {
    pub fn synced(&self) -> bool {
        self.synced
    }
}

/// A snapshot being received: its header and the orders so far.
struct Partial {
    l3_seq: u64,
    l2_seq: u64,
    phase: rialto_core::Phase,
    last_trade: u64,
    expected: u32,
    bids: Vec<L3Order>,
    asks: Vec<L3Order>,
}

#[derive(Default)]
pub struct Receiver {
    epoch: Option<i64>,
    /// The next incremental packet to apply (0: none seen yet).
    next_seq: u64,
    /// The highest packet number a heartbeat announced.
    announced: u64,
    held: BTreeMap<u64, Vec<Message>>,
    pub names: BTreeMap<SymbolId, Name>,
    pub books: BTreeMap<SymbolId, Book>,
    partial: HashMap<SymbolId, Partial>,
    /// Counters, for tests and operators.
    pub packets_applied: u64,
    pub packets_given_up: u64,
    pub resyncs: u64,
}

impl Receiver {
    pub fn new() -> Receiver {
        Receiver::default()
    }

    /// Takes one packet from either channel (or from the replay service).
    pub fn on_packet(&mut self, packet: &[u8]) -> Result<(), CodecError> {
        let (header, messages) = decode_packet(packet)?;
        if self.epoch.is_some_and(|epoch| epoch != header.epoch) {
            // A new run of the feed: its sequences start over, and so does the receiver.
            *self = Receiver::default();
        }
        self.epoch = Some(header.epoch);
        match header.channel {
            Channel::Snapshot => {
                for m in &messages {
                    self.on_snapshot_message(m);
                }
            }
            Channel::Incremental if header.count == 0 => {
                // A heartbeat: packets up to `seq` exist.
                if self.next_seq == 0 {
                    self.next_seq = header.seq + 1;
                }
                self.announced = self.announced.max(header.seq);
            }
            Channel::Incremental => {
                if self.next_seq == 0 {
                    self.next_seq = header.seq;
                }
                if header.seq >= self.next_seq && self.held.len() < MAX_HELD {
                    self.held.insert(header.seq, messages);
                }
                self.apply_held();
            }
        }
        Ok(())
    }

    /// The incremental packets missing before the earliest held one, or else up to the last
    /// one a heartbeat announced: (first, count).
    pub fn missing(&self) -> Option<(u64, u64)> {
        if self.next_seq == 0 {
            return None; // nothing heard on the incremental channel yet
        }
        let end = match self.held.keys().next() {
            Some(&first_held) => first_held,
            None => self.announced + 1,
        };
        (end > self.next_seq).then(|| (self.next_seq, end - self.next_seq))
    }

    /// Skips packets that cannot be had; every book waits for its next snapshot.
    pub fn give_up(&mut self, up_to_excluding: u64) {
        if up_to_excluding <= self.next_seq {
            return;
        }
        self.packets_given_up += up_to_excluding - self.next_seq;
        self.next_seq = up_to_excluding;
        for book in self.books.values_mut() {
            if book.synced {
                book.synced = false;
                self.resyncs += 1;
            }
            book.buffered.clear();
        }
        self.apply_held();
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn apply_held(&mut self) {
        while let Some(messages) = self.held.remove(&self.next_seq) {
            self.next_seq += 1;
            self.packets_applied += 1;
            for m in messages {
                if let Message::Update(u) = m {
                    self.on_update(u);
                }
            }
        }
        // Packets older than what is applied can go.
        let next = self.next_seq;
        self.held.retain(|&seq, _| seq >= next);
    }

    fn on_update(&mut self, update: Update) {
        let book = self.books.entry(update.symbol()).or_default();
        if !book.synced {
            if book.buffered.len() < MAX_BUFFERED {
                book.buffered.push(update);
            } else {
                book.buffered.clear();
            }
            return;
        }
        if apply(book, &update).is_err() {
            book.synced = false;
            book.buffered.clear();
            self.resyncs += 1;
        }
    }

    fn on_snapshot_message(&mut self, message: &Message) {
        match *message {
            Message::Symbol { symbol, name } => {
                self.names.insert(symbol, name);
            }
            Message::SnapshotBegin {
                symbol,
                l3_seq,
                l2_seq,
                last_trade,
                orders,
                phase,
            } => {
                self.partial.insert(
                    symbol,
                    Partial {
                        l3_seq,
                        l2_seq,
                        phase,
                        last_trade,
                        expected: orders,
                        bids: Vec::new(),
                        asks: Vec::new(),
                    },
                );
            }
            Message::SnapshotOrder {
                symbol,
                order,
                side,
                price,
                qty,
            } => {
                if let Some(p) = self.partial.get_mut(&symbol) {
                    let o = L3Order { order, price, qty };
                    match side {
                        rialto_core::Side::Buy => p.bids.push(o),
                        rialto_core::Side::Sell => p.asks.push(o),
                    }
                }
            }
            Message::SnapshotEnd { symbol } => {
                let Some(p) = self.partial.remove(&symbol) else {
                    return;
                };
                let book = self.books.entry(symbol).or_default();
                if book.synced || (p.bids.len() + p.asks.len()) as u32 != p.expected {
                    return; // in step already, or part of the snapshot was lost
                }
                load(book, p);
            }
            Message::Update(_) => {}
        }
    }
}

/// Loads a snapshot into a book and replays what was buffered after it.
fn load(book: &mut Book, p: Partial) {
    let snapshot = L3Snapshot {
        seq: p.l3_seq,
        phase: p.phase,
        bids: p.bids,
        asks: p.asks,
    };
    if book.l3.load(&snapshot).is_err() {
        return;
    }
    book.l2.load(&crate::update::L2Snapshot {
        seq: p.l2_seq,
        phase: p.phase,
        bids: levels(&snapshot.bids),
        asks: levels(&snapshot.asks),
    });
    book.last_trade = p.last_trade;
    book.synced = true;
    for u in std::mem::take(&mut book.buffered) {
        if apply(book, &u).is_err() {
            book.synced = false;
            return;
        }
    }
}

fn levels(orders: &[L3Order]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for o in orders {
        match out.last_mut() {
            Some(last) if last.0 == o.price => last.1 += o.qty,
            _ => out.push((o.price, o.qty)),
        }
    }
    out
}

/// Applies an update to a synced book; an error means the book no longer follows the feed.
fn apply(book: &mut Book, update: &Update) -> Result<(), MirrorError> {
    match *update {
        Update::Trade { trade, .. } => {
            if trade <= book.last_trade {
                return Ok(());
            }
            if trade != book.last_trade + 1 {
                return Err(MirrorError::Gap {
                    expected: book.last_trade + 1,
                    got: trade,
                });
            }
            book.last_trade = trade;
            Ok(())
        }
        Update::Level { .. } | Update::Phase { .. } => book.l2.apply(update).map(|_| ()),
        Update::Auction {
            price,
            qty,
            imbalance,
            ..
        } => {
            book.last_auction = Some((price, qty, imbalance));
            Ok(())
        }
        Update::Bbo { .. } | Update::Candle { .. } => Ok(()),
        _ => book.l3.apply(update).map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::PacketWriter;
    use rialto_core::Side;

    #[test]
    fn a_heartbeat_reveals_a_lost_last_packet() {
        let mut writer = PacketWriter::new(Channel::Incremental, 7);
        let mut packets = Vec::new();
        for seq in 1..=2 {
            let update = Update::Level {
                symbol: SymbolId(0),
                seq,
                side: Side::Buy,
                price: 100,
                qty: 1,
            };
            writer.push(&Message::Update(update), &mut |_, p| {
                packets.push(p.to_vec())
            });
            writer.flush(&mut |_, p| packets.push(p.to_vec()));
        }
        let mut r = Receiver::new();
        r.on_packet(&packets[0]).unwrap();
        // The second packet is lost, and nothing follows it but a heartbeat.
        assert_eq!(r.missing(), None);
        r.on_packet(&writer.heartbeat()).unwrap();
        assert_eq!(r.missing(), Some((2, 1)));
        r.on_packet(&packets[1]).unwrap();
        assert_eq!((r.missing(), r.next_seq()), (None, 3));
    }
}
