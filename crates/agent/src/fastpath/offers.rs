//! Which programs' loaders get the fast path's object. Loading it costs each process started
//! about four trapped calls (the loader's open and fstat of the preload list and of the
//! object, made before any library is there to answer them) and the loading itself: about
//! what the object saves on [`PAYS_AT`](super::table::PAYS_AT) calls. Many programs a build
//! or a script starts make fewer (`true`, `rm`, `mv`). So the agent offers the object per
//! program (its executable's device and inode): to its first few processes, and afterwards
//! while at least a quarter of the processes offered it answered that many calls in-process
//! (the object counts them in the table, `RF_PAID_AT`), else to one process in sixteen, so
//! that a change is seen.
//!
//! Only a dynamic loader is ever declined, and nothing the program sees changes: after an
//! exec of a dynamically linked program (the exec handler says one is coming), the first
//! `access(R_OK)` of `/etc/ld.so.preload` is its loader's, and is answered as always (roost's
//! list is there); when the program is declined, the loader's open of the list that follows
//! is made on the host's own file (the machine's own preloads, which roost's list names
//! after its object; absent, the open fails and the loader loads nothing), whose descriptor
//! the loader closes before the program runs. Every other call on the name finds roost's
//! list. (The access itself is not made on the host's file, though where there is none the
//! loader would then make no open: the kernel judges an access by the caller's credentials
//! and namespace, and a host's list it may not read would leave the mark for an open that
//! never comes, sending the program's own open of the list there.)
//!
//! A thread that is not its process's leader takes the leader's id as it execs, and its
//! mark moves with it ([`Offers::exec_took_id`]). A mark that a failed exec leaves is dropped
//! by the thread's next call on the list; were that call the program's own `access(R_OK)`,
//! and its next an open to read, the open would find the host's file: what the program sees
//! without roost, nothing of another's.

use super::table::Atomics;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Offers made to a program before its counts are looked at.
const FIRST_OFFERS: u64 = 3;
/// Of a declined program's processes, one in this many is offered the object all the same.
const RETRY_EVERY: u64 = 16;
/// Threads remembered between an exec and its loader's calls, at most (then forgotten:
/// their loaders get roost's list).
const MOST_WAITING: usize = 4096;

#[derive(Default)]
pub struct Offers {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// By executable (device, inode).
    programs: HashMap<(u64, u64), Program>,
    /// Threads that exec'd a dynamically linked program whose loader has not looked yet,
    /// and that program.
    loaders: HashMap<i32, (u64, u64)>,
    /// Threads whose loader was declined: their next open of the list is the host's file's.
    declined: HashSet<i32>,
}

#[derive(Default)]
struct Program {
    /// Processes started, and of them those offered the object.
    started: u64,
    offered: u64,
}

/// A call on the preload list, as far as the offer goes.
pub enum ListCall {
    /// `access` with `R_OK`, as the loader makes it.
    Access,
    /// An open to read, creating and truncating nothing.
    Open,
    /// Any other call: the thread's loader, if it was to come, has not come that way.
    Other,
}

impl Offers {
    /// Thread `tid` execs dynamically linked `program` (its executable's device and inode,
    /// as the exec found it): its loader's look is to come. `None`: a program whose loader
    /// roost does not know of (statically linked, or unreadable to roost); a mark an earlier
    /// exec left, which failed, goes.
    pub fn loader_comes(&self, tid: i32, program: Option<(u64, u64)>) {
        let mut state = self.state.lock().expect("offers lock");
        state.declined.remove(&tid);
        let Some(program) = program else {
            state.loaders.remove(&tid);
            return;
        };
        if state.loaders.len() >= MOST_WAITING {
            state.loaders.clear();
        }
        state.loaders.insert(tid, program);
    }

    /// A thread that was not its process's leader exec'd, and took the leader's id
    /// `leader` (the id `former` is gone): its loader's look, if one is to come, comes
    /// from `leader`, and whatever was noted of the old leader is past.
    pub fn exec_took_id(&self, former: i32, leader: i32) {
        let mut state = self.state.lock().expect("offers lock");
        state.declined.remove(&former);
        state.declined.remove(&leader);
        match state.loaders.remove(&former) {
            Some(program) => state.loaders.insert(leader, program),
            None => state.loaders.remove(&leader),
        };
    }

    /// Whether thread `tid`'s call on the preload list is the open of a loader that was
    /// declined at its `access` (which is where the offer is decided).
    pub fn declined_open(&self, tid: i32, call: ListCall, atomics: &Atomics) -> bool {
        let mut state = self.state.lock().expect("offers lock");
        match call {
            // The loader's look, if one was to come, is past: no mark outlives it.
            ListCall::Open | ListCall::Other => {
                state.loaders.remove(&tid);
                state.declined.remove(&tid) && matches!(call, ListCall::Open)
            }
            ListCall::Access => {
                let Some(program) = state.loaders.remove(&tid) else {
                    return false;
                };
                if !state.offer(program, atomics) {
                    if state.declined.len() >= MOST_WAITING {
                        state.declined.clear();
                    }
                    state.declined.insert(tid);
                }
                false
            }
        }
    }
}

impl State {
    /// Whether a new process of `(dev, ino)` is offered the object, counted as one started.
    fn offer(&mut self, (dev, ino): (u64, u64), atomics: &Atomics) -> bool {
        let paid = atomics.paid(dev, ino);
        let program = self.programs.entry((dev, ino)).or_default();
        program.started += 1;
        let offered = program.offered < FIRST_OFFERS
            || paid.saturating_mul(4) >= program.offered
            || program.started % RETRY_EVERY == 0;
        program.offered += u64::from(offered);
        offered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(offers: &Offers, tid: i32) -> Option<(u64, u64)> {
        offers.state.lock().unwrap().loaders.get(&tid).copied()
    }

    #[test]
    fn an_exec_from_a_thread_moves_its_mark_to_the_leaders_id() {
        let offers = Offers::default();
        offers.loader_comes(41, Some((8, 41)));
        offers.loader_comes(40, Some((8, 40))); // the old leader's own, never looked at
        offers.exec_took_id(41, 40);
        assert_eq!(waiting(&offers, 40), Some((8, 41)), "the thread's program");
        assert_eq!(waiting(&offers, 41), None);
        // A thread that exec'd nothing leaves no mark at the leader's id.
        offers.exec_took_id(43, 42);
        assert_eq!(waiting(&offers, 42), None);
        // A failed exec's mark goes with the next exec, of a program with no loader known.
        offers.loader_comes(50, Some((8, 50)));
        offers.loader_comes(50, None);
        assert_eq!(waiting(&offers, 50), None);
    }
}
