/* Mamba-1 selective scan (forward), fp32, NS = 16.
 * Channel-lane design: W channels d per vector lane (W = 8 with AVX2, W = 16
 * when the compiler targets AVX-512F), time processed in chunks of 8 (8x8
 * register transposes of delta/u/z/y), Bm/Cm broadcast.
 * exp via polynomial exp2 (log2(e) folded into A).  dA exp uses FMA range
 * reduction + degree-5 polynomial and skips the underflow clamp when no dt in
 * the chunk can push dt*A2 below -125.  The 16 states are scanned in two
 * halves of 8 so each half's state stays in registers.
 * softplus: max(v,0) + log1p(exp(-|v|)), log1p(w) = 2*atanh(w/(2+w)) series.
 * AVX-512 path: dA = 2^t via 16-entry table + degree-2 polynomial + scalef.
 * Channel blocks are processed in pairs per time chunk (4-state passes, 8
 * independent recurrences per step sharing each B/C broadcast). */
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <immintrin.h>

#define NS 16
#define AI static inline __attribute__((always_inline))

#if defined(__AVX512F__)
#define W 16
typedef __m512 V;
#define v_set1 _mm512_set1_ps
#define v_zero _mm512_setzero_ps
#define v_add _mm512_add_ps
#define v_sub _mm512_sub_ps
#define v_mul _mm512_mul_ps
#define v_div _mm512_div_ps
#define v_fmadd _mm512_fmadd_ps
#define v_fmsub _mm512_fmsub_ps
#define v_max _mm512_max_ps
#define v_min _mm512_min_ps
#define v_load _mm512_load_ps
#define v_bcast(p) _mm512_set1_ps(*(p))
#define v_asi _mm512_castps_si512
#define v_aps _mm512_castsi512_ps
#define vi_slli _mm512_slli_epi32
#define vi_add _mm512_add_epi32
#define vi_or _mm512_or_si512
#define v_any_gt(a, b) (_mm512_cmp_ps_mask((a), (b), _CMP_NLE_UQ) != 0)
#else
#define W 8
typedef __m256 V;
#define v_set1 _mm256_set1_ps
#define v_zero _mm256_setzero_ps
#define v_add _mm256_add_ps
#define v_sub _mm256_sub_ps
#define v_mul _mm256_mul_ps
#define v_div _mm256_div_ps
#define v_fmadd _mm256_fmadd_ps
#define v_fmsub _mm256_fmsub_ps
#define v_max _mm256_max_ps
#define v_min _mm256_min_ps
#define v_load _mm256_load_ps
#define v_bcast(p) _mm256_broadcast_ss(p)
#define v_asi _mm256_castps_si256
#define v_aps _mm256_castsi256_ps
#define vi_slli _mm256_slli_epi32
#define vi_add _mm256_add_epi32
#define vi_or _mm256_or_si256
#define v_any_gt(a, b) (_mm256_movemask_ps(_mm256_cmp_ps((a), (b), _CMP_NLE_UQ)) != 0)
#endif

#define NG (W / 8)   /* groups of 8 channels per vector */

/* 2^t, t already clamped to [-126, 127]; degree-5 polynomial */
AI V vexp2_core(V t)
{
    const V magic = v_set1(12582912.0f); /* 1.5 * 2^23 */
    V s = v_add(t, magic);
    V kf = v_sub(s, magic);
    V f = v_sub(t, kf);                  /* f in [-0.5, 0.5] */
    V p = v_set1(1.3333558e-3f);   /* degree 5 */
    p = v_fmadd(p, f, v_set1(9.6181291e-3f));
    p = v_fmadd(p, f, v_set1(5.5504109e-2f));
    p = v_fmadd(p, f, v_set1(2.4022651e-1f));
    p = v_fmadd(p, f, v_set1(6.9314718e-1f));
    p = v_fmadd(p, f, v_set1(1.0f));
    return v_aps(vi_add(v_asi(p), vi_slli(v_asi(s), 23)));
}

/* 2^t, any t */
AI V vexp2(V t)
{
    t = v_max(t, v_set1(-126.0f));
    t = v_min(t, v_set1(127.0f));
    return vexp2_core(t);
}

AI V poly5_exp2(V f)
{
    V p = v_set1(1.3333558e-3f);
    p = v_fmadd(p, f, v_set1(9.6181291e-3f));
    p = v_fmadd(p, f, v_set1(5.5504109e-2f));
    p = v_fmadd(p, f, v_set1(2.4022651e-1f));
    p = v_fmadd(p, f, v_set1(6.9314718e-1f));
    p = v_fmadd(p, f, v_set1(1.0f));
    return p;
}

