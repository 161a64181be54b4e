//! The cost of merging line classes (pgrep's aggregation) at one node: MEMBERS members whose
//! data hold the same LINES matching lines, merged one member at a time in member order and
//! in a scattered order, as a flat client or a relay with many children does.
//! `cargo run --release -p roost-group --example merge_cost -- [MEMBERS] [LINES]`

use roost_group::lines::{merge, LineClasses, LineSpec, Pattern};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u32>());
    let members = args.next().unwrap_or(Ok(1024)).expect("MEMBERS: a number");
    let lines = args.next().unwrap_or(Ok(100)).expect("LINES: a number");
    let data: Vec<u8> = (0..lines)
        .flat_map(|i| format!("line {i} of the log\n").into_bytes())
        .collect();
    let spec = LineSpec {
        pattern: Pattern::All,
        numbers: false,
        strip_syslog: false,
        complete_lines: false,
    };
    let leaves: Vec<LineClasses> = (0..members).map(|m| spec.classify(m, &data, 0)).collect();
    // A fixed scatter: member m goes to position m * 7919 mod MEMBERS (coprime when odd).
    let scattered: Vec<u32> = (0..members).map(|m| (m * 7919 + 13) % members).collect();
    for (name, order) in [
        ("in member order", (0..members).collect::<Vec<_>>()),
        ("scattered", scattered),
    ] {
        let start = Instant::now();
        let mut all = LineClasses::new();
        for &m in &order {
            merge(&mut all, leaves[m as usize].clone());
        }
        let classes = all.len();
        let first = all
            .values()
            .next()
            .map(|s| s.to_string())
            .unwrap_or_default();
        println!(
            "{members} members x {lines} lines, {name}: {:.1} ms ({classes} classes, first {first})",
            start.elapsed().as_secs_f64() * 1e3
        );
    }
}
