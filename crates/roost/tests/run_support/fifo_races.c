/* FIFO opens at the edges the agent must get right. Usage: fifo_races MODE FIFO [ROUNDS]
 *   early-writer: a writer that opens without blocking, writes and closes as soon as a
 *     reader exists, while the reader blocks in open: the reader must get the data
 *     (ROUNDS times, default 1).
 *   thread-signal: a worker thread blocks in a read-only open; the main thread blocks
 *     SIGUSR1 and sends it to the process, so only the worker can take it: the open must
 *     fail with EINTR (the handler has no SA_RESTART).
 *   main-waits: the main thread blocks in a read-only open while a worker that does not
 *     block SIGUSR1 sends it to the process: the kernel gives it to the main thread, whose
 *     open must fail with EINTR (as Ctrl-C must reach a threaded program's main thread).
 *   group-stop: a worker thread blocks in a read-only open; a child stops the process
 *     (SIGSTOP), checks that every thread stops, resumes it (SIGCONT) and writes to the
 *     FIFO: the worker's open must then go on and read the data.
 * Prints what the reader or the worker saw. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *fifo;

static void nothing(int sig) { (void)sig; }

static void *open_for_reading(void *unused) {
    (void)unused;
    int fd = open(fifo, O_RDONLY);
    printf("worker open: %s\n", fd < 0 ? strerror(errno) : "ok");
    return NULL;
}

/* One round of early-writer: 1 when the reader got the writer's data. */
static int early_writer_round(void) {
    pid_t child = fork();
    if (child == 0) {
        int fd;
        while ((fd = open(fifo, O_WRONLY | O_NONBLOCK)) < 0 && errno == ENXIO)
            ;
        if (fd < 0 || write(fd, "data\n", 5) != 5)
            _exit(1);
        close(fd);
        _exit(0);
    }
    usleep(20000); /* the writer is trying by now */
    int fd = open(fifo, O_RDONLY);
    char buf[16] = {0};
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    int status;
    waitpid(child, &status, 0);
    return n == 5 && memcmp(buf, "data\n", 5) == 0;
}

static int early_writer(int rounds) {
    int got = 0;
    for (int i = 0; i < rounds; i++)
        got += early_writer_round();
    printf("%d of %d readers got the data\n", got, rounds);
    return got == rounds ? 0 : 1;
}

static int thread_signal(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = nothing; /* no SA_RESTART */
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_t worker;
    pthread_create(&worker, NULL, open_for_reading, NULL); /* inherits no blocked signals */
    pthread_sigmask(SIG_BLOCK, &usr1, NULL); /* only the worker can take it now */
    usleep(300000);
    kill(getpid(), SIGUSR1);
    pthread_join(worker, NULL);
    return 0;
}

static void *signal_the_process(void *unused) {
    (void)unused;
    usleep(300000);
    kill(getpid(), SIGUSR1);
    return NULL;
}

static int main_waits(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = nothing; /* no SA_RESTART */
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t worker;
    pthread_create(&worker, NULL, signal_the_process, NULL);
    int fd = open(fifo, O_RDONLY);
    printf("main open: %s\n", fd < 0 ? strerror(errno) : "ok");
    pthread_join(worker, NULL);
    return 0;
}

/* 1 when every thread of process `pid` is stopped ('T', or 't' when traced) within 5 s. */
static int all_threads_stop(pid_t pid) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    for (int tries = 0; tries < 500; tries++) {
        int running = 0;
        DIR *tasks = opendir(dir);
        struct dirent *task;
        while (tasks && (task = readdir(tasks))) {
            if (task->d_name[0] == '.')
                continue;
            char path[320], line[256];
            snprintf(path, sizeof path, "%s/%s/stat", dir, task->d_name);
            FILE *f = fopen(path, "r");
            if (!f)
                continue;
            char *state = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
            fclose(f);
            if (state && state[2] != 'T' && state[2] != 't')
                running++;
        }
        if (tasks)
            closedir(tasks);
        if (!running)
            return 1;
        usleep(10000);
    }
    return 0;
}

static void *read_after_open(void *unused) {
    (void)unused;
    int fd = open(fifo, O_RDONLY);
    char buf[16] = {0};
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    printf("worker read: %s\n", n > 0 ? buf : strerror(errno));
    return NULL;
}

static int group_stop(void) {
    pthread_t worker;
    pthread_create(&worker, NULL, read_after_open, NULL);
    pid_t self = getpid();
    pid_t child = fork();
    if (child == 0) {
        usleep(300000); /* the worker waits in its open by now */
        kill(self, SIGSTOP);
        int stopped = all_threads_stop(self);
        kill(self, SIGCONT);
        int fd = open(fifo, O_WRONLY);
        if (fd < 0 || write(fd, "data", 4) != 4)
            _exit(2);
        _exit(stopped ? 0 : 1);
    }
    pthread_join(worker, NULL);
    int status;
    waitpid(child, &status, 0);
    printf("every thread stopped: %s\n",
           WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "yes" : "no");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s early-writer|thread-signal|main-waits|group-stop FIFO [ROUNDS]\n", argv[0]);
        return 2;
    }
    fifo = argv[2];
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(argv[1], "early-writer") == 0)
        return early_writer(argc == 4 ? atoi(argv[3]) : 1);
    if (strcmp(argv[1], "thread-signal") == 0)
        return thread_signal();
    if (strcmp(argv[1], "main-waits") == 0)
        return main_waits();
    if (strcmp(argv[1], "group-stop") == 0)
        return group_stop();
    fprintf(stderr, "%s: unknown mode %s\n", argv[0], argv[1]);
    return 2;
}
