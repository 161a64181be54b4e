//! `libroost_group.so`: the C ABI of roost's group file operations (`include/roost_group.h`).
//!
//! Group descriptors index a table of open groups; every call checks its pointers for null,
//! catches panics at the boundary, and reports errors as -1 with `errno`.

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

use group::aggregate::{DataAggr, StatusAggr};
use group::api::{
    gopen as open_group, Bindings, FileOp, Group, GroupData, GroupError, GroupOptions, Outcome,
};
use group::lines::{LineSpec, Pattern};
use group::message::Whence;
use libc::{c_char, c_int, c_longlong, c_void, off_t, size_t, ssize_t};
use std::ffi::CStr;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

type Slot = Arc<Mutex<Group>>;

/// Open groups by descriptor, and the bindings for groups opened later (`gbindaggr(-1, ...)`).
struct Table {
    groups: Vec<Option<Slot>>,
    defaults: Bindings,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(|| {
    Mutex::new(Table {
        groups: Vec::new(),
        defaults: Bindings::default(),
    })
});

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

fn set_errno(e: i32) {
    // SAFETY: `__errno_location` returns this thread's errno, valid for the thread's life.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f`, turning an error or a panic into -1 with errno.
fn guarded<T: From<i8>>(f: impl FnOnce() -> Result<T, i32>) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_errno(e);
            T::from(-1)
        }
        Err(_) => {
            set_errno(libc::EIO);
            T::from(-1)
        }
    }
}

fn slot(gfd: c_int) -> Result<Slot, i32> {
    let t = table();
    usize::try_from(gfd)
        .ok()
        .and_then(|i| t.groups.get(i).cloned().flatten())
        .ok_or(libc::EBADF)
}

fn with_group<T>(gfd: c_int, f: impl FnOnce(&mut Group) -> Result<T, i32>) -> Result<T, i32> {
    let slot = slot(gfd)?;
    let mut g = slot.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}

fn options() -> Result<GroupOptions, i32> {
    let connect = roost_client::Options::from_env().map_err(|e| e.errno())?;
    let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    Ok(GroupOptions {
        connect,
        relay: std::env::var("ROOST_GROUP_RELAY")
            .ok()
            .filter(|r| !r.is_empty()),
        fanout: number("ROOST_GROUP_FANOUT")
            .unwrap_or(32)
            .clamp(1, u32::MAX.into()) as u32,
        timeout: Duration::from_secs(number("ROOST_GROUP_TIMEOUT").unwrap_or(30).max(1)),
        bindings: table().defaults.clone(),
        ..GroupOptions::default()
    })
}

/// # Safety
///
/// `p` must be null or a NUL-terminated string that outlives `'a` (the C caller's argument,
/// used during its call only).
unsafe fn c_str<'a>(p: *const c_char) -> Result<&'a str, i32> {
    if p.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: not null, and NUL-terminated and alive for 'a as the caller promises.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| libc::EINVAL)
}

/// The outcome of an operation whether or not members failed, with the errno to report.
fn split(result: Result<Outcome, GroupError>) -> (Option<Outcome>, Option<i32>) {
    match result {
        Ok(o) => (Some(o), None),
        Err(GroupError::Group { outcome, .. }) => (outcome.map(|o| *o), Some(group::api::E_GROUP)),
        Err(e) => (None, Some(e.errno())),
    }
}

/// The group status as a return value, or the errno.
fn status_of(outcome: &Outcome, error: Option<i32>) -> Result<i64, i32> {
    if let Some(e) = error {
        return Err(e);
    }
    outcome.status.ok_or(libc::EDOM)
}

/// # Safety
///
/// `dirname` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gopen(dirname: *const c_char, flags: c_int, mode: c_int) -> c_int {
    guarded(|| {
        // SAFETY: this function's own contract.
        let dir = unsafe { c_str(dirname) }?;
        let g = open_group(dir, flags, mode as u32, &options()?).map_err(|e| e.errno())?;
        let mut t = table();
        let slot = Some(Arc::new(Mutex::new(g)));
        let gfd = match t.groups.iter().position(Option::is_none) {
            Some(i) => {
                t.groups[i] = slot;
                i
            }
            None => {
                t.groups.push(slot);
                t.groups.len() - 1
            }
        };
        c_int::try_from(gfd).map_err(|_| libc::EMFILE)
    })
}

#[no_mangle]
pub extern "C" fn gsize(gfd: c_int) -> c_int {
    guarded(|| with_group(gfd, |g| Ok(g.gsize() as c_int)))
}

