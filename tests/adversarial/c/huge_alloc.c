/* Abuse: a 100 GB allocation, used without a check.
 * Expected: runtime_error (SIGSEGV): the allocation fails under the evaluation's address-space
 * limit, so nothing of the machine's memory is taken. */
#include <stdint.h>
#include <stdlib.h>
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)M; (void)N;
    char *p = malloc((size_t)100 << 30);
    for (size_t i = 0; i < ((size_t)100 << 30); i += 4096) p[i] = 1;
    y[0] = p[0];
}
