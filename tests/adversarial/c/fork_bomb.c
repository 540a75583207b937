/* Abuse: a fork bomb.
 * Expected: runtime_error, killed by SIGSYS at the first fork (seccomp), at once and with no
 * process left behind. */
#include <stdint.h>
#include <unistd.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)y; (void)M; (void)N;
    for (;;) CALL(fork);
}