#if W == 16
/* AVX-512 dA exp: t = k + j/16 + f, |f| <= 1/32; 2^(j/16) from a 16-entry
 * in-register table (vpermps), 2^f by a degree-2 polynomial, 2^k by scalef
 * (scalef uses floor(kf) = k, the table covers the fraction j/16). */
AI V exp2_tab(V t_or_dt, V a2, const int fused)
{
    const V magic = v_set1(786432.0f);  /* 1.5 * 2^19: ulp 1/16 */
    const V T = _mm512_setr_ps(
        1.0f, 1.0442737824274138f, 1.0905077326652577f, 1.1387886347566916f,
        1.1892071150027210f, 1.2418578120734840f, 1.2968395546510096f, 1.3542555469368927f,
        1.4142135623730951f, 1.4768261459394993f, 1.5422108254079407f, 1.6104903319492543f,
        1.6817928305074290f, 1.7562521603732995f, 1.8340080864093424f, 1.9152065613971472f);
    V s, kf, f;
    if (fused) {
        s = v_fmadd(t_or_dt, a2, magic);     /* round(16*dt*a2)/16 + magic */
        kf = v_sub(s, magic);
        f = v_fmsub(t_or_dt, a2, kf);        /* |f| <= 1/32 */
    } else {
        s = v_add(t_or_dt, magic);
        kf = v_sub(s, magic);
        f = v_sub(t_or_dt, kf);
    }
    V tb = _mm512_permutexvar_ps(_mm512_castps_si512(s), T);  /* 2^(j/16) */
    V q = v_fmadd(v_set1(0.24022650695910071f), f, v_set1(0.69314718055994531f));
    q = v_mul(q, f);                                         /* 2^f - 1 */
    V r = v_fmadd(tb, q, tb);
    return _mm512_scalef_ps(r, kf);
}

/* 2^(dt*a2), requires dt*a2 >= -125 (no clamp) */
AI V exp2_fast(V dt, V a2)
{
    return exp2_tab(dt, a2, 1);
}

/* 2^(dt*a2) for dt*a2 <= 0, clamped below at -120 (large dt gives ~0) */
AI V exp2_clamp(V dt, V a2)
{
    V t = v_max(v_mul(dt, a2), v_set1(-120.0f));
    return exp2_tab(t, a2, 0);
}
#else
/* 2^(dt*a2), requires dt*a2 >= -125 (no clamp) */
AI V exp2_fast(V dt, V a2)
{
    const V magic = v_set1(12582912.0f);
    V s = v_fmadd(dt, a2, magic);        /* round(dt*a2) + magic */
    V kf = v_sub(s, magic);
    V f = v_fmsub(dt, a2, kf);           /* f in [-0.5, 0.5] */
    V p = poly5_exp2(f);
    return v_aps(vi_add(v_asi(p), vi_slli(v_asi(s), 23)));
}

/* 2^(dt*a2) for dt*a2 <= 0, clamped below at -126 (large dt gives ~0) */
AI V exp2_clamp(V dt, V a2)
{
    const V magic = v_set1(12582912.0f);
    V t = v_max(v_mul(dt, a2), v_set1(-126.0f));
    V s = v_add(t, magic);
    V kf = v_sub(s, magic);
    V f = v_sub(t, kf);
    V p = poly5_exp2(f);
    return v_aps(vi_add(v_asi(p), vi_slli(v_asi(s), 23)));
}
#endif

/* softplus(v) = max(v,0) + log1p(exp(-|v|));
 * log1p(w) = 2*atanh(s), s = w/(2+w) in [0, 1/3] */
AI V vsoftplus(V v)
{
    V na = v_aps(vi_or(v_asi(v), v_asi(v_set1(-0.0f))));      /* -|v| */
    V t = v_max(v_mul(na, v_set1(1.44269504f)), v_set1(-126.0f));
    V w = vexp2_core(t);                                      /* (0, 1] */
    V s = v_div(w, v_add(w, v_set1(2.0f)));
    V s2 = v_mul(s, s);
    V p = v_set1(2.0f / 11.0f);
    p = v_fmadd(p, s2, v_set1(2.0f / 9.0f));
    p = v_fmadd(p, s2, v_set1(2.0f / 7.0f));
    p = v_fmadd(p, s2, v_set1(2.0f / 5.0f));
    p = v_fmadd(p, s2, v_set1(2.0f / 3.0f));
    p = v_fmadd(p, s2, v_set1(2.0f));
    return v_fmadd(s, p, v_max(v, v_zero()));
}

