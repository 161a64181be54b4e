//! Many small requests at once: `pipeline` keeps up to `depth` requests in flight and returns
//! every reply in order, so stat-ing or removing a thousand files costs a few round trips
//! instead of a thousand.
//!
//! Only requests whose reply is self-contained qualify: a result line alone, or followed by a
//! stat line, a statfs line or counted data. Listings, whole-file and stream transfers, and
//! requests carrying a payload are refused before anything is sent.

use std::collections::VecDeque;

use roost_wire::{ReplyBody, Request, Stat, StatFs, WireError};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::lines::{read_line, REPLY_LINE_MAX};

/// A successful reply to one pipelined request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The result alone (e.g. `unlink`, `mkdir`, `close`).
    Value(u64),
    /// The result and a stat line (`stat`, `lstat`, `fstat`, `open`).
    Stat(u64, Stat),
    /// A statfs line (`statfs`, `fstatfs`).
    StatFs(StatFs),
    /// Counted data (`pread`, `readlink`, `getxattr`, `md5`, ...).
    Data(Vec<u8>),
}

impl Client {
    /// Sends `requests` with at most `depth` in flight and returns each one's reply, in order.
    /// The outer error is a connection failure (after which the connection is broken); the
    /// inner ones are the server's answers to individual requests.
    pub fn pipeline(&mut self, requests: &[Request], depth: usize) -> Result<Vec<Result<Reply>>> {
        for req in requests {
            let body = req.reply_body();
            let self_contained = matches!(
                body,
                ReplyBody::None | ReplyBody::StatLine | ReplyBody::StatFsLine | ReplyBody::Data
            );
            let whole_file = matches!(req, Request::Getfile { .. });
            if !self_contained || whole_file || req.payload() != roost_wire::Payload::None {
                return Err(Error::BadRequest(WireError::BadArgument(
                    "request cannot be pipelined",
                )));
            }
            req.to_line().map_err(Error::BadRequest)?;
        }
        let depth = depth.max(1);
        self.guard(|c| {
            let mut replies = Vec::with_capacity(requests.len());
            let mut in_flight = VecDeque::with_capacity(depth);
            let mut next = requests.iter();
            loop {
                while in_flight.len() < depth {
                    match next.next() {
                        Some(req) => {
                            c.send(req, &[])?;
                            in_flight.push_back(req);
                        }
                        None => break,
                    }
                }
                c.flush()?;
                let Some(req) = in_flight.pop_front() else {
                    break;
                };
                let n = match c.finish() {
                    Ok(n) => n,
                    Err(e @ Error::Remote { .. }) => {
                        replies.push(Err(e));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let reply = match req.reply_body() {
                    ReplyBody::StatLine => {
                        Reply::Stat(n, Stat::parse(&read_line(&mut c.reader, REPLY_LINE_MAX)?)?)
                    }
                    ReplyBody::StatFsLine => {
                        Reply::StatFs(StatFs::parse(&read_line(&mut c.reader, REPLY_LINE_MAX)?)?)
                    }
                    ReplyBody::Data if n > roost_wire::MAX_BLOCK => {
                        return Err(Error::Protocol(WireError::BadReply("reply too large")))
                    }
                    ReplyBody::Data => Reply::Data(c.read_bytes(n)?),
                    _ => Reply::Value(n),
                };
                replies.push(Ok(reply));
            }
            Ok(replies)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{Behaviour, Mock};
    use roost_wire::ErrorCode;

    #[test]
    fn replies_come_back_in_order_with_their_bodies_and_errors() {
        let mock = Mock::start(
            b"0123456789".to_vec(),
            Behaviour {
                batch: 3,
                ..Behaviour::default()
            },
        );
        let mut c = mock.client();
        let reqs = vec![
            Request::Fstat { fd: 0 },
            Request::Pread {
                fd: 0,
                length: 4,
                offset: 2,
            },
            Request::Unlink {
                path: b"/x".to_vec(),
            },
            Request::Pread {
                fd: 0,
                length: 4,
                offset: 8,
            },
        ];
        let replies = c.pipeline(&reqs, 3).unwrap();
        assert_eq!(replies.len(), 4);
        assert!(matches!(&replies[0], Ok(Reply::Stat(0, st)) if st.size == 10));
        assert_eq!(replies[1].as_ref().unwrap(), &Reply::Data(b"2345".to_vec()));
        assert!(replies[2].as_ref().unwrap_err().is(ErrorCode::NotSupported));
        assert_eq!(replies[3].as_ref().unwrap(), &Reply::Data(b"89".to_vec()));
        assert_eq!(*mock.max_batch.lock().unwrap(), 3);
        assert!(!c.is_broken());
    }

    #[test]
    fn requests_that_cannot_be_pipelined_are_refused_before_sending() {
        let mock = Mock::start(Vec::new(), Behaviour::default());
        let mut c = mock.client();
        for bad in [
            Request::Getdir {
                path: b"/".to_vec(),
            },
            Request::Getfile {
                path: b"/f".to_vec(),
            },
            Request::Pwrite {
                fd: 0,
                length: 1,
                offset: 0,
            },
            Request::Stat { path: Vec::new() },
        ] {
            let err = c.pipeline(&[Request::Fstat { fd: 0 }, bad], 4).unwrap_err();
            assert!(matches!(err, Error::BadRequest(_)));
        }
        assert_eq!(c.fstat(0).unwrap().size, 0, "nothing was sent");
    }
}
