// Split-KV paged GQA decode on tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate).
// One block per (chunk of a sequence, kv head); the block owns the 8 query heads of its kv head.
// Each warp independently processes 16-token groups (group w, w+WARPS, ...) of the chunk with its own
// online softmax state: K/V fragments are loaded straight from global memory into registers
// (double buffered: the next group's loads are in flight while the current one is computed).
//   QK:  S[16 x 8 tok] = Q[16 (8 heads + 8 zero rows) x 128] * K^T   (2 n-tiles, 8 k-steps)
//   PV:  O^T[128 dims x 8 heads] = V^T[dims x 16 tok] * P^T[16 tok x 8 heads]
// Warps are merged through shared memory; a single-chunk sequence is finalised directly, otherwise
// the partial (m, l, o) goes to a static __device__ scratch buffer and the last block of the
// (sequence, kv head) merges all chunks and resets its arrival counter (self-cleaning).
// Work mapping: linear block id w = blockIdx.x, kv head = w & 3, flat work id c = w >> 2 (the four
// kv-head blocks of one (sequence, chunk) are adjacent in launch order and run together); c is mapped
// to (sequence, chunk) by a device-side scan of ceil(n_b / C) over kv_indptr. The chunk length C is
// sized on the host from the int64 axes only (no device read) so that the whole grid is about WAVES
// waves: C = roundup16(max(MIN_CHUNK, ceil(N / max(1, 132 * BPSM * WAVES / 4 - batch)))), grid =
// 4 * (ceil(N / C) + batch) (an upper bound on sum_b ceil(n_b / C); surplus blocks exit at once).
// The ceil(n_b / C) chunks of one sequence are balanced: each gets roundup16(ceil(n_b / count)) tokens.
// 4-warp blocks, two resident per SM (BPSM): a wave is 264 blocks, so b64 (256 blocks) is one wave.
// Host path: exactly one kernel launch per call (per slice of SLICE_B sequences), no other CUDA call.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

#define WARPS 4  // ksearch: knob values=[4, 8]
#define BPSM (WARPS == 4 ? 2 : 1)  /* resident blocks per SM (launch bounds and one-wave sizing) */
#define WAVES 1  // ksearch: knob values=[1, 2]
#define MIN_CHUNK 256  // ksearch: knob values=[256, 512, 1024]
#define P_SPLIT 1  // ksearch: knob values=[0, 1]
#define PAR_MERGE 0  // 1: batched single-pass last-block merge; 0: candidate 33's two-loop merge
#define NUM_QO_HEADS 32
#define NUM_KV_HEADS 4
#define GROUP 8
#define HEAD_DIM 128
#define THREADS (WARPS * 32)
#define ELEMS (GROUP * HEAD_DIM / THREADS)  // merge: output elements per thread
#define TPH (HEAD_DIM / ELEMS)              // merge: threads per head
#define NUM_SMS 132
#define MAX_SLOTS 2048
#define SLICE_B 1024                        // sequences per launch (only batches > 1024 need several)
#define MAX_COUNTERS (SLICE_B * NUM_KV_HEADS)
#define MERGE_BATCH 8                       // merge: partial chunks loaded per batch
#define FULL 0xffffffffu

static_assert(ELEMS % 4 == 0, "merge works on float4");

__device__ float4 g_part_o[(size_t)MAX_SLOTS * NUM_QO_HEADS * (HEAD_DIM / 4)];
__device__ float2 g_part_ml[(size_t)MAX_SLOTS * NUM_QO_HEADS];
__device__ int g_counter[MAX_COUNTERS];  // per (sequence, kv head): chunks finished; reset by the last one

// Register fragments of one 16-token group for lane (g = lane/4, t = lane%4).
struct Frag {
    uint4 k[2][4];  // K of token base+8n+g, dims 32P+8t .. 32P+8t+7
    uint4 v[4][2];  // V of tokens base+{2t, 2t+1, 8+2t, 9+2t}, dims 8g..8g+7 and 64+8g..64+8g+7
};

