/* Abuse: an infinite loop.
 * Expected: timeout at the evaluation's wall-clock limit; the process group is killed. */
#include <stdint.h>
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)y; (void)M; (void)N;
    for (volatile int spin = 1; spin;) {}
}
