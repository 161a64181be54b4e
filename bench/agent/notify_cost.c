/* notify_cost: the cost of one seccomp user-notification round trip (a supervisor thread
 * reads the path argument and answers CONTINUE) for stat(), to compare with the ptrace
 * seccomp stop roost run uses (iobench "stat" under roost run). Usage: notify_cost [N];
 * with SYNC=1 in the environment the listener gets SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
 * (Linux 6.6), as roost run sets it.
 * Build: gcc -O2 -pthread -o notify_cost bench/agent/notify_cost.c */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/audit.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static int listener;
static void *supervisor(void *a) {
    (void)a;
    struct seccomp_notif *req = calloc(1, 4096);
    struct seccomp_notif_resp *resp = calloc(1, 4096);
    for (;;) {
        memset(req, 0, sizeof *req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) return NULL;
        char buf[256];
        char path[64]; snprintf(path, sizeof path, "/proc/%d/mem", req->pid);
        /* read the path like the agent would */
        struct iovec l = { buf, sizeof buf }, r = { (void *)req->data.args[1], sizeof buf };
        process_vm_readv(req->pid, &l, 1, &r, 1, 0);
        resp->id = req->id; resp->val = 0; resp->error = 0; resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
    }
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_newfstatat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { 4, f };
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (listener < 0) { perror("seccomp"); return 1; }
    if (getenv("SYNC")) {
        /* SECCOMP_IOCTL_NOTIF_SET_FLAGS (newer than some headers); the flag goes by value. */
        if (ioctl(listener, _IOW('!', 4, unsigned long long), 1UL) != 0) perror("SET_FLAGS");
    }
    pthread_t t; pthread_create(&t, NULL, supervisor, NULL);
    struct stat st; struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) stat("/etc/hostname", &st);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("user-notif stat %.3f us\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3);
    return 0;
}
