// Flash attention forward, head_dim 128, one kernel with two bodies. sm_90a pass
// (__CUDA_ARCH_FEAT_SM90_ALL): warp-specialised FA3-style kernel, 2 consumer warpgroups (64 query
// rows each) + a producer (warpgroup with setmaxnreg, or a single warp) loading Q/K/V by TMA
// (3-D tensor maps, 128B swizzle, mbarrier expect_tx ring; cp.async fallback). S = Q K^T runs
// as register-A wgmma (Q fragments ldmatrix'd once per tile), PV as register-A wgmma (P from the
// S accumulators); S(t)/PV(t-1) overlap and named-barrier ping-pong between the warpgroups
// (barriers 8 and 9). Inside a turn the order is FA3's: issue S(t), rescale O by alpha(t-1)
// while S(t) runs, issue PV(t-1), hand the turn over. The ping-pong runs across work items: the
// last PV of item i and S(0) of item i+1 share one turn, and item i's O is stored afterwards.
// Work distribution (compile-time: the host launches the instantiation flash_fwd_kernel<CSCHED, 1>
// for causal calls and <NCSCHED, 0> for non-causal ones, so neither the schedule switch nor the
// causal flag costs the consumers registers or branches): 0 = persistent CTAs, static snake
// schedule (candidate 60); 1 = one CTA per work item, blockIdx.x heavy-first, so the hardware
// block scheduler balances the load; 2 = persistent CTAs, first item blockIdx.x, then items taken
// heavy-first from a global atomic counter by the producer thread, late (just before the last V
// load of the current item, so the counter hands out items in the order CTAs run dry: greedy
// longest-first), and handed to the consumers through shared memory next to the Q barrier (the
// counter resets itself: the last CTA to run dry zeroes it); 3 = persistent, static snake over
// pairs (heavy query block, light query block) of one head.
// Options: PERSIST (must stay 1: Q of the next tile prefetched while the current one runs,
// separate output staging buffer), LAZY (rescale O only when a row max
// grows by more than RESCALE_THR), PW (producer warps), DIAG (64-key last tile where the upper
// half is fully masked for a warpgroup). Every other pass: candidate 10's mma.sync body.
#define NSTAGE 2  /* 3 stages do not fit beside the output staging buffer */
#define PERSIST 1 /* separate output staging buffer (needed by the persistent schedules) */
#define CSCHED 0  // ksearch: knob values=[0, 2, 3]
#define NCSCHED 0  // ksearch: knob values=[0, 1, 2]
#define NCORDER 1  // ksearch: knob values=[0, 1]
#define L2HINT 1  // ksearch: knob values=[0, 1]
#define LAZY 0    /* lazy O rescaling (threshold RESCALE_THR in log2 units) */
#define PW 4      /* producer warps: 4 = producer warpgroup + setmaxnreg (384 thr); 1 = one warp (288 thr) */
#define DIAG 0    /* trimmed 64-key last tile for a warpgroup that cannot see its upper half */
#define NWARPS 8
#define MT 1      /* 16-row m-tiles per warp */
#define BN 128    /* fallback: keys per tile */
#define QREG 1    /* Q fragments kept in registers */
#define SPLIT 0   /* one cp.async group per K+V tile */
#define PAIR 0    /* causal: one CTA does a heavy and a light query block */
#define MINB 1
#define PP_BAR0 8 /* ping-pong named barriers PP_BAR0 (warpgroup 0's turn) and PP_BAR0 + 1 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <cuda.h>

#define NUM_HEADS 32
#define HD 128 /* head_dim */

// Rows per warp = 16 * MT, rows per CTA = BM = NWARPS * 16 * MT.
#define KNT (NWARPS * 32)
constexpr int kNT = KNT;
constexpr int kWM = 16 * MT;
constexpr int kBM = NWARPS * kWM;
constexpr int kNB = BN / 8;

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool pred)
{
    const int sz = pred ? 16 : 0;  // src-size 0 -> the 16 bytes are zero-filled
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(sz));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t pack_h2(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

// Byte offset of 16-byte chunk c (0..15) of row r in a [rows][128] fp16 tile, XOR-swizzled so
// that 8 consecutive rows at the same chunk hit 8 different bank groups.
__device__ __forceinline__ uint32_t swz(int r, int c)
{
    return (uint32_t)((r * HD + ((c ^ (r & 7)) << 3)) * 2);
}

// Copy rows [r0, r0 + ROWS) of a [L][128] fp16 matrix into a swizzled smem tile; rows >= L are zero.
template <int ROWS>
__device__ __forceinline__ void load_tile(uint32_t sbase, const __half *g, int r0, int L, int tid)
{
#pragma unroll
    for (int i = 0; i < ROWS * 16 / kNT; ++i) {
        const int idx = tid + i * kNT;
        const int r = idx >> 4, c = idx & 15;
        const int gr = r0 + r;
        const bool ok = gr < L;
        const __half *src = g + (size_t)(ok ? gr : 0) * HD + c * 8;
        cp_async16(sbase + swz(r, c), src, ok);
    }
}

// The fallback body runs on the first 256 threads only (the producer warps of the sm_90a body
// leave at once), so it synchronises on named barrier 1 with 256 threads.
__device__ __forceinline__ void fb_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

// Work item `it` of this CTA: a linear tile index w (query block nqb - 1 - w / BH, head w % BH,
// heaviest causal blocks first), or -1 when the CTA is done.
// sched 0 / 2: CTA c takes, in band i of gridDim.x consecutive indices, index c (even bands) or
// gridDim.x - 1 - c (odd bands); sched 2 uses only it == 0 (later items come from the counter).
// sched 1: one item per CTA. sched 3: snake over pairs p (j = p / BH, head p % BH) of query
// blocks nqb - 1 - j (first) and j (second, absent when both are the same block).
__device__ __forceinline__ int work_index(int it, int W, int sched, int nqb, int BH)
{
    const int G = (int)gridDim.x, c = (int)blockIdx.x;
    if (sched == 1)
        return it == 0 ? c : -1;
    if (sched == 3) {
        const int P = BH * ((nqb + 1) >> 1);
        int left = it;
        for (int pi = 0;; ++pi) {
            const int base = pi * G;
            if (base >= P)
                return -1;
            const int p = base + ((pi & 1) ? (G - 1 - c) : c);
            if (p >= P)
                return -1;
            const int j = p / BH, bh = p - j * BH;
            const int cnt = (2 * j == nqb - 1) ? 1 : 2;
            if (left < cnt) {
                const int qb = left == 0 ? nqb - 1 - j : j;
                return (nqb - 1 - qb) * BH + bh;
            }
            left -= cnt;
        }
    }
    const int base = it * G;
    if (base >= W)
        return -1;
    const int w = base + ((it & 1) ? (G - 1 - c) : c);
    return w < W ? w : -1;
}

// Item w -> (query block qb, head bh). Causal: cost-sorted (heaviest query blocks first, all heads
// of one query block together). Non-causal (NCORDER 1): head-major, so the CTAs running at the
// same time share the K / V of a few heads in L2 instead of streaming all 32 heads' K / V.
__device__ __forceinline__ void decode_item(int w, int nqb, int BH, int causal, int &qb, int &bh)
{
    if (causal || NCORDER == 0) {
        const int j = w / BH;
        qb = nqb - 1 - j;
        bh = w - j * BH;
    } else {
        bh = w / nqb;
        qb = w - bh * nqb;
    }
}

__device__ __forceinline__ int ld_shared_s32(uint32_t a)
{
    int v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(a) : "memory");
    return v;
}

