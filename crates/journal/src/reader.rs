//! Reading the journal: every record of every segment in seq order, checking segment headers,
//! CRCs and seq continuity, and telling a torn tail from corruption (docs/journal-format.md).

use std::fs;
use std::path::{Path, PathBuf};

use rialto_core::Command;

use crate::error::{JournalError, Result};
use crate::format::{
    Checkpoint, RecordProblem, SegmentEnd, archive_dir, journal_dir, judge_bad_record,
    list_segments, parse_record, parse_segment_header, read_checkpoint,
};
use crate::loss::{AcceptedLoss, is_accepted, read_accepted_losses};

/// One journaled command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub ts_ns: i64,
    pub command: Command,
}

/// A torn write at the end of the last segment: the file's good bytes end at `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailTruncation {
    pub path: PathBuf,
    /// Where the last good record ends (the file's length after truncation).
    pub offset: u64,
    /// Bytes after `offset` that are not a whole good record.
    pub discarded_bytes: u64,
    pub problem: String,
}

/// The last segment ends before its checkpoint: records up to `durable_through` were on disk,
/// and the journal now ends at `journal_last`. Recovery refuses it unless the loss is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShortOfCheckpoint {
    pub path: PathBuf,
    pub journal_last: u64,
    pub durable_through: u64,
}

/// Iterates over the records of `<data>/journal` (and, if asked, `<data>/journal/archive`
/// first) in seq order. Yields `Err` once and then ends when it finds corruption. A torn tail
/// in the last segment ends the iteration normally and is reported by [`Self::torn_tail`];
/// the reader never changes a file.
///
/// A hole between two segments is corruption unless it is exactly an accepted loss
/// (`journal/accepted-losses`): then the reader passes over it (see [`Self::gaps_passed`]),
/// and the segment before it may end in a torn tail, as the last segment may.
///
/// Each segment is checked against its checkpoint and seal (docs/journal-format.md,
/// "Checkpoints and seals"): a segment that ends before its checkpoint is an error, except the
/// last one, which is reported by [`Self::short_of_checkpoint`] for recovery to judge together
/// with the newest snapshot.
pub struct JournalReader {
    segments: Vec<(u64, PathBuf)>,
    next_segment: usize,
    current: Option<Segment>,
    expected_seq: Option<u64>,
    torn_tail: Option<TailTruncation>,
    finished: bool,
    records: u64,
    losses: Vec<AcceptedLoss>,
    gaps_passed: Vec<AcceptedLoss>,
    torn_before_gaps: Vec<TailTruncation>,
    short_of_checkpoint: Option<ShortOfCheckpoint>,
    /// A closed segment that was never sealed: allowed only when a crash interrupted the roll,
    /// i.e. the segment after it is the last and holds no records.
    unsealed_before: Option<(PathBuf, u64)>,
}

struct Segment {
    path: PathBuf,
    bytes: Vec<u8>,
    pos: usize,
    first_seq: u64,
    is_last: bool,
    /// Followed by an accepted loss.
    before_a_loss: bool,
    /// `None` for a version 1 segment, or one whose checkpoint was never written.
    checkpoint: Option<Checkpoint>,
    /// Version 2: closed segments are sealed.
    has_checkpoints: bool,
}

impl Segment {
    /// The last segment, or one followed by an accepted loss: its end may be torn.
    fn may_end_torn(&self) -> bool {
        self.is_last || self.before_a_loss
    }
}

impl JournalReader {
    /// Opens the journal under `data_dir`. With `include_archive`, archived segments come
    /// first (they hold the oldest records).
    pub fn open(data_dir: &Path, include_archive: bool) -> Result<JournalReader> {
        let mut segments = Vec::new();
        if include_archive {
            let dir = archive_dir(data_dir);
            segments = list_segments(&dir).map_err(|e| JournalError::io(dir, e))?;
        }
        let dir = journal_dir(data_dir);
        let live = list_segments(&dir).map_err(|e| JournalError::io(dir, e))?;
        segments.extend(live);
        // Archive and live names cannot collide unless someone copied files by hand; the
        // header and seq checks then report it.
        segments.sort();
        let losses = read_accepted_losses(data_dir)?;
        Ok(JournalReader {
            segments,
            next_segment: 0,
            current: None,
            expected_seq: None,
            torn_tail: None,
            finished: false,
            records: 0,
            losses,
            gaps_passed: Vec::new(),
            torn_before_gaps: Vec::new(),
            short_of_checkpoint: None,
            unsealed_before: None,
        })
    }

