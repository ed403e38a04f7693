//! The data directory's lock, `<data>/LOCK`: a server holds it exclusively while it runs, so
//! that two servers never write one journal, and tools that read the journal (`rialto journal
//! verify`) can tell that its tail is live. The lock is the kernel's (`flock`): it goes with
//! the process, however that ends, and the file itself means nothing.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;

const LOCK_FILE: &str = "LOCK";

/// Held while it lives.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

fn open(data_dir: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(data_dir.join(LOCK_FILE))
}

/// `flock(fd, how | LOCK_NB)`: Ok(false) when another process holds a conflicting lock.
fn try_flock(file: &File, how: libc::c_int) -> io::Result<bool> {
    // SAFETY: flock only reads the descriptor, which `file` keeps open.
    if unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

impl DataDirLock {
    /// Takes the lock, or fails with `WouldBlock` and a message if a server holds it.
    pub fn acquire(data_dir: &Path) -> io::Result<DataDirLock> {
        let file = open(data_dir)?;
        if !try_flock(&file, libc::LOCK_EX)? {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "another server is running on {} (it holds {}/{LOCK_FILE})",
                    data_dir.display(),
                    data_dir.display()
                ),
            ));
        }
        Ok(DataDirLock { _file: file })
    }
}

/// Whether a server holds the lock of `data_dir` now.
pub fn held_by_a_server(data_dir: &Path) -> io::Result<bool> {
    if !data_dir.join(LOCK_FILE).exists() {
        return Ok(false);
    }
    let file = open(data_dir)?;
    // A shared lock is free unless a server holds the exclusive one; it is let go with `file`.
    Ok(!try_flock(&file, libc::LOCK_SH)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_tools_see_it() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!held_by_a_server(dir.path()).unwrap());
        let lock = DataDirLock::acquire(dir.path()).unwrap();
        assert!(held_by_a_server(dir.path()).unwrap());
        let second = DataDirLock::acquire(dir.path()).unwrap_err();
        assert_eq!(second.kind(), io::ErrorKind::WouldBlock);
        assert!(second.to_string().contains("another server"), "{second}");
        drop(lock);
        assert!(!held_by_a_server(dir.path()).unwrap());
        DataDirLock::acquire(dir.path()).unwrap();
    }
}
