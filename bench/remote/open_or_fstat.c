/* open_or_fstat: N times open+close PATH (MODE 0), or fstat of one descriptor of PATH kept
 * open (MODE 1); prints the mean in microseconds. The two halves of identity_loop.c's
 * loop, to tell which call a change costs.
 * Build: gcc -O2 -o open_or_fstat bench/remote/open_or_fstat.c
 * Usage: roost run --chirp-mode cached -- ./open_or_fstat 20000 /chirp/HOST:PORT/file 1 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]); int mode = atoi(argv[3]);
    struct stat st; struct timespec a, b;
    int keep = open(argv[2], O_RDONLY);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        if (mode == 0) { int fd = open(argv[2], O_RDONLY); close(fd); }
        else fstat(keep, &st);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n / 1e3);
}
