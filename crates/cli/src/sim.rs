//! `rialto sim`: runs seeds of the deterministic simulator (crates/sim, docs/simulation.md)
//! and prints what each found, or a table for many.

use std::io::Write;

use rialto_sim::{Faults, Outcome, SimConfig};

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// The seed to run (the first of them with --seeds)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated ticks per seed (each moves the simulated clock 1 µs to 20 ms)
    #[arg(long, default_value_t = 1000)]
    pub ticks: u64,
    /// How many seeds to run, from --seed on; more than one prints a table
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    /// Print the trace on stderr: each tick, each message a client received, each fault and
    /// recovery
    #[arg(long)]
    pub trace: bool,
}

/// Runs the seeds; returns whether every one passed.
pub fn run(args: &SimArgs, out: &mut impl Write) -> std::io::Result<bool> {
    let mut total = Faults::default();
    let (mut simulated_ns, mut commands, mut recoveries, mut failures) = (0i128, 0u64, 0u64, 0);
    let last = args.seed.saturating_add(args.seeds.max(1) - 1);
    for seed in args.seed..=last {
        let outcome = rialto_sim::run(&SimConfig {
            seed,
            ticks: args.ticks,
            plant_ack_before_commit: false,
            plant_drop_on_partial_write: false,
            print_trace: args.trace,
        });
        if args.seeds <= 1 {
            print_one(&outcome, out)?;
        }
        if let Some(failure) = &outcome.failure {
            failures += 1;
            if args.seeds > 1 {
                writeln!(out, "seed {seed} FAILED {failure}")?;
            }
            writeln!(
                out,
                "  replay: rialto sim --seed {seed} --ticks {}",
                args.ticks
            )?;
        }
        total.add(&outcome.faults);
        simulated_ns += i128::from(outcome.simulated_ns);
        commands += outcome.commands;
        recoveries += outcome.recoveries;
    }
    if args.seeds > 1 {
        writeln!(
            out,
            "| seeds | ticks each | simulated hours | commands | fsync failed | ENOSPC | power loss \
             (torn write) | crashes | bit flips on read | recoveries | failures |"
        )?;
        writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|")?;
        writeln!(
            out,
            "| {} | {} | {:.1} | {commands} | {} | {} | {} | {} | {} | {recoveries} | {failures} |",
            last - args.seed + 1,
            args.ticks,
            simulated_ns as f64 / 3.6e12,
            total.fsync_failed,
            total.no_space,
            total.power_loss,
            total.crashes,
            total.bit_flips,
        )?;
    }
    Ok(failures == 0)
}

fn print_one(o: &Outcome, out: &mut impl Write) -> std::io::Result<()> {
    let f = &o.faults;
    writeln!(
        out,
        "seed {}: {}, {} ticks, {:.1} s simulated, {} commands, {} recoveries; faults: {} fsync \
         failed, {} ENOSPC, {} power loss, {} crashes, {} bit flips ({} refused); {} view checks, \
         {} replica checks; trace {}",
        o.seed,
        match &o.failure {
            None => "passed".to_string(),
            Some(failure) => format!("FAILED {failure}"),
        },
        o.ticks,
        o.simulated_ns as f64 / 1e9,
        o.commands,
        o.recoveries,
        f.fsync_failed,
        f.no_space,
        f.power_loss,
        f.crashes,
        f.bit_flips,
        o.flips_refused,
        o.view_checks,
        o.replica_checks,
        o.trace_hex()
    )
}
