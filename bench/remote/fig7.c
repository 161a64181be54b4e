/* fig7: times the single operations of the Parrot paper's Figure 7 (remote I/O through the
 * agent) on one file: stat, open+close, pread 1 B (at offsets that vary), pread 8 KiB, and
 * pwrite 8 KiB into a second file. Usage: fig7 FILE WFILE [SAMPLES]. FILE must hold at least
 * 1000 bytes; WFILE is created when absent, opened once and closed at the end (so a remote one
 * goes back to its server then, outside the timing). Each figure is the median of SAMPLES
 * (default 2000) calls, each timed on its own; prints one "name value us" line per figure. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints the median of the n samples, in microseconds. */
static void report(const char *name, double *samples, long n) {
    qsort(samples, n, sizeof *samples, by_value);
    double m = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    printf("%s %.3f us\n", name, m * 1e6);
}

/* Times one call of EXPR into samples[i] for every i below n, then reports their median. */
#define TIME(name, expr)                                   \
    do {                                                   \
        for (long i = 0; i < n; i++) {                     \
            double t = now();                              \
            if ((expr) < 0) { perror(name); return 1; }    \
            samples[i] = now() - t;                        \
        }                                                  \
        report(name, samples, n);                          \
    } while (0)

/* open+close as one expression: the close's result, or -1 when the open fails. */
static int open_close(const char *file) {
    int fd = open(file, O_RDONLY);
    return fd < 0 ? -1 : close(fd);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: fig7 FILE WFILE [SAMPLES]\n");
        return 2;
    }
    const char *file = argv[1], *wfile = argv[2];
    long n = argc > 3 ? atol(argv[3]) : 2000;
    if (n < 1) {
        fprintf(stderr, "fig7: SAMPLES must be at least 1\n");
        return 2;
    }
    double *samples = malloc(n * sizeof *samples);
    static char buf[8192];
    struct stat st;
    if (!samples) { perror("malloc"); return 1; }

    TIME("stat", stat(file, &st));
    TIME("open+close", open_close(file));

    int fd = open(file, O_RDONLY);
    if (fd < 0) { perror(file); return 1; }
    TIME("read1", pread(fd, buf, 1, i % 1000));
    TIME("read8k", pread(fd, buf, sizeof buf, 0));
    close(fd);

    int wfd = open(wfile, O_RDWR | O_CREAT, 0644);
    if (wfd < 0) { perror(wfile); return 1; }
    memset(buf, 'y', sizeof buf);
    TIME("write8k", pwrite(wfd, buf, sizeof buf, 0));
    if (close(wfd) != 0) { perror(wfile); return 1; }
    free(samples);
    return 0;
}
