/* Makes changes in a loop while a fast interval timer interrupts it with an SA_RESTART
 * handler, and reports any change that failed: a change made once by the agent and again
 * by the restarted call shows up as EEXIST (mkdir, link, symlink) or ENOENT (rmdir,
 * rename, unlink). Usage: restarted_changes DIR ROUNDS INTERVAL_US */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t ticks;
static void tick(int sig) { (void)sig; ticks++; }

static int check(int rc, const char *what, const char *path) {
    if (rc != 0) {
        printf("%s %s: %s\n", what, path, strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DIR ROUNDS INTERVAL_US\n", argv[0]);
        return 2;
    }
    char d[4096], e[4096], f[4096], g[4096];
    snprintf(d, sizeof d, "%s/d", argv[1]);
    snprintf(e, sizeof e, "%s/e", argv[1]);
    snprintf(f, sizeof f, "%s/d/f", argv[1]);
    snprintf(g, sizeof g, "%s/d/g", argv[1]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tick;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    long interval = atol(argv[3]);
    struct itimerval it = {{0, interval}, {0, interval}};
    setitimer(ITIMER_REAL, &it, NULL);
    int failures = 0, rounds = atoi(argv[2]);
    for (int i = 0; i < rounds && failures < 5; i++) {
        failures += check(mkdir(d, 0755), "mkdir", d);
        failures += check(symlink("target", f), "symlink", f);
        failures += check(rename(f, g), "rename", f);
        failures += check(link(g, f), "link", g);
        failures += check(unlink(f), "unlink", f);
        failures += check(unlink(g), "unlink", g);
        failures += check(rename(d, e), "rename", d);
        failures += check(rmdir(e), "rmdir", e);
    }
    it.it_value.tv_usec = it.it_interval.tv_usec = 0;
    setitimer(ITIMER_REAL, &it, NULL);
    printf("%d failures, %d signals\n", failures, (int)ticks);
    return failures != 0;
}
