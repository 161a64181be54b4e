//! Which programs the dynamic loader gets the fast path's object for. Loading it costs each
//! process started about four trapped calls (the loader's open and fstat of the preload list
//! and of the object, made before any library is there to answer them) and the loading
//! itself: about what the object saves on [`PAYS_AT`](super::table::PAYS_AT) calls. Many programs a build or a
//! script starts make fewer (`true`, `rm`, `mv`, `sed` on small input). So the agent offers
//! the object to a program's first few processes, learns from the table which of its
//! processes answered that many calls in-process (`RF_PAID_AT`, counted by the object), and
//! stops offering it to a program fewer than a quarter of whose processes did, still offering
//! it to one process in sixteen so that a change is seen. A program is its executable's
//! device and inode. The offer is made at the loader's `access` of `/etc/ld.so.preload` and
//! kept for its open of it; declined, both reach the host's file, as under `--strict`, and
//! that process's calls are all trapped: what it sees is the same either way.

use super::table::Atomics;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

/// Offers made to a program before its counts are looked at.
const FIRST_OFFERS: u64 = 3;
/// Of a declined program's processes, one in this many is offered the object all the same.
const RETRY_EVERY: u64 = 16;
/// Loaders answered at `access` and not yet at their open, at most (then forgotten).
const MOST_PENDING: usize = 4096;

#[derive(Default)]
pub struct Offers {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// By executable (device, inode).
    programs: HashMap<(u64, u64), Program>,
    /// Threads whose loader was answered at `access`, and whether it was offered the list.
    pending: HashMap<i32, bool>,
}

#[derive(Default)]
struct Program {
    /// Processes started, and of them those offered the object.
    started: u64,
    offered: u64,
}

impl Offers {
    /// Whether thread `tid`, opening the preload list (`opening`) or asking `access` of it
    /// as the loader does first, is offered roost's list. An open with no `access` before
    /// it is a program reading the list itself: it gets roost's.
    pub fn offered(&self, tid: i32, opening: bool, atomics: &Atomics) -> bool {
        let mut state = self.state.lock().expect("offers lock");
        if let Some(&offered) = state.pending.get(&tid) {
            if opening {
                state.pending.remove(&tid);
            }
            return offered;
        }
        if opening {
            return true;
        }
        let Some((dev, ino)) = program_of(tid) else {
            return true;
        };
        let paid = atomics.paid(dev, ino);
        let program = state.programs.entry((dev, ino)).or_default();
        program.started += 1;
        let offered = program.offered < FIRST_OFFERS
            || paid * 4 >= program.offered
            || program.started % RETRY_EVERY == 0;
        program.offered += u64::from(offered);
        // The loader opens the list only when `access` found it.
        if offered {
            if state.pending.len() >= MOST_PENDING {
                state.pending.clear();
            }
            state.pending.insert(tid, true);
        }
        offered
    }
}

/// The device and inode of thread `tid`'s executable.
fn program_of(tid: i32) -> Option<(u64, u64)> {
    let meta = std::fs::metadata(format!("/proc/{tid}/exe")).ok()?;
    Some((meta.dev(), meta.ino()))
}
