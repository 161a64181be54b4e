//! `roost serve`: a Chirp file server exporting one directory as a jail, with authentication,
//! per-directory ACLs and limits.
