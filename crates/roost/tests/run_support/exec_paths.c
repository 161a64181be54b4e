/* exec_paths: execs made in the ways roost delivers differently (see notify/exec.rs).
 *   exec_paths self                   print /proc/self/exe
 *   exec_paths try PROG... -- ARGS    execv each PROG in turn (failures printed), then
 *                                     print /proc/self/exe if none ran
 *   exec_paths thread PROG ARGS...    execv from a thread that is not the main one
 *   exec_paths timer PROG ARGS...     execv with a 200 us POSIX timer whose handler (no
 *                                     SA_RESTART) keeps interrupting (exec deletes it)
 *   exec_paths stat PATH N            N stats of PATH under the same timer; prints how many
 *                                     failed with EINTR (natively none)
 *   exec_paths memfd FILE ARGV0 ARGS... copy FILE into a memfd and fexecve it */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static void print_self(void) {
    char b[4096];
    ssize_t n = readlink("/proc/self/exe", b, sizeof b - 1);
    b[n > 0 ? n : 0] = 0;
    printf("self %s\n", b);
    fflush(stdout);
}

static char **exec_argv;

static void *exec_from_thread(void *arg) {
    execv(exec_argv[0], exec_argv);
    printf("thread exec %s: %s\n", exec_argv[0], strerror(errno));
    fflush(stdout);
    exit(1);
    return arg;
}

static volatile long ticks;
static void tick(int sig) { (void)sig; ticks++; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *how = argv[1];
    if (!strcmp(how, "self")) {
        print_self();
        return 0;
    }
    if (!strcmp(how, "try")) {
        int sep = 2;
        while (sep < argc && strcmp(argv[sep], "--")) sep++;
        char **args = argv + sep; /* args[0] is replaced by each program */
        for (int i = 2; i < sep; i++) {
            args[0] = argv[i];
            execv(argv[i], args);
            printf("exec %s: %s\n", argv[i], strerror(errno));
            fflush(stdout);
        }
        print_self();
        return 0;
    }
    if (argc < 3) return 2;
    if (!strcmp(how, "thread")) {
        exec_argv = argv + 2;
        pthread_t t;
        pthread_create(&t, NULL, exec_from_thread, NULL);
        pause();
        return 1;
    }
    if (!strcmp(how, "timer") || !strcmp(how, "stat")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = tick;
        sigaction(SIGUSR1, &sa, NULL);
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_SIGNAL;
        ev.sigev_signo = SIGUSR1;
        timer_t timer;
        timer_create(CLOCK_MONOTONIC, &ev, &timer);
        struct itimerspec it = {{0, 200000}, {0, 200000}};
        timer_settime(timer, 0, &it, NULL);
        while (ticks < 3) {
        }
        if (!strcmp(how, "stat")) {
            long n = argc > 3 ? atol(argv[3]) : 1000, interrupted = 0;
            struct stat st;
            for (long i = 0; i < n; i++)
                if (stat(argv[2], &st) != 0 && errno == EINTR) interrupted++;
            printf("EINTR %ld\n", interrupted);
            return 0;
        }
        execv(argv[2], argv + 2);
        printf("timer exec %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    if (!strcmp(how, "memfd")) {
        int in = open(argv[2], O_RDONLY);
        int mem = memfd_create("prog", MFD_CLOEXEC);
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof buf)) > 0)
            if (write(mem, buf, n) != n) return 1;
        fexecve(mem, argv + 3, environ);
        printf("fexecve: %s\n", strerror(errno));
        return 1;
    }
    return 2;
}