__device__ __forceinline__ void st_shared_s32(uint32_t a, int v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(v) : "memory");
}

// sched 2: global work counter. Every CTA takes items gridDim.x + (counter value) until one is
// >= W; that failing take happens exactly once per CTA, and the CTA that records the last one
// zeroes both counters, so each launch starts from 0 (stream order publishes the reset).
__device__ unsigned int g_sched_ctr = 0u;
__device__ unsigned int g_sched_done = 0u;

__device__ __forceinline__ unsigned int sched_grab() { return atomicAdd(&g_sched_ctr, 1u); }

__device__ __forceinline__ int sched_resolve(unsigned int raw, int W)
{
    const long long w = (long long)gridDim.x + (long long)raw;
    return w < (long long)W ? (int)w : -1;
}

// After this CTA's failing take (and after the consumers were told): count it, reset on the last.
__device__ __forceinline__ void sched_finish()
{
    __threadfence();
    if (atomicAdd(&g_sched_done, 1u) == gridDim.x - 1u) {
        atomicExch(&g_sched_ctr, 0u);
        atomicExch(&g_sched_done, 0u);
        __threadfence();
    }
}

// ---------------------------------------------------------------------------------------------
// Fallback body (every compile pass without sm_90a features): candidate 10's mma.sync kernel.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void attn_mma_body(const __half *__restrict__ q, const __half *__restrict__ k,
                                              const __half *__restrict__ v, __half *__restrict__ out, int L,
                                              int causal, int nqb, float sl2, unsigned char *smem_raw, int bh,
                                              int yi)
{
    __half *sQ = reinterpret_cast<__half *>(smem_raw);
    const uint32_t sQa = smem_u32(smem_raw);
    const uint32_t sKa = sQa + kBM * HD * 2;
    const uint32_t sVa = sKa + 2 * BN * HD * 2;

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int g = lane >> 2;
    const int tq = lane & 3;
    const int wrow0 = warp * kWM;

    const size_t hoff = (size_t)bh * (size_t)L * HD;
    const __half *qh = q + hoff;
    const __half *kh = k + hoff;
    const __half *vh = v + hoff;
    __half *oh = out + hoff;

    const int npass = (PAIR && causal) ? 2 : 1;
    for (int pass = 0; pass < npass; ++pass) {
        int qb;
        if (PAIR && causal) {
            qb = pass == 0 ? (nqb - 1 - yi) : yi;
            if (pass == 1 && qb == nqb - 1 - yi)
                break;  // the middle block of an odd count is done once
        } else {
            qb = nqb - 1 - yi;  // heaviest (causal) blocks first
        }
        const int m0 = qb * kBM;
        const int kv_end = causal ? min(L, m0 + kBM) : L;
        const int nt = (kv_end + BN - 1) / BN;

        fb_sync();  // smem of a previous pass is free
        load_tile<kBM>(sQa, qh, m0, L, tid);
        cp_async_commit();
        load_tile<BN>(sKa, kh, 0, L, tid);
        if (SPLIT) {
            cp_async_commit();
        }
        load_tile<BN>(sVa, vh, 0, L, tid);
        cp_async_commit();

        float o[MT][16][4];
        float mrow[MT][2], lrow[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int j = 0; j < 16; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    o[mt][j][e] = 0.f;
            mrow[mt][0] = mrow[mt][1] = -INFINITY;
            lrow[mt][0] = lrow[mt][1] = 0.f;
        }
#if QREG
        uint32_t qf[MT][8][4];
#endif

        for (int t = 0; t < nt; ++t) {
            const int st = t & 1;
            const int n0 = t * BN;
            const bool more = t + 1 < nt;
            const uint32_t sKs = sKa + st * BN * HD * 2;
            const uint32_t sVs = sVa + st * BN * HD * 2;

            if (SPLIT) {
                cp_async_wait<1>();  // K_t (and Q) landed; V_t may be in flight
                fb_sync();
                if (more)
                    load_tile<BN>(sKa + (st ^ 1) * BN * HD * 2, kh, n0 + BN, L, tid);
                cp_async_commit();
            } else {
                cp_async_wait<0>();
                fb_sync();
                if (more) {
                    load_tile<BN>(sKa + (st ^ 1) * BN * HD * 2, kh, n0 + BN, L, tid);
                    load_tile<BN>(sVa + (st ^ 1) * BN * HD * 2, vh, n0 + BN, L, tid);
                }
                cp_async_commit();
            }

#if QREG
            if (t == 0) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int ks = 0; ks < 8; ++ks) {
                        const int r = wrow0 + mt * 16 + (lane & 15);
                        const int c = ks * 2 + (lane >> 4);
                        ldsm_x4(qf[mt][ks][0], qf[mt][ks][1], qf[mt][ks][2], qf[mt][ks][3], sQa + swz(r, c));
                    }
            }
#endif
            // This warp's rows all lie above the tile's first key: every score is masked.
            const bool wskip = causal && (n0 > m0 + wrow0 + kWM - 1);

            float s[MT][kNB][4];
            if (!wskip) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int nb = 0; nb < kNB; ++nb)
#pragma unroll
                        for (int e = 0; e < 4; ++e)
                            s[mt][nb][e] = 0.f;

#pragma unroll
                for (int ks = 0; ks < 8; ++ks) {
                    uint32_t a[MT][4];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
#if QREG
                        a[mt][0] = qf[mt][ks][0];
                        a[mt][1] = qf[mt][ks][1];
                        a[mt][2] = qf[mt][ks][2];
                        a[mt][3] = qf[mt][ks][3];
#else
                        const int r = wrow0 + mt * 16 + (lane & 15);
                        const int c = ks * 2 + (lane >> 4);
                        ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3], sQa + swz(r, c));
#endif
                    }
#pragma unroll
                    for (int nb2 = 0; nb2 < kNB / 2; ++nb2) {
                        uint32_t b0, b1, b2, b3;
                        const int r = nb2 * 16 + (lane & 7) + ((lane >> 4) << 3);
                        const int c = ks * 2 + ((lane >> 3) & 1);
                        ldsm_x4(b0, b1, b2, b3, sKs + swz(r, c));
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt) {
                            mma16816(s[mt][2 * nb2], a[mt], b0, b1);
                            mma16816(s[mt][2 * nb2 + 1], a[mt], b2, b3);
                        }
                    }
                }

                const bool need_mask = (n0 + BN > L) || (causal && (n0 + BN - 1 > m0 + wrow0));
                if (need_mask) {
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                        for (int nb = 0; nb < kNB; ++nb)
#pragma unroll
                            for (int e = 0; e < 4; ++e) {
                                const int col = n0 + nb * 8 + 2 * tq + (e & 1);
                                const int row = m0 + wrow0 + mt * 16 + g + ((e >> 1) << 3);
                                if (col >= L || (causal && col > row))
                                    s[mt][nb][e] = -INFINITY;
                            }
                }

                // Online softmax (base 2, scale folded into sl2). Row g uses e = 0,1; row g+8 uses e = 2,3.
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        float mx = -INFINITY;
#pragma unroll
                        for (int nb = 0; nb < kNB; ++nb)
                            mx = fmaxf(mx, fmaxf(s[mt][nb][2 * h], s[mt][nb][2 * h + 1]));
                        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                        const float mnew = fmaxf(mrow[mt][h], mx * sl2);
                        const float msub = (mnew == -INFINITY) ? 0.f : mnew;
                        const float alpha = ex2(mrow[mt][h] - msub);
                        mrow[mt][h] = mnew;
                        float sum = 0.f;
