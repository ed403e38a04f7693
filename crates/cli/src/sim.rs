//! `rialto sim`: runs seeds of the deterministic simulator (crates/sim, docs/simulation.md)
//! and prints what each found, or a table for many.

use std::io::Write;

use rialto_sim::{Counts, Outcome, SimConfig};

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
    let mut total = Counts::default();
    let (mut simulated_ns, mut failures) = (0i128, 0);
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
        total.add(&outcome.counts);
        simulated_ns += i128::from(outcome.simulated_ns);
    }
    if args.seeds > 1 {
        let f = &total.faults;
        writeln!(
            out,
            "| seeds | ticks each | simulated hours | commands | logins | fsync failed | ENOSPC \
             | power loss (torn write) | crashes | bit flips on read | disconnects | slow \
             readers | output bound closes | rate limited | wrong secrets | web gaps | recoveries \
             | failures |"
        )?;
        writeln!(
            out,
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        )?;
        writeln!(
            out,
            "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} \
             | {} | {failures} |",
            last - args.seed + 1,
            args.ticks,
            simulated_ns as f64 / 3.6e12,
            total.commands,
            total.logins,
            f.fsync_failed,
            f.no_space,
            f.power_loss,
            f.crashes,
            f.bit_flips,
            f.disconnects,
            f.slow_readers,
            f.output_overflows,
            f.rate_limited,
            f.wrong_secrets,
            total.web_gaps,
            total.recoveries,
        )?;
    }
    Ok(failures == 0)
}

fn print_one(o: &Outcome, out: &mut impl Write) -> std::io::Result<()> {
    let c = &o.counts;
    let f = &c.faults;
    writeln!(
        out,
        "seed {}: {}, {} ticks, {:.1} s simulated, {} commands, {} logins, {} recoveries; \
         faults: {} fsync failed, {} ENOSPC, {} power loss, {} crashes, {} bit flips ({} \
         refused), {} disconnects, {} slow readers, {} output bound closes, {} rate limited, {} \
         wrong secrets, {} web gaps; {} view checks ({} with the FIX traders), {} FIX book \
         checks, {} replica checks; trace {}",
        o.seed,
        match &o.failure {
            None => "passed".to_string(),
            Some(failure) => format!("FAILED {failure}"),
        },
        o.ticks,
        o.simulated_ns as f64 / 1e9,
        c.commands,
        c.logins,
        c.recoveries,
        f.fsync_failed,
        f.no_space,
        f.power_loss,
        f.crashes,
        f.bit_flips,
        c.flips_refused,
        f.disconnects,
        f.slow_readers,
        f.output_overflows,
        f.rate_limited,
        f.wrong_secrets,
        c.web_gaps,
        c.view_checks,
        c.fix_view_checks,
        c.fix_book_checks,
        c.replica_checks,
        o.trace_hex()
    )
}
