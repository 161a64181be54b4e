/* What roost_fastpath.c offers the object's other parts (realpath.c): the calls as the
 * object makes them, answered in the process where the fast path may and by the agent
 * where it may not. Each returns the kernel's way: a result, or -errno. */
#ifndef ROOST_FASTPATH_CALLS_H
#define ROOST_FASTPATH_CALLS_H

#include <stddef.h>

long fp_readlink(const char *path, char *buf, size_t size);
long fp_faccessat(const char *path, int mode, int flags);
long fp_getcwd(char *buf, size_t size);
/* A result as the C library returns it: -1 with errno set for -errno. */
long fp_set_errno(long ret);

#endif
