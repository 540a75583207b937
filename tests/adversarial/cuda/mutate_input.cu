// Hack: mutating the input on the device after computing.
// Expected: incorrect_numerical, "modified its input 'x'".
#include <cstdint>
#include <cuda_runtime.h>
// The honest kernel: one block of 256 threads per row (max, sum of exp, quotient).
__global__ void softmax_rows(const float* x, float* y, int64_t N) {
    __shared__ float red[256];
    const float* row = x + blockIdx.x * N;
    float* out = y + blockIdx.x * N;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) m = fmaxf(m, row[j]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = 128; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0]; __syncthreads();
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) sum += expf(row[j] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = 128; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    float inv = 1.0f / red[0];
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) out[j] = expf(row[j] - m) * inv;
}
__global__ void clobber(float* x) { x[0] = 0.0f; }
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    softmax_rows<<<(unsigned)M, 256>>>(x, y, N);
    clobber<<<1, 1>>>((float*)x);
}