__device__ __forceinline__ float bf_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ uint32_t pack_bf16(float a, float b)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&h);
}
__device__ __forceinline__ uint32_t u4w(const uint4 &u, int w)
{
    return w == 0 ? u.x : (w == 1 ? u.y : (w == 2 ? u.z : u.w));
}
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ int num_chunks_of(int len, int chunk_len)
{
    return len > 0 ? (len + chunk_len - 1) / chunk_len : 1;  // an empty sequence still gets one block
}

// page indices of the 6 token rows this lane loads for the group starting at base (-1: past the end)
__device__ __forceinline__ void load_idx(int (&pi)[6], const int32_t *__restrict__ kv_indices, int base,
                                         int cend, int g, int t)
{
    const int tk[6] = {base + g, base + 8 + g, base + 2 * t, base + 2 * t + 1, base + 8 + 2 * t, base + 9 + 2 * t};
#pragma unroll
    for (int j = 0; j < 6; j++)
        pi[j] = (tk[j] < cend) ? __ldg(kv_indices + tk[j]) : -1;
}

__device__ __forceinline__ void load_kv(Frag &f, const int (&pi)[6], const __nv_bfloat16 *__restrict__ k_cache,
                                        const __nv_bfloat16 *__restrict__ v_cache, int gkv, int g, int t)
{
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int n = 0; n < 2; n++) {
        const int pg = pi[n];
        if (pg >= 0) {
            const uint4 *src =
                reinterpret_cast<const uint4 *>(k_cache + ((size_t)pg * NUM_KV_HEADS + gkv) * HEAD_DIM + 8 * t);
#pragma unroll
            for (int P = 0; P < 4; P++)
                f.k[n][P] = __ldg(src + 4 * P);
        } else {
#pragma unroll
            for (int P = 0; P < 4; P++)
                f.k[n][P] = z;
        }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int pg = pi[2 + j];
        if (pg >= 0) {
            const uint4 *src =
                reinterpret_cast<const uint4 *>(v_cache + ((size_t)pg * NUM_KV_HEADS + gkv) * HEAD_DIM + 8 * g);
            f.v[j][0] = __ldg(src);
            f.v[j][1] = __ldg(src + 8);
        } else {
            f.v[j][0] = z;
            f.v[j][1] = z;
        }
    }
}

// one 16-token group: QK on tensor cores, online softmax (log2 domain), PV on tensor cores
__device__ __forceinline__ void compute_group(const Frag &f, const uint4 (&qa)[4], float (&acc)[8][4],
                                              float &m_run, float &l_part, int base, int cend, int t, float sc)
{
    float s0[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float s1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int P = 0; P < 4; P++) {
        mma16816(s0, qa[P].x, 0u, qa[P].y, 0u, f.k[0][P].x, f.k[0][P].y);
        mma16816(s1, qa[P].x, 0u, qa[P].y, 0u, f.k[1][P].x, f.k[1][P].y);
        mma16816(s0, qa[P].z, 0u, qa[P].w, 0u, f.k[0][P].z, f.k[0][P].w);
        mma16816(s1, qa[P].z, 0u, qa[P].w, 0u, f.k[1][P].z, f.k[1][P].w);
    }
    // this lane: head g, tokens base+2t, base+2t+1 (s0[0..1]) and base+8+2t, base+9+2t (s1[0..1])
    const int tk = base + 2 * t;
    const float x0 = (tk < cend) ? s0[0] * sc : -INFINITY;
    const float x1 = (tk + 1 < cend) ? s0[1] * sc : -INFINITY;
    const float x2 = (tk + 8 < cend) ? s1[0] * sc : -INFINITY;
    const float x3 = (tk + 9 < cend) ? s1[1] * sc : -INFINITY;
    float mx = fmaxf(fmaxf(x0, x1), fmaxf(x2, x3));
    mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 2));
    const float mnew = fmaxf(m_run, mx);  // finite: token base is valid (lane t = 0 of every quad)
    const float corr = exp2f(m_run - mnew);  // 0 on the first group
    const float p0 = exp2f(x0 - mnew);
    const float p1 = exp2f(x1 - mnew);
    const float p2 = exp2f(x2 - mnew);
    const float p3 = exp2f(x3 - mnew);
    l_part = fmaf(l_part, corr, (p0 + p1) + (p2 + p3));
    m_run = mnew;
    // accumulators hold heads 2t (cols 0, 2) and 2t+1 (cols 1, 3): their corrections live in lanes 8t, 8t+4
    const float c_lo = __shfl_sync(FULL, corr, 8 * t);
    const float c_hi = __shfl_sync(FULL, corr, 8 * t + 4);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        acc[i][0] *= c_lo;
        acc[i][1] *= c_hi;
        acc[i][2] *= c_lo;
        acc[i][3] *= c_hi;
    }
    const uint32_t ph0 = pack_bf16(p0, p1);
    const uint32_t ph1 = pack_bf16(p2, p3);
