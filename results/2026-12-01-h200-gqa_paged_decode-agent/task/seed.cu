// Naive paged GQA decode: one block of 128 threads per (sequence, query head).
// The sequence's tokens (pages, page_size 1) are visited in tiles of 128: one warp per token
// computes a logit (each lane holds 4 of the 128 query elements, then a shuffle reduction),
// then every thread (one per output dimension) rescales its accumulator with the
// online-softmax update and adds the tile's p_j * v[j][d]. fp32 throughout.
// The 8 query heads that share a KV head each read its K and V again: no reuse.
#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>

#define NUM_QO_HEADS 32
#define NUM_KV_HEADS 4
#define GROUP (NUM_QO_HEADS / NUM_KV_HEADS)
#define HEAD_DIM 128
#define THREADS 128 /* one thread per output dimension */
#define WARPS (THREADS / 32)
#define TILE 128 /* tokens per tile */

__global__ void gqa_decode_kernel(const __nv_bfloat16 *q, const __nv_bfloat16 *k_cache,
                                  const __nv_bfloat16 *v_cache, const int32_t *kv_indptr,
                                  const int32_t *kv_indices, float sm_scale,
                                  __nv_bfloat16 *output, float *lse)
{
    __shared__ float p[TILE];
    __shared__ int32_t page[TILE];
    const int b = blockIdx.x / NUM_QO_HEADS;
    const int h = blockIdx.x % NUM_QO_HEADS;
    const int kv_head = h / GROUP;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;

    const __nv_bfloat16 *q_row = q + ((int64_t)b * NUM_QO_HEADS + h) * HEAD_DIM;
    float q_part[4];
    for (int i = 0; i < 4; i++)
        q_part[i] = __bfloat162float(q_row[lane * 4 + i]) * sm_scale;

    const int64_t start = kv_indptr[b];
    const int64_t end = kv_indptr[b + 1];
    float m_run = -INFINITY;  // running max of the logits (the same in every thread)
    float l_run = 0.0f;       // running sum of exp(logit - m_run)
    float acc = 0.0f;         // running sum of exp(logit - m_run) * v[j][tid]

    for (int64_t j0 = start; j0 < end; j0 += TILE) {
        const int count = (int)(end - j0 < TILE ? end - j0 : TILE);
        if (tid < count)
            page[tid] = kv_indices[j0 + tid];
        __syncthreads();

        for (int jj = warp; jj < count; jj += WARPS) {
            const __nv_bfloat16 *k_row =
                k_cache + ((int64_t)page[jj] * NUM_KV_HEADS + kv_head) * HEAD_DIM + lane * 4;
            float s = 0.0f;
            for (int i = 0; i < 4; i++)
                s += q_part[i] * __bfloat162float(k_row[i]);
            for (int offset = 16; offset > 0; offset >>= 1)
                s += __shfl_xor_sync(0xffffffffu, s, offset);
            if (lane == 0)
                p[jj] = s;
        }
        __syncthreads();

        float m_tile = -INFINITY;
        for (int jj = 0; jj < count; jj++)
            m_tile = fmaxf(m_tile, p[jj]);
        const float m_new = fmaxf(m_run, m_tile);
        const float correction = expf(m_run - m_new);  // 0 on the first tile (m_run = -inf)
        __syncthreads();  // everyone has read the logits before they are overwritten

        if (tid < count)
            p[tid] = expf(p[tid] - m_new);
        __syncthreads();

        float l_tile = 0.0f;
        float acc_tile = 0.0f;
        for (int jj = 0; jj < count; jj++) {
            const __nv_bfloat16 *v_row =
                v_cache + ((int64_t)page[jj] * NUM_KV_HEADS + kv_head) * HEAD_DIM;
            l_tile += p[jj];
            acc_tile += p[jj] * __bfloat162float(v_row[tid]);
        }
        l_run = l_run * correction + l_tile;
        acc = acc * correction + acc_tile;
        m_run = m_new;
        __syncthreads();  // the next tile overwrites p and page
    }

    const int64_t out_row = (int64_t)b * NUM_QO_HEADS + h;
    if (end > start) {
        output[out_row * HEAD_DIM + tid] = __float2bfloat16(acc / l_run);
        if (tid == 0)
            lse[out_row] = (m_run + logf(l_run)) * 1.4426950408889634f;  // natural -> base 2
    } else {
        output[out_row * HEAD_DIM + tid] = __float2bfloat16(0.0f);
        if (tid == 0)
            lse[out_row] = -INFINITY;
    }
}

extern "C" void gqa_paged_decode(const __nv_bfloat16 *q, const __nv_bfloat16 *k_cache,
                                 const __nv_bfloat16 *v_cache, const int32_t *kv_indptr,
                                 const int32_t *kv_indices, float sm_scale, __nv_bfloat16 *output,
                                 float *lse, int64_t batch_size, int64_t num_pages,
                                 int64_t len_indptr, int64_t num_kv_indices)
{
    (void)num_pages;
    (void)len_indptr;
    (void)num_kv_indices;
    if (batch_size <= 0)
        return;
    const unsigned int blocks = (unsigned int)(batch_size * NUM_QO_HEADS);
    gqa_decode_kernel<<<blocks, THREADS>>>(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale,
                                           output, lse);
}
