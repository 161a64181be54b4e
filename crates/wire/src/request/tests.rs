//! Tests of request parsing and writing: round trips, cctools' exact lines, refusals, garbage.

use super::*;
use crate::ErrorCode;

fn p(line: &str) -> Result<Request, WireError> {
    Request::parse(line.as_bytes())
}

/// One instance of every RPC, with awkward but legal values.
fn samples() -> Vec<Request> {
    let path = "/dir with space/é%x".as_bytes().to_vec();
    let other = b"/b".to_vec();
    let name = b"user.tag".to_vec();
    let rw = OpenFlags::from_letters(b"rwct").unwrap();
    vec![
        Request::Open {
            path: path.clone(),
            flags: rw,
            mode: 0o644,
        },
        Request::Close { fd: 3 },
        Request::Pread {
            fd: 3,
            length: 65536,
            offset: 5 << 32,
        },
        Request::Pwrite {
            fd: 3,
            length: 10,
            offset: 0,
        },
        Request::Sread {
            fd: 1,
            length: 100,
            stride_length: 10,
            stride_skip: 20,
            offset: 0,
        },
        Request::Swrite {
            fd: 1,
            length: 100,
            stride_length: 10,
            stride_skip: 20,
            offset: 7,
        },
        Request::Fstat { fd: 0 },
        Request::Fstatfs { fd: 0 },
        Request::Fsync { fd: 0 },
        Request::Fchmod { fd: 0, mode: 0o755 },
        Request::Fchown {
            fd: 0,
            uid: -1,
            gid: 100,
        },
        Request::Ftruncate { fd: 0, length: 0 },
        Request::Stat { path: path.clone() },
        Request::Lstat { path: path.clone() },
        Request::Statfs {
            path: b"/".to_vec(),
        },
        Request::Access {
            path: path.clone(),
            mode: 4,
        },
        Request::Chmod {
            path: path.clone(),
            mode: 0o600,
        },
        Request::Chown {
            path: path.clone(),
            uid: 1,
            gid: 2,
        },
        Request::Lchown {
            path: path.clone(),
            uid: 1,
            gid: 2,
        },
        Request::Truncate {
            path: path.clone(),
            length: 1 << 40,
        },
        Request::Utime {
            path: path.clone(),
            actime: 100,
            modtime: -200,
        },
        Request::Lutime {
            path: path.clone(),
            actime: 7,
            modtime: 8,
        },
        Request::Unlink { path: path.clone() },
        Request::Rename {
            path: path.clone(),
            new_path: other.clone(),
        },
        Request::Link {
            path: path.clone(),
            new_path: other.clone(),
        },
        Request::Symlink {
            target: b"../a b".to_vec(),
            path: other.clone(),
        },
        Request::Readlink {
            path: path.clone(),
            length: 4096,
        },
        Request::Mkdir {
            path: path.clone(),
            mode: 0o777,
        },
        Request::Rmdir { path: path.clone() },
        Request::Rmall { path: path.clone() },
        Request::Getdir { path: path.clone() },
        Request::Getlongdir { path: path.clone() },
        Request::Getfile { path: path.clone() },
        Request::Putfile {
            path: path.clone(),
            mode: 0o644,
            length: 12,
        },
        Request::Getstream { path: path.clone() },
        Request::Putstream { path: path.clone() },
        Request::Md5 { path: path.clone() },
        Request::Hash {
            algorithm: "sha256".into(),
            path: path.clone(),
        },
        Request::Whoami { length: 1024 },
        Request::Whoareyou {
            host: "host.example.org:9094".into(),
            length: 1024,
        },
        Request::Getacl { path: path.clone() },
        Request::Setacl {
            path: path.clone(),
            subject: "hostname:*.nd.edu".into(),
            rights: "rwlv(rwl)".into(),
        },
        Request::Resetacl {
            path: path.clone(),
            rights: "rwl".into(),
        },
        Request::Getxattr {
            path: path.clone(),
            name: name.clone(),
        },
        Request::Fgetxattr {
            fd: 4,
            name: name.clone(),
        },
        Request::Lgetxattr {
            path: path.clone(),
            name: name.clone(),
        },
        Request::Listxattr { path: path.clone() },
        Request::Flistxattr { fd: 4 },
        Request::Llistxattr { path: path.clone() },
        Request::Setxattr {
            path: path.clone(),
            name: name.clone(),
            length: 3,
            flags: 0,
        },
        Request::Fsetxattr {
            fd: 4,
            name: name.clone(),
            length: 3,
            flags: 1,
        },
        Request::Lsetxattr {
            path: path.clone(),
            name: name.clone(),
            length: 3,
            flags: 2,
        },
        Request::Removexattr {
            path: path.clone(),
            name: name.clone(),
        },
        Request::Fremovexattr {
            fd: 4,
            name: name.clone(),
        },
        Request::Lremovexattr { path, name },
        Request::Explain {},
        Request::GroupOpen { length: 12 },
        Request::GroupOp { gid: 3, length: 40 },
        Request::Ledger {
            offset: 4096,
            length: 1 << 20,
        },
        Request::JobCreate { length: 120 },
        Request::JobCommit { length: 3 },
        Request::JobKill { length: 3 },
        Request::JobStatus { length: 5 },
        Request::JobWait {
            id: -4,
            timeout: 10,
        },
        Request::JobReap { length: 3 },
    ]
}

