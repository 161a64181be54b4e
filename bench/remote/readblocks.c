/* bench/remote/readblocks.c: reads FILE sequentially through its own descriptor in blocks of
 * BYTES (Figure 6 of the Parrot paper), and exits non-zero on a short or failed read.
 *   usage: readblocks FILE BYTES        Build: gcc -O2 -o readblocks bench/remote/readblocks.c */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: readblocks FILE BYTES\n");
        return 2;
    }
    size_t block = strtoul(argv[2], NULL, 10);
    char *buf = malloc(block ? block : 1);
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (!block || !buf || fd < 0 || fstat(fd, &st) != 0) {
        perror(argv[1]);
        return 1;
    }
    long long total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, block);
        if (n < 0) {
            perror("read");
            return 1;
        }
        if (n == 0)
            break;
        total += n;
    }
    if (total != st.st_size) {
        fprintf(stderr, "read %lld of %lld bytes\n", total, (long long)st.st_size);
        return 1;
    }
    return 0;
}
