/* Hack: caching outputs keyed on the input pointer and shape. The correctness trials get fresh
 * addresses (misses); timing reuses its buffers, so every timed call after the first would be
 * served from the cache.
 * Expected: incorrect_numerical "during timing (call 1, ...: are results cached, or work
 * skipped, on repeated calls?": every call gets new contents and is checked. */
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
static const float *kx; static int64_t kM, kN; static float *kept;
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    size_t bytes = (size_t)(M * N) * sizeof(float);
    if (kept && x == kx && M == kM && N == kN) { memcpy(y, kept, bytes); return; }
    honest(x, y, M, N);
    free(kept); kept = malloc(bytes); memcpy(kept, y, bytes);
    kx = x; kM = M; kN = N;
}
