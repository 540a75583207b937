/* Hack: computing on another thread, after the call has returned (so the work is not timed).
 * Expected: incorrect_numerical, y still holds the poison when the call returns: the outputs are
 * taken as the call left them, and the candidate's process is stopped meanwhile. */
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
static struct { const float *x; float *y; int64_t M, N; } job;
static void *later(void *arg) {
    for (volatile long spin = 0; spin < 2000000; spin++) {}
    honest(job.x, job.y, job.M, job.N);
    return arg;
}
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    job.x = x; job.y = y; job.M = M; job.N = N;
    pthread_t t;
    CALL(J(pthread_, create), &t, 0, later, 0);
    pthread_detach(t);
}
