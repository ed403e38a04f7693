//! Byte layouts of segment headers and records, file names, and the record scanner shared by
//! the reader and the writer (docs/journal-format.md).

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use rialto_core::Command;

use crate::codec::{MAX_COMMAND_BYTES, decode_command};

/// `<data>/journal`
pub const JOURNAL_DIR: &str = "journal";
/// `<data>/journal/archive`
pub const ARCHIVE_DIR: &str = "archive";
/// `<data>/snapshots`
pub const SNAPSHOT_DIR: &str = "snapshots";

pub const SEGMENT_MAGIC: &[u8; 8] = b"RIALTOJL";
/// Version 2: a 1536-byte header area with the two checkpoint slots; records after it.
pub const SEGMENT_VERSION: u32 = 2;
/// Version 1 (journals written before checkpoints): a 32-byte header, records right after it.
/// Still read; never written.
pub const SEGMENT_VERSION_1: u32 = 1;
/// Where a version 2 segment's records start: three 512-byte sectors, the header in the first,
/// a checkpoint slot at the start of each of the others.
pub const SEGMENT_HEADER_LEN: usize = 1536;
/// Where a version 1 segment's records start.
pub const SEGMENT_HEADER_LEN_V1: usize = 32;
/// magic 8 | version u32 | header_len u32 | first_seq u64 | reserved u32 (0) | crc32c u32
pub const SEGMENT_FIXED_HEADER_LEN: usize = 32;
/// The checkpoint slots' offsets: in different 512-byte sectors, so that a write torn by a
/// power loss damages at most the one slot being written.
pub const CHECKPOINT_SLOTS: [usize; 2] = [512, 1024];
/// durable_through u64 | count u64 | flags u32 | crc32c u32
pub const CHECKPOINT_LEN: usize = 24;
/// Checkpoint flag: the segment is closed and ends exactly at `durable_through`.
const CHECKPOINT_SEALED: u32 = 1;

/// `len u32 | crc32c u32`, then the `len` bytes the CRC covers.
pub const RECORD_PREFIX_LEN: usize = 8;
/// `seq u64 | ts_ns i64`, the start of what the CRC covers.
pub const RECORD_FIXED_LEN: usize = 16;
pub const RECORD_LEN_MIN: u32 = (RECORD_FIXED_LEN + 1) as u32;
pub const RECORD_LEN_MAX: u32 = (RECORD_FIXED_LEN + MAX_COMMAND_BYTES) as u32;
/// The largest record on disk, prefix included.
pub const RECORD_MAX_BYTES: usize = RECORD_PREFIX_LEN + RECORD_LEN_MAX as usize;

pub fn journal_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(JOURNAL_DIR)
}

pub fn archive_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(JOURNAL_DIR).join(ARCHIVE_DIR)
}

pub fn snapshot_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(SNAPSHOT_DIR)
}

pub fn segment_name(first_seq: u64) -> String {
    format!("segment-{first_seq:020}.log")
}

/// The first seq a segment file name claims, or `None` for any other file.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    parse_numbered(name, "segment-", ".log")
}

pub(crate) fn parse_numbered(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Segment files of `dir` as `(first_seq, path)`, ascending. A missing directory has none.
pub fn list_segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    list_numbered(dir, parse_segment_name)
}

