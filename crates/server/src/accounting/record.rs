//! One ledger record: what it says ([`Kind`]), its line format and its checksum.
//!
//! A record is one line of text, at most [`LINE_MAX`] bytes with its newline:
//!
//! ```text
//! t=1764000000 h=13 use user=hmac:alice rpcs=12 read=4096 written=0 #8c1f3a02
//! ```
//!
//! `t` is when it was written (Unix seconds), `h` the server's local hour then (0 to 23, the
//! hour prices are looked up by), then the kind and its `key=value` fields in a fixed order,
//! then a space, `#` and the CRC-32 (IEEE) of every byte before that space, as 8 lower-case
//! hex digits. Text values are percent-encoded (every byte outside `A-Z a-z 0-9 . _ : @ / + -
//! *` as `%XX`), so a value never holds a space, `=` or `#`.

use std::fmt::Write as _;

/// The longest record line, newline included; a longer line is not a record.
pub const LINE_MAX: usize = 4096;

/// What a record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The server (re)started: who owns it, its class for prices, its cores.
    Start {
        host: String,
        owner: String,
        class: String,
        cores: u64,
    },
    /// A user's file service since the last `use` record of that user: requests, bytes
    /// read from and written to the export.
    Use {
        user: String,
        rpcs: u64,
        read: u64,
        written: u64,
    },
    /// A job of `user`'s ended having used `cpu_us` microseconds of CPU (user and system).
    Job { user: String, id: i64, cpu_us: u64 },
    /// `user`'s files held `bytes` for the last `secs` seconds.
    Storage { user: String, bytes: u64, secs: u64 },
    /// For the last `secs` seconds the owner offered guest jobs `cpu_pct` percent of `cores`
    /// cores, and `mem` bytes of memory (`None`: no limit).
    Offer {
        secs: u64,
        cores: u64,
        cpu_pct: u64,
        mem: Option<u64>,
    },
}

/// A record: when, the local hour, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub time: i64,
    pub hour: u8,
    pub kind: Kind,
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Start { .. } => "start",
            Kind::Use { .. } => "use",
            Kind::Job { .. } => "job",
            Kind::Storage { .. } => "storage",
            Kind::Offer { .. } => "offer",
        }
    }
}

impl Record {
    /// The record's line, newline included.
    pub fn to_line(&self) -> String {
        let mut line = format!("t={} h={} {}", self.time, self.hour, self.kind.name());
        let mut text = |key: &str, value: &str| {
            let _ = write!(line, " {key}={}", encode(value));
        };
        match &self.kind {
            Kind::Start {
                host, owner, class, ..
            } => {
                text("host", host);
                text("owner", owner);
                text("class", class);
            }
            Kind::Use { user, .. } | Kind::Job { user, .. } | Kind::Storage { user, .. } => {
                text("user", user)
            }
            Kind::Offer { .. } => {}
        }
        for (key, value) in self.numbers() {
            let _ = write!(line, " {key}={value}");
        }
        if let Kind::Offer { mem, .. } = &self.kind {
            match mem {
                Some(m) => {
                    let _ = write!(line, " mem={m}");
                }
                None => line.push_str(" mem=none"),
            }
        }
        let crc = crc32(line.as_bytes());
        let _ = writeln!(line, " #{crc:08x}");
        line
    }

    /// The numeric fields, in line order.
    fn numbers(&self) -> Vec<(&'static str, i128)> {
        match &self.kind {
            Kind::Start { cores, .. } => vec![("cores", *cores as i128)],
            Kind::Use {
                rpcs,
                read,
                written,
                ..
            } => vec![
                ("rpcs", *rpcs as i128),
                ("read", *read as i128),
                ("written", *written as i128),
            ],
            Kind::Job { id, cpu_us, .. } => vec![("id", *id as i128), ("cpu_us", *cpu_us as i128)],
            Kind::Storage { bytes, secs, .. } => {
                vec![("bytes", *bytes as i128), ("secs", *secs as i128)]
            }
            Kind::Offer {
                secs,
                cores,
                cpu_pct,
                ..
            } => vec![
                ("secs", *secs as i128),
                ("cores", *cores as i128),
                ("cpu_pct", *cpu_pct as i128),
            ],
        }
    }

