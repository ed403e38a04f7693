//! The `rialto` command's library: scenario files (JSON Lines commands in, JSON Lines events
//! out, docs/scenario-format.md), the replay loop that drives the engine with them, and the
//! front ends of `serve` and `loadgen`.

pub mod bench_recovery;
pub mod fix;
pub mod fix_bench;
pub mod fix_loadgen;
pub mod fix_md_bench;
pub mod history_bench;
pub mod huge_pages;
pub mod journal;
pub mod loadgen;
pub mod log_bench;
pub mod md_bench;
pub mod order;
pub mod pipeline_bench;
pub mod replay;
pub mod scenario;
pub mod serve;
pub mod sim;
pub mod ws_bench;

/// The `single` workload with `commands` measured commands, saying on stderr that it is being
/// generated (it takes a while for millions).
pub fn single_workload(commands: u64, seed: u64) -> rialto_bench::workload::Workload {
    let params = rialto_bench::workload::SingleParams {
        commands,
        ..Default::default()
    };
    eprintln!("generating the single workload ({commands} commands)...");
    rialto_bench::workload::single(&params, seed)
}

/// The workload flags of the benchmarks that run the server's parts (`rialto bench pipeline`,
/// `rialto bench market-data`): `single`, or a `multi` venue of a size, as `rialto bench
/// engine` takes them.
#[derive(clap::Args, Debug)]
pub struct BenchWorkloadArgs {
    #[arg(long, value_enum, default_value = "single")]
    pub workload: rialto_bench::cli::WorkloadArg,
    /// Size of `multi` (WORKLOADS.md): its symbols, accounts and resting orders, set up and
    /// pre-filled before the measured commands
    #[arg(long, value_enum, default_value = "medium")]
    pub size: rialto_bench::cli::SizeArg,
    /// Override the number of symbols (multi)
    #[arg(long)]
    pub symbols: Option<u32>,
    /// Override the number of user-currency accounts (multi)
    #[arg(long)]
    pub accounts: Option<u64>,
    /// Override the number of resting orders after the pre-fill (multi)
    #[arg(long)]
    pub orders: Option<u64>,
}

impl BenchWorkloadArgs {
    /// The workload with `commands` measured commands, and its label ("single", "multi
    /// large", "multi custom").
    pub fn generate(
        &self,
        commands: u64,
        seed: u64,
    ) -> anyhow::Result<(rialto_bench::workload::Workload, String)> {
        use rialto_bench::cli::{MultiOverrides, WorkloadArg};
        let overrides = MultiOverrides {
            symbols: self.symbols,
            accounts: self.accounts,
            orders: self.orders,
            commands: Some(commands),
        };
        match self.workload {
            WorkloadArg::Single => {
                anyhow::ensure!(
                    !overrides.custom(),
                    "--symbols, --accounts and --orders are for --workload multi"
                );
                Ok((single_workload(commands, seed), "single".to_string()))
            }
            WorkloadArg::Futures => {
                anyhow::bail!("--workload futures is for `rialto bench engine` only")
            }
            WorkloadArg::Multi => {
                let mix = rialto_bench::workload::Mix::Generator;
                let (size, params) = overrides.apply(self.size, mix)?;
                let label = match overrides.custom() {
                    true => "multi custom".to_string(),
                    false => format!("multi {}", size.as_str()),
                };
                eprintln!("generating the {label} workload ({commands} commands)...");
                Ok((rialto_bench::workload::multi(&params, seed), label))
            }
        }
    }
}
