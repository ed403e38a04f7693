//! How a pipeline thread waits when it has nothing to do, and how a producer wakes it.
//!
//! Each thread is an agent with a duty cycle (STYLE.md): it does work, and when a round found
//! none it asks its [`Idler`] to wait. Spinning gives the lowest latency but takes a whole core,
//! and this machine has two; parking costs a wake-up (tens of microseconds in this VM) but
//! leaves the core to others. `backoff`, the default, spins for a few microseconds, yields for
//! a while, then parks, so a busy venue stays hot and an idle one sleeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitStrategy {
    /// Busy-poll: never sleeps (one core per spinning thread).
    Spin,
    /// Spin briefly, then `yield_now` in a loop.
    SpinYield,
    /// Sleep until woken.
    Park,
    /// Spin, then yield, then sleep until woken.
    Backoff,
}

impl std::str::FromStr for WaitStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "spin" => Ok(WaitStrategy::Spin),
            "spin-yield" => Ok(WaitStrategy::SpinYield),
            "park" => Ok(WaitStrategy::Park),
            "backoff" => Ok(WaitStrategy::Backoff),
            _ => Err(format!(
                "unknown wait strategy `{s}` (expected spin, spin-yield, park or backoff)"
            )),
        }
    }
}

/// Spin this long after the last work before yielding.
const SPIN: Duration = Duration::from_micros(20);
/// Yield this long after the last work before sleeping (`backoff`).
const YIELD: Duration = Duration::from_micros(200);
/// Pipeline threads sleep at most this long, to look at timers and the shutdown flag.
pub const MAX_SLEEP: Duration = Duration::from_millis(10);

/// What the waiting thread should do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    Spin,
    Yield,
    Sleep,
}

/// Tracks how long a thread has been idle and decides how to wait next.
pub struct Idler {
    strategy: WaitStrategy,
    idle_since: Option<Instant>,
}

impl Idler {
    pub fn new(strategy: WaitStrategy) -> Idler {
        Idler {
            strategy,
            idle_since: None,
        }
    }

    /// Called after every round: work found resets the back-off.
    pub fn next(&mut self, work_count: usize) -> Option<Wait> {
        if work_count > 0 {
            self.idle_since = None;
            return None;
        }
        let idle_for = self.idle_since.get_or_insert_with(Instant::now).elapsed();
        Some(match self.strategy {
            WaitStrategy::Spin => Wait::Spin,
            WaitStrategy::Park => Wait::Sleep,
            WaitStrategy::SpinYield if idle_for < SPIN => Wait::Spin,
            WaitStrategy::SpinYield => Wait::Yield,
            WaitStrategy::Backoff if idle_for < SPIN => Wait::Spin,
            WaitStrategy::Backoff if idle_for < YIELD => Wait::Yield,
            WaitStrategy::Backoff => Wait::Sleep,
        })
    }

    /// Waits once for a thread that sleeps with `park`; `has_work` is checked after announcing
    /// the sleep so that a wake-up cannot be lost.
    pub fn idle_thread(
        &mut self,
        work_count: usize,
        bell: &Bell,
        timeout: Duration,
        has_work: impl Fn() -> bool,
    ) {
        match self.next(work_count) {
            None => {}
            Some(Wait::Spin) => std::hint::spin_loop(),
            Some(Wait::Yield) => std::thread::yield_now(),
            Some(Wait::Sleep) => {
                bell.sleeping.store(true, Ordering::SeqCst);
                if !has_work() {
                    std::thread::park_timeout(timeout);
                }
                bell.sleeping.store(false, Ordering::SeqCst);
            }
        }
    }
}

/// How a producer wakes a consumer that may be asleep.
enum Ringer {
    Thread(Thread),
    Poll(Arc<mio::Waker>),
}

/// A consumer's doorbell. The consumer raises `sleeping` before it sleeps; producers ring only
/// then, so a busy pipeline makes no wake-up system calls.
pub struct Bell {
    sleeping: AtomicBool,
    ringer: Ringer,
}

impl Bell {
    /// A bell for a thread that sleeps with `park` (call on that thread, or pass its handle).
    pub fn for_thread(thread: Thread) -> Arc<Bell> {
        Arc::new(Bell {
            sleeping: AtomicBool::new(false),
            ringer: Ringer::Thread(thread),
        })
    }

    /// A bell for a thread that sleeps in `mio::Poll::poll`.
    pub fn for_poll(waker: Arc<mio::Waker>) -> Arc<Bell> {
        Arc::new(Bell {
            sleeping: AtomicBool::new(false),
            ringer: Ringer::Poll(waker),
        })
    }

    /// Wakes the consumer if it announced that it sleeps.
    pub fn ring(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            self.ring_always();
        }
    }

    /// Wakes the consumer unconditionally (shutdown).
    pub fn ring_always(&self) {
        match &self.ringer {
            Ringer::Thread(t) => t.unpark(),
            Ringer::Poll(w) => {
                // A failed eventfd write leaves the poller to its timeout: late, never lost.
                let _ = w.wake();
            }
        }
    }

    /// For a poll-based consumer: announce sleep before `poll`, clear after.
    pub fn set_sleeping(&self, sleeping: bool) {
        self.sleeping.store(sleeping, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_spins_then_yields_then_sleeps() {
        let mut idler = Idler::new(WaitStrategy::Backoff);
        assert_eq!(idler.next(1), None);
        assert_eq!(idler.next(0), Some(Wait::Spin));
        // Idle for longer (set, not slept: a busy machine may oversleep any real pause).
        idler.idle_since = Instant::now().checked_sub(SPIN);
        assert_eq!(idler.next(0), Some(Wait::Yield));
        idler.idle_since = Instant::now().checked_sub(YIELD);
        assert_eq!(idler.next(0), Some(Wait::Sleep));
        assert_eq!(idler.next(3), None);
        assert_eq!(idler.next(0), Some(Wait::Spin));
    }

    #[test]
    fn a_rung_bell_wakes_a_parked_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let bell = Bell::for_thread(std::thread::current());
            tx.send(bell.clone()).unwrap();
            let mut idler = Idler::new(WaitStrategy::Park);
            let start = Instant::now();
            idler.idle_thread(0, &bell, Duration::from_secs(5), || false);
            start.elapsed()
        });
        let bell = rx.recv().unwrap();
        // Ring until the sleeper has gone to sleep and come back.
        while !handle.is_finished() {
            bell.ring();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(handle.join().unwrap() < Duration::from_secs(5));
    }
}
