/* Mamba-1 selective scan (forward), fp32, NS = 16.
 * State-lanes mapping: one __m512 holds h[0..15] of one channel.
 * Per batch: Bm repacked into BT[t][16]; Cm repacked per pair of steps
 * (j even) as [C_j[0..7] | C_j+1[0..7]], [C_j[8..15] | C_j+1[8..15]] so the
 * first reduction level is shuffle(h_j,h_j+1) * C-pair with one mul + fma.
 * Per channel: the prelude (dt = softplus(delta + bias), dtu = dt*u, gate =
 * silu(z), and the table split of dt) lives in double-buffered slots; the
 * prelude and the exp tables of channel d+1 are computed inside the scan
 * blocks of channel d.
 * Scan exp: m = round(16*dt), delta = dt - m/16, p = P[m&15]*Q[m>>4]*(1+z(delta*A)),
 * P[i] = 2^(A2*i/16), Q[j] = 2^(A2*j); blocks with m > 127 use the table exp below.
 * exp2 (prelude, tables, fallback): 32-entry table 2^(j/32) (two zmm, vpermt2ps)
 * selected by the low bits of x + 1.5*2^18, economised degree-2 polynomial, scalef. */
#include <stdint.h>
#include <stdlib.h>
#include <immintrin.h>

#define NS 16

#define MAGIC 393216.0f   /* 1.5 * 2^18: x + MAGIC rounds x to a multiple of 1/32 (|x| < 2^17) */
#define EA1 0.69315734367f
#define EA2 0.24022885510f

#define RND _MM_FROUND_CUR_DIRECTION

#define QROWS 4                    /* Q[j], j < 4: table path for dt < ~3.97 */
#define MMAX (16 * QROWS - 1)      /* largest m on the table path */
#define TROWS (16 * QROWS)         /* rows of one channel's table: PQ[m] = 2^(A2*m/16), m < 64 */
#define CS2 0.5000915527f          /* 1/2 + S^2/24, S = 1.5/32 */
#define CS3 0.1666666667f
#define CC0 (-2.514571e-8f)        /* -S^4/192 */

static inline __m512 exp2_tab(__m512 x, __m512 tlo, __m512 thi)
{
    const __m512 magic = _mm512_set1_ps(MAGIC);
    /* _round builtins: not contracted with the producer of x into FMAs */
    __m512 k = _mm512_add_round_ps(x, magic, RND);
    __m512 r = _mm512_sub_round_ps(k, magic, RND);
    __m512 f = _mm512_sub_round_ps(x, r, RND);
    __m512 T = _mm512_permutex2var_ps(tlo, _mm512_castps_si512(k), thi);
    __m512 c = _mm512_fmadd_ps(_mm512_set1_ps(EA2), f, _mm512_set1_ps(EA1));
    __m512 tf = _mm512_mul_ps(T, f);
    __m512 e = _mm512_fmadd_ps(tf, c, T);
    return _mm512_scalef_ps(e, r);
}

