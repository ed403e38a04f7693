//! Every examples/NAME.jsonl replays to examples/NAME.expected.jsonl (worked out by hand from
//! docs/rules.md; the final line's state_hash is `*` there, see examples/README.md).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn scenarios() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(examples_dir())
        .expect("read examples/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".jsonl") && !name.ends_with(".expected.jsonl")
        })
        .collect();
    paths.sort();
    paths
}

/// What is wrong with one example's output, or `None`.
fn check(scenario: &Path) -> Option<String> {
    let expected_path = scenario.with_extension("expected.jsonl");
    let expected = match fs::read_to_string(&expected_path) {
        Ok(text) => text,
        Err(e) => return Some(format!("cannot read {}: {e}", expected_path.display())),
    };
    let path = scenario.to_str().expect("UTF-8 path");
    let run = common::rialto(&["replay", path, "--final-state"], "");
    if run.code != Some(0) || !run.stderr.is_empty() {
        return Some(format!(
            "exit {:?}, stderr: {}",
            run.code,
            run.stderr.trim_end()
        ));
    }
    let mut actual: Vec<String> = run.stdout.lines().map(str::to_owned).collect();
    let Some(last) = actual.pop() else {
        return Some("no output".to_owned());
    };
    let (final_line, _hash) = common::split_hash(&last);
    actual.push(final_line);
    let expected: Vec<&str> = expected.lines().collect();
    for (i, (a, e)) in actual.iter().zip(&expected).enumerate() {
        if a != e {
            return Some(format!(
                "output line {} differs\n  expected: {e}\n  actual:   {a}",
                i + 1
            ));
        }
    }
    if actual.len() != expected.len() {
        return Some(format!(
            "{} output lines, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    let again = common::rialto(&["replay", path, "--final-state"], "");
    if again.stdout != run.stdout {
        return Some("a second replay printed something else".to_owned());
    }
    None
}

#[test]
fn examples_replay_to_their_expected_output() {
    let scenarios = scenarios();
    assert!(scenarios.len() >= 6, "examples/ has too few scenarios");
    let failures: Vec<String> = scenarios
        .iter()
        .filter_map(|s| check(s).map(|why| format!("{}: {why}", s.display())))
        .collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}
