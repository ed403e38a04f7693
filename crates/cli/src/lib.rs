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
