"""Drives an interactive bash in a pseudo-terminal that runs `roost run -- sleep` as a
foreground job: Ctrl-Z stops the job and fg resumes it to a clean exit, and a SIGSTOP sent to
the program from outside stops the job as the shell sees it (roost's front process stops with
the program), after which fg resumes it too. Prints one line per observation."""
import os, subprocess, sys, time

from terminal import Terminal

roost = sys.argv[1]
# Durations no other process on the machine uses, so the job is found by its command line.
FIRST, SECOND = f"2.{os.getpid()}", f"3.{os.getpid()}"
term = Terminal(["/bin/bash", "--norc", "--noprofile", "-i"])


def said(what, ok):
    """Prints an observation; when it failed, what the terminal showed last goes to stderr
    (the test prints it), so a failure says what the shell saw."""
    print(what, ok)
    if not ok:
        sys.stderr.write(f"{what}: the terminal's last output: {term.out[-800:]!r}\n")


def run_job(duration):
    """Starts the job and waits until its program runs (on a loaded machine roost may take
    longer than any fixed pause to start it)."""
    term.write(f"{roost} run --mount /roost-unused=/tmp -- sleep {duration}\n".encode())
    deadline = time.time() + 10
    while time.time() < deadline:
        found = subprocess.run(["pgrep", "-f", f"^sleep {duration}$"], capture_output=True)
        if found.returncode == 0:
            break
        time.sleep(0.05)
    time.sleep(0.2)


term.read_until(b"$ ", 10)
run_job(FIRST)
term.write(b"\x1a")
said("ctrl-z stops the job", term.read_until(b"Stopped", 10))
term.write(b"fg\necho status $?\n")
said("fg finishes it", term.read_until(b"status 0", 15))
run_job(SECOND)
subprocess.run(["pkill", "-STOP", "-f", f"^sleep {SECOND}$"])
said("a stopped program stops the job", term.read_until(b"Stopped", 10))
term.write(b"fg\necho status $?\n")
said("fg finishes it", term.read_until(b"status 0", 15))
term.write(b"exit\n")
