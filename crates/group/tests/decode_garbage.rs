//! Relay messages come from the network: every decoder must refuse garbage without
//! panicking and round-trip what it accepts (`roost_group::fuzz_check`). This runs the
//! property over random bytes and over mutations of valid messages of every kind, with the
//! suite; `fuzz/fuzz_targets/group_decode.rs` runs the same property under libFuzzer.

use roost_group::aggregate::{DataAggr, StatusAggr};
use roost_group::blocks::{Piece, Signature};
use roost_group::fuzz_check::{check_decoders, Rng};
use roost_group::lines::{LineSpec, Pattern};
use roost_group::message::{Member, Op, OpRequest, OpenRequest, Reply, Whence};
use roost_group::node::encode_open_reply;
use roost_group::ranges::IndexSet;
use roost_wire::OpenFlags;

/// Valid messages of each kind.
fn seeds() -> Vec<Vec<u8>> {
    let lines = DataAggr::Lines(LineSpec {
        pattern: Pattern::Fixed("udp".into()),
        numbers: true,
        strip_syslog: true,
        complete_lines: false,
    });
    let ops = [
        Op::Read { length: 4096 },
        Op::Pread {
            length: 1,
            offset: 1 << 40,
        },
        Op::Write {
            data: b"a b\n".to_vec().into(),
        },
        Op::Lseek {
            offset: -3,
            whence: Whence::End,
        },
        Op::Fstat,
        Op::Close,
        Op::ProcTable,
        Op::Commit,
        Op::Patch {
            block_size: 8,
            pieces: vec![Piece::Copy(3), Piece::Literal(b"new".to_vec())],
        },
    ];
    let datas = [
        DataAggr::None,
        DataAggr::Concat,
        lines,
        DataAggr::Blocks { block_size: 1024 },
        DataAggr::Procs { by_user: true },
    ];
    let mut out = Vec::new();
    for (i, op) in ops.into_iter().enumerate() {
        let data = datas[i % datas.len()].clone();
        let req = OpRequest {
            op,
            status: StatusAggr::Sum,
            data: data.clone(),
            only: (i % 2 == 0).then(|| IndexSet::from_indices([1, 4, 7, 10])),
        };
        out.push(req.encode());
        let mut reply = Reply::empty(StatusAggr::Sum, &data);
        reply.fail(-18, &IndexSet::from_indices([3, 4]));
        reply.silent = IndexSet::from_indices([4]);
        reply.depth = 2;
        out.push(reply.encode());
        out.push(encode_open_reply(i as i64, &reply));
    }
    let open = OpenRequest {
        local: "127.0.0.1:9094".into(),
        fanout: 32,
        timeout_ms: 5000,
        flags: OpenFlags::from_letters(b"rwc").unwrap(),
        mode: 0o644,
        token: None,
        members: vec![
            Member {
                index: 0,
                server: "127.0.0.1:9094".into(),
                path: "/a b".into(),
            },
            Member {
                index: 9,
                server: "h:1".into(),
                path: "/x".into(),
            },
        ],
        replace: false,
    };
    out.push(open.encode());
    // An open that replaces its members (pcp), with its trailing option.
    let replacing = OpenRequest {
        flags: OpenFlags::from_letters(b"wct").unwrap(),
        replace: true,
        ..open
    };
    out.push(replacing.encode());
    out.push(Signature::of(&[7u8; 5000], 1024).encode());
    out
}

/// One random change: flip, insert or delete a byte, swap in a digit or separator, or cut.
fn mutate(rng: &mut Rng, msg: &mut Vec<u8>) {
    const SPECIAL: &[u8] = b"0123456789: -";
    let at = rng.below(msg.len() + 1);
    match rng.below(5) {
        0 if at < msg.len() => msg[at] ^= 1 << rng.below(8),
        1 => msg.insert(at, SPECIAL[rng.below(SPECIAL.len())]),
        2 if at < msg.len() => {
            msg.remove(at);
        }
        3 if at < msg.len() => msg[at] = SPECIAL[rng.below(SPECIAL.len())],
        _ => msg.truncate(at),
    }
}

#[test]
fn valid_messages_satisfy_the_property() {
    for seed in seeds() {
        assert!(check_decoders(&seed) >= 1, "a seed is refused: {seed:?}");
    }
}

#[test]
fn mutated_messages_never_panic_and_round_trip() {
    let seeds = seeds();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    for _ in 0..60_000 {
        let mut msg = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut msg);
        }
        accepted += check_decoders(&msg);
    }
    // Enough mutants decode for the round trip to be exercised, not only the refusals.
    assert!(accepted > 1_000, "only {accepted} mutants decoded");
    eprintln!("{accepted} of 60000 mutants decoded");
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(42);
    for _ in 0..20_000 {
        let len = rng.below(64);
        let msg: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        check_decoders(&msg);
    }
}