    /// The last segment ends before its checkpoint (and no accepted loss covers that), once
    /// iteration has reached its end.
    pub fn short_of_checkpoint(&self) -> Option<&ShortOfCheckpoint> {
        self.short_of_checkpoint.as_ref()
    }

    /// The segment files, in the order they are read.
    pub fn segments(&self) -> impl Iterator<Item = &Path> {
        self.segments.iter().map(|(_, p)| p.as_path())
    }

    /// The torn tail found at the end of the last segment, once iteration has reached it.
    pub fn torn_tail(&self) -> Option<&TailTruncation> {
        self.torn_tail.as_ref()
    }

    /// The accepted losses of `journal/accepted-losses`, whether or not the reader met them.
    pub fn accepted_losses(&self) -> &[AcceptedLoss] {
        &self.losses
    }

    /// The accepted losses passed over so far, in seq order.
    pub fn gaps_passed(&self) -> &[AcceptedLoss] {
        &self.gaps_passed
    }

    /// Torn tails of segments that an accepted loss follows: left in place (they are the
    /// evidence of the loss), read up to their last good record.
    pub fn torn_before_gaps(&self) -> &[TailTruncation] {
        &self.torn_before_gaps
    }

    /// Records yielded so far.
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// The seq the next record must have (`None` before the first record).
    pub fn expected_seq(&self) -> Option<u64> {
        self.expected_seq
    }

    fn open_next_segment(&mut self) -> Result<Option<()>> {
        let Some((name_seq, path)) = self.segments.get(self.next_segment).cloned() else {
            return Ok(None);
        };
        self.next_segment += 1;
        let is_last = self.next_segment == self.segments.len();
        let before_a_loss = self
            .segments
            .get(self.next_segment)
            .is_some_and(|(next, _)| {
                self.losses
                    .iter()
                    .any(|l| l.to.checked_add(1) == Some(*next) && l.from >= name_seq)
            });
        let bytes = fs::read(&path).map_err(|e| JournalError::io(&path, e))?;
        let bad_header = |problem: String| JournalError::BadSegmentHeader {
            path: path.clone(),
            problem,
        };
        let header = parse_segment_header(&bytes).map_err(&bad_header)?;
        let checkpoint = read_checkpoint(&bytes, &header).map_err(&bad_header)?;
        let first_seq = header.first_seq;
        if first_seq != name_seq {
            return Err(bad_header(format!(
                "header says first seq {first_seq}, the file name says {name_seq}"
            )));
        }
        if let Some(expected) = self.expected_seq
            && first_seq != expected
        {
            if first_seq > expected && is_accepted(&self.losses, expected, first_seq - 1) {
                let loss = self
                    .losses
                    .iter()
                    .find(|l| l.from == expected && l.to == first_seq - 1);
                self.gaps_passed.extend(loss.cloned());
            } else {
                return Err(JournalError::SeqGap {
                    path,
                    offset: 0,
                    expected,
                    found: first_seq,
                });
            }
        }
        if let Some((unsealed, _)) = &self.unsealed_before
            && !is_last
        {
            return Err(self.not_sealed(unsealed.clone()));
        }
        self.expected_seq = Some(first_seq);
        self.current = Some(Segment {
            path,
            bytes,
            pos: header.records_at,
            first_seq,
            is_last,
            before_a_loss,
            checkpoint,
            has_checkpoints: header.has_checkpoints(),
        });
        Ok(Some(()))
    }

    fn not_sealed(&mut self, path: PathBuf) -> JournalError {
        let last = self.unsealed_before.take().map_or(0, |(_, last)| last);
        JournalError::NotSealed { path, last }
    }