    /// Parses one line (without its newline). The error says what is wrong with it.
    pub fn parse(line: &[u8]) -> Result<Record, String> {
        if line.len() >= LINE_MAX {
            return Err(format!("longer than {} bytes", LINE_MAX - 1));
        }
        let text = std::str::from_utf8(line).map_err(|_| "not UTF-8 text".to_string())?;
        let (body, sum) = text
            .rsplit_once(" #")
            .ok_or("no checksum (the record is cut short)")?;
        if sum.len() != 8 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("checksum {sum:?} is not 8 hex digits"));
        }
        let expected = u32::from_str_radix(sum, 16).map_err(|_| "bad checksum".to_string())?;
        if crc32(body.as_bytes()) != expected {
            return Err("checksum mismatch (the record was changed or cut)".into());
        }
        let mut words = body.split(' ');
        let time = number::<i64>(field(words.next(), "t")?, "t")?;
        let hour = number::<u8>(field(words.next(), "h")?, "h")?;
        if hour > 23 {
            return Err(format!("h={hour}: expected an hour from 0 to 23"));
        }
        let kind_name = words.next().ok_or("no record kind")?;
        let mut fields = Fields {
            words,
            kind: kind_name,
        };
        let kind = match kind_name {
            "start" => Kind::Start {
                host: fields.text("host")?,
                owner: fields.text("owner")?,
                class: fields.text("class")?,
                cores: fields.number("cores")?,
            },
            "use" => Kind::Use {
                user: fields.text("user")?,
                rpcs: fields.number("rpcs")?,
                read: fields.number("read")?,
                written: fields.number("written")?,
            },
            "job" => Kind::Job {
                user: fields.text("user")?,
                id: fields.number("id")?,
                cpu_us: fields.number("cpu_us")?,
            },
            "storage" => Kind::Storage {
                user: fields.text("user")?,
                bytes: fields.number("bytes")?,
                secs: fields.number("secs")?,
            },
            "offer" => {
                let secs = fields.number("secs")?;
                let cores = fields.number("cores")?;
                let cpu_pct = fields.number("cpu_pct")?;
                if cpu_pct > 100 {
                    return Err(format!("cpu_pct={cpu_pct}: expected at most 100"));
                }
                let mem = match fields.raw("mem")? {
                    "none" => None,
                    m => Some(number(m, "mem")?),
                };
                Kind::Offer {
                    secs,
                    cores,
                    cpu_pct,
                    mem,
                }
            }
            other => return Err(format!("unknown record kind {other:?}")),
        };
        if let Some(extra) = fields.words.next() {
            return Err(format!("unexpected {extra:?} after the {kind_name} fields"));
        }
        Ok(Record { time, hour, kind })
    }
}

/// The value of word `word`, which must be `key=VALUE`.
fn field<'a>(word: Option<&'a str>, key: &str) -> Result<&'a str, String> {
    let word = word.ok_or_else(|| format!("no {key}="))?;
    word.strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('='))
        .ok_or_else(|| format!("{word:?}: expected {key}=..."))
}

fn number<T: std::str::FromStr>(text: &str, key: &str) -> Result<T, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return Err(format!("{key}={text:?}: expected a whole number"));
    }
    text.parse()
        .map_err(|_| format!("{key}={text:?}: expected a whole number in range"))
}

/// The `key=value` words of one record, read in order.
struct Fields<'a, I: Iterator<Item = &'a str>> {
    words: I,
    kind: &'a str,
}

