// Hack: outputs cached on the device, keyed on the shape only (assuming a shape's inputs never
// change): the first call of a shape computes, later calls copy the kept result.
// Expected: incorrect_numerical on output 'y': trial 1 has new contents of the same shape.
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
extern "C" void softmax(const float* x, float* y, int64_t M, int64_t N) {
    static float* kept[8] = {};
    static int64_t shape[8][2] = {};
    size_t bytes = (size_t)(M * N) * sizeof(float);
    for (int i = 0; i < 8; ++i)
        if (kept[i] && shape[i][0] == M && shape[i][1] == N) {
            cudaMemcpy(y, kept[i], bytes, cudaMemcpyDeviceToDevice);
            return;
        }
    softmax_rows<<<(unsigned)M, 256>>>(x, y, N);
    for (int i = 0; i < 8; ++i)
        if (!kept[i]) {
            cudaMalloc(&kept[i], bytes);
            cudaMemcpy(kept[i], y, bytes, cudaMemcpyDeviceToDevice);
            shape[i][0] = M; shape[i][1] = N;
            return;
        }
}
