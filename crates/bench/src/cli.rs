//! The `rialto bench ...` subcommands.

use crate::harness::{self, ClockChoice, EngineBench, Prefetch, WorkloadSpec};
use crate::memory;
use crate::workload::{Mix, MultiParams, SingleParams, Size};

/// Benchmarks.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// The engine benchmark: exchange-core's `single` and `multi` workloads (docs/benchmarks.md),
    /// generated before timing and applied on one thread. Prints
    /// throughput, per-command latency percentiles and peak resident memory.
    Engine(EngineArgs),
    /// The opening auction: a book of 100,000 orders taken during a call (`set_phase auction`),
    /// then `set_phase continuous`; prints the uncross time (the median of several passes).
    Auction(crate::auction::AuctionArgs),
    /// A mark move on a future with many position holders: the time of one that liquidates
    /// nobody and of one that liquidates `--percent` of them.
    Liquidation(crate::liquidation::LiquidationArgs),
    /// The machine's memory as the engine meets it: ns per dependent random read over blocks
    /// of growing size, with one chain of reads and with several walked side by side, and what
    /// a prefetch adds to other work (where it grows, the TLB's reach ends). Run it beside
    /// `bench engine` on a shared machine: `multi` follows what a miss costs that day.
    Memory(MemoryArgs),
}