impl<'a, I: Iterator<Item = &'a str>> Fields<'a, I> {
    fn raw(&mut self, key: &str) -> Result<&'a str, String> {
        field(self.words.next(), key).map_err(|e| format!("{} record: {e}", self.kind))
    }

    fn text(&mut self, key: &str) -> Result<String, String> {
        let raw = self.raw(key)?;
        decode(raw).ok_or_else(|| format!("{key}={raw:?}: bad percent-encoding"))
    }

    fn number<T: std::str::FromStr>(&mut self, key: &str) -> Result<T, String> {
        number(self.raw(key)?, key)
    }
}

fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b".:_@/+-*".contains(&b)
}

/// Percent-encodes every byte but the plain ones (an empty text stays empty: `user=`).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b if plain(b) => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// CRC-32 with the IEEE polynomial (as zlib, PNG and Ethernet), bit by bit over a table
/// built once.
pub fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = [0u32; 256];
        for (n, slot) in table.iter_mut().enumerate() {
            let mut c = n as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        table
    });
    !data.iter().fold(!0u32, |c, &b| {
        table[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use roost_group::fuzz_check::Rng;

    pub(crate) fn samples() -> Vec<Record> {
        let at = |kind| Record {
            time: 1_764_000_000,
            hour: 13,
            kind,
        };
        vec![
            at(Kind::Start {
                host: "fs7.example.org:9094".into(),
                owner: "alice".into(),
                class: "fast".into(),
                cores: 8,
            }),
            at(Kind::Use {
                user: "hmac:bob smith=#%".into(),
                rpcs: 12,
                read: 4096,
                written: u64::MAX,
            }),
            at(Kind::Job {
                user: "unix:carol".into(),
                id: -3,
                cpu_us: 1_500_000,
            }),
            at(Kind::Storage {
                user: String::new(),
                bytes: 1 << 40,
                secs: 600,
            }),
            at(Kind::Offer {
                secs: 10,
                cores: 2,
                cpu_pct: 30,
                mem: Some(1 << 30),
            }),
            at(Kind::Offer {
                secs: 10,
                cores: 2,
                cpu_pct: 100,
                mem: None,
            }),
        ]
    }

    #[test]
    fn records_read_back_as_written() {
        for record in samples() {
            let line = record.to_line();
            assert!(line.ends_with('\n') && line.len() < LINE_MAX, "{line}");
            assert_eq!(line.matches('\n').count(), 1, "{line}");
            let back = Record::parse(line.trim_end_matches('\n').as_bytes()).unwrap();
            assert_eq!(back, record, "{line}");
        }
    }

    #[test]
    fn the_crc_is_the_standard_one() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn a_changed_or_cut_record_is_refused_with_the_reason() {
        let line = samples()[1].to_line();
        let line = line.trim_end();
        let changed = line.replacen("rpcs=12", "rpcs=13", 1);
        assert!(Record::parse(changed.as_bytes())
            .unwrap_err()
            .contains("checksum mismatch"));
        for cut in 0..line.len() {
            assert!(Record::parse(&line.as_bytes()[..cut]).is_err(), "cut {cut}");
        }
        let bad_hour = "t=1 h=24 use user=a rpcs=1 read=0 written=0";
        let sealed = format!("{bad_hour} #{:08x}", crc32(bad_hour.as_bytes()));
        assert!(Record::parse(sealed.as_bytes())
            .unwrap_err()
            .contains("h=24"));
        let unknown = "t=1 h=2 sneeze user=a";
        let sealed = format!("{unknown} #{:08x}", crc32(unknown.as_bytes()));
        assert!(Record::parse(sealed.as_bytes())
            .unwrap_err()
            .contains("unknown record kind"));
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = Rng(0x1ed9e7);
        let lines: Vec<String> = samples().iter().map(Record::to_line).collect();
        for round in 0..20_000 {
            let mut bytes = lines[round % lines.len()].clone().into_bytes();
            match round % 3 {
                0 => {
                    let i = rng.below(bytes.len());
                    bytes[i] = rng.next_u64() as u8;
                }
                1 => bytes.truncate(rng.below(bytes.len() + 1)),
                _ => {
                    bytes = (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect();
                }
            }
            let _ = Record::parse(&bytes);
        }
    }
}