#[test]
fn every_rpc_round_trips_through_its_line() {
    let all = samples();
    assert_eq!(all.len(), Request::NAMES.len(), "a sample per RPC");
    for req in all {
        let line = req.to_line().unwrap();
        assert!(line.ends_with(b"\n") && !line[..line.len() - 1].contains(&b'\n'));
        assert_eq!(
            Request::parse(&line).unwrap(),
            req,
            "{}",
            String::from_utf8_lossy(&line)
        );
    }
}

#[test]
fn lines_look_like_cctools_lines() {
    let req = Request::Open {
        path: b"/d/a b".to_vec(),
        flags: OpenFlags::from_letters(b"rwc").unwrap(),
        mode: 420,
    };
    assert_eq!(req.to_line().unwrap(), b"open /d/a%20b rwc 420\n");
    let req = Request::Pwrite {
        fd: 0,
        length: 5,
        offset: 0,
    };
    assert_eq!(req.to_line().unwrap(), b"pwrite 0 5 0\n");
    let req = Request::Hash {
        algorithm: "sha1".into(),
        path: b"/f".to_vec(),
    };
    assert_eq!(req.to_line().unwrap(), b"hash sha1 /f\n");
}

#[test]
fn parses_lines_captured_from_the_cctools_client() {
    assert_eq!(
        p("mkdir /%C3%A9%20x 511\n").unwrap(),
        Request::Mkdir {
            path: "/é x".as_bytes().to_vec(),
            mode: 511
        }
    );
    assert_eq!(
        p("whoami 1023\n").unwrap(),
        Request::Whoami { length: 1023 }
    );
    assert_eq!(
        p("putfile /d/p 420 4\n").unwrap(),
        Request::Putfile {
            path: b"/d/p".to_vec(),
            mode: 420,
            length: 4
        }
    );
    assert_eq!(
        p("utime /f 100 200").unwrap(),
        Request::Utime {
            path: b"/f".to_vec(),
            actime: 100,
            modtime: 200
        }
    );
}

#[test]
fn tolerates_extra_spaces_tabs_and_crlf() {
    assert_eq!(
        p("stat   /a\t\r\n").unwrap(),
        Request::Stat {
            path: b"/a".to_vec()
        }
    );
    assert_eq!(p("  close 3").unwrap(), Request::Close { fd: 3 });
}

#[test]
fn stat_and_statfs_are_distinct_rpcs() {
    // cctools' sscanf matching could take "statfs x" for "stat fs"; here names are whole words.
    assert_eq!(
        p("statfs /").unwrap(),
        Request::Statfs {
            path: b"/".to_vec()
        }
    );
    assert_eq!(
        p("stat /").unwrap(),
        Request::Stat {
            path: b"/".to_vec()
        }
    );
}

#[test]
fn payload_kinds() {
    assert_eq!(p("pwrite 1 10 0").unwrap().payload(), Payload::Inline(10));
    assert_eq!(p("swrite 1 10 1 2 0").unwrap().inline_payload_len(), 10);
    assert_eq!(
        p("setxattr /a user.x 3 0").unwrap().payload(),
        Payload::Inline(3)
    );
    assert_eq!(
        p("fsetxattr 1 user.x 3 0").unwrap().payload(),
        Payload::Inline(3)
    );
    assert_eq!(
        p("putfile /a 420 9").unwrap().payload(),
        Payload::AfterAck(9)
    );
    assert_eq!(p("putfile /a 420 9").unwrap().inline_payload_len(), 0);
    assert_eq!(p("putstream /a").unwrap().payload(), Payload::UntilClose);
    assert_eq!(p("stat /a").unwrap().payload(), Payload::None);
    assert_eq!(p("job_create 2").unwrap().payload(), Payload::Inline(2));
    assert_eq!(
        p("ticket_register self 3600 42").unwrap().payload(),
        Payload::Inline(42)
    );
    assert_eq!(p("job_commit 1").unwrap().payload(), Payload::Inline(1));
    assert_eq!(p("job_wait 3 10").unwrap().payload(), Payload::None);
}