/* silu(v) = v / (1 + exp(-v)) */
AI V vsilu(V v)
{
    V e = vexp2(v_mul(v, v_set1(-1.44269504f)));
    return v_div(v, v_add(v_set1(1.0f), e));
}

AI void tr8(__m256 *r)
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]);
    __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
    __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
    __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
    __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* vector over all W channels at time step j, from NG transposed groups */
AI V from_groups(__m256 g[NG][8], int j)
{
#if W == 16
    return _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_castps256_ps512(g[0][j])), _mm256_castps_pd(g[1][j]), 1));
#else
    return g[0][j];
#endif
}

AI void to_groups(V v, __m256 g[NG][8], int j)
{
#if W == 16
    g[0][j] = _mm512_castps512_ps256(v);
    g[1][j] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
#else
    g[0][j] = v;
#endif
}

/* Scan 8 states (one half of NS) over the 8 time steps of a chunk.
 * h: 8 state vectors (in/out), A2: 8 scaled A vectors, Bp/Cp: this half's
 * first state row at the chunk's first time step, bs: row stride. */
AI void scan_half(V *h, const V *A2, const float *Bp, const float *Cp,
                  int64_t bs, const V *dtv, const V *dtuv, V *yacc,
                  const int clampit)
{
    V h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3];
    V h4 = h[4], h5 = h[5], h6 = h[6], h7 = h[7];
    for (int j = 0; j < 8; j++) {
        const V dt = dtv[j];
        const V dtu = dtuv[j];
        V a0 = v_zero();
        V a1 = v_zero();
#define STEP(n, hn, acc)                                                      \
        {                                                                     \
            V dA = clampit ? exp2_clamp(dt, A2[n]) : exp2_fast(dt, A2[n]);    \
            V bx = v_mul(dtu, v_bcast(Bp + (n) * bs + j));                    \
            hn = v_fmadd(dA, hn, bx);                                         \
            acc = v_fmadd(hn, v_bcast(Cp + (n) * bs + j), acc);               \
        }
        STEP(0, h0, a0)
        STEP(1, h1, a1)
        STEP(2, h2, a0)
        STEP(3, h3, a1)
        STEP(4, h4, a0)
        STEP(5, h5, a1)
        STEP(6, h6, a0)
        STEP(7, h7, a1)
#undef STEP
        yacc[j] = v_add(yacc[j], v_add(a0, a1));
    }
    h[0] = h0; h[1] = h1; h[2] = h2; h[3] = h3;
    h[4] = h4; h[5] = h5; h[6] = h6; h[7] = h7;
}

#if W == 16
/* AVX-512 (32 registers): all 16 states in one pass, state kept in registers. */
AI void scan_full(V *h, const V *A2, const float *Bp, const float *Cp,
                  int64_t bs, const V *dtv, const V *dtuv, V *yacc,
                  const int clampit)
{
    V h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3];
    V h4 = h[4], h5 = h[5], h6 = h[6], h7 = h[7];
    V h8 = h[8], h9 = h[9], h10 = h[10], h11 = h[11];
    V h12 = h[12], h13 = h[13], h14 = h[14], h15 = h[15];
    for (int j = 0; j < 8; j++) {
        const V dt = dtv[j];
        const V dtu = dtuv[j];
        V a0 = v_zero(), a1 = v_zero(), a2 = v_zero(), a3 = v_zero();
#define STEP(n, hn, acc)                                                      \
        {                                                                     \
            V dA = clampit ? exp2_clamp(dt, A2[n]) : exp2_fast(dt, A2[n]);    \
            V bx = v_mul(dtu, v_bcast(Bp + (n) * bs + j));                    \
            hn = v_fmadd(dA, hn, bx);                                         \
            acc = v_fmadd(hn, v_bcast(Cp + (n) * bs + j), acc);               \
        }
        STEP(0, h0, a0)
        STEP(1, h1, a1)
        STEP(2, h2, a2)
        STEP(3, h3, a3)
        STEP(4, h4, a0)
        STEP(5, h5, a1)
        STEP(6, h6, a2)
        STEP(7, h7, a3)
        STEP(8, h8, a0)
        STEP(9, h9, a1)
        STEP(10, h10, a2)
        STEP(11, h11, a3)
        STEP(12, h12, a0)
        STEP(13, h13, a1)
        STEP(14, h14, a2)
        STEP(15, h15, a3)
#undef STEP
        yacc[j] = v_add(yacc[j], v_add(v_add(a0, a1), v_add(a2, a3)));
    }
    h[0] = h0; h[1] = h1; h[2] = h2; h[3] = h3;
    h[4] = h4; h[5] = h5; h[6] = h6; h[7] = h7;
    h[8] = h8; h[9] = h9; h[10] = h10; h[11] = h11;
    h[12] = h12; h[13] = h13; h[14] = h14; h[15] = h15;
}
#endif

