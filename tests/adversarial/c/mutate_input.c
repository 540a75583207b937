/* Hack: mutating the inputs. Computes the right answer, then zeroes x[0] (const cast away), as
 * a kernel that uses its input as scratch space would.
 * Expected: incorrect_numerical, "modified its input 'x'". */
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
    honest(x, y, M, N);
    ((float *)x)[0] = 0.0f;
}
