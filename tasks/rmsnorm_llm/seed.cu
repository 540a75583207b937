// Naive RMSNorm, bf16 in and out: one block of 256 threads per row. Each thread sums the squares
// of a strided slice of the row in fp32, a shared-memory tree adds the 256 partial sums, then
// every thread writes its slice: x * rsqrt(mean + eps) * weight, rounded to bf16 once.
// Scalar 2-byte loads and a second pass over the row from global memory: simple, not fast.
#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>

#define THREADS 256 /* a power of two, for the tree reduction */
#define EPS 1e-5f

__global__ void rmsnorm_kernel(const __nv_bfloat16 *hidden_states, const __nv_bfloat16 *weight,
                               __nv_bfloat16 *output, int64_t hidden_size)
{
    __shared__ float partial[THREADS];
    const int tid = threadIdx.x;
    const __nv_bfloat16 *x = hidden_states + (int64_t)blockIdx.x * hidden_size;
    __nv_bfloat16 *y = output + (int64_t)blockIdx.x * hidden_size;

    float sum = 0.0f;
    for (int64_t j = tid; j < hidden_size; j += THREADS) {
        const float v = __bfloat162float(x[j]);
        sum += v * v;
    }
    partial[tid] = sum;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            partial[tid] += partial[tid + stride];
        __syncthreads();
    }
    const float inv_rms = rsqrtf(partial[0] / (float)hidden_size + EPS);

    for (int64_t j = tid; j < hidden_size; j += THREADS)
        y[j] = __float2bfloat16(__bfloat162float(x[j]) * inv_rms * __bfloat162float(weight[j]));
}

extern "C" void rmsnorm_llm(const __nv_bfloat16 *hidden_states, const __nv_bfloat16 *weight,
                            __nv_bfloat16 *output, int64_t batch_size, int64_t hidden_size)
{
    if (batch_size <= 0)
        return;
    rmsnorm_kernel<<<(unsigned int)batch_size, THREADS>>>(hidden_states, weight, output,
                                                          hidden_size);
}
