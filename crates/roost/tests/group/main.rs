//! Group file operations over clusters of real `roost serve` processes (on 127.0.0.1, and
//! on hosts in network namespaces): one test binary, a module per subject.

mod netns;
mod ops;
mod tools;
mod tree;
