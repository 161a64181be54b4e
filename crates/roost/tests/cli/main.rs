//! The `roost` command line as users meet it: errors, `--json`, the manual, transfers
//! between servers: one test binary, a module per subject.

mod errors;
mod json;
mod manual;
mod transfers;