pub(crate) fn list_numbered(
    dir: &Path,
    parse: fn(&str) -> Option<u64>,
) -> io::Result<Vec<(u64, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        if let Some(seq) = entry.file_name().to_str().and_then(parse) {
            found.push((seq, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// A version 2 segment's header page: the header, then checkpoint slots never yet written
/// (zero).
pub fn encode_segment_header(first_seq: u64) -> [u8; SEGMENT_HEADER_LEN] {
    let mut h = [0u8; SEGMENT_HEADER_LEN];
    h[0..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(SEGMENT_HEADER_LEN as u32).to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    // 24..28 reserved, zero.
    let crc = crc32c::crc32c(&h[..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What a segment header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub first_seq: u64,
    /// [`SEGMENT_VERSION`] or [`SEGMENT_VERSION_1`].
    pub version: u32,
    /// Where the records start.
    pub records_at: usize,
}

impl SegmentHeader {
    /// Version 2 segments have checkpoint slots; version 1 segments have none.
    pub fn has_checkpoints(&self) -> bool {
        self.version >= SEGMENT_VERSION
    }
}

/// A segment's header, or what is wrong with it.
pub fn parse_segment_header(bytes: &[u8]) -> Result<SegmentHeader, String> {
    let Some(h) = bytes.get(..SEGMENT_FIXED_HEADER_LEN) else {
        return Err(format!(
            "file is {} bytes, shorter than the {SEGMENT_FIXED_HEADER_LEN}-byte header",
            bytes.len()
        ));
    };
    if &h[0..8] != SEGMENT_MAGIC {
        return Err("bad magic (not a Rialto journal segment)".into());
    }
    let crc = u32_at(h, 28);
    if crc32c::crc32c(&h[..28]) != crc {
        return Err("header CRC mismatch".into());
    }
    let version = u32_at(h, 8);
    let expected_len = match version {
        SEGMENT_VERSION => SEGMENT_HEADER_LEN,
        SEGMENT_VERSION_1 => SEGMENT_HEADER_LEN_V1,
        _ => return Err(format!("unsupported version {version}")),
    };
    let header_len = u32_at(h, 12) as usize;
    if header_len != expected_len {
        return Err(format!(
            "header length {header_len}, expected {expected_len} for version {version}"
        ));
    }
    if bytes.len() < header_len {
        return Err(format!(
            "file is {} bytes, shorter than its {header_len}-byte header",
            bytes.len()
        ));
    }
    let first_seq = u64_at(h, 16);
    if first_seq == 0 {
        return Err("first seq 0 (seqs start at 1)".into());
    }
    if version == SEGMENT_VERSION {
        // Every byte of the header area but the header and the slots is zero.
        let slots = CHECKPOINT_SLOTS.map(|at| at..at + CHECKPOINT_LEN);
        let stray = (SEGMENT_FIXED_HEADER_LEN..header_len)
            .find(|&i| bytes[i] != 0 && !slots.iter().any(|slot| slot.contains(&i)));
        if let Some(at) = stray {
            return Err(format!(
                "non-zero byte at {at} in the header area's padding"
            ));
        }
    }
    Ok(SegmentHeader {
        first_seq,
        version,
        records_at: header_len,
    })
}

/// A segment's checkpoint (docs/journal-format.md, "Checkpoints and seals"): every record up
/// to `durable_through` was on disk (an `fdatasync` had returned) before it was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Every record of the segment up to this seq was durable; `first_seq - 1` claims none.
    pub durable_through: u64,
    /// Which write this was (1, 2, ...): slot `count % 2` holds it, and the newest valid slot
    /// is the checkpoint.
    pub count: u64,
    /// The segment is closed: it ends exactly at `durable_through`, and the next segment was
    /// created before the seal was written.
    pub sealed: bool,
}

/// The bytes of one checkpoint slot. The CRC covers the segment's first seq too, so a slot
/// copied from another segment does not pass.
pub fn encode_checkpoint(first_seq: u64, c: &Checkpoint) -> [u8; CHECKPOINT_LEN] {
    let mut b = [0u8; CHECKPOINT_LEN];
    b[0..8].copy_from_slice(&c.durable_through.to_le_bytes());
    b[8..16].copy_from_slice(&c.count.to_le_bytes());
    let flags = if c.sealed { CHECKPOINT_SEALED } else { 0 };
    b[16..20].copy_from_slice(&flags.to_le_bytes());
    let crc = checkpoint_crc(first_seq, &b[..20]);
    b[20..24].copy_from_slice(&crc.to_le_bytes());
    b
}

fn checkpoint_crc(first_seq: u64, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&first_seq.to_le_bytes()), body)
}

/// The offset of the slot that write number `count` goes to.
pub fn checkpoint_slot(count: u64) -> usize {
    CHECKPOINT_SLOTS[(count % 2) as usize]
}

/// A version 2 segment's checkpoint: the valid slot written last. `None` when no checkpoint
/// was ever written (or only a first one, torn). A slot that fails its CRC is what a power
/// loss during its write leaves, and the other slot then holds the checkpoint before it; both
/// failing is not something a crash does, and is an error.
pub fn read_checkpoint(bytes: &[u8], header: &SegmentHeader) -> Result<Option<Checkpoint>, String> {
    if !header.has_checkpoints() {
        return Ok(None);
    }
    let mut newest: Option<Checkpoint> = None;
    let mut damaged = 0;
    for at in CHECKPOINT_SLOTS {
        let b = &bytes[at..at + CHECKPOINT_LEN];
        if b.iter().all(|&x| x == 0) {
            continue;
        }
        if checkpoint_crc(header.first_seq, &b[..20]) != u32_at(b, 20) {
            damaged += 1;
            continue;
        }
        let flags = u32_at(b, 16);
        let c = Checkpoint {
            durable_through: u64_at(b, 0),
            count: u64_at(b, 8),
            sealed: flags & CHECKPOINT_SEALED != 0,
        };
        if flags & !CHECKPOINT_SEALED != 0
            || c.count == 0
            || checkpoint_slot(c.count) != at
            || c.durable_through < header.first_seq - 1
        {
            return Err(format!(
                "checkpoint slot at byte {at} is not one the writer writes: {c:?}, flags {flags:#x}"
            ));
        }
        if newest.is_none_or(|n| c.count > n.count) {
            newest = Some(c);
        }
    }
    if damaged == CHECKPOINT_SLOTS.len() {
        return Err("both checkpoint slots fail their CRC".into());
    }
    Ok(newest)
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Appends one complete record (`len | crc | seq | ts_ns | command`) to `out`.
pub fn encode_record(out: &mut Vec<u8>, seq: u64, ts_ns: i64, cmd: &Command) {
    let mut record = [0u8; RECORD_MAX_BYTES];
    let size = encode_record_unsealed(&mut record, seq, ts_ns, cmd);
    seal_records(&mut record[..size]);
    out.extend_from_slice(&record[..size]);
}

/// Writes one record at the start of `out` with its crc field zero and returns its size. The
/// writer fills in the CRCs of a whole batch at once with [`seal_records`], just before writing
/// it. Every byte of the record is written: the writer reuses its buffer without zeroing it.
#[inline]
pub(crate) fn encode_record_unsealed(
    out: &mut [u8; RECORD_MAX_BYTES],
    seq: u64,
    ts_ns: i64,
    cmd: &Command,
) -> usize {
    const HEAD: usize = RECORD_PREFIX_LEN + RECORD_FIXED_LEN;
    let (head, command) = out.split_at_mut(HEAD);
    let command: &mut [u8; MAX_COMMAND_BYTES] = command
        .try_into()
        .expect("a record has room for the longest command");
    let command_len = crate::codec::encode_command_into(cmd, command);
    let len = (RECORD_FIXED_LEN + command_len) as u32;
    head[0..4].copy_from_slice(&len.to_le_bytes());
    head[4..8].copy_from_slice(&0u32.to_le_bytes());
    head[8..16].copy_from_slice(&seq.to_le_bytes());
    head[16..24].copy_from_slice(&ts_ns.to_le_bytes());
    HEAD + command_len
}

/// Writes the crc field of every record in `buf`, which holds whole records back to back (as
/// [`encode_record_unsealed`] leaves them). Three records at a time: one record's CRC is a
/// chain of dependent instructions, three chains keep the CPU busy (crc.rs).
pub(crate) fn seal_records(buf: &mut [u8]) {
    let size = |buf: &[u8], at: usize| RECORD_PREFIX_LEN + u32_at(buf, at) as usize;
    let mut a = 0;
    while a < buf.len() {
        let b = a + size(buf, a);
        let c = if b < buf.len() { b + size(buf, b) } else { b };
        if c >= buf.len() {
            // One or two records left.
            for (at, end) in [(a, b), (b, c)] {
                if at < end {
                    let crc = crate::crc::record_crc(&buf[at + RECORD_PREFIX_LEN..end]);
                    buf[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
                }
            }
            return;
        }
        let end = c + size(buf, c);
        let crcs = crate::crc::record_crcs3(
            &buf[a + RECORD_PREFIX_LEN..b],
            &buf[b + RECORD_PREFIX_LEN..c],
            &buf[c + RECORD_PREFIX_LEN..end],
        );
        for (at, crc) in [a, b, c].into_iter().zip(crcs) {
            buf[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        }
        a = end;
    }
}

/// One record read from a buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawRecord {
    pub seq: u64,
    pub ts_ns: i64,
    pub command: Command,
    /// Bytes the record takes on disk, prefix included.
    pub size: usize,
}

/// Why a record could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordProblem {
    /// Incomplete, a length out of range, or a CRC mismatch: what a torn write leaves.
    Damaged(String),
    /// The CRC is right but the bytes are not a command this build knows: written by a newer
    /// build or a bug, never by a torn write, so never truncated.
    BadCommand(String),
}

/// Parses the record at `buf[pos..]`: length in range, complete, CRC right, command valid.
/// Does not judge the seq.
pub fn parse_record(buf: &[u8], pos: usize) -> Result<RawRecord, RecordProblem> {
    parse_record_inner(buf, pos).map_err(RecordProblem::Damaged)?
}

fn parse_record_inner(buf: &[u8], pos: usize) -> Result<Result<RawRecord, RecordProblem>, String> {
    let left = buf.len().saturating_sub(pos);
    if left < RECORD_PREFIX_LEN {
        return Err(format!(
            "incomplete record prefix ({left} of {RECORD_PREFIX_LEN} bytes)"
        ));
    }
    let len = u32_at(buf, pos);
    if !(RECORD_LEN_MIN..=RECORD_LEN_MAX).contains(&len) {
        return Err(format!(
            "record length {len} outside {RECORD_LEN_MIN}..={RECORD_LEN_MAX}"
        ));
    }
    let size = RECORD_PREFIX_LEN + len as usize;
    if left < size {
        return Err(format!("incomplete record ({left} of {size} bytes)"));
    }
    let crc = u32_at(buf, pos + 4);
    let body = &buf[pos + RECORD_PREFIX_LEN..pos + size];
    let actual = crate::crc::record_crc(body);
    if actual != crc {
        return Err(format!(
            "CRC mismatch (stored {crc:#010x}, computed {actual:#010x})"
        ));
    }
    let seq = u64_at(body, 0);
    let ts_ns = u64_at(body, 8) as i64;
    Ok(match decode_command(&body[RECORD_FIXED_LEN..]) {
        Ok(command) => Ok(RawRecord {
            seq,
            ts_ns,
            command,
            size,
        }),
        Err(e) => Err(RecordProblem::BadCommand(format!(
            "record of seq {seq} has a valid CRC but {e}"
        ))),
    })
}

/// How a segment's bytes end after its last good record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentEnd {
    /// Every byte belongs to a good record.
    Clean,
    /// A bad record at `offset` with nothing valid after it (or only zeros): a torn write.
    Torn { offset: u64, problem: String },
    /// A bad record at `offset` with a valid record after it.
    Corrupt { offset: u64, problem: String },
}

/// Judges the bytes from a bad record at `bad_at` to the end of the buffer. Torn when they are
/// all zero, or when no offset after `bad_at` starts a record whose length, CRC and command are
/// valid and whose seq is at least `expected_seq` (the seq the bad record should have had).
/// Otherwise something valid follows the damage: corruption, not a torn write.
pub fn judge_bad_record(
    buf: &[u8],
    bad_at: usize,
    expected_seq: u64,
    problem: String,
) -> SegmentEnd {
    let tail = &buf[bad_at..];
    if tail.iter().all(|&b| b == 0) {
        return SegmentEnd::Torn {
            offset: bad_at as u64,
            problem: format!("{problem}; the rest is {} zero bytes", tail.len()),
        };
    }
    for p in bad_at + 1..buf.len() {
        if let Ok(r) = parse_record(buf, p)
            && r.seq >= expected_seq
        {
            return SegmentEnd::Corrupt {
                offset: bad_at as u64,
                problem: format!(
                    "{problem}; a valid record (seq {}) follows at byte {p}",
                    r.seq
                ),
            };
        }
    }
    SegmentEnd::Torn {
        offset: bad_at as u64,
        problem,
    }
}

/// Flushes a directory's entries (a created, renamed or removed file) to disk.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` (and its parents) and makes the new entry durable in the parent.
pub fn create_dir_durable(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir)?;
    if let Some(parent) = dir.parent() {
        fsync_dir(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rialto_core::{PlaceOrder, Side, SymbolId};

    /// Commands of four different encoded lengths, so that records of a batch differ in size.
    fn command(i: u64) -> Command {
        let i = i as i64;
        match i % 4 {
            0 => Command::Place(PlaceOrder::limit(i, i + 1, SymbolId(0), Side::Buy, 10, 1)),
            1 => Command::Cancel { user: i, order: 7 },
            2 => Command::VenueReport,
            _ => Command::AddUser { user: i },
        }
    }

    #[test]
    fn sealing_a_batch_gives_every_record_its_crc() {
        for count in 0..12u64 {
            let mut buf = Vec::new();
            for seq in 1..=count {
                let mut record = [0xAAu8; RECORD_MAX_BYTES];
                let size = encode_record_unsealed(&mut record, seq, -(seq as i64), &command(seq));
                buf.extend_from_slice(&record[..size]);
            }
            seal_records(&mut buf);
            let mut pos = 0;
            for seq in 1..=count {
                let r = parse_record(&buf, pos).unwrap_or_else(|e| panic!("{count}: {e:?}"));
                assert_eq!(
                    (r.seq, r.ts_ns, r.command),
                    (seq, -(seq as i64), command(seq))
                );
                pos += r.size;
            }
            assert_eq!(pos, buf.len());
        }
    }
}
