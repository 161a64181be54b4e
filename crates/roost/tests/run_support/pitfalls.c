/* pitfalls: one small program per agent pitfall, chosen by argv[1]. Each mode prints what
 * it observed; the integration tests (run_pitfalls.rs) compare it with what a correct
 * namespace gives. Paths are logical: the tests mount a temporary directory at /m. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/openat2.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void cat_fd(int fd) {
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n < 0 ? 0 : n] = 0;
    printf("%s", buf);
}

static int cat(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { printf("open %s: %s\n", path, strerror(errno)); return 1; }
    cat_fd(fd);
    close(fd);
    return 0;
}

static int do_openat2(void) {
    struct open_how how = { .flags = O_RDONLY };
    int fd = syscall(SYS_openat2, AT_FDCWD, "/m/f", &how, sizeof how);
    if (fd < 0) { printf("openat2: %s\n", strerror(errno)); return 1; }
    cat_fd(fd);
    int dir = open("/m", O_DIRECTORY | O_RDONLY);
    struct open_how beneath = { .flags = O_RDONLY, .resolve = RESOLVE_BENEATH };
    fd = syscall(SYS_openat2, dir, "sub/g", &beneath, sizeof beneath);
    if (fd < 0) { printf("openat2 beneath: %s\n", strerror(errno)); return 1; }
    cat_fd(fd);
    fd = syscall(SYS_openat2, dir, "sub/../f", &beneath, sizeof beneath);
    if (fd < 0) { printf("openat2 beneath with ..: %s\n", strerror(errno)); return 1; }
    cat_fd(fd);
    fd = syscall(SYS_openat2, dir, "../etc/hostname", &beneath, sizeof beneath);
    printf("escape: %s\n", fd < 0 ? strerror(errno) : "opened");
    return 0;
}

static int do_fexecve(void) {
    char *argv[] = { "echo", "from", "fexecve", NULL };
    int fd = open("/m/echo", O_RDONLY);
    if (fd < 0) { printf("open: %s\n", strerror(errno)); return 1; }
    fexecve(fd, argv, environ);
    printf("fexecve: %s\n", strerror(errno));
    return 1;
}

static int do_execveat(void) {
    char *argv[] = { "echo", "from", "execveat", NULL };
    int dir = open("/m", O_DIRECTORY | O_RDONLY);
    syscall(SYS_execveat, dir, "echo", argv, environ, 0);
    printf("execveat: %s\n", strerror(errno));
    return 1;
}

/* execveat of a script named relative to a dirfd: its interpreter must find the script. */
static int do_execveat_script(void) {
    char *argv[] = { "script", NULL };
    int dir = open("/m", O_DIRECTORY | O_RDONLY);
    syscall(SYS_execveat, dir, "script", argv, environ, 0);
    printf("execveat: %s\n", strerror(errno));
    return 1;
}

static int do_statx(void) {
    struct statx stx;
    if (statx(AT_FDCWD, "/m/f", 0, STATX_SIZE, &stx) != 0) { printf("statx: %s\n", strerror(errno)); return 1; }
    printf("size %llu\n", (unsigned long long)stx.stx_size);
    int r = statx(AT_FDCWD, "/m/nope", 0, STATX_SIZE, &stx);
    printf("missing: %s\n", r == 0 ? "found" : strerror(errno));
    return 0;
}

static int do_faccessat2(void) {
    long r = syscall(SYS_faccessat2, AT_FDCWD, "/m/f", R_OK, AT_EACCESS);
    printf("f: %s\n", r == 0 ? "ok" : strerror(errno));
    r = syscall(SYS_faccessat2, AT_FDCWD, "/m/nope", R_OK, 0);
    printf("nope: %s\n", r == 0 ? "ok" : strerror(errno));
    return 0;
}

static int do_fchmodat2(void) {
    long r = syscall(452 /* fchmodat2 */, AT_FDCWD, "/m/f", 0600, 0);
    printf("fchmodat2: %s\n", r == 0 ? "ok" : strerror(errno));
    return 0;
}

static int do_empty_path(void) {
    int fd = open("/m/f", O_PATH);
    struct stat st;
    if (fstatat(fd, "", &st, AT_EMPTY_PATH) != 0) { printf("fstatat: %s\n", strerror(errno)); return 1; }
    printf("size %lld\n", (long long)st.st_size);
    return 0;
}

