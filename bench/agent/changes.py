"""changes.py: the cost of name-space changes in the current directory: ROUNDS rounds of
mkdir, symlink, rename, unlink and rmdir; prints the mean time per call. Run it natively
and under `roost run --mount /m=SOMEWHERE [--no-notify] -- python3 bench/agent/changes.py`
from an unmapped directory. Usage: changes.py [ROUNDS]."""
import os
import sys
import time

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
start = time.perf_counter()
for i in range(rounds):
    d = "d%d" % i
    os.mkdir(d)
    os.symlink("x", d + "/l")
    os.rename(d + "/l", d + "/m")
    os.unlink(d + "/m")
    os.rmdir(d)
print("%.1f us per call" % ((time.perf_counter() - start) / (5 * rounds) * 1e6))
