/* Abuse: filling the private temp dir (TMPDIR) with a large file.
 * Expected: runtime_error, killed by SIGSYS when it opens the file for writing (the candidate's
 * process writes no file; the harness's own writes are bounded by RLIMIT_FSIZE). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)y; (void)M; (void)N;
    char path[4096];
    snprintf(path, sizeof path, "%s/fill", CALL(J(get, env), "TMPDIR"));
    FILE *f = CALL(J(fo, pen), path, "w");
    static char block[1 << 20];
    while (f && fwrite(block, 1, sizeof block, f) == sizeof block) {}
}
