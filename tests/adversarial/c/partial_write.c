/* Hack: writing only part of the output (the first half of the rows).
 * Expected: incorrect_numerical, the unwritten rows still hold the NaN poison. */
#include <math.h>
#include <stdint.h>
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
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    honest(x, y, M / 2, N);
}
