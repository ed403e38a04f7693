//! Clocks for per-command timing.
//!
//! On the benchmark machine (docs/benchmarks-history.md, 2026-11-22) two back-to-back
//! `Instant::now()` reads are 47-51 ns apart, a fenced `rdtsc`/`rdtscp` pair 56-64 TSC ticks at
//! 2.0 GHz (28-32 ns). For commands of a few hundred nanoseconds the clock's own cost is a large
//! part of each sample, so the TSC is the default where it is invariant; its cost is reported
//! beside the percentiles either way.

use std::time::{Duration, Instant};

/// A clock that stamps the start and the end of a timed region.
pub trait Clock {
    type Stamp: Copy;
    fn start(&self) -> Self::Stamp;
    fn stop(&self) -> Self::Stamp;
    fn elapsed_ns(&self, start: Self::Stamp, stop: Self::Stamp) -> u64;
    fn name(&self) -> &'static str;
}

/// `std::time::Instant` (clock_gettime(CLOCK_MONOTONIC) through the vDSO).
#[derive(Clone, Copy, Debug, Default)]
pub struct InstantClock;

impl Clock for InstantClock {
    type Stamp = Instant;

    #[inline(always)]
    fn start(&self) -> Instant {
        Instant::now()
    }

    #[inline(always)]
    fn stop(&self) -> Instant {
        Instant::now()
    }

    #[inline(always)]
    fn elapsed_ns(&self, start: Instant, stop: Instant) -> u64 {
        stop.duration_since(start).as_nanos() as u64
    }

    fn name(&self) -> &'static str {
        "instant"
    }
}

/// The time-stamp counter, read as `lfence; rdtsc` at the start and `rdtscp; lfence` at the
/// end so that the region's instructions cannot drift out of it; ticks are converted with a
/// rate calibrated against `Instant`.
#[derive(Clone, Copy, Debug)]
pub struct TscClock {
    ns_per_tick: f64,
}

impl TscClock {
    /// `None` unless the CPU reports an invariant TSC and `rdtscp` (x86-64 Linux only).
    pub fn calibrated() -> Option<TscClock> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let flags = cpuinfo.lines().find(|l| l.starts_with("flags"))?;
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        if !(has("constant_tsc") && has("nonstop_tsc") && has("rdtscp")) {
            return None;
        }
        let probe = TscClock { ns_per_tick: 1.0 };
        let t0 = Instant::now();
        let c0 = probe.start();
        while t0.elapsed() < Duration::from_millis(100) {}
        let c1 = probe.stop();
        let ns = t0.elapsed().as_nanos() as f64;
        let ticks = c1.checked_sub(c0)? as f64;
        (ticks > 0.0).then(|| TscClock {
            ns_per_tick: ns / ticks,
        })
    }

    pub fn ghz(&self) -> f64 {
        1.0 / self.ns_per_tick
    }
}

#[cfg(target_arch = "x86_64")]
impl Clock for TscClock {
    type Stamp = u64;

    #[inline(always)]
    fn start(&self) -> u64 {
        use std::arch::x86_64::{_mm_lfence, _rdtsc};
        // SAFETY: lfence (SSE2, part of the x86-64 baseline) and rdtsc (present on every
        // x86-64 CPU) have no memory effects; they only order and read the counter.
        unsafe {
            _mm_lfence();
            _rdtsc()
        }
    }

    #[inline(always)]
    fn stop(&self) -> u64 {
        use std::arch::x86_64::{__rdtscp, _mm_lfence};
        let mut aux = 0u32;
        // SAFETY: a `TscClock` exists only where /proc/cpuinfo lists `rdtscp`; the instruction
        // writes only `aux`, a local we own.
        unsafe {
            let t = __rdtscp(&mut aux);
            _mm_lfence();
            t
        }
    }

    #[inline(always)]
    fn elapsed_ns(&self, start: u64, stop: u64) -> u64 {
        (stop.wrapping_sub(start) as f64 * self.ns_per_tick) as u64
    }

    fn name(&self) -> &'static str {
        "tsc"
    }
}

#[cfg(not(target_arch = "x86_64"))]
impl Clock for TscClock {
    type Stamp = u64;

    fn start(&self) -> u64 {
        unreachable!("no TscClock off x86-64")
    }

    fn stop(&self) -> u64 {
        unreachable!("no TscClock off x86-64")
    }

    fn elapsed_ns(&self, _: u64, _: u64) -> u64 {
        0
    }

    fn name(&self) -> &'static str {
        "tsc"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tsc_agrees_with_instant() {
        let Some(tsc) = TscClock::calibrated() else {
            return; // not an invariant-TSC x86-64 machine
        };
        let t0 = Instant::now();
        let c0 = tsc.start();
        while t0.elapsed() < Duration::from_millis(20) {}
        let c1 = tsc.stop();
        let by_instant = t0.elapsed().as_nanos() as f64;
        let by_tsc = tsc.elapsed_ns(c0, c1) as f64;
        // Generous: the machine is shared and the thread may be descheduled.
        assert!(
            (by_tsc / by_instant - 1.0).abs() < 0.2,
            "{by_tsc} vs {by_instant}"
        );
    }
}