#if P_SPLIT
    const uint32_t pl0 = pack_bf16(p0 - bf_lo(ph0), p1 - bf_hi(ph0));
    const uint32_t pl1 = pack_bf16(p2 - bf_lo(ph1), p3 - bf_hi(ph1));
#endif
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int w = i >> 1;
        const unsigned sel = (i & 1) ? 0x7632u : 0x5410u;
        // A = V^T: rows dims (8g+i | 64+8g+i), cols tokens (2t, 2t+1 | 8+2t, 9+2t)
        const uint32_t a0 = __byte_perm(u4w(f.v[0][0], w), u4w(f.v[1][0], w), sel);
        const uint32_t a1 = __byte_perm(u4w(f.v[0][1], w), u4w(f.v[1][1], w), sel);
        const uint32_t a2 = __byte_perm(u4w(f.v[2][0], w), u4w(f.v[3][0], w), sel);
        const uint32_t a3 = __byte_perm(u4w(f.v[2][1], w), u4w(f.v[3][1], w), sel);
        mma16816(acc[i], a0, a1, a2, a3, ph0, ph1);
#if P_SPLIT
        mma16816(acc[i], a0, a1, a2, a3, pl0, pl1);
#endif
    }
}

// grid: x = flat chunk id * 4 + kv head (chunks of chunk_len tokens over the slice's sequences).
__global__ void __launch_bounds__(THREADS, BPSM)
gqa_split_kernel(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k_cache,
                 const __nv_bfloat16 *__restrict__ v_cache, const int32_t *__restrict__ kv_indptr,
                 const int32_t *__restrict__ kv_indices, float scale_log2,
                 __nv_bfloat16 *__restrict__ output, float *__restrict__ lse, int batch, int chunk_len)
{
    __shared__ __align__(16) float s_o[WARPS][GROUP][HEAD_DIM];
    __shared__ float s_m[WARPS][GROUP];
    __shared__ float s_l[WARPS][GROUP];
    __shared__ int s_info[8];

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int gkv = (int)(blockIdx.x & 3);   // the 4 kv-head blocks of a chunk are adjacent

    const int cid = (int)(blockIdx.x >> 2);
    // ---- map the flat chunk id to (sequence, chunk within the sequence): 128 sequences per pass ----
    if (warp == 0) {
        if (lane == 0)
            s_info[0] = -1;
        __syncwarp();
        int basec = 0;
        for (int b0 = 0; b0 < batch; b0 += 128) {
            const int bl = b0 + 4 * lane;
            int ip[5];
#pragma unroll
            for (int i = 0; i < 5; i++)
                ip[i] = (bl + i <= batch) ? __ldg(kv_indptr + bl + i) : 0;
            int cnt[4];
            int sum = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                cnt[i] = (bl + i < batch) ? num_chunks_of(ip[i + 1] - ip[i], chunk_len) : 0;
                sum += cnt[i];
            }
            int inc = sum;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const int v = __shfl_up_sync(FULL, inc, o);
                if (lane >= o)
                    inc += v;
            }
            const int total = __shfl_sync(FULL, inc, 31);
            if (cid < basec + total) {  // warp-uniform
                const int excl = basec + inc - sum;
                if (cid >= excl && cid < excl + sum) {  // exactly one lane owns it
                    int run = excl;
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        if (cid >= run && cid < run + cnt[i]) {
                            s_info[0] = bl + i;
                            s_info[1] = cid - run;
                            s_info[2] = cnt[i];
                            s_info[3] = ip[i];
                            s_info[4] = ip[i + 1];
                        }
                        run += cnt[i];
                    }
                }
                break;
            }
            basec += total;
        }
    }
    __syncthreads();
    const int b = s_info[0];
    if (b < 0)
        return;
    const int c = s_info[1];
    const int nchunks = s_info[2];
    const int seq_start = s_info[3];
    const int seq_end = s_info[4];
    // balanced split: the ceil(n_b / C) chunks of a sequence get equal lengths (rounded up to 16 tokens)
    // instead of (C, C, ..., short tail), so the longest block of the wave is as short as possible.
    // The chunk count (and so the merge's arrival count and the grid bound) is unchanged; a chunk
    // that starts past the end (possible only for very long sequences) is empty and merges with weight 0.
    const int seq_len = seq_end - seq_start;
    const int chunk_b = (nchunks > 1) ? ((((seq_len + nchunks - 1) / nchunks) + 15) & ~15) : chunk_len;
    const int slot_first = cid - c;
    const int slot_id = cid;
    const int cstart = seq_start + c * chunk_b;
    const int cend = min(seq_end, cstart + chunk_b);
    const int ngroups = (cend - cstart + 15) >> 4;

    const int g = lane >> 2;
    const int t = lane & 3;
    const int qh0 = gkv * GROUP;

    // q fragments (A operand, rows = heads): head g, dims 32P+8t .. 32P+8t+7
    uint4 qa[4];
    {
        const uint4 *qrow =
            reinterpret_cast<const uint4 *>(q + ((size_t)b * NUM_QO_HEADS + qh0 + g) * HEAD_DIM + 8 * t);
#pragma unroll
        for (int P = 0; P < 4; P++)
            qa[P] = __ldg(qrow + 4 * P);
    }

    float acc[8][4];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[i][e] = 0.0f;
    float m_run = -INFINITY;
    float l_part = 0.0f;

    // ---- main loop: groups warp, warp+WARPS, ...; two register buffers ----
    {
        Frag fa, fb;
        int pi[6];
        int cur = warp;
        if (cur < ngroups) {
            load_idx(pi, kv_indices, cstart + 16 * cur, cend, g, t);
            load_kv(fa, pi, k_cache, v_cache, gkv, g, t);
            if (cur + WARPS < ngroups)
                load_idx(pi, kv_indices, cstart + 16 * (cur + WARPS), cend, g, t);
        }
        while (cur < ngroups) {
            int nxt = cur + WARPS;
            if (nxt < ngroups) {
                load_kv(fb, pi, k_cache, v_cache, gkv, g, t);
                if (nxt + WARPS < ngroups)
                    load_idx(pi, kv_indices, cstart + 16 * (nxt + WARPS), cend, g, t);
            }
            compute_group(fa, qa, acc, m_run, l_part, cstart + 16 * cur, cend, t, scale_log2);
            cur = nxt;
            if (cur >= ngroups)
                break;
            nxt = cur + WARPS;
            if (nxt < ngroups) {
                load_kv(fa, pi, k_cache, v_cache, gkv, g, t);
                if (nxt + WARPS < ngroups)
                    load_idx(pi, kv_indices, cstart + 16 * (nxt + WARPS), cend, g, t);
            }
            compute_group(fb, qa, acc, m_run, l_part, cstart + 16 * cur, cend, t, scale_log2);
            cur = nxt;
        }
    }

    // ---- per-warp state to shared memory ----
    {
        float l = l_part;
        l += __shfl_xor_sync(FULL, l, 1);
        l += __shfl_xor_sync(FULL, l, 2);
        if (t == 0) {
            s_m[warp][g] = m_run;
            s_l[warp][g] = l;
        }
        float *o0 = &s_o[warp][2 * t][0];
        float *o1 = &s_o[warp][2 * t + 1][0];
        *reinterpret_cast<float4 *>(o0 + 8 * g) = make_float4(acc[0][0], acc[1][0], acc[2][0], acc[3][0]);
        *reinterpret_cast<float4 *>(o0 + 8 * g + 4) = make_float4(acc[4][0], acc[5][0], acc[6][0], acc[7][0]);
        *reinterpret_cast<float4 *>(o0 + 64 + 8 * g) = make_float4(acc[0][2], acc[1][2], acc[2][2], acc[3][2]);
        *reinterpret_cast<float4 *>(o0 + 68 + 8 * g) = make_float4(acc[4][2], acc[5][2], acc[6][2], acc[7][2]);
        *reinterpret_cast<float4 *>(o1 + 8 * g) = make_float4(acc[0][1], acc[1][1], acc[2][1], acc[3][1]);
        *reinterpret_cast<float4 *>(o1 + 8 * g + 4) = make_float4(acc[4][1], acc[5][1], acc[6][1], acc[7][1]);
        *reinterpret_cast<float4 *>(o1 + 64 + 8 * g) = make_float4(acc[0][3], acc[1][3], acc[2][3], acc[3][3]);
        *reinterpret_cast<float4 *>(o1 + 68 + 8 * g) = make_float4(acc[4][3], acc[5][3], acc[6][3], acc[7][3]);
    }
    __syncthreads();

    // ---- merge the warps: thread = (head h, ELEMS consecutive dims from d0) ----
    const int h = tid / TPH;
    const int d0 = (tid % TPH) * ELEMS;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; w++)
        M = fmaxf(M, s_m[w][h]);
    float L = 0.0f;
    float o[ELEMS];
