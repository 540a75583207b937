// Hack: a constant for outputs that are small anyway (1/N, a softmax row's mean), on the device.
// Expected: incorrect_numerical on output 'y' (the task's per-element relative tolerance).
#include <cstdint>
__global__ void fill(float* y, int64_t n, float value) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = value;
}
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    (void)x;
    fill<<<(unsigned)((M * N + 255) / 256), 256>>>(y, M * N, 1.0f / (float)N);
}
