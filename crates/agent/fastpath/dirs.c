/* Directory streams of the in-process fast path's own: opendir, fdopendir, readdir and the
 * other calls of <dirent.h> that take a DIR. The C library's opendir opens the directory,
 * and both it and fdopendir fstat the descriptor, with internal calls the interposer never
 * sees: each directory a program lists (find, du, ls -R, Python's listdir) cost one or two
 * round trips to the agent. Here the open and the fstat are the object's own, answered in
 * the process where the fast path may and by the agent where it may not, and the entries
 * are the kernel's getdents64, made as the C library makes it (so a descriptor of roost's,
 * a remote directory, is still the agent's to list).
 *
 * The C library's own users of directory streams (scandir, glob, nftw) open theirs with its
 * internal calls and read them with its own; a DIR made here is laid out and locked as
 * glibc's, so C library code handed one reads it as its own. What a program sees follows
 * glibc 2.36: a
 * buffer of st_blksize bytes (32 KiB to 1 MiB), entries of inode 0 passed over, ENOENT from
 * a removed directory taken as the end, telldir as the last entry's d_off, the caller's
 * descriptor made close-on-exec by fdopendir, the stream's layout and lock. */

#define _GNU_SOURCE
#include "calls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define EXPORT __attribute__((visibility("default")))

extern int *__errno_location(void);
extern void *malloc(size_t);
extern void free(void *);

/* <dirent.h> leaves the type incomplete: this object's streams complete it, laid out as
 * glibc's own (2.36, x86_64), so that C library code handed one of these (a plugin bound
 * to the C library's readdir with RTLD_DEEPBIND, say) reads it as its own. */
struct __dirstream {
    int fd;
    int lock; /* the C library's low-level lock: 0 free, 1 taken, 2 taken with waiters */
    size_t allocation; /* bytes of `data` */
    size_t size;       /* bytes getdents64 put there */
    size_t offset;     /* the next entry's */
    off_t filepos;     /* telldir's answer: the last entry's d_off */
    int errcode;       /* the C library's delayed error (readdir_r), kept 0 here */
    char data[] __attribute__((aligned(__alignof__(long double))));
};

#define SMALLEST_BUFFER 32768
#define LARGEST_BUFFER 1048576

/* The C library's low-level lock, so a stream is one lock whoever takes it: a waiter marks
 * it 2 and sleeps on a futex; the holder wakes one if it was so marked. */
static void take(DIR *d) {
    int free_now = 0;
    if (__atomic_compare_exchange_n(&d->lock, &free_now, 1, 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED))
        return;
    while (__atomic_exchange_n(&d->lock, 2, __ATOMIC_ACQUIRE) != 0)
        fp_kernel(SYS_futex, (long)&d->lock, FUTEX_WAIT_PRIVATE, 2);
}

static void give(DIR *d) {
    if (__atomic_exchange_n(&d->lock, 0, __ATOMIC_RELEASE) == 2)
        fp_kernel(SYS_futex, (long)&d->lock, FUTEX_WAKE_PRIVATE, 1);
}

/* A stream for the directory `fd`, whose status is `st`; 0 (errno ENOMEM) without memory. */
static DIR *stream_of(int fd, const struct stat *st) {
    size_t allocation = SMALLEST_BUFFER;
    if (st->st_blksize > 0 && (size_t)st->st_blksize > allocation)
        allocation = (size_t)st->st_blksize < LARGEST_BUFFER ? (size_t)st->st_blksize
                                                             : LARGEST_BUFFER;
    DIR *d = malloc(offsetof(DIR, data) + allocation);
    if (!d && allocation > SMALLEST_BUFFER) {
        allocation = SMALLEST_BUFFER; /* as glibc: the smallest buffer, before giving up */
        d = malloc(offsetof(DIR, data) + allocation);
    }
    if (!d) return 0;
    d->fd = fd;
    d->lock = 0;
    d->allocation = allocation;
    d->size = 0;
    d->offset = 0;
    d->filepos = 0;
    d->errcode = 0;
    return d;
}

/* The status of `fd`, which must be a directory: 0, or -errno. */
static long directory_status(int fd, struct stat *st) {
    long r = fp_fstat(fd, st);
    return r == 0 && !S_ISDIR(st->st_mode) ? -ENOTDIR : r;
}

