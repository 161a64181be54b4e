/* seccomp_floor: what any seccomp filter costs a cheap syscall, with no tracer at all.
 * Times getpid natively, then installs a one-instruction allow-all filter and times it
 * again. This is the floor of a seccomp-based agent for calls it never traps.
 * Usage: seccomp_floor [N]. Build: gcc -O2 -o seccomp_floor bench/agent/seccomp_floor.c */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double getpid_ns(long n) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) syscall(SYS_getpid);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    double native = getpid_ns(n);
    struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
    struct sock_fprog prog = { 1, allow };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
        perror("seccomp");
        return 1;
    }
    double filtered = getpid_ns(n);
    printf("getpid native %.1f ns, under an allow-all seccomp filter %.1f ns (%.2fx)\n",
           native, filtered, filtered / native);
    return 0;
}
