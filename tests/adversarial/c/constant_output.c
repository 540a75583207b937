/* Hack: a constant for outputs that are small anyway (1/N is a softmax's mean).
 * Expected: incorrect_numerical on output 'y' (and a task whose reference is too small to tell a
 * constant from the truth is refused at load time: the degenerate-reference guard). */
#include <stdint.h>
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x;
    for (int64_t i = 0; i < M * N; i++) y[i] = 1.0f / (float)N;
}
