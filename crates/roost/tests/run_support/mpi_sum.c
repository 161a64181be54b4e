/* mpi_sum: an MPI job over pool data. Each rank reads the whole-number file IN, sums the
 * numbers whose index is its rank modulo the world size, and writes "rank R sum S" to
 * OUTDIR/part.R; rank 0 prints the total (MPI_Reduce) and rank 1 the last element of an
 * 800 KB message from rank 0 (large enough for Open MPI's single-copy path between
 * processes on one host). Usage: mpi_sum IN OUTDIR */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define WORDS 100000

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: mpi_sum IN OUTDIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    FILE *in = fopen(argv[1], "r");
    if (!in) {
        perror(argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    long v, i = 0, sum = 0;
    while (fscanf(in, "%ld", &v) == 1)
        if (i++ % size == rank) sum += v;
    fclose(in);
    char part[4096];
    snprintf(part, sizeof part, "%s/part.%d", argv[2], rank);
    FILE *out = fopen(part, "w");
    if (!out || fprintf(out, "rank %d sum %ld\n", rank, sum) < 0 || fclose(out) != 0) {
        perror(part);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    long total = 0;
    MPI_Reduce(&sum, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    static long message[WORDS];
    for (int k = 0; k < WORDS; k++) message[k] = rank + k;
    if (size > 1 && rank == 0) MPI_Send(message, WORDS, MPI_LONG, 1, 0, MPI_COMM_WORLD);
    if (size > 1 && rank == 1)
        MPI_Recv(message, WORDS, MPI_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0) printf("ranks %d total %ld\n", size, total);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) printf("rank 1 received %ld\n", message[WORDS - 1]);
    MPI_Finalize();
    return 0;
}
