//! The message store: the next sender and target sequence numbers, and the messages we sent
//! (by sequence number) so that a ResendRequest can be answered.
//!
//! Two implementations: [`MemoryStore`] (tests, the test acceptor) and [`FileStore`] (two small
//! files per session in a directory). The [`Session`](super::Session) calls
//! [`MessageStore::flush`] at the end of every call it handles, before the caller writes `out`
//! to the socket: whatever went out is in the store.
//!
//! # FileStore byte layout
//!
//! All integers are little-endian. CRC-32 is the IEEE polynomial (as in zip and Ethernet).
//!
//! `<dir>/<session>.seqnums`, rewritten in place (28 bytes) whenever a number changed:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0  | 8 | magic `RFXSEQ01` |
//! | 8  | 8 | next sender MsgSeqNum (u64) |
//! | 16 | 8 | next target MsgSeqNum (u64) |
//! | 24 | 4 | CRC-32 of bytes 8..24 |
//!
//! `<dir>/<session>.messages`, append-only: the magic `RFXMSG01` (8 bytes), then one record per
//! stored message:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0  | 4 | `len`: the message's byte count (u32) |
//! | 4  | 4 | CRC-32 of bytes 8..24+len |
//! | 8  | 8 | MsgSeqNum (u64) |
//! | 16 | 8 | SendingTime, Unix ns (i64) |
//! | 24 | len | the whole message as first sent, `8=` to the CheckSum's SOH |
//!
//! On open the file is read once to rebuild the index (sequence number → offset; 20 bytes a
//! message in memory, the messages themselves stay on disk). A record that is cut short or fails
//! its CRC ends the file: it and anything after it are truncated away (a torn tail from a
//! crash). A later record with a sequence number not above the previous one replaces the index
//! from that number on. A sequence reset truncates the file back to its magic.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Where a [`Session`](super::Session) keeps its sequence numbers and the messages it may have to
/// resend. Sequence numbers start at 1.
pub trait MessageStore {
    fn next_sender_seq(&self) -> u64;
    fn next_target_seq(&self) -> u64;
    fn set_next_sender_seq(&mut self, seq: u64) -> io::Result<()>;
    fn set_next_target_seq(&mut self, seq: u64) -> io::Result<()>;
    /// Keeps a sent message (the whole FIX message) for resends.
    fn store(&mut self, seq: u64, sending_time_ns: i64, message: &[u8]) -> io::Result<()>;
    /// The stored message with the lowest sequence number in `from..=to`: its bytes replace the
    /// contents of `buf`, and its sequence number and sending time are returned.
    fn read_next(
        &mut self,
        from: u64,
        to: u64,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<(u64, i64)>>;
    /// Both sequence numbers back to 1 and every stored message dropped.
    fn reset(&mut self) -> io::Result<()>;
    /// Makes everything recorded so far durable (as far as the store promises).
    fn flush(&mut self) -> io::Result<()>;
}

impl<S: MessageStore + ?Sized> MessageStore for Box<S> {
    fn next_sender_seq(&self) -> u64 {
        (**self).next_sender_seq()
    }
    fn next_target_seq(&self) -> u64 {
        (**self).next_target_seq()
    }
    fn set_next_sender_seq(&mut self, seq: u64) -> io::Result<()> {
        (**self).set_next_sender_seq(seq)
    }
    fn set_next_target_seq(&mut self, seq: u64) -> io::Result<()> {
        (**self).set_next_target_seq(seq)
    }
    fn store(&mut self, seq: u64, sending_time_ns: i64, message: &[u8]) -> io::Result<()> {
        (**self).store(seq, sending_time_ns, message)
    }
    fn read_next(
        &mut self,
        from: u64,
        to: u64,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<(u64, i64)>> {
        (**self).read_next(from, to, buf)
    }
    fn reset(&mut self) -> io::Result<()> {
        (**self).reset()
    }
    fn flush(&mut self) -> io::Result<()> {
        (**self).flush()
    }
}

/// A store in memory. It keeps at most `max_messages` messages; older ones are dropped and
/// would be gap-filled if asked for again.
#[derive(Debug)]
pub struct MemoryStore {
    next_sender: u64,
    next_target: u64,
    messages: BTreeMap<u64, (i64, Vec<u8>)>,
    max_messages: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// The default bound on kept messages.
    pub const DEFAULT_MAX_MESSAGES: usize = 1_000_000;