EXPORT DIR *opendir(const char *name) {
    long fd = fp_open(name, O_RDONLY | O_NONBLOCK | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) {
        fp_set_errno(fd);
        return 0;
    }
    struct stat st;
    long r = directory_status((int)fd, &st);
    DIR *d = r == 0 ? stream_of((int)fd, &st) : 0;
    if (!d) {
        int error = r ? (int)-r : *__errno_location();
        fp_kernel(SYS_close, fd, 0, 0);
        *__errno_location() = error;
    }
    return d;
}

EXPORT DIR *fdopendir(int fd) {
    struct stat st;
    long r = directory_status(fd, &st);
    if (r == 0) {
        long flags = fp_kernel(SYS_fcntl, fd, F_GETFL, 0);
        if (flags < 0)
            r = flags;
        else if ((flags & O_ACCMODE) == O_WRONLY)
            r = -EINVAL;
        else /* as glibc: the caller's descriptor closes on exec from now on */
            r = fp_kernel(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
    }
    if (r != 0) {
        fp_set_errno(r);
        return 0;
    }
    return stream_of(fd, &st);
}

/* The next entry, with the stream taken; 0 at the end (`*error` 0) or on an error. An
 * entry of inode 0 is passed over, as glibc 2.36's readdir does. */
static struct dirent64 *next_entry(DIR *d, int *error) {
    *error = 0;
    for (;;) {
        if (d->offset >= d->size) {
            long n = fp_kernel(SYS_getdents64, d->fd, (long)d->data, (long)d->allocation);
            if (n <= 0) {
                /* A directory removed while open may answer ENOENT: POSIX's end. */
                if (n < 0 && n != -ENOENT) *error = (int)-n;
                return 0;
            }
            d->size = (size_t)n;
            d->offset = 0;
        }
        struct dirent64 *e = (struct dirent64 *)(d->data + d->offset);
        d->offset += e->d_reclen;
        d->filepos = e->d_off;
        if (e->d_ino != 0) return e;
    }
}

EXPORT struct dirent *readdir(DIR *d) {
    int error;
    take(d);
    struct dirent64 *e = next_entry(d, &error);
    give(d);
    if (error) *__errno_location() = error;
    return (struct dirent *)e;
}

EXPORT int readdir_r(DIR *d, struct dirent *entry, struct dirent **result) {
    int error;
    take(d);
    struct dirent64 *e = next_entry(d, &error);
    if (e) {
        /* A record is never longer than the caller's struct on Linux (NAME_MAX 255). */
        size_t n = e->d_reclen < sizeof *entry ? e->d_reclen : sizeof *entry;
        for (size_t i = 0; i < n; i++) ((char *)entry)[i] = ((const char *)e)[i];
        entry->d_reclen = (unsigned short)n;
    }
    give(d);
    *result = e ? entry : 0;
    if (error) *__errno_location() = error;
    return error;
}

/* struct dirent64 is struct dirent on x86_64: the 64 forms are aliases. */
#pragma GCC diagnostic ignored "-Wattribute-alias"
#pragma GCC diagnostic ignored "-Wmissing-attributes"
EXPORT struct dirent64 *readdir64(DIR *) __attribute__((alias("readdir")));
EXPORT int readdir64_r(DIR *, struct dirent64 *, struct dirent64 **)
    __attribute__((alias("readdir_r")));

EXPORT int closedir(DIR *d) {
    /* <dirent.h> declares `d` non-null; glibc checks it all the same (EINVAL), and so does
     * this, with the pointer hidden from the optimizer that would drop the check. */
    __asm__("" : "+r"(d));
    if (!d) return (int)fp_set_errno(-EINVAL);
    int fd = d->fd;
    free(d);
    return (int)fp_set_errno(fp_kernel(SYS_close, fd, 0, 0));
}

EXPORT int dirfd(DIR *d) { return d->fd; }

/* Reading goes on from `pos` (a d_off, or 0 for the start); a failing lseek leaves its
 * errno, as glibc's does. */
static void move_to(DIR *d, long pos) {
    take(d);
    long r = fp_kernel(SYS_lseek, d->fd, pos, SEEK_SET);
    d->size = 0;
    d->offset = 0;
    d->filepos = pos;
    d->errcode = 0;
    give(d);
    if (r < 0) fp_set_errno(r);
}

EXPORT void rewinddir(DIR *d) { move_to(d, 0); }
EXPORT void seekdir(DIR *d, long pos) { move_to(d, pos); }

EXPORT long telldir(DIR *d) {
    take(d);
    long pos = d->filepos;
    give(d);
    return pos;
}
