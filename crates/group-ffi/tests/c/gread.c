/* Reads a group of small files with the C ABI and prints what each member holds. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "roost_group.h"

#define SLOT 64

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gread GROUPDIR\n");
        return 2;
    }
    int gfd = gopen(argv[1], O_RDONLY | O_BESTEFFORT, 0);
    if (gfd < 0) {
        printf("gopen failed: errno %d\n", errno);
        return 1;
    }
    int n = gsize(gfd);
    printf("gsize %d\n", n);
    char **names = calloc(n, sizeof *names);
    for (int i = 0; i < n; i++)
        names[i] = malloc(NAME_MAX + 1);
    gfiles(gfd, names);
    printf("gindex %s %d\n", names[n - 1], gindex(gfd, names[n - 1]));

    char *buf = calloc(n, SLOT);
    ssize_t total = gread(gfd, buf, SLOT);
    printf("gread total %zd\n", total);
    long long *status = calloc(n, sizeof *status);
    int failed = gstatus(gfd, status);
    printf("gstatus failed %d\n", failed);
    for (int i = 0; i < n; i++) {
        char *text = buf + i * SLOT;
        text[strcspn(text, "\n")] = 0;
        printf("%s %lld %s\n", names[i], status[i], text);
    }

    /* Offsets are per member: all at their own end, so lseek's equal has no value here. */
    off_t end = glseek(gfd, 0, SEEK_CUR);
    printf("glseek %lld errno %s\n", (long long)end, end < 0 && errno == EDOM ? "EDOM" : "-");
    /* Bind max to lseek for this group: the longest file's length. */
    gbindaggr(gfd, G_LSEEK, G_STATUS_AGGR, G_MAX);
    printf("glseek max %lld\n", (long long)glseek(gfd, 0, SEEK_END));

    /* Line classes of the lines holding an x, instead of the members' bytes. */
    printf("gbindlines %d\n", gbindlines(gfd, G_PREAD, "x", 0));
    memset(buf, 0, n * SLOT);
    ssize_t text = gpread(gfd, buf, SLOT, 0);
    printf("gpread lines %zd\n%s", text, buf);
    int bad = gbindlines(gfd, G_PREAD, "(", 0);
    printf("bad regex %d errno %s\n", bad, errno == EINVAL ? "EINVAL" : "-");

    struct stat *st = calloc(n, sizeof *st);
    int rc = gfstat(gfd, st);
    printf("gfstat %d size0 %lld\n", rc, (long long)st[0].st_size);
    printf("gclose %d\n", gclose(gfd));
    rc = gsize(gfd);
    printf("after close %d errno %s\n", rc, errno == EBADF ? "EBADF" : "-");
    return 0;
}
