/* signal_cost.c: the cost of one delivered signal — raise(SIGUSR1) N times with a counting
 * handler; prints the mean time per signal. Under a ptrace-based agent every delivery is a
 * signal-delivery stop, whatever the seccomp filter traps.
 * Build and run: gcc -O2 -o signal_cost bench/agent/signal_cost.c && ./signal_cost 20000
 * (then under `roost run --`, `strace -f -e trace=none`, `proot`). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile sig_atomic_t handled;
static void count(int sig) { (void)sig; handled++; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    if (n <= 0) {
        fprintf(stderr, "usage: %s [SIGNALS > 0]\n", argv[0]);
        return 2;
    }
    signal(SIGUSR1, count);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++)
        raise(SIGUSR1);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.2f us per signal (%d handled)\n", ns / 1e3 / n, (int)handled);
    return handled == n ? 0 : 1;
}
