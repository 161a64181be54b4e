/* roost's in-process fast path: a shared object that roost run has the dynamic loader put
 * into every dynamically linked program (through /etc/ld.so.preload, which the agent maps;
 * docs/agent.md "The in-process fast path"). It answers the hot lookups (the stat family,
 * access, readlink, open, getcwd) inside the program when the table the agent publishes
 * (table.h) says the answer is the kernel's own, on the path as given or on its physical
 * name under a local mapping; it makes those system calls from one code page at an address
 * the agent chose for the run, which the seccomp filter lets through. Everything else it
 * makes from its own code, where the filter traps it, and the agent answers as it answers
 * every program that does not load this object.
 *
 * Rules it lives by: no libc call but __errno_location, and malloc and free only where the
 * C library's own call is no signal-safe one either (getcwd(NULL, 0), realpath, and the
 * directory streams and fopen of dirs.c and streams.c, which also take a stream's lock and
 * call the C library's fdopen and fopen); elsewhere no allocation, no locks, no
 * thread-local state, so any call may come from a signal handler, a vfork child or any
 * thread; when in doubt, the trap. */

#define _GNU_SOURCE
#include "calls.h"
#include "table.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

extern int *__errno_location(void);
extern void *malloc(size_t);

struct statx;

/* ---- configuration, patched into this file's copy by the agent ---------------------- */

/* The agent finds the marker and writes "STUB_HEX TABLE_PATH" after its 32 bytes. */
EXPORT volatile char roost_fastpath_config[512] = "@@roost-fastpath-config@@v1";
#define CONFIG_PAYLOAD 32

/* ---- system calls ------------------------------------------------------------------ */

/* From this object's own code: trapped by the filter, answered by the agent. */
static long trap_syscall(long nr, long a, long b, long c, long d, long e, long f) {
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* The code page the filter lets through: `syscall; ret` at stub. */
static uintptr_t stub;

/* From the stub: let through. (Built with -mno-red-zone: the call pushes below rsp.) */
static long fast_syscall(long nr, long a, long b, long c, long d, long e) {
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    long ret;
    __asm__ volatile("call *%[stub]"
                     : "=a"(ret)
                     : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), [stub] "r"(stub)
                     : "rcx", "r11", "memory");
    return ret;
}

#define TRAP(nr, a, b, c, d) trap_syscall(nr, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define FAST(nr, a, b, c, d) fast_syscall(nr, (long)(a), (long)(b), (long)(c), (long)(d), 0)

long fp_set_errno(long ret) {
    if (ret < 0 && ret > -4096) {
        *__errno_location() = (int)-ret;
        return -1;
    }
    return ret;
}

/* ---- start-up ---------------------------------------------------------------------- */

enum { UNREADY, STARTING, READY, OFF };
static int state;
static const struct rf_table *table;
static const struct rf_copies *copies;
static uint64_t *answered;

static int parse_hex(const volatile char *s, uintptr_t *out, int *used) {
    uintptr_t v = 0;
    int i = 0;
    for (;; i++) {
        char c = s[i];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else break;
        v = v * 16 + (uintptr_t)d;
    }
    *out = v;
    *used = i;
    return i > 0;
}

static int is_error(long ret) { return ret < 0 && ret > -4096; }

