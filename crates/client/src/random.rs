//! Random bytes from the kernel (`getrandom`), for nonces, challenge paths and names nobody
//! may guess. A failure is an error, never a predictable value.

use std::io;

/// `N` random bytes.
pub fn bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    let mut filled = 0;
    while filled < N {
        // SAFETY: the kernel writes at most `N - filled` bytes into the rest of `buf`.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), N - filled, 0) };
        if n > 0 {
            filled += n as usize;
            continue;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(buf)
}

/// `N` random bytes as lower-case hex.
pub fn hex<const N: usize>() -> io::Result<String> {
    Ok(roost_wire::hex::encode(&bytes::<N>()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_differ_from_call_to_call() {
        let a = super::bytes::<16>().unwrap();
        let b = super::bytes::<16>().unwrap();
        assert_ne!(a, b);
        assert_eq!(super::hex::<8>().unwrap().len(), 16);
    }
}
