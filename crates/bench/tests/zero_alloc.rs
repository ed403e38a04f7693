//! Steady-state trading must not touch the heap: after warm-up, the engine applies at least
//! 100,000 commands of the `single` workload without one allocation, in the generator mix and
//! in the rulebook mix (stops, icebergs, DAY orders).
//!
//! The counting allocator counts per thread, and only on a thread that opened a window, so
//! the test harness' own threads and the other test cannot disturb the count. To find an allocation, run with
//! `RIALTO_ALLOC_BACKTRACE=1 cargo test -p rialto-bench --test zero_alloc -- --nocapture`: the
//! first counted allocation prints its backtrace.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use rialto_bench::harness::{CountingSink, prepare};
use rialto_bench::workload::{Mix, SingleParams, single};

struct CountingAlloc;

static BACKTRACE_PRINTED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // `const` thread locals need no allocation to initialise.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static ALLOCATED_BYTES: Cell<u64> = const { Cell::new(0) };
    static PRINT_BACKTRACE: Cell<bool> = const { Cell::new(false) };
}

impl CountingAlloc {
    fn count(&self, size: usize) {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            ALLOCATED_BYTES.with(|n| n.set(n.get() + size as u64));
            if PRINT_BACKTRACE.with(Cell::get) && !BACKTRACE_PRINTED.swap(true, Ordering::Relaxed) {
                // Capturing allocates: stop counting while it runs.
                COUNTING.with(|c| c.set(false));
                let bt = std::backtrace::Backtrace::force_capture();
                eprintln!("first steady-state allocation ({size} bytes):\n{bt}");
                COUNTING.with(|c| c.set(true));
            }
        }
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counting around it
// touches only an atomic and const thread-local cells, which do not allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count(new_size);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

const WARM_UP: usize = 200_000;
const MEASURED: usize = 150_000;

#[test]
fn steady_state_trading_does_not_allocate() {
    assert_steady_state_allocates_nothing(Mix::Generator);
}

/// The rulebook mix: stops pending and triggering in cascades, icebergs refilling, DAY orders
/// expiring at the day ends that pass during the window (every 100,000 commands).
#[test]
fn steady_state_trading_with_the_rulebook_does_not_allocate() {
    assert_steady_state_allocates_nothing(Mix::Rulebook);
}

fn assert_steady_state_allocates_nothing(mix: Mix) {
    let params = SingleParams {
        commands: (WARM_UP + MEASURED) as u64,
        mix,
        ..SingleParams::default()
    };
    let w = single(&params, 42);
    assert_eq!(w.stats.rejected, 0, "the workload fits the engine");
    let mut p = prepare(&w).expect("setup and prefill apply");
    let mut sink = CountingSink::default();
    let mut seq = p.seq;
    let ts = |seq: u64| seq as i64 * mix.ts_step();
    let (warm_up, measured) = w.commands.split_at(WARM_UP);
    for cmd in warm_up {
        seq += 1;
        let _ = p.engine.apply(seq, ts(seq), cmd, &mut sink);
    }
    let events_before = sink.events;

    PRINT_BACKTRACE.with(|c| c.set(std::env::var_os("RIALTO_ALLOC_BACKTRACE").is_some()));
    COUNTING.with(|c| c.set(true));
    let mut rejected = 0u64;
    for cmd in measured {
        seq += 1;
        rejected += p.engine.apply(seq, ts(seq), cmd, &mut sink).is_err() as u64;
    }
    COUNTING.with(|c| c.set(false));

    let allocations = ALLOCATIONS.with(Cell::get);
    let bytes = ALLOCATED_BYTES.with(Cell::get);
    // The window really traded: it is not an empty loop that trivially allocates nothing.
    assert_eq!(measured.len(), MEASURED);
    assert_eq!(rejected, 0);
    assert!(
        sink.events - events_before > (MEASURED / 100) as u64,
        "the measured commands produced events"
    );
    assert_eq!(
        allocations, 0,
        "{mix:?}: {allocations} allocations ({bytes} bytes) over {MEASURED} steady-state \
         commands; rerun with RIALTO_ALLOC_BACKTRACE=1 and --nocapture to see where"
    );
}

#[test]
fn the_counter_sees_allocations() {
    // A counter that never counts would pass the test above: check that it does count.
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    let v: Vec<u64> = std::hint::black_box(Vec::with_capacity(16));
    COUNTING.with(|c| c.set(false));
    drop(v);
    assert!(ALLOCATIONS.with(Cell::get) > before);
}
