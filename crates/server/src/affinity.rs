//! Giving the gateway's thread a CPU of its own (`pipeline.gateway_cpu`).
//!
//! On a small machine the thread that reads sockets, journals and applies commands shares its
//! CPU with market data, the web threads and the journal's syncs; each of them that wakes on
//! its CPU delays the orders behind it. Pinned, it runs alone, and the others share the rest.

use anyhow::{Context, ensure};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The calling thread.
fn this_thread() -> Pid {
    Pid::from_raw(0)
}

/// Moves the calling thread off `cpu`, and with it every thread it starts from now on (a new
/// thread inherits its creator's CPUs). Fails when `cpu` is not one this process may run on, or
/// is the only one.
pub fn keep_off(cpu: usize) -> anyhow::Result<()> {
    let mut allowed = sched_getaffinity(this_thread()).context("cannot read the allowed CPUs")?;
    ensure!(
        cpu < CpuSet::count() && allowed.is_set(cpu).unwrap_or(false),
        "pipeline.gateway_cpu = {cpu} is not a CPU this process may run on"
    );
    allowed.unset(cpu)?;
    ensure!(
        (0..CpuSet::count()).any(|c| allowed.is_set(c).unwrap_or(false)),
        "pipeline.gateway_cpu = {cpu} is the only CPU this process may run on: the other threads need one more"
    );
    sched_setaffinity(this_thread(), &allowed).context("cannot set the allowed CPUs")
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) -> anyhow::Result<()> {
    let mut only = CpuSet::new();
    only.set(cpu)
        .with_context(|| format!("CPU {cpu} is out of range"))?;
    sched_setaffinity(this_thread(), &only).with_context(|| format!("cannot pin to CPU {cpu}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Vec<usize> {
        let set = sched_getaffinity(this_thread()).unwrap();
        (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap())
            .collect()
    }

    #[test]
    fn a_pinned_gateway_has_its_cpu_and_the_others_the_rest() {
        // In threads of their own: the settings stay with the threads that made them.
        let cpus = std::thread::spawn(allowed).join().unwrap();
        let Some(&gateway_cpu) = cpus.last().filter(|_| cpus.len() >= 2) else {
            return; // one CPU: nothing to share out (the next test covers the refusal)
        };
        let others = std::thread::spawn(move || {
            keep_off(gateway_cpu).unwrap();
            // A thread started now inherits the restriction.
            std::thread::spawn(allowed).join().unwrap()
        });
        let others = others.join().unwrap();
        assert!(!others.is_empty() && !others.contains(&gateway_cpu));
        let pinned = std::thread::spawn(move || {
            pin(gateway_cpu).unwrap();
            allowed()
        });
        assert_eq!(pinned.join().unwrap(), vec![gateway_cpu]);
    }

    #[test]
    fn cpus_that_cannot_be_had_are_refused() {
        let outcome = std::thread::spawn(|| {
            let cpus = allowed();
            let too_big = keep_off(CpuSet::count() + 1).unwrap_err().to_string();
            let unchanged = allowed() == cpus;
            // A thread held to one CPU cannot give it away.
            pin(cpus[0]).unwrap();
            let only = keep_off(cpus[0]).unwrap_err().to_string();
            (too_big, unchanged, only, allowed() == vec![cpus[0]])
        });
        let (too_big, unchanged, only, still_pinned) = outcome.join().unwrap();
        assert!(
            too_big.contains("is not a CPU this process may run on"),
            "{too_big}"
        );
        assert!(only.contains("the only CPU"), "{only}");
        assert!(
            unchanged && still_pinned,
            "a refused setting changes nothing"
        );
    }
}
