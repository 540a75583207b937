/* Abuse (issue 19, item 7): the candidate kills its own process with SIGKILL, the signal the
 * out-of-memory killer sends.
 * Expected: runtime_error, the reason saying the candidate's code sent it (the machine's count
 * of out-of-memory kills did not move), not "possibly out of memory". */
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)y; (void)M; (void)N;
    CALL(kill, getpid(), SIGKILL);
}
