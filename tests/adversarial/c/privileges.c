/* Abuse (issue 19, item 4): what a worker started by root may do. It logs its credentials and
 * capabilities (/proc/self/status), tries real-time scheduling for itself (a SCHED_FIFO
 * spinner starves the harness and ksearch on its cores), then renames the machine to the name
 * it already has (harmless even where it succeeds). Before the fix, as root: every capability
 * (CapEff 000001fffeffffff), SCHED_FIFO granted, sethostname succeeded.
 * Expected: runtime_error, killed by SIGSYS at sethostname (seccomp); logged before: no
 * capability in any set, uid and gid 65534 when started as root, SCHED_FIFO refused. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
/* Logs on stderr (the static checks refuse the plain names of output). */
#define SAY(...) J(fpr, intf)(J(std, err), __VA_ARGS__)
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)y; (void)M; (void)N;
    char line[256];
    FILE *f = CALL(fopen, "/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Uid:", 4) || !strncmp(line, "Gid:", 4) || !strncmp(line, "Cap", 3) ||
            !strncmp(line, "NoNewPrivs:", 11))
            SAY("status %s", line);
    if (f) fclose(f);
    struct sched_param p = {1};
    int fifo = CALL(J(sched_set, scheduler), 0, SCHED_FIFO, &p);
    SAY("SCHED_FIFO %s\n", fifo == 0 ? "granted" : strerror(errno));
    struct sched_param o = {0};
    CALL(J(sched_set, scheduler), 0, SCHED_OTHER, &o);
    char name[256] = "";
    gethostname(name, sizeof name);
    SAY("renaming the machine\n");
    int r = CALL(J(sethost, name), name, strlen(name));
    SAY("sethostname %s\n", r == 0 ? "succeeded" : strerror(errno));
}
