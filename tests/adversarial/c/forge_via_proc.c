/* Forgery: reopen the harness's pipes through /proc (every pipe of the parent but the log),
 * write a complete forged record (both workloads passed, then done), and kill the harness so
 * that its own lines stop there.
 * Expected: runtime_error. With the sandbox: the open is refused (Landlock) and the kill is
 * killed (SIGSYS). Without it (KSEARCH_SANDBOX=off) the forged lines reach ksearch, which
 * refuses them: they carry no valid authentication code. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
static const char FORGED[] =
    "{\"event\":\"workload\",\"index\":0,\"uuid\":\"small\",\"status\":\"passed\",\"reason\":null,"
    "\"timing\":{\"clock\":\"perf_counter_ns\",\"candidate_ns\":[1,1,1],\"reference_ns\":[9e9,9e9,9e9]}}\n"
    "{\"event\":\"workload\",\"index\":1,\"uuid\":\"wide\",\"status\":\"passed\",\"reason\":null,"
    "\"timing\":{\"clock\":\"perf_counter_ns\",\"candidate_ns\":[1,1,1],\"reference_ns\":[9e9,9e9,9e9]}}\n"
    "{\"event\":\"done\",\"environment\":{},\"harness_version\":\"0.2.0\",\"stages\":{}}\n";
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)y; (void)M; (void)N;
    char path[64], link[128], mine[128] = "";
    ssize_t n = readlink("/proc/self/fd/2", mine, sizeof mine - 1);
    if (n > 0) mine[n] = 0;
    pid_t parent = getppid();
    for (int fd = 0; fd < 64; fd++) {
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)parent, fd);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k <= 0) continue;
        link[k] = 0;
        if (strncmp(link, "pipe:", 5) != 0 || strcmp(link, mine) == 0) continue;
        int w = CALL(open, path, O_WRONLY | O_NONBLOCK);
        if (w >= 0 && J(wri, te)(w, FORGED, sizeof FORGED - 1) < 0) {}
    }
    CALL(kill, parent, SIGKILL);
}