#pragma unroll
                        for (int nb = 0; nb < kNB; ++nb)
#pragma unroll
                            for (int e = 0; e < 2; ++e) {
                                const float p = ex2(fmaf(s[mt][nb][2 * h + e], sl2, -msub));
                                s[mt][nb][2 * h + e] = p;
                                sum += p;
                            }
                        lrow[mt][h] = lrow[mt][h] * alpha + sum;
#pragma unroll
                        for (int j = 0; j < 16; ++j) {
                            o[mt][j][2 * h] *= alpha;
                            o[mt][j][2 * h + 1] *= alpha;
                        }
                    }
            }

            if (SPLIT) {
                cp_async_wait<1>();  // V_t landed (K_{t+1} may be in flight)
                fb_sync();
                if (more)
                    load_tile<BN>(sVa + (st ^ 1) * BN * HD * 2, vh, n0 + BN, L, tid);
                cp_async_commit();
            }

            if (!wskip) {
#pragma unroll
                for (int kk = 0; kk < BN / 16; ++kk) {
                    uint32_t a[MT][4];
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        a[mt][0] = pack_h2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                        a[mt][1] = pack_h2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                        a[mt][2] = pack_h2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                        a[mt][3] = pack_h2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
                    }
#pragma unroll
                    for (int dp = 0; dp < 8; ++dp) {
                        uint32_t b0, b1, b2, b3;
                        const int r = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                        const int c = dp * 2 + (lane >> 4);
                        ldsm_x4_t(b0, b1, b2, b3, sVs + swz(r, c));
#pragma unroll
                        for (int mt = 0; mt < MT; ++mt) {
                            mma16816(o[mt][2 * dp], a[mt], b0, b1);
                            mma16816(o[mt][2 * dp + 1], a[mt], b2, b3);
                        }
                    }
                }
            }
        }

        // Epilogue: O / l, fp16, staged through this warp's own rows of sQ, then 16-byte stores.
        __syncwarp();
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float l = lrow[mt][h];
                l += __shfl_xor_sync(0xffffffffu, l, 1);
                l += __shfl_xor_sync(0xffffffffu, l, 2);
                const float inv = l > 0.f ? 1.f / l : 0.f;
                const int r = wrow0 + mt * 16 + g + 8 * h;
