/* Hack: busy-waiting to skew the clock: threads that keep spinning after the call returns, to
 * slow the reference down while it is timed (a higher speedup).
 * Expected: passed; the spinners never run while the reference runs: the candidate's process
 * stops itself (SIGSTOP, every thread) after each call until the harness sends the next one
 * (harness/tests/test_adversarial.py checks the threads' states from inside the reference).
 * The burst of its own calls can still slow the reference that follows on a shared machine
 * (seen: 5x on the 2-core development VM, for a joined multi-threaded call too), which no
 * stop can undo. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
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
#define SPINNERS 8
static void *spin(void *arg) { for (volatile long i = 0;; i++) {} return arg; }
static int started;
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    if (!started++)
        for (int i = 0; i < SPINNERS; i++) { pthread_t t; CALL(J(pthread_, create), &t, 0, spin, 0); }
    honest(x, y, M, N);
}