/* Scan 4 states of two channel blocks (A and B) over the 8 time steps of a
 * chunk: 8 independent recurrences per step, each B/C broadcast shared by
 * both blocks.  Bp/Cp point at this pass's first state row, bs = row stride. */
AI void scan_q2(V *hA, V *hB, const V *AA, const V *AB, const float *Bp, const float *Cp,
                int64_t bs, const V *dtA, const V *dtB, const V *duA, const V *duB,
                V *yA, V *yB, const int clampit)
{
    V a0 = hA[0], a1 = hA[1], a2 = hA[2], a3 = hA[3];
    V b0 = hB[0], b1 = hB[1], b2 = hB[2], b3 = hB[3];
    for (int j = 0; j < 8; j++) {
        const V dta = dtA[j], dtb = dtB[j];
        const V dua = duA[j], dub = duB[j];
        V sa0 = v_zero(), sa1 = v_zero(), sb0 = v_zero(), sb1 = v_zero();
#define STEP2(n, an, bn, sa, sb)                                                   \
        {                                                                          \
            V bn_ = v_bcast(Bp + (n) * bs + j);                                    \
            V cn_ = v_bcast(Cp + (n) * bs + j);                                    \
            V dAa = clampit ? exp2_clamp(dta, AA[n]) : exp2_fast(dta, AA[n]);      \
            V dAb = clampit ? exp2_clamp(dtb, AB[n]) : exp2_fast(dtb, AB[n]);      \
            an = v_fmadd(dAa, an, v_mul(dua, bn_));                                \
            bn = v_fmadd(dAb, bn, v_mul(dub, bn_));                                \
            sa = v_fmadd(an, cn_, sa);                                             \
            sb = v_fmadd(bn, cn_, sb);                                             \
        }
        STEP2(0, a0, b0, sa0, sb0)
        STEP2(1, a1, b1, sa1, sb1)
        STEP2(2, a2, b2, sa0, sb0)
        STEP2(3, a3, b3, sa1, sb1)
#undef STEP2
        yA[j] = v_add(yA[j], v_add(sa0, sa1));
        yB[j] = v_add(yB[j], v_add(sb0, sb1));
    }
    hA[0] = a0; hA[1] = a1; hA[2] = a2; hA[3] = a3;
    hB[0] = b0; hB[1] = b1; hB[2] = b2; hB[3] = b3;
}

/* Per-block state: W channels starting at d0 of batch b. */
typedef struct {
    V A2[NS];
    V h[NS];
    V biasv, dskv, dtmaxv;
    const float *drow[W], *urow[W], *zrow[W];
    float *yrow[W];
    int nv;
} Blk;

static void blk_setup(Blk *k, const float *u, const float *delta, const float *A,
                      const float *Dskip, const float *z, const float *delta_bias, float *y,
                      int64_t b, int64_t d0, int64_t D, int64_t L)
{
    const float LOG2E = 1.44269504088896341f;
    int nv = (D - d0 < W) ? (int)(D - d0) : W;
    int64_t dd[W];
    for (int i = 0; i < W; i++)
        dd[i] = d0 + (i < nv ? i : nv - 1);
    float tmpA[NS][W] __attribute__((aligned(64)));
    float tmpb[W] __attribute__((aligned(64)));
    float tmpD[W] __attribute__((aligned(64)));
    float maxabs = 0.0f;
    for (int i = 0; i < W; i++) {
        for (int n = 0; n < NS; n++) {
            float a2 = A[dd[i] * NS + n] * LOG2E;
            tmpA[n][i] = a2;
            float aa = fabsf(a2);
            if (aa > maxabs)
                maxabs = aa;
        }
        tmpb[i] = delta_bias[dd[i]];
        tmpD[i] = Dskip[dd[i]];
    }
    /* fast (unclamped) exp is valid while dt <= dtmax: dt*A2 >= -125 */
    const float dtmax = (maxabs > 0.0f) ? 125.0f / maxabs : 3.0e38f;
    k->dtmaxv = v_set1(dtmax);
    for (int n = 0; n < NS; n++) {
        k->A2[n] = v_load(tmpA[n]);
        k->h[n] = v_zero();
    }
    k->biasv = v_load(tmpb);
    k->dskv = v_load(tmpD);
    for (int i = 0; i < W; i++) {
        int64_t off = (b * D + dd[i]) * L;
        k->drow[i] = delta + off;
        k->urow[i] = u + off;
        k->zrow[i] = z + off;
        k->yrow[i] = y + off;
    }
    k->nv = nv;
}