#pragma unroll
    for (int e = 0; e < ELEMS; e++)
        o[e] = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; w++) {
        const float mw = s_m[w][h];
        const float f = (mw == -INFINITY) ? 0.0f : exp2f(mw - M);
        L = fmaf(s_l[w][h], f, L);
#pragma unroll
        for (int e4 = 0; e4 < ELEMS / 4; e4++) {
            const float4 x = *reinterpret_cast<const float4 *>(&s_o[w][h][d0 + 4 * e4]);
            o[4 * e4 + 0] = fmaf(f, x.x, o[4 * e4 + 0]);
            o[4 * e4 + 1] = fmaf(f, x.y, o[4 * e4 + 1]);
            o[4 * e4 + 2] = fmaf(f, x.z, o[4 * e4 + 2]);
            o[4 * e4 + 3] = fmaf(f, x.w, o[4 * e4 + 3]);
        }
    }

    const size_t orow = ((size_t)b * NUM_QO_HEADS + qh0 + h);
    if (nchunks == 1) {  // single-chunk sequence (or empty one): final values, no scratch, no atomics
        const float inv = (L > 0.0f) ? 1.0f / L : 0.0f;
#pragma unroll
        for (int e4 = 0; e4 < ELEMS / 4; e4++) {
            uint2 ob;
            ob.x = pack_bf16(o[4 * e4 + 0] * inv, o[4 * e4 + 1] * inv);
            ob.y = pack_bf16(o[4 * e4 + 2] * inv, o[4 * e4 + 3] * inv);
            *reinterpret_cast<uint2 *>(output + orow * HEAD_DIM + d0 + 4 * e4) = ob;
        }
        if (d0 == 0)
            lse[orow] = (L > 0.0f) ? M + log2f(L) : -INFINITY;
        return;
    }

    const size_t slot = (size_t)slot_id * NUM_QO_HEADS + qh0 + h;
