//! Parsing a NewOrderSingle, validating it against the data dictionary and writing an
//! ExecutionReport allocate nothing (into a buffer that already has room): counted with a
//! global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rialto_fix::app::NewOrderSingle;
use rialto_fix::{ApplVersion, dict, samples};

struct Counting;

thread_local! {
    // Per thread: the test harness's own threads allocate while the test runs.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwards the caller's layout to the system allocator unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn parse_and_generate_allocate_nothing() {
    let report = samples::fill_report();
    let mut out = Vec::with_capacity(4096);
    let before = allocations();
    let mut qty_total = 0i64;
    for seq in 0..100_000u64 {
        let (frame, len) = rialto_fix::next_frame(samples::NEW_ORDER_SINGLE, 4096)
            .unwrap()
            .unwrap();
        assert_eq!(len, 214);
        assert_eq!(dict::validate(ApplVersion::Fix44, &frame), Ok(()));
        let nos = NewOrderSingle::decode(&frame).unwrap();
        qty_total += nos.order_qty.mantissa;
        let nos = NewOrderSingle::decode_validated(ApplVersion::Fix44, &frame).unwrap();
        qty_total += nos.order_qty.mantissa;
        out.clear();
        samples::write_execution_report(&mut out, &report, seq, 1_795_322_669_123_000_000);
    }
    let after = allocations();
    assert_eq!(qty_total, 2 * 5 * 100_000);
    assert!(rialto_fix::next_frame(&out, 4096).unwrap().is_some());
    assert_eq!(
        after - before,
        0,
        "allocations while parsing, validating and generating"
    );
}