/* Load, transpose and pre-process one 8-step chunk of a block:
 * dt = softplus(delta + bias), dtu = dt*u, gate = silu(z), yacc = D*u.
 * Returns nonzero when some dt needs the clamped exp path. */
AI int blk_prep(const Blk *k, int64_t t0, int tn, V *dtv, V *dtuv, V *gv, V *yacc)
{
    __m256 dg[NG][8], ug[NG][8], zg[NG][8];
    if (tn == 8) {
        for (int g = 0; g < NG; g++) {
            for (int i = 0; i < 8; i++) {
                dg[g][i] = _mm256_loadu_ps(k->drow[g * 8 + i] + t0);
                ug[g][i] = _mm256_loadu_ps(k->urow[g * 8 + i] + t0);
                zg[g][i] = _mm256_loadu_ps(k->zrow[g * 8 + i] + t0);
            }
        }
    } else {
        float td[W][8] __attribute__((aligned(32)));
        float tu[W][8] __attribute__((aligned(32)));
        float tz[W][8] __attribute__((aligned(32)));
        memset(td, 0, sizeof td);
        memset(tu, 0, sizeof tu);
        memset(tz, 0, sizeof tz);
        for (int i = 0; i < W; i++) {
            for (int j = 0; j < tn; j++) {
                td[i][j] = k->drow[i][t0 + j];
                tu[i][j] = k->urow[i][t0 + j];
                tz[i][j] = k->zrow[i][t0 + j];
            }
        }
        for (int g = 0; g < NG; g++) {
            for (int i = 0; i < 8; i++) {
                dg[g][i] = _mm256_load_ps(td[g * 8 + i]);
                ug[g][i] = _mm256_load_ps(tu[g * 8 + i]);
                zg[g][i] = _mm256_load_ps(tz[g * 8 + i]);
            }
        }
    }
    for (int g = 0; g < NG; g++) {
        tr8(dg[g]);
        tr8(ug[g]);
        tr8(zg[g]);
    }
    V dtm = v_zero();
    for (int j = 0; j < 8; j++) {
        V dv = from_groups(dg, j);
        V uv = from_groups(ug, j);
        V zv = from_groups(zg, j);
        V dt = vsoftplus(v_add(dv, k->biasv));
        dtv[j] = dt;
        dtm = v_max(dtm, dt);
        dtuv[j] = v_mul(dt, uv);
        gv[j] = vsilu(zv);
        yacc[j] = v_mul(k->dskv, uv);
    }
    /* NaN-safe: a NaN dt also takes the clamped path */
    return v_any_gt(dtm, k->dtmaxv);
}

/* y = yacc * gate, transposed back and stored for the block's valid rows. */
AI void blk_store(const Blk *k, int64_t t0, int tn, const V *yacc, const V *gv)
{
    __m256 yg[NG][8];
    for (int j = 0; j < 8; j++)
        to_groups(v_mul(yacc[j], gv[j]), yg, j);
    for (int g = 0; g < NG; g++) {
        tr8(yg[g]);
        for (int r = 0; r < 8; r++) {
            int i = g * 8 + r;
            if (i >= k->nv)
                break;
            if (tn == 8) {
                _mm256_storeu_ps(k->yrow[i] + t0, yg[g][r]);
            } else {
                float ty[8] __attribute__((aligned(32)));
                _mm256_store_ps(ty, yg[g][r]);
                for (int j = 0; j < tn; j++)
                    k->yrow[i][t0 + j] = ty[j];
            }
        }
    }
}

