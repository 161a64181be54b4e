/* Asks each path given for its identity every way a program can, and says where two ways
 * disagree: stat and lstat by name, statx by name, fstatat relative to the parent's
 * descriptor, the parent's listing (d_ino from getdents64), and on a descriptor opened
 * from the name (fstat as the raw syscall, newfstatat and statx with AT_EMPTY_PATH, and
 * an O_PATH descriptor's; and through the C library on a duplicate at a low number). A
 * directory's own listing is checked entry by entry too, and by name on both descriptors. A
 * path agreeing everywhere prints "NAME ok"; each disagreement prints one line. Names are
 * printed relative to the first argument, so a native run and one under roost compare. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

struct id {
    uint64_t dev, ino, size, nlink;
    uint32_t mode;
    int64_t mtime, mtime_ns;
    int known;
    /* The preferred I/O size: not identity, but programs size their buffers by it. */
    uint64_t blksize;
};

/* Below the numbers roost keeps for its own descriptors. */
#define LOW_FD 100

static const char *base;
static int bad;

static struct id of_stat(const struct stat *st) {
    struct id i = {st->st_dev, st->st_ino, st->st_size, st->st_nlink, st->st_mode,
                   st->st_mtim.tv_sec, st->st_mtim.tv_nsec, 1, st->st_blksize};
    return i;
}

static struct id of_statx(const struct statx *sx) {
    struct id i = {makedev(sx->stx_dev_major, sx->stx_dev_minor), sx->stx_ino, sx->stx_size,
                   sx->stx_nlink, sx->stx_mode, sx->stx_mtime.tv_sec, sx->stx_mtime.tv_nsec, 1,
                   sx->stx_blksize};
    return i;
}

static const char *rel(const char *path) {
    size_t n = strlen(base);
    if (strncmp(path, base, n) == 0)
        return path[n] ? path + n : "/";
    return path;
}

/* Compares `b` (got by `how`) with the reference `a` (by `ref`); ino_only for d_ino. */
static void same(const char *path, const char *ref, struct id a, const char *how, struct id b,
                 int ino_only) {
    if (!a.known || !b.known) {
        printf("%s: %s or %s failed\n", rel(path), ref, how);
        bad = 1;
        return;
    }
#define FIELD(f)                                                                             \
    if (a.f != b.f) {                                                                        \
        printf("%s: %s differs: %s %llu, %s %llu\n", rel(path), #f, ref,                    \
               (unsigned long long)a.f, how, (unsigned long long)b.f);                      \
        bad = 1;                                                                             \
    }
    FIELD(ino);
    if (ino_only)
        return;
    FIELD(dev);
    FIELD(mode);
    FIELD(size);
    FIELD(nlink);
    FIELD(mtime);
    FIELD(mtime_ns);
    FIELD(blksize);
}

/* d_ino of `name` in the listing of directory descriptor `dirfd` (read from its start). */
static struct id listed(int dirfd, const char *name) {
    struct id i = {0};
    char buf[4096];
    lseek(dirfd, 0, SEEK_SET);
    for (;;) {
        long n = syscall(SYS_getdents64, dirfd, buf, sizeof buf);
        if (n <= 0)
            return i;
        for (long at = 0; at < n;) {
            struct dirent64 *d = (struct dirent64 *)(buf + at);
            if (strcmp(d->d_name, name) == 0) {
                i.ino = d->d_ino;
                i.known = 1;
                return i;
            }
            at += d->d_reclen;
        }
    }
}

static void check(const char *path) {
    int before = bad;
    struct stat st;
    struct statx sx;
    struct id by_lstat = {0}, by_stat = {0}, x = {0};
    if (lstat(path, &st) == 0)
        by_lstat = of_stat(&st);
    if (stat(path, &st) == 0)
        by_stat = of_stat(&st);
    if (syscall(SYS_statx, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) == 0)
        x = of_statx(&sx);
    same(path, "lstat", by_lstat, "statx by name", x, 0);

    char *copy = strdup(path), *copy2 = strdup(path);
    char *dir = dirname(copy), *name = basename(copy2);
    int parent = open(dir, O_RDONLY | O_DIRECTORY);
    struct id at = {0};
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        at = of_stat(&st);
    same(path, "lstat", by_lstat, "fstatat on the parent's descriptor", at, 0);
    same(path, "lstat", by_lstat, "the parent's d_ino", listed(parent, name), 1);
    close(parent);
    free(copy);
    free(copy2);

    int fd = open(path, O_RDONLY);
    struct id raw = {0}, empty = {0}, xempty = {0}, opath = {0};
    if (syscall(SYS_fstat, fd, &st) == 0)
        raw = of_stat(&st);
    if (syscall(SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH) == 0)
        empty = of_stat(&st);
    if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) == 0)
        xempty = of_statx(&sx);
    same(path, "stat", by_stat, "fstat", raw, 0);
    same(path, "stat", by_stat, "newfstatat(fd, \"\", AT_EMPTY_PATH)", empty, 0);
    same(path, "stat", by_stat, "statx(fd, \"\", AT_EMPTY_PATH)", xempty, 0);
    int o = open(path, O_PATH);
    if (fstat(o, &st) == 0)
        opath = of_stat(&st);
    same(path, "stat", by_stat, "fstat of an O_PATH descriptor", opath, 0);
    close(o);

    /* The same descriptor at a low number of the program's choosing (as a shell's
     * redirection puts one), asked through the C library: an in-process answer there must
     * still be the name's. */
    struct id low = {0}, low_empty = {0}, low_x = {0};
    if (fd >= 0 && dup2(fd, LOW_FD) == LOW_FD) {
        if (fstat(LOW_FD, &st) == 0)
            low = of_stat(&st);
        if (fstatat(LOW_FD, "", &st, AT_EMPTY_PATH) == 0)
            low_empty = of_stat(&st);
        if (statx(LOW_FD, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) == 0)
            low_x = of_statx(&sx);
    }
    same(path, "stat", by_stat, "fstat at a low number", low, 0);
    same(path, "stat", by_stat, "fstatat(low, \"\", AT_EMPTY_PATH)", low_empty, 0);
    same(path, "stat", by_stat, "statx(low, \"\", AT_EMPTY_PATH)", low_x, 0);

    if (S_ISDIR(by_stat.mode) && fd >= 0) {
        /* Every entry of its listing, against fstatat on the same descriptor. */
        char buf[4096];
        long n;
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct dirent64 *d = (struct dirent64 *)(buf + off);
                struct id entry = {0};
                if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                    entry = of_stat(&st);
                struct id dino = {.ino = d->d_ino, .known = 1};
                char label[600];
                snprintf(label, sizeof label, "%s/%s", path, d->d_name);
                same(label, "fstatat on the directory's descriptor", entry, "d_ino", dino, 1);
                struct id low_entry = {0};
                if (fstatat(LOW_FD, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                    low_entry = of_stat(&st);
                same(label, "fstatat on the directory's descriptor", entry,
                     "fstatat at a low number", low_entry, 0);
                off += d->d_reclen;
            }
        }
    }
    close(LOW_FD);
    close(fd);
    if (bad == before)
        printf("%s ok\n", rel(path));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: identity BASE PATH...\n");
        return 2;
    }
    base = argv[1];
    for (int i = 2; i < argc; i++)
        check(argv[i]);
    return bad;
}