static int do_proc_self(void) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    buf[n < 0 ? 0 : n] = 0;
    printf("exe %s\n", buf);
    return 0;
}

static void *exec_thread(void *arg) {
    (void)arg;
    char *argv[] = { "echo", "from", "thread", NULL };
    execve("/m/echo", argv, environ);
    printf("execve: %s\n", strerror(errno));
    exit(1);
}

static int do_thread_exec(void) {
    pthread_t t;
    pthread_create(&t, NULL, exec_thread, NULL);
    pthread_join(t, NULL);
    return 1;
}

static int do_vfork(void) {
    pid_t pid = vfork();
    if (pid == 0) {
        char *argv[] = { "echo", "from", "vfork", NULL };
        execve("/m/echo", argv, environ);
        _exit(99);
    }
    int status;
    waitpid(pid, &status, 0);
    printf("child exit %d\n", WEXITSTATUS(status));
    return 0;
}

static volatile int clone3_done;
static char clone3_buf[64];

static void clone3_child(void) {
    int fd = syscall(SYS_openat, AT_FDCWD, "/m/f", O_RDONLY);
    long n = fd < 0 ? 0 : syscall(SYS_read, fd, clone3_buf, sizeof clone3_buf - 1);
    clone3_buf[n < 0 ? 0 : n] = 0;
    __atomic_store_n(&clone3_done, fd < 0 ? 2 : 1, __ATOMIC_SEQ_CST);
    syscall(SYS_exit, 0);
}

static int do_clone3(void) {
    size_t size = 1 << 16;
    char *stack = malloc(size);
    struct clone_args args = {
        .flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM,
        .stack = (uint64_t)(uintptr_t)stack,
        .stack_size = size,
    };
    register void (*fn)(void) asm("r12") = clone3_child;
    long ret;
    asm volatile("syscall\n\t"
                 "test %%rax, %%rax\n\t"
                 "jnz 1f\n\t"
                 "call *%%r12\n\t"
                 "1:"
                 : "=a"(ret)
                 : "a"(SYS_clone3), "D"(&args), "S"(sizeof args), "r"(fn)
                 : "rcx", "r11", "memory");
    if (ret < 0) { printf("clone3: %s\n", strerror(-ret)); return 1; }
    while (!__atomic_load_n(&clone3_done, __ATOMIC_SEQ_CST)) usleep(1000);
    printf("thread read: %s", clone3_done == 1 ? clone3_buf : "failed\n");
    return 0;
}

static volatile sig_atomic_t got_usr1;
static void on_usr1(int s) { (void)s; got_usr1 = 1; }

static int do_signals(const char *how) {
    if (!strcmp(how, "handler")) {
        signal(SIGUSR1, on_usr1);
        kill(getpid(), SIGUSR1);
        printf("handled %d\n", (int)got_usr1);
        return 3;
    }
    if (!strcmp(how, "segv")) {
        volatile int *p = NULL;
        return *p;
    }
    raise(SIGTERM);
    return 0;
}

static int do_exdev(void) {
    int r = rename("/a/f", "/b/f");
    printf("rename: %s\n", r == 0 ? "ok" : strerror(errno));
    r = link("/a/f", "/b/g");
    printf("link: %s\n", r == 0 ? "ok" : strerror(errno));
    r = rename("/a/f", "/a/f2");
    printf("same mount: %s\n", r == 0 ? "ok" : strerror(errno));
    return 0;
}

static int do_symlink(void) {
    if (symlink("/m/real/f", "/m/link") != 0) { printf("symlink: %s\n", strerror(errno)); return 1; }
    cat("/m/link");
    char buf[256];
    ssize_t n = readlink("/m/link", buf, sizeof buf - 1);
    buf[n < 0 ? 0 : n] = 0;
    printf("target %s\n", buf);
    struct stat st;
    printf("lstat link: %s\n", lstat("/m/link", &st) == 0 && S_ISLNK(st.st_mode) ? "symlink" : "not");
    return cat("/m/dirlink/f");
}

