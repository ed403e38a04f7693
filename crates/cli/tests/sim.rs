//! `rialto sim`: one seed's line replays to the same trace hash; many seeds print the table.

mod common;

use common::rialto;

#[test]
fn a_seed_prints_its_outcome_and_replays_to_the_same_trace_and_many_seeds_print_a_table() {
    let one = || rialto(&["sim", "--seed", "5", "--ticks", "300"], "");
    let first = one();
    assert_eq!(first.code, Some(0), "{first:?}");
    assert!(
        first.stdout.starts_with("seed 5: passed, 300 ticks"),
        "{first:?}"
    );
    let trace = |stdout: &str| {
        stdout
            .split("trace ")
            .nth(1)
            .map(str::trim)
            .map(String::from)
    };
    let hash = trace(&first.stdout).expect("a trace hash");
    assert_eq!(hash.len(), 64);
    assert_eq!(trace(&one().stdout), Some(hash));

    let many = rialto(
        &["sim", "--seed", "1", "--seeds", "5", "--ticks", "100"],
        "",
    );
    assert_eq!(many.code, Some(0), "{many:?}");
    let row = many.stdout.lines().last().expect("a table row");
    assert!(
        row.starts_with("| 5 | 100 |") && row.ends_with("| 0 |"),
        "{many:?}"
    );
}