/// # Safety
///
/// `files` must point to `gsize(gfd)` pointers, each to at least `FILENAME_MAX` bytes.
#[no_mangle]
pub unsafe extern "C" fn gfiles(gfd: c_int, files: *mut *mut c_char) -> c_int {
    guarded(|| {
        if files.is_null() {
            return Err(libc::EFAULT);
        }
        with_group(gfd, |g| {
            for (i, name) in g.gfiles().iter().enumerate() {
                // SAFETY: i < gsize, and `files` holds gsize pointers (the contract).
                let dst = unsafe { *files.add(i) };
                if dst.is_null() {
                    return Err(libc::EFAULT);
                }
                let bytes = name.as_bytes();
                let n = bytes.len().min(libc::FILENAME_MAX as usize - 1);
                // SAFETY: `dst` holds FILENAME_MAX bytes (the contract) and n + 1 of them
                // are written; a Rust string never overlaps the caller's buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.cast(), n);
                    *dst.add(n) = 0;
                }
            }
            Ok(g.gsize() as c_int)
        })
    })
}

/// # Safety
///
/// `file` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gindex(gfd: c_int, file: *const c_char) -> c_int {
    guarded(|| {
        // SAFETY: this function's own contract.
        let name = unsafe { c_str(file) }?;
        with_group(gfd, |g| {
            g.gindex(name).map(|i| i as c_int).ok_or(libc::ENOENT)
        })
    })
}

/// # Safety
///
/// `status_array` must point to `gsize(gfd)` writable `long long`s.
#[no_mangle]
pub unsafe extern "C" fn gstatus(gfd: c_int, status_array: *mut c_longlong) -> c_int {
    guarded(|| {
        if status_array.is_null() {
            return Err(libc::EFAULT);
        }
        with_group(gfd, |g| {
            let statuses = g.gstatus().map_err(|e| e.errno())?;
            let mut failed = 0;
            for (i, s) in statuses.iter().enumerate().take(g.gsize()) {
                let v = match s {
                    Ok(v) => *v,
                    Err(errno) => {
                        failed += 1;
                        -i64::from(*errno)
                    }
                };
                // SAFETY: i < gsize, and `status_array` holds gsize `long long`s.
                unsafe { *status_array.add(i) = v };
            }
            Ok(failed)
        })
    })
}

fn file_op(fop: c_int) -> Option<FileOp> {
    const OPS: [FileOp; 9] = [
        FileOp::Read,
        FileOp::Pread,
        FileOp::Write,
        FileOp::Pwrite,
        FileOp::Lseek,
        FileOp::Fstat,
        FileOp::Fsync,
        FileOp::Ftruncate,
        FileOp::Close,
    ];
    usize::try_from(fop).ok().and_then(|i| OPS.get(i).copied())
}

#[no_mangle]
pub extern "C" fn gbindaggr(gfd: c_int, fop: c_int, typ: c_int, ag: c_int) -> c_int {
    guarded(|| {
        let op = file_op(fop).ok_or(libc::EINVAL)?;
        let (status, data) = match typ {
            0 => {
                let s = usize::try_from(ag)
                    .ok()
                    .and_then(|i| StatusAggr::ALL.get(i));
                (Some(*s.ok_or(libc::EINVAL)?), None)
            }
            1 => match ag {
                0 => (None, Some(DataAggr::None)),
                1 => (None, Some(DataAggr::Concat)),
                2 => (None, Some(DataAggr::Lines(line_spec(Pattern::All, 0)))),
                _ => return Err(libc::EINVAL),
            },
            _ => return Err(libc::EINVAL),
        };
        bind(gfd, op, status, data)
    })
}

/// `G_LINE_NUMBERS`: lines at different line numbers are different classes.
const LINE_NUMBERS: c_int = 1;

fn line_spec(pattern: Pattern, flags: c_int) -> LineSpec {
    LineSpec {
        pattern,
        numbers: flags & LINE_NUMBERS != 0,
        strip_syslog: false,
        complete_lines: false,
    }
}

/// # Safety
///
/// `regex` must be null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gbindlines(
    gfd: c_int,
    fop: c_int,
    regex: *const c_char,
    flags: c_int,
) -> c_int {
    guarded(|| {
        let op = file_op(fop).ok_or(libc::EINVAL)?;
        if flags & !LINE_NUMBERS != 0 {
            return Err(libc::EINVAL);
        }
        let pattern = if regex.is_null() {
            Pattern::All
        } else {
            // SAFETY: not null, so NUL-terminated (this function's contract).
            let text = unsafe { CStr::from_ptr(regex) }
                .to_str()
                .map_err(|_| libc::EINVAL)?;
            Pattern::regex(text).map_err(|_| libc::EINVAL)?
        };
        bind(
            gfd,
            op,
            None,
            Some(DataAggr::Lines(line_spec(pattern, flags))),
        )
    })
}

