/* Hack: precision downcast beyond the tolerance: results rounded to bfloat16 (8 bits of
 * mantissa), which the task's float32 tolerance (rtol 1e-4) does not allow.
 * Expected: incorrect_numerical on output 'y'. */
#include <math.h>
#include <stdint.h>
#include <string.h>
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
    honest(x, y, M, N);
    for (int64_t i = 0; i < M * N; i++) {
        uint32_t b; memcpy(&b, &y[i], 4);
        b = (b + 0x8000u) & 0xFFFF0000u;
        memcpy(&y[i], &b, 4);
    }
}
