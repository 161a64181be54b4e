//! Tracee memory: `process_vm_readv`/`process_vm_writev`, falling back to `/proc/PID/mem`
//! (which also writes through read-only mappings) when they fail.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;

const PAGE: u64 = 4096;
/// The longest path the agent reads (PATH_MAX).
pub const PATH_MAX: usize = 4096;

fn vm_read(pid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut _,
        iov_len: buf.len(),
    };
    // SAFETY: the local iovec covers `buf`; the remote one is only read by the kernel.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

fn mem_file(pid: i32, write: bool) -> io::Result<std::fs::File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .open(format!("/proc/{pid}/mem"))
}

/// `/proc/PID/mem` answers EIO at an address with no mapping; the kernel, copying a syscall's
/// argument from the same address, would have answered EFAULT, and so must roost.
fn unmapped_is_efault(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EIO) => io::Error::from_raw_os_error(libc::EFAULT),
        _ => e,
    }
}

/// Reads `len` bytes at `addr` (short only at an unmapped page).
///
/// An address the program itself could not read is EFAULT, as the kernel says it; only other
/// refusals of `process_vm_readv` fall back to `/proc/PID/mem`, which reads through
/// `PROT_NONE` pages the kernel would refuse.
pub fn read(pid: i32, addr: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let n = match vm_read(pid, addr, &mut buf) {
        Ok(n) => n,
        Err(e) if e.raw_os_error() == Some(libc::EFAULT) => return Err(e),
        Err(_) => mem_file(pid, false)?
            .read_at(&mut buf, addr)
            .map_err(unmapped_is_efault)?,
    };
    buf.truncate(n);
    Ok(buf)
}

/// The errno to answer a program with when its memory could not be read or written: the
/// kernel's own, EFAULT when there is none.
pub fn errno(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EFAULT)
}

/// Reads a NUL-terminated string at `addr` (without the NUL), up to `max`: a short first
/// read (most paths fit), then page by page.
pub fn read_cstr(pid: i32, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    const FIRST: u64 = 256;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let to_page_end = PAGE - at % PAGE;
        let chunk = if out.is_empty() {
            to_page_end.min(FIRST)
        } else {
            to_page_end
        } as usize;
        let bytes = read(pid, at, chunk)?;
        if bytes.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
            out.extend_from_slice(&bytes[..nul]);
            return Ok(out);
        }
        out.extend_from_slice(&bytes);
        at += bytes.len() as u64;
    }
    Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
}

/// Writes a plain C struct (`stat`, `statx`, `statfs`) at `addr`, as the kernel would have.
///
/// # Safety
/// `T` must be plain data with every byte initialised (the callers zero it before the
/// kernel fills it), since its bytes, padding included, are copied out.
pub unsafe fn write_struct<T: Copy>(pid: i32, addr: u64, value: &T) -> io::Result<()> {
    // SAFETY: the caller guarantees `value` is fully initialised plain data.
    let bytes = unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    };
    write(pid, addr, bytes)
}

/// Reads the NULL-terminated pointer array at `addr` (argv), at most `max` entries.
pub fn read_ptr_array(pid: i32, addr: u64, max: usize) -> io::Result<Vec<u64>> {
    let mut out = Vec::new();
    let mut at = addr;
    loop {
        let chunk = ((PAGE - at % PAGE) as usize).max(8) / 8 * 8;
        let bytes = read(pid, at, chunk)?;
        if bytes.len() < 8 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        for w in bytes.chunks_exact(8) {
            let p = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
            if p == 0 {
                return Ok(out);
            }
            out.push(p);
            if out.len() > max {
                return Err(io::Error::from_raw_os_error(libc::E2BIG));
            }
        }
        at += (bytes.len() / 8 * 8) as u64;
    }
}

/// `n` 64-bit words at `addr` (EFAULT when fewer can be read).
pub fn read_words(pid: i32, addr: u64, n: usize) -> Result<Vec<u64>, i32> {
    let bytes = read(pid, addr, n * 8).map_err(errno)?;
    if bytes.len() < n * 8 {
        return Err(libc::EFAULT);
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
        .collect())
}

/// Writes each `(address, bytes)` of `writes`, stopping at the first that fails.
pub fn write_all(pid: i32, writes: &[(u64, Vec<u8>)]) -> io::Result<()> {
    writes
        .iter()
        .try_for_each(|(addr, bytes)| write(pid, *addr, bytes))
}

/// Writes `data` at `addr`.
pub fn write(pid: i32, addr: u64, data: &[u8]) -> io::Result<()> {
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut _,
        iov_len: data.len(),
    };
    // SAFETY: the local iovec covers `data`, which the kernel only reads.
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    if n == data.len() as isize {
        return Ok(());
    }
    // The fallback also writes through read-only mappings (the scratch area's neighbours).
    mem_file(pid, true)?
        .write_all_at(data, addr)
        .map_err(unmapped_is_efault)
}

/// The bytes of a plain-data struct.
pub fn bytes_of<T: Copy>(value: &T) -> Vec<u8> {
    // SAFETY: T is plain data (a kernel struct); its bytes are initialised.
    unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    }
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_own_memory() {
        let pid = std::process::id() as i32;
        let s = b"hello\0world".to_vec();
        assert_eq!(read_cstr(pid, s.as_ptr() as u64, 100).unwrap(), b"hello");
        let mut target = vec![0u8; 4];
        write(pid, target.as_mut_ptr() as u64, b"abcd").unwrap();
        assert_eq!(std::hint::black_box(&target), b"abcd");
        let strs = [s.as_ptr() as u64, 0];
        assert_eq!(
            read_ptr_array(pid, strs.as_ptr() as u64, 10).unwrap(),
            vec![strs[0]]
        );
    }

    #[test]
    fn an_unmapped_address_is_efault_on_read_and_write() {
        let pid = std::process::id() as i32;
        let bad = 0xdead_c0de_u64;
        let err = |e: io::Error| e.raw_os_error();
        assert_eq!(
            err(read_cstr(pid, bad, 100).unwrap_err()),
            Some(libc::EFAULT)
        );
        assert_eq!(err(write(pid, bad, b"x").unwrap_err()), Some(libc::EFAULT));
    }
}