/// Binds aggregations to `op` of group `gfd`, or of groups opened later (`gfd == -1`).
fn bind(
    gfd: c_int,
    op: FileOp,
    status: Option<StatusAggr>,
    data: Option<DataAggr>,
) -> Result<c_int, i32> {
    {
        if gfd == -1 {
            let mut t = table();
            if let Some(s) = status {
                t.defaults.bind_status(op, s);
            }
            if let Some(d) = data {
                t.defaults.bind_data(op, d);
            }
            return Ok(0);
        }
        with_group(gfd, |g| {
            g.gbindaggr(op, status, data);
            Ok(0)
        })
    }
}

/// The text of line classes, one a line: `MEMBERS[:NUMBER]: TEXT`, the members written as
/// host sets of their names (`node[1-64/3]`), as `roost pgrep` prints them.
fn render_lines(group: &Group, classes: &[group::api::LineClass], numbers: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for class in classes {
        let names: Vec<&str> = class
            .members
            .iter()
            .map(|&i| group.gfiles()[i].as_str())
            .collect();
        out.extend_from_slice(group::hostset::format(&names).as_bytes());
        if numbers {
            out.extend_from_slice(format!(":{}", class.number).as_bytes());
        }
        out.extend_from_slice(b": ");
        out.extend_from_slice(&class.text);
        out.push(b'\n');
    }
    out
}

/// Copies a read's result into `buf` (`gsize * count` bytes): concatenated member data with
/// member i at `buf + i * count`, or the text of line classes from `buf` on (cut at the end
/// of the buffer; returns its whole length).
///
/// # Safety
///
/// `buf` must point to `group.gsize() * count` writable bytes.
unsafe fn deliver(
    group: &Group,
    outcome: &Outcome,
    buf: *mut c_void,
    count: usize,
) -> Option<usize> {
    if let GroupData::Lines(classes) = &outcome.data {
        let numbers = classes.iter().any(|c| c.number != 0);
        let text = render_lines(group, classes, numbers);
        let room = count.saturating_mul(group.gsize());
        let n = text.len().min(room);
        // SAFETY: n is at most the buffer's size; the text is our own allocation.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n) };
        return Some(text.len());
    }
    if let GroupData::PerMember(per) = &outcome.data {
        for (i, data) in per.iter().enumerate().take(group.gsize()) {
            // SAFETY: i < gsize, so member i's `count` bytes lie inside the buffer.
            let slot = unsafe { buf.cast::<u8>().add(i * count) };
            let bytes = data.as_deref().unwrap_or(&[]);
            let n = bytes.len().min(count);
            // SAFETY: n + (count - n) = count bytes at `slot`, inside the buffer; the data
            // is our own allocation.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), slot, n);
                std::ptr::write_bytes(slot.add(n), 0, count - n);
            }
        }
    }
    None
}

/// # Safety
///
/// `buf` must be null or point to `gsize(gfd) * count` writable bytes.
unsafe fn read_into(gfd: c_int, buf: *mut c_void, count: size_t, offset: Option<off_t>) -> ssize_t {
    guarded(|| {
        if buf.is_null() && count > 0 {
            return Err(libc::EFAULT);
        }
        with_group(gfd, |g| {
            let result = match offset {
                None => g.read(count as u64),
                Some(off) => g.pread(count as u64, u64::try_from(off).map_err(|_| libc::EINVAL)?),
            };
            let (outcome, error) = split(result);
            let outcome = outcome.ok_or(error.unwrap_or(libc::EIO))?;
            let text_len = if buf.is_null() {
                None
            } else {
                // SAFETY: this function's contract, `g` being group `gfd`.
                unsafe { deliver(g, &outcome, buf, count) }
            };
            let status = status_of(&outcome, error)?;
            Ok(text_len.map_or(status as ssize_t, |n| n as ssize_t))
        })
    })
}

/// # Safety
///
/// `buf` must point to `gsize(gfd) * count` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn gread(gfd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    // SAFETY: this function's own contract.
    unsafe { read_into(gfd, buf, count, None) }
}

/// # Safety
///
/// `buf` must point to `gsize(gfd) * count` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn gpread(
    gfd: c_int,
    buf: *mut c_void,
    count: size_t,
    offset: off_t,
) -> ssize_t {
    // SAFETY: this function's own contract.
    unsafe { read_into(gfd, buf, count, Some(offset)) }
}