static int do_unix(void) {
    int srv = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    strcpy(a.sun_path, "/m/sock");
    if (bind(srv, (struct sockaddr *)&a, sizeof a) != 0) { printf("bind: %s\n", strerror(errno)); return 1; }
    listen(srv, 1);
    int cli = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(cli, (struct sockaddr *)&a, sizeof a) != 0) { printf("connect: %s\n", strerror(errno)); return 1; }
    int acc = accept(srv, NULL, NULL);
    write(cli, "stream ok\n", 10);
    cat_fd(acc);
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un da = { .sun_family = AF_UNIX };
    strcpy(da.sun_path, "/m/dsock");
    if (bind(d, (struct sockaddr *)&da, sizeof da) != 0) { printf("bind dgram: %s\n", strerror(errno)); return 1; }
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (sendto(s, "sendto ok\n", 10, 0, (struct sockaddr *)&da, sizeof da) != 10) { printf("sendto: %s\n", strerror(errno)); return 1; }
    cat_fd(d);
    struct iovec iov = { .iov_base = "sendmsg ok\n", .iov_len = 11 };
    struct msghdr m = { .msg_name = &da, .msg_namelen = sizeof da, .msg_iov = &iov, .msg_iovlen = 1 };
    if (sendmsg(s, &m, 0) != 11) { printf("sendmsg: %s\n", strerror(errno)); return 1; }
    cat_fd(d);
    return 0;
}

static void *drain_later(void *fd) {
    usleep(400000);
    char buf[64];
    while (recv(*(int *)fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
    return NULL;
}

/* A sendto that blocks on a full datagram socket (given by its path in the mount) is
 * interrupted by an SA_RESTART handler and restarted: it must reach the same socket. */
static int do_restarted_send(void) {
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un da = { .sun_family = AF_UNIX };
    strcpy(da.sun_path, "/m/full");
    unlink("/m/full");
    if (bind(d, (struct sockaddr *)&da, sizeof da) != 0) { printf("bind: %s\n", strerror(errno)); return 1; }
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    while (sendto(s, "x", 1, MSG_DONTWAIT, (struct sockaddr *)&da, sizeof da) == 1)
        ;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    pthread_t drainer;
    pthread_create(&drainer, NULL, drain_later, &d);
    alarm(0);
    struct itimerval at = { .it_value = { .tv_usec = 150000 } };
    setitimer(ITIMER_REAL, &at, NULL);
    ssize_t n = sendto(s, "last", 4, 0, (struct sockaddr *)&da, sizeof da);
    pthread_join(drainer, NULL);
    printf("handler ran: %s, send: %s\n", got_usr1 ? "yes" : "no", n == 4 ? "ok" : strerror(errno));
    return 0;
}

/* Paths inside structure arguments: a BPF map pinned at PIN and got back, and a uprobe on
 * BINARY (needs root, a BPF file system at PIN's directory and uprobe events). */
static int do_embedded(const char *pin, const char *binary) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = 4;
    a.value_size = 4;
    a.max_entries = 1;
    int map = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a);
    if (map < 0) { printf("bpf map: %s\n", strerror(errno)); return 1; }
    memset(&a, 0, sizeof a);
    a.pathname = (uintptr_t)pin;
    a.bpf_fd = map;
    int r = syscall(SYS_bpf, BPF_OBJ_PIN, &a, sizeof a);
    printf("pin: %s\n", r < 0 ? strerror(errno) : "ok");
    memset(&a, 0, sizeof a);
    a.pathname = (uintptr_t)pin;
    int fd = syscall(SYS_bpf, BPF_OBJ_GET, &a, sizeof a);
    printf("get: %s\n", fd < 0 ? strerror(errno) : "ok");
    unlink(pin);
    FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
    int type = -1;
    if (!f || fscanf(f, "%d", &type) != 1) { printf("no uprobe events\n"); return 1; }
    struct perf_event_attr pa;
    memset(&pa, 0, sizeof pa);
    pa.size = sizeof pa;
    pa.type = type;
    pa.uprobe_path = (uintptr_t)binary;
    pa.probe_offset = 0;
    int pfd = syscall(SYS_perf_event_open, &pa, -1, 0, -1, 0);
    printf("uprobe: %s\n", pfd < 0 ? strerror(errno) : "ok");
    return 0;
}

