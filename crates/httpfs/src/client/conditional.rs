//! Conditional requests for content fetched again (a directory's index once its TTL is
//! over): what an answer said of its content (`ETag`, `Last-Modified`) is kept and sent
//! back the next time as `If-None-Match` and `If-Modified-Since`, so an unchanged index
//! costs a 304 with no body, and no parsing.
//!
//! Both validators have a resolution of one second where servers make them from the
//! file's time (`Last-Modified` always; nginx's and Apache's `ETag` are the time and the
//! size): a file written again within the second its answer was made, to the same size,
//! would keep them and never be fetched again. So validators are kept only for a content
//! that had not changed for [`SETTLED`] seconds when it was sent (by the answer's `Date`);
//! a fresher one is fetched whole the next time, as without validators.

/// How long before the answer (its `Date`) a content must have last changed for its
/// validators to be kept.
pub const SETTLED: i64 = 2;

/// What an answer said of its content, to ask later whether it changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Validators {
    etag: Option<String>,
    last_modified: Option<String>,
}

impl Validators {
    /// The validators of an answer with these `ETag`, `Last-Modified` and `Date` headers
    /// (`now`: seconds since the epoch, for an answer without a `Date`). `None` when it has
    /// neither validator, or when its `Last-Modified` is within [`SETTLED`] seconds of the
    /// answer (or unreadable): the content may change again without them changing.
    pub fn of(
        etag: Option<&str>,
        last_modified: Option<&str>,
        date: Option<&str>,
        now: i64,
    ) -> Option<Validators> {
        let etag = etag.map(str::trim).filter(|e| !e.is_empty());
        let last_modified = last_modified.map(str::trim).filter(|l| !l.is_empty());
        if let Some(lm) = last_modified {
            let changed = super::http_date(lm)?;
            let sent = date.and_then(super::http_date).unwrap_or(now);
            if sent - changed < SETTLED {
                return None;
            }
        }
        if etag.is_none() && last_modified.is_none() {
            return None;
        }
        Some(Validators {
            etag: etag.map(str::to_string),
            last_modified: last_modified.map(str::to_string),
        })
    }

    /// The validators as one line (kept in the cache with an index): the two values
    /// separated by a NUL, either empty when absent.
    pub fn to_line(&self) -> String {
        format!(
            "{}\0{}",
            self.etag.as_deref().unwrap_or(""),
            self.last_modified.as_deref().unwrap_or("")
        )
    }

    /// The validators [`Validators::to_line`] wrote; `None` for anything else (a control
    /// character, neither value).
    pub fn from_line(line: &str) -> Option<Validators> {
        let (etag, last_modified) = line.split_once('\0')?;
        let value = |v: &str| -> Option<Option<String>> {
            if v.chars().any(|c| c.is_control()) {
                return None;
            }
            Some((!v.is_empty()).then(|| v.to_string()))
        };
        let (etag, last_modified) = (value(etag)?, value(last_modified)?);
        if etag.is_none() && last_modified.is_none() {
            return None;
        }
        Some(Validators {
            etag,
            last_modified,
        })
    }

    /// The headers that ask for the content unless it is still this one.
    pub fn headers(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        if let Some(etag) = &self.etag {
            out.push(("If-None-Match", etag.as_str()));
        }
        if let Some(lm) = &self.last_modified {
            out.push(("If-Modified-Since", lm.as_str()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LM: &str = "Tue, 24 Nov 2026 18:00:00 GMT";
    const NOW: i64 = 1_795_543_200 + 3600;

    #[test]
    fn both_validators_are_sent_back() {
        let v = Validators::of(
            Some("\"6a-5f1\""),
            Some(LM),
            Some("Tue, 24 Nov 2026 18:00:02 GMT"),
            NOW,
        )
        .unwrap();
        assert_eq!(
            v.headers(),
            [("If-None-Match", "\"6a-5f1\""), ("If-Modified-Since", LM)]
        );
        // Python's http.server sends no ETag.
        let v = Validators::of(None, Some(LM), None, NOW).unwrap();
        assert_eq!(v.headers(), [("If-Modified-Since", LM)]);
        let v = Validators::of(Some("W/\"x\""), None, None, NOW).unwrap();
        assert_eq!(v.headers(), [("If-None-Match", "W/\"x\"")]);
    }

    #[test]
    fn validators_come_back_from_their_line() {
        for v in [
            Validators::of(Some("\"6a-5f1\""), Some(LM), None, NOW),
            Validators::of(None, Some(LM), None, NOW),
            Validators::of(Some("W/\"x y\""), None, None, NOW),
        ] {
            let v = v.unwrap();
            assert_eq!(Validators::from_line(&v.to_line()), Some(v));
        }
        for bad in ["", "\0", "e", "e\0\n", "a\tb\0", "\0x\0y\r"] {
            assert_eq!(Validators::from_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_content_changed_just_before_its_answer_keeps_none() {
        for date in [
            "Tue, 24 Nov 2026 18:00:00 GMT",
            "Tue, 24 Nov 2026 18:00:01 GMT",
            "Tue, 24 Nov 2026 17:59:00 GMT",
        ] {
            assert_eq!(
                Validators::of(Some("\"e\""), Some(LM), Some(date), NOW),
                None,
                "{date}"
            );
        }
        // No Date: the time the answer came.
        assert_eq!(Validators::of(None, Some(LM), None, 1_795_543_201), None);
        assert_eq!(Validators::of(None, Some("yesterday"), None, NOW), None);
        assert_eq!(Validators::of(None, None, None, NOW), None);
        assert_eq!(Validators::of(Some(" "), None, None, NOW), None);
    }
}
