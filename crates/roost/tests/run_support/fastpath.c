/* Probes of roost's in-process fast path (run_fastpath.rs). Modes:
 *   lookups PATH...  each way of looking a name up, one line per path and call
 *   raw PATH         stat by a `syscall` instruction of this program's own
 *   stub PATH [mem]  make one call the fast path answers, then find roost's code page (an
 *                    anonymous r-x page starting with `syscall; ret`) and stat PATH from
 *                    it, as a hostile program would; with `mem`, also open roost's own
 *                    memory (/proc/PARENT/mem) and read the link of its descriptor 0
 *                    (/proc/PARENT/fd/0) from it
 *   stress PATH N    stat PATH from the main thread, a second thread, a signal handler and
 *                    vfork children at once; says how many answers were wrong
 *   edges PATH...    calls whose arguments the kernel refuses before it looks at the path
 *                    (statx's mask and flags, readlink of 0 bytes, access's mode)
 *   streams [DIR]    directory streams and fopen in DIR (by default the working directory),
 *                    which must be writable and empty: every behaviour a program may see,
 *                    naming files relative to DIR, to be compared with a run outside roost */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
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

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One line: what a stream (or the failure to make one) lists, names sorted, with types;
 * not the names of the directory $FASTPATH_SHARED_DIR, which other programs change. */
