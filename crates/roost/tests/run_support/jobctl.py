"""Drives `roost run -- bash -i` in a pseudo-terminal: Ctrl-Z stops a foreground job and
bash regains the terminal, fg resumes it, Ctrl-C interrupts it (status 130), a terminal size
change is seen, and roost exits with bash's exit code. Prints one line per observation."""
import fcntl, os, pty, select, signal, struct, sys, termios, time

roost = sys.argv[1]
# A duration no other process on the machine uses, so the job is found by its command line
# even while other copies of this test run.
DURATION = f"31.{os.getpid()}"
pid, fd = pty.fork()
if pid == 0:
    # A test started from a background job inherits SIGINT and SIGQUIT ignored, and an
    # ignored signal stays ignored across exec: give the terminal's signals their defaults.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    os.environ["PS1"] = "$ "
    os.environ["TERM"] = "dumb"
    os.execv(roost, [roost, "run", "--mount", "/roost-unused=/tmp", "--",
                     "bash", "--norc", "--noprofile", "-i"])
out = b""


def read_until(token, timeout=15):
    global out
    end = time.time() + timeout
    while time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:
                return False
            if token in out:
                return True
    return False


def sleep_state(timeout=15):
    """The state letter of the job's `sleep` process once it exists (None if it never does)."""
    end = time.time() + timeout
    while time.time() < end:
        for p in os.listdir("/proc"):
            try:
                if open(f"/proc/{p}/cmdline", "rb").read() == b"sleep\x00" + DURATION.encode() + b"\x00":
                    return open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0]
            except OSError:
                pass
        time.sleep(0.05)
    return None


def wait_state(want, timeout=15):
    end = time.time() + timeout
    while time.time() < end and sleep_state() not in want:
        time.sleep(0.05)


read_until(b"$ ")
os.write(fd, f"sleep {DURATION}\n".encode())
wait_state("S")
os.write(fd, b"\x1a")
print("stopped", read_until(b"Stopped"))
os.write(fd, b"fg\n")
wait_state("S")
os.write(fd, b"\x03")
time.sleep(0.3)
os.write(fd, b"echo status $?\n")
print("interrupted", read_until(b"status 130"))
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 77, 0, 0))
os.write(fd, b"stty size\n")
print("resized", read_until(b"33 77"))
os.write(fd, b"exit 5\n")
_, status = os.waitpid(pid, 0)
print("exit", os.waitstatus_to_exitcode(status))
