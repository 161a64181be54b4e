"""Drives an interactive bash in a pseudo-terminal that runs `roost run -- sleep` as a
foreground job: Ctrl-Z stops the job and fg resumes it to a clean exit, and a SIGSTOP sent to
the program from outside stops the job as the shell sees it (roost's front process stops with
the program), after which fg resumes it too. Prints one line per observation."""
import os, pty, select, signal, subprocess, sys, time

roost = sys.argv[1]
# Durations no other process on the machine uses, so the job is found by its command line.
FIRST, SECOND = f"2.{os.getpid()}", f"3.{os.getpid()}"
pid, fd = pty.fork()
if pid == 0:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    os.environ["PS1"] = "$ "
    os.environ["TERM"] = "dumb"
    os.execv("/bin/bash", ["bash", "--norc", "--noprofile", "-i"])
out = b""


def read_until(token, timeout=10):
    global out
    end = time.time() + timeout
    while time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:
                return False
            if token in out:
                out = out[out.index(token) + len(token):]
                return True
    return False


def run_job(duration):
    os.write(fd, f"{roost} run --mount /roost-unused=/tmp -- sleep {duration}\n".encode())
    time.sleep(0.7)


read_until(b"$ ")
run_job(FIRST)
os.write(fd, b"\x1a")
print("ctrl-z stops the job", read_until(b"Stopped"))
os.write(fd, b"fg\necho status $?\n")
print("fg finishes it", read_until(b"status 0", 15))
run_job(SECOND)
subprocess.run(["pkill", "-STOP", "-f", f"^sleep {SECOND}$"])
print("a stopped program stops the job", read_until(b"Stopped"))
os.write(fd, b"fg\necho status $?\n")
print("fg finishes it", read_until(b"status 0", 15))
os.write(fd, b"exit\n")
