/* untrapped: what calls an agent never traps cost — getpid, a 1-byte read of a local fd
 * (a pipe kept full) and a futex wake with no waiter — in nanoseconds per call; then calls
 * whose arguments roost's filter looks at before it lets them through (it traps them only
 * when they name roost's own processes or set a file's owner): a signal 0 to this process
 * (kill) and to this thread (tgkill), fcntl F_GETFL and ioctl FIONREAD on the pipe,
 * getsockopt SO_TYPE.
 *   untrapped [N]         as the program is run (natively, under roost run, under proot)
 *   untrapped --floor [N] first installs a one-instruction allow-all seccomp filter: the
 *                         floor any seccomp-based agent pays for a call it never traps
 * Prints one line per call: "NAME NS ns". Build: gcc -O2 -o untrapped bench/agent/untrapped.c */
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int pipe_fds[2];
static int futex_word;

static void call_getpid(void) { syscall(SYS_getpid); }

static void call_read(void) {
    char c;
    if (syscall(SYS_read, pipe_fds[0], &c, 1) != 1 || syscall(SYS_write, pipe_fds[1], &c, 1) != 1)
        abort();
}

static void call_futex(void) { syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

static int me, self_thread, sockets[2];

static void call_kill(void) { syscall(SYS_kill, me, 0); }

static void call_tgkill(void) { syscall(SYS_tgkill, me, self_thread, 0); }

static void call_fcntl(void) { syscall(SYS_fcntl, pipe_fds[0], F_GETFL); }

static void call_ioctl(void) {
    int n;
    syscall(SYS_ioctl, pipe_fds[0], FIONREAD, &n);
}

static void call_getsockopt(void) {
    int type;
    socklen_t len = sizeof type;
    syscall(SYS_getsockopt, sockets[0], SOL_SOCKET, SO_TYPE, &type, &len);
}

/* The best of 5 rounds of n calls: the least disturbed by the rest of the machine. */
static double best_ns(void (*call)(void), long n) {
    double best = 1e18;
    for (int round = 0; round < 5; round++) {
        double a = now_ns();
        for (long i = 0; i < n; i++) call();
        double per = (now_ns() - a) / n;
        if (per < best) best = per;
    }
    return best;
}

int main(int argc, char **argv) {
    int floor = argc > 1 && strcmp(argv[1], "--floor") == 0;
    long n = argc > 1 + floor ? atol(argv[1 + floor]) : 1000000;
    if (pipe(pipe_fds) != 0 || write(pipe_fds[1], "x", 1) != 1) {
        perror("pipe");
        return 1;
    }
    if (floor) {
        struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
        struct sock_fprog prog = {1, allow};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
            perror("seccomp");
            return 1;
        }
    }
    printf("getpid %.1f ns\n", best_ns(call_getpid, n));
    /* read+write of one byte: two calls, reported per call */
    printf("read %.1f ns\n", best_ns(call_read, n / 2) / 2);
    printf("futex %.1f ns\n", best_ns(call_futex, n));
    me = getpid();
    self_thread = syscall(SYS_gettid);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) != 0) {
        perror("socketpair");
        return 1;
    }
    printf("kill %.1f ns\n", best_ns(call_kill, n));
    printf("tgkill %.1f ns\n", best_ns(call_tgkill, n));
    printf("fcntl %.1f ns\n", best_ns(call_fcntl, n));
    printf("ioctl %.1f ns\n", best_ns(call_ioctl, n));
    printf("getsockopt %.1f ns\n", best_ns(call_getsockopt, n));
    return 0;
}
