//! The property the job parsers must have, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/job_description.rs`) and the garbage test run with the suite: no input
//! makes the description, id-list or record parser panic, and a description that is accepted
//! reads back unchanged from the record roost stores for it.

use super::description::{parse_ids, Description};
use super::record::Job;

/// Runs every job parser over `data`; panics if the property fails. Returns whether the
/// description parser accepted it.
pub fn check_job_parsers(data: &[u8]) -> bool {
    let _ = parse_ids(data);
    if let Ok(value) = roost_catalog::json::parse(data) {
        let _ = Job::from_value(&value);
    }
    let Ok(description) = Description::parse(data) else {
        return false;
    };
    let job = Job::new(1, "unix:fuzz", description);
    let stored = job.to_value(true).to_json();
    let value = roost_catalog::json::parse(stored.as_bytes()).expect("a stored record is JSON");
    let again = Job::from_value(&value).expect("a stored record reads back");
    assert_eq!(
        again,
        job,
        "the record of {:?}",
        String::from_utf8_lossy(data)
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use roost_group::fuzz_check::Rng;

    const SEEDS: &[&str] = &[
        r#"{"executable":"/bin/sh","arguments":["sh","-c","cat in > out"],"environment":{"A":"1"},"tag":"t","files":[{"task_path":"in","serv_path":"/in","type":"INPUT"},{"task_path":"d/out","serv_path":"/o.%j","type":"OUTPUT","binding":"COPY","tag":"x"}]}"#,
        r#"{"executable":"e","arguments":[],"files":[]}"#,
        r#"[1,2,3]"#,
        r#"{"executable":"e","arguments":["\u00e9\ud83d\ude00"],"files":[{"task_path":"a/./b","serv_path":"/x/../y","type":"input","binding":"link"}]}"#,
    ];

    /// Garbage: every truncation of the seeds, random bytes, and random mutations of the seeds
    /// (byte flips, insertions of JSON punctuation, deletions).
    #[test]
    fn job_parsers_never_panic_on_garbage() {
        let mut accepted = 0;
        for seed in SEEDS {
            for end in 0..=seed.len() {
                if check_job_parsers(&seed.as_bytes()[..end]) {
                    accepted += 1;
                }
            }
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let punctuation = b"{}[]\":,\\ 0-e.tnfu/%";
        for round in 0..20_000 {
            let mut data = if round % 4 == 0 {
                (0..rng.below(64))
                    .map(|_| rng.next_u64() as u8)
                    .collect::<Vec<u8>>()
            } else {
                SEEDS[rng.below(SEEDS.len())].as_bytes().to_vec()
            };
            for _ in 0..=rng.below(4) {
                if data.is_empty() {
                    break;
                }
                let at = rng.below(data.len());
                match rng.below(3) {
                    0 => data[at] = rng.next_u64() as u8,
                    1 => data.insert(at, punctuation[rng.below(punctuation.len())]),
                    _ => {
                        data.remove(at);
                    }
                }
            }
            if check_job_parsers(&data) {
                accepted += 1;
            }
        }
        assert!(accepted > 10, "the seeds themselves parse: {accepted}");
    }
}
