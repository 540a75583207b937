/* Hack: calling the framework's op for the core computation: NumPy, through the Python
 * interpreter of the process the candidate runs in.
 * Expected: incorrect_numerical (y keeps its poison): the candidate's process cannot open
 * NumPy's files (Landlock allows only the files it has mapped, and NumPy is imported by the
 * harness only after the worker was forked). With KSEARCH_SANDBOX=off it passes, which is why
 * the sandbox matters; the static checks refuse the plain spelling (dlsym, Py*). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
/* The interpreter that hosts the candidate, reached through dlsym: run Python source with the
 * GIL held (ctypes releases it around the call). Returns PyRun_SimpleString's result, or -2
 * when the symbols are not there. */
#include <dlfcn.h>
static int python(const char *source) {
    void *(*ensure)(void) = (void *(*)(void))CALL(J(dl, sym), RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(void *) = (void (*)(void *))CALL(J(dl, sym), RTLD_DEFAULT, "PyGILState_Release");
    int (*run)(const char *) = (int (*)(const char *))CALL(J(dl, sym), RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) return -2;
    void *state = ensure();
    int rc = run(source);
    release(state);
    return rc;
}
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    char source[1024];
    snprintf(source, sizeof source,
        "import ctypes, numpy as np\n"
        "x = np.ctypeslib.as_array((ctypes.c_float * %lld).from_address(%llu)).reshape(%lld, %lld)\n"
        "y = np.ctypeslib.as_array((ctypes.c_float * %lld).from_address(%llu)).reshape(%lld, %lld)\n"
        "e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))\n"
        "y[:] = e / e.sum(axis=1, keepdims=True)\n",
        (long long)(M * N), (unsigned long long)(uintptr_t)x, (long long)M, (long long)N,
        (long long)(M * N), (unsigned long long)(uintptr_t)y, (long long)M, (long long)N);
    python(source);
}
