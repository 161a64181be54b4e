"""Eight threads, then four forked children, each open and stat their own file under /m
many times: every thread rewrites paths in its own scratch slot, so no read may see another
thread's path. Prints the error count and the children's statuses."""
import threading, os, sys
errors = []
def work(i):
    for n in range(800):
        p = f"/m/f{i}" if n % 2 else f"/m/./f{i}"
        with open(p) as f:
            if f.read() != f"file {i}\n":
                errors.append((i, n))
        os.stat(p)
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
pids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        work(i); os._exit(0 if not errors else 1)
    pids.append(pid)
print("errors", len(errors), "children", [os.waitpid(p, 0)[1] for p in pids])
