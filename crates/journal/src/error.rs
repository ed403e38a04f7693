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
    /// The journal ends before the newest snapshot and the loss has not been accepted
    /// (docs/journal-format.md, "Accepted losses").
    #[error(
        "the journal ends at seq {journal_last}, but the newest snapshot is at seq {snapshot_seq}: \
         seqs {}..={snapshot_seq} are missing from the journal (acknowledged commands were lost, \
         and any acknowledged after seq {snapshot_seq} too); nothing was changed",
        journal_last + 1
    )]
    LostSuffix {
        journal_last: u64,
        snapshot_seq: u64,
    },
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
