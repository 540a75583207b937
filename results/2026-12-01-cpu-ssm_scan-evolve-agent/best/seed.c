/* Mamba-1 selective scan (forward), fp32, NS = 16, AVX-512.
 * Lanes = 16 channels d. Time runs in tiles of 16 steps; delta/u tiles
 * [16 d x 16 t] are transposed in registers to [t][d]; dt = softplus(delta + bias)
 * and dt*u are vectorised over d. The recurrence for one tile runs in two passes
 * of 8 states each (n = 0..7, then n = 8..15): each pass keeps its 8 states in
 * registers, the other 8 wait in H[] (memory); partial sums of y over n are added
 * in Y[]. The y tile is transposed back to [d][t] and gated (D skip, silu). */
#include <stdint.h>
#include <immintrin.h>

#define NS 16
#define HALF 8
#define LOG2E 1.4426950408889634f
#define AI static inline __attribute__((always_inline))

/* 2^x, x any finite value; degree-6 polynomial on f in [-0.5, 0.5], scalef for 2^k
 * (large negative x -> 0, large positive -> inf). */
AI __m512 exp2v(__m512 x)
{
    __m512 k = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, k);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.000154035303933816f), f,
                               _mm512_set1_ps(0.00133335581464284f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.00961812910762848f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.0555041086648216f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.240226506959101f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.693147180559945f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

/* 2^x for the decay factors (x <= 0): degree-5 polynomial, constant term exactly 1,
 * other terms from Chebyshev economisation of the degree-7 Taylor series on [-0.5, 0.5]. */
AI __m512 exp2d5(__m512 x)
{
    __m512 k = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, k);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.0013400288857f), f,
                               _mm512_set1_ps(0.0096758923466f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.0555032745309f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.2402210916555f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931472066264f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

/* 1/d for 1 <= d <= ~1e30: rcp14 + one Newton step */
AI __m512 recip(__m512 d)
{
    __m512 r = _mm512_rcp14_ps(d);
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}

/* softplus(v) = max(v,0) + log1p(exp(-|v|)); log1p(w) = 2 atanh(w / (2 + w)), w in [0,1] */
AI __m512 softplus_v(__m512 v)
{
    const __m512 two = _mm512_set1_ps(2.0f);
    __m512 a = _mm512_abs_ps(v);
    __m512 w = exp2v(_mm512_mul_ps(a, _mm512_set1_ps(-LOG2E)));
    __m512 s = _mm512_mul_ps(w, recip(_mm512_add_ps(two, w)));
    __m512 s2 = _mm512_mul_ps(s, s);
    __m512 p = _mm512_set1_ps(2.0f / 11.0f);
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 9.0f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 7.0f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 5.0f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.0f / 3.0f));
    p = _mm512_fmadd_ps(p, s2, two);
    __m512 l = _mm512_mul_ps(p, s);
    return _mm512_add_ps(_mm512_max_ps(v, _mm512_setzero_ps()), l);
}

/* silu(z) = z / (1 + exp(-z)); e clamped to 1e30 so 1 + e and its reciprocal stay finite */
AI __m512 silu_v(__m512 zz)
{
    __m512 e = exp2v(_mm512_mul_ps(zz, _mm512_set1_ps(-LOG2E)));
    e = _mm512_min_ps(e, _mm512_set1_ps(1.0e30f));
    return _mm512_mul_ps(zz, recip(_mm512_add_ps(_mm512_set1_ps(1.0f), e)));
}