#[test]
fn reply_bodies() {
    assert_eq!(p("open /a r 0").unwrap().reply_body(), ReplyBody::StatLine);
    assert_eq!(p("pread 1 1 0").unwrap().reply_body(), ReplyBody::Data);
    assert_eq!(p("getdir /").unwrap().reply_body(), ReplyBody::Names);
    assert_eq!(
        p("getlongdir /").unwrap().reply_body(),
        ReplyBody::LongNames
    );
    assert_eq!(p("getacl /").unwrap().reply_body(), ReplyBody::Acl);
    assert_eq!(p("statfs /").unwrap().reply_body(), ReplyBody::StatFsLine);
    assert_eq!(
        p("putfile /a 420 1").unwrap().reply_body(),
        ReplyBody::PutAck
    );
    assert_eq!(p("getstream /a").unwrap().reply_body(), ReplyBody::Stream);
    assert_eq!(p("close 1").unwrap().reply_body(), ReplyBody::None);
}

#[test]
fn cctools_only_rpcs_are_unsupported_not_unknown() {
    for name in ["mkalloc", "lsalloc"] {
        let req = p(&format!("{name} 1 2")).unwrap();
        assert!(matches!(&req, Request::Unsupported { name: n, .. } if n == name));
        assert_eq!(req.name(), name);
    }
    let req = p("mkalloc /z 100 493").unwrap();
    assert_eq!(Request::parse(&req.to_line().unwrap()).unwrap(), req);
}

#[test]
fn unsupported_requests_with_control_bytes_in_words_are_not_rewritten() {
    // Found by the fuzzer: a trailing \r in a raw word would be eaten on the way back.
    let req = Request::parse(b"ticket_register \r[ &5 1\x03&\r ").unwrap();
    assert_eq!(req.to_line(), Err(WireError::BadArgument("args")));
}

#[test]
fn unknown_words_are_parse_errors_answered_invalid_request() {
    let err = p("frobnicate 1").unwrap_err();
    assert_eq!(err, WireError::UnknownRpc("frobnicate".into()));
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert!(p("STAT /").is_err());
}

#[test]
fn empty_lines_are_reported_as_empty() {
    assert_eq!(p(""), Err(WireError::Empty));
    assert_eq!(p("\n"), Err(WireError::Empty));
    assert_eq!(p("   \r\n"), Err(WireError::Empty));
}

#[test]
fn bad_arguments_are_refused() {
    assert_eq!(p("stat"), Err(WireError::MissingArgument("path")));
    assert_eq!(p("close 1 2"), Err(WireError::ExtraArgument));
    assert_eq!(p("close x"), Err(WireError::BadArgument("fd")));
    assert_eq!(p("pread 1 -5 0"), Err(WireError::BadArgument("length")));
    assert_eq!(p("pread 1 5 -1"), Err(WireError::BadArgument("offset")));
    assert_eq!(
        p("pread 1 5 99999999999999999999"),
        Err(WireError::BadArgument("offset"))
    );
    assert_eq!(p("open /a rq 0"), Err(WireError::BadArgument("flags")));
    assert_eq!(
        p("chmod /a 4294967296"),
        Err(WireError::BadArgument("mode"))
    );
    assert_eq!(p("stat /a%2"), Err(WireError::BadEscape));
    assert_eq!(p("hash %FF /a"), Err(WireError::BadArgument("algorithm")));
}

#[test]
fn nul_and_newline_in_decoded_paths_are_refused() {
    assert_eq!(p("stat /a%00b"), Err(WireError::ForbiddenByte(0)));
    assert_eq!(p("rename /a /b%0A"), Err(WireError::ForbiddenByte(b'\n')));
    let req = Request::Stat {
        path: b"/a\0".to_vec(),
    };
    assert_eq!(req.to_line(), Err(WireError::ForbiddenByte(0)));
    let req = Request::Stat { path: Vec::new() };
    assert_eq!(req.to_line(), Err(WireError::EmptyArgument("path")));
}

#[test]
fn lines_over_1024_bytes_are_refused_both_ways() {
    let long = format!("stat /{}\n", "a".repeat(1024));
    assert_eq!(p(&long), Err(WireError::LineTooLong));
    assert_eq!(p(&long).unwrap_err().code(), ErrorCode::NameTooLong);
    let exact = format!("stat /{}\n", "a".repeat(1024 - 7));
    assert_eq!(exact.len(), 1024);
    assert!(p(&exact).is_ok());
    let req = Request::Stat {
        path: vec![b' '; 400],
    };
    assert_eq!(req.to_line(), Err(WireError::LineTooLong));
}

