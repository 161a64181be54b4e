/* What roost_fastpath.c offers the object's other parts (realpath.c, dirs.c, streams.c):
 * the calls as the object makes them, answered in the process where the fast path may and
 * by the agent where it may not (each returns the kernel's way: a result, or -errno), and
 * the helpers for names they share. */
#ifndef ROOST_FASTPATH_CALLS_H
#define ROOST_FASTPATH_CALLS_H

#include <stddef.h>
#include <sys/stat.h>

long fp_readlink(const char *path, char *buf, size_t size);
long fp_faccessat(const char *path, int mode, int flags);
long fp_getcwd(char *buf, size_t size);
/* open(2) of a name relative to the working directory. */
long fp_open(const char *path, int flags, unsigned mode);
/* The same, only where the fast path may answer it: 1 with the kernel's result in *ret, or 0
 * with nothing done (the agent's to answer: the caller takes the C library's way). */
int fp_open_in_process(const char *path, int flags, unsigned mode, long *ret);
long fp_fstat(int fd, struct stat *buf);
/* Any other call, made as the program would make it (the filter treats it as it treats the
 * program's own: a descriptor of roost's is the agent's). */
long fp_kernel(long nr, long a, long b, long c);
/* The length of the string at `s`, at most `limit`. */
size_t fp_length(const char *s, size_t limit);
/* The length of the parent of the absolute normalized path at `path` (`n` bytes): what `..`
 * leaves of it ("/" stays). */
size_t fp_parent_length(const char *path, size_t n);
/* A result as the C library returns it: -1 with errno set for -errno. */
long fp_set_errno(long ret);

#endif
