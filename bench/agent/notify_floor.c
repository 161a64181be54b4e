/* notify_floor: runs a command under the least a notification-based agent does: a seccomp
 * filter that notifies the calls roost's notification path traps most (openat, open,
 * newfstatat, statx, stat, lstat, access, faccessat, readlink, readlinkat, execve, unlink,
 * unlinkat, connect) and a supervisor that reads each call's path (or address) argument
 * from the caller's memory and answers CONTINUE, with synchronous wake-ups
 * as roost run sets them. The command's time under it against native is the floor for that
 * workload without an in-process fast path.
 * Usage: notify_floor COMMAND [ARG...]
 * Build: gcc -O2 -o notify_floor bench/agent/notify_floor.c */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static const int calls[] = {SYS_openat, SYS_open, SYS_newfstatat, SYS_statx, SYS_stat,
                            SYS_lstat, SYS_access, SYS_faccessat, SYS_readlink,
                            SYS_readlinkat, SYS_execve, SYS_unlink, SYS_unlinkat, SYS_connect};
#define NCALLS (sizeof calls / sizeof calls[0])

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: notify_floor COMMAND [ARG...]\n"); return 2; }
    struct sock_filter f[3 + NCALLS + 2];
    int k = 0;
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (unsigned i = 0; i < NCALLS; i++) {
        /* jump to the NOTIFY return, which sits after the remaining tests and the ALLOW */
        unsigned to_notify = NCALLS - i; /* tests left after this one + the ALLOW */
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, calls[i], to_notify, 0);
    }
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
    struct sock_fprog prog = {(unsigned short)k, f};
    int up[2], down[2]; /* child -> parent: the listener's number; parent -> child: go */
    if (pipe(up) || pipe(down)) return 1;
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        int listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        if (listener < 0) { perror("seccomp"); _exit(125); }
        /* the parent takes the listener over with pidfd_getfd, then lets the child go on */
        if (write(up[1], &listener, sizeof listener) != sizeof listener) _exit(125);
        char go;
        if (read(down[0], &go, 1) != 1) _exit(125);
        close(up[1]); close(down[0]); close(listener);
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    int remote;
    if (read(up[0], &remote, sizeof remote) != sizeof remote) return 1;
    int pidfd = syscall(SYS_pidfd_open, child, 0);
    int listener = syscall(SYS_pidfd_getfd, pidfd, remote, 0);
    if (listener < 0) { perror("pidfd_getfd"); return 1; }
    ioctl(listener, 0x40082104 /* SECCOMP_IOCTL_NOTIF_SET_FLAGS */, 1UL /* SYNC_WAKE_UP */);
    if (write(down[1], "g", 1) != 1) return 1;
    close(up[0]); close(up[1]); close(down[0]); close(down[1]); close(pidfd);
    struct seccomp_notif *req = calloc(1, 4096);
    struct seccomp_notif_resp *resp = calloc(1, 4096);
    char buf[4096];
    for (;;) {
        struct pollfd p = {listener, POLLIN, 0};
        poll(&p, 1, -1);
        if (!(p.revents & POLLIN)) break; /* POLLHUP: no process is left under the filter */
        memset(req, 0, sizeof *req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) continue; /* caller gone */
        long nr = req->data.nr;
        int at = nr == SYS_openat || nr == SYS_newfstatat || nr == SYS_statx || nr == SYS_faccessat ||
                 nr == SYS_readlinkat || nr == SYS_unlinkat || nr == SYS_connect;
        struct iovec l = {buf, 256}, r = {(void *)req->data.args[at], 256};
        process_vm_readv(req->pid, &l, 1, &r, 1, 0);
        resp->id = req->id; resp->val = 0; resp->error = 0;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
    }
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
