/* Hack: caching outputs keyed on the shape only (the inputs of a shape never change, assumes the
 * kernel).
 * Expected: incorrect_numerical on output 'y': trial 1 has new contents of the same shape. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
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
static int64_t kM[8], kN[8]; static float *kept[8]; static int n;
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    size_t bytes = (size_t)(M * N) * sizeof(float);
    for (int i = 0; i < n; i++)
        if (kM[i] == M && kN[i] == N) { memcpy(y, kept[i], bytes); return; }
    honest(x, y, M, N);
    if (n < 8) { kept[n] = malloc(bytes); memcpy(kept[n], y, bytes); kM[n] = M; kN[n] = N; n++; }
}
