/* iobench: times the micro-operations of the Parrot paper's Figure 3 on one file:
 * getpid, stat, open+close, readlink (of FILE.link, a symlink to FILE made when absent),
 * pread 1 B, pread 8 KiB, and the bandwidth of a sequential read in 1 MiB blocks. Usage: iobench FILE [ITERATIONS]. FILE must hold at least 100 MB for the
 * bandwidth figure (it is created, 100 MB, when absent). Prints one "name value unit" line
 * per figure: microseconds per call, MB/s for the bandwidth. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

#define BIG (100L << 20)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: iobench FILE [ITERATIONS]\n");
        return 2;
    }
    const char *file = argv[1];
    long n = argc > 2 ? atol(argv[2]) : 20000;
    static char buf[1 << 20];
    struct stat st;
    if (stat(file, &st) != 0 || st.st_size < BIG) {
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { perror(file); return 1; }
        for (long i = 0; i < BIG / (long)sizeof buf; i++)
            if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) { perror("write"); return 1; }
        close(fd);
    }
    double t = now();
    for (long i = 0; i < n; i++) syscall(SYS_getpid);
    printf("getpid %.3f us\n", (now() - t) / n * 1e6);

    t = now();
    for (long i = 0; i < n; i++) stat(file, &st);
    printf("stat %.3f us\n", (now() - t) / n * 1e6);

    t = now();
    for (long i = 0; i < n; i++) close(open(file, O_RDONLY));
    printf("open+close %.3f us\n", (now() - t) / n * 1e6);

    char link[4096], target[4096];
    snprintf(link, sizeof link, "%s.link", file);
    if (readlink(link, target, sizeof target) < 0 && symlink("big", link) != 0) {
        perror(link);
        return 1;
    }
    t = now();
    for (long i = 0; i < n; i++) readlink(link, target, sizeof target);
    printf("readlink %.3f us\n", (now() - t) / n * 1e6);

    int fd = open(file, O_RDONLY);
    t = now();
    for (long i = 0; i < n; i++) pread(fd, buf, 1, 0);
    printf("pread1 %.3f us\n", (now() - t) / n * 1e6);

    t = now();
    for (long i = 0; i < n; i++) pread(fd, buf, 8192, (i % 1000) * 8192);
    printf("pread8k %.3f us\n", (now() - t) / n * 1e6);

    t = now();
    long total = 0;
    lseek(fd, 0, SEEK_SET);
    for (ssize_t r; (r = read(fd, buf, sizeof buf)) > 0;) total += r;
    printf("bandwidth %.1f MB/s\n", total / (now() - t) / 1e6);
    close(fd);
    return 0;
}