static int start(void) {
    const volatile char *cfg = roost_fastpath_config + CONFIG_PAYLOAD;
    uintptr_t at;
    int used;
    if (!parse_hex(cfg, &at, &used) || cfg[used] != ' ' || (at & 4095) != 0) return OFF;
    char path[256];
    int n = 0;
    for (const volatile char *p = cfg + used + 1; *p && n < 255; p++) path[n++] = *p;
    path[n] = 0;
    long page = trap_syscall(SYS_mmap, (long)at, 4096, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (page != (long)at) {
        /* Taken (a second copy of this object, dlmopen): this copy uses the trap only. */
        if (!is_error(page)) trap_syscall(SYS_munmap, page, 4096, 0, 0, 0, 0);
        return OFF;
    }
    unsigned char *code = (unsigned char *)at;
    code[0] = 0x0f; /* syscall */
    code[1] = 0x05;
    code[2] = 0xc3; /* ret */
    if (TRAP(SYS_mprotect, at, 4096, PROT_READ | PROT_EXEC, 0) != 0) return OFF;
    /* From the page already: one trapped call fewer for every program started (trapped
     * there too where the page may not open: RF_NO_OPENS). */
    stub = at;
    /* Writable for the counters; a process that became another user reads it only, and
     * counts nothing. */
    struct open_how how = {.flags = O_RDWR | O_CLOEXEC};
    long fd = FAST(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    int counting = !is_error(fd);
    if (!counting) {
        how.flags = O_RDONLY | O_CLOEXEC;
        fd = FAST(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    }
    if (is_error(fd)) return OFF;
    long t = trap_syscall(SYS_mmap, 0, RF_COUNTERS_OFFSET, PROT_READ, MAP_SHARED, fd, 0);
    long c = counting ? trap_syscall(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                                     RF_COUNTERS_OFFSET)
                      : 0;
    TRAP(SYS_close, fd, 0, 0, 0);
    if (is_error(t)) return OFF;
    const struct rf_table *tb = (const struct rf_table *)t;
    if (tb->magic != RF_MAGIC || tb->version != RF_VERSION) return OFF;
    table = tb;
    copies = (const struct rf_copies *)(t + RF_COPIES_OFFSET);
    answered = is_error(c) ? 0 : (uint64_t *)c;
    return READY;
}

/* Whether the fast path may be tried now, starting it on the first call: a program that
 * makes none (most of a build's short-lived processes make few) pays nothing more than the
 * object's loading. */
static int ready(void) {
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == READY) return 1;
    if (s != UNREADY) return 0;
    int expected = UNREADY;
    if (!__atomic_compare_exchange_n(&state, &expected, STARTING, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return 0; /* another thread, or this one from a signal handler, is starting it */
    int now = start();
    __atomic_store_n(&state, now, __ATOMIC_RELEASE);
    return now == READY;
}

/* ---- where a path leads ------------------------------------------------------------ */

/* Room for a path the fast path rewrites or joins to the working directory: longer ones go
 * to the agent (the buffers live on the caller's stack, perhaps a small signal stack). */
#define PATHBUF 1024

size_t fp_length(const char *s, size_t limit) {
    size_t n = 0;
    while (n < limit && s[n]) n++;
    return n;
}

static int same_bytes(const char *a, const char *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* Whether `path` (`n` bytes, normalized) is `prefix` or lies below it. */
static int under(const char *path, size_t n, const char *prefix, size_t pn) {
    if (pn == 1 && prefix[0] == '/') return 1;
    return n >= pn && same_bytes(path, prefix, pn) && (n == pn || path[pn] == '/');
}

/* Whether `prefix` lies strictly below `path`: `path` holds a mount point. */
static int above(const char *path, size_t n, const char *prefix, size_t pn) {
    if (n == 1 && path[0] == '/') return pn > 1;
    return pn > n && same_bytes(path, prefix, n) && prefix[n] == '/';
}

size_t fp_parent_length(const char *path, size_t n) {
    while (n > 1 && path[n - 1] != '/') n--;
    return n > 1 ? n - 1 : n;
}

/* Whether the `n` bytes at `p` are the component `.` or `..`. */
static int is_dot_or_dotdot(const char *p, size_t n) {
    return (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.');
}

static int unmapped(const char *path, size_t n);

/* Appends `src` (`n` bytes) to `out` (holding `*len`) as normalized components: repeated
 * slashes fold, a trailing slash is dropped and reported. A `.` asks only that what comes
 * before it be a directory: within the name it goes, at its end it counts as a trailing
 * slash. A `..` goes up a component, as the kernel goes up from where it is, when that lies
 * under no mapping (else the kernel would stand somewhere else than roost: the agent's to
 * walk); it is reported, since a symlink before it would lead the kernel elsewhere too, and
 * the caller must prove there is none. */
static int append_components(char *out, size_t *len, const char *src, size_t n, int *slash,
                             int *dotdot) {
    size_t at = *len; /* kept local: `out` may alias `*len` as far as the compiler knows */
    size_t i = 0;
    *slash = n > 0 && src[n - 1] == '/';
    while (i < n) {
        while (i < n && src[i] == '/') i++;
        if (i == n) break;
        size_t j = i;
        while (j < n && src[j] != '/') j++;
        size_t c = j - i;
        if (is_dot_or_dotdot(src + i, c)) {
            if (c == 2) {
                if (!unmapped(out, at)) return 0;
                at = fp_parent_length(out, at);
                *dotdot = 1;
            }
            *slash = 1; /* a directory, until a component follows */
            i = j;
            continue;
        }
        *slash = n > 0 && src[n - 1] == '/';
        if (at + 1 + c + 1 > PATHBUF) return 0;
        if (!(at == 1 && out[0] == '/')) out[at++] = '/';
        for (size_t k = 0; k < c; k++) out[at + k] = src[i + k];
        at += c;
        i = j;
    }
    out[at] = 0;
    *len = at;
    return 1;
}

/* Pages a path was read from before: a path is read here only where the kernel has read
 * one (natively, a path in unmapped memory is EFAULT, not a crash). A page the program
 * unmaps afterwards and then passes a path in is read anyway: a use after unmap. */
#define GOOD_SLOTS 64
static uint64_t good_pages[GOOD_SLOTS];

static int page_good(uintptr_t page) {
    return __atomic_load_n(&good_pages[page % GOOD_SLOTS], __ATOMIC_RELAXED) == page;
}

/* The length of the string at `p` (at most PATHBUF) when every page it spans was read
 * before; -1 when one was not. */
static long known_length(const char *p) {
    long n = 0;
    while (n < PATHBUF) {
        uintptr_t page = ((uintptr_t)p + (uintptr_t)n) >> 12;
        if (!page_good(page)) return -1;
        /* The page's bytes, up to the next page or PATHBUF. */
        long end = (long)(((page + 1) << 12) - (uintptr_t)p);
        if (end > PATHBUF) end = PATHBUF;
        for (; n < end; n++)
            if (!p[n]) return n;
    }
    return PATHBUF;
}

/* The length of the path at `path` (at most PATHBUF), once it is known to be readable: its
 * pages known, or the kernel read it without a fault; -1 when it cannot be read. */
static long readable_length(const char *path) {
    if ((uintptr_t)path < 4096) return -1;
    long n = known_length(path);
    if (n >= 0) return n;
    if (FAST(SYS_faccessat, AT_FDCWD, path, F_OK, 0) == -EFAULT) return -1;
    n = (long)fp_length(path, PATHBUF);
    for (uintptr_t page = (uintptr_t)path >> 12; page <= ((uintptr_t)path + n) >> 12; page++)
        __atomic_store_n(&good_pages[page % GOOD_SLOTS], page, __ATOMIC_RELAXED);
    return n;
}

/* How a call the fast path takes is made. */
enum how {
    TRAP_IT,    /* by the agent */
    AS_GIVEN,   /* the caller's own directory and path: the kernel finds what roost would */
    PHYSICALLY, /* on `path`, the absolute physical name under a local mapping */
};

struct where {
    enum how how;
    /* The absolute kernel path of the object (PHYSICALLY: the one to use; AS_GIVEN from
     * a name relative to a directory descriptor: empty, nothing to prove). */
    char path[PATHBUF];
    size_t len;
    /* The path ended in a slash (or a `.` or `..`). */
    int slash;
    /* The path went up with `..`: made only as given, once the walk is proved. */
    int dotdot;
    /* An open here needs no note by the agent (which way a mapped directory was reached). */
    int opens_ok;
    uint64_t names_gen;
};

static int read_begin(uint64_t *seq) {
    *seq = __atomic_load_n(&table->seq, __ATOMIC_ACQUIRE);
    return (*seq & 1) == 0 && (table->flags & RF_ENABLED);
}

static int read_still(uint64_t seq) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&table->seq, __ATOMIC_RELAXED) == seq;
}

/* Whether the file of identity (`dev`, `ino`) may be a local copy of a remote object, which
 * the agent answers for (table.h, struct rf_copies): never before the first copy is made. */
static int may_be_copy(uint64_t dev, uint64_t ino) {
    if (__atomic_load_n(&copies->noted, __ATOMIC_ACQUIRE) == 0) return 0;
    uint64_t h = rf_copy_hash(dev, ino);
    for (int k = 0; k < RF_COPY_PROBES; k++) {
        uint64_t bit = (h >> (21 * k)) & (RF_COPY_BITS - 1);
        if (!((__atomic_load_n(&copies->bits[bit / 64], __ATOMIC_RELAXED) >> (bit % 64)) & 1))
            return 0;
    }
    return 1;
}

/* A name relative to a directory descriptor that the kernel resolves as the agent would
 * (the agent's `kernel_resolves_alike`): one plain name, not a number (a /proc entry), not
 * the last name of a mount point or of a mapped directory, while no remote object was met
 * (the agent names a directory in a mirror through its mount, however it was opened, and
 * not every mirror directory is a noted copy). */
static int plain_name_alike(const char *name, size_t n) {
    if (n == 0 || n >= PATHBUF) return 0;
    if (is_dot_or_dotdot(name, n)) return 0;
    int digits = 1;
    for (size_t i = 0; i < n; i++) {
        if (name[i] == '/') return 0;
        if (name[i] < '0' || name[i] > '9') digits = 0;
    }
    if (digits) return 0;
    uint32_t count = table->n_names;
    if (count > RF_MAX_NAMES) return 0;
    for (uint32_t i = 0; i < count; i++) {
        const struct rf_name *m = &table->names[i];
        if (m->len == n && same_bytes(m->name, name, n)) return 0;
    }
    return 1;
}

/* Entry `e`'s name lengths, read once (the table may change under a reader); 0 when one
 * is past what an entry holds: not a table the agent wrote. */
static int entry_lengths(const struct rf_entry *e, size_t *logical, size_t *physical) {
    *logical = e->logical_len;
    *physical = e->physical_len;
    return *logical <= RF_PATH_MAX - 1 && *physical <= RF_PATH_MAX - 1;
}

/* Whether the absolute normalized `path` (`n` bytes) lies under a mapping's name, or (with
 * `physical_names`) under a physical directory a mapping names; also when the table is not
 * one the agent wrote. */
static int held(const char *path, size_t n, int physical_names) {
    uint32_t count = table->n_entries;
    if (count > RF_MAX_ENTRIES) return 1;
    for (uint32_t i = 0; i < count; i++) {
        const struct rf_entry *e = &table->entries[i];
        size_t l, p;
        if (!entry_lengths(e, &l, &p)) return 1;
        if (e->kind == RF_PHYS ? physical_names && under(path, n, e->physical, p)
                               : l == 0 || under(path, n, e->logical, l))
            return 1;
    }
    return 0;
}

/* Whether the absolute normalized `path` (`n` bytes) lies under no mapping, where the kernel
 * finds what roost finds. */
static int unmapped(const char *path, size_t n) { return !held(path, n, 0); }

/* Maps the absolute normalized path in w->path through the table, for a call that opens
 * (`opening`: the physical directories matter too) or only looks. */
static enum how map_absolute(struct where *w, int opening) {
    uint32_t count = table->n_entries;
    if (count > RF_MAX_ENTRIES) return TRAP_IT;
    const struct rf_entry *hit = 0;
    size_t ln = 0, pn = 0; /* the hit's lengths, as checked (the table may change under us) */
    w->opens_ok = 1;
    /* A name under or above an entry's (other than "/") shares its first byte after the
     * slash: most entries end there. */
    char first = w->len > 1 ? w->path[1] : 0;
    for (uint32_t i = 0; i < count; i++) {
        const struct rf_entry *e = &table->entries[i];
        size_t l, p;
        if (!entry_lengths(e, &l, &p)) return TRAP_IT;
        if (first && (e->kind == RF_PHYS ? !opening || (p > 1 && e->physical[1] != first)
                                          : l > 1 && e->logical[1] != first))
            continue;
        if (e->kind == RF_PHYS) {
            if (opening && (e->flags & RF_VIEWED) && under(w->path, w->len, e->physical, p))
                w->opens_ok = 0;
            continue;
        }
        if (l == 0) return TRAP_IT; /* no name: not a table the agent wrote */
        if (above(w->path, w->len, e->logical, l)) return TRAP_IT;
        /* Entries come longest first: the first that holds the path is its mapping. */
        if (!hit && under(w->path, w->len, e->logical, l)) {
            hit = e;
            ln = l;
            pn = p;
        }
    }
    if (!hit) return AS_GIVEN;
    if (hit->kind != RF_LOCAL || pn == 0) return TRAP_IT;
    /* What lies below the mapping's logical name, from its slash ("" for the name itself),
     * moved in place to follow the physical root. */
    size_t from = ln == 1 ? 0 : ln;
    size_t rn = w->len - from;
    if (rn == 1) rn = 0; /* "/" itself under a mapping of "/" */
    size_t root = (pn == 1 && rn > 0) ? 0 : pn; /* a physical "/" adds nothing before a rest */
    if (root + rn + 2 > PATHBUF) return TRAP_IT;
    if (root > from)
        for (size_t i = rn; i-- > 0;) w->path[root + i] = w->path[from + i];
    else
        for (size_t i = 0; i < rn; i++) w->path[root + i] = w->path[from + i];
    for (size_t i = 0; i < root; i++) w->path[i] = hit->physical[i];
    size_t n = root + rn;
    if (w->slash && !(n == 1 && w->path[0] == '/')) w->path[n++] = '/';
    w->path[n] = 0;
    w->len = n;
    w->opens_ok = (hit->flags & RF_VIEWED) != 0;
    return PHYSICALLY;
}

/* Whether the kernel's working directory names itself: not under a mapped directory's
 * physical name or a mirror, nor under a name a mapping hides. */
static int cwd_is_plain(const char *cwd, size_t n) { return !held(cwd, n, 1); }

/* The local mapping whose physical directory holds a working directory the kernel names
 * by its physical name (w->path, w->len), when its name under that mapping is one name only:
 * one local mapping holds it, as the agent's view of the directory stands (a process that
 * entered it by the physical name reaches the same files, so lookups find what the agent
 * would), no other mapping, mirror or trap holds it under either name, neither root is "/",
 * and the name fits. Its lengths (logical, physical) in *ln, *pn; 0 otherwise. */
static const struct rf_entry *cwd_mapping(const struct where *w, size_t *ln, size_t *pn) {
    uint32_t count = table->n_entries;
    if (count > RF_MAX_ENTRIES) return 0;
    const struct rf_entry *hit = 0;
    int physicals = 0;
    for (uint32_t i = 0; i < count; i++) {
        const struct rf_entry *e = &table->entries[i];
        size_t l, p;
        if (!entry_lengths(e, &l, &p)) return 0;
        if (e->kind == RF_PHYS) {
            physicals += under(w->path, w->len, e->physical, p);
            continue;
        }
        if (l == 0 || under(w->path, w->len, e->logical, l)) return 0;
        if (e->kind == RF_LOCAL && p > 1 && under(w->path, w->len, e->physical, p)) {
            if (hit) return 0;
            hit = e;
            *ln = l;
            *pn = p;
        }
    }
    if (!hit || physicals != 1 || !(hit->flags & RF_VIEWED) || *ln <= 1) return 0;
    if (*ln + (w->len - *pn) + 1 > PATHBUF) return 0;
    return hit;
}

/* Rewrites w->path from the physical name under `hit` (`pn` bytes of it) to the name under
 * the mapping (`ln` bytes). */
static void cwd_rename(struct where *w, const struct rf_entry *hit, size_t ln, size_t pn) {
    size_t rest = w->len - pn;
    if (ln > pn)
        for (size_t i = rest; i-- > 0;) w->path[ln + i] = w->path[pn + i];
    else
        for (size_t i = 0; i < rest; i++) w->path[ln + i] = w->path[pn + i];
    for (size_t i = 0; i < ln; i++) w->path[i] = hit->logical[i];
    w->len = ln + rest;
    w->path[w->len] = 0;
}

/* Rewrites a working directory the kernel names by its physical name under a mapped
 * directory to its name under the mapping, when cwd_mapping finds that one name: 0
 * otherwise. Names relative to it then map as absolute ones do. */
static int cwd_to_logical(struct where *w) {
    size_t ln = 0, pn = 0;
    const struct rf_entry *hit = cwd_mapping(w, &ln, &pn);
    if (!hit) return 0;
    cwd_rename(w, hit, ln, pn);
    return 1;
}

/* Whether the table holds `hash` among the working directories entered by a name under
 * a mapping (a binary search: the agent writes them in increasing order). */
static int entered_as(uint64_t hash) {
    uint32_t n = table->n_entered;
    if (n > RF_MAX_ENTERED) return 0;
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint64_t at = table->entered[mid];
        if (at == hash) return 1;
        if (at < hash) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

/* cwd_to_logical for a working directory some process entered by the very name it gives,
 * as the agent's record says (the agent then names it so itself: relative opens there, and
 * getcwd, are what it would make and answer); 0, with w untouched, otherwise. */
static int cwd_as_entered(struct where *w) {
    size_t ln = 0, pn = 0;
    const struct rf_entry *hit = cwd_mapping(w, &ln, &pn);
    if (!hit) return 0;
    uint64_t h = rf_entered_hash(w->path, w->len, hit->logical, ln);
    if (!entered_as(rf_hash_bytes(h, w->path + pn, w->len - pn))) return 0;
    cwd_rename(w, hit, ln, pn);
    return 1;
}

/* Where (`dirfd`, `path` of `n` bytes) leads, for a call that opens (`opening`) or only
 * looks. */
static enum how locate(int dirfd, const char *path, size_t n, int opening, struct where *w) {
    uint64_t seq;
    if (!read_begin(&seq)) return TRAP_IT;
    w->names_gen = table->names_gen;
    w->len = 0;
    w->slash = 0;
    w->dotdot = 0;
    w->opens_ok = 1;
    enum how how = TRAP_IT;
    if (n >= PATHBUF) return TRAP_IT;
    if (path[0] == '/') {
        w->path[0] = '/';
        w->len = 1;
        if (append_components(w->path, &w->len, path, n, &w->slash, &w->dotdot))
            how = map_absolute(w, opening);
    } else if (dirfd == AT_FDCWD) {
        long r = FAST(SYS_getcwd, w->path, PATHBUF, 0, 0);
        if (r > 1 && w->path[0] == '/') {
            w->len = (size_t)r - 1;
            int plain = cwd_is_plain(w->path, w->len);
            /* Under a mapped directory, an open is named by the way the process entered
             * the directory: taken only where the agent's record says so (lookups find
             * the same files by either name). */
            if ((plain || (opening ? cwd_as_entered(w) : cwd_to_logical(w))) &&
                append_components(w->path, &w->len, path, n, &w->slash, &w->dotdot))
                how = map_absolute(w, opening);
        }
    } else if (dirfd >= 0 && (uint32_t)dirfd < table->fd_from &&
               !(table->flags & RF_REMOTE_MET) && plain_name_alike(path, n)) {
        how = AS_GIVEN; /* w->len stays 0: the descriptor's directory is resolved */
    }
    if (how != TRAP_IT && opening && !w->opens_ok) how = TRAP_IT;
    if (w->dotdot && how != AS_GIVEN) how = TRAP_IT;
    w->how = read_still(seq) ? how : TRAP_IT;
    return w->how;
}

/* ---- proofs that a directory path crosses no symlink ------------------------------- */

/* A symlink on the way might lead into a mapping, where the kernel would not follow it as
 * the agent does: a lookup that does not open is taken only under a directory proved free
 * of them. A proof holds while the table's names generation stays: the agent bumps it
 * whenever a traced call may have changed names, and once a second (the life of its own
 * answers about names, so a change by a process roost does not trace is seen as soon). Each
 * slot holds the hash of a proved directory with the generation mixed in. */
#define PROOF_SLOTS 256
static uint64_t proofs[PROOF_SLOTS];

typedef uint64_t __attribute__((may_alias, aligned(1))) unaligned_u64;

/* A hash of the `n` bytes at `p` (a word at a time: the byte-serial multiply chain of FNV
 * costs more than the lookup it guards), mixed with the table's names generation. */
static uint64_t hash_dir(const char *p, size_t n, uint64_t gen) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (gen * 0xff51afd7ed558ccdULL) ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h ^= *(const unaligned_u64 *)(p + i);
        h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ULL;
    }
    uint64_t last = 0;
    for (size_t k = 0; i + k < n; k++) last |= (uint64_t)(unsigned char)p[i + k] << (8 * k);
    h ^= last;
    h = (h ^ (h >> 32)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 29);
}

/* Whether a lookup below the first `d` bytes of w->path may be made in-process: they name
 * a directory reached through no symlink, itself none (proved now, or lately), or the walk
 * to them fails with ENOENT or ENOTDIR before any symlink (openat2 refuses the first
 * symlink it meets before it looks further), so the call itself fails there as the agent's
 * would, after the kernel's own checks of its arguments (not kept: the name may appear). */
static int proved_by_lookups(struct where *w, size_t d);

static int proved(struct where *w, size_t d) {
    if (d <= 1) return 1; /* the root is no symlink */
    uint64_t h = hash_dir(w->path, d, w->names_gen);
    uint64_t *slot = &proofs[h % PROOF_SLOTS];
    if (__atomic_load_n(slot, __ATOMIC_RELAXED) == h) return 1;
    if (table->flags & RF_NO_OPENS) return proved_by_lookups(w, d);
    char saved = w->path[d];
    w->path[d] = 0;
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_NO_SYMLINKS,
    };
    long fd = FAST(SYS_openat2, AT_FDCWD, w->path, &how, sizeof how);
    w->path[d] = saved;
    if (fd == -ENOENT || fd == -ENOTDIR) return 1;
    if (fd < 0) return 0;
    TRAP(SYS_close, fd, 0, 0, 0);
    __atomic_store_n(slot, h, __ATOMIC_RELAXED);
    return 1;
}

/* `proved` where the page may not open (roost run as root): each component in turn, looked
 * at without following it, with each directory proved on the way kept. Unlike one openat2
 * the walk is not atomic: a directory renamed away and replaced by a symlink between two of
 * its steps goes unseen, as one changed by a process roost does not trace after a proof goes
 * unseen until the proof ends (within a second); nothing is hidden while a page exists. */
static int proved_by_lookups(struct where *w, size_t d) {
    for (size_t end = 2; end <= d; end++) {
        if (end < d && w->path[end] != '/') continue;
        uint64_t h = hash_dir(w->path, end, w->names_gen);
        uint64_t *slot = &proofs[h % PROOF_SLOTS];
        if (__atomic_load_n(slot, __ATOMIC_RELAXED) == h) continue;
        char saved = w->path[end];
        w->path[end] = 0;
        struct stat st;
        long r = FAST(SYS_newfstatat, AT_FDCWD, w->path, &st, AT_SYMLINK_NOFOLLOW);
        w->path[end] = saved;
        if (r == -ENOENT || r == -ENOTDIR) return 1;
        if (r < 0 || S_ISLNK(st.st_mode)) return 0;
        if (!S_ISDIR(st.st_mode)) return 1; /* the walk fails with ENOTDIR past it */
        __atomic_store_n(slot, h, __ATOMIC_RELAXED);
    }
    return 1;
}

/* Whether the directory part of w->path is free of symlinks (as `proved` answers). */
static int dir_proved(struct where *w) {
    size_t d = w->len;
    while (d > 0 && w->path[d - 1] != '/') d--;
    return d <= 1 || proved(w, d - 1); /* "/NAME": the root is no symlink */
}

/* Whether w->path, which ended in a slash, is a directory the kernel reaches through no
 * symlink: then the slash, which makes the kernel follow a final symlink even when told
 * not to, changes nothing. */
static int slashed_proved(struct where *w) {
    size_t d = w->len;
    if (d > 1 && w->path[d - 1] == '/') d--;
    return proved(w, d);
}

/* How many calls this process answered in-process, up to RF_PAYS_AT. */
static unsigned answered_here;

/* Counts this process's program as one whose processes the object pays for (table.h). */
static void note_paid(void) {
    struct stat st;
    if (FAST(SYS_newfstatat, AT_FDCWD, "/proc/self/exe", &st, 0) != 0) return;
    uint64_t h = rf_copy_hash(st.st_dev, st.st_ino);
    __atomic_fetch_add(&answered[RF_PAID_AT + (uint32_t)h % RF_PAID_SLOTS], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&answered[RF_PAID_AT + (h >> 32) % RF_PAID_SLOTS], 1, __ATOMIC_RELAXED);
}

static void count(enum rf_call call) {
    if (!answered) return; /* a process that became another user: the page is not its */
    if (table->flags & RF_COUNT) __atomic_fetch_add(&answered[call], 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&answered_here, __ATOMIC_RELAXED) < RF_PAYS_AT &&
        __atomic_add_fetch(&answered_here, 1, __ATOMIC_RELAXED) == RF_PAYS_AT)
        note_paid();
}

/* The directory and path a call is made on: the caller's, or the physical name. */
static int at_dirfd(const struct where *w, int dirfd) {
    return w->how == PHYSICALLY ? AT_FDCWD : dirfd;
}
static const char *at_path(const struct where *w, const char *path) {
    return w->how == PHYSICALLY ? w->path : path;
}

/* ---- the calls --------------------------------------------------------------------- */

/* A descriptor below roost's own numbers (virtual descriptors, copies installed by roost):
 * the kernel answers for it, unless its file is a remote object's local copy, which the
 * caller checks on what the kernel said. */
static int below_roosts_descriptors(int fd) {
    uint64_t seq;
    if (!read_begin(&seq)) return 0;
    int below = fd >= 0 && (uint32_t)fd < table->fd_from;
    return read_still(seq) && below;
}

/* Puts `path` (`n` bytes) as given, made absolute, in w->path: the walk the kernel makes,
 * `..` and all, to be proved. 0 when it does not fit. */
static int as_given_absolute(struct where *w, const char *path, size_t n) {
    size_t at = 0;
    if (path[0] != '/') {
        long r = FAST(SYS_getcwd, w->path, PATHBUF, 0, 0);
        if (r <= 1 || w->path[0] != '/') return 0;
        at = (size_t)r - 1;
        w->path[at++] = '/';
    }
    if (at + n + 1 > PATHBUF) return 0;
    for (size_t i = 0; i < n; i++) w->path[at + i] = path[i];
    w->len = at + n;
    w->path[w->len] = 0;
    return 1;
}

/* A lookup by name: located (as for an open when `opening`: the agent records by which name
 * an open, even a failed one, reached a mapped directory), and its directory proved (the
 * whole name, when it ends in a slash; the name as given, when it goes up with `..`). */
static int lookup_located(int dirfd, const char *path, size_t n, int opening, struct where *w) {
    if (locate(dirfd, path, n, opening, w) == TRAP_IT) return 0;
    if (w->len == 0) return 1;
    if (w->dotdot && !as_given_absolute(w, path, n)) return 0;
    return w->slash ? slashed_proved(w) : dir_proved(w);
}

static long stat_at(int dirfd, const char *path, struct stat *buf, int flags) {
    const int known = AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT;
    struct where w;
    long n;
    if (!ready() || (flags & ~known) || (n = readable_length(path)) < 0) goto trap;
    if (n == 0) {
        if ((flags & AT_EMPTY_PATH) && below_roosts_descriptors(dirfd)) {
            long r = FAST(SYS_newfstatat, dirfd, "", buf, flags);
            if (r == 0 && may_be_copy(buf->st_dev, buf->st_ino)) goto trap;
            count(RF_CALL_FSTAT);
            return r;
        }
        goto trap;
    }
    if (!lookup_located(dirfd, path, (size_t)n, 0, &w)) goto trap;
    long r = FAST(SYS_newfstatat, at_dirfd(&w, dirfd), at_path(&w, path), buf,
                  flags | AT_SYMLINK_NOFOLLOW);
    if (r == 0 && !(flags & AT_SYMLINK_NOFOLLOW) && S_ISLNK(buf->st_mode)) goto trap;
    count(flags & AT_SYMLINK_NOFOLLOW ? RF_CALL_LSTAT : RF_CALL_STAT);
    return r;
trap:
    return TRAP(SYS_newfstatat, dirfd, path, buf, flags);
}

static long statx_at(int dirfd, const char *path, int flags, unsigned mask, void *buf) {
    const int known = AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE;
    struct where w;
    long n;
    if (!ready() || (flags & ~known) || (n = readable_length(path)) < 0) goto trap;
    if (n == 0) {
        if ((flags & AT_EMPTY_PATH) && below_roosts_descriptors(dirfd)) {
            /* The inode too, to tell a copy; local file systems fill it whatever is asked. */
            long r = fast_syscall(SYS_statx, dirfd, (long)"", flags, mask | STATX_INO, (long)buf);
            const struct statx *sx = buf;
            if (r == 0 && may_be_copy(makedev(sx->stx_dev_major, sx->stx_dev_minor), sx->stx_ino))
                goto trap;
            count(RF_CALL_FSTAT);
            return r;
        }
        goto trap;
    }
    if (!lookup_located(dirfd, path, (size_t)n, 0, &w)) goto trap;
    /* The type, to see a final symlink; local file systems fill it whatever is asked. */
    long r = fast_syscall(SYS_statx, at_dirfd(&w, dirfd), (long)at_path(&w, path),
                          flags | AT_SYMLINK_NOFOLLOW, mask | STATX_TYPE, (long)buf);
    if (r == 0 && !(flags & AT_SYMLINK_NOFOLLOW) &&
        S_ISLNK(((struct statx *)buf)->stx_mode))
        goto trap;
    count(RF_CALL_STATX);
    return r;
trap:
    return trap_syscall(SYS_statx, dirfd, (long)path, flags, mask, (long)buf, 0);
}

static long access_at(int dirfd, const char *path, int mode, int flags, long trap_nr) {
    const int known = AT_SYMLINK_NOFOLLOW | AT_EACCESS | AT_EMPTY_PATH;
    struct where w;
    struct stat st;
    long n;
    if (!ready() || (flags & ~known) || (n = readable_length(path)) <= 0) goto trap;
    if (!lookup_located(dirfd, path, (size_t)n, 0, &w)) goto trap;
    int at = at_dirfd(&w, dirfd);
    const char *name = at_path(&w, path);
    long r = FAST(SYS_newfstatat, at, name, &st, AT_SYMLINK_NOFOLLOW);
    if (r == 0 && S_ISLNK(st.st_mode) && !(flags & AT_SYMLINK_NOFOLLOW)) goto trap;
    /* The look-up ran with the effective ids, access judges with the real ones: a refusal
     * may not be access's. */
    if (r == -EACCES) goto trap;
    /* Also where the name is missing: access checks its mode first, and walks by the real
     * ids, which may be refused where the lookup was not. */
    if (r == 0 || r == -ENOENT || r == -ENOTDIR)
        r = flags ? FAST(SYS_faccessat2, at, name, mode, flags) : FAST(SYS_faccessat, at, name, mode, 0);
    if (r == -ENOSYS) goto trap;
    count(RF_CALL_ACCESS);
    return r;
trap:
    if (trap_nr == SYS_access) return TRAP(SYS_access, path, mode, 0, 0);
    if (trap_nr == SYS_faccessat) return TRAP(SYS_faccessat, dirfd, path, mode, 0);
    return TRAP(SYS_faccessat2, dirfd, path, mode, flags);
}

static long readlink_at(int dirfd, const char *path, char *buf, size_t size, long trap_nr) {
    struct where w;
    long n;
    if (!ready() || (n = readable_length(path)) <= 0) goto trap;
    if (!lookup_located(dirfd, path, (size_t)n, 0, &w)) goto trap;
    long r = FAST(SYS_readlinkat, at_dirfd(&w, dirfd), at_path(&w, path), buf, size);
    count(RF_CALL_READLINK);
    return r;
trap:
    if (trap_nr == SYS_readlink) return TRAP(SYS_readlink, path, buf, size, 0);
    return TRAP(SYS_readlinkat, dirfd, path, buf, size);
}

/* The flags openat2 takes (it refuses others, where openat ignores them). */
#define OPEN_FLAGS                                                                          \
    (O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC |  \
     FASYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC |   \
     O_PATH | O_TMPFILE | O_SYNC)
#define O_PATH_KEEPS (O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW)

static int creates(int flags) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* Where the page may not open (RF_NO_OPENS): an open that creates nothing, of a name a
 * lookup finds missing (no entry at all, not even a symlink; or a file on the way), fails
 * as the kernel's would, with that lookup's error. Compilers and loaders probe many names
 * that do not exist. The kernel checks the flags, then takes a descriptor and a file, and
 * only then looks the name up: the flags must all be known and none of O_TMPFILE's, and a
 * descriptor must be free (an eventfd made and closed at once, as the kernel's open takes
 * and gives back one), else the call is trapped and its EMFILE or ENFILE is the kernel's. */
static int open_fails_by_lookup(int dirfd, const char *path, size_t n, int flags, long *ret) {
    struct where w;
    struct stat st;
    if (creates(flags) || (flags & (O_TMPFILE & ~O_DIRECTORY))) return 0;
    if (!lookup_located(dirfd, path, n, 1, &w)) return 0;
    long r = FAST(SYS_newfstatat, at_dirfd(&w, dirfd), at_path(&w, path), &st,
                  AT_SYMLINK_NOFOLLOW);
    if (r != -ENOENT && r != -ENOTDIR) return 0;
    long free_fd = TRAP(SYS_eventfd2, 0, O_CLOEXEC /* EFD_CLOEXEC */, 0, 0);
    if (free_fd < 0) return 0;
    TRAP(SYS_close, free_fd, 0, 0, 0);
    count(RF_CALL_OPEN);
    *ret = r;
    return 1;
}

/* open(2) in-process: 1 with the kernel's result in *ret where the fast path may answer,
 * 0 (nothing done) where only the agent may. */
static int open_in_process(int dirfd, const char *path, int flags, unsigned mode, long *ret) {
    struct where w;
    long n;
    if (!ready() || (flags & ~OPEN_FLAGS) || (n = readable_length(path)) <= 0) return 0;
    if (table->flags & RF_NO_OPENS)
        return open_fails_by_lookup(dirfd, path, (size_t)n, flags, ret);
    if (locate(dirfd, path, (size_t)n, 1, &w) == TRAP_IT) return 0;
    /* By a descriptor, only what changes nothing (as the agent lets pass). */
    if (w.len == 0 && (creates(flags) || (flags & O_TRUNC))) return 0;
    /* openat ignores what openat2 refuses: the mode without a create, most flags with
     * O_PATH; a symlink anywhere on the way (ELOOP) is the agent's to follow. */
    struct open_how how = {
        .flags = (unsigned)((flags & O_PATH) ? flags & O_PATH_KEEPS : flags),
        .mode = creates(flags) ? (mode & 07777) : 0,
        .resolve = RESOLVE_NO_SYMLINKS,
    };
    long r = FAST(SYS_openat2, at_dirfd(&w, dirfd), at_path(&w, path), &how, sizeof how);
    if (r == -ELOOP || r == -EXDEV || r == -EAGAIN || r == -ENOSYS || r == -E2BIG ||
        r == -EINVAL)
        return 0;
    count(RF_CALL_OPEN);
    *ret = r;
    return 1;
}

static long open_at(int dirfd, const char *path, int flags, unsigned mode) {
    long r;
    if (open_in_process(dirfd, path, flags, mode, &r)) return r;
    return TRAP(SYS_openat, dirfd, path, flags, mode);
}

/* getcwd(2) into `buf`: the kernel's answer when it names itself, else the agent's. */
static long cwd_into(char *buf, size_t size) {
    if (!ready()) goto trap;
    uint64_t seq;
    long r = FAST(SYS_getcwd, buf, size, 0, 0);
    if (r <= 1 || buf[0] != '/' || !read_begin(&seq)) goto trap;
    if (!cwd_is_plain(buf, (size_t)r - 1)) {
        /* Under a mapped directory: its name under the mapping, where the agent names it so. */
        struct where w;
        if ((size_t)r > PATHBUF) goto trap;
        for (long i = 0; i < r; i++) w.path[i] = buf[i];
        w.len = (size_t)r - 1;
        if (!cwd_as_entered(&w) || w.len + 1 > size) goto trap;
        for (size_t i = 0; i <= w.len; i++) buf[i] = w.path[i];
        r = (long)w.len + 1;
    }
    if (!read_still(seq)) goto trap;
    count(RF_CALL_GETCWD);
    return r;
trap:
    return TRAP(SYS_getcwd, buf, size, 0, 0);
}

/* ---- the calls for the object's other parts (calls.h) -------------------------------- */

long fp_readlink(const char *path, char *buf, size_t size) {
    return readlink_at(AT_FDCWD, path, buf, size, SYS_readlink);
}
long fp_faccessat(const char *path, int mode, int flags) {
    return access_at(AT_FDCWD, path, mode, flags, flags ? SYS_faccessat2 : SYS_faccessat);
}
long fp_getcwd(char *buf, size_t size) { return cwd_into(buf, size); }
int fp_open_in_process(const char *path, int flags, unsigned mode, long *ret) {
    return open_in_process(AT_FDCWD, path, flags, mode, ret);
}
long fp_open(const char *path, int flags, unsigned mode) {
    return open_at(AT_FDCWD, path, flags, mode);
}
long fp_fstat(int fd, struct stat *buf) { return stat_at(fd, "", buf, AT_EMPTY_PATH); }
long fp_kernel(long nr, long a, long b, long c) { return trap_syscall(nr, a, b, c, 0, 0, 0); }

/* The 64 forms are the same calls on x86_64 (struct stat64 is struct stat): aliases. */
#pragma GCC diagnostic ignored "-Wattribute-alias"
#pragma GCC diagnostic ignored "-Wmissing-attributes"

/* ---- the C library's names ---------------------------------------------------------- */

/* glibc's stat version numbers for x86_64 (_STAT_VER_KERNEL, _STAT_VER_LINUX). */
static int stat_version_ok(int ver) { return ver == 0 || ver == 1; }

EXPORT int fstatat(int dirfd, const char *path, struct stat *buf, int flags) {
    return (int)fp_set_errno(stat_at(dirfd, path, buf, flags));
}
EXPORT int stat(const char *path, struct stat *buf) {
    return (int)fp_set_errno(stat_at(AT_FDCWD, path, buf, 0));
}
EXPORT int lstat(const char *path, struct stat *buf) {
    return (int)fp_set_errno(stat_at(AT_FDCWD, path, buf, AT_SYMLINK_NOFOLLOW));
}
EXPORT int fstat(int fd, struct stat *buf) {
    return (int)fp_set_errno(stat_at(fd, "", buf, AT_EMPTY_PATH));
}
EXPORT int fstatat64(int, const char *, struct stat64 *, int) __attribute__((alias("fstatat")));
EXPORT int stat64(const char *, struct stat64 *) __attribute__((alias("stat")));
EXPORT int lstat64(const char *, struct stat64 *) __attribute__((alias("lstat")));
EXPORT int fstat64(int, struct stat64 *) __attribute__((alias("fstat")));

EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags) {
    if (!stat_version_ok(ver)) return (int)fp_set_errno(-EINVAL);
    return fstatat(dirfd, path, buf, flags);
}
EXPORT int __xstat(int ver, const char *path, struct stat *buf) {
    return __fxstatat(ver, AT_FDCWD, path, buf, 0);
}
EXPORT int __lxstat(int ver, const char *path, struct stat *buf) {
    return __fxstatat(ver, AT_FDCWD, path, buf, AT_SYMLINK_NOFOLLOW);
}
EXPORT int __fxstat(int ver, int fd, struct stat *buf) {
    if (!stat_version_ok(ver)) return (int)fp_set_errno(-EINVAL);
    return fstat(fd, buf);
}
EXPORT int __fxstatat64(int, int, const char *, struct stat *, int)
    __attribute__((alias("__fxstatat")));
