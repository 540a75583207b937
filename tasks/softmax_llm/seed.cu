// Naive row softmax, bf16 in and out: one block of 256 threads per row, three passes over the
// row in global memory (max, sum of exp(x - max), write exp(x - max) / sum), each pass a strided
// loop of scalar 2-byte loads followed by a shared-memory tree reduction. fp32 arithmetic.
#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>

#define THREADS 256 /* a power of two, for the tree reductions */

__global__ void softmax_kernel(const __nv_bfloat16 *logits, __nv_bfloat16 *probs,
                               int64_t vocab_size)
{
    __shared__ float partial[THREADS];
    const int tid = threadIdx.x;
    const __nv_bfloat16 *x = logits + (int64_t)blockIdx.x * vocab_size;
    __nv_bfloat16 *y = probs + (int64_t)blockIdx.x * vocab_size;

    float m = -INFINITY;
    for (int64_t j = tid; j < vocab_size; j += THREADS)
        m = fmaxf(m, __bfloat162float(x[j]));
    partial[tid] = m;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            partial[tid] = fmaxf(partial[tid], partial[tid + stride]);
        __syncthreads();
    }
    const float row_max = partial[0];
    __syncthreads();  // everyone has read partial[0] before it is reused

    float sum = 0.0f;
    for (int64_t j = tid; j < vocab_size; j += THREADS)
        sum += expf(__bfloat162float(x[j]) - row_max);
    partial[tid] = sum;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            partial[tid] += partial[tid + stride];
        __syncthreads();
    }
    const float row_sum = partial[0];

    for (int64_t j = tid; j < vocab_size; j += THREADS)
        y[j] = __float2bfloat16(expf(__bfloat162float(x[j]) - row_max) / row_sum);
}

extern "C" void softmax_llm(const __nv_bfloat16 *logits, __nv_bfloat16 *probs, int64_t batch_size,
                            int64_t vocab_size)
{
    if (batch_size <= 0)
        return;
    softmax_kernel<<<(unsigned int)batch_size, THREADS>>>(logits, probs, vocab_size);
}
