// The best mamba_scan kernel ksearch's agent-mode search found on the H200 (candidate 10 of
// results/2026-12-01-h200-mamba_scan-agent, 60 rounds): one warp per channel, time-parallel scan of
// the affine maps within 256-step chunks, software-pipelined loads. 114 us at 1x2048x4096 and
// 444 us at 4x2048x4096 (bench/results/searches.md; candidate 41, a channel x state-group design,
// reads 345 us there). Layout [batch, dim, seqlen].
// Mamba-1 selective scan (forward), warp-per-channel time-parallel scan, software pipelined.
// One warp per (b, d) channel; a block holds WARPS channels of one batch; time in chunks of
// 256 steps (lane l owns 8 consecutive steps). While chunk c is computed, the global loads for
// chunk c+1 (this lane's u, delta, z and this thread's share of the B/C tile) are already in
// flight into registers; B/C tiles live in a double-buffered fp32 shared array, so only one
// __syncthreads per chunk is needed. Per state n: lane-local affine pair (P, Q), warp shuffle
// scan, rerun from the incoming state with dA/dBu in registers (one exp per element).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>

#define DSTATE 16
#define WARPS 16  // ksearch: knob values=[4, 8, 16]
#define KSTEPS 8
#define CHUNK (32 * KSTEPS)
#define NTHREADS (WARPS * 32)
#define TILE_ITEMS (DSTATE * 32)                 /* uint4 items per B (or C) tile */
#define SITEMS ((TILE_ITEMS + NTHREADS - 1) / NTHREADS)
#define LOG2E_F 1.4426950408889634f
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float ex2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float softplus_f(float v)
{
    return v > 20.0f ? v : log1pf(expf(v));
}

__device__ __forceinline__ float2 h2_to_f2(unsigned int w)
{
    __half2 h = *reinterpret_cast<__half2 *>(&w);
    return __half22float2(h);
}

__device__ __forceinline__ unsigned int f2_to_h2(float a, float b)
{
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<unsigned int *>(&h);
}

__device__ __forceinline__ void unpack8(const uint4 r, float *f)
{
    float2 t;
    t = h2_to_f2(r.x); f[0] = t.x; f[1] = t.y;
    t = h2_to_f2(r.y); f[2] = t.x; f[3] = t.y;
    t = h2_to_f2(r.z); f[4] = t.x; f[5] = t.y;
    t = h2_to_f2(r.w); f[6] = t.x; f[7] = t.y;
}

