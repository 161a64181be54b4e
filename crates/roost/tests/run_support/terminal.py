"""An interactive program in a pseudo-terminal, for the job-control scripts (jobctl.py,
outer_shell.py): started with the terminal's signals at their defaults and a plain prompt,
written to, and read until a token appears."""
import os, pty, select, signal, time


class Terminal:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            # A test started from a background job inherits SIGINT and SIGQUIT ignored, and
            # an ignored signal stays ignored across exec: give the terminal's signals their
            # defaults.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGQUIT, signal.SIG_DFL)
            os.environ["PS1"] = "$ "
            os.environ["TERM"] = "dumb"
            os.execv(argv[0], argv)
        self.out = b""

    def write(self, data):
        os.write(self.fd, data)

    def read_until(self, token, timeout=15):
        """Whether `token` appears within `timeout` seconds; the output up to it is used up,
        so the next call looks only at what came after."""
        end = time.time() + timeout
        while time.time() < end:
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    self.out += os.read(self.fd, 4096)
                except OSError:
                    return False
                if token in self.out:
                    self.out = self.out[self.out.index(token) + len(token):]
                    return True
        return False