#pragma unroll
    for (int e4 = 0; e4 < ELEMS / 4; e4++)
        g_part_o[slot * (HEAD_DIM / 4) + d0 / 4 + e4] =
            make_float4(o[4 * e4 + 0], o[4 * e4 + 1], o[4 * e4 + 2], o[4 * e4 + 3]);
    if (d0 == 0)
        g_part_ml[slot] = make_float2(M, L);

    // ---- the last chunk of this (sequence, kv head) to finish merges all of them ----
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const int old = atomicAdd(&g_counter[b * NUM_KV_HEADS + gkv], 1);
        s_info[5] = (old == nchunks - 1) ? 1 : 0;
    }
    __syncthreads();
    if (s_info[5] == 0)
        return;
    __threadfence();
#if PAR_MERGE
    // batched online merge: MERGE_BATCH chunks' (m, l) and o pieces are loaded at once (independent loads),
    // then folded in with one rescale per batch. Every partial chunk is non-empty, so its m is finite.
    float M2 = -INFINITY;
    float L2 = 0.0f;
    float o2[ELEMS];
#pragma unroll
    for (int e = 0; e < ELEMS; e++)
        o2[e] = 0.0f;
    for (int c0 = 0; c0 < nchunks; c0 += MERGE_BATCH) {
        float2 ml[MERGE_BATCH];
        float4 xv[MERGE_BATCH][ELEMS / 4];
#pragma unroll
        for (int j = 0; j < MERGE_BATCH; j++) {
            const int ci = c0 + j;
            if (ci < nchunks) {
                const size_t sl = (size_t)(slot_first + ci) * NUM_QO_HEADS + qh0 + h;
                ml[j] = __ldcg(&g_part_ml[sl]);
#pragma unroll
                for (int e4 = 0; e4 < ELEMS / 4; e4++)
                    xv[j][e4] = __ldcg(&g_part_o[sl * (HEAD_DIM / 4) + d0 / 4 + e4]);
            } else {
                ml[j] = make_float2(-INFINITY, 0.0f);
#pragma unroll
                for (int e4 = 0; e4 < ELEMS / 4; e4++)
                    xv[j][e4] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
        float mb = M2;
#pragma unroll
        for (int j = 0; j < MERGE_BATCH; j++)
            mb = fmaxf(mb, ml[j].x);
        const float a = exp2f(M2 - mb);  // mb finite (chunk c0 exists); M2 = -inf on the first batch -> 0
        L2 *= a;
#pragma unroll
        for (int e = 0; e < ELEMS; e++)
            o2[e] *= a;
#pragma unroll
        for (int j = 0; j < MERGE_BATCH; j++) {
            const float f = exp2f(ml[j].x - mb);  // padding entries: exp2(-inf) = 0
            L2 = fmaf(ml[j].y, f, L2);
#pragma unroll
            for (int e4 = 0; e4 < ELEMS / 4; e4++) {
                o2[4 * e4 + 0] = fmaf(f, xv[j][e4].x, o2[4 * e4 + 0]);
                o2[4 * e4 + 1] = fmaf(f, xv[j][e4].y, o2[4 * e4 + 1]);
                o2[4 * e4 + 2] = fmaf(f, xv[j][e4].z, o2[4 * e4 + 2]);
                o2[4 * e4 + 3] = fmaf(f, xv[j][e4].w, o2[4 * e4 + 3]);
            }
        }
        M2 = mb;
    }
#else
    float M2 = -INFINITY;
    for (int ci = 0; ci < nchunks; ci++)
        M2 = fmaxf(M2, __ldcg(&g_part_ml[(size_t)(slot_first + ci) * NUM_QO_HEADS + qh0 + h]).x);
    float L2 = 0.0f;
    float o2[ELEMS];
#pragma unroll
    for (int e = 0; e < ELEMS; e++)
        o2[e] = 0.0f;
#pragma unroll 4
    for (int ci = 0; ci < nchunks; ci++) {
        const size_t sl = (size_t)(slot_first + ci) * NUM_QO_HEADS + qh0 + h;
        const float2 ml = __ldcg(&g_part_ml[sl]);
        const float f = (ml.x == -INFINITY) ? 0.0f : exp2f(ml.x - M2);
        L2 = fmaf(ml.y, f, L2);
#pragma unroll
        for (int e4 = 0; e4 < ELEMS / 4; e4++) {
            const float4 x = __ldcg(&g_part_o[sl * (HEAD_DIM / 4) + d0 / 4 + e4]);
            o2[4 * e4 + 0] = fmaf(f, x.x, o2[4 * e4 + 0]);
            o2[4 * e4 + 1] = fmaf(f, x.y, o2[4 * e4 + 1]);
            o2[4 * e4 + 2] = fmaf(f, x.z, o2[4 * e4 + 2]);
            o2[4 * e4 + 3] = fmaf(f, x.w, o2[4 * e4 + 3]);
        }
    }
#endif
    const float inv2 = (L2 > 0.0f) ? 1.0f / L2 : 0.0f;
#pragma unroll
    for (int e4 = 0; e4 < ELEMS / 4; e4++) {
        uint2 ob;
        ob.x = pack_bf16(o2[4 * e4 + 0] * inv2, o2[4 * e4 + 1] * inv2);
        ob.y = pack_bf16(o2[4 * e4 + 2] * inv2, o2[4 * e4 + 3] * inv2);
        *reinterpret_cast<uint2 *>(output + orow * HEAD_DIM + d0 + 4 * e4) = ob;
    }
    if (d0 == 0)
        lse[orow] = (L2 > 0.0f) ? M2 + log2f(L2) : -INFINITY;
    if (tid == 0)
        g_counter[b * NUM_KV_HEADS + gkv] = 0;  // ready for the next call
}

extern "C" void gqa_paged_decode(const __nv_bfloat16 *q, const __nv_bfloat16 *k_cache,
                                 const __nv_bfloat16 *v_cache, const int32_t *kv_indptr,
                                 const int32_t *kv_indices, float sm_scale, __nv_bfloat16 *output,
                                 float *lse, int64_t batch_size, int64_t num_pages,
                                 int64_t len_indptr, int64_t num_kv_indices)
{
    (void)num_pages;
    (void)len_indptr;
    if (batch_size <= 0)
        return;
    const float scale_log2 = sm_scale * 1.4426950408889634f;
    const long long N = num_kv_indices > 0 ? (long long)num_kv_indices : 0;
    // chunk length from the axes only: about WAVES waves of blocks, at least MIN_CHUNK tokens, multiple of 16
    long long denom = ((long long)NUM_SMS * BPSM * WAVES) / NUM_KV_HEADS - (long long)batch_size;
    if (denom < 1)
        denom = 1;
    long long chunk = (N + denom - 1) / denom;
    if (chunk < MIN_CHUNK)
        chunk = MIN_CHUNK;
    chunk = ((chunk + 15) / 16) * 16;
    if (chunk < 16)
        chunk = 16;
    // one launch per slice of at most SLICE_B sequences (a single launch for every batch <= 1024);
    // launches on the default stream run in order, so the static scratch and counters are reused safely
    for (long long b0 = 0; b0 < batch_size; b0 += SLICE_B) {
        const long long nb = (batch_size - b0 < SLICE_B) ? (batch_size - b0) : SLICE_B;
        const __nv_bfloat16 *qs = q + (size_t)b0 * NUM_QO_HEADS * HEAD_DIM;
        __nv_bfloat16 *os = output + (size_t)b0 * NUM_QO_HEADS * HEAD_DIM;
        float *ls = lse + (size_t)b0 * NUM_QO_HEADS;
        const int32_t *ips = kv_indptr + b0;
        long long ch = chunk;
        while ((N + ch - 1) / ch + nb > MAX_SLOTS && ch < N)
            ch *= 2;
        const long long slots = (N + ch - 1) / ch + nb;  // >= sum over the slice of ceil(n_b / ch) (1 if empty)
        gqa_split_kernel<<<(unsigned)(slots * NUM_KV_HEADS), THREADS>>>(qs, k_cache, v_cache, ips, kv_indices,
                                                                        scale_log2, os, ls, (int)nb, (int)ch);
    }
}
