//! Shared helpers: a workload that trades, writing it to a journal, and walking records.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rialto_core::{
    Command, Engine, EngineConfig, Name, OwnedEvent, PlaceOrder, Side, SymbolId, SymbolSpec,
};
use rialto_journal::format::{SEGMENT_HEADER_LEN, journal_dir, list_segments, parse_record};
use rialto_journal::{Durability, JournalConfig, JournalWriter};

pub const USERS: i64 = 6;

/// Setup (one symbol, funded users) then `n - setup` orders around one price that cross often,
/// with cancels, moves and reductions mixed in. Deterministic.
pub fn workload(n: usize) -> Vec<Command> {
    let name = |s| Name::new(s).unwrap();
    let mut cmds = vec![Command::AddSymbol(Box::new(SymbolSpec {
        symbol: name("BTC-USD"),
        base: name("BTC"),
        quote: name("USD"),
        base_scale: 100,
        quote_scale: 10,
        maker_fee: 2,
        taker_fee: 5,
        band_bps: 0,
        day_end: 0,
        kind: SymbolSpec::SPOT,
    }))];
    let mut tx = 0;
    for user in 1..=USERS {
        cmds.push(Command::AddUser { user });
        for cur in ["USD", "BTC"] {
            tx += 1;
            cmds.push(Command::AdjustBalance {
                user,
                currency: name(cur),
                amount: 1_000_000_000,
                tx,
            });
        }
    }
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut order = 0;
    while cmds.len() < n {
        let r = next();
        let user = 1 + (r % USERS as u64) as i64;
        let cmd = match r >> 8 & 15 {
            0 | 1 => Command::Cancel {
                user,
                order: 1 + (next() % (order as u64 + 1)) as i64,
            },
            2 => Command::Move {
                user,
                order: 1 + (next() % (order as u64 + 1)) as i64,
                price: 95 + (next() % 11) as i64,
            },
            3 => Command::Reduce {
                user,
                order: 1 + (next() % (order as u64 + 1)) as i64,
                qty: 1,
            },
            _ => {
                order += 1;
                let side = if r >> 16 & 1 == 0 {
                    Side::Buy
                } else {
                    Side::Sell
                };
                let price = 95 + (r >> 20) % 11;
                let qty = 1 + (r >> 28) % 10;
                Command::Place(PlaceOrder::limit(
                    user,
                    order,
                    SymbolId(0),
                    side,
                    price as i64,
                    qty as i64,
                ))
            }
        };
        cmds.push(cmd);
    }
    cmds.truncate(n);
    cmds
}

/// Applies `cmds` with seqs from 1 to a fresh engine.
pub fn fresh(cmds: &[Command]) -> Engine {
    let mut engine = Engine::new(EngineConfig::default());
    for (i, cmd) in cmds.iter().enumerate() {
        let _ = engine.apply(i as u64 + 1, ts(i as u64 + 1), cmd, &mut ());
    }
    engine
}

pub fn ts(seq: u64) -> i64 {
    1_700_000_000_000_000_000 + seq as i64 * 1000
}

/// How many trades applying `cmds` makes: the tests' hashes mean something only if it is many.
pub fn trades(cmds: &[Command]) -> usize {
    let mut engine = Engine::new(EngineConfig::default());
    let mut events: Vec<OwnedEvent> = Vec::new();
    for (i, cmd) in cmds.iter().enumerate() {
        let _ = engine.apply(i as u64 + 1, 0, cmd, &mut events);
    }
    events
        .iter()
        .filter(|e| matches!(e, OwnedEvent::Trade(_)))
        .count()
}

/// `fsync` mode, with segments of a header and `record_bytes` of records.
pub fn config(record_bytes: u64) -> JournalConfig {
    JournalConfig {
        segment_bytes: SEGMENT_HEADER_LEN as u64 + record_bytes,
        durability: Durability::Fsync,
        ..JournalConfig::default()
    }
}

/// Journals `cmds[from..]` (seq = index + 1) in batches of `batch`, then syncs (a clean stop:
/// the checkpoint covers every record).
pub fn journal(dir: &Path, cfg: JournalConfig, cmds: &[Command], from: usize, batch: usize) {
    journal_then_crash(dir, cfg, cmds, from, batch)
        .sync()
        .unwrap();
}

/// Journals `cmds[from..]` like [`journal`] and returns the writer without the clean stop's
/// sync: dropping it is what a crash leaves (in `fsync` mode the checkpoint lags the last
/// commit: the records of the last batch are on disk but no checkpoint claims them yet).
pub fn journal_then_crash(
    dir: &Path,
    cfg: JournalConfig,
    cmds: &[Command],
    from: usize,
    batch: usize,
) -> JournalWriter {
    let mut w = JournalWriter::open(dir, cfg, from as u64 + 1).unwrap();
    for (chunk_index, chunk) in cmds[from..].chunks(batch).enumerate() {
        for (i, cmd) in chunk.iter().enumerate() {
            let seq = (from + chunk_index * batch + i) as u64 + 1;
            w.append(seq, ts(seq), cmd);
        }
        w.commit().unwrap();
    }
    w
}

pub fn segments(data: &Path) -> Vec<PathBuf> {
    list_segments(&journal_dir(data))
        .unwrap()
        .into_iter()
        .map(|(_, p)| p)
        .collect()
}

/// `(offset, size, seq)` of every record of a segment file.
pub fn records(path: &Path) -> Vec<(usize, usize, u64)> {
    let bytes = std::fs::read(path).unwrap();
    let mut pos = SEGMENT_HEADER_LEN;
    let mut out = Vec::new();
    while pos < bytes.len() {
        let r = parse_record(&bytes, pos).unwrap();
        out.push((pos, r.size, r.seq));
        pos += r.size;
    }
    out
}

pub fn flip_bit(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}
