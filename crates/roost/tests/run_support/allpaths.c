/* allpaths: calls every translated path syscall once on paths below argv[1] and prints
 * "name result". Run natively on a physical directory and under roost run on the logical
 * name of a copy of it, the two outputs must be equal: an untranslated call would see a
 * path that does not exist physically. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *B;
static char bufs[8][4096];
static int nb;

/* B + "/" + rel, in a rotating buffer. */
static const char *P(const char *rel) {
    char *b = bufs[nb++ % 8];
    snprintf(b, 4096, "%s/%s", B, rel);
    return b;
}

static void report(const char *name, long r) {
    printf("%s %s\n", name, r >= 0 ? "ok" : strerror(errno));
    if (r > 2 && (!strcmp(name, "open") || !strcmp(name, "openat") || !strcmp(name, "openat2") ||
                  !strcmp(name, "creat")))
        close((int)r);
}

#define CALL(name, ...) report(name, syscall(__VA_ARGS__))

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    B = argv[1];
    char buf[512];
    struct stat st;
    struct statx stx;
    struct statfs sfs;
    CALL("open", SYS_open, P("f"), O_RDONLY);
    CALL("creat", SYS_creat, P("c"), 0644);
    CALL("openat", SYS_openat, AT_FDCWD, P("f"), O_RDONLY);
    struct open_how how = { .flags = O_RDONLY };
    CALL("openat2", SYS_openat2, AT_FDCWD, P("f"), &how, sizeof how);
    CALL("stat", SYS_stat, P("f"), &st);
    CALL("lstat", SYS_lstat, P("l"), &st);
    CALL("newfstatat", SYS_newfstatat, AT_FDCWD, P("l"), &st, AT_SYMLINK_NOFOLLOW);
    CALL("statx", SYS_statx, AT_FDCWD, P("f"), 0, STATX_ALL, &stx);
    CALL("access", SYS_access, P("f"), R_OK);
    CALL("faccessat", SYS_faccessat, AT_FDCWD, P("f"), R_OK);
    CALL("faccessat2", SYS_faccessat2, AT_FDCWD, P("f"), R_OK, AT_EACCESS);
    CALL("readlink", SYS_readlink, P("l"), buf, sizeof buf);
    CALL("readlinkat", SYS_readlinkat, AT_FDCWD, P("l"), buf, sizeof buf);
    CALL("mkdir", SYS_mkdir, P("m1"), 0755);
    CALL("mkdirat", SYS_mkdirat, AT_FDCWD, P("m2"), 0755);
    CALL("mknod", SYS_mknod, P("fifo1"), S_IFIFO | 0644, 0);
    CALL("mknodat", SYS_mknodat, AT_FDCWD, P("fifo2"), S_IFIFO | 0644, 0);
    CALL("rmdir", SYS_rmdir, P("m1"));
    CALL("unlink", SYS_unlink, P("fifo1"));
    CALL("unlinkat", SYS_unlinkat, AT_FDCWD, P("m2"), AT_REMOVEDIR);
    CALL("rename", SYS_rename, P("c"), P("c2"));
    CALL("renameat", SYS_renameat, AT_FDCWD, P("c2"), AT_FDCWD, P("c3"));
    CALL("renameat2", SYS_renameat2, AT_FDCWD, P("c3"), AT_FDCWD, P("c4"), RENAME_NOREPLACE);
    CALL("link", SYS_link, P("f"), P("h1"));
    CALL("linkat", SYS_linkat, AT_FDCWD, P("f"), AT_FDCWD, P("h2"), 0);
    CALL("symlink", SYS_symlink, "f", P("s1"));
    CALL("symlinkat", SYS_symlinkat, "f", AT_FDCWD, P("s2"));
    CALL("chmod", SYS_chmod, P("f"), 0640);
    CALL("fchmodat", SYS_fchmodat, AT_FDCWD, P("f"), 0644);
    CALL("fchmodat2", 452, AT_FDCWD, P("f"), 0600, 0);
    CALL("chown", SYS_chown, P("f"), getuid(), getgid());
    CALL("lchown", SYS_lchown, P("l"), getuid(), getgid());
    CALL("fchownat", SYS_fchownat, AT_FDCWD, P("f"), getuid(), getgid(), 0);
    CALL("truncate", SYS_truncate, P("c4"), 3);
    CALL("utime", SYS_utime, P("f"), NULL);
    CALL("utimes", SYS_utimes, P("f"), NULL);
    CALL("futimesat", SYS_futimesat, AT_FDCWD, P("f"), NULL);
    CALL("utimensat", SYS_utimensat, AT_FDCWD, P("f"), NULL, 0);
    CALL("setxattr", SYS_setxattr, P("f"), "user.roost", "v", 1, 0);
    CALL("lsetxattr", SYS_lsetxattr, P("f"), "user.roost2", "w", 1, 0);
    CALL("getxattr", SYS_getxattr, P("f"), "user.roost", buf, sizeof buf);
    CALL("lgetxattr", SYS_lgetxattr, P("f"), "user.roost", buf, sizeof buf);
    CALL("listxattr", SYS_listxattr, P("f"), buf, sizeof buf);
    CALL("llistxattr", SYS_llistxattr, P("f"), buf, sizeof buf);
    CALL("removexattr", SYS_removexattr, P("f"), "user.roost");
    CALL("lremovexattr", SYS_lremovexattr, P("f"), "user.roost2");
    CALL("listxattrat", 465, AT_FDCWD, P("f"), 0, buf, sizeof buf);
    struct { unsigned long long value; unsigned size, flags; } xa = { (uintptr_t)"x", 1, 0 };
    CALL("setxattrat", 463, AT_FDCWD, P("f"), 0, "user.roost3", &xa, sizeof xa);
    xa.value = (uintptr_t)buf;
    xa.size = sizeof buf;
    CALL("getxattrat", 464, AT_FDCWD, P("f"), 0, "user.roost3", &xa, sizeof xa);
    CALL("removexattrat", 466, AT_FDCWD, P("f"), 0, "user.roost3");
    unsigned char fattr[24] = {0};
    CALL("file_getattr", 468, AT_FDCWD, P("f"), fattr, sizeof fattr, 0);
    CALL("file_setattr", 469, AT_FDCWD, P("f"), fattr, sizeof fattr, 0);
    CALL("statfs", SYS_statfs, P("f"), &sfs);
    int in = inotify_init1(IN_CLOEXEC);
    CALL("inotify_add_watch", SYS_inotify_add_watch, in, P("f"), IN_MODIFY);
    struct { unsigned bytes; int type; unsigned char h[128]; } fh = { .bytes = 128 };
    int mount_id;
    CALL("name_to_handle_at", SYS_name_to_handle_at, AT_FDCWD, P("f"), &fh, &mount_id, 0);
    CALL("uselib", SYS_uselib, P("f"));
    int fan = fanotify_init(FAN_CLASS_NOTIF, O_RDONLY); /* needs root; EBADF below otherwise */
    CALL("fanotify_mark", SYS_fanotify_mark, fan, FAN_MARK_ADD, FAN_MODIFY, AT_FDCWD, P("f"));
    int rx = socket(AF_UNIX, SOCK_DGRAM, 0), tx = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", P("sock"));
    CALL("bind", SYS_bind, rx, &sa, sizeof sa);
    struct iovec iov = { .iov_base = "m", .iov_len = 1 };
    struct mmsghdr mm[2] = {
        { .msg_hdr = { .msg_name = &sa, .msg_namelen = sizeof sa, .msg_iov = &iov, .msg_iovlen = 1 } },
        { .msg_hdr = { .msg_name = &sa, .msg_namelen = sizeof sa, .msg_iov = &iov, .msg_iovlen = 1 } },
    };
    CALL("sendmmsg", SYS_sendmmsg, tx, mm, 2, 0);
    printf("sendmmsg msg_len %u %u\n", mm[0].msg_len, mm[1].msg_len);
    fflush(stdout);
    pid_t jailed = fork();
    if (jailed == 0) { /* chroot needs root: EPERM otherwise, natively and under roost alike */
        CALL("chroot", SYS_chroot, P("d"));
        fflush(stdout);
        _exit(0);
    }
    waitpid(jailed, NULL, 0);
    CALL("chdir", SYS_chdir, P("d"));
    CALL("chdir-relative", SYS_chdir, "..");
    int dfd = open(P("d"), O_RDONLY | O_DIRECTORY);
    CALL("fchdir", SYS_fchdir, dfd);
    CALL("open-after-fchdir", SYS_open, "../f", O_RDONLY);
    return 0;
}