#pragma unroll
                for (int j = 0; j < 16; ++j) {
                    const uint32_t val = pack_h2(o[mt][j][2 * h] * inv, o[mt][j][2 * h + 1] * inv);
                    const uint32_t addr = sQa + swz(r, j) + tq * 4;
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(val));
                }
            }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < kWM * 16 / 32; ++i) {
            const int idx = lane + 32 * i;
            const int rr = idx >> 4, c = idx & 15;
            const int r = wrow0 + rr;
            const int gr = m0 + r;
            if (gr < L) {
                const uint4 val = *reinterpret_cast<const uint4 *>(reinterpret_cast<const char *>(sQ) + swz(r, c));
                *reinterpret_cast<uint4 *>(oh + (size_t)gr * HD + c * 8) = val;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers of the sm_90a path that use no sm_90a-only instruction.
// ---------------------------------------------------------------------------------------------
// Canonical K-major 128B-swizzle layout of a [ROWS][128] fp16 tile: two column halves (d 0..63,
// d 64..127), each ROWS x 128 B; 16-byte chunk c (0..7) of row r inside a half sits at
// r*128 + ((c ^ (r & 7)) << 4). C is the chunk index 0..15 of the whole 256-byte row.
// Tile bases are 1024-byte aligned, so the XOR uses the same address bits as the hardware.
template <int ROWS>
__device__ __forceinline__ uint32_t swz2(int r, int C)
{
    return (uint32_t)((C >> 3) * (ROWS * 128) + r * 128 + (((C & 7) ^ (r & 7)) << 4));
}

#define RESCALE_THR 8.0f

// Mask one key tile of this thread's scores (s[nb][e]: row row0 (+8 for e >= 2), column
// n0 + 8*nb + 2*tq + (e & 1)), update the running max / sum, turn s into unnormalised
// probabilities (base 2, scale folded into sl2) and return the rescale factors of O.
// LAZY: the running max only moves when the tile max exceeds it by more than RESCALE_THR
// (then P <= 2^RESCALE_THR), and alpha is exactly 1 when it does not move.
template <int NB>
__device__ __forceinline__ void softmax_tile(float (&s)[NB][4], float (&mrow)[2], float (&lrow)[2], float (&alpha)[2],
                                             int n0, int row0, int L, int causal, bool need_mask, float sl2, int tq)
{
    if (need_mask) {
        if (causal) {
            // Key offset c = 8 nb + (e & 1) (column n0 + 2 tq + c) is visible to row r iff
            // c <= r - n0 - 2 tq. Valid rows (r < L) see only columns <= r < L, so this one test
            // also removes every key >= L; padding rows (r >= L, never stored) may keep keys >= L,
            // whose K / V rows are zero-filled, so their scores stay finite.
            const int lim0 = row0 - n0 - 2 * tq;
            const int lim1 = lim0 + 8;
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int c = nb * 8 + (e & 1);
                    if (c > ((e & 2) ? lim1 : lim0))
                        s[nb][e] = -INFINITY;
                }
        } else {
            const int limL = L - n0 - 2 * tq;  // visible iff c < limL
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int c = nb * 8 + (e & 1);
                    if (c >= limL)
                        s[nb][e] = -INFINITY;
                }
        }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
            mx = fmaxf(mx, fmaxf(s[nb][2 * h], s[nb][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mxs = mx * sl2;
#if LAZY
        const float mnew = (mxs > mrow[h] + RESCALE_THR) ? mxs : mrow[h];
        const float msub = (mnew == -INFINITY) ? 0.f : mnew;
        alpha[h] = (mnew == mrow[h]) ? 1.f : ex2(mrow[h] - msub);
#else
        const float mnew = fmaxf(mrow[h], mxs);
        const float msub = (mnew == -INFINITY) ? 0.f : mnew;
        alpha[h] = ex2(mrow[h] - msub);
#endif
        mrow[h] = mnew;
        float sum = 0.f;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float p = ex2(fmaf(s[nb][2 * h + e], sl2, -msub));
                s[nb][2 * h + e] = p;
                sum += p;
            }
        lrow[h] = lrow[h] * alpha[h] + sum;
    }
}

__device__ __forceinline__ void rescale_o(float (&o)[16][4], const float (&alpha)[2])
{
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        o[j][0] *= alpha[0];
        o[j][1] *= alpha[0];
        o[j][2] *= alpha[1];
        o[j][3] *= alpha[1];
    }
}

// O rescale of one turn (LAZY: skipped when no row max of this warp moved).
__device__ __forceinline__ void turn_rescale(float (&o)[16][4], const float (&alpha)[2])
{
#if LAZY
    if (__any_sync(0xffffffffu, (alpha[0] != 1.f) || (alpha[1] != 1.f)))
        rescale_o(o, alpha);
#else
    rescale_o(o, alpha);
#endif
}

// DIAG: the last key tile of an item is trimmed to 64 keys for this warpgroup.
__device__ __forceinline__ bool diag_half_last(int m0, int nt, int L, int causal, int wg)
{
#if DIAG
    const int nlast = (nt - 1) * 128;
    return (causal && (nlast + 64 > m0 + 64 * wg + 63)) || (nlast + 64 >= L);
#else
    return false;
#endif
}

// P (fp32, accumulator layout) -> fp16 A fragments of m16k16 / m64k16 (identical per warp).
template <int NB>
__device__ __forceinline__ void pack_p(uint32_t (&p)[NB / 2][4], float (&s)[NB][4])
{
#pragma unroll
    for (int kk = 0; kk < NB / 2; ++kk) {
        p[kk][0] = pack_h2(s[2 * kk][0], s[2 * kk][1]);
        p[kk][1] = pack_h2(s[2 * kk][2], s[2 * kk][3]);
        p[kk][2] = pack_h2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        p[kk][3] = pack_h2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
}

// Epilogue: O / l -> fp16, staged through this warp's own 16 rows of a 128-row swz2<128> staging
// tile at sSt (generic pointer stp), then 16-byte coalesced stores.
__device__ __forceinline__ void store_out(float (&o)[16][4], const float (&lrow)[2], uint32_t sSt,
                                          const unsigned char *stp, __half *oh, int m0, int L, int wrow0, int lane)
{
    const int g = lane >> 2, tq = lane & 3;
    __syncwarp();  // the previous use of these staging rows by this warp is complete
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = lrow[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int r = wrow0 + g + 8 * h;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const uint32_t val = pack_h2(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(sSt + swz2<128>(r, j) + tq * 4), "r"(val) : "memory");
        }
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 16 * 16 / 32; ++i) {
        const int idx = lane + 32 * i;
        const int rr = idx >> 4, c = idx & 15;
        const int r = wrow0 + rr;
        const int gr = m0 + r;
        if (gr < L) {
            const uint4 val = *reinterpret_cast<const uint4 *>(stp + swz2<128>(r, c));
            *reinterpret_cast<uint4 *>(oh + (size_t)gr * HD + c * 8) = val;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// sm_90a-only helpers (wgmma, mbarrier, TMA, setmaxnreg). Compiled only in the pass that has the
// sm_90a features.
// ---------------------------------------------------------------------------------------------
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bar_named(int id, int nthreads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
__device__ __forceinline__ void bar_arrive_named(int id, int nthreads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

// Keep accumulator / fragment registers pinned across an asynchronous wgmma.
template <int N>
__device__ __forceinline__ void fence_acc(float (&a)[N][4])
{
#pragma unroll
    for (int j = 0; j < N; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            asm volatile("" : "+f"(a[j][e])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_frag(uint32_t (&a)[N][4])
{
#pragma unroll
    for (int j = 0; j < N; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            asm volatile("" : "+r"(a[j][e])::"memory");
}

// Shared-memory matrix descriptor: start address >> 4 (bits 0-13), leading byte offset >> 4
// (bits 16-29), stride byte offset >> 4 (bits 32-45), base offset 0, swizzle mode (bits 62-63:
// 0 none, 1 = 128B).
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo_bytes, uint32_t sbo_bytes, uint32_t swz_mode)
{
    uint64_t d = (uint64_t)((saddr & 0x3FFFFu) >> 4);
    d |= (uint64_t)((lbo_bytes >> 4) & 0x3FFFu) << 16;
    d |= (uint64_t)((sbo_bytes >> 4) & 0x3FFFu) << 32;
    d |= (uint64_t)swz_mode << 62;
    return d;
}

#define ACC4(d, j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define ACC32(d, o) ACC4(d, (o) + 0), ACC4(d, (o) + 1), ACC4(d, (o) + 2), ACC4(d, (o) + 3), \
                    ACC4(d, (o) + 4), ACC4(d, (o) + 5), ACC4(d, (o) + 6), ACC4(d, (o) + 7)
#define ACC64(d) ACC32(d, 0), ACC32(d, 8)

#define REGS32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define REGS64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// D[64x128] (+)= A[64x16] (registers, m16k16 A-fragment layout per warp) * B[16x128] (shared).
// TB = 1: B is MN-major (N contiguous, e.g. V[key][d]); TB = 0: B is K-major.
template <int TB>
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[16][4], const uint32_t (&a)[4], uint64_t db, int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " REGS64 ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n"
                 "}\n"
                 : ACC64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}

// D[64x64] (+)= A[64x16] (registers) * B[16x64] (shared), D = columns OFF*8 .. OFF*8+63 of d.
template <int TB, int OFF>
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[16][4], const uint32_t (&a)[4], uint64_t db, int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " REGS32 ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n"
                 "}\n"
                 : ACC32(d, OFF)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));
}

// S[64 x 128] = Q_wg K_tile^T with Q from registers (qf: per-warp m16k16 A fragments of the 8
// k16 steps) and K from shared memory (K-major, 128B swizzle, halves 128 x 128 B apart).
__device__ __forceinline__ void issue_s_rs(float (&s)[16][4], const uint32_t (&qf)[8][4], uint32_t sKs)
{
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
        const uint32_t koff = (uint32_t)((ks >> 2) * (128 * 128) + (ks & 3) * 32);
        wgmma_rs_n128<0>(s, qf[ks], make_desc(sKs + koff, 16, 1024, 1), ks);
    }
}

// S[64 x 64] = Q_wg K_tile[0..63]^T into s[0..7] (s[8..15] untouched; the caller masks them).
__device__ __forceinline__ void issue_s_rs_h(float (&s)[16][4], const uint32_t (&qf)[8][4], uint32_t sKs)
{
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
        const uint32_t koff = (uint32_t)((ks >> 2) * (128 * 128) + (ks & 3) * 32);
        wgmma_rs_n64<0, 0>(s, qf[ks], make_desc(sKs + koff, 16, 1024, 1), ks);
    }
}

// O[64 x 128] += P[64 x 16*NK] V_tile[16*NK x 128]: P from registers, V MN-major (d contiguous)
// in the 128B-swizzle layout (two d halves of 128 x 128 B). One k16 step = 16 keys = 2048 B.
template <int NK>
__device__ __forceinline__ void issue_pv_k(float (&o)[16][4], const uint32_t (&p)[8][4], uint32_t sVs)
{
#pragma unroll
    for (int kk = 0; kk < NK; ++kk)
        wgmma_rs_n128<1>(o, p[kk], make_desc(sVs + kk * 2048, 128 * 128, 1024, 1), 1);
}

__device__ __forceinline__ void mbar_init(uint32_t a, uint32_t count)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(a), "r"(count) : "memory");
}

// Wait until the phase of parity `parity` of the mbarrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t a, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred P1;\n"
                 "LAB_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra DONE;\n"
                 "bra LAB_WAIT;\n"
                 "DONE:\n"
                 "}\n" ::"r"(a),
                 "r"(parity)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t a)
{
    asm volatile("{\n"
                 ".reg .b64 st;\n"
                 "mbarrier.arrive.shared::cta.b64 st, [%0];\n"
                 "}\n" ::"r"(a)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive_tx(uint32_t a, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(a), "r"(bytes) : "memory");
}

// TMA: rows [row, row + ROWS) of head bh of a [BH][L][128] fp16 tensor -> one swz2<ROWS> tile
// (two 64-column boxes of ROWS x 128 B, hardware 128B swizzle). Rows >= L are zero.
// L2HINT: with an L2 cache policy (K / V evict_last: re-read by every query block of the head;
// Q evict_first: read once).
template <int ROWS>
__device__ __forceinline__ void tma_load_tile(uint32_t sdst, const CUtensorMap *map, int row, int bh, uint32_t bar,
                                              uint64_t pol)
{
    const uint64_t m = reinterpret_cast<uint64_t>(map);
#if L2HINT
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                 ::"r"(sdst), "l"(m), "r"(0), "r"(row), "r"(bh), "r"(bar), "l"(pol)
                 : "memory");
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                 ::"r"(sdst + (uint32_t)(ROWS * 128)), "l"(m), "r"(64), "r"(row), "r"(bh), "r"(bar), "l"(pol)
                 : "memory");
