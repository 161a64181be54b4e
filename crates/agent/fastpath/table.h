/* The table roost run shares with its in-process fast path (roost_fastpath.c), read-only
 * there. Its Rust writer is crates/agent/src/fastpath/table.rs: the two must agree on every
 * offset below, which a unit test there checks against this file.
 *
 * The agent decides what may be answered in the program's process; this table only says
 * where: which logical prefixes map to which physical directories, which must be left to
 * the trap, and which physical directories make a working directory ambiguous. */
#ifndef ROOST_FASTPATH_TABLE_H
#define ROOST_FASTPATH_TABLE_H

#include <stdint.h>

#define RF_MAGIC 0x31504654534f4f52ULL /* "ROOSTFP1" */
#define RF_VERSION 2u

#define RF_MAX_ENTRIES 64
#define RF_MAX_NAMES 32
#define RF_PATH_MAX 252
#define RF_NAME_MAX 60
#define RF_MAX_ENTERED 512

/* table.flags */
#define RF_ENABLED 1u    /* answer calls in-process at all */
#define RF_COUNT 2u    /* count the calls answered (--summary) */
#define RF_NO_OPENS 4u /* the page may not open (roost run as root): lookups only */
#define RF_REMOTE_MET 8u /* a remote object was met: a directory descriptor may be a mirror's */

/* entry.kind */
#define RF_LOCAL 1u /* logical prefix -> physical directory */
#define RF_TRAP 2u  /* anything at or below the logical prefix goes to the agent */
#define RF_PHYS 3u  /* a physical directory a mapping names (a local root, a mirror) */

/* entry.flags */
#define RF_VIEWED 1u /* RF_LOCAL: opens through it need no note; RF_PHYS: opens by the
                        physical name do (the agent must see them) */

struct rf_entry {
    uint32_t kind;
    uint32_t flags;
    uint16_t logical_len;
    uint16_t physical_len;
    uint32_t pad;
    char logical[RF_PATH_MAX];
    char physical[RF_PATH_MAX];
};

struct rf_name {
    uint32_t len;
    char name[RF_NAME_MAX];
};

/* The calls the fast path answers, as the counters index them. */
enum rf_call {
    RF_CALL_STAT,
    RF_CALL_LSTAT,
    RF_CALL_FSTAT,
    RF_CALL_STATX,
    RF_CALL_ACCESS,
    RF_CALL_READLINK,
    RF_CALL_OPEN,
    RF_CALL_GETCWD,
    RF_CALLS
};

struct rf_table {
    uint64_t magic;
    uint32_t version;
    uint32_t flags;
    /* Odd while the agent rewrites the table; readers retry or take the trap. */
    uint64_t seq;
    /* Bumped whenever a traced call may have changed names (a rename, a new symlink): the
     * fast path's cached proofs of symlink-free directories are dropped. */
    uint64_t names_gen;
    /* Descriptors from here up are roost's (virtual descriptors, local copies). */
    uint32_t fd_from;
    uint32_t n_entries;
    uint32_t n_names;
    uint32_t pad;
    struct rf_entry entries[RF_MAX_ENTRIES];
    /* Last names of mount points and of local mappings' directories: a name relative to a
     * directory descriptor that is one of these goes to the agent. */
    struct rf_name names[RF_MAX_NAMES];
    uint32_t n_entered;
    uint32_t pad2;
    /* The working directories some process entered by a name under a mapping, as the agent
     * names them now (its `Namespace::entered_names`): rf_entered_hash of each physical
     * directory and that name, in increasing order. A relative open, and getcwd, in one of
     * these is named as the agent would name it. */
    uint64_t entered[RF_MAX_ENTERED];
};

/* FNV-1a over `n` bytes, from `h` (RF_HASH_START to begin). */
#define RF_HASH_START 0xcbf29ce484222325ULL
static inline uint64_t rf_hash_bytes(uint64_t h, const char *p, unsigned long n) {
    for (unsigned long i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h;
}

/* The hash table.entered holds for a directory entered at `physical` by `logical`. */
static inline uint64_t rf_entered_hash(const char *physical, unsigned long pn,
                                       const char *logical, unsigned long ln) {
    char nul = 0;
    uint64_t h = rf_hash_bytes(RF_HASH_START, physical, pn);
    return rf_hash_bytes(rf_hash_bytes(h, &nul, 1), logical, ln);
}

/* The local copies of remote objects roost has made this run (crates/agent/src/copies.rs):
 * a descriptor on one must be answered with the remote object's identity, by the agent. The
 * agent notes each copy's (device, inode) here before any program can open it, in a Bloom
 * filter that only ever gains bits: a descriptor whose file it may hold goes to the agent,
 * any other is the kernel's to answer. Past the table, read-only like it. */
#define RF_COPIES_OFFSET 40960
#define RF_COPY_BITS (1u << 19)
#define RF_COPY_PROBES 3
struct rf_copies {
    /* How many copies were noted: none, and no descriptor need be looked at. */
    uint64_t noted;
    uint64_t pad[511];
    uint64_t bits[RF_COPY_BITS / 64];
};

/* The hash whose RF_COPY_PROBES 21-bit fields (each cut to RF_COPY_BITS) place a copy's
 * (device, inode) in the filter: splitmix64's finalizer over both. */
static inline uint64_t rf_copy_hash(uint64_t dev, uint64_t ino) {
    uint64_t h = ino * 0x9e3779b97f4a7c15ULL ^ dev;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

/* The counters of calls answered in-process, by enum rf_call: a page of their own, the only
 * part of the file the programs map writable. */
#define RF_COUNTERS_OFFSET (RF_COPIES_OFFSET + sizeof(struct rf_copies))
#define RF_FILE_SIZE (RF_COUNTERS_OFFSET + 4096)

/* In the same page, per program (its executable's device and inode), how many of its
 * processes answered RF_PAYS_AT calls in-process, counted in two slots (the low and high
 * halves of rf_copy_hash, each cut to RF_PAID_SLOTS; the agent reads the smaller, so two
 * programs share a count only where both slots collide): the agent stops offering the
 * object to a program whose processes mostly do not, since loading it costs each process
 * about as much as that many trapped calls (crates/agent/src/fastpath/offers.rs). Indexes
 * of 64-bit words from the page's start. */
#define RF_PAID_AT 64
#define RF_PAID_SLOTS 448
#define RF_PAYS_AT 8

#endif
