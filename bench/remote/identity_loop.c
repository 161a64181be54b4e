/* identity_loop: N times open PATH, fstat it (glibc: newfstatat with AT_EMPTY_PATH), close;
 * or, with FIRST given, opens FIRST once before (a remote file, so roost has a copy noted
 * and looks at every descriptor's fstat). Prints the mean in microseconds.
 * Build: gcc -O2 -o identity_loop bench/remote/identity_loop.c
 * Usage: identity_loop N PATH [FIRST] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: identity_loop N PATH [FIRST]\n");
        return 2;
    }
    long n = atol(argv[1]);
    if (argc > 3 && open(argv[3], O_RDONLY) < 0) {
        perror(argv[3]);
        return 1;
    }
    struct stat st;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        int fd = open(argv[2], O_RDONLY);
        if (fd < 0 || fstat(fd, &st) != 0) {
            perror(argv[2]);
            return 1;
        }
        close(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3);
    return 0;
}