/// # Safety
///
/// `buf` must point to `count` readable bytes (it may be null when `count` is 0).
unsafe fn write_from(
    gfd: c_int,
    buf: *const c_void,
    count: size_t,
    offset: Option<off_t>,
) -> ssize_t {
    guarded(|| {
        if buf.is_null() && count > 0 {
            return Err(libc::EFAULT);
        }
        let data: &[u8] = if count == 0 {
            &[]
        } else {
            // SAFETY: not null, and `count` readable bytes (the contract), which nothing
            // writes during the call.
            unsafe { std::slice::from_raw_parts(buf.cast(), count) }
        };
        with_group(gfd, |g| {
            let result = match offset {
                None => g.write(data),
                Some(off) => g.pwrite(data, u64::try_from(off).map_err(|_| libc::EINVAL)?),
            };
            let (outcome, error) = split(result);
            let outcome = outcome.ok_or(error.unwrap_or(libc::EIO))?;
            Ok(status_of(&outcome, error)? as ssize_t)
        })
    })
}

/// # Safety
///
/// `buf` must point to `count` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn gwrite(gfd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    // SAFETY: this function's own contract.
    unsafe { write_from(gfd, buf, count, None) }
}

/// # Safety
///
/// `buf` must point to `count` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn gpwrite(
    gfd: c_int,
    buf: *const c_void,
    count: size_t,
    offset: off_t,
) -> ssize_t {
    // SAFETY: this function's own contract.
    unsafe { write_from(gfd, buf, count, Some(offset)) }
}

/// An operation whose only result is its status.
fn status_call(gfd: c_int, f: impl FnOnce(&mut Group) -> Result<Outcome, GroupError>) -> i64 {
    guarded(|| {
        with_group(gfd, |g| {
            let (outcome, error) = split(f(g));
            let outcome = outcome.ok_or(error.unwrap_or(libc::EIO))?;
            status_of(&outcome, error)
        })
    })
}

#[no_mangle]
pub extern "C" fn glseek(gfd: c_int, offset: off_t, whence: c_int) -> off_t {
    let whence = match whence {
        libc::SEEK_SET => Whence::Set,
        libc::SEEK_CUR => Whence::Current,
        libc::SEEK_END => Whence::End,
        _ => {
            set_errno(libc::EINVAL);
            return -1;
        }
    };
    status_call(gfd, |g| g.lseek(offset, whence)) as off_t
}

/// # Safety
///
/// `stats` must point to `gsize(gfd)` writable `struct stat`s.
#[no_mangle]
pub unsafe extern "C" fn gfstat(gfd: c_int, stats: *mut libc::stat) -> c_int {
    guarded(|| {
        if stats.is_null() {
            return Err(libc::EFAULT);
        }
        with_group(gfd, |g| {
            let (outcome, error) = split(g.fstat());
            let outcome = outcome.ok_or(error.unwrap_or(libc::EIO))?;
            for (i, st) in Group::stats(&outcome)
                .into_iter()
                .enumerate()
                .take(g.gsize())
            {
                // SAFETY: `struct stat` is plain data, valid all zeros.
                let mut out: libc::stat = unsafe { std::mem::zeroed() };
                if let Some(st) = st {
                    let a = st.to_array();
                    out.st_dev = a[0] as _;
                    out.st_ino = a[1] as _;
                    out.st_mode = a[2] as _;
                    out.st_nlink = a[3] as _;
                    out.st_uid = a[4] as _;
                    out.st_gid = a[5] as _;
                    out.st_rdev = a[6] as _;
                    out.st_size = a[7] as _;
                    out.st_blksize = a[8] as _;
                    out.st_blocks = a[9] as _;
                    out.st_atime = a[10] as _;
                    out.st_mtime = a[11] as _;
                    out.st_ctime = a[12] as _;
                }
                // SAFETY: i < gsize, and `stats` holds gsize `struct stat`s.
                unsafe { *stats.add(i) = out };
            }
            status_of(&outcome, error).map(|s| s as c_int)
        })
    })
}

#[no_mangle]
pub extern "C" fn gfsync(gfd: c_int) -> c_int {
    status_call(gfd, |g| g.fsync()) as c_int
}

#[no_mangle]
pub extern "C" fn gftruncate(gfd: c_int, length: off_t) -> c_int {
    match u64::try_from(length) {
        Ok(len) => status_call(gfd, |g| g.ftruncate(len)) as c_int,
        Err(_) => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

#[no_mangle]
pub extern "C" fn gclose(gfd: c_int) -> c_int {
    let result = status_call(gfd, |g| g.close()) as c_int;
    if let Ok(i) = usize::try_from(gfd) {
        let mut t = table();
        if let Some(s) = t.groups.get_mut(i) {
            *s = None;
        }
    }
    result
}