EXPORT int __xstat64(int, const char *, struct stat *) __attribute__((alias("__xstat")));
EXPORT int __lxstat64(int, const char *, struct stat *) __attribute__((alias("__lxstat")));
EXPORT int __fxstat64(int, int, struct stat *) __attribute__((alias("__fxstat")));

EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *buf) {
    return (int)fp_set_errno(statx_at(dirfd, path, flags, mask, buf));
}

EXPORT int access(const char *path, int mode) {
    return (int)fp_set_errno(access_at(AT_FDCWD, path, mode, 0, SYS_access));
}
EXPORT int faccessat(int dirfd, const char *path, int mode, int flags) {
    return (int)fp_set_errno(access_at(dirfd, path, mode, flags, flags ? SYS_faccessat2 : SYS_faccessat));
}

EXPORT ssize_t readlink(const char *path, char *buf, size_t size) {
    return fp_set_errno(readlink_at(AT_FDCWD, path, buf, size, SYS_readlink));
}
EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t size) {
    return fp_set_errno(readlink_at(dirfd, path, buf, size, SYS_readlinkat));
}

static unsigned mode_arg(int flags, va_list ap) {
    return creates(flags) ? va_arg(ap, unsigned) : 0;
}
EXPORT int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    unsigned mode = mode_arg(flags, ap);
    va_end(ap);
    return (int)fp_set_errno(open_at(dirfd, path, flags, mode));
}
EXPORT int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    unsigned mode = mode_arg(flags, ap);
    va_end(ap);
    return (int)fp_set_errno(open_at(AT_FDCWD, path, flags, mode));
}
EXPORT int openat64(int, const char *, int, ...) __attribute__((alias("openat")));
EXPORT int open64(const char *, int, ...) __attribute__((alias("open")));
/* _FORTIFY_SOURCE's checked forms, for flags that take no mode. */
EXPORT int __open_2(const char *path, int flags) {
    return (int)fp_set_errno(open_at(AT_FDCWD, path, flags, 0));
}
EXPORT int __openat_2(int dirfd, const char *path, int flags) {
    return (int)fp_set_errno(open_at(dirfd, path, flags, 0));
}
EXPORT int __open64_2(const char *, int) __attribute__((alias("__open_2")));
EXPORT int __openat64_2(int, const char *, int) __attribute__((alias("__openat_2")));
EXPORT int creat(const char *path, unsigned mode) {
    return (int)fp_set_errno(open_at(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode));
}
EXPORT int creat64(const char *, unsigned) __attribute__((alias("creat")));

EXPORT char *getcwd(char *buf, size_t size) {
    if (buf) {
        if (size == 0) {
            fp_set_errno(-EINVAL);
            return 0;
        }
        return fp_set_errno(cwd_into(buf, size)) < 0 ? 0 : buf;
    }
    /* glibc's extension: a buffer of its own (of `size` bytes, or as long as needed). */
    char here[4096];
    long r = fp_set_errno(cwd_into(here, sizeof here));
    if (r < 0) return 0;
    if (size != 0 && (size_t)r > size) {
        fp_set_errno(-ERANGE);
        return 0;
    }
    char *out = malloc(size ? size : (size_t)r);
    if (!out) {
        fp_set_errno(-ENOMEM);
        return 0;
    }
    for (long i = 0; i < r; i++) out[i] = here[i];
    return out;
}
