//! The binary feed: packets of messages, as the UDP multicast channels and the TCP replay
//! service carry them (docs/market-data.md). Little-endian, fixed-size messages.
//!
//! ```text
//! packet  = header message*
//! header  = "RMD1" channel:u8 reserved:u8 count:u16 epoch:i64 seq:u64       (24 bytes)
//! message = type:u8 length:u8 body                                          (length counts all)
//! ```

use rialto_core::{Name, Phase, Side, SymbolId};

use crate::candles::Candle;
use crate::update::Update;

pub const MAGIC: &[u8; 4] = b"RMD1";
pub const HEADER_LEN: usize = 24;
/// Packets stay under a typical Ethernet MTU with IP and UDP headers.
pub const MAX_PACKET: usize = 1400;

/// The incremental channel (updates) and the snapshot channel (symbols and books).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    Incremental = 0,
    Snapshot = 1,
}

impl Channel {
    pub fn from_code(code: u8) -> Option<Channel> {
        match code {
            0 => Some(Channel::Incremental),
            1 => Some(Channel::Snapshot),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub channel: Channel,
    pub count: u16,
    /// The feed's run (ns since the epoch when it started): sequences restart with each run.
    pub epoch: i64,
    /// The packet's number on its channel, from 1.
    pub seq: u64,
}

/// Everything a packet can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    Update(Update),
    /// Snapshot channel: a symbol's id and name.
    Symbol {
        symbol: SymbolId,
        name: Name,
    },
    /// Snapshot channel: a symbol's book follows, `orders` orders in priority order, taken
    /// after L3 update `l3_seq`, L2 update `l2_seq` and trade `last_trade`, in `phase`.
    SnapshotBegin {
        symbol: SymbolId,
        l3_seq: u64,
        l2_seq: u64,
        last_trade: u64,
        orders: u32,
        phase: Phase,
    },
    SnapshotOrder {
        symbol: SymbolId,
        order: u64,
        side: Side,
        price: i64,
        qty: i64,
    },
    SnapshotEnd {
        symbol: SymbolId,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodecError {
    Short,
    BadMagic,
    BadChannel(u8),
    BadType(u8),
    BadLength(u8),
    BadValue,
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed packet: {self:?}")
    }
}

impl std::error::Error for CodecError {}

// ----- encoding --------------------------------------------------------------------------------

struct Out<'a>(&'a mut Vec<u8>);

impl Out<'_> {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
}

fn side_code(side: Side) -> u8 {
    side.code()
}

/// A phase on the wire: 0 continuous, 1 auction, 2 halted, 3 closed.
pub fn phase_code(phase: Phase) -> u8 {
    match phase {
        Phase::Continuous => 0,
        Phase::Auction => 1,
        Phase::Halted => 2,
        Phase::Closed => 3,
    }
}

pub fn phase_from_code(code: u8) -> Option<Phase> {
    Some(match code {
        0 => Phase::Continuous,
        1 => Phase::Auction,
        2 => Phase::Halted,
        3 => Phase::Closed,
        _ => return None,
    })
}

