//! A cache prefetch hint behind a safe function.
//!
//! The engine forbids `unsafe` code, and Rust's prefetch intrinsic is an `unsafe fn` (it carries
//! a `#[target_feature]`). A prefetch reads nothing the program can observe, cannot fault, and
//! is sound whatever the address; this crate is the one place that says so.
#![no_std]

/// Asks the CPU to start bringing the cache lines of `value` towards the L1 cache, without
/// waiting for them. Nothing observable changes: it is a hint, and a no-op on CPUs without one.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    let start = value as *const T as *const u8;
    let size = core::mem::size_of::<T>();
    if size <= core::mem::align_of::<T>() && size <= LINE {
        // An aligned value no larger than its alignment never crosses a line.
        prefetch_line(start);
        return;
    }
    prefetch_bytes(start, size);
}

/// [`prefetch`] of `slice[index]`, if there is one.
#[inline(always)]
pub fn prefetch_index<T>(slice: &[T], index: usize) {
    if let Some(value) = slice.get(index) {
        prefetch(value);
    }
}

/// [`prefetch`] of every item of `slice`.
#[inline]
pub fn prefetch_all<T>(slice: &[T]) {
    prefetch_bytes(slice.as_ptr() as *const u8, core::mem::size_of_val(slice));
}

/// [`prefetch`] of the one cache line holding the start of `value` (its hot head, when the rest
/// of it is colder).
#[inline(always)]
pub fn prefetch_first_line<T>(value: &T) {
    prefetch_line(value as *const T as *const u8);
}

/// Every line of `[start, start + size)`, each once.
#[inline(always)]
fn prefetch_bytes(start: *const u8, size: usize) {
    if size == 0 {
        return;
    }
    let skip = start as usize % LINE;
    let lines = (skip + size).div_ceil(LINE);
    let first = start.wrapping_sub(skip);
    for line in 0..lines {
        prefetch_line(first.wrapping_add(line * LINE));
    }
}

/// The cache line size of the CPUs Rialto runs on.
const LINE: usize = 64;

#[inline(always)]
fn prefetch_line(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch neither reads nor writes
        // memory as far as the program can tell, nor faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address as *const i8) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_changes_nothing() {
        let values = [1u64, 2, 3];
        prefetch(&values[1]);
        prefetch_index(&values, 2);
        prefetch_index(&values, 99); // out of range: nothing happens
        prefetch_all(&values);
        prefetch_all(&values[..0]);
        prefetch_first_line(&values);
        assert_eq!(values, [1, 2, 3]);
    }
}