/* In-register transpose of a 16x16 fp32 tile: r[i][j] -> r[j][i]. */
AI void transpose16(__m512 *r)
{
    __m512 t[16], q[16], v[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i]     = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        q[4 * g + 0] = _mm512_shuffle_ps(t[4 * g + 0], t[4 * g + 2], 0x44);
        q[4 * g + 1] = _mm512_shuffle_ps(t[4 * g + 0], t[4 * g + 2], 0xEE);
        q[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        q[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int w = 0; w < 4; w++) {
        v[w]      = _mm512_shuffle_f32x4(q[w], q[4 + w], 0x88);
        v[4 + w]  = _mm512_shuffle_f32x4(q[w], q[4 + w], 0xDD);
        v[8 + w]  = _mm512_shuffle_f32x4(q[8 + w], q[12 + w], 0x88);
        v[12 + w] = _mm512_shuffle_f32x4(q[8 + w], q[12 + w], 0xDD);
    }
#pragma GCC unroll 8
    for (int w = 0; w < 8; w++) {
        r[w]     = _mm512_shuffle_f32x4(v[w], v[8 + w], 0x88);
        r[8 + w] = _mm512_shuffle_f32x4(v[w], v[8 + w], 0xDD);
    }
}

/* One pass over a tile for 8 states: H[0..7], A2h[0..7], B/C rows bt/ct (row stride 16).
 * first != 0: Y[j] = partial sum, else Y[j] += partial sum. */
AI void scan_half(__m512 *H, const __m512 *A2h, const float *bt, const float *ct,
                  const __m512 *DT, const __m512 *DTU, __m512 *Y, int nt, int first)
{
    __m512 h0 = H[0], h1 = H[1], h2 = H[2], h3 = H[3];
    __m512 h4 = H[4], h5 = H[5], h6 = H[6], h7 = H[7];
    const __m512 a0 = A2h[0], a1 = A2h[1], a2 = A2h[2], a3 = A2h[3];
    const __m512 a4 = A2h[4], a5 = A2h[5], a6 = A2h[6], a7 = A2h[7];

    for (int j = 0; j < nt; j++) {
        const __m512 dt = DT[j];
        const __m512 dtu = DTU[j];
        const float *bp = bt + j;
        const float *cp = ct + j;
        __m512 acc0, acc1;
#define STEP(hh, aa, n, acc, INIT)                                                   \
        {                                                                            \
            __m512 e_ = exp2d5(_mm512_mul_ps(dt, aa));                                \
            __m512 q_ = _mm512_mul_ps(dtu, _mm512_set1_ps(bp[(n) * 16]));            \
            hh = _mm512_fmadd_ps(e_, hh, q_);                                        \
            if (INIT) acc = _mm512_mul_ps(hh, _mm512_set1_ps(cp[(n) * 16]));         \
            else acc = _mm512_fmadd_ps(hh, _mm512_set1_ps(cp[(n) * 16]), acc);       \
        }
        STEP(h0, a0, 0, acc0, 1)
        STEP(h1, a1, 1, acc1, 1)
        STEP(h2, a2, 2, acc0, 0)
        STEP(h3, a3, 3, acc1, 0)
        STEP(h4, a4, 4, acc0, 0)
        STEP(h5, a5, 5, acc1, 0)
        STEP(h6, a6, 6, acc0, 0)
        STEP(h7, a7, 7, acc1, 0)
#undef STEP
        __m512 s = _mm512_add_ps(acc0, acc1);
        Y[j] = first ? s : _mm512_add_ps(Y[j], s);
    }
    H[0] = h0; H[1] = h1; H[2] = h2; H[3] = h3;
    H[4] = h4; H[5] = h5; H[6] = h6; H[7] = h7;
}

void ssm_scan(const float *u, const float *delta, const float *A, const float *Bm,
              const float *Cm, const float *Dskip, const float *z, const float *delta_bias,
              float *y, int64_t B, int64_t D, int64_t L)
{
    const __m512 zero = _mm512_setzero_ps();
    const __m512 vlog2e = _mm512_set1_ps(LOG2E);
    __attribute__((aligned(64))) float Bt[NS * 16];
    __attribute__((aligned(64))) float Ct[NS * 16];
    __m512 A2[16], H[16], X[16], U[16], DT[16], DTU[16], Y[16];

    for (int64_t b = 0; b < B; b++) {
        const float *Bb = Bm + b * NS * L;
        const float *Cb = Cm + b * NS * L;
        for (int64_t d0 = 0; d0 < D; d0 += 16) {
            const int nd = (D - d0 < 16) ? (int)(D - d0) : 16;
            const __mmask16 dmask = (__mmask16)((1u << nd) - 1u);

#pragma GCC unroll 16
            for (int r = 0; r < 16; r++)
                A2[r] = (r < nd) ? _mm512_mul_ps(_mm512_loadu_ps(A + (d0 + r) * NS), vlog2e) : zero;
            transpose16(A2);                       /* A2[n] = log2e * A[d0 + lane][n] */
            const __m512 bias = _mm512_maskz_loadu_ps(dmask, delta_bias + d0);

#pragma GCC unroll 16
            for (int n = 0; n < NS; n++)
                H[n] = zero;

            for (int64_t t0 = 0; t0 < L; t0 += 16) {
                const int nt = (L - t0 < 16) ? (int)(L - t0) : 16;
                const __mmask16 tmask = (__mmask16)((1u << nt) - 1u);

#pragma GCC unroll 16
                for (int n = 0; n < NS; n++) {
                    _mm512_store_ps(Bt + n * 16, _mm512_maskz_loadu_ps(tmask, Bb + n * L + t0));
                    _mm512_store_ps(Ct + n * 16, _mm512_maskz_loadu_ps(tmask, Cb + n * L + t0));
                }

#pragma GCC unroll 16
                for (int r = 0; r < 16; r++) {
                    if (r < nd) {
                        const int64_t off = (b * D + d0 + r) * L + t0;
                        if (t0 + 32 < L) {
                            _mm_prefetch((const char *)(delta + off + 32), _MM_HINT_T0);
                            _mm_prefetch((const char *)(u + off + 32), _MM_HINT_T0);
                            _mm_prefetch((const char *)(z + off + 32), _MM_HINT_T0);
                        }
                        X[r] = _mm512_maskz_loadu_ps(tmask, delta + off);
                        U[r] = _mm512_maskz_loadu_ps(tmask, u + off);
                    } else {
                        X[r] = zero;
                        U[r] = zero;
                    }
                }
                transpose16(X);
                transpose16(U);

#pragma GCC unroll 4
                for (int j = 0; j < 16; j++) {
                    __m512 dt = softplus_v(_mm512_add_ps(X[j], bias));
                    DT[j] = dt;
                    DTU[j] = _mm512_mul_ps(dt, U[j]);
                }

                scan_half(H, A2, Bt, Ct, DT, DTU, Y, nt, 1);
                scan_half(H + HALF, A2 + HALF, Bt + HALF * 16, Ct + HALF * 16, DT, DTU, Y, nt, 0);

                for (int j = nt; j < 16; j++)
                    Y[j] = zero;
                transpose16(Y);

                for (int r = 0; r < nd; r++) {
                    const int64_t off = (b * D + d0 + r) * L + t0;
                    __m512 uu = _mm512_maskz_loadu_ps(tmask, u + off);
                    __m512 zz = _mm512_maskz_loadu_ps(tmask, z + off);
                    __m512 o = _mm512_fmadd_ps(_mm512_set1_ps(Dskip[d0 + r]), uu, Y[r]);
                    o = _mm512_mul_ps(o, silu_v(zz));
                    _mm512_mask_storeu_ps(y + off, tmask, o);
                }
            }
        }
    }
}
