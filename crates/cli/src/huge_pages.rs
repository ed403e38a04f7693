//! The `rialto` binary's allocator: mimalloc, asking the kernel to back large blocks with
//! transparent huge pages.
//!
//! mimalloc rather than glibc's `malloc`: a big venue has many small blocks read at random (each
//! book side's sorted level array, its ladder), and with mimalloc more of them sit on huge pages
//! (on `multi large`, 1.67 GB of huge pages against 1.53 GB), most likely because it carves them
//! out of large regions instead of glibc's heap. That gave `multi large` a lower median latency
//! per command and more commands a second in most runs (docs/benchmarks-history.md). Steady-state
//! trading allocates nothing, so `single` does not notice.
//!
//! A big venue's state (order arena, id indexes, accounts: a gigabyte on the `multi large`
//! workload) is read at random, and with 4 KiB pages nearly every access also misses the TLB
//! and walks the page tables. With 2 MiB pages the TLB covers gigabytes. Many kernels, this
//! machine's among them, give huge pages only to memory that asks (`madvise` mode), so blocks of
//! [`HUGE_BLOCK_BYTES`] or more are advised with `MADV_HUGEPAGE`. Small blocks are left alone
//! (a huge page would hold mostly unused memory). `RIALTO_HUGE_PAGES=0` turns the advice off.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};

use mimalloc::MiMalloc;

/// Blocks from this size on are advised.
pub const HUGE_BLOCK_BYTES: usize = 4 << 20;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the advice on or off for blocks allocated from now on.
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

/// Whether large blocks are advised.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

pub struct HugePageAlloc;

/// Advises the whole pages inside `[block, block + size)`; a failure only means small pages.
fn advise(block: *mut u8, size: usize) {
    if block.is_null() || size < HUGE_BLOCK_BYTES || !enabled() {
        return;
    }
    const PAGE: usize = 4096;
    let start = (block as usize).next_multiple_of(PAGE);
    let end = (block as usize + size) & !(PAGE - 1);
    if end > start {
        // SAFETY: the range lies inside a block this allocator just handed out; MADV_HUGEPAGE
        // changes how it is backed, never its contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

// SAFETY: every call is forwarded to `MiMalloc` unchanged; `advise` only adds a hint.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let block = unsafe { MiMalloc.alloc(layout) };
        advise(block, layout.size());
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let block = unsafe { MiMalloc.alloc_zeroed(layout) };
        advise(block, layout.size());
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        unsafe { MiMalloc.dealloc(block, layout) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let block = unsafe { MiMalloc.realloc(block, layout, new_size) };
        advise(block, new_size);
        block
    }
}

/// Hands freed memory back to the kernel now rather than after mimalloc's delay (for the
/// benchmarks' measures of resident memory: see `rialto_bench::mem::set_heap_trim`).
pub fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointer and only releases memory no block is using.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