/// Appends one message.
pub fn encode_message(message: &Message, buf: &mut Vec<u8>) {
    let start = buf.len();
    buf.extend_from_slice(&[0, 0]);
    let mut o = Out(buf);
    let kind = match *message {
        Message::Update(u) => match u {
            Update::Added {
                symbol,
                seq,
                order,
                side,
                price,
                qty,
            } => {
                o.u32(symbol.0)
                    .u64(seq)
                    .u64(order)
                    .u8(side_code(side))
                    .i64(price)
                    .i64(qty);
                b'A'
            }
            Update::Reduced {
                symbol,
                seq,
                order,
                qty,
            } => {
                o.u32(symbol.0).u64(seq).u64(order).i64(qty);
                b'R'
            }
            Update::Executed {
                symbol,
                seq,
                order,
                qty,
                trade,
            } => {
                o.u32(symbol.0).u64(seq).u64(order).i64(qty).u64(trade);
                b'E'
            }
            Update::Deleted { symbol, seq, order } => {
                o.u32(symbol.0).u64(seq).u64(order);
                b'D'
            }
            Update::Level {
                symbol,
                seq,
                side,
                price,
                qty,
            } => {
                o.u32(symbol.0)
                    .u64(seq)
                    .u8(side_code(side))
                    .i64(price)
                    .i64(qty);
                b'L'
            }
            Update::Bbo {
                symbol,
                seq,
                bid,
                ask,
            } => {
                let (bp, bq) = bid.unwrap_or((0, 0));
                let (ap, aq) = ask.unwrap_or((0, 0));
                o.u32(symbol.0).u64(seq).i64(bp).i64(bq).i64(ap).i64(aq);
                b'B'
            }
            Update::Phase { symbol, seq, phase } => {
                o.u32(symbol.0).u64(seq).u8(phase_code(phase));
                b'P'
            }
            Update::Auction {
                symbol,
                ts_ns,
                price,
                qty,
                imbalance,
            } => {
                o.u32(symbol.0)
                    .i64(ts_ns)
                    .i64(price)
                    .i64(qty)
                    .i64(imbalance);
                b'X'
            }
            Update::Candle { symbol, candle: c } => {
                o.u32(symbol.0)
                    .i64(c.start_ns)
                    .i64(c.open)
                    .i64(c.high)
                    .i64(c.low)
                    .i64(c.close)
                    .i64(c.volume)
                    .u64(c.trades);
                b'C'
            }
            Update::Trade {
                symbol,
                trade,
                ts_ns,
                price,
                qty,
                taker_side,
            } => {
                o.u32(symbol.0)
                    .u64(trade)
                    .i64(ts_ns)
                    .i64(price)
                    .i64(qty)
                    .u8(side_code(taker_side));
                b'T'
            }
        },
        Message::Symbol { symbol, name } => {
            o.u32(symbol.0);
            let mut padded = [0u8; Name::MAX_LEN];
            padded[..name.as_str().len()].copy_from_slice(name.as_str().as_bytes());
            o.0.extend_from_slice(&padded);
            b'S'
        }
        Message::SnapshotBegin {
            symbol,
            l3_seq,
            l2_seq,
            last_trade,
            orders,
            phase,
        } => {
            o.u32(symbol.0)
                .u64(l3_seq)
                .u64(l2_seq)
                .u64(last_trade)
                .u32(orders)
                .u8(phase_code(phase));
            b'b'
        }
        Message::SnapshotOrder {
            symbol,
            order,
            side,
            price,
            qty,
        } => {
            o.u32(symbol.0)
                .u64(order)
                .u8(side_code(side))
                .i64(price)
                .i64(qty);
            b'o'
        }
        Message::SnapshotEnd { symbol } => {
            o.u32(symbol.0);
            b'e'
        }
    };
    let len = buf.len() - start;
    buf[start] = kind;
    buf[start + 1] = len as u8;
}

/// The encoded length of a message, without encoding it into a packet.
pub fn message_len(message: &Message) -> usize {
    let mut scratch = Vec::with_capacity(72);
    encode_message(message, &mut scratch);
    scratch.len()
}

/// Builds the packets of one channel, numbering them.
pub struct PacketWriter {
    channel: Channel,
    epoch: i64,
    next_seq: u64,
    current: Vec<u8>,
    count: u16,
}

impl PacketWriter {
    pub fn new(channel: Channel, epoch: i64) -> PacketWriter {
        PacketWriter {
            channel,
            epoch,
            next_seq: 1,
            current: Vec::with_capacity(MAX_PACKET),
            count: 0,
        }
    }

