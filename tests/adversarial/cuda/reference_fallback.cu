// Known limit (docs/threat-model.md): on the GPU backends the candidate shares the harness's
// process, so native code can reach the embedded interpreter and call the task's reference
// (torch, on the device) for its output. The static checks refuse the plain spelling (dlsym,
// Py*); hidden by macros it runs.
// Expected today: passed (a known limit, recorded by bench/adversarial_gpu.sh until the GPU
// backends get a worker process).
#include <dlfcn.h>
#include <cstdio>
#include <cstdint>
// Hides names from the static checks (regular expressions), so the runtime defence is tested.
#define J(a, b) a##b
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    auto ensure = (void* (*)())J(dl, sym)(RTLD_DEFAULT, "PyGILState_Ensure");
    auto release = (void (*)(void*))J(dl, sym)(RTLD_DEFAULT, "PyGILState_Release");
    auto run = (int (*)(const char*))J(dl, sym)(RTLD_DEFAULT, "PyRun_SimpleString");
    if (!ensure || !release || !run) return;
    char source[1600];
    snprintf(source, sizeof source,
        "import gc, torch\n"
        "refs = [f for f in gc.get_objects() if type(f).__name__ == 'function' and f.__name__ == 'run'"
        "        and 'torch' in f.__globals__ and f.__code__.co_varnames[:1] == ('x',)]\n"
        "class _Raw:\n"
        "    def __init__(self, ptr, shape):\n"
        "        self.__cuda_array_interface__ = {'shape': shape, 'typestr': '<f4',"
        " 'data': (ptr, False), 'version': 2}\n"
        "if refs:\n"
        "    x = torch.as_tensor(_Raw(%llu, (%lld, %lld)), device='cuda')\n"
        "    y = torch.as_tensor(_Raw(%llu, (%lld, %lld)), device='cuda')\n"
        "    y.copy_(refs[0](x))\n",
        (unsigned long long)(uintptr_t)x, (long long)M, (long long)N,
        (unsigned long long)(uintptr_t)y, (long long)M, (long long)N);
    void* state = ensure();
    run(source);
    release(state);
}
