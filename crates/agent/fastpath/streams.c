/* fopen of the in-process fast path's own. The C library's fopen opens its file with an
 * internal call the interposer never sees, so every file a linker, an assembler or make
 * reads through stdio (and every one it only tries) cost a round trip to the agent. Here,
 * where the fast path may answer the open, the object makes it and the C library's fdopen
 * builds the stream on the descriptor: the same FILE, as fopen builds it (placed at the end
 * for `a`, and marked close-on-exec for freopen with `e`, as fopen marks it). Anything else (a
 * mode with letters only fopen knows, `m`, `c` or `,ccs=`; a name the agent must answer)
 * goes to the C library's own fopen, and so to the trap, as before. */

#define _GNU_SOURCE
#include "calls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

extern int *__errno_location(void);
/* The C library's fopen under its other name, which this object does not take. */
extern FILE *_IO_fopen(const char *path, const char *mode);
/* fdopen under its other name, so a program that defines an fdopen of its own sees no call
 * to it that the C library's fopen would not make. */
extern FILE *_IO_fdopen(int fd, const char *mode);

/* What glibc's fopen notes on a stream opened with `e` (`_IO_FLAGS2_CLOEXEC`), for freopen
 * to open the stream's next file close-on-exec too. */
#define FLAGS2_CLOEXEC 0x40

/* The open flags for fopen's `mode` and the mode fdopen is to get ("r", "w+"...); 0 when
 * the mode holds more than glibc's fopen reads as open flags (its first seven letters: the
 * access, then `+`, `b`, `x` and `e`). */
static int open_flags(const char *mode, int *flags, char stream_mode[3]) {
    int f;
    switch (mode[0]) {
    case 'r': f = O_RDONLY; break;
    case 'w': f = O_WRONLY | O_CREAT | O_TRUNC; break;
    case 'a': f = O_WRONLY | O_CREAT | O_APPEND; break;
    default: return 0;
    }
    stream_mode[0] = mode[0];
    stream_mode[1] = 0;
    stream_mode[2] = 0;
    for (int i = 1; mode[i]; i++) {
        if (i == 7) return 0;
        switch (mode[i]) {
        case '+':
            f = (f & ~O_ACCMODE) | O_RDWR;
            stream_mode[1] = '+';
            break;
        case 'b': break;
        case 'x': f |= O_EXCL; break;
        case 'e': f |= O_CLOEXEC; break;
        default: return 0;
        }
    }
    *flags = f;
    return 1;
}

EXPORT FILE *fopen(const char *path, const char *mode) {
    int flags;
    char stream_mode[3];
    long fd;
    if (!open_flags(mode, &flags, stream_mode) || !fp_open_in_process(path, flags, 0666, &fd))
        return _IO_fopen(path, mode);
    if (fd < 0) {
        fp_set_errno(fd);
        return 0;
    }
    /* fopen puts a stream that only appends at the end of its file (where ftell then
     * stands), as fdopen does not; it fails only where seeking means something. */
    long at_end = stream_mode[0] == 'a' && !stream_mode[1]
                      ? fp_kernel(SYS_lseek, fd, 0, SEEK_END)
                      : 0;
    FILE *stream = at_end >= 0 || at_end == -ESPIPE ? _IO_fdopen((int)fd, stream_mode) : 0;
    if (stream && (flags & O_CLOEXEC)) stream->_flags2 |= FLAGS2_CLOEXEC;
    if (!stream) {
        int error = at_end < 0 && at_end != -ESPIPE ? (int)-at_end : *__errno_location();
        fp_kernel(SYS_close, fd, 0, 0);
        *__errno_location() = error;
    }
    return stream;
}

#pragma GCC diagnostic ignored "-Wattribute-alias"
#pragma GCC diagnostic ignored "-Wmissing-attributes"
EXPORT FILE *fopen64(const char *, const char *) __attribute__((alias("fopen")));
