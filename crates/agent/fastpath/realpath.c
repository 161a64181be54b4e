/* realpath(3), canonicalize_file_name(3) and _FORTIFY_SOURCE's __realpath_chk for roost's
 * in-process fast path. The C library walks a name one component at a time, reading each
 * as a link, with system calls of its own that this object never sees: each of them was a
 * trapped call (about 1,100 a compilation, since a compiler canonicalizes every header it
 * includes). This is the same walk made of the object's readlink and access, so each step
 * is answered in the process where the fast path may and by the agent where it may not;
 * what a step answers is then roost's answer whichever way it went.
 *
 * The walk is the C library's (glibc 2.33 and later), result for result, error for error,
 * and with the same partial name left in a caller's buffer on failure; run_fastpath checks
 * it against the C library's own walk through the trap. */

#define _GNU_SOURCE
#include "calls.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

extern void *malloc(size_t);
extern void free(void *);
/* Weak: a program linked against no C library still loads the object. */
extern void __chk_fail(void) __attribute__((weak, noreturn));

#define NAME_LIMIT 4096 /* PATH_MAX */
/* The kernel's limit of links followed in one walk, as the C library counts it too. */
#define LINKS_LIMIT 40

/* Whether what follows a component asks it to be a searchable directory rather than only
 * not a link: a trailing slash, or "." or ".." as the next component. */
static int suffix_needs_directory(const char *rest) {
    while (*rest == '/') {
        while (*rest == '/') rest++;
        if (!*rest) return 1;
        if (*rest != '.') return 0;
        rest++;
        if (!*rest || *rest == '/') return 1;
        if (*rest == '.' && (!rest[1] || rest[1] == '/')) return 1;
        return 0;
    }
    return 0;
}

/* The buffers of one walk: on the heap, as the C library's grow there, since a thread's
 * stack may be small (PTHREAD_STACK_MIN is 16 KiB). */
struct walk_space {
    char out[NAME_LIMIT];
    /* The part of the name still to walk (links followed are put in front of it). */
    char rest[NAME_LIMIT];
    char link[NAME_LIMIT];
};

/* The canonical name of `name` into out (NAME_LIMIT bytes): 0, or -errno with out holding
 * the name as far as the walk got. */
static long walk(const char *name, struct walk_space *space) {
    char *out = space->out, *rest = space->rest, *link = space->link;
    size_t at; /* out's length: "/" or a name without a trailing slash */
    out[0] = 0;
    size_t n = fp_length(name, NAME_LIMIT);
    if (n == NAME_LIMIT) return -ENAMETOOLONG;
    for (size_t i = 0; i <= n; i++) rest[i] = name[i];
    if (name[0] == '/') {
        out[0] = '/';
        at = 1;
    } else {
        long r = fp_getcwd(out, NAME_LIMIT);
        if (r < 0) return r;
        at = (size_t)r - 1;
    }
    out[at] = 0;
    const char *p = rest;
    int links = 0;
    for (;;) {
        while (*p == '/') p++;
        const char *end = p;
        while (*end && *end != '/') end++;
        size_t c = (size_t)(end - p);
        if (c == 0) break;
        if (c == 1 && p[0] == '.') {
            p = end;
            continue;
        }
        if (c == 2 && p[0] == '.' && p[1] == '.') {
            at = fp_parent_length(out, at);
            out[at] = 0;
            p = end;
            continue;
        }
        size_t parent = at;
        if (at + 1 + c >= NAME_LIMIT) return -ENAMETOOLONG;
        if (at > 1) out[at++] = '/';
        for (size_t k = 0; k < c; k++) out[at + k] = p[k];
        at += c;
        out[at] = 0;
        long got = fp_readlink(out, link, NAME_LIMIT - 1);
        if (got >= 0) {
            if (++links > LINKS_LIMIT) return -ELOOP;
            size_t tail = fp_length(end, NAME_LIMIT);
            if ((size_t)got + tail >= NAME_LIMIT) return -ENAMETOOLONG;
            /* The link's text, then what followed it (moved within rest, either way). */
            size_t from = (size_t)(end - rest), to = (size_t)got;
            if (to > from)
                for (size_t k = tail + 1; k-- > 0;) rest[to + k] = rest[from + k];
            else
                for (size_t k = 0; k <= tail; k++) rest[to + k] = rest[from + k];
            for (long k = 0; k < got; k++) rest[k] = link[k];
            p = rest;
            at = link[0] == '/' ? 1 : parent;
            out[at] = 0;
            continue;
        }
        if (suffix_needs_directory(end)) {
            /* Searchable as a directory: the name with a slash must be there. */
            if (at + 1 >= NAME_LIMIT) return -ENAMETOOLONG;
            out[at] = '/';
            out[at + 1] = 0;
            long r = fp_faccessat(out, F_OK, AT_EACCESS);
            out[at] = 0;
            if (r < 0) return r;
        } else if (got != -EINVAL) {
            return got;
        }
        p = end;
    }
    return 0;
}

static char *copied(const char *from, char *to) {
    size_t n = fp_length(from, NAME_LIMIT);
    for (size_t i = 0; i <= n; i++) to[i] = from[i];
    return to;
}

EXPORT char *realpath(const char *name, char *resolved) {
    if (!name) {
        fp_set_errno(-EINVAL);
        return 0;
    }
    if (!name[0]) {
        fp_set_errno(-ENOENT);
        return 0;
    }
    struct walk_space *space = malloc(sizeof *space);
    if (!space) {
        fp_set_errno(-ENOMEM);
        return 0;
    }
    char *out = space->out, *answer = 0;
    long r = walk(name, space);
    if (r < 0) {
        /* The C library leaves the name as far as it got in the caller's buffer when a
         * component is missing or out of reach (and had begun), and nothing otherwise. */
        if (resolved && out[0] && (r == -ENOENT || r == -EACCES)) copied(out, resolved);
    } else if (resolved) {
        answer = copied(out, resolved);
    } else {
        answer = malloc(fp_length(out, NAME_LIMIT) + 1);
        r = answer ? 0 : -ENOMEM;
        if (answer) copied(out, answer);
    }
    free(space);
    if (!answer) fp_set_errno(r);
    return answer;
}

EXPORT char *canonicalize_file_name(const char *name) { return realpath(name, 0); }

EXPORT char *__realpath_chk(const char *name, char *resolved, size_t room) {
    if (resolved && room < NAME_LIMIT) {
        if (__chk_fail) __chk_fail();
        __builtin_trap();
    }
    return realpath(name, resolved);
}
