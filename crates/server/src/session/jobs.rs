//! The job RPCs on a connection: read the JSON that follows the request line (at most
//! [`MAX_DESCRIPTION`] bytes), hand it to the server's [`crate::jobs::Jobs`], and answer as
//! cctools does: the new id for `job_create`, `0` for commit, kill and reap, a length and
//! JSON records for status and wait. Without `--jobs` every job RPC is answered
//! NOT_SUPPORTED after its payload has been read. A refusal's reason is logged and kept for
//! the `explain` extension.

use super::{Session, Step};
use crate::jobs::description::MAX_DESCRIPTION;
use crate::jobs::{JobError, Jobs};
use crate::log::{self, Level};
use roost_wire::{ErrorCode, Request};

impl Session<'_> {
    /// Answers one job RPC.
    pub(super) fn job_request(&mut self, request: &Request) -> Step {
        let length = match request {
            Request::JobCreate { length }
            | Request::JobCommit { length }
            | Request::JobKill { length }
            | Request::JobStatus { length }
            | Request::JobReap { length } => *length,
            _ => 0,
        };
        if self.payload_over(length, MAX_DESCRIPTION)? {
            return Ok(());
        }
        self.read_payload(length)?;
        let payload = std::mem::take(&mut self.buffer);
        let answer = match &self.shared.jobs {
            None => Err(JobError::new(
                ErrorCode::NotSupported,
                "this server does not run jobs (roost serve --jobs)".into(),
            )),
            Some(jobs) => answer(jobs, &self.subject, request, &payload[..length as usize]),
        };
        self.buffer = payload;
        match answer {
            Ok(Answer::Result(n)) => self.send_result(n),
            Ok(Answer::Json(data)) => self.send_data(Ok(data)),
            Err(e) => {
                log::event(
                    Level::Info,
                    "job-refused",
                    &[
                        ("subject", &self.subject),
                        ("rpc", &request.name()),
                        ("why", &e.message),
                    ],
                );
                self.last_refusal = Some(e.message);
                self.send_error(e.code)
            }
        }
    }
}

enum Answer {
    Result(i64),
    Json(Vec<u8>),
}

fn answer(
    jobs: &Jobs,
    subject: &str,
    request: &Request,
    payload: &[u8],
) -> Result<Answer, JobError> {
    Ok(match request {
        Request::JobCreate { .. } => Answer::Result(jobs.create(subject, payload)?),
        Request::JobCommit { .. } => {
            jobs.commit(subject, payload)?;
            Answer::Result(0)
        }
        Request::JobKill { .. } => {
            jobs.kill(subject, payload)?;
            Answer::Result(0)
        }
        Request::JobReap { .. } => {
            jobs.reap(subject, payload)?;
            Answer::Result(0)
        }
        Request::JobStatus { .. } => Answer::Json(jobs.status(subject, payload)?),
        Request::JobWait { id, timeout } => Answer::Json(jobs.wait(subject, *id, *timeout)?),
        other => {
            return Err(JobError::new(
                ErrorCode::InvalidRequest,
                format!("{} is not a job RPC", other.name()),
            ))
        }
    })
}