/* Single-block scan of all 16 states (candidate 6 path). */
AI void blk_scan1(Blk *k, const float *Bp, const float *Cp, int64_t bs,
                  const V *dtv, const V *dtuv, V *yacc, int need_clamp)
{
#if W == 16
    if (need_clamp)
        scan_full(k->h, k->A2, Bp, Cp, bs, dtv, dtuv, yacc, 1);
    else
        scan_full(k->h, k->A2, Bp, Cp, bs, dtv, dtuv, yacc, 0);
#else
    if (need_clamp) {
        scan_half(k->h, k->A2, Bp, Cp, bs, dtv, dtuv, yacc, 1);
        scan_half(k->h + 8, k->A2 + 8, Bp + 8 * bs, Cp + 8 * bs, bs, dtv, dtuv, yacc, 1);
    } else {
        scan_half(k->h, k->A2, Bp, Cp, bs, dtv, dtuv, yacc, 0);
        scan_half(k->h + 8, k->A2 + 8, Bp + 8 * bs, Cp + 8 * bs, bs, dtv, dtuv, yacc, 0);
    }
#endif
}

void ssm_scan(const float *u, const float *delta, const float *A, const float *Bm,
              const float *Cm, const float *Dskip, const float *z, const float *delta_bias,
              float *y, int64_t B, int64_t D, int64_t L)
{
    const int64_t nblk = (D + W - 1) / W;

    for (int64_t b = 0; b < B; b++) {
        const float *Bb = Bm + b * NS * L;
        const float *Cb = Cm + b * NS * L;

        /* channel blocks in pairs; a trailing odd block runs alone */
        for (int64_t kb = 0; kb < nblk; kb += 2) {
            const int pair = (kb + 1 < nblk);
            Blk P[2];
            blk_setup(&P[0], u, delta, A, Dskip, z, delta_bias, y, b, kb * W, D, L);
            if (pair)
                blk_setup(&P[1], u, delta, A, Dskip, z, delta_bias, y, b, (kb + 1) * W, D, L);

            for (int64_t t0 = 0; t0 < L; t0 += 8) {
                int tn = (L - t0 < 8) ? (int)(L - t0) : 8;
                const float *Bp, *Cp;
                int64_t bs;
                float Bt[NS][8] __attribute__((aligned(32)));
                float Ct[NS][8] __attribute__((aligned(32)));
                if (tn == 8) {
                    Bp = Bb + t0;
                    Cp = Cb + t0;
                    bs = L;
                } else {
                    memset(Bt, 0, sizeof Bt);
                    memset(Ct, 0, sizeof Ct);
                    for (int n = 0; n < NS; n++) {
                        for (int j = 0; j < tn; j++) {
                            Bt[n][j] = Bb[n * L + t0 + j];
                            Ct[n][j] = Cb[n * L + t0 + j];
                        }
                    }
                    Bp = &Bt[0][0];
                    Cp = &Ct[0][0];
                    bs = 8;
                }

                V dtv[2][8], dtuv[2][8], gv[2][8], yacc[2][8];
                int nc = blk_prep(&P[0], t0, tn, dtv[0], dtuv[0], gv[0], yacc[0]);
                if (pair) {
                    nc |= blk_prep(&P[1], t0, tn, dtv[1], dtuv[1], gv[1], yacc[1]);
                    if (nc) {
                        for (int q = 0; q < NS; q += 4)
                            scan_q2(P[0].h + q, P[1].h + q, P[0].A2 + q, P[1].A2 + q,
                                    Bp + q * bs, Cp + q * bs, bs, dtv[0], dtv[1],
                                    dtuv[0], dtuv[1], yacc[0], yacc[1], 1);
                    } else {
                        for (int q = 0; q < NS; q += 4)
                            scan_q2(P[0].h + q, P[1].h + q, P[0].A2 + q, P[1].A2 + q,
                                    Bp + q * bs, Cp + q * bs, bs, dtv[0], dtv[1],
                                    dtuv[0], dtuv[1], yacc[0], yacc[1], 0);
                    }
                    blk_store(&P[0], t0, tn, yacc[0], gv[0]);
                    blk_store(&P[1], t0, tn, yacc[1], gv[1]);
                } else {
                    blk_scan1(&P[0], Bp, Cp, bs, dtv[0], dtuv[0], yacc[0], nc);
                    blk_store(&P[0], t0, tn, yacc[0], gv[0]);
                }
            }
        }
    }
}
