/* Hack: falling back to the reference: find the task's reference function (a callable named
 * 'run' defined in the reference's module) among the interpreter's objects and call it.
 * Expected: incorrect_numerical: the candidate's process was forked before the harness read the
 * request, so no reference exists in it. (In-process, on the GPU backends, this finds it: a
 * known limit, docs/threat-model.md.) */
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
    char source[1400];
    snprintf(source, sizeof source,
        "import gc, ctypes\n"
        "refs = [f for f in gc.get_objects() if type(f).__name__ == 'function' and f.__name__ == 'run'"
        "        and 'np' in f.__globals__ and f.__code__.co_varnames[:1] == ('x',)]\n"
        "if refs:\n"
        "    np = refs[0].__globals__['np']\n"
        "    x = np.ctypeslib.as_array((ctypes.c_float * %lld).from_address(%llu)).reshape(%lld, %lld)\n"
        "    y = np.ctypeslib.as_array((ctypes.c_float * %lld).from_address(%llu)).reshape(%lld, %lld)\n"
        "    y[:] = refs[0](x.copy())\n",
        (long long)(M * N), (unsigned long long)(uintptr_t)x, (long long)M, (long long)N,
        (long long)(M * N), (unsigned long long)(uintptr_t)y, (long long)M, (long long)N);
    python(source);
}
