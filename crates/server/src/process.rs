//! What the server does to its own process before it serves (docs/security.md): files it
//! creates are its owner's only, and it may hold as many sockets as the system lets it.

use std::path::Path;

/// Files and directories the process creates from now on are readable by its owner only
/// (files 0600, directories 0700): journal segments, snapshots, FIX stores and logs carry
/// orders and balances that are nobody else's business.
pub fn owner_only_files() {
    // SAFETY: umask only sets the process's file mode mask; it cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Takes group and other permissions away from everything under `dir` (a data directory
/// written by an older version, or copied in). Returns how many entries it changed.
#[cfg(unix)]
pub fn tighten_permissions(dir: &Path) -> std::io::Result<usize> {
    use std::os::unix::fs::PermissionsExt;
    let mut changed = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        // symlink_metadata: a link is not followed out of the data directory.
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & !0o077))?;
            changed += 1;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(changed)
}

#[cfg(not(unix))]
pub fn tighten_permissions(_dir: &Path) -> std::io::Result<usize> {
    Ok(0)
}

/// Raises the soft limit on open files to the hard limit (the usual soft limit of 1,024 is
/// what a flood of half-open connections exhausts first). Returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct we pass, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every platform
    let current = limit.rlim_cur as u64;
    current
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn tightening_removes_group_and_other_bits_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("snapshots");
        std::fs::create_dir(&sub).unwrap();
        let file = sub.join("s.snap");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(tighten_permissions(dir.path()).unwrap() >= 2);
        for path in [&file, &sub] {
            let mode = std::fs::metadata(path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{}", path.display());
        }
        assert!(raise_open_file_limit() > 0);
    }
}

/// Puts the calling thread in Linux's `SCHED_IDLE` class: it runs only on CPU time no
/// normal thread wants (its weight is about 1/300 of a nice-0 thread's), for background work
/// that may lag a burst and catch up after it. Returns whether it took.
pub fn make_this_thread_idle_priority() -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler reads `param` for the duration of the call; with pid 0
        // it applies to the calling thread on Linux. SCHED_IDLE needs no privilege.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Lowers the calling thread's scheduling priority to `nice` (Linux keeps a nice value per
/// thread): for background work, such as the history writer, that must not take CPU time
/// from the threads that acknowledge orders when both want it. Returns whether it took.
pub fn lower_this_thread_priority(nice: i32) -> bool {
    // SAFETY: setpriority reads its three integer arguments; with PRIO_PROCESS and 0 it
    // applies to the calling thread on Linux.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, nice) == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        false
    }
}
