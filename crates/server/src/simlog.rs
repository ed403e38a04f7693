//! The simulator's command log (`CommandLog::Simulated`, docs/simulation.md): one journal
//! segment held in memory, written in the journal's own encoding (segment header, then records
//! with their CRCs, crates/journal/src/format.rs), so that the simulator recovers from it with
//! the real recovery code. The simulator decides what each commit does: succeed, or fail in one
//! of the ways a disk fails ([`CommitFault`]), leaving on the disk as much of the batch as it
//! says.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use rialto_core::Command;

/// How a commit fails. `persisted_permille` of the batch's bytes reach the disk (cut anywhere,
/// so possibly inside a record: a torn write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitFault {
    /// The write went through but `fdatasync` failed (EIO): nobody knows what is on disk.
    FsyncFailed { persisted_permille: u16 },
    /// The write ran out of space (ENOSPC) part way.
    NoSpace { persisted_permille: u16 },
    /// The machine lost power during the write: the process is gone too.
    PowerLoss { persisted_permille: u16 },
}

impl CommitFault {
    fn persisted_permille(self) -> u16 {
        match self {
            CommitFault::FsyncFailed { persisted_permille }
            | CommitFault::NoSpace { persisted_permille }
            | CommitFault::PowerLoss { persisted_permille } => persisted_permille.min(1000),
        }
    }

    fn error(self) -> io::Error {
        match self {
            CommitFault::FsyncFailed { .. } => {
                io::Error::other("fdatasync failed: input/output error (simulated)")
            }
            CommitFault::NoSpace { .. } => io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device (simulated)",
            ),
            CommitFault::PowerLoss { .. } => io::Error::other("power lost (simulated)"),
        }
    }
}

/// The simulated disk: the bytes of one journal segment that are durable.
#[derive(Debug)]
pub struct SimDisk {
    /// The segment file: header, then every committed record (and what a failed commit left).
    pub bytes: Vec<u8>,
    /// What the next commit of a non-empty batch does (`None`: it succeeds). The commit takes it.
    pub next_fault: Option<CommitFault>,
    /// The fault a commit failed with. Like the real journal writer after a failed fsync, the
    /// log is then poisoned: every later commit fails, until the simulator restarts the node.
    pub failed: Option<CommitFault>,
}

impl SimDisk {
    /// An empty segment whose first record will be seq 1.
    pub fn new() -> SimDisk {
        SimDisk {
            bytes: rialto_journal::format::encode_segment_header(1).to_vec(),
            next_fault: None,
            failed: None,
        }
    }
}

impl Default for SimDisk {
    fn default() -> Self {
        SimDisk::new()
    }
}

/// The pipeline's side: the batch being built, and the disk it commits to.
pub struct SimulatedLog {
    disk: Arc<Mutex<SimDisk>>,
    batch: Vec<u8>,
}

impl SimulatedLog {
    pub fn new(disk: Arc<Mutex<SimDisk>>) -> SimulatedLog {
        SimulatedLog {
            disk,
            batch: Vec::with_capacity(64 * 1024),
        }
    }

    fn disk(&self) -> MutexGuard<'_, SimDisk> {
        self.disk.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn append(&mut self, seq: u64, ts_ns: i64, cmd: &Command) {
        rialto_journal::format::encode_record(&mut self.batch, seq, ts_ns, cmd);
    }

    pub fn uncommitted(&self) -> &[u8] {
        &self.batch
    }

    /// Writes the batch to the disk, or fails as the simulator arranged.
    pub fn commit(&mut self) -> io::Result<()> {
        let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(fault) = disk.failed {
            self.batch.clear();
            return Err(io::Error::other(format!(
                "the log failed before ({})",
                fault.error()
            )));
        }
        if self.batch.is_empty() {
            return Ok(());
        }
        let result = match disk.next_fault.take() {
            None => {
                disk.bytes.extend_from_slice(&self.batch);
                Ok(())
            }
            Some(fault) => {
                let kept = self.batch.len() * usize::from(fault.persisted_permille()) / 1000;
                disk.bytes.extend_from_slice(&self.batch[..kept]);
                disk.failed = Some(fault);
                Err(fault.error())
            }
        };
        self.batch.clear();
        result
    }

    /// A quiet sequencer's check: an error once a commit failed.
    pub fn check(&mut self) -> io::Result<()> {
        match self.disk().failed {
            Some(fault) => Err(fault.error()),
            None => Ok(()),
        }
    }
}
