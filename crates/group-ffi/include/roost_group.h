/*
 * roost_group.h: group file operations for C programs (link with -lroost_group).
 *
 * A group directory holds one symlink per member whose target is chirp://host:port/path.
 * gopen() opens every member; each g* call then applies one file operation to all of them
 * and returns one aggregated status (see docs/group.md). On failure a call returns -1 and
 * sets errno; E_GROUP means some members failed (gstatus() says which) and the data of the
 * members that succeeded is still delivered.
 *
 * Connections: flat by default; ROOST_GROUP_RELAY=host:port sends the group to a root relay,
 * ROOST_GROUP_FANOUT (default 32) bounds each relay's children, ROOST_GROUP_TIMEOUT (seconds,
 * default 30) bounds each wave, ROOST_HMAC_KEY=NAME=FILE authenticates (and is delegated to
 * relays). Calls are thread-safe; calls on one group are serialized.
 */
#ifndef ROOST_GROUP_H
#define ROOST_GROUP_H

#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gopen flag: succeed if any member opens, keeping those that did. */
#define O_BESTEFFORT 0x40000000
/* errno of a group operation in which some member failed. */
#define E_GROUP 512

/* File operations, for gbindaggr. */
enum roost_fileop { G_READ, G_PREAD, G_WRITE, G_PWRITE, G_LSEEK, G_FSTAT, G_FSYNC, G_FTRUNCATE, G_CLOSE };
/* Aggregation kinds, for gbindaggr. */
enum roost_aggrtype { G_STATUS_AGGR, G_DATA_AGGR };
/* Status aggregations. */
enum roost_status_aggr { G_ZERO, G_SUM, G_MIN, G_MAX, G_AVERAGE, G_EQUAL };
/* Data aggregations. G_LINES: line equivalence classes of every line (gbindlines picks
 * lines by a regular expression); a read then fills buf with their text, one a line,
 * "MEMBERS: TEXT" (with G_LINE_NUMBERS "MEMBERS:NUMBER: TEXT"), the members written as host
 * sets of their names such as node[1-64/3], and returns the length of the whole text (a
 * buffer of gsize * count bytes that is too small holds its beginning). */
enum roost_data_aggr { G_NONE, G_CONCAT, G_LINES };
#define G_LINE_NUMBERS 1

/* Opens the group named by dirname; returns a group descriptor, or -1. */
int gopen(const char *dirname, int flags, int mode);
/* Number of members, or -1. */
int gsize(int gfd);
/* Copies each member's name into files[i] (each at least NAME_MAX + 1 bytes); returns gsize. */
int gfiles(int gfd, char **files);
/* Group index of the member named file, or -1. */
int gindex(int gfd, const char *file);
/* Fills status_array[gsize] with each member's result of the last operation (its value, or
 * -errno); returns the number of members that failed, or -1. */
int gstatus(int gfd, long long *status_array);
/* Binds aggregation ag of kind typ to operation fop of group gfd, or with gfd == -1 to
 * groups opened later. */
int gbindaggr(int gfd, int fop, int typ, int ag);
/* Binds line classes of the lines matching regex (Rust regex syntax; NULL: every line) to
 * operation fop, as gbindaggr does; flags: 0 or G_LINE_NUMBERS. */
int gbindlines(int gfd, int fop, const char *regex, int flags);

/* The operations. With the default concatenate aggregation, gread and gpread put member i's
 * bytes at buf + i * count (buf holds gsize * count bytes; the rest of each slot is zeroed)
 * and return the total; gfstat fills stats[gsize]. glseek returns the common offset, or -1
 * with errno EDOM if the members' offsets differ. */
ssize_t gread(int gfd, void *buf, size_t count);
ssize_t gpread(int gfd, void *buf, size_t count, off_t offset);
ssize_t gwrite(int gfd, const void *buf, size_t count);
ssize_t gpwrite(int gfd, const void *buf, size_t count, off_t offset);
off_t glseek(int gfd, off_t offset, int whence);
int gfstat(int gfd, struct stat *stats);
int gfsync(int gfd);
int gftruncate(int gfd, off_t length);
int gclose(int gfd);

#ifdef __cplusplus
}
#endif

#endif