#else
    (void)pol;
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 ::"r"(sdst), "l"(m), "r"(0), "r"(row), "r"(bh), "r"(bar)
                 : "memory");
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 ::"r"(sdst + (uint32_t)(ROWS * 128)), "l"(m), "r"(64), "r"(row), "r"(bh), "r"(bar)
                 : "memory");
#endif
}

__device__ __forceinline__ uint64_t policy_evict_last()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}

__device__ __forceinline__ uint64_t policy_evict_first()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// ---------------------------------------------------------------------------------------------
// Warp-specialised sm_90a body: consumer warpgroups 0, 1 (warps 0..7, 64 query rows each) and
// PW producer warps. Key tiles of 128 rows; K / V tile number c (counted over all work items of
// the CTA) lives in slot c % NS. Q has its own full / empty barrier pair, so (PERSIST) the next
// work item's Q is loaded as soon as every consumer warp has its Q fragments in registers.
// ---------------------------------------------------------------------------------------------
#define KTHREADS (KNT + 32 * PW)
#define NPT (32 * PW)
#define PRODUCER_REGS 24
#define CONSUMER_REGS 240
constexpr int kQB = 128 * 256;  // bytes of a 128-row Q / K / V / O tile
constexpr int kTB = 128 * 256;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The NPT producer threads copy rows [r0, r0 + 128) of a [L][128] fp16 matrix into a swz2<128>
// tile (rows >= L zero-filled): thread p copies chunk p & 15 of rows (NPT/16) i + (p >> 4).
__device__ __forceinline__ void wgp_load_tile(uint32_t sbase, const __half *g, int r0, int L, int ptid)
{
    const int C = ptid & 15;
    const int rh = ptid >> 4;
#pragma unroll 8
    for (int i = 0; i < 128 / (NPT / 16); ++i) {
        const int r = (NPT / 16) * i + rh;
        const int gr = r0 + r;
        const bool ok = gr < L;
        const __half *src = g + (size_t)(ok ? gr : 0) * HD + C * 8;
        cp_async16(sbase + swz2<128>(r, C), src, ok);
    }
}

// TMA producer step for K or V tile number cnt (rows row.. of head bh).
template <int NS>
__device__ __forceinline__ void produce_tma(uint32_t slots, uint32_t bfull, uint32_t bempty, const CUtensorMap *map,
                                            int cnt, int row, int bh, uint64_t pol)
{
    const int s = cnt % NS;
    if (cnt >= NS)
        mbar_wait(bempty + 8 * s, ((cnt / NS) & 1) ^ 1);  // consumers released tile cnt - NS
    mbar_arrive_tx(bfull + 8 * s, (uint32_t)kTB);
    tma_load_tile<128>(slots + s * kTB, map, row, bh, bfull + 8 * s, pol);
}

// cp.async: close the group just issued, publish the previous one (one step late).
__device__ __forceinline__ void cpa_publish(uint32_t &prev_full, uint32_t this_full)
{
    cp_async_commit();
    cp_async_wait<1>();
    fence_proxy_async();
    if (prev_full != 0u)
        mbar_arrive(prev_full);
    prev_full = this_full;
}

template <int NS>
__device__ __forceinline__ void produce_cpa(uint32_t slots, uint32_t bfull, uint32_t bempty, const __half *g, int cnt,
                                            int row, int L, int ptid, uint32_t &prev_full)
{
    const int s = cnt % NS;
    if (cnt >= NS)
        mbar_wait(bempty + 8 * s, ((cnt / NS) & 1) ^ 1);
    wgp_load_tile(slots + s * kTB, g, row, L, ptid);
    cpa_publish(prev_full, bfull + 8 * s);
}

// Q fragments of this warp's 16 rows for the 8 k16 steps (A layout of m16k16 = of wgmma m64k16
// per warp), then release the Q buffer to the producer.
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[8][4], uint32_t sQa, uint32_t bQF, uint32_t bQE, int &qi,
                                             int wrow0, int lane)
{
    mbar_wait(bQF, qi & 1);
    ++qi;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
        const int r = wrow0 + (lane & 15);
        const int C = ks * 2 + (lane >> 4);
        ldsm_x4(qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], sQa + swz2<128>(r, C));
    }
    __syncwarp();
    if (lane == 0)
        mbar_arrive(bQE);
}