    /// The number the next finished packet will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Adds a message; a packet that is full is finished first and handed to `emit`.
    pub fn push(&mut self, message: &Message, emit: &mut impl FnMut(u64, &[u8])) {
        if self.current.is_empty() {
            self.start();
        }
        let before = self.current.len();
        encode_message(message, &mut self.current);
        if self.current.len() > MAX_PACKET {
            let encoded = self.current[before..].to_vec();
            self.current.truncate(before);
            self.flush(emit);
            self.start();
            self.current.extend_from_slice(&encoded);
        }
        self.count += 1;
    }

    /// A heartbeat: a packet of no messages carrying the number of the last packet sent
    /// (0 before any), so that a receiver learns of a lost packet even when nothing follows it.
    /// It takes no number of its own.
    pub fn heartbeat(&self) -> Vec<u8> {
        let mut packet = Vec::with_capacity(HEADER_LEN);
        packet.extend_from_slice(MAGIC);
        packet.push(self.channel as u8);
        packet.push(0);
        packet.extend_from_slice(&0u16.to_le_bytes());
        packet.extend_from_slice(&self.epoch.to_le_bytes());
        packet.extend_from_slice(&(self.next_seq - 1).to_le_bytes());
        packet
    }

    /// Finishes the current packet, if it has messages.
    pub fn flush(&mut self, emit: &mut impl FnMut(u64, &[u8])) {
        if self.count == 0 {
            return;
        }
        self.current[6..8].copy_from_slice(&self.count.to_le_bytes());
        self.current[16..24].copy_from_slice(&self.next_seq.to_le_bytes());
        emit(self.next_seq, &self.current);
        self.next_seq += 1;
        self.current.clear();
        self.count = 0;
    }

    fn start(&mut self) {
        self.current.clear();
        self.current.extend_from_slice(MAGIC);
        self.current.push(self.channel as u8);
        self.current.push(0);
        self.current.extend_from_slice(&0u16.to_le_bytes());
        self.current.extend_from_slice(&self.epoch.to_le_bytes());
        self.current.extend_from_slice(&0u64.to_le_bytes());
    }
}

// ----- decoding --------------------------------------------------------------------------------

struct In<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl In<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let end = self.pos + N;
        let bytes = self.bytes.get(self.pos..end).ok_or(CodecError::Short)?;
        self.pos = end;
        Ok(bytes.try_into().expect("N bytes"))
    }
    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_le_bytes(self.take()?))
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn i64(&mut self) -> Result<i64, CodecError> {
        Ok(i64::from_le_bytes(self.take()?))
    }
    fn symbol(&mut self) -> Result<SymbolId, CodecError> {
        Ok(SymbolId(self.u32()?))
    }
    fn side(&mut self) -> Result<Side, CodecError> {
        Side::from_code(self.u8()?).ok_or(CodecError::BadValue)
    }
    fn phase(&mut self) -> Result<Phase, CodecError> {
        phase_from_code(self.u8()?).ok_or(CodecError::BadValue)
    }
}

pub fn decode_header(packet: &[u8]) -> Result<Header, CodecError> {
    if packet.len() < HEADER_LEN {
        return Err(CodecError::Short);
    }
    if &packet[..4] != MAGIC {
        return Err(CodecError::BadMagic);
    }
    let mut i = In {
        bytes: packet,
        pos: 4,
    };
    let code = i.u8()?;
    let channel = Channel::from_code(code).ok_or(CodecError::BadChannel(code))?;
    i.u8()?;
    let count = i.u16()?;
    let epoch = i.i64()?;
    let seq = i.u64()?;
    Ok(Header {
        channel,
        count,
        epoch,
        seq,
    })
}

/// Decodes a whole packet; any malformed part refuses all of it.
pub fn decode_packet(packet: &[u8]) -> Result<(Header, Vec<Message>), CodecError> {
    let header = decode_header(packet)?;
    let mut messages = Vec::with_capacity(header.count as usize);
    let mut pos = HEADER_LEN;
    for _ in 0..header.count {
        let kind = *packet.get(pos).ok_or(CodecError::Short)?;
        let len = *packet.get(pos + 1).ok_or(CodecError::Short)?;
        let end = pos + len as usize;
        let body = packet.get(pos + 2..end).ok_or(CodecError::Short)?;
        let mut i = In {
            bytes: body,
            pos: 0,
        };
        let message = decode_body(kind, &mut i)?;
        if i.pos != body.len() {
            return Err(CodecError::BadLength(len));
        }
        messages.push(message);
        pos = end;
    }
    if pos != packet.len() {
        return Err(CodecError::BadLength(0));
    }
    Ok((header, messages))
}

