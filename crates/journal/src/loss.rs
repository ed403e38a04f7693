//! Accepted losses: `<data>/journal/accepted-losses`, one line per range of seqs that the
//! journal lost and that an operator (or `Durability::None`) accepted (docs/journal-format.md,
//! "Accepted losses"). The reader passes over exactly these ranges; any other hole is
//! corruption. The file is only ever appended to, and never by anything but recovery.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{JournalError, Result};
use crate::format::{create_dir_durable, fsync_dir, journal_dir};

pub const ACCEPTED_LOSSES_FILE: &str = "accepted-losses";

/// Seqs `from..=to` are missing from the journal, and that was accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedLoss {
    pub from: u64,
    pub to: u64,
    /// The rest of the line after the range: when, under which durability mode, why.
    pub note: String,
}

pub fn accepted_losses_path(data_dir: &Path) -> PathBuf {
    journal_dir(data_dir).join(ACCEPTED_LOSSES_FILE)
}

/// The accepted losses of `data_dir`, in file order (none if the file does not exist). A line
/// that is not `seq <from>..=<to> lost<anything>` with `1 <= from <= to` is an error.
pub fn read_accepted_losses(data_dir: &Path) -> Result<Vec<AcceptedLoss>> {
    let path = accepted_losses_path(data_dir);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(JournalError::io(&path, e)),
    };
    let mut losses = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let loss = parse_line(line).ok_or_else(|| JournalError::BadLossRecord {
            path: path.clone(),
            line: i + 1,
            text: line.chars().take(200).collect(),
        })?;
        losses.push(loss);
    }
    Ok(losses)
}

fn parse_line(line: &str) -> Option<AcceptedLoss> {
    let rest = line.strip_prefix("seq ")?;
    let (range, note) = rest.split_once(" lost")?;
    let (from, to) = range.split_once("..=")?;
    let (from, to) = (from.parse::<u64>().ok()?, to.parse::<u64>().ok()?);
    if from == 0 || from > to {
        return None;
    }
    let note = note.trim_start_matches(',').trim().to_owned();
    Some(AcceptedLoss { from, to, note })
}

/// Appends `seq <from>..=<to> lost, accepted at unix_ms <now>, durability <mode>, <why>` and
/// fsyncs the file (and the directory, so that the file's name is durable too).
pub fn record_accepted_loss(
    data_dir: &Path,
    from: u64,
    to: u64,
    durability: &str,
    why: &str,
) -> Result<AcceptedLoss> {
    assert!(
        1 <= from && from <= to,
        "a loss is a non-empty range of seqs"
    );
    let dir = journal_dir(data_dir);
    create_dir_durable(&dir).map_err(|e| JournalError::io(&dir, e))?;
    let path = accepted_losses_path(data_dir);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let note = format!("accepted at unix_ms {now_ms}, durability {durability}, {why}");
    let line = format!("seq {from}..={to} lost, {note}\n");
    let write = || -> io::Result<()> {
        let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
        file.write_all(line.as_bytes())?;
        file.sync_all()?;
        fsync_dir(&dir)
    };
    write().map_err(|e| JournalError::io(&path, e))?;
    Ok(AcceptedLoss { from, to, note })
}

/// Whether `from..=to` is exactly one accepted loss.
pub fn is_accepted(losses: &[AcceptedLoss], from: u64, to: u64) -> bool {
    losses.iter().any(|l| l.from == from && l.to == to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_bad_lines_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_accepted_losses(dir.path()).unwrap().is_empty());
        record_accepted_loss(dir.path(), 5, 9, "batch", "by --accept-journal-loss").unwrap();
        record_accepted_loss(dir.path(), 20, 20, "none", "as durability none allows").unwrap();
        let losses = read_accepted_losses(dir.path()).unwrap();
        assert_eq!((losses[0].from, losses[0].to), (5, 9));
        assert!(
            losses[0].note.contains("durability batch"),
            "{:?}",
            losses[0]
        );
        assert_eq!((losses[1].from, losses[1].to), (20, 20));
        assert!(is_accepted(&losses, 5, 9) && !is_accepted(&losses, 5, 8));
        for bad in [
            "seq 9..=5 lost",
            "seq 0..=1 lost",
            "seq x..=1 lost",
            "garbage",
        ] {
            fs::write(accepted_losses_path(dir.path()), format!("{bad}\n")).unwrap();
            let e = read_accepted_losses(dir.path()).unwrap_err().to_string();
            assert!(e.contains("line 1"), "{e}");
        }
    }
}