    pub fn new() -> MemoryStore {
        MemoryStore::with_max_messages(Self::DEFAULT_MAX_MESSAGES)
    }

    pub fn with_max_messages(max_messages: usize) -> MemoryStore {
        MemoryStore {
            next_sender: 1,
            next_target: 1,
            messages: BTreeMap::new(),
            max_messages: max_messages.max(1),
        }
    }

    /// How many messages are kept.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

impl MessageStore for MemoryStore {
    fn next_sender_seq(&self) -> u64 {
        self.next_sender
    }
    fn next_target_seq(&self) -> u64 {
        self.next_target
    }
    fn set_next_sender_seq(&mut self, seq: u64) -> io::Result<()> {
        self.next_sender = seq;
        Ok(())
    }
    fn set_next_target_seq(&mut self, seq: u64) -> io::Result<()> {
        self.next_target = seq;
        Ok(())
    }
    fn store(&mut self, seq: u64, sending_time_ns: i64, message: &[u8]) -> io::Result<()> {
        // A lower number than stored before means the numbers went back: forget what follows.
        let _ = self.messages.split_off(&seq);
        self.messages
            .insert(seq, (sending_time_ns, message.to_vec()));
        while self.messages.len() > self.max_messages {
            self.messages.pop_first();
        }
        Ok(())
    }
    fn read_next(
        &mut self,
        from: u64,
        to: u64,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<(u64, i64)>> {
        if from > to {
            return Ok(None);
        }
        Ok(self
            .messages
            .range(from..=to)
            .next()
            .map(|(&seq, (time, bytes))| {
                buf.clear();
                buf.extend_from_slice(bytes);
                (seq, *time)
            }))
    }
    fn reset(&mut self) -> io::Result<()> {
        self.next_sender = 1;
        self.next_target = 1;
        self.messages.clear();
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const SEQNUMS_MAGIC: &[u8; 8] = b"RFXSEQ01";
const MESSAGES_MAGIC: &[u8; 8] = b"RFXMSG01";
/// The byte length of a `.seqnums` file.
pub const SEQNUMS_LEN: usize = 28;
const RECORD_HEADER: usize = 24;
/// The longest message a store record may hold (a bound for reading damaged files).
pub const MAX_STORED_MESSAGE: usize = 1 << 24;

#[derive(Clone, Copy, Debug)]
struct IndexEntry {
    seq: u64,
    offset: u64,
    len: u32,
}

/// A store in two files in a directory (layout in the [module docs](self)). Writes are buffered
/// until [`MessageStore::flush`], which hands them to the OS, and also calls `fsync` when
/// [`FileStore::with_fsync`] asked for it.
#[derive(Debug)]
pub struct FileStore {
    seqnums: File,
    messages: File,
    messages_path: PathBuf,
    index: Vec<IndexEntry>,
    /// The byte length of the messages file once `pending` is written.
    end: u64,
    pending: Vec<u8>,
    next_sender: u64,
    next_target: u64,
    seqnums_dirty: bool,
    fsync: bool,
}

impl FileStore {
    /// Opens (or creates) the store of `session_name` in `dir` (created if missing). The name
    /// must be a plain file name: letters, digits, `.`, `-`, `_`, not starting with `.`.
    pub fn open(dir: impl AsRef<Path>, session_name: &str) -> io::Result<FileStore> {
        check_session_name(session_name)?;
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)?;
        let seqnums_path = dir.join(format!("{session_name}.seqnums"));
        let messages_path = dir.join(format!("{session_name}.messages"));
        // Stored messages are a session's business: readable by the owner only.
        let mut options = OpenOptions::new();
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let seqnums = options
            .clone()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&seqnums_path)?;
        let (mut next_sender, next_target, seqnums_dirty) = read_seqnums(&seqnums, &seqnums_path)?;
        let messages = options
            .read(true)
            .append(true)
            .create(true)
            .open(&messages_path)?;
        let (index, end) = scan_messages(&messages, &messages_path)?;
        if let Some(last) = index.last() {
            // The message is written before the number: a crash between the two leaves a
            // stored message the number does not count yet.
            next_sender = next_sender.max(last.seq + 1);
        }
        let mut store = FileStore {
            seqnums,
            messages,
            messages_path,
            index,
            end,
            pending: Vec::new(),
            next_sender,
            next_target,
            seqnums_dirty,
            fsync: false,
        };
        store.flush()?;
        Ok(store)
    }

    /// Whether [`MessageStore::flush`] also waits for the disk (`fsync`). Off by default: a
    /// flush hands the bytes to the OS, which survives a process crash but not a power cut.
    pub fn with_fsync(mut self, fsync: bool) -> FileStore {
        self.fsync = fsync;
        self
    }

    /// How many messages the index holds.
    pub fn stored_messages(&self) -> usize {
        self.index.len()
    }

    fn write_seqnums(&mut self) -> io::Result<()> {
        let bytes = encode_seqnums(self.next_sender, self.next_target);
        self.seqnums.write_all_at(&bytes, 0)
    }
}

impl MessageStore for FileStore {
    fn next_sender_seq(&self) -> u64 {
        self.next_sender
    }
    fn next_target_seq(&self) -> u64 {
        self.next_target
    }
    fn set_next_sender_seq(&mut self, seq: u64) -> io::Result<()> {
        self.next_sender = seq;
        self.seqnums_dirty = true;
        Ok(())
    }
    fn set_next_target_seq(&mut self, seq: u64) -> io::Result<()> {
        self.next_target = seq;
        self.seqnums_dirty = true;
        Ok(())
    }
    fn store(&mut self, seq: u64, sending_time_ns: i64, message: &[u8]) -> io::Result<()> {
        if message.len() > MAX_STORED_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a message of {} bytes is too long to store", message.len()),
            ));
        }
        let offset = self.end;
        let start = self.pending.len();
        encode_record(&mut self.pending, seq, sending_time_ns, message);
        self.end += (self.pending.len() - start) as u64;
        push_index(
            &mut self.index,
            IndexEntry {
                seq,
                offset,
                len: message.len() as u32,
            },
        );
        Ok(())
    }
    fn read_next(
        &mut self,
        from: u64,
        to: u64,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<(u64, i64)>> {
        if from > to {
            return Ok(None);
        }
        self.flush()?;
        let at = self.index.partition_point(|e| e.seq < from);
        let Some(entry) = self.index.get(at).copied() else {
            return Ok(None);
        };
        if entry.seq > to {
            return Ok(None);
        }
        let mut header = [0u8; RECORD_HEADER];
        self.messages.read_exact_at(&mut header, entry.offset)?;
        buf.clear();
        buf.resize(entry.len as usize, 0);
        self.messages
            .read_exact_at(buf, entry.offset + RECORD_HEADER as u64)?;
        let crc = u32::from_le_bytes(header[4..8].try_into().unwrap());
        if crc32_parts(&header[8..], buf) != crc {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: record of MsgSeqNum {} fails its CRC",
                    self.messages_path.display(),
                    entry.seq
                ),
            ));
        }
        let time = i64::from_le_bytes(header[16..24].try_into().unwrap());
        Ok(Some((entry.seq, time)))
    }
    fn reset(&mut self) -> io::Result<()> {
        self.pending.clear();
        self.index.clear();
        self.messages.set_len(MESSAGES_MAGIC.len() as u64)?;
        self.end = MESSAGES_MAGIC.len() as u64;
        self.next_sender = 1;
        self.next_target = 1;
        self.seqnums_dirty = true;
        self.flush()
    }
    fn flush(&mut self) -> io::Result<()> {
        let wrote_messages = !self.pending.is_empty();
        if wrote_messages {
            self.messages.write_all(&self.pending)?;
            self.pending.clear();
        }
        let wrote_seqnums = self.seqnums_dirty;
        if wrote_seqnums {
            self.write_seqnums()?;
            self.seqnums_dirty = false;
        }
        if self.fsync {
            if wrote_messages {
                self.messages.sync_data()?;
            }
            if wrote_seqnums {
                self.seqnums.sync_data()?;
            }
        }
        Ok(())
    }
}

