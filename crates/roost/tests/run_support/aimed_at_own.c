/* aimed_at_own: makes every call roost watches for being aimed at its own processes (signals,
 * limits, pidfds, memory, descriptor owners, /proc files, pidfs handles), aimed instead at
 * a child and a thread of this program, and prints one "CALL RESULT" line each ("ok" or
 * the errno's number). Under roost the lines must be the native ones: roost refuses only
 * what names roost itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#define KCMP_FILE 0

static void say(const char *call, long rc, int e) {
    if (rc < 0)
        printf("%s %d\n", call, e);
    else
        printf("%s ok\n", call);
}

#define PROBE(call, expr)                                                                  \
    do {                                                                                   \
        long rc_ = (expr);                                                                 \
        say(call, rc_, errno);                                                             \
    } while (0)

static volatile int thread_id;
static int hold[2];

static void *thread(void *unused) {
    (void)unused;
    thread_id = syscall(SYS_gettid);
    char c;
    if (read(hold[0], &c, 1) < 0)
        return NULL;
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGUSR1, SIG_IGN);
    if (pipe(hold) != 0)
        return 2;
    pthread_t t;
    pthread_create(&t, NULL, thread, NULL);
    while (!thread_id)
        usleep(1000);
    pid_t child = fork();
    if (child == 0) {
        char c;
        if (read(hold[0], &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    pid_t me = getpid();
    long value = 42;

    PROBE("kill-child", kill(child, 0));
    PROBE("kill-own-thread", kill(thread_id, SIGUSR1));
    PROBE("kill-group", kill(0, 0));
    PROBE("tkill-own-thread", syscall(SYS_tkill, thread_id, SIGUSR1));
    PROBE("tgkill-own-thread", syscall(SYS_tgkill, me, thread_id, SIGUSR1));
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_code = SI_QUEUE;
    info.si_pid = me;
    info.si_uid = getuid();
    PROBE("rt_sigqueueinfo-child", syscall(SYS_rt_sigqueueinfo, child, 0, &info));
    PROBE("rt_tgsigqueueinfo-own-thread",
          syscall(SYS_rt_tgsigqueueinfo, me, thread_id, SIGUSR1, &info));
    struct rlimit old;
    PROBE("prlimit64-child", syscall(SYS_prlimit64, child, RLIMIT_NOFILE, NULL, &old));
    PROBE("prlimit64-self", syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &old));
    PROBE("get_robust_list-child", syscall(SYS_get_robust_list, child, &(void *){0},
                                           &(size_t){0}));
    struct iovec local = {.iov_base = &(long){0}, .iov_len = sizeof value};
    struct iovec remote = {.iov_base = &value, .iov_len = sizeof value};
    PROBE("process_vm_readv-child", process_vm_readv(child, &local, 1, &remote, 1, 0));
    PROBE("process_vm_writev-child", process_vm_writev(child, &local, 1, &remote, 1, 0));
    PROBE("kcmp-child", syscall(SYS_kcmp, me, child, KCMP_FILE, 0, 0));

    int pidfd = syscall(SYS_pidfd_open, child, 0);
    say("pidfd_open-child", pidfd, errno);
    PROBE("pidfd_send_signal-child", syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0));
    int got = syscall(SYS_pidfd_getfd, pidfd, 0, 0);
    say("pidfd_getfd-child", got, errno);
    if (got >= 0)
        close(got);
    int thread_fd = syscall(SYS_pidfd_open, thread_id, PIDFD_THREAD);
    say("pidfd_open-own-thread", thread_fd, errno);
    PROBE("pidfd_send_signal-own-thread",
          syscall(SYS_pidfd_send_signal, thread_fd, 0, NULL, 0));

    char path[64];
    snprintf(path, sizeof path, "/proc/%d", child);
    int dir = open(path, O_RDONLY | O_DIRECTORY);
    say("open-proc-child", dir, errno);
    PROBE("pidfd_send_signal-proc-child", syscall(SYS_pidfd_send_signal, dir, 0, NULL, 0));
    snprintf(path, sizeof path, "/proc/%d/status", child);
    int status = open(path, O_RDONLY);
    say("open-proc-child-status", status, errno);
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", me, thread_id);
    int stat = open(path, O_RDONLY);
    say("open-proc-own-thread-stat", stat, errno);
    char name[256];
    snprintf(path, sizeof path, "/proc/%d/exe", child);
    PROBE("readlink-proc-child-exe", readlink(path, name, sizeof name));

    /* A pidfs handle of the child's pidfd, opened again. */
    struct {
        unsigned int bytes;
        int type;
        unsigned char f[128];
    } h = {.bytes = 128};
    int mount_id;
    PROBE("name_to_handle_at-pidfd",
          name_to_handle_at(pidfd, "", (void *)&h, &mount_id, AT_EMPTY_PATH));
    int again = open_by_handle_at(pidfd, (void *)&h, O_RDONLY);
    say("open_by_handle_at-pidfd", again, errno);

    /* The process a file's signals go to. */
    int p[2];
    if (pipe(p) != 0)
        return 2;
    PROBE("fcntl-setown-child", fcntl(p[0], F_SETOWN, child));
    PROBE("fcntl-setown-group", fcntl(p[0], F_SETOWN, -getpgrp()));
    struct f_owner_ex owner = {.type = F_OWNER_TID, .pid = thread_id};
    PROBE("fcntl-setown_ex-own-thread", fcntl(p[0], F_SETOWN_EX, &owner));
    PROBE("fcntl-getfl", fcntl(p[0], F_GETFL));
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 2;
    int who = child;
    PROBE("ioctl-fiosetown-child", ioctl(sv[0], FIOSETOWN, &who));
    int mine = 0;
    PROBE("ioctl-fiogetown", ioctl(sv[0], FIOGETOWN, &mine));
    printf("owner-is-child %s\n", mine == child ? "yes" : "no");

    if (write(hold[1], "xx", 2) != 2)
        return 2;
    int st;
    waitpid(child, &st, 0);
    pthread_join(t, NULL);
    return 0;
}
