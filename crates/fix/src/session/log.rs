//! The message log ("FIX database"): every message into and out of a session, with the time it
//! was received or sent, for `rialto fix log --session S --clordid X --from T --to T`.
//!
//! A [`Session`](super::Session) given a [`MessageLog`] appends to it by itself: each frame it is
//! handed (before it looks at it), each garbled chunk reported to
//! [`Session::on_garbled`](super::Session::on_garbled), and each message it writes to `out`
//! (resent ones included, as resent). Messages queued while disconnected are in the store, and
//! enter the log when a resend sends them. [`query`] reads a log back.
//!
//! The log is its own file, apart from the [store](super::store): the store may be reset (new
//! sequence numbers each day), the log is kept.
//!
//! # Byte layout of `<dir>/<session>.log`
//!
//! Little-endian; CRC-32 (IEEE) as in the store. The magic `RFXLOG01` (8 bytes), then records:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0  | 4 | `len`: the message's byte count (u32) |
//! | 4  | 4 | CRC-32 of bytes 8..17+len |
//! | 8  | 8 | time, Unix ns (i64): when received (in) or sent (out) |
//! | 16 | 1 | direction: 0 in, 1 out, 2 in but garbled (bytes as received) |
//! | 17 | len | the message bytes, `8=` to the CheckSum's SOH |
//!
//! Records are in the order the session saw them. A record cut short or failing its CRC ends
//! the log for readers; opening the log for appending truncates such a torn tail.
//!
//! Credentials never reach the log: the values of Password (554) and NewPassword (925) are
//! written as `***` (so a logged Logon's BodyLength and CheckSum no longer add up).
//!
//! # Rotation
//! With [`MessageLog::with_rotation`], a log that would grow past `max_bytes` is renamed
//! `<session>.log.1` (an older `.1` becomes `.2`, and so on; the one past `files` is deleted)
//! and a new `<session>.log` begins, so a session's logs never hold much more than
//! `(files + 1) × max_bytes`. [`query`] reads the rotated files, oldest first, then the current.
//! Files are created readable by their owner only.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::store::{check_session_name, crc32_parts, read_full};
use crate::parse::Fields;
use crate::tags;

const MAGIC: &[u8; 8] = b"RFXLOG01";
const RECORD_HEADER: usize = 17;
/// The longest message a log record may hold.
pub const MAX_LOGGED_MESSAGE: usize = 1 << 24;

/// Which way a logged message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Received from the counterparty.
    In,
    /// Sent to the counterparty.
    Out,
    /// Received, but not a well-formed message (ignored by the session).
    InGarbled,
}

impl Direction {
    fn code(self) -> u8 {
        match self {
            Direction::In => 0,
            Direction::Out => 1,
            Direction::InGarbled => 2,
        }
    }

    fn from_code(code: u8) -> Option<Direction> {
        match code {
            0 => Some(Direction::In),
            1 => Some(Direction::Out),
            2 => Some(Direction::InGarbled),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
            Direction::InGarbled => "in-garbled",
        }
    }
}

/// The path of a session's log in `dir`.
pub fn log_path(dir: &Path, session_name: &str) -> io::Result<PathBuf> {
    check_session_name(session_name)?;
    Ok(dir.join(format!("{session_name}.log")))
}

/// A session's log open for appending. Appends are buffered until [`MessageLog::flush`]
/// (the session flushes at the end of each call).
#[derive(Debug)]
pub struct MessageLog {
    file: File,
    path: PathBuf,
    /// Bytes in the current file.
    written: u64,
    pending: Vec<u8>,
    fsync: bool,
    /// Rotate past this many bytes (`u64::MAX`: never), keeping `files` rotated files.
    max_bytes: u64,
    files: u32,
}

