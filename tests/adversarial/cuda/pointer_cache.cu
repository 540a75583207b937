// Hack: caching the output keyed on the input pointer and shape (a device-to-device copy when
// they repeat, as the timing stage's buffers do).
// Expected: incorrect_numerical "during timing (call 1 ... are results cached".
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
static const float* kx; static int64_t kM, kN; static float* kept;
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    size_t bytes = (size_t)(M * N) * sizeof(float);
    if (kept && x == kx && M == kM && N == kN) { cudaMemcpy(y, kept, bytes, cudaMemcpyDeviceToDevice); return; }
    softmax_rows<<<(unsigned)M, 256>>>(x, y, N);
    if (kept) cudaFree(kept);
    cudaMalloc(&kept, bytes);
    cudaMemcpy(kept, y, bytes, cudaMemcpyDeviceToDevice);
    kx = x; kM = M; kN = N;
}