// SCHED and CAUSAL are compile-time: each launched instantiation carries only its own schedule and
// masking code (no runtime schedule switch in the consumers' registers). The host never launches
// SCHED 2 without tensor maps (the work counter lives in the TMA producer only).
template <int NS, int SCHED, int CAUSAL>
__device__ __forceinline__ void attn_ws_body(const __half *__restrict__ q, const __half *__restrict__ k,
                                             const __half *__restrict__ v, __half *__restrict__ out, int L,
                                             int nqb, int BH, float sl2, unsigned char *smem,
                                             const CUtensorMap *tmQ, const CUtensorMap *tmK,
                                             const CUtensorMap *tmV, int use_tma)
{
    constexpr int NB = 16;
    constexpr int sched = SCHED;
    constexpr int causal = CAUSAL;
    const uint32_t sQa = smem_u32(smem);
    const uint32_t sKa = sQa + kQB;
    const uint32_t sVa = sKa + NS * kTB;
    const uint32_t sOa = sVa + NS * kTB;  // output staging (PERSIST only)
    const uint32_t bFK = sOa + (PERSIST ? kQB : 0);  // full K [NS]
    const uint32_t bEK = bFK + 8 * NS;               // empty K [NS]
    const uint32_t bFV = bEK + 8 * NS;               // full V [NS]
    const uint32_t bEV = bFV + 8 * NS;               // empty V [NS]
    const uint32_t bQF = bEV + 8 * NS;               // full Q
    const uint32_t bQE = bQF + 8;                    // empty Q
    const uint32_t sIdx = bQE + 8;                   // sched 2: work index of Q phase i in slot i & 1
    const int W = BH * nqb;

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < NS; ++s) {
            mbar_init(bFK + 8 * s, use_tma ? 1 : NPT);
            mbar_init(bEK + 8 * s, NWARPS);
            mbar_init(bFV + 8 * s, use_tma ? 1 : NPT);
            mbar_init(bEV + 8 * s, NWARPS);
        }
        mbar_init(bQF, use_tma ? 1 : NPT);
        mbar_init(bQE, NWARPS);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (use_tma && tid == KNT) {
        // Warm the descriptor cache before the first TMA (the maps are kernel parameters).
        asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmQ)) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmK)) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmV)) : "memory");
    }
    __syncthreads();

    if (warp >= NWARPS) {
        // ---------------- producer: per work item Q, K0, K1, V0, K2, V1, K3, V2, ... ----------------
#if PW == 4
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PRODUCER_REGS));
#endif
        const int ptid = tid - KNT;
        if (use_tma) {
            if (ptid == 0 && sched != 2) {
                // Static schedules: the next item is known in advance, so its Q is loaded as soon
                // as every consumer warp holds the current Q in registers (right after this item's
                // K0 / K1), a whole item ahead of the boundary, instead of after this item's last V.
                int kc = 0, vc = 0, qi = 0;
                const uint64_t polKV = policy_evict_last();
                const uint64_t polQ = policy_evict_first();
                int w = work_index(0, W, sched, nqb, BH);
                if (w >= 0) {
                    int qb0, bh0;
                    decode_item(w, nqb, BH, causal, qb0, bh0);
                    mbar_arrive_tx(bQF, (uint32_t)kQB);
                    tma_load_tile<128>(sQa, tmQ, qb0 * 128, bh0, bQF, polQ);
                    ++qi;
                }
                for (int it = 0; w >= 0; ++it) {
                    int qb, bh;
                    decode_item(w, nqb, BH, causal, qb, bh);
                    const int m0 = qb * 128;
                    const int kv_end = causal ? min(L, m0 + 128) : L;
                    const int nt = (kv_end + 127) / 128;
                    produce_tma<NS>(sKa, bFK, bEK, tmK, kc++, 0, bh, polKV);
                    if (nt > 1)
                        produce_tma<NS>(sKa, bFK, bEK, tmK, kc++, 128, bh, polKV);
                    const int wn = work_index(it + 1, W, sched, nqb, BH);
                    if (wn >= 0) {
                        int qbn, bhn;
                        decode_item(wn, nqb, BH, causal, qbn, bhn);
                        mbar_wait(bQE, (qi - 1) & 1);  // every consumer warp holds this item's Q
                        mbar_arrive_tx(bQF, (uint32_t)kQB);
                        tma_load_tile<128>(sQa, tmQ, qbn * 128, bhn, bQF, polQ);
                        ++qi;
                    }
                    for (int j = 0; j < nt; ++j) {
                        produce_tma<NS>(sVa, bFV, bEV, tmV, vc++, j * 128, bh, polKV);
                        if (j + 2 < nt)
                            produce_tma<NS>(sKa, bFK, bEK, tmK, kc++, (j + 2) * 128, bh, polKV);
                    }
                    w = wn;
                }
            }
            if (ptid == 0 && sched == 2) {
                int kc = 0, vc = 0, qi = 0;
                const uint64_t polKV = policy_evict_last();
                const uint64_t polQ = policy_evict_first();
                int w = work_index(0, W, sched, nqb, BH);
                for (int it = 0;; ++it) {
                    if (w < 0 && sched != 2)
                        break;
                    if (qi > 0)
                        mbar_wait(bQE, (qi - 1) & 1);  // every consumer warp holds the previous Q in registers
                    if (sched == 2) {
                        // Publish this Q phase's work index (released by the arrive below).
                        st_shared_s32(sIdx + 4 * (qi & 1), w);
                        if (w < 0) {
                            mbar_arrive(bQF);  // phase without data: "no more work"
                            sched_finish();
                            break;
                        }
                    }
                    int qb, bh;
                    decode_item(w, nqb, BH, causal, qb, bh);
                    const int m0 = qb * 128;
                    const int kv_end = causal ? min(L, m0 + 128) : L;
                    const int nt = (kv_end + 127) / 128;
                    mbar_arrive_tx(bQF, (uint32_t)kQB);
                    tma_load_tile<128>(sQa, tmQ, m0, bh, bQF, polQ);
                    ++qi;
                    produce_tma<NS>(sKa, bFK, bEK, tmK, kc++, 0, bh, polKV);
                    if (nt > 1)
                        produce_tma<NS>(sKa, bFK, bEK, tmK, kc++, 128, bh, polKV);
                    // sched 2: the next item is taken late, just before the wait for the last V
                    // slot of this item (about two tiles before the consumers finish it), so the
                    // counter hands items out in the order CTAs actually run dry (greedy
                    // longest-first) instead of reserving one item a whole item ahead. The atomic's
                    // latency overlaps that slot wait; its value is needed only after the loop.
                    unsigned int raw = 0u;
                    for (int j = 0; j < nt; ++j) {
                        if (sched == 2 && j == nt - 1)
                            raw = sched_grab();
                        produce_tma<NS>(sVa, bFV, bEV, tmV, vc++, j * 128, bh, polKV);
                        if (j + 2 < nt)
                            produce_tma<NS>(sKa, bFK, bEK, tmK, kc++, (j + 2) * 128, bh, polKV);
                    }
                    w = (sched == 2) ? sched_resolve(raw, W) : work_index(it + 1, W, sched, nqb, BH);
                }
            }
            return;
        }
        uint32_t prev_full = 0u;
        int kc = 0, vc = 0, qi = 0;
        for (int it = 0;; ++it) {
            const int w = work_index(it, W, sched, nqb, BH);
            if (w < 0)
                break;
            int qb, bh;
            decode_item(w, nqb, BH, causal, qb, bh);
            const int m0 = qb * 128;
            const int kv_end = causal ? min(L, m0 + 128) : L;
            const int nt = (kv_end + 127) / 128;
            const size_t hoff = (size_t)bh * (size_t)L * HD;
            const __half *kh = k + hoff;
            const __half *vh = v + hoff;
            if (qi > 0)
                mbar_wait(bQE, (qi - 1) & 1);
            wgp_load_tile(sQa, q + hoff, m0, L, ptid);
            cpa_publish(prev_full, bQF);
            ++qi;
            produce_cpa<NS>(sKa, bFK, bEK, kh, kc++, 0, L, ptid, prev_full);
            if (nt > 1)
                produce_cpa<NS>(sKa, bFK, bEK, kh, kc++, 128, L, ptid, prev_full);
            for (int j = 0; j < nt; ++j) {
                produce_cpa<NS>(sVa, bFV, bEV, vh, vc++, j * 128, L, ptid, prev_full);
                if (j + 2 < nt)
                    produce_cpa<NS>(sKa, bFK, bEK, kh, kc++, (j + 2) * 128, L, ptid, prev_full);
            }
        }
        cp_async_wait<0>();
        fence_proxy_async();
        if (prev_full != 0u)
            mbar_arrive(prev_full);  // the last tile
        return;
    }

    // ---------------- consumer warpgroups ----------------