static void show_listing(const char *what, const char *path, DIR *d) {
    const char *shared = getenv("FASTPATH_SHARED_DIR");
    char real[PATH_MAX];
    if (d && shared && realpath(path, real) && !strcmp(real, shared)) {
        printf("%s %s: the shared directory, not listed\n", what, path);
        closedir(d);
        return;
    }
    if (!d) {
        printf("%s %s: %s\n", what, path, strerror(errno));
        return;
    }
    char *names[4096];
    size_t n = 0;
    struct dirent *e;
    errno = 0;
    while (n < 4096 && (e = readdir(d)))
        if (asprintf(&names[n], "%s:%d", e->d_name, e->d_type) >= 0) n++;
    int error = errno;
    qsort(names, n, sizeof *names, by_name);
    printf("%s %s:", what, path);
    for (size_t i = 0; i < n; i++) {
        printf(" %s", names[i]);
        free(names[i]);
    }
    printf(" (%s)\n", error ? strerror(error) : "end");
    closedir(d);
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
    show_listing("opendir", path, opendir(path));
    fd = open(path, O_RDONLY | O_DIRECTORY);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (fd >= 0 && !d) close(fd);
    show_listing("fdopendir", path, d);
    FILE *stream = fopen(path, "r");
    if (!stream) {
        printf("fopen %s: %s\n", path, strerror(errno));
    } else {
        char line[64] = "";
        errno = 0;
        char *got = fgets(line, sizeof line, stream);
        line[strcspn(line, "\n")] = 0;
        printf("fopen %s: %s\n", path, got ? line : strerror(errno));
        fclose(stream);
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

/* System call NR with four arguments, made from roost's code page. */
static long page_call(uintptr_t page, long nr, long a, long b, long c, long d) {
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("call *%[page]"
                     : "=a"(ret)
                     : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), [page] "r"(page)
                     : "rcx", "r11", "memory");
    return ret;
}

static long stat_from(uintptr_t page, const char *path, struct stat *st) {
    return page_call(page, SYS_newfstatat, AT_FDCWD, (long)path, (long)st, 0);
}

/* openat2 of PATH for reading and writing, made from roost's code page. */
static long open_from(uintptr_t page, const char *path) {
    struct open_how how = {.flags = O_RDWR | O_CLOEXEC};
    return page_call(page, SYS_openat2, AT_FDCWD, (long)path, (long)&how, sizeof how);
}

/* readlinkat of PATH into BUF, made from roost's code page. */
static long readlink_from(uintptr_t page, const char *path, char *buf, size_t size) {
    return page_call(page, SYS_readlinkat, AT_FDCWD, (long)path, (long)buf, (long)size);
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



static void show_errno(const char *what, const char *path, long r) {
    printf("%s %s: %s\n", what, path, r < 0 ? strerror(errno) : "ok");
}

static void edges(const char *path) {
    struct statx sx;
    show_errno("statx-bad-mask", path, statx(AT_FDCWD, path, 0, 0x80000000u, &sx));
    show_errno("statx-both-syncs", path,
               statx(AT_FDCWD, path, AT_STATX_FORCE_SYNC | AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &sx));
    char buf[8];
    show_errno("readlink-0", path, readlink(path, buf, 0));
    show_errno("access-bad-mode", path, access(path, 0100));
    show_errno("faccessat-bad-flags", path, faccessat(AT_FDCWD, path, R_OK, 0x4000000));
}

/* Where `streams` works ("" for the working directory), and a name there. */
static const char *streams_dir = "";

static const char *in_dir(const char *name) {
    static char buf[4][PATH_MAX];
    static int next;
    char *b = buf[next++ % 4];
    if (!*streams_dir || !*name) return name;
    snprintf(b, PATH_MAX, "%s/%s", streams_dir, name);
    return b;
}

/* What fopen in `mode` gives for `name`: the error, or where the stream stands, what it
 * reads from there, and whether its descriptor closes on exec. */
static void show_fopen(const char *name, const char *mode) {
    errno = 0;
    FILE *f = fopen(in_dir(name), mode);
    if (!f) {
        printf("fopen %s %s: %s\n", name, mode, strerror(errno));
        return;
    }
    long at = ftell(f);
    char buf[64] = "";
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    int read_error = ferror(f) ? errno : 0;
    printf("fopen %s %s: at %ld, read %zu '%s'%s%s, cloexec %d\n", name, mode, at, got,
           buf, read_error ? " " : "", read_error ? strerror(read_error) : "",
           (fcntl(fileno(f), F_GETFD) & FD_CLOEXEC) != 0);
    fclose(f);
}

/* Writes `text` through fopen in `mode` and says where the stream stood before and after. */
static void write_through(const char *name, const char *mode, const char *text) {
    FILE *f = fopen64(in_dir(name), mode);
    if (!f) {
        printf("write %s %s: %s\n", name, mode, strerror(errno));
        return;
    }
    long before = ftell(f);
    fputs(text, f);
    long after = ftell(f);
    printf("write %s %s: %ld -> %ld, close %d\n", name, mode, before, after, fclose(f));
}

static DIR *shared_stream;
static long shared_seen;

static void *read_shared(void *arg) {
    (void)arg;
    while (readdir(shared_stream)) __atomic_fetch_add(&shared_seen, 1, __ATOMIC_RELAXED);
    return 0;
}

/* The entries a stream gives from where it stands to its end. */
static long count_rest(DIR *d) {
    long n = 0;
    while (readdir(d)) n++;
    return n;
}

static int streams(const char *dir) {
    streams_dir = dir;
    /* fopen in every mode glibc reads, and in ones only its own fopen knows. */
    write_through("f", "w", "abc\n");
    write_through("f", "a", "def\n");
    write_through("f", "ab", "ghi\n");
    write_through("f", "r+", "X");
    write_through("g", "wx", "new\n");
    write_through("g", "wx", "again\n");
    write_through("g", "a+", "more\n");
    const char *modes[] = {"r", "rb", "r+", "a+", "re", "rm", "r,ccs=UTF-8", "rc", "q", "r+be"};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) show_fopen("f", modes[i]);
    show_fopen("g", "r");
    show_fopen("missing", "r");
    show_fopen("missing/f", "w");
    show_fopen(".", "r");
    show_fopen(".", "w");
    show_fopen("f/", "r");
    show_fopen("", "r");
    /* A directory of more entries than one getdents64 buffer holds. */
    mkdir(in_dir("big"), 0755);
    for (int i = 0; i < 1500; i++) {
        char name[64];
        snprintf(name, sizeof name, "big/entry-with-a-longish-name-%04d", i);
        close(open(in_dir(name), O_CREAT | O_WRONLY, 0644));
    }
    DIR *d = opendir(in_dir("big"));
    if (!d) {
        printf("opendir big: %s\n", strerror(errno));
        return 1;
    }
    printf("dirfd is a descriptor: %d\n", fcntl(dirfd(d), F_GETFD) >= 0);
    long all = count_rest(d);
    rewinddir(d);
    for (int i = 0; i < 700; i++) readdir(d);
    long mark = telldir(d);
    struct dirent *e = readdir(d);
    char after_mark[256];
    snprintf(after_mark, sizeof after_mark, "%s", e ? e->d_name : "(none)");
    long rest = count_rest(d);
    seekdir(d, mark);
    e = readdir(d);
    int found_again = e && !strcmp(e->d_name, after_mark);
    rewinddir(d);
    printf("big: %ld entries, %ld after the 701st, seekdir back finds it again: %d, telldir "
           "at the start %ld\n",
           all, rest, found_again, telldir(d));
    struct dirent entry, *result;
    long by_r = 0;
    int r;
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    while ((r = readdir_r(d, &entry, &result)) == 0 && result) by_r++;
    printf("readdir_r: %ld entries, ends with %d\n", by_r, r);
    errno = 0;
    printf("readdir at the end: %p, errno %d\n", (void *)readdir(d), errno);
    rewinddir(d);
    shared_stream = d;
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, read_shared, 0);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    printf("three threads on one stream: %ld entries\n", shared_seen);
    printf("closedir: %d\n", closedir(d));
    /* What cannot be a stream. */
    errno = 0;
    printf("opendir f: %s\n", opendir(in_dir("f")) ? "a stream" : strerror(errno));
    printf("opendir missing: %s\n", opendir(in_dir("missing")) ? "a stream" : strerror(errno));
    printf("opendir empty name: %s\n", opendir("") ? "a stream" : strerror(errno));
    int fd = open(in_dir("big"), O_RDONLY | O_DIRECTORY);
    d = fdopendir(fd);
    printf("fdopendir makes its descriptor close on exec: %d\n",
           (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    closedir(d);
    FILE *reopened = fopen(in_dir("f"), "re");
    reopened = reopened ? freopen(in_dir("g"), "r", reopened) : NULL;
    printf("freopen of an fopen 're' stream closes on exec: %d\n",
           reopened && (fcntl(fileno(reopened), F_GETFD) & FD_CLOEXEC) != 0);
    if (reopened) fclose(reopened);
    fd = open(in_dir("f"), O_RDONLY);
    printf("fdopendir of a file: %s\n", fdopendir(fd) ? "a stream" : strerror(errno));
    close(fd);
    printf("fdopendir -1: %s\n", fdopendir(-1) ? "a stream" : strerror(errno));
    fd = open(in_dir("big"), O_PATH | O_DIRECTORY);
    d = fdopendir(fd);
    errno = 0;
    e = d ? readdir(d) : 0;
    printf("fdopendir of an O_PATH descriptor: %s, readdir %s\n", d ? "a stream" : "none",
           e ? "an entry" : strerror(errno));
    if (d) closedir(d);
    DIR *volatile none = NULL; /* glibc answers EINVAL, though the header says non-null */
    int closed = closedir(none);
    printf("closedir(NULL): %d %s\n", closed, strerror(errno));
    /* A directory removed while listed ends the listing, with no error. */
    mkdir(in_dir("gone"), 0755);
    d = opendir(in_dir("gone"));
    rmdir(in_dir("gone"));
    errno = 0;
    e = readdir(d);
    printf("removed while open: %s, errno %d\n", e ? e->d_name : "end", errno);
    closedir(d);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, 0, _IOLBF, 0);
    if (argc >= 2 && !strcmp(argv[1], "edges")) {
        for (int i = 2; i < argc; i++) edges(argv[i]);
        return 0;
    }
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
    if ((argc == 3 || (argc == 4 && !strcmp(argv[3], "mem"))) && !strcmp(argv[1], "stub")) {
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
        if (argc == 4) {
            char mem[64];
            snprintf(mem, sizeof mem, "/proc/%d/mem", (int)getppid());
            long fd = open_from(page, mem);
            if (fd < 0) printf("roost's memory from the code page: %s\n", strerror((int)-fd));
            else printf("roost's memory from the code page: opened\n");
            char link[64], target[256];
            snprintf(link, sizeof link, "/proc/%d/fd/0", (int)getppid());
            long n = readlink_from(page, link, target, sizeof target);
            if (n < 0) printf("roost's descriptor 0 from the code page: %s\n", strerror((int)-n));
            else printf("roost's descriptor 0 from the code page: read\n");
        }
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "stress")) return stress(argv[2], atol(argv[3]));
    if ((argc == 2 || argc == 3) && !strcmp(argv[1], "streams"))
        return streams(argc == 3 ? argv[2] : "");
    fprintf(stderr,
            "usage: fastpath lookups PATH... | edges PATH... | raw PATH | stub PATH [mem] | stress PATH N | streams [DIR]\n");
    return 2;
}
