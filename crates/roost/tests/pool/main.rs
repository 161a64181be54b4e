//! The pool with real servers on 127.0.0.1: the catalog, jobs and their confinement, bags
//! of tasks (`roost pool run`, with Slurm and Open MPI), accounting, the thermostat,
//! supervision and federation: one test binary, a module per subject.

mod accounting;
mod catalog;
mod catalog_http;
mod cleanup;
mod federation;
mod job_confinement;
mod jobs;
mod mpi;
mod run;
mod slurm;
mod supervise;
mod thermostat;
