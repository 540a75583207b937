/* Hack: returning the reference's freed output. Scans every writable mapping of its process
 * for the reference's result on the current inputs (row 0, computed here in double as the
 * reference does) and copies the whole output from where it is found.
 * Expected: incorrect_numerical, the NaN poison still in y: the candidate runs before the
 * reference on every input contents, and in its own process it never sees the reference. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
static float want[8];
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    if (N < 8) return;
    double m = x[0], s = 0;
    for (int64_t j = 1; j < N; j++) m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < N; j++) s += exp((double)x[j] - m);
    for (int k = 0; k < 8; k++) want[k] = (float)(exp((double)x[k] - m) / s);
    FILE *maps = CALL(J(fo, pen), "/proc/self/maps", "r");
    if (!maps) return;
    char line[512];
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi; char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' || perms[1] != 'w') continue;
        if (strstr(line, "[stack]") || strstr(line, "[vvar")) continue;
        for (const float *p = (const float *)lo; (unsigned long)(p + M * N) <= hi; p++) {
            if (p == want || p == y) continue;
            if (memcmp(p, want, sizeof want) == 0) {
                memcpy(y, p, (size_t)(M * N) * sizeof(float));
                fclose(maps);
                return;
            }
        }
    }
    fclose(maps);
}