/* slot layout (floats): dt | dtu | gate | delta | row1 (int) | row2 (int) | flags (int, per block) */
static inline void prelude_block(const float *ur, const float *dr, const float *zr,
                                 __m512 biasv, int64_t t0, int64_t L, int64_t Lp,
                                 float *slot, int use_tab, __m512 tlo, __m512 thi)
{
    const __m512 nlog2e = _mm512_set1_ps(-1.4426950408889634f);
    const __m512 zero = _mm512_setzero_ps();
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 two = _mm512_set1_ps(2.0f);
    __mmask16 m = (t0 + 16 <= L) ? (__mmask16)0xFFFF
                                 : (__mmask16)((1u << (unsigned)(L - t0)) - 1u);
    __m512 uv = _mm512_maskz_loadu_ps(m, ur + t0);
    __m512 dv = _mm512_maskz_loadu_ps(m, dr + t0);
    __m512 zv = _mm512_maskz_loadu_ps(m, zr + t0);
    __m512 v = _mm512_add_ps(dv, biasv);
    __m512 xe = _mm512_max_ps(_mm512_mul_ps(_mm512_abs_ps(v), nlog2e), _mm512_set1_ps(-200.0f));
    __m512 e = exp2_tab(xe, tlo, thi);                                  /* exp(-|v|) in (0,1] */
    __m512 s = _mm512_div_ps(e, _mm512_add_ps(e, two));                 /* e/(2+e) in (0,1/3] */
    __m512 s2 = _mm512_mul_ps(s, s);
    __m512 pl = _mm512_set1_ps(2.0f / 13.0f);   /* 2*atanh series, the 2 folded in */
    pl = _mm512_fmadd_ps(pl, s2, _mm512_set1_ps(2.0f / 11.0f));
    pl = _mm512_fmadd_ps(pl, s2, _mm512_set1_ps(2.0f / 9.0f));
    pl = _mm512_fmadd_ps(pl, s2, _mm512_set1_ps(2.0f / 7.0f));
    pl = _mm512_fmadd_ps(pl, s2, _mm512_set1_ps(2.0f / 5.0f));
    pl = _mm512_fmadd_ps(pl, s2, _mm512_set1_ps(2.0f / 3.0f));
    pl = _mm512_fmadd_ps(pl, s2, two);
    __m512 l1p = _mm512_mul_ps(s, pl);                                  /* log1p(e) */
    __m512 dt = _mm512_add_ps(_mm512_max_ps(v, zero), l1p);
    /* pad lanes keep a finite dt; their dtu is 0 and their y is not stored */
    _mm512_store_ps(slot + t0, _mm512_min_ps(dt, _mm512_set1_ps(30000.0f)));
    _mm512_store_ps(slot + Lp + t0, _mm512_mul_ps(dt, uv));
    __m512 xz = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(zv, nlog2e), _mm512_set1_ps(-200.0f)),
                              _mm512_set1_ps(100.0f));
    __m512 ez = exp2_tab(xz, tlo, thi);                                 /* exp(-z), finite */
    _mm512_store_ps(slot + 2 * Lp + t0, _mm512_div_ps(zv, _mm512_add_ps(one, ez)));

    /* table split of dt: m = round(16 dt), delta = dt - m/16 (exact), row offsets */
    __m512 mm = _mm512_roundscale_ps(_mm512_mul_ps(dt, _mm512_set1_ps(16.0f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_store_ps(slot + 3 * Lp + t0, _mm512_fmadd_ps(mm, _mm512_set1_ps(-0.0625f), dt));
    __mmask16 big = _mm512_cmp_ps_mask(mm, _mm512_set1_ps((float)MMAX + 0.5f), _CMP_GT_OQ);
    __m512i mi = _mm512_cvtps_epi32(_mm512_min_ps(mm, _mm512_set1_ps((float)MMAX)));
    int32_t *r1 = (int32_t *)(slot + 4 * Lp);
    int32_t *r2 = (int32_t *)(slot + 5 * Lp);
    int32_t *flags = (int32_t *)(slot + 6 * Lp);
    (void)r2;
    _mm512_store_si512((void *)(r1 + t0), _mm512_slli_epi32(mi, 4));   /* row offset of PQ[m] */
    flags[t0 >> 4] = (!use_tab) || (big != 0);
}

/* a channel's combined exp table PQ[16j + i] = P[i]*Q[j], P[i] = 2^(A2*i/16), Q[j] = 2^(A2*j):
 * 16 + QROWS accurate vector exps and 16*QROWS products */
static inline void build_pq(__m512 A2, float *tab, __m512 tlo, __m512 thi)
{
    __m512 P[16], Q[QROWS];
    for (int i = 0; i < 16; i++)
        P[i] = exp2_tab(_mm512_mul_ps(A2, _mm512_set1_ps((float)i * 0.0625f)), tlo, thi);
    for (int j = 0; j < QROWS; j++)
        Q[j] = exp2_tab(_mm512_mul_ps(A2, _mm512_set1_ps((float)j)), tlo, thi);
    for (int j = 0; j < QROWS; j++)
        for (int i = 0; i < 16; i++)
            _mm512_store_ps(tab + (16 * j + i) * 16, _mm512_mul_ps(P[i], Q[j]));
}

/* reduction tree levels 2..4 */
static inline __m512 comb2(__m512 a, __m512 b)
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
static inline __m512 comb3(__m512 a, __m512 b)
{
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
}
static inline __m512 comb4(__m512 a, __m512 b)
{
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

/* in-register 16x16 transpose: o[j][i] = r[i][j] (unpack, shuffle_ps, 2 x shuffle_f32x4) */
static inline void tr16(const __m512 *r, __m512 *o)
{
    __m512 t[16], w[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) {
        w[4 * k + 0] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        w[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
        w[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        w[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
    }
    for (int m = 0; m < 4; m++) {
        t[m] = _mm512_shuffle_f32x4(w[m], w[4 + m], 0x88);
        t[4 + m] = _mm512_shuffle_f32x4(w[m], w[4 + m], 0xDD);
        t[8 + m] = _mm512_shuffle_f32x4(w[8 + m], w[12 + m], 0x88);
        t[12 + m] = _mm512_shuffle_f32x4(w[8 + m], w[12 + m], 0xDD);
    }
    for (int m = 0; m < 4; m++) {
        o[m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0x88);
        o[8 + m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0xDD);
        o[4 + m] = _mm512_shuffle_f32x4(t[4 + m], t[12 + m], 0x88);
        o[12 + m] = _mm512_shuffle_f32x4(t[4 + m], t[12 + m], 0xDD);
    }
}

/* fallback step (dt >= ~8 somewhere in the block): table exp of dt*A2 */
#define FSTEP(j, dst) do {                                                          \
        __m512 p_ = exp2_tab(_mm512_mul_ps(_mm512_set1_ps(dtp[(j)]), A2), tlo, thi);\
        __m512 q_ = _mm512_mul_ps(_mm512_set1_ps(dtup[(j)]),                        \
                                  _mm512_load_ps(bt + (j) * 16));                   \
        h = _mm512_fmadd_ps(p_, h, q_);                                             \
        dst = h;                                                                    \
    } while (0)

/* table step: p = PQ * (1 + z), PQ = P[m&15] * Q[m>>4], z = C0 + s + c2 s^2 + c3 s^3, s = delta*A */
#define TSTEP(j, dst) do {                                                          \
        __m512 dl_ = _mm512_set1_ps(dlp[(j)]);                                      \
        __m512 z_ = _mm512_fmadd_ps(dl_, _mm512_fmadd_ps(dl_,                       \
                        _mm512_fmadd_ps(dl_, V3, V2), V1), c0v);                    \
        __m512 pq_ = _mm512_load_ps(ptab + r1p[(j)]);                               \
        __m512 p_ = _mm512_fmadd_ps(pq_, z_, pq_);                                  \
        __m512 q_ = _mm512_mul_ps(_mm512_set1_ps(dtup[(j)]),                        \
                                  _mm512_load_ps(bt + (j) * 16));                   \
        h = _mm512_fmadd_ps(p_, h, q_);                                             \
        dst = h;                                                                    \
    } while (0)

/* two steps j, j+1 and the fused first reduction level */
#define PAIRG(S, j, dst) do {                                                       \
        __m512 ha_, hb_;                                                            \
        S((j), ha_);                                                                \
        S((j) + 1, hb_);                                                            \
        __m512 lo_ = _mm512_shuffle_f32x4(ha_, hb_, 0x44);                          \
        __m512 hi_ = _mm512_shuffle_f32x4(ha_, hb_, 0xEE);                          \
        dst = _mm512_fmadd_ps(hi_, _mm512_load_ps(ct + ((j) + 1) * 16),            \
                              _mm512_mul_ps(lo_, _mm512_load_ps(ct + (j) * 16)));   \
    } while (0)

/* 16 steps with step macro S, result: res = 16 consecutive state sums */
#define BLOCK16(S) do {                                                             \
        __m512 s0, s1, q0, q1, x0, x1;                                              \
        PAIRG(S, 0, s0); PAIRG(S, 2, s1);                                           \
        q0 = comb2(s0, s1);                                                         \
        PAIRG(S, 4, s0); PAIRG(S, 6, s1);                                           \
        q1 = comb2(s0, s1);                                                         \
        x0 = comb3(q0, q1);                                                         \
        PAIRG(S, 8, s0); PAIRG(S, 10, s1);                                          \
        q0 = comb2(s0, s1);                                                         \
        PAIRG(S, 12, s0); PAIRG(S, 14, s1);                                         \
        q1 = comb2(s0, s1);                                                         \
        x1 = comb3(q0, q1);                                                         \
        res = _mm512_permutexvar_ps(perm, comb4(x0, x1));                           \
    } while (0)

void ssm_scan(const float *u, const float *delta, const float *A, const float *Bm,
              const float *Cm, const float *Dskip, const float *z, const float *delta_bias,
              float *y, int64_t B, int64_t D, int64_t L)
{
    const int64_t nblk = (L + 15) / 16;
    const int64_t Lp = nblk * 16;
    const int64_t nblkp = (nblk + 15) & ~(int64_t)15;
    const int64_t slotsz = 6 * Lp + nblkp;
    const size_t nfl = (size_t)(Lp * 16 * 2 + 2 * slotsz + 2 * TROWS * 16);
    float *buf = (float *)aligned_alloc(64, nfl * sizeof(float));
    if (!buf)
        return;
    float *BT = buf;
    float *CT = BT + Lp * 16;
    float *slots[2], *tabs[2];
    slots[0] = CT + Lp * 16;
    slots[1] = slots[0] + slotsz;
    tabs[0] = slots[1] + slotsz;
    tabs[1] = tabs[0] + TROWS * 16;
    /* memory-table exp only where the per-channel table build (~20 vector exps +
     * 64 products) is small against the scan; short sequences use the register-table exp */
    const int use_tab = (L >= 256);

    /* table 2^(j/32), j = 0..31 */
    static const double t16[16] = {
        1.0, 1.0442737824274138, 1.0905077326652577, 1.1387886347566916,
        1.1892071150027210, 1.2418578120734840, 1.2968395546510096, 1.3542555469368927,
        1.4142135623730951, 1.4768261459394993, 1.5422108254079407, 1.6104903319492543,
        1.6817928305074290, 1.7562521603732995, 1.8340080864093424, 1.9152065613971474};
    float t32[32] __attribute__((aligned(64)));
    for (int i = 0; i < 16; i++) {
        t32[2 * i] = (float)t16[i];
        t32[2 * i + 1] = (float)(t16[i] * 1.0218971486541166);
    }
    const __m512 tlo = _mm512_load_ps(t32);
    const __m512 thi = _mm512_load_ps(t32 + 16);

    const __m512 log2e = _mm512_set1_ps(1.4426950408889634f);
    const __m512 zero = _mm512_setzero_ps();
    const __m512 c0v = _mm512_set1_ps(CC0);
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);

    for (int64_t b = 0; b < B; b++) {
        const float *Bb = Bm + b * NS * L;
        const float *Cb = Cm + b * NS * L;
        /* vectorised repack, 16 steps at a time: 16 masked row loads, in-register
         * transpose, stores (pad steps come out as zeros) */
        for (int64_t t0 = 0; t0 < Lp; t0 += 16) {
            const __mmask16 tm = (t0 + 16 <= L) ? (__mmask16)0xFFFF
                                                : (__mmask16)((1u << (unsigned)(L - t0)) - 1u);
            __m512 rows[16], cols[16];
            for (int n = 0; n < NS; n++)
                rows[n] = _mm512_maskz_loadu_ps(tm, Bb + (int64_t)n * L + t0);
            tr16(rows, cols);
            for (int j = 0; j < 16; j++)
                _mm512_store_ps(BT + (t0 + j) * 16, cols[j]);
            for (int n = 0; n < NS; n++)
                rows[n] = _mm512_maskz_loadu_ps(tm, Cb + (int64_t)n * L + t0);
            tr16(rows, cols);
            for (int j = 0; j < 16; j += 2) {
                _mm512_store_ps(CT + (t0 + j) * 16, _mm512_shuffle_f32x4(cols[j], cols[j + 1], 0x44));
                _mm512_store_ps(CT + (t0 + j + 1) * 16, _mm512_shuffle_f32x4(cols[j], cols[j + 1], 0xEE));
            }
        }

        /* prelude and exp table of channel 0 run alone */
        {
            const int64_t row = (b * D) * L;
            const __m512 biasv = _mm512_set1_ps(delta_bias[0]);
            for (int64_t t0 = 0; t0 < Lp; t0 += 16)
                prelude_block(u + row, delta + row, z + row, biasv, t0, L, Lp, slots[0], use_tab, tlo, thi);
            if (use_tab)
                build_pq(_mm512_mul_ps(_mm512_loadu_ps(A), log2e), tabs[0], tlo, thi);
        }

        for (int64_t d = 0; d < D; d++) {
            const int64_t row = (b * D + d) * L;
            const float *ur = u + row;
            float *yr = y + row;
            const __m512 Dsk = _mm512_set1_ps(Dskip[d]);
            const float *slot = slots[d & 1];
            const float *dtbuf = slot, *dtubuf = slot + Lp, *gbuf = slot + 2 * Lp, *dlbuf = slot + 3 * Lp;
            const int32_t *r1buf = (const int32_t *)(slot + 4 * Lp);
            const int32_t *flags = (const int32_t *)(slot + 6 * Lp);
            const float *ptab = tabs[d & 1];

            /* next channel's prelude and table, interleaved block by block */
            const int has_next = (d + 1 < D);
            const int64_t nrow = has_next ? row + L : row;
            const int64_t nd = has_next ? d + 1 : d;
            const __m512 nbiasv = _mm512_set1_ps(delta_bias[nd]);
            const __m512 nA2 = _mm512_mul_ps(_mm512_loadu_ps(A + nd * NS), log2e);
            float *nslot = slots[(d + 1) & 1];
            float *ntab = tabs[(d + 1) & 1];

            const __m512 Anat = _mm512_loadu_ps(A + d * NS);
            const __m512 A2 = _mm512_mul_ps(Anat, log2e);
            const __m512 V1 = Anat;
            const __m512 A_sq = _mm512_mul_ps(Anat, Anat);
            const __m512 V2 = _mm512_mul_ps(_mm512_set1_ps(CS2), A_sq);
            const __m512 V3 = _mm512_mul_ps(_mm512_set1_ps(CS3), _mm512_mul_ps(A_sq, Anat));
            __m512 h = zero;
            for (int64_t t0 = 0; t0 < Lp; t0 += 16) {
                const float *dtp = dtbuf + t0;
                const float *dtup = dtubuf + t0;
                const float *dlp = dlbuf + t0;
                const int32_t *r1p = r1buf + t0;
                const float *bt = BT + t0 * 16;
                const float *ct = CT + t0 * 16;
                __m512 res;
                if (flags[t0 >> 4])
                    BLOCK16(FSTEP);
                else
                    BLOCK16(TSTEP);

                __mmask16 m = (t0 + 16 <= L) ? (__mmask16)0xFFFF
                                             : (__mmask16)((1u << (unsigned)(L - t0)) - 1u);
                __m512 uv = _mm512_maskz_loadu_ps(m, ur + t0);
                __m512 out = _mm512_mul_ps(_mm512_fmadd_ps(Dsk, uv, res), _mm512_load_ps(gbuf + t0));
                _mm512_mask_storeu_ps(yr + t0, m, out);

                /* next channel's prelude block (and its exp table once) */
                if (has_next) {
                    prelude_block(u + nrow, delta + nrow, z + nrow, nbiasv, t0, L, Lp, nslot, use_tab, tlo, thi);
                    if (use_tab && t0 == 0)
                        build_pq(nA2, ntab, tlo, thi);
                }
            }
        }
    }
    free(buf);
}
