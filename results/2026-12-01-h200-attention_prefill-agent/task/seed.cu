// Naive attention prefill: one block of 128 threads per (batch, head, query row).
// The row's keys are visited in tiles of 128: one warp per key computes a score (each lane
// holds 4 of the 128 query elements, then a shuffle reduction), then every thread (one per
// output dimension) rescales its accumulator with the online-softmax update and adds the
// tile's p_j * v[j][d]. fp32 throughout, the output rounded to fp16 once.
// No tensor cores, no reuse of K/V between query rows: every row streams its keys and values
// from L2, which is what makes it slow.
#include <cuda_fp16.h>
#include <stdint.h>
#include <math.h>

#define NUM_HEADS 32
#define HEAD_DIM 128
#define THREADS 128 /* one thread per output dimension */
#define WARPS (THREADS / 32)
#define TILE 128 /* keys per tile */

__global__ void attention_row_kernel(const __half *q, const __half *k, const __half *v, int causal,
                                     __half *out, int64_t seq_len, float scale)
{
    __shared__ float p[TILE];
    const int64_t row = blockIdx.x % seq_len;  // query index
    const int64_t bh = blockIdx.x / seq_len;   // batch * NUM_HEADS + head
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;

    const __half *q_row = q + (bh * seq_len + row) * HEAD_DIM;
    const __half *k_head = k + bh * seq_len * HEAD_DIM;
    const __half *v_head = v + bh * seq_len * HEAD_DIM;

    // This lane's 4 query elements, pre-scaled.
    float q_part[4];
    for (int i = 0; i < 4; i++)
        q_part[i] = __half2float(q_row[lane * 4 + i]) * scale;

    const int64_t n_keys = causal ? row + 1 : seq_len;
    float m_run = -INFINITY;  // running max of the scores (the same in every thread)
    float l_run = 0.0f;       // running sum of exp(score - m_run)
    float acc = 0.0f;         // running sum of exp(score - m_run) * v[j][tid]

    for (int64_t j0 = 0; j0 < n_keys; j0 += TILE) {
        const int count = (int)(n_keys - j0 < TILE ? n_keys - j0 : TILE);

        for (int jj = warp; jj < count; jj += WARPS) {
            const __half *k_row = k_head + (j0 + jj) * HEAD_DIM + lane * 4;
            float s = 0.0f;
            for (int i = 0; i < 4; i++)
                s += q_part[i] * __half2float(k_row[i]);
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
        __syncthreads();  // everyone has read the scores before they are overwritten

        if (tid < count)
            p[tid] = expf(p[tid] - m_new);
        __syncthreads();

        float l_tile = 0.0f;
        float acc_tile = 0.0f;
        for (int jj = 0; jj < count; jj++) {
            l_tile += p[jj];
            acc_tile += p[jj] * __half2float(v_head[(j0 + jj) * HEAD_DIM + tid]);
        }
        l_run = l_run * correction + l_tile;
        acc = acc * correction + acc_tile;
        m_run = m_new;
        __syncthreads();  // the next tile overwrites p
    }

    out[(bh * seq_len + row) * HEAD_DIM + tid] = __float2half(acc / l_run);
}

extern "C" void attention_prefill(const __half *q, const __half *k, const __half *v, int32_t causal,
                                  __half *out, int64_t batch_size, int64_t seq_len)
{
    const int64_t blocks = batch_size * NUM_HEADS * seq_len;
    if (blocks <= 0)
        return;
    const float scale = 1.0f / sqrtf((float)HEAD_DIM);
    attention_row_kernel<<<(unsigned int)blocks, THREADS>>>(q, k, v, causal, out, seq_len, scale);
}