    /// Checks a segment whose records have all been read against its checkpoint and seal.
    fn finish_segment(&mut self, seg: Segment) -> Result<()> {
        let last = self.expected_seq.unwrap_or(seg.first_seq) - 1;
        let covered_by_a_loss =
            |to: u64| self.losses.iter().any(|l| l.from == last + 1 && l.to >= to);
        if let Some(c) = seg.checkpoint {
            if last < c.durable_through && !covered_by_a_loss(c.durable_through) {
                if !seg.is_last {
                    return Err(JournalError::LostRecords {
                        path: seg.path,
                        journal_last: last,
                        durable_through: c.durable_through,
                    });
                }
                self.short_of_checkpoint = Some(ShortOfCheckpoint {
                    path: seg.path,
                    journal_last: last,
                    durable_through: c.durable_through,
                });
                return Ok(());
            }
            if c.sealed && last > c.durable_through {
                return Err(JournalError::Corrupt {
                    path: seg.path,
                    offset: seg.pos as u64,
                    problem: format!(
                        "records after the seal (sealed at seq {}, records up to seq {last})",
                        c.durable_through
                    ),
                });
            }
            if c.sealed && seg.is_last {
                return Err(JournalError::MissingSegment {
                    path: seg.path,
                    sealed_at: c.durable_through,
                });
            }
        }
        let sealed = seg.checkpoint.is_some_and(|c| c.sealed);
        if seg.has_checkpoints && !sealed && !seg.is_last && !seg.before_a_loss {
            self.unsealed_before = Some((seg.path, last));
        }
        Ok(())
    }

    fn next_record(&mut self) -> Result<Option<Record>> {
        loop {
            if self.current.is_none() && self.open_next_segment()?.is_none() {
                return Ok(None);
            }
            let expected = self.expected_seq.unwrap_or(1);
            let seg = self.current.as_mut().expect("a segment is open");
            if seg.pos == seg.bytes.len() {
                let seg = self.current.take().expect("a segment is open");
                self.finish_segment(seg)?;
                continue;
            }
            match parse_record(&seg.bytes, seg.pos) {
                Ok(r) if r.seq == expected => {
                    if let Some((unsealed, _)) = self.unsealed_before.clone() {
                        return Err(self.not_sealed(unsealed));
                    }
                    let seg = self.current.as_mut().expect("a segment is open");
                    seg.pos += r.size;
                    self.expected_seq = Some(expected + 1);
                    self.records += 1;
                    return Ok(Some(Record {
                        seq: r.seq,
                        ts_ns: r.ts_ns,
                        command: r.command,
                    }));
                }
                Ok(r) => {
                    return Err(JournalError::SeqGap {
                        path: seg.path.clone(),
                        offset: seg.pos as u64,
                        expected,
                        found: r.seq,
                    });
                }
                Err(RecordProblem::BadCommand(problem)) => {
                    return Err(JournalError::Corrupt {
                        path: seg.path.clone(),
                        offset: seg.pos as u64,
                        problem,
                    });
                }
                Err(RecordProblem::Damaged(problem)) => self.bad_record(expected, problem)?,
            }
        }
    }

    /// Ends the current segment at a damaged record if that is a torn tail, else fails.
    fn bad_record(&mut self, expected: u64, problem: String) -> Result<()> {
        let seg = self.current.take().expect("a segment is open");
        if !seg.may_end_torn() {
            return Err(JournalError::Corrupt {
                path: seg.path,
                offset: seg.pos as u64,
                problem: format!("{problem} (in a segment that is not the last)"),
            });
        }
        match judge_bad_record(&seg.bytes, seg.pos, expected, problem) {
            SegmentEnd::Torn { offset, problem } => {
                // Reported by whoever reads (`torn_tail`): recovery warns as it truncates,
                // `verify` prints it, and a reader beside a running server expects it.
                tracing::debug!(
                    path = %seg.path.display(),
                    offset,
                    "torn write at the end of the journal: {problem}"
                );
                let torn = TailTruncation {
                    discarded_bytes: seg.bytes.len() as u64 - offset,
                    path: seg.path.clone(),
                    offset,
                    problem,
                };
                match seg.is_last {
                    true => self.torn_tail = Some(torn),
                    false => self.torn_before_gaps.push(torn),
                }
                self.finish_segment(seg)
            }
            SegmentEnd::Corrupt { offset, problem } => Err(JournalError::Corrupt {
                path: seg.path,
                offset,
                problem,
            }),
            SegmentEnd::Clean => self.finish_segment(seg),
        }
    }
}

impl Iterator for JournalReader {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}
