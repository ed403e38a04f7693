//! A bounded ring between two pipeline threads, with the consumer's doorbell.
//!
//! The queue is crossbeam's `ArrayQueue` (bounded, lock-free, allocation-free after start-up).
//! Producers push and ring the consumer's [`Bell`] once per batch; the bell makes a system call
//! only when the consumer announced that it sleeps.

use std::sync::{Arc, OnceLock};

use crossbeam_queue::ArrayQueue;

use crate::idle::Bell;

pub struct Ring<T> {
    queue: ArrayQueue<T>,
    bell: OnceLock<Arc<Bell>>,
}

impl<T> Ring<T> {
    pub fn new(capacity: usize) -> Arc<Ring<T>> {
        Arc::new(Ring {
            queue: ArrayQueue::new(capacity),
            bell: OnceLock::new(),
        })
    }

    /// Called once by the consumer before it first sleeps.
    pub fn set_bell(&self, bell: Arc<Bell>) {
        let _ = self.bell.set(bell);
    }

    /// Err(item) when the ring is full: the caller keeps the item and stops producing.
    #[inline]
    pub fn try_push(&self, item: T) -> Result<(), T> {
        self.queue.push(item)
    }

    #[inline]
    pub fn pop(&self) -> Option<T> {
        self.queue.pop()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.queue.is_full()
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// A gauge of the ring's length, for /metrics.
    pub fn len_probe(self: &Arc<Self>) -> Box<dyn Fn() -> u64 + Send + Sync>
    where
        T: Send + 'static,
    {
        let ring = self.clone();
        Box::new(move || ring.len() as u64)
    }

    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// Wakes the consumer if it sleeps.
    #[inline]
    pub fn ring(&self) {
        if let Some(bell) = self.bell.get() {
            bell.ring();
        }
    }

    /// Wakes the consumer whether or not it said it sleeps (shutdown, or a full ring).
    pub fn ring_always(&self) {
        if let Some(bell) = self.bell.get() {
            bell.ring_always();
        }
    }

    /// Pushes, waiting while the ring is full; gives the item back if `give_up()` turns true
    /// (the consumer stopped). Used between internal stages, whose consumers never stop
    /// draining while the venue runs.
    pub fn push_waiting(&self, mut item: T, give_up: impl Fn() -> bool) -> Result<(), T> {
        let mut spins = 0u32;
        loop {
            match self.queue.push(item) {
                Ok(()) => return Ok(()),
                Err(back) => item = back,
            }
            if give_up() {
                return Err(item);
            }
            self.ring_always();
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