/// The bytes of a `.seqnums` file holding `next_sender` and `next_target` (layout in the
/// [module docs](self)): also how a replicated venue keeps a session's numbers in its cluster.
pub fn encode_seqnums(next_sender: u64, next_target: u64) -> [u8; SEQNUMS_LEN] {
    let mut bytes = [0u8; SEQNUMS_LEN];
    bytes[..8].copy_from_slice(SEQNUMS_MAGIC);
    bytes[8..16].copy_from_slice(&next_sender.to_le_bytes());
    bytes[16..24].copy_from_slice(&next_target.to_le_bytes());
    let crc = crc32(&bytes[8..24]);
    bytes[24..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

/// The next sender and target numbers of `.seqnums` bytes, checked (magic, CRC, no 0).
pub fn decode_seqnums(bytes: &[u8]) -> Result<(u64, u64), &'static str> {
    if bytes.len() != SEQNUMS_LEN {
        return Err("not the length of a sequence number record");
    }
    if &bytes[..8] != SEQNUMS_MAGIC {
        return Err("not a Rialto sequence number record");
    }
    if crc32(&bytes[8..24]) != u32::from_le_bytes(bytes[24..].try_into().unwrap()) {
        return Err("sequence numbers fail their CRC");
    }
    let sender = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    let target = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    if sender == 0 || target == 0 {
        return Err("a sequence number of 0");
    }
    Ok((sender, target))
}

/// Appends one `.messages` record (layout in the [module docs](self)) to `out`.
pub fn encode_message_record(out: &mut Vec<u8>, seq: u64, sending_time_ns: i64, message: &[u8]) {
    encode_record(out, seq, sending_time_ns, message)
}

impl FileStore {
    /// Replaces the files of `session_name` in `dir` with the given numbers and `records`
    /// (`.messages` records back to back, as [`encode_message_record`] writes them), each file
    /// written beside and renamed into place. [`FileStore::open`] then reads them as usual
    /// (a damaged record ends the messages there).
    pub fn replace_files(
        dir: impl AsRef<Path>,
        session_name: &str,
        next_sender: u64,
        next_target: u64,
        records: &[u8],
    ) -> io::Result<()> {
        check_session_name(session_name)?;
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)?;
        let write = |suffix: &str, parts: &[&[u8]]| -> io::Result<()> {
            let path = dir.join(format!("{session_name}.{suffix}"));
            let tmp = dir.join(format!("{session_name}.{suffix}.tmp"));
            let mut options = OpenOptions::new();
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.write(true).create(true).truncate(true).open(&tmp)?;
            for part in parts {
                file.write_all(part)?;
            }
            file.sync_data()?;
            std::fs::rename(&tmp, &path)
        };
        write("messages", &[MESSAGES_MAGIC, records])?;
        write("seqnums", &[&encode_seqnums(next_sender, next_target)])
    }
}