#[derive(clap::Args, Debug)]
pub struct MemoryArgs {
    /// Block sizes in MiB.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 16, 256, 512, 1024])]
    pub sizes_mib: Vec<usize>,
    /// Timed reads per block and walk.
    #[arg(long, default_value_t = 4_000_000)]
    pub reads: usize,
    /// Chains walked side by side in the second walk.
    #[arg(long, default_value_t = 16)]
    pub chains: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON array instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadArg {
    Single,
    Multi,
    /// `single` on a future with margin: positions, realised profit, a liquidation pass per
    /// trade.
    Futures,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeArg {
    Medium,
    Large,
    Huge,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixArg {
    /// exchange-core's generator as printed: GTC 12.6%, IOC 1.8%, FOK 0.06%, cancel 7.2%, move
    /// 71.1%, reduce 7.2%.
    Generator,
    /// exchange-core's published mix: 9% GTC, 3% IOC, 6% cancel, 82% move.
    Published,
    /// 10% stop and stop-limit orders, 5% icebergs, 5% DAY orders, the rest in the generator
    /// mix's proportions; a day end every 100,000 commands (--workload single only).
    Rulebook,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefetchArg {
    Auto,
    On,
    Off,
}

impl From<PrefetchArg> for Prefetch {
    fn from(arg: PrefetchArg) -> Prefetch {
        match arg {
            PrefetchArg::Auto => Prefetch::Auto,
            PrefetchArg::On => Prefetch::On,
            PrefetchArg::Off => Prefetch::Off,
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockArg {
    /// The invariant TSC (fenced rdtsc/rdtscp), falling back to `instant` where there is none.
    Tsc,
    /// `std::time::Instant`.
    Instant,
}

#[derive(clap::Args, Debug)]
pub struct EngineArgs {
    #[arg(long, value_enum, default_value = "single")]
    pub workload: WorkloadArg,
    /// Size of `multi` (WORKLOADS.md).
    #[arg(long, value_enum, default_value = "medium")]
    pub size: SizeArg,
    /// Benchmark commands (default: 3,000,000; multi huge 10,000,000).
    #[arg(long)]
    pub commands: Option<u64>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "generator")]
    pub mix: MixArg,
    /// Override the number of symbols (multi).
    #[arg(long)]
    pub symbols: Option<u32>,
    /// Override the number of user-currency accounts (multi).
    #[arg(long)]
    pub accounts: Option<u64>,
    /// Override the number of users (single).
    #[arg(long)]
    pub users: Option<u32>,
    /// Override the number of resting orders after prefill.
    #[arg(long)]
    pub orders: Option<u64>,
    /// Whether the throughput pass prefetches a few commands ahead (`Engine::prefetch_ahead`):
    /// `auto` when the engine finds its state too big for the caches (`Engine::prefetch_pays`);
    /// `off` gives the baseline for comparisons.
    #[arg(long, value_enum, default_value = "auto")]
    pub prefetch: PrefetchArg,
    /// Throughput passes, each on a fresh engine (setup and prefill again, not measured); the
    /// median is reported, every pass listed. More than one steadies the figure on a noisy
    /// machine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub passes: u32,
    /// Clock of the latency pass.
    #[arg(long, value_enum, default_value = "tsc")]
    pub clock: ClockArg,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl EngineArgs {
    pub fn spec(&self) -> anyhow::Result<WorkloadSpec> {
        let mix = match self.mix {
            MixArg::Generator => Mix::Generator,
            MixArg::Published => Mix::Published,
            MixArg::Rulebook => Mix::Rulebook,
        };
        Ok(match self.workload {
            WorkloadArg::Single | WorkloadArg::Futures => {
                if self.symbols.is_some() || self.accounts.is_some() {
                    anyhow::bail!(
                        "--symbols and --accounts are for --workload multi (single has --users)"
                    );
                }
                let d = SingleParams::default();
                let params = SingleParams {
                    users: self.users.unwrap_or(d.users),
                    resting_orders: match self.orders {
                        Some(n) => u32::try_from(n)?,
                        None => d.resting_orders,
                    },
                    commands: self.commands.unwrap_or(d.commands),
                    mix,
                };
                if self.workload == WorkloadArg::Futures {
                    WorkloadSpec::Futures(params)
                } else {
                    WorkloadSpec::Single(params)
                }
            }
            WorkloadArg::Multi => {
                if self.users.is_some() {
                    anyhow::bail!("--users is for --workload single (multi has --accounts)");
                }
                if mix == Mix::Rulebook {
                    anyhow::bail!("--mix rulebook is for --workload single");
                }
                let overrides = MultiOverrides {
                    symbols: self.symbols,
                    accounts: self.accounts,
                    orders: self.orders,
                    commands: self.commands,
                };
                let (size, params) = overrides.apply(self.size, mix)?;
                WorkloadSpec::Multi { size, params }
            }
        })
    }
}

/// What the command line changes of a `multi` size (`rialto bench engine` and `rialto bench
/// pipeline` take the same flags).
#[derive(Clone, Copy, Debug, Default)]
pub struct MultiOverrides {
    pub symbols: Option<u32>,
    pub accounts: Option<u64>,
    pub orders: Option<u64>,
    pub commands: Option<u64>,
}

impl MultiOverrides {
    /// Whether any of the sizes is changed (the commands aside).
    pub fn custom(&self) -> bool {
        self.symbols.is_some() || self.accounts.is_some() || self.orders.is_some()
    }

    /// `size`'s parameters with these changes, checked.
    pub fn apply(&self, size: SizeArg, mix: Mix) -> anyhow::Result<(Size, MultiParams)> {
        let size = match size {
            SizeArg::Medium => Size::Medium,
            SizeArg::Large => Size::Large,
            SizeArg::Huge => Size::Huge,
        };
        let d = MultiParams::size(size);
        let params = MultiParams {
            symbols: self.symbols.unwrap_or(d.symbols),
            accounts: self.accounts.unwrap_or(d.accounts),
            resting_orders: self.orders.unwrap_or(d.resting_orders),
            commands: self.commands.unwrap_or(d.commands),
            mix,
        };
        if params.symbols == 0 || params.accounts < 6 {
            anyhow::bail!("multi needs at least 1 symbol and 6 accounts");
        }
        Ok((size, params))
    }
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Engine(args) => {
            let opts = EngineBench {
                workload: args.spec()?,
                seed: args.seed,
                clock: match args.clock {
                    ClockArg::Tsc => ClockChoice::Tsc,
                    ClockArg::Instant => ClockChoice::Instant,
                },
                prefetch: args.prefetch.into(),
                passes: args.passes as usize,
                progress: !args.quiet,
            };
            let report = harness::run(&opts)?;
            if args.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_table());
            }
            Ok(())
        }
        BenchCommand::Auction(args) => crate::auction::run(&args),
        BenchCommand::Liquidation(args) => crate::liquidation::run(&args),
        BenchCommand::Memory(args) => {
            if let Some(&mib) = args
                .sizes_mib
                .iter()
                .find(|&&mib| mib == 0 || mib > memory::MAX_BLOCK_MIB)
            {
                anyhow::bail!(
                    "--sizes-mib: {mib} is outside 1..={} MiB",
                    memory::MAX_BLOCK_MIB
                );
            }
            let rows: Vec<_> = args
                .sizes_mib
                .iter()
                .map(|&mib| memory::measure(mib << 20, args.reads, args.chains, args.seed))
                .collect();
            if args.json {
                println!("{}", memory::to_json(&rows));
            } else {
                print!("{}", memory::to_table(&rows));
            }
            Ok(())
        }
    }
}
