/* probe_cost: what identifying a descriptor costs, the two ways roost can: kcmp
 * (KCMP_EPOLL_TFD) against an epoll set holding the file, and readlink of
 * /proc/self/fd/N (crates/agent/src/vfd.rs). Also checks that kcmp tells the file from
 * another and fails once the file is gone. Usage: probe_cost [N] (default 200000).
 * Build: gcc -O2 -o probe_cost bench/remote/probe_cost.c */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double since(struct timespec a, long n) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int pair[2], set = epoll_create1(0);
    struct epoll_event nothing = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) || set < 0 ||
        epoll_ctl(set, EPOLL_CTL_ADD, pair[1], &nothing)) {
        perror("setup");
        return 1;
    }
    /* The file lives on at 900 only, as a program's copy would. */
    int registered = pair[1];
    if (dup2(pair[1], 900) < 0) {
        perror("dup2");
        return 1;
    }
    close(pair[1]);
    struct kcmp_epoll_slot slot = {.efd = set, .tfd = registered, .toff = 0};
    pid_t me = getpid();
    long same = syscall(SYS_kcmp, me, me, KCMP_EPOLL_TFD, 900, &slot);
    long other = syscall(SYS_kcmp, me, me, KCMP_EPOLL_TFD, pair[0], &slot);
    if (same != 0 || other == 0) {
        fprintf(stderr, "kcmp: same %ld, other %ld\n", same, other);
        return 1;
    }
    struct timespec a;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        syscall(SYS_kcmp, me, me, KCMP_EPOLL_TFD, 900, &slot);
    printf("kcmp %.3f us\n", since(a, n));
    char buf[64];
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        readlink("/proc/self/fd/900", buf, sizeof buf);
    printf("readlink %.3f us\n", since(a, n));
    /* The last copy closed: the set forgets the file (kcmp fails with ENOENT), even for
     * a descriptor that is open (pair[0], the other end). */
    close(900);
    errno = 0;
    if (syscall(SYS_kcmp, me, me, KCMP_EPOLL_TFD, pair[0], &slot) != -1 || errno != ENOENT) {
        fprintf(stderr, "kcmp still finds a closed file (errno %d)\n", errno);
        return 1;
    }
    return 0;
}
