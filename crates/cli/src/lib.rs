//! The `rialto` command's library: scenario files (JSON Lines commands in, JSON Lines events
//! out, docs/scenario-format.md), the replay loop that drives the engine with them, and the
//! front ends of `serve` and `loadgen`.

pub mod bench_recovery;
pub mod fix;
pub mod fix_bench;
pub mod fix_loadgen;
pub mod huge_pages;
pub mod journal;
pub mod loadgen;
pub mod md_bench;
pub mod pipeline_bench;
pub mod replay;
pub mod scenario;
pub mod serve;
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

/// The workload that `rialto bench pipeline` and `rialto bench market-data` name with
/// `--workload`, `--size`, `--symbols`, `--accounts` and `--orders`, with `commands` measured
/// commands, and its label ("single", "multi large", "multi custom").
pub fn bench_workload(
    workload: rialto_bench::cli::WorkloadArg,
    size: rialto_bench::cli::SizeArg,
    mut overrides: rialto_bench::cli::MultiOverrides,
    commands: u64,
    seed: u64,
) -> anyhow::Result<(rialto_bench::workload::Workload, String)> {
    use rialto_bench::cli::WorkloadArg;
    overrides.commands = Some(commands);
    match workload {
        WorkloadArg::Single => {
            anyhow::ensure!(
                !overrides.custom(),
                "--symbols, --accounts and --orders are for --workload multi"
            );
            Ok((single_workload(commands, seed), "single".to_string()))
        }
        WorkloadArg::Multi => {
            let (size, params) = overrides.apply(size, rialto_bench::workload::Mix::Generator)?;
            let label = match overrides.custom() {
                true => "multi custom".to_string(),
                false => format!("multi {}", size.as_str()),
            };
            eprintln!("generating the {label} workload ({commands} commands)...");
            Ok((rialto_bench::workload::multi(&params, seed), label))
        }
    }
}