static int do_cwd(void) {
    if (chdir("/m/sub") != 0) { printf("chdir: %s\n", strerror(errno)); return 1; }
    char buf[4096];
    printf("getcwd %s\n", getcwd(buf, sizeof buf));
    ssize_t n = readlink("/proc/self/cwd", buf, sizeof buf - 1);
    buf[n < 0 ? 0 : n] = 0;
    printf("proc cwd %s\n", buf);
    cat("g");
    cat("../f");
    if (chdir("..") != 0) { printf("chdir ..: %s\n", strerror(errno)); return 1; }
    printf("after .. %s\n", getcwd(buf, sizeof buf));
    int dir = open("sub", O_DIRECTORY | O_RDONLY);
    fchdir(dir);
    printf("after fchdir %s\n", getcwd(buf, sizeof buf));
    return 0;
}

static int do_dirfd(void) {
    int dir = open("/m", O_DIRECTORY | O_RDONLY);
    int fd = openat(dir, "sub/g", O_RDONLY);
    if (fd < 0) { printf("openat sub/g: %s\n", strerror(errno)); return 1; }
    cat_fd(fd);
    fd = openat(dir, "../m/f", O_RDONLY);
    if (fd < 0) { printf("openat ../m/f: %s\n", strerror(errno)); return 1; }
    cat_fd(fd);
    int root = open("/", O_DIRECTORY | O_RDONLY);
    fd = openat(root, "m/sub/g", O_RDONLY);
    if (fd < 0) { printf("openat m/sub/g: %s\n", strerror(errno)); return 1; }
    cat_fd(fd);
    struct stat st;
    printf("fstatat: %s\n", fstatat(dir, "f", &st, 0) == 0 ? "ok" : strerror(errno));
    return 0;
}

static int do_refused(void) {
    printf("mount: %s\n", syscall(SYS_mount, "none", "/m", "tmpfs", 0, NULL) == 0 ? "ok" : strerror(errno));
    printf("umount2: %s\n", syscall(SYS_umount2, "/m", 0) == 0 ? "ok" : strerror(errno));
    printf("io_uring_setup: %s\n", syscall(SYS_io_uring_setup, 4, NULL) == 0 ? "ok" : strerror(errno));
    printf("acct: %s\n", syscall(SYS_acct, NULL) == 0 ? "ok" : strerror(errno));
    return 0;
}

static void *open_f(void *unused) {
    (void)unused;
    int fd = open("/m/f", O_RDONLY);
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* A fork while another thread makes the process's first rewritten call: the child must
 * still be able to open mounted paths. */
static int do_fork_race(void) {
    pthread_t worker;
    pthread_create(&worker, NULL, open_f, NULL);
    pid_t child = fork();
    if (child == 0) {
        int fd = open("/m/f", O_RDONLY);
        _exit(fd < 0 ? 1 : 0);
    }
    int status;
    waitpid(child, &status, 0);
    pthread_join(worker, NULL);
    printf("child %s\n", WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "opened" : "failed");
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) return 2;
    const char *m = argv[1];
    if (!strcmp(m, "openat2")) return do_openat2();
    if (!strcmp(m, "fexecve")) return do_fexecve();
    if (!strcmp(m, "execveat")) return do_execveat();
    if (!strcmp(m, "execveat_script")) return do_execveat_script();
    if (!strcmp(m, "statx")) return do_statx();
    if (!strcmp(m, "faccessat2")) return do_faccessat2();
    if (!strcmp(m, "fchmodat2")) return do_fchmodat2();
    if (!strcmp(m, "empty_path")) return do_empty_path();
    if (!strcmp(m, "proc_self")) return do_proc_self();
    if (!strcmp(m, "thread_exec")) return do_thread_exec();
    if (!strcmp(m, "vfork")) return do_vfork();
    if (!strcmp(m, "clone3")) return do_clone3();
    if (!strcmp(m, "signal")) return do_signals(argc > 2 ? argv[2] : "term");
    if (!strcmp(m, "exdev")) return do_exdev();
    if (!strcmp(m, "symlink")) return do_symlink();
    if (!strcmp(m, "unix")) return do_unix();
    if (!strcmp(m, "cwd")) return do_cwd();
    if (!strcmp(m, "embedded") && argc == 4) return do_embedded(argv[2], argv[3]);
    if (!strcmp(m, "restarted_send")) return do_restarted_send();
    if (!strcmp(m, "dirfd")) return do_dirfd();
    if (!strcmp(m, "refused")) return do_refused();
    if (!strcmp(m, "fork_race")) return do_fork_race();
    return 2;
}