/// The path of the `n`th rotated file of a log (`n` ≥ 1; 1 is the newest).
fn rotated_path(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

fn create_owner_only(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Tags whose values are secrets.
const MASKED_TAGS: [&[u8]; 2] = [b"554=", b"925="];
const MASK: &[u8] = b"***";

/// `message` with the values of [`MASKED_TAGS`] replaced by [`MASK`].
fn mask_credentials(message: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let has_secret = message.split(|&b| b == SOH).any(|field| {
        MASKED_TAGS
            .iter()
            .any(|tag| field.starts_with(tag) && field.len() > tag.len())
    });
    if !has_secret {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut masked = Vec::with_capacity(message.len());
    for (i, field) in message.split(|&b| b == SOH).enumerate() {
        if i > 0 {
            masked.push(SOH);
        }
        match MASKED_TAGS.iter().find(|tag| field.starts_with(tag)) {
            Some(tag) => {
                masked.extend_from_slice(tag);
                masked.extend_from_slice(MASK);
            }
            None => masked.extend_from_slice(field),
        }
    }
    std::borrow::Cow::Owned(masked)
}

const SOH: u8 = 0x01;

impl MessageLog {
    /// Opens (or creates) `<dir>/<session_name>.log`, truncating a torn tail.
    pub fn open(dir: impl AsRef<Path>, session_name: &str) -> io::Result<MessageLog> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)?;
        let path = log_path(dir, session_name)?;
        let mut file = create_owner_only(&path)?;
        if file.metadata()?.len() == 0 {
            file.write_all(MAGIC)?;
        } else {
            let mut reader = LogReader::new(BufReader::with_capacity(1 << 16, &file), &path)?;
            while reader.next_record()?.is_some() {}
            let good = reader.offset;
            if good < file.metadata()?.len() {
                file.set_len(good)?;
            }
        }
        let written = file.metadata()?.len();
        Ok(MessageLog {
            file,
            path,
            written,
            pending: Vec::new(),
            fsync: false,
            max_bytes: u64::MAX,
            files: 0,
        })
    }

    /// Rotates the log past `max_bytes`, keeping `files` full files beside the current one
    /// (module docs, "Rotation").
    pub fn with_rotation(mut self, max_bytes: u64, files: u32) -> MessageLog {
        self.max_bytes = max_bytes;
        self.files = files;
        self
    }

    /// Whether [`MessageLog::flush`] also waits for the disk (`fsync`). Off by default.
    pub fn with_fsync(mut self, fsync: bool) -> MessageLog {
        self.fsync = fsync;
        self
    }

    /// Appends one record (buffered). Bytes beyond [`MAX_LOGGED_MESSAGE`] are cut.
    pub fn append(&mut self, direction: Direction, time_ns: i64, message: &[u8]) {
        let message = &message[..message.len().min(MAX_LOGGED_MESSAGE)];
        let message = &*mask_credentials(message);
        let mut header = [0u8; RECORD_HEADER];
        header[..4].copy_from_slice(&(message.len() as u32).to_le_bytes());
        header[8..16].copy_from_slice(&time_ns.to_le_bytes());
        header[16] = direction.code();
        let crc = crc32_parts(&header[8..], message);
        header[4..8].copy_from_slice(&crc.to_le_bytes());
        self.pending.extend_from_slice(&header);
        self.pending.extend_from_slice(message);
    }

    /// Hands the buffered records to the OS (and to the disk, with fsync on).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let size = self.pending.len() as u64;
        if self.written > MAGIC.len() as u64 && self.written.saturating_add(size) > self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(&self.pending)?;
        self.written += size;
        self.pending.clear();
        if self.fsync {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

impl MessageLog {
    /// The current file becomes `.1` (and `.k` becomes `.k+1`, the last one deleted); a new
    /// current file begins.
    fn rotate(&mut self) -> io::Result<()> {
        if self.fsync {
            self.file.sync_data()?;
        }
        if self.files == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            let last = rotated_path(&self.path, self.files);
            if last.exists() {
                std::fs::remove_file(&last)?;
            }
            for n in (1..self.files).rev() {
                let from = rotated_path(&self.path, n);
                if from.exists() {
                    std::fs::rename(&from, rotated_path(&self.path, n + 1))?;
                }
            }
            std::fs::rename(&self.path, rotated_path(&self.path, 1))?;
        }
        let mut file = create_owner_only(&self.path)?;
        file.write_all(MAGIC)?;
        self.file = file;
        self.written = MAGIC.len() as u64;
        Ok(())
    }
}

/// One logged message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub time_ns: i64,
    pub direction: Direction,
    pub bytes: Vec<u8>,
}

/// What [`query`] returns. Every field that is set must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogFilter {
    /// Messages whose ClOrdID (11) or OrigClOrdID (41) is this.
    pub clordid: Option<String>,
    /// Messages at or after this time (Unix ns).
    pub from_ns: Option<i64>,
    /// Messages at or before this time (Unix ns).
    pub to_ns: Option<i64>,
}

impl LogFilter {
    pub fn matches(&self, record: &LogRecord) -> bool {
        if self.from_ns.is_some_and(|from| record.time_ns < from)
            || self.to_ns.is_some_and(|to| record.time_ns > to)
        {
            return false;
        }
        match &self.clordid {
            None => true,
            Some(id) => Fields::over(&record.bytes).map_while(Result::ok).any(|f| {
                (f.tag == tags::CL_ORD_ID || f.tag == tags::ORIG_CL_ORD_ID)
                    && f.value == id.as_bytes()
            }),
        }
    }
}

/// Reads a session's log and yields the records that match `filter`, oldest first. It reads
/// the file as it is when each record is reached (the session may be appending meanwhile) and
/// stops at the end or at a torn record.
pub fn query(dir: impl AsRef<Path>, session_name: &str, filter: LogFilter) -> io::Result<Query> {
    let path = log_path(dir.as_ref(), session_name)?;
    // Rotated files, oldest (highest number) first, then the current one.
    let mut rotated = Vec::new();
    for n in 1.. {
        let older = rotated_path(&path, n);
        if !older.exists() {
            break;
        }
        rotated.push(older);
    }
    let mut files: Vec<PathBuf> = rotated.into_iter().rev().collect();
    files.push(path);
    let first = open_reader(&files[0])?;
    Ok(Query {
        reader: first,
        rest: files.split_off(1).into_iter(),
        filter,
    })
}