#if PW == 4
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(CONSUMER_REGS));
#endif
    const int wg = warp >> 2;
    const int tq = lane & 3;
    const int wrow0 = warp * 16;
    const int bar_mine = PP_BAR0 + wg, bar_other = PP_BAR0 + 1 - wg;
    const uint32_t sSt = PERSIST ? sOa : sQa;  // output staging
    const unsigned char *stp = smem + (sSt - sQa);

    float o[16][4];
    float mrow[2], lrow[2], alpha[2];
    float s[NB][4];
    uint32_t p[NB / 2][4];
    uint32_t qf[8][4];
    int kc = 0, vc = 0, qi = 0;

    int w = work_index(0, W, sched, nqb, BH);
    if (w < 0)
        return;
    int bh, m0;
    {
        int qb0;
        decode_item(w, nqb, BH, causal, qb0, bh);
        m0 = qb0 * 128;
    }
    int nt = ((causal ? min(L, m0 + 128) : L) + 127) / 128;
    bool half_last = diag_half_last(m0, nt, L, causal, wg);

    if (wg == 1)
        bar_arrive_named(PP_BAR0, 256);  // warpgroup 0 takes the first turn

    // First work item: Q fragments, then S(0) in a turn of its own.
    load_q_frags(qf, sQa, bQF, bQE, qi, wrow0, lane);
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            o[j][e] = 0.f;
    mrow[0] = mrow[1] = -INFINITY;
    lrow[0] = lrow[1] = 0.f;
    {
        const int sk = kc % NS;
        mbar_wait(bFK + 8 * sk, (kc / NS) & 1);
        bar_named(bar_mine, 256);
        wg_fence();
        if (nt == 1 && half_last)
            issue_s_rs_h(s, qf, sKa + sk * kTB);
        else
            issue_s_rs(s, qf, sKa + sk * kTB);
        wg_commit();
        bar_arrive_named(bar_other, 256);
        wg_wait<0>();
        fence_acc(s);
        if (lane == 0)
            mbar_arrive(bEK + 8 * sk);
        ++kc;
        const bool need_mask = (128 > L) || (causal && (127 > m0 + wrow0));
        softmax_tile<NB>(s, mrow, lrow, alpha, 0, m0 + wrow0 + (lane >> 2), L, causal, need_mask, sl2, tq);
        pack_p<NB>(p, s);  // O is zero: its rescale by alpha(0) in the next turn is harmless
    }

    for (int it = 0;; ++it) {
        // Invariant here: S(0) of the current item is done, P(0) packed, O holds no PV of it yet.
        const int row0 = m0 + wrow0 + (lane >> 2);

        for (int t = 1; t < nt; ++t) {
            const int sk = kc % NS, sv = vc % NS;
            mbar_wait(bFK + 8 * sk, (kc / NS) & 1);
            mbar_wait(bFV + 8 * sv, (vc / NS) & 1);
            bar_named(bar_mine, 256);
            wg_fence();  // P was rewritten by ordinary instructions
            if (t == nt - 1 && half_last)
                issue_s_rs_h(s, qf, sKa + sk * kTB);
            else
                issue_s_rs(s, qf, sKa + sk * kTB);
            wg_commit();
            // While S(t) runs: O (PV(t-2) complete) goes to the scale of tile t-1's max.
            turn_rescale(o, alpha);
            wg_fence();  // O was rewritten by ordinary instructions
            issue_pv_k<8>(o, p, sVa + sv * kTB);
            wg_commit();
            bar_arrive_named(bar_other, 256);

            wg_wait<1>();  // S(t) complete; PV(t-1) may still run
            fence_acc(s);
            if (lane == 0)
                mbar_arrive(bEK + 8 * sk);
            ++kc;
            const int n1 = t * 128;
            const bool need_mask = (n1 + 128 > L) || (causal && (n1 + 127 > m0 + wrow0));
            softmax_tile<NB>(s, mrow, lrow, alpha, n1, row0, L, causal, need_mask, sl2, tq);

            wg_wait<0>();  // PV(t-1) complete
            fence_acc(o);
            fence_frag(p);
            if (lane == 0)
                mbar_arrive(bEV + 8 * sv);
            ++vc;
            pack_p<NB>(p, s);
        }

        __half *oh = out + (size_t)bh * (size_t)L * HD;
        int wn;
        if (sched == 2) {
            mbar_wait(bQF, qi & 1);  // the producer published the next index with this Q phase
            wn = ld_shared_s32(sIdx + 4 * (qi & 1));
        } else {
            wn = work_index(it + 1, W, sched, nqb, BH);
        }
        const int sv = vc % NS;

        if (wn < 0) {
            // Last item of this CTA: a turn with the last PV only.
            turn_rescale(o, alpha);
            mbar_wait(bFV + 8 * sv, (vc / NS) & 1);
            bar_named(bar_mine, 256);
            wg_fence();
            if (half_last)
                issue_pv_k<4>(o, p, sVa + sv * kTB);
            else
                issue_pv_k<8>(o, p, sVa + sv * kTB);
            wg_commit();
            // Warpgroup 1's last turn is the very last one: nobody waits for its hand-over.
            if (wg == 0)
                bar_arrive_named(bar_other, 256);
            wg_wait<0>();
            fence_acc(o);
            fence_frag(p);
            if (lane == 0)
                mbar_arrive(bEV + 8 * sv);
            ++vc;
            store_out(o, lrow, sSt, stp, oh, m0, L, wrow0, lane);
            break;
        }

        // Item boundary: one turn with S(0) of the next item and the last PV of this one.
        int qbn, bhn;
        decode_item(wn, nqb, BH, causal, qbn, bhn);
        const int m0n = qbn * 128;
        const int ntn = ((causal ? min(L, m0n + 128) : L) + 127) / 128;
        const bool half_last_n = diag_half_last(m0n, ntn, L, causal, wg);

        // Every S of this item is complete, so qf can take the next item's Q.
        load_q_frags(qf, sQa, bQF, bQE, qi, wrow0, lane);
        const int sk = kc % NS;
        mbar_wait(bFK + 8 * sk, (kc / NS) & 1);
        mbar_wait(bFV + 8 * sv, (vc / NS) & 1);
        bar_named(bar_mine, 256);
        wg_fence();
        if (ntn == 1 && half_last_n)
            issue_s_rs_h(s, qf, sKa + sk * kTB);
        else
            issue_s_rs(s, qf, sKa + sk * kTB);
        wg_commit();
        turn_rescale(o, alpha);
        wg_fence();
        if (half_last)
            issue_pv_k<4>(o, p, sVa + sv * kTB);
        else
            issue_pv_k<8>(o, p, sVa + sv * kTB);
        wg_commit();
        bar_arrive_named(bar_other, 256);

        wg_wait<1>();  // S(0) of the next item complete; the last PV of this item may still run
        fence_acc(s);
        if (lane == 0)
            mbar_arrive(bEK + 8 * sk);
        ++kc;
        float lfin[2];
        lfin[0] = lrow[0];
        lfin[1] = lrow[1];
        mrow[0] = mrow[1] = -INFINITY;
        lrow[0] = lrow[1] = 0.f;
        {
            const bool need_mask = (128 > L) || (causal && (127 > m0n + wrow0));
            softmax_tile<NB>(s, mrow, lrow, alpha, 0, m0n + wrow0 + (lane >> 2), L, causal, need_mask, sl2, tq);
        }

        wg_wait<0>();  // the last PV of this item complete
        fence_acc(o);
        fence_frag(p);
        if (lane == 0)
            mbar_arrive(bEV + 8 * sv);
        ++vc;
        pack_p<NB>(p, s);  // first, so S(0)'s fp32 registers are dead during the epilogue
        store_out(o, lfin, sSt, stp, oh, m0, L, wrow0, lane);
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                o[j][e] = 0.f;

        bh = bhn;
        m0 = m0n;
        nt = ntn;
        half_last = half_last_n;
    }
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// ---------------------------------------------------------------------------------------------
// Kernel (128-key tiles); which body it has depends on the compile pass.
// ---------------------------------------------------------------------------------------------
constexpr int kNS = NSTAGE;
constexpr int kSmemWs = kQB + 2 * kNS * kTB + (PERSIST ? kQB : 0) + (4 * kNS + 3) * 8;
static_assert(PERSIST == 1, "the persistent schedules need the separate output staging buffer");
constexpr int kSmemMma = (kBM + 4 * BN) * HD * (int)sizeof(__half);
constexpr int kSmemBytes = (kSmemMma > kSmemWs ? kSmemMma : kSmemWs) + 1024;  // + manual 1024-B alignment
static_assert(kSmemBytes <= 232448, "shared memory per block exceeds 227 KB");

