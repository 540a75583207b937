// Hack: a stream of its own through the CUDA driver API, declared by hand so that no
// `cudaStream...` name appears for the static checks, and the name hidden by a macro.
// Expected: rejected by the import check (backend cuda): the object imports cuStreamCreate.
// Without the check, the library would not even link: -z defs wants every symbol resolved by
// what it is linked with, and the driver library is not on the link line.
#include <cstdint>
#include <cuda_runtime.h>
#define J(a, b) a##b
extern "C" int J(cuStream, Create)(void** stream, unsigned int flags);
__global__ void softmax_rows(const float* x, float* y, int64_t N) {
    const float* row = x + blockIdx.x * N;
    float* out = y + blockIdx.x * N;
    if (threadIdx.x != 0) return;
    float m = -INFINITY, s = 0.0f;
    for (int64_t j = 0; j < N; ++j) m = fmaxf(m, row[j]);
    for (int64_t j = 0; j < N; ++j) s += expf(row[j] - m);
    for (int64_t j = 0; j < N; ++j) out[j] = expf(row[j] - m) / s;
}
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    static void* side = nullptr;
    if (!side) J(cuStream, Create)(&side, 1);
    softmax_rows<<<(unsigned)M, 32, 0, (cudaStream_t)side>>>(x, y, N);
}
