/* Abuse: reading a file of the machine through the compiler, which runs outside the candidate's
 * sandbox and quotes an included file's lines in its error messages (the log, which ksearch
 * stores and may show to the model). The path is filled in by the test; the same through a
 * macro, '#define F "..."' then '#include F', is refused as well.
 * Expected: rejected by the static checks, before the compiler runs. */
#include <stdint.h>
#include "@PATH@"
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)y; (void)M; (void)N;
}