template <int SCHED, int CAUSAL>
__global__ void __launch_bounds__(KTHREADS, 1)
flash_fwd_kernel(const __half *__restrict__ q, const __half *__restrict__ k, const __half *__restrict__ v,
                 __half *__restrict__ out, int L, int nqb, int BH, float sl2,
                 const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                 const __grid_constant__ CUtensorMap tmV, int use_tma)
{
    extern __shared__ __align__(1024) unsigned char smem_dyn[];
    const uint32_t raw = smem_u32(smem_dyn);
    unsigned char *smem = smem_dyn + (((raw + 1023u) & ~1023u) - raw);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    attn_ws_body<kNS, SCHED, CAUSAL>(q, k, v, out, L, nqb, BH, sl2, smem, &tmQ, &tmK, &tmV, use_tma);
#else
    if (threadIdx.x >= KNT)
        return;
    const int W = BH * nqb;
    const int fsched = SCHED == 2 ? 0 : SCHED;  // no work counter in this body
    for (int it = 0;; ++it) {
        const int w = work_index(it, W, fsched, nqb, BH);
        if (w < 0)
            break;
        int qb, bh;
        decode_item(w, nqb, BH, CAUSAL, qb, bh);
        attn_mma_body(q, k, v, out, L, CAUSAL, nqb, sl2, smem, bh, nqb - 1 - qb);
    }
#endif
}

// ---------------------------------------------------------------------------------------------
// Host: tensor maps for TMA (cuTensorMapEncodeTiled reached through the runtime's driver
// entry-point query, so no driver library is linked). Cached per (pointers, shape); if the entry
// point or the encoding is unavailable the cp.async producer is used.
// ---------------------------------------------------------------------------------------------
typedef CUresult (*EncodeTiledFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiledFn get_encode_fn()
{
    static bool tried = false;
    static EncodeTiledFn fn = nullptr;
    if (!tried) {
        tried = true;
        void *ptr = nullptr;
        cudaDriverEntryPointQueryResult qres = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &qres);
#else
        cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &ptr, cudaEnableDefault, &qres);
#endif
        if (err == cudaSuccess && qres == cudaDriverEntryPointSuccess && ptr != nullptr)
            fn = reinterpret_cast<EncodeTiledFn>(ptr);
        else
            (void)cudaGetLastError();
    }
    return fn;
}

// 3-D view [BH][L][128] of a q / k / v tensor, boxes of `rows` rows x 64 columns, 128B swizzle.
static bool encode_map(EncodeTiledFn fn, CUtensorMap *m, const void *ptr, int L, int BH, int rows)
{
    cuuint64_t dims[3] = {(cuuint64_t)HD, (cuuint64_t)L, (cuuint64_t)BH};
    cuuint64_t strides[2] = {(cuuint64_t)HD * 2, (cuuint64_t)L * HD * 2};
    cuuint32_t box[3] = {64, (cuuint32_t)rows, 1};
    cuuint32_t estr[3] = {1, 1, 1};
    return fn(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, const_cast<void *>(ptr), dims, strides, box, estr,
              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// One instantiation per (schedule, causal): attribute set once, grid from the schedule.
template <int SCHED, int CAUSAL>
static void launch_attn(const __half *q, const __half *k, const __half *v, __half *out, int L, int nqb, int BH,
                        float sl2, const CUtensorMap &mq, const CUtensorMap &mk, const CUtensorMap &mv, int cok,
                        int nsm)
{
    static bool attr_set = false;
    if (!attr_set) {
        cudaFuncSetAttribute(flash_fwd_kernel<SCHED, CAUSAL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kSmemBytes);
        attr_set = true;
    }
    const int W = BH * nqb;
    const int P3 = BH * ((nqb + 1) / 2);  // sched 3: (heavy, light) query-block pairs
    const int grid = (SCHED == 1) ? W : (SCHED == 3) ? (P3 < nsm ? P3 : nsm) : (W < nsm ? W : nsm);
    flash_fwd_kernel<SCHED, CAUSAL><<<(unsigned)grid, KTHREADS, kSmemBytes>>>(q, k, v, out, L, nqb, BH, sl2, mq, mk,
                                                                              mv, cok);
}

extern "C" void attention_prefill(const __half *q, const __half *k, const __half *v, int32_t causal,
                                  __half *out, int64_t batch_size, int64_t seq_len)
{
    if (batch_size <= 0 || seq_len <= 0)
        return;
    const int L = (int)seq_len;
    const int BH = (int)batch_size * NUM_HEADS;
    const int nqb = (L + kBM - 1) / kBM;  // 128-row query blocks in both bodies
    static bool configured = false;
    static int nsm = 0;
    if (!configured) {
        int dev = 0;
        cudaGetDevice(&dev);
        if (cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || nsm <= 0) {
            (void)cudaGetLastError();
            nsm = 132;
        }
        configured = true;
    }
    static CUtensorMap mq, mk, mv;
    static const void *cq = nullptr, *ck = nullptr, *cv = nullptr;
    static int cL = -1, cBH = -1, cok = 0;
    if (q != cq || k != ck || v != cv || L != cL || BH != cBH) {
        EncodeTiledFn fn = get_encode_fn();
        cok = 0;
        if (fn != nullptr)
            cok = encode_map(fn, &mq, q, L, BH, 128) && encode_map(fn, &mk, k, L, BH, 128) &&
                  encode_map(fn, &mv, v, L, BH, 128);
        if (!cok) {
            memset(&mq, 0, sizeof(mq));
            memset(&mk, 0, sizeof(mk));
            memset(&mv, 0, sizeof(mv));
        }
        cq = q;
        ck = k;
        cv = v;
        cL = L;
        cBH = BH;
    }

    const float sl2 = (float)(1.4426950408889634 / sqrt((double)HD));
    // Schedule 2 needs the TMA producer (the work counter lives there): without tensor maps the
    // static snake (0) runs instead.
    if (causal) {
        if (CSCHED == 2 && !cok)
            launch_attn<0, 1>(q, k, v, out, L, nqb, BH, sl2, mq, mk, mv, cok, nsm);
        else
            launch_attn<CSCHED, 1>(q, k, v, out, L, nqb, BH, sl2, mq, mk, mv, cok, nsm);
    } else {
        if (NCSCHED == 2 && !cok)
            launch_attn<0, 0>(q, k, v, out, L, nqb, BH, sl2, mq, mk, mv, cok, nsm);
        else
            launch_attn<NCSCHED, 0>(q, k, v, out, L, nqb, BH, sl2, mq, mk, mv, cok, nsm);
    }
}
