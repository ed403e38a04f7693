//! Errors that name the file, the byte offset and what was wrong.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong reading or writing the journal and snapshots. Bad bytes on
/// disk are always an `Err`, never a panic.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// Bytes that are not the encoding of a command (`offset` is within the command bytes).
    #[error("bad command encoding at byte {offset}: {problem}")]
    BadCommand { offset: usize, problem: String },
    #[error("{}: bad segment header: {problem}", path.display())]
    BadSegmentHeader { path: PathBuf, problem: String },
    /// A damaged record that is not a torn tail: in a segment other than the last, or with
    /// valid records after it.
    #[error("{}: corrupt record at byte {offset}: {problem}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        problem: String,
    },
    #[error("{}: sequence gap at byte {offset}: expected seq {expected}, found {found}", path.display())]
    SeqGap {
        path: PathBuf,
        offset: u64,
        expected: u64,
        found: u64,
    },
    /// The journal does not hold the commands recovery (or a dump) needs.
    #[error("journal is missing commands: {problem}")]
    MissingRange { problem: String },
    /// The journal ends before what it is known to have held, and the loss has not been
    /// accepted (docs/journal-format.md, "Accepted losses"). `evidence` says how it is known:
    /// the newest snapshot is later, or the last segment's checkpoint claims more.
    #[error(
        "the journal ends at seq {journal_last}, but {evidence}: seqs {}..={lost_through} are \
         missing from the journal (acknowledged commands were lost); nothing was changed",
        journal_last + 1
    )]
    LostSuffix {
        journal_last: u64,
        lost_through: u64,
        evidence: String,
    },
    /// A segment that is not the last ends before its checkpoint: records that were on disk
    /// are gone (the segment was cut, perhaps at a record boundary).
    #[error(
        "{}: its records end at seq {journal_last}, but its checkpoint says every record up to \
         seq {durable_through} was on disk: seqs {}..={durable_through} were lost; nothing was \
         changed",
        path.display(),
        journal_last + 1
    )]
    LostRecords {
        path: PathBuf,
        journal_last: u64,
        durable_through: u64,
    },
    /// The last segment is sealed, so the writer had created the next one, which is missing.
    #[error(
        "{}: the segment is sealed at seq {sealed_at}, so the writer had created \
         segment-{:020}.log after it, but that file is missing (commands in it may have been \
         acknowledged): restore it from a copy; nothing was changed",
        path.display(),
        sealed_at + 1
    )]
    MissingSegment { path: PathBuf, sealed_at: u64 },
    /// A closed segment without its seal, followed by a segment that holds records.
    #[error(
        "{}: the segment ends at seq {last} without the seal a closed segment gets, and the \
         segment after it holds records: records at its end may have been cut off; nothing was \
         changed",
        path.display()
    )]
    NotSealed { path: PathBuf, last: u64 },
    #[error("{}: line {line} is not `seq <from>..=<to> lost, ...`: {text:?}", path.display())]
    BadLossRecord {
        path: PathBuf,
        line: usize,
        text: String,
    },
    /// The writer was opened to continue at a seq that does not follow the journal's last.
    #[error("{}: journal ends at seq {last}, cannot continue at seq {next}", path.display())]
    SeqMismatch { path: PathBuf, last: u64, next: u64 },
    #[error("{}: bad snapshot: {problem}", path.display())]
    BadSnapshot { path: PathBuf, problem: String },
}

impl JournalError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> JournalError {
        JournalError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = JournalError> = std::result::Result<T, E>;