fn push_index(index: &mut Vec<IndexEntry>, entry: IndexEntry) {
    let keep = index.partition_point(|e| e.seq < entry.seq);
    index.truncate(keep);
    index.push(entry);
}

fn encode_record(out: &mut Vec<u8>, seq: u64, time_ns: i64, message: &[u8]) {
    let mut header = [0u8; RECORD_HEADER];
    header[..4].copy_from_slice(&(message.len() as u32).to_le_bytes());
    header[8..16].copy_from_slice(&seq.to_le_bytes());
    header[16..24].copy_from_slice(&time_ns.to_le_bytes());
    let crc = crc32_parts(&header[8..], message);
    header[4..8].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(message);
}

fn corrupt(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

/// Reads the sequence numbers; a new (empty) file means 1 and 1, and asks for a write.
fn read_seqnums(file: &File, path: &Path) -> io::Result<(u64, u64, bool)> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok((1, 1, true));
    }
    if len < SEQNUMS_LEN as u64 {
        return Err(corrupt(path, "too short for a sequence number file"));
    }
    let mut bytes = [0u8; SEQNUMS_LEN];
    file.read_exact_at(&mut bytes, 0)?;
    let (sender, target) = decode_seqnums(&bytes).map_err(|what| corrupt(path, what))?;
    Ok((sender, target, false))
}