/// A tiny deterministic PRNG (xorshift64*), enough to shake the parser without new deps.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_garbage_never_panics_the_parser() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let alphabet: &[u8] = b" \t\n\r%0123456789abcdefABCDEF-+/.rwatcxs\0\xff";
    for i in 0..20_000 {
        let len = rng.below(if i % 100 == 0 { 2000 } else { 80 });
        let mut line: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(2) == 0 {
                    alphabet[rng.below(alphabet.len())]
                } else {
                    rng.next() as u8
                }
            })
            .collect();
        if rng.below(2) == 0 {
            // Start with a real RPC name so parsing reaches the arguments.
            let name = Request::NAMES[rng.below(Request::NAMES.len())];
            let mut prefixed = format!("{name} ").into_bytes();
            prefixed.append(&mut line);
            line = prefixed;
        }
        if let Ok(req) = Request::parse(&line) {
            // Anything accepted must be writable and read back identically.
            if let Ok(again) = req.to_line() {
                assert_eq!(Request::parse(&again).unwrap(), req);
            }
        }
    }
}

#[test]
fn mutated_valid_lines_never_panic_the_parser() {
    let mut rng = Rng(42);
    let lines: Vec<Vec<u8>> = samples().iter().map(|r| r.to_line().unwrap()).collect();
    for _ in 0..20_000 {
        let mut line = lines[rng.below(lines.len())].clone();
        for _ in 0..=rng.below(4) {
            let at = rng.below(line.len());
            match rng.below(3) {
                0 => line[at] = rng.next() as u8,
                1 => {
                    line.remove(at);
                }
                _ => line.insert(at, rng.next() as u8),
            }
            if line.is_empty() {
                break;
            }
        }
        let _ = Request::parse(&line);
        let _ = Request::announced_payload(&line);
    }
}

#[test]
fn group_rpcs_carry_their_message_and_answer_with_data() {
    let open = p("group_open 120").unwrap();
    assert_eq!(open.payload(), Payload::Inline(120));
    assert_eq!(open.reply_body(), ReplyBody::Data);
    let op = p("group_op 2 40").unwrap();
    assert_eq!(op, Request::GroupOp { gid: 2, length: 40 });
    assert_eq!(op.inline_payload_len(), 40);
    assert_eq!(op.reply_body(), ReplyBody::Data);
    assert!(p("group_op 2").is_err());
    assert!(p("group_open -1").is_err());
}

#[test]
fn a_refused_line_still_says_how_much_payload_follows() {
    let of = |line: &str| Request::announced_payload(line.as_bytes());
    // A bad argument other than the length: the payload is still 12 bytes.
    assert!(p("pwrite 0 12 -1").is_err());
    assert_eq!(of("pwrite 0 12 -1\n"), Some(Ok(12)));
    assert_eq!(of("swrite x 5 1 1 0"), Some(Ok(5)));
    assert_eq!(of("setxattr %00 user.a 7 0"), Some(Ok(7)));
    assert_eq!(of("fsetxattr 3 user.a 9 zz"), Some(Ok(9)));
    assert_eq!(of("job_create 10 extra"), Some(Ok(10)));
    assert_eq!(of("group_op x 40"), Some(Ok(40)));
    assert_eq!(of("ticket_register a b 30"), Some(Ok(30)));
    // A length that does not parse, or none: nothing says where the next request starts.
    assert!(matches!(of("pwrite 0 -8 0"), Some(Err(_))));
    assert!(matches!(of("pwrite 0"), Some(Err(_))));
    assert!(matches!(of("job_commit twelve"), Some(Err(_))));
    let long = format!("setxattr /{} user.a 3 0", "a".repeat(2000));
    assert!(matches!(of(&long), Some(Err(WireError::LineTooLong))));
    // RPCs without an inline payload, and unknown ones.
    assert_eq!(of("pread 0 12 -1"), None);
    assert_eq!(of("putfile /f 420 -3"), None);
    assert_eq!(of("nosuchrpc 12"), None);
    assert_eq!(of(""), None);
}

#[test]
fn every_inline_payload_rpc_has_a_length_argument() {
    for name in Request::NAMES {
        if let Some(at) = Request::inline_length_position(name.as_bytes()) {
            assert!(at < 5, "{name}");
        }
    }
    for name in [
        "pwrite",
        "swrite",
        "setxattr",
        "fsetxattr",
        "lsetxattr",
        "job_create",
        "job_commit",
        "job_kill",
        "job_status",
        "job_reap",
        "group_open",
        "group_op",
    ] {
        assert!(
            Request::inline_length_position(name.as_bytes()).is_some(),
            "{name}"
        );
    }
}