// raw 8 halves p[t .. t+7] (zero past seqlen) packed in a uint4
__device__ __forceinline__ uint4 load8_raw(const __half *__restrict__ p, int t, int seqlen, bool vec)
{
    if (vec && t + 8 <= seqlen)
        return __ldg(reinterpret_cast<const uint4 *>(p + t));
    const unsigned short *q = reinterpret_cast<const unsigned short *>(p);
    unsigned int w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        unsigned int lo = 0, hi = 0;
        if (t + 2 * e < seqlen)
            lo = q[t + 2 * e];
        if (t + 2 * e + 1 < seqlen)
            hi = q[t + 2 * e + 1];
        w[e] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__global__ void __launch_bounds__(NTHREADS)
mamba_scan_kernel(const __half *__restrict__ u, const __half *__restrict__ delta,
                  const float *__restrict__ A, const __half *__restrict__ Bm,
                  const __half *__restrict__ Cm, const float *__restrict__ Dv,
                  const __half *__restrict__ z, const float *__restrict__ delta_bias,
                  __half *__restrict__ out, int dim, int seqlen, int blocks_per_batch, int vec)
{
    // [buffer][array B/C][DSTATE][2][32] float4 = 2 * 2 * 16 KB = 64 KB (dynamic)
    extern __shared__ float4 smem[];

    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int b = blockIdx.x / blocks_per_batch;
    const int d = (blockIdx.x - b * blocks_per_batch) * WARPS + warp;
    const bool active = d < dim;
    const int dd = active ? d : dim - 1;

    float a2[DSTATE], carry[DSTATE];
#pragma unroll
    for (int n = 0; n < DSTATE; n++) {
        a2[n] = __ldg(A + (size_t)dd * DSTATE + n) * LOG2E_F;
        carry[n] = 0.0f;
    }
    const float bias = __ldg(delta_bias + dd);
    const float Dd = __ldg(Dv + dd);
    const size_t row = ((size_t)b * dim + dd) * (size_t)seqlen;
    const __half *Bb = Bm + (size_t)b * DSTATE * seqlen;
    const __half *Cb = Cm + (size_t)b * DSTATE * seqlen;

    // prefetch registers
    uint4 nb[SITEMS], nc[SITEMS];
    uint4 nu, nd, nz;

    // issue loads for the chunk starting at c0_
    auto prefetch = [&](int c0_) {
#pragma unroll
        for (int s = 0; s < SITEMS; s++) {
            const int i = threadIdx.x + s * NTHREADS;
            if (i < TILE_ITEMS) {
                const int n = i >> 5, j = i & 31;
                nb[s] = load8_raw(Bb + (size_t)n * seqlen, c0_ + j * 8, seqlen, vec);
                nc[s] = load8_raw(Cb + (size_t)n * seqlen, c0_ + j * 8, seqlen, vec);
            }
        }
        if (active) {
            const int tl = c0_ + lane * KSTEPS;
            nu = load8_raw(u + row, tl, seqlen, vec);
            nd = load8_raw(delta + row, tl, seqlen, vec);
            nz = load8_raw(z + row, tl, seqlen, vec);
        }
    };

    prefetch(0);
    int buf = 0;
    for (int c0 = 0; c0 < seqlen; c0 += CHUNK, buf ^= 1) {
        float4 *sB = smem + buf * (2 * DSTATE * 2 * 32);
        float4 *sC = sB + DSTATE * 2 * 32;
        // commit the prefetched tile into this chunk's buffer (read two chunks ago; the
        // barrier of the previous iteration guarantees those readers are done)
#pragma unroll
        for (int s = 0; s < SITEMS; s++) {
            const int i = threadIdx.x + s * NTHREADS;
            if (i < TILE_ITEMS) {
                const int n = i >> 5, j = i & 31;
                float f[8];
                unpack8(nb[s], f);
                sB[(n * 2) * 32 + j] = make_float4(f[0], f[1], f[2], f[3]);
                sB[(n * 2 + 1) * 32 + j] = make_float4(f[4], f[5], f[6], f[7]);
                unpack8(nc[s], f);
                sC[(n * 2) * 32 + j] = make_float4(f[0], f[1], f[2], f[3]);
                sC[(n * 2 + 1) * 32 + j] = make_float4(f[4], f[5], f[6], f[7]);
            }
        }
        const uint4 cu = nu, cd = nd, cz = nz;
        __syncthreads();
        if (c0 + CHUNK < seqlen)
            prefetch(c0 + CHUNK);

        if (active) {
            const int t0 = c0 + lane * KSTEPS;
            float uf[KSTEPS], zf[KSTEPS], dt[KSTEPS], dtu[KSTEPS];
            unpack8(cu, uf);
            unpack8(cz, zf);
            unpack8(cd, dt);
#pragma unroll
            for (int k = 0; k < KSTEPS; k++) {
                // padded steps: identity pair (dA = 1, dBu = 0)
                dt[k] = (t0 + k < seqlen) ? softplus_f(dt[k] + bias) : 0.0f;
                dtu[k] = dt[k] * uf[k];
            }
            float y[KSTEPS];
#pragma unroll
            for (int k = 0; k < KSTEPS; k++)
                y[k] = 0.0f;

#pragma unroll
            for (int n = 0; n < DSTATE; n++) {
                const float4 b0 = sB[(n * 2) * 32 + lane];
                const float4 b1 = sB[(n * 2 + 1) * 32 + lane];
                const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
                float dA[KSTEPS], dBu[KSTEPS];
#pragma unroll
                for (int k = 0; k < KSTEPS; k++) {
                    dA[k] = ex2_approx(dt[k] * a2[n]);
                    dBu[k] = dtu[k] * bv[k];
                }
                float P = dA[0], Q = dBu[0];
#pragma unroll
                for (int k = 1; k < KSTEPS; k++) {
                    Q = fmaf(dA[k], Q, dBu[k]);
                    P = P * dA[k];
                }
#pragma unroll
                for (int off = 1; off < 32; off <<= 1) {
                    const float Pp = __shfl_up_sync(FULL_MASK, P, off);
                    const float Qp = __shfl_up_sync(FULL_MASK, Q, off);
                    if (lane >= off) {
                        Q = fmaf(P, Qp, Q);
                        P = P * Pp;
                    }
                }
                const float hend = fmaf(P, carry[n], Q);
                float h = __shfl_up_sync(FULL_MASK, hend, 1);
                if (lane == 0)
                    h = carry[n];
                carry[n] = __shfl_sync(FULL_MASK, hend, 31);
                const float4 c0v = sC[(n * 2) * 32 + lane];
                const float4 c1v = sC[(n * 2 + 1) * 32 + lane];
                const float cv[8] = {c0v.x, c0v.y, c0v.z, c0v.w, c1v.x, c1v.y, c1v.z, c1v.w};
#pragma unroll
                for (int k = 0; k < KSTEPS; k++) {
                    h = fmaf(dA[k], h, dBu[k]);
                    y[k] = fmaf(h, cv[k], y[k]);
                }
            }

            float o[KSTEPS];
#pragma unroll
            for (int k = 0; k < KSTEPS; k++) {
                const float zz = zf[k];
                const float gate = zz / (1.0f + __expf(-zz));
                o[k] = fmaf(Dd, uf[k], y[k]) * gate;
            }
            if (vec && t0 + KSTEPS <= seqlen) {
                uint4 w;
                w.x = f2_to_h2(o[0], o[1]);
                w.y = f2_to_h2(o[2], o[3]);
                w.z = f2_to_h2(o[4], o[5]);
                w.w = f2_to_h2(o[6], o[7]);
                *reinterpret_cast<uint4 *>(out + row + t0) = w;
            } else {
#pragma unroll
                for (int k = 0; k < KSTEPS; k++)
                    if (t0 + k < seqlen)
                        out[row + t0 + k] = __float2half_rn(o[k]);
            }
        }
    }
}

extern "C" void mamba_scan(const __half *u, const __half *delta, const float *A, const __half *B,
                           const __half *C, const float *D, const __half *z,
                           const float *delta_bias, __half *out, int64_t batch, int64_t dim,
                           int64_t seqlen)
{
    if (batch <= 0 || dim <= 0 || seqlen <= 0)
        return;
    const int bpb = (int)((dim + WARPS - 1) / WARPS);
    const long long blocks = (long long)batch * bpb;
    const uintptr_t align = (uintptr_t)u | (uintptr_t)delta | (uintptr_t)z | (uintptr_t)out |
                            (uintptr_t)B | (uintptr_t)C;
    const int vec = (seqlen % 8 == 0) && ((align & 15) == 0);
    const size_t shm = (size_t)2 * 2 * DSTATE * 2 * 32 * sizeof(float4);  // 64 KB
    static int configured = 0;
    if (!configured) {
        cudaFuncSetAttribute(mamba_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)shm);
        configured = 1;
    }
    mamba_scan_kernel<<<(unsigned int)blocks, NTHREADS, shm>>>(
        u, delta, A, B, C, D, z, delta_bias, out, (int)dim, (int)seqlen, bpb, vec);
}