/// Rebuilds the index and truncates a torn tail. Returns the index and the file's length.
fn scan_messages(file: &File, path: &Path) -> io::Result<(Vec<IndexEntry>, u64)> {
    let len = file.metadata()?.len();
    if len == 0 {
        let mut f = file;
        f.write_all(MESSAGES_MAGIC)?;
        return Ok((Vec::new(), MESSAGES_MAGIC.len() as u64));
    }
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut magic = [0u8; 8];
    if len < 8 || reader.read_exact(&mut magic).is_err() || &magic != MESSAGES_MAGIC {
        return Err(corrupt(path, "not a Rialto message store"));
    }
    let mut index = Vec::new();
    let mut offset = MESSAGES_MAGIC.len() as u64;
    let mut message = Vec::new();
    loop {
        let mut header = [0u8; RECORD_HEADER];
        if !read_full(&mut reader, &mut header)? {
            break;
        }
        let message_len = u32::from_le_bytes(header[..4].try_into().unwrap()) as usize;
        if message_len > MAX_STORED_MESSAGE {
            break;
        }
        message.resize(message_len, 0);
        if !read_full(&mut reader, &mut message)? {
            break;
        }
        let crc = u32::from_le_bytes(header[4..8].try_into().unwrap());
        if crc32_parts(&header[8..], &message) != crc {
            break;
        }
        let seq = u64::from_le_bytes(header[8..16].try_into().unwrap());
        push_index(
            &mut index,
            IndexEntry {
                seq,
                offset,
                len: message_len as u32,
            },
        );
        offset += (RECORD_HEADER + message_len) as u64;
    }
    if offset < len {
        file.set_len(offset)?;
    }
    Ok((index, offset))
}

/// Fills `buf` completely; `false` if the input ended first (a torn or empty tail).
pub(crate) fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => return Ok(false),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Session names become file names: keep them plain.
pub(crate) fn check_session_name(name: &str) -> io::Result<()> {
    let plain = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
    if plain {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("session name {name:?} is not a plain file name"),
        ))
    }
}

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32_parts(bytes, &[])
}

/// CRC-32 (IEEE) of `a` followed by `b`.
pub(crate) fn crc32_parts(a: &[u8], b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &byte in a.iter().chain(b) {
        c = CRC_TABLE[((c ^ u32::from(byte)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_known_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn session_names_must_be_plain() {
        assert!(check_session_name("FIX.4.4-RIALTO-TRADER1").is_ok());
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(check_session_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn replaced_files_open_as_the_store_they_describe() {
        let dir = tempfile::tempdir().unwrap();
        let mut records = Vec::new();
        encode_message_record(&mut records, 1, 10, b"one");
        encode_message_record(&mut records, 2, 20, b"two");
        FileStore::replace_files(dir.path(), "S", 3, 7, &records).unwrap();
        let mut store = FileStore::open(dir.path(), "S").unwrap();
        assert_eq!((store.next_sender_seq(), store.next_target_seq()), (3, 7));
        let mut buf = Vec::new();
        assert_eq!(store.read_next(2, 9, &mut buf).unwrap(), Some((2, 20)));
        assert_eq!(buf, b"two");
        // Replacing again drops what was there.
        FileStore::replace_files(dir.path(), "S", 1, 1, &[]).unwrap();
        let mut store = FileStore::open(dir.path(), "S").unwrap();
        assert_eq!(store.read_next(1, 9, &mut buf).unwrap(), None);
        assert_eq!(decode_seqnums(&encode_seqnums(4, 5)), Ok((4, 5)));
        assert!(decode_seqnums(&[0; SEQNUMS_LEN]).is_err());
    }

    #[test]
    fn memory_store_keeps_a_bounded_number() {
        let mut s = MemoryStore::with_max_messages(2);
        for seq in 1..=3 {
            s.store(seq, seq as i64, b"m").unwrap();
        }
        let mut buf = Vec::new();
        assert_eq!(s.read_next(1, 10, &mut buf).unwrap(), Some((2, 2)));
        // Storing a lower number forgets the later ones.
        s.store(2, 9, b"n").unwrap();
        assert_eq!(s.read_next(3, 10, &mut buf).unwrap(), None);
    }
}
