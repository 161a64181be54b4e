//! AF_UNIX addresses a program reads back (getsockname, getpeername) name the socket by its
//! logical path, as it bound or connected it; other families pass untouched. Both
//! delivery paths.

use roost_testkit::run::*;

const NAMES: &str = r#"
import socket, os
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("/m/sock"); s.listen(1)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); c.connect("/m/sock")
a, _ = s.accept()
print(s.getsockname(), c.getpeername(), a.getsockname())
# A buffer too small for the whole name: truncated; the length is the whole name's, as
# natively (2 + 7 + 1 for /m/sock).
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(6); n = ctypes.c_uint(6)
libc.getsockname(s.fileno(), buf, ctypes.byref(n))
print(buf.raw[2:6], n.value)
t = socket.socket(); t.bind(("127.0.0.1", 0)); print(t.getsockname()[0])
os.unlink("/m/sock")
"#;

#[test]
fn unix_socket_names_read_back_are_logical() {
    let t = Tree::new("sockname");
    let (out, code) = run_both(&t, &["python3", "-c", NAMES]);
    assert_eq!(
        (out.as_str(), code),
        ("/m/sock /m/sock /m/sock\nb'/m/s' 10\n127.0.0.1\n", 0)
    );
}
