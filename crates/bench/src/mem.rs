//! Resident memory of this process, from /proc/self (Linux).

use std::fs;
use std::sync::OnceLock;

/// A `kB` field of /proc/self/status (`VmRSS`, `VmHWM`, ...) in bytes; `None` off Linux.
pub fn status_bytes(field: &str) -> Option<u64> {
    kb_field("/proc/self/status", field)
}

/// Resident memory backed by transparent huge pages (`AnonHugePages` of
/// /proc/self/smaps_rollup, Linux 4.14+).
pub fn anon_huge_bytes() -> Option<u64> {
    kb_field("/proc/self/smaps_rollup", "AnonHugePages")
}

/// The `field: N kB` line of a /proc file, in bytes.
fn kb_field(path: &str, field: &str) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let kb: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kb * 1024)
    })
}

/// Current resident set size.
pub fn rss_bytes() -> Option<u64> {
    status_bytes("VmRSS")
}

/// Peak resident set size since start or since the last [`reset_peak_rss`].
pub fn peak_rss_bytes() -> Option<u64> {
    status_bytes("VmHWM")
}

/// Resets the peak to the current RSS (`echo 5 > /proc/self/clear_refs`, Linux 4.0+), so that
/// the generation phase does not count in the measured peak. `false` when not possible.
pub fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A binary's own way to hand freed heap pages back to the kernel, for an allocator other than
/// glibc's (see [`set_heap_trim`]).
static HEAP_TRIM: OnceLock<fn()> = OnceLock::new();

/// Tells [`trim_heap`] how this binary's global allocator releases freed memory (the `rialto`
/// binary's is mimalloc's, not glibc's `malloc`). Only the first call counts.
pub fn set_heap_trim(trim: fn()) {
    let _ = HEAP_TRIM.set(trim);
}

/// Hands freed heap pages back to the kernel (the hook of [`set_heap_trim`], else glibc's
/// `malloc_trim(0)`), so that RSS deltas measure live memory: without it the engine under test
/// reuses pages the generator freed and its growth looks smaller than it is. `false` when
/// neither is there.
pub fn trim_heap() -> bool {
    if let Some(trim) = HEAP_TRIM.get() {
        trim();
        return true;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim takes no pointer, is thread-safe, and only releases free memory.
        unsafe { malloc_trim(0) };
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_on_linux() {
        if cfg!(target_os = "linux") {
            let rss = rss_bytes().expect("VmRSS");
            let peak = peak_rss_bytes().expect("VmHWM");
            assert!(rss > 0 && peak >= rss);
        }
    }
}
