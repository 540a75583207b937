/* Abuse: reading another run's files (the path of a file outside the evaluation is filled in
 * by the test). Computes the right answer only when the file could be read.
 * Expected: incorrect_numerical (the open is refused: Landlock); with KSEARCH_SANDBOX=off it
 * passes, which shows what the layer stops. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
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
    FILE *f = CALL(J(fo, pen), "@PATH@", "r");
    if (!f) return;
    fclose(f);
    honest(x, y, M, N);
}
