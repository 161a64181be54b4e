/* call_loop: the cost of one trapped call in a tight loop on one name, to set against the
 * same loop natively and against a minimal supervisor (notify_cost.c). Usage:
 * call_loop N PATH MODE, MODE r (readlink PATH), s (stat PATH), a (fstatat of PATH's last
 * name from a descriptor on its directory, AT_SYMLINK_NOFOLLOW: what find and du do), e
 * (fstat of a descriptor on PATH: glibc's newfstatat(fd, "", AT_EMPTY_PATH)) or u (getuid,
 * which roost traps only with --uid: a notification answered at once). Prints the mean in
 * microseconds.
 * Build: gcc -O2 -o call_loop bench/agent/call_loop.c
 * e.g. roost run --uid 0 --mount /w=/tmp -- ./call_loop 50000 x u */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: call_loop N PATH r|s|a|e|u\n");
        return 2;
    }
    long n = atol(argv[1]);
    const char *path = argv[2];
    char mode = argv[3][0], buf[256];
    struct stat st;
    struct timespec a, b;
    char dir[4096], name[4096];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(name, sizeof name, "%s", basename(strdup(path)));
    int dirfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    int fd = open(path, O_RDONLY);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        if (mode == 'r')
            readlink(path, buf, sizeof buf);
        else if (mode == 's')
            stat(path, &st);
        else if (mode == 'a')
            fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW);
        else if (mode == 'e')
            fstat(fd, &st);
        else
            getuid();
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double us = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3;
    printf("%s %c %.2f us\n", path, mode, us);
    return 0;
}
