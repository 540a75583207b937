// Hostile: a kernel that never ends (the flag it waits for is never set).
// Expected: timeout at the task's limit, the process group killed; the next evaluation on the
// same GPU passes (bench/adversarial_gpu.sh evaluates honest.cu after it).
#include <cstdint>
#include <cuda_runtime.h>
__global__ void spin(volatile int* never, float* y) {
    while (*never == 0) {
    }
    y[0] = 0.0f;
}
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    (void)M; (void)N;
    // The flag: a zeroed device int that nothing ever writes.
    static int* flag = nullptr;
    if (!flag) { cudaMalloc(&flag, sizeof(int)); cudaMemset(flag, 0, sizeof(int)); }
    spin<<<1, 1>>>(flag, y);
    (void)x;
}
