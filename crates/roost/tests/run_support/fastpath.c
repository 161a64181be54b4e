/* Probes of roost's in-process fast path (run_fastpath.rs). Modes:
 *   lookups PATH...  each way of looking a name up, one line per path and call
 *   raw PATH         stat by a `syscall` instruction of this program's own
 *   stub PATH        make one call the fast path answers, then find roost's code page (an
 *                    anonymous r-x page starting with `syscall; ret`) and stat PATH from
 *                    it, as a hostile program would
 *   stress PATH N    stat PATH from the main thread, a second thread, a signal handler and
 *                    vfork children at once; says how many answers were wrong */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static void show_stat(const char *what, const char *path, int r, const struct stat *st) {
    if (r != 0)
        printf("%s %s: %s\n", what, path, strerror(errno));
    else
        printf("%s %s: mode %o size %lld\n", what, path, st->st_mode, (long long)st->st_size);
}

static void lookups(const char *path) {
    struct stat st;
    int r = stat(path, &st);
    show_stat("stat", path, r, &st);
    r = lstat(path, &st);
    show_stat("lstat", path, r, &st);
    r = fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW);
    show_stat("fstatat-nofollow", path, r, &st);
    struct statx sx;
    r = statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &sx);
    if (r != 0)
        printf("statx %s: %s\n", path, strerror(errno));
    else
        printf("statx %s: mode %o size %llu\n", path, sx.stx_mode, (unsigned long long)sx.stx_size);
    printf("access %s: R %d W %d X %d F %d\n", path, access(path, R_OK), access(path, W_OK),
           access(path, X_OK), access(path, F_OK));
    printf("faccessat-eaccess %s: %d\n", path, faccessat(AT_FDCWD, path, R_OK, AT_EACCESS));
    char link[256];
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0)
        printf("readlink %s: %s\n", path, strerror(errno));
    else
        printf("readlink %s: %.*s\n", path, (int)n, link);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        printf("open %s: %s\n", path, strerror(errno));
    } else {
        char buf[64] = {0};
        ssize_t got = read(fd, buf, sizeof buf - 1);
        if (got < 0)
            printf("open %s: read: %s\n", path, strerror(errno));
        else
            printf("open %s: %zd bytes: %.*s\n", path, got, (int)strcspn(buf, "\n"), buf);
        r = fstat(fd, &st);
        show_stat("fstat", path, r, &st);
        /* A name relative to the descriptor, as find and fts make them. */
        if (S_ISDIR(st.st_mode)) {
            r = fstatat(fd, "f", &st, AT_SYMLINK_NOFOLLOW);
            show_stat("fstatat-dirfd f in", path, r, &st);
        }
        char proc[64], target[512];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        n = readlink(proc, target, sizeof target - 1);
        printf("fd name %s: %.*s\n", path, n < 0 ? 0 : (int)n, target);
        close(fd);
    }
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_PATH);
    printf("open-path-nofollow %s: %s\n", path, fd < 0 ? strerror(errno) : "ok");
    if (fd >= 0) close(fd);
    char cwd[512];
    printf("getcwd: %s\n", getcwd(cwd, sizeof cwd) ? cwd : strerror(errno));
    char *own = getcwd(NULL, 0);
    printf("getcwd(NULL): %s\n", own ? own : strerror(errno));
    free(own);
    /* realpath into a buffer (what a failure leaves there too), and allocated. */
    char resolved[PATH_MAX];
    strcpy(resolved, "(untouched)");
    char *canonical = realpath(path, resolved);
    printf("realpath %s: %s [%s]\n", path, canonical ? canonical : strerror(errno), resolved);
    char *fresh = canonicalize_file_name(path);
    printf("canonicalize %s: %s\n", path, fresh ? fresh : strerror(errno));
    free(fresh);
}

static long raw_newfstatat(const char *path, struct stat *st) {
    long ret;
    register long r10 __asm__("r10") = 0;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_newfstatat), "D"((long)AT_FDCWD), "S"(path), "d"(st), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}

/* roost's code page, if this process has one. */
static uintptr_t find_code_page(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return 0;
    char line[512];
    uintptr_t found = 0;
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned long from, to, offset, inode;
        char perms[8], dev[16];
        if (sscanf(line, "%lx-%lx %7s %lx %15s %lu", &from, &to, perms, &offset, dev, &inode) != 6)
            continue;
        if (strcmp(perms, "r-xp") || inode != 0 || to - from != 4096) continue;
        const unsigned char *code = (const unsigned char *)from;
        if (code[0] == 0x0f && code[1] == 0x05 && code[2] == 0xc3) found = from;
    }
    fclose(maps);
    return found;
}

static long stat_from(uintptr_t page, const char *path, struct stat *st) {
    long ret;
    register long r10 __asm__("r10") = 0;
    __asm__ volatile("call *%[page]"
                     : "=a"(ret)
                     : "0"((long)SYS_newfstatat), "D"((long)AT_FDCWD), "S"(path), "d"(st),
                       "r"(r10), [page] "r"(page)
                     : "rcx", "r11", "memory");
    return ret;
}

static const char *stress_path;
static struct stat expected;
static volatile long wrong;

static int same(const struct stat *a) {
    return a->st_ino == expected.st_ino && a->st_size == expected.st_size;
}

static void on_alarm(int sig) {
    (void)sig;
    int saved = errno;
    struct stat st;
    if (stat(stress_path, &st) != 0 || !same(&st)) wrong++;
    errno = saved;
}

static void *thread_loop(void *arg) {
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        struct stat st;
        if (stat(stress_path, &st) != 0 || !same(&st)) __atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
    }
    return 0;
}

static int stress(const char *path, long n) {
    stress_path = path;
    if (stat(path, &expected) != 0) {
        printf("stat %s: %s\n", path, strerror(errno));
        return 1;
    }
    signal(SIGALRM, on_alarm);
    struct itimerval every = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &every, 0);
    pthread_t t;
    pthread_create(&t, 0, thread_loop, (void *)n);
    for (long i = 0; i < n; i++) {
        struct stat st;
        if (stat(path, &st) != 0 || !same(&st)) wrong++;
        if (i % 1000 == 0) {
            pid_t child = vfork();
            if (child == 0) {
                struct stat cs;
                _exit(stat(path, &cs) == 0 && cs.st_ino == expected.st_ino ? 0 : 1);
            }
            int status;
            waitpid(child, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) wrong++;
        }
    }
    pthread_join(t, 0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    printf("wrong answers: %ld\n", wrong);
    return wrong != 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, 0, _IOLBF, 0);
    if (argc >= 2 && !strcmp(argv[1], "lookups")) {
        for (int i = 2; i < argc; i++) lookups(argv[i]);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "raw")) {
        struct stat st;
        long r = raw_newfstatat(argv[2], &st);
        if (r < 0) printf("raw %s: %s\n", argv[2], strerror((int)-r));
        else printf("raw %s: size %lld\n", argv[2], (long long)st.st_size);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "stub")) {
        struct stat any;
        stat("/", &any); /* the fast path starts on its first call */
        uintptr_t page = find_code_page();
        if (!page) {
            printf("no code page\n");
            return 0;
        }
        struct stat st;
        long r = stat_from(page, argv[2], &st);
        if (r < 0) printf("from the code page %s: %s\n", argv[2], strerror((int)-r));
        else printf("from the code page %s: size %lld\n", argv[2], (long long)st.st_size);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "stress")) return stress(argv[2], atol(argv[3]));
    fprintf(stderr, "usage: fastpath lookups PATH... | raw PATH | stub PATH | stress PATH N\n");
    return 2;
}
