"""Drives `roost run -- bash -i` in a pseudo-terminal: Ctrl-Z stops a foreground job and
bash regains the terminal, fg resumes it, Ctrl-C interrupts it (status 130), a terminal size
change is seen, and roost exits with bash's exit code. Prints one line per observation."""
import fcntl, os, struct, sys, termios, time

from terminal import Terminal

roost = sys.argv[1]
# A duration no other process on the machine uses, so the job is found by its command line
# even while other copies of this test run.
DURATION = f"31.{os.getpid()}"
term = Terminal([roost, "run", "--mount", "/roost-unused=/tmp", "--",
                 "bash", "--norc", "--noprofile", "-i"])


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


term.read_until(b"$ ")
term.write(f"sleep {DURATION}\n".encode())
wait_state("S")
term.write(b"\x1a")
print("stopped", term.read_until(b"Stopped"))
term.write(b"fg\n")
wait_state("S")
term.write(b"\x03")
time.sleep(0.3)
term.write(b"echo status $?\n")
print("interrupted", term.read_until(b"status 130"))
fcntl.ioctl(term.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 77, 0, 0))
term.write(b"stty size\n")
print("resized", term.read_until(b"33 77"))
term.write(b"exit 5\n")
_, status = os.waitpid(term.pid, 0)
print("exit", os.waitstatus_to_exitcode(status))