fn open_reader(path: &Path) -> io::Result<LogReader<BufReader<File>>> {
    let file = File::open(path)?;
    LogReader::new(BufReader::with_capacity(1 << 16, file), path)
}

/// The iterator [`query`] returns.
pub struct Query {
    reader: LogReader<BufReader<File>>,
    /// The files still to read, in order.
    rest: std::vec::IntoIter<PathBuf>,
    filter: LogFilter,
}

impl Iterator for Query {
    type Item = io::Result<LogRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.reader.next_record() {
                Ok(None) => match self.rest.next() {
                    Some(path) => match open_reader(&path) {
                        Ok(reader) => self.reader = reader,
                        Err(e) => return Some(Err(e)),
                    },
                    None => return None,
                },
                Err(e) => return Some(Err(e)),
                Ok(Some(record)) if self.filter.matches(&record) => return Some(Ok(record)),
                Ok(Some(_)) => {}
            }
        }
    }
}

struct LogReader<R> {
    reader: R,
    /// The byte offset just past the last good record.
    offset: u64,
    done: bool,
}

impl<R: Read> LogReader<R> {
    fn new(mut reader: R, path: &Path) -> io::Result<LogReader<R>> {
        let mut magic = [0u8; 8];
        if !read_full(&mut reader, &mut magic)? || &magic != MAGIC {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a Rialto FIX message log", path.display()),
            ));
        }
        Ok(LogReader {
            reader,
            offset: MAGIC.len() as u64,
            done: false,
        })
    }

    fn next_record(&mut self) -> io::Result<Option<LogRecord>> {
        if self.done {
            return Ok(None);
        }
        let mut header = [0u8; RECORD_HEADER];
        let mut record = None;
        if read_full(&mut self.reader, &mut header)? {
            let len = u32::from_le_bytes(header[..4].try_into().unwrap()) as usize;
            if len <= MAX_LOGGED_MESSAGE {
                let mut bytes = vec![0u8; len];
                let crc = u32::from_le_bytes(header[4..8].try_into().unwrap());
                if read_full(&mut self.reader, &mut bytes)?
                    && crc32_parts(&header[8..], &bytes) == crc
                    && let Some(direction) = Direction::from_code(header[16])
                {
                    record = Some(LogRecord {
                        time_ns: i64::from_le_bytes(header[8..16].try_into().unwrap()),
                        direction,
                        bytes,
                    });
                    self.offset += (RECORD_HEADER + len) as u64;
                }
            }
        }
        self.done = record.is_none();
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(dir: &Path, name: &str) -> Vec<LogRecord> {
        query(dir, name, LogFilter::default())
            .unwrap()
            .collect::<io::Result<_>>()
            .unwrap()
    }

    #[test]
    fn passwords_are_masked() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MessageLog::open(dir.path(), "S").unwrap();
        let logon = b"8=FIX.4.4\x019=40\x0135=A\x01553=1\x01554=s3cret\x01925=n3w\x0110=000\x01";
        log.append(Direction::In, 1, logon);
        log.flush().unwrap();
        let records = all(dir.path(), "S");
        assert_eq!(
            records[0].bytes,
            b"8=FIX.4.4\x019=40\x0135=A\x01553=1\x01554=***\x01925=***\x0110=000\x01"
        );
        let on_disk = std::fs::read(dir.path().join("S.log")).unwrap();
        assert!(!on_disk.windows(6).any(|w| w == b"s3cret"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("S.log"))
                .unwrap()
                .permissions();
            assert_eq!(mode.mode() & 0o077, 0, "readable by others");
        }
    }

    #[test]
    fn a_rotating_log_keeps_its_cap_and_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MessageLog::open(dir.path(), "S")
            .unwrap()
            .with_rotation(4_096, 2);
        let message = [b'x'; 1_000];
        for time in 0..40 {
            log.append(Direction::Out, time, &message);
            log.flush().unwrap();
        }
        let mut total = 0;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let len = entry.unwrap().metadata().unwrap().len();
            assert!(len <= 4_096, "a file past the cap: {len}");
            total += len;
        }
        assert!(total <= 3 * 4_096);
        assert!(dir.path().join("S.log.2").exists() && !dir.path().join("S.log.3").exists());
        // The newest records survive, oldest first, with none missing in between.
        let times: Vec<i64> = all(dir.path(), "S").iter().map(|r| r.time_ns).collect();
        assert_eq!(times.last(), Some(&39));
        assert!(times.windows(2).all(|w| w[1] == w[0] + 1), "{times:?}");
        // Reopening continues the current file and its count.
        drop(log);
        let mut log = MessageLog::open(dir.path(), "S")
            .unwrap()
            .with_rotation(4_096, 2);
        for time in 40..45 {
            log.append(Direction::Out, time, &message);
            log.flush().unwrap();
        }
        let times: Vec<i64> = all(dir.path(), "S").iter().map(|r| r.time_ns).collect();
        assert_eq!(times.last(), Some(&44));
        assert!(times.windows(2).all(|w| w[1] == w[0] + 1), "{times:?}");
    }
}
