//! The Chirp job RPCs as cctools defines them: create a job from a JSON description, commit
//! (start), kill, ask the status of, wait for and reap jobs by id. Descriptions and records
//! travel as JSON text; this module neither parses nor checks them (the server does).

use roost_wire::Request;

use crate::client::Client;
use crate::error::{Error, Result};

/// The longest JSON answer accepted from `job_status` or `job_wait` (cctools' own limit).
pub const MAX_JOB_REPLY: u64 = 16 * 1024 * 1024;

/// A JSON array of job ids, as the job RPCs take them.
pub fn id_array(ids: &[i64]) -> String {
    let items: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(","))
}

impl Client {
    /// Creates a job from its JSON description; returns the new job's id.
    pub fn job_create(&mut self, description: &str) -> Result<i64> {
        let payload = description.as_bytes();
        let req = Request::JobCreate {
            length: payload.len() as u64,
        };
        let id = self.guard(|c| c.call(&req, payload))?;
        i64::try_from(id).map_err(|_| Error::Protocol(roost_wire::WireError::BadReply("job id")))
    }

    /// Commits (starts) the jobs `ids`.
    pub fn job_commit(&mut self, ids: &[i64]) -> Result<()> {
        self.ids_call(ids, |length| Request::JobCommit { length })
    }

    /// Kills the jobs `ids`.
    pub fn job_kill(&mut self, ids: &[i64]) -> Result<()> {
        self.ids_call(ids, |length| Request::JobKill { length })
    }

    /// Forgets the ended jobs `ids`.
    pub fn job_reap(&mut self, ids: &[i64]) -> Result<()> {
        self.ids_call(ids, |length| Request::JobReap { length })
    }

    /// The records of the jobs `ids`, as the server's JSON array.
    pub fn job_status(&mut self, ids: &[i64]) -> Result<String> {
        let payload = id_array(ids);
        let req = Request::JobStatus {
            length: payload.len() as u64,
        };
        self.json_reply(&req, payload.as_bytes())
    }

    /// Waits up to `timeout` seconds for job `id` to end (0: any of the caller's jobs; a
    /// negative id: any job numbered at least `-id`; a negative timeout: the server's longest
    /// wait, 30 s in cctools and roost); the records of the ended, unreaped jobs as a JSON
    /// array, `[]` when none ended in time.
    pub fn job_wait(&mut self, id: i64, timeout: i64) -> Result<String> {
        self.json_reply(&Request::JobWait { id, timeout }, &[])
    }

    fn ids_call(&mut self, ids: &[i64], make: impl FnOnce(u64) -> Request) -> Result<()> {
        let payload = id_array(ids);
        let req = make(payload.len() as u64);
        self.guard(|c| c.call(&req, payload.as_bytes())).map(drop)
    }

    fn json_reply(&mut self, req: &Request, payload: &[u8]) -> Result<String> {
        self.guard(|c| {
            let n = c.call(req, payload)?;
            if n > MAX_JOB_REPLY {
                return Err(Error::Protocol(roost_wire::WireError::BadReply(
                    "job records longer than 16 MiB",
                )));
            }
            let bytes = c.read_bytes(n)?;
            String::from_utf8(bytes).map_err(|_| {
                Error::Protocol(roost_wire::WireError::BadReply("job records not UTF-8"))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_arrays_are_json() {
        assert_eq!(id_array(&[]), "[]");
        assert_eq!(id_array(&[1, -2, 30]), "[1,-2,30]");
    }
}