fn decode_body(kind: u8, i: &mut In<'_>) -> Result<Message, CodecError> {
    let update = match kind {
        b'A' => Update::Added {
            symbol: i.symbol()?,
            seq: i.u64()?,
            order: i.u64()?,
            side: i.side()?,
            price: i.i64()?,
            qty: i.i64()?,
        },
        b'R' => Update::Reduced {
            symbol: i.symbol()?,
            seq: i.u64()?,
            order: i.u64()?,
            qty: i.i64()?,
        },
        b'E' => Update::Executed {
            symbol: i.symbol()?,
            seq: i.u64()?,
            order: i.u64()?,
            qty: i.i64()?,
            trade: i.u64()?,
        },
        b'D' => Update::Deleted {
            symbol: i.symbol()?,
            seq: i.u64()?,
            order: i.u64()?,
        },
        b'L' => Update::Level {
            symbol: i.symbol()?,
            seq: i.u64()?,
            side: i.side()?,
            price: i.i64()?,
            qty: i.i64()?,
        },
        b'B' => {
            let symbol = i.symbol()?;
            let seq = i.u64()?;
            let level = |p: i64, q: i64| (q != 0).then_some((p, q));
            let (bp, bq, ap, aq) = (i.i64()?, i.i64()?, i.i64()?, i.i64()?);
            Update::Bbo {
                symbol,
                seq,
                bid: level(bp, bq),
                ask: level(ap, aq),
            }
        }
        b'P' => Update::Phase {
            symbol: i.symbol()?,
            seq: i.u64()?,
            phase: i.phase()?,
        },
        b'X' => Update::Auction {
            symbol: i.symbol()?,
            ts_ns: i.i64()?,
            price: i.i64()?,
            qty: i.i64()?,
            imbalance: i.i64()?,
        },
        b'C' => Update::Candle {
            symbol: i.symbol()?,
            candle: Candle {
                start_ns: i.i64()?,
                open: i.i64()?,
                high: i.i64()?,
                low: i.i64()?,
                close: i.i64()?,
                volume: i.i64()?,
                trades: i.u64()?,
            },
        },
        b'T' => Update::Trade {
            symbol: i.symbol()?,
            trade: i.u64()?,
            ts_ns: i.i64()?,
            price: i.i64()?,
            qty: i.i64()?,
            taker_side: i.side()?,
        },
        b'S' => {
            let symbol = i.symbol()?;
            let raw: [u8; Name::MAX_LEN] = i.take()?;
            let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            let text = std::str::from_utf8(&raw[..len]).map_err(|_| CodecError::BadValue)?;
            let name = Name::new(text).ok_or(CodecError::BadValue)?;
            return Ok(Message::Symbol { symbol, name });
        }
        b'b' => {
            return Ok(Message::SnapshotBegin {
                symbol: i.symbol()?,
                l3_seq: i.u64()?,
                l2_seq: i.u64()?,
                last_trade: i.u64()?,
                orders: i.u32()?,
                phase: i.phase()?,
            });
        }
        b'o' => {
            return Ok(Message::SnapshotOrder {
                symbol: i.symbol()?,
                order: i.u64()?,
                side: i.side()?,
                price: i.i64()?,
                qty: i.i64()?,
            });
        }
        b'e' => {
            return Ok(Message::SnapshotEnd {
                symbol: i.symbol()?,
            });
        }
        other => return Err(CodecError::BadType(other)),
    };
    Ok(Message::Update(update))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Message> {
        let s = SymbolId(3);
        vec![
            Message::Update(Update::Added {
                symbol: s,
                seq: 1,
                order: 9,
                side: Side::Sell,
                price: 101,
                qty: 5,
            }),
            Message::Update(Update::Reduced {
                symbol: s,
                seq: 2,
                order: 9,
                qty: 4,
            }),
            Message::Update(Update::Executed {
                symbol: s,
                seq: 3,
                order: 9,
                qty: 1,
                trade: 7,
            }),
            Message::Update(Update::Deleted {
                symbol: s,
                seq: 4,
                order: 9,
            }),
            Message::Update(Update::Level {
                symbol: s,
                seq: 5,
                side: Side::Buy,
                price: i64::MAX,
                qty: 0,
            }),
            Message::Update(Update::Bbo {
                symbol: s,
                seq: 5,
                bid: Some((100, 2)),
                ask: None,
            }),
            Message::Update(Update::Phase {
                symbol: s,
                seq: 6,
                phase: Phase::Auction,
            }),
            Message::Update(Update::Auction {
                symbol: s,
                ts_ns: 99,
                price: 102,
                qty: 5,
                imbalance: -1,
            }),
            Message::Update(Update::Trade {
                symbol: s,
                trade: 7,
                ts_ns: -1,
                price: 101,
                qty: 1,
                taker_side: Side::Buy,
            }),
            Message::Update(Update::Candle {
                symbol: s,
                candle: Candle {
                    start_ns: 60,
                    open: 1,
                    high: 3,
                    low: 1,
                    close: 2,
                    volume: 9,
                    trades: 4,
                },
            }),
            Message::Symbol {
                symbol: s,
                name: Name::new("BTC-USD").unwrap(),
            },
            Message::SnapshotBegin {
                symbol: s,
                l3_seq: 4,
                l2_seq: 5,
                last_trade: 7,
                orders: 1,
                phase: Phase::Halted,
            },
            Message::SnapshotOrder {
                symbol: s,
                order: 10,
                side: Side::Buy,
                price: 100,
                qty: 2,
            },
            Message::SnapshotEnd { symbol: s },
        ]
    }

    #[test]
    fn messages_round_trip_through_packets_that_fit_the_mtu() {
        let mut writer = PacketWriter::new(Channel::Incremental, 42);
        let mut packets = Vec::new();
        let mut sent = Vec::new();
        for _ in 0..40 {
            for m in samples() {
                writer.push(&m, &mut |seq, p| packets.push((seq, p.to_vec())));
                sent.push(m);
            }
        }
        writer.flush(&mut |seq, p| packets.push((seq, p.to_vec())));
        assert!(packets.len() > 1);
        let mut received = Vec::new();
        for (i, (seq, p)) in packets.iter().enumerate() {
            assert!(p.len() <= MAX_PACKET);
            let (h, messages) = decode_packet(p).unwrap();
            assert_eq!(
                (h.seq, *seq, h.epoch, h.channel),
                (i as u64 + 1, i as u64 + 1, 42, Channel::Incremental)
            );
            received.extend(messages);
        }
        assert_eq!(received, sent);
    }

    #[test]
    fn damaged_packets_are_refused_whole() {
        let mut writer = PacketWriter::new(Channel::Snapshot, 1);
        let mut packet = Vec::new();
        for m in samples() {
            writer.push(&m, &mut |_, p| packet = p.to_vec());
        }
        writer.flush(&mut |_, p| packet = p.to_vec());
        assert!(decode_packet(&packet).is_ok());
        for cut in 0..packet.len() {
            assert!(decode_packet(&packet[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = packet.clone();
        bad[0] = b'X';
        assert_eq!(decode_packet(&bad), Err(CodecError::BadMagic));
        let mut bad = packet.clone();
        bad[HEADER_LEN] = b'?';
        assert_eq!(decode_packet(&bad), Err(CodecError::BadType(b'?')));
        let mut longer = packet.clone();
        longer.push(0);
        assert!(decode_packet(&longer).is_err());
    }
}
