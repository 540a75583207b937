/* Hack: patching the timer. Replaces time.perf_counter_ns, and every perf_counter_ns the
 * harness's modules imported, by a counter that advances 1 ns per read, then does its honest
 * (and deliberately slow: a busy loop of about a millisecond) work.
 * Expected: passed, with a candidate median that still shows the slow work: the candidate's
 * clock is read by the worker through a reference taken before any candidate code ran, and the
 * harness's round trips bound it. (In-process the patch reaches the timing loop: a known limit,
 * caught there only by the static checks.) */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
/* The interpreter that hosts the candidate, reached through dlsym: run Python source with the
 * GIL held (ctypes releases it around the call). Returns PyRun_SimpleString's result, or -2
 * when the symbols are not there. */
#include <dlfcn.h>
static int python(const char *source) {
    void *(*ensure)(void) = (void *(*)(void))CALL(J(dl, sym), RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(void *) = (void (*)(void *))CALL(J(dl, sym), RTLD_DEFAULT, "PyGILState_Release");
    int (*run)(const char *) = (int (*)(const char *))CALL(J(dl, sym), RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) return -2;
    void *state = ensure();
    int rc = run(source);
    release(state);
    return rc;
}
static void honest(const float *x, float *y, int64_t M, int64_t N) {
    for (int64_t i = 0; i < M; i++) {
        const float *r = x + i * N; float *o = y + i * N;
        float m = r[0];
        for (int64_t j = 1; j < N; j++) m = r[j] > m ? r[j] : m;
        double s = 0;
        for (int64_t j = 0; j < N; j++) { o[j] = expf(r[j] - m); s += o[j]; }
        for (int64_t j = 0; j < N; j++) o[j] = (float)(o[j] / s);
    }
}
static int patched;
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    if (!patched) {
        patched = 1;
        python("import sys, time\n"
               "tick = [0]\n"
               "def fake():\n"
               "    tick[0] += 1\n"
               "    return tick[0]\n"
               "time.perf_counter_ns = fake\n"
               "for m in list(sys.modules.values()):\n"
               "    if getattr(m, 'perf_counter_ns', None) is not None:\n"
               "        try:\n"
               "            m.perf_counter_ns = fake\n"
               "        except Exception:\n"
               "            pass\n");
    }
    for (volatile long spin = 0; spin < 3000000; spin++) {}
    honest(x, y, M, N);
}
