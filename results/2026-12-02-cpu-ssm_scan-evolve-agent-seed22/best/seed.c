#include <stdint.h>
#include <math.h>
#include <immintrin.h>

#define NS 16

typedef union { float f; uint32_t u; } fu_t;
#define TC 64
#define GB 16

/* 2^x: f = x - floor(x) in [0,1), Q(f) ~ 2^f (deg 5, rel err ~2e-7, exact at f=0,1), times 2^floor(x) */
static inline __m512 exp2q(__m512 x)
{
    __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_set1_ps(0.00189508702f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.00894606058f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.05586364474f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24014050889f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.69315469284f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, x);
}

/* log2(w), w normal positive: w = m * 2^k, m in ~[0.75, 1.5], ln m = 2 atanh((m-1)/(m+1)) */
static inline __m512 log2v(__m512 w)
{
    __m512 k = _mm512_getexp_ps(_mm512_mul_ps(w, _mm512_set1_ps(1.33333333f)));
    __m512 m = _mm512_scalef_ps(w, _mm512_sub_ps(_mm512_setzero_ps(), k));
    __m512 one = _mm512_set1_ps(1.0f);
    __m512 s = _mm512_div_ps(_mm512_sub_ps(m, one), _mm512_add_ps(m, one));
    __m512 s2 = _mm512_mul_ps(s, s);
    __m512 p = _mm512_set1_ps(1.0f / 9.0f);
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(1.0f / 7.0f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(1.0f / 5.0f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(1.0f / 3.0f));
    p = _mm512_fmadd_ps(p, s2, one);
    __m512 l = _mm512_mul_ps(_mm512_mul_ps(s, p), _mm512_set1_ps(2.8853900817779268f));
    return _mm512_add_ps(k, l);
}

/* softplus in the log2 domain: given yv = v*log2e, returns softplus(v)*log2e
 * = max(yv,0) + log2(1 + 2^-|yv|);  log2(1+e) = 2*log2e*atanh(s), s = e/(2+e) <= 1/3 */
static inline __m512 softplus2v(__m512 yv)
{
    __m512 nab = _mm512_or_ps(yv, _mm512_set1_ps(-0.0f));
    __m512 e = exp2q(nab);
    __m512 s = _mm512_div_ps(e, _mm512_add_ps(e, _mm512_set1_ps(2.0f)));
    __m512 s2 = _mm512_mul_ps(s, s);
    __m512 p = _mm512_set1_ps(0.2623081892525388f);
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(0.3205988979753252f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(0.4121985831111324f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(0.5770780163555854f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(0.9617966939259756f));
    p = _mm512_fmadd_ps(p, s2, _mm512_set1_ps(2.8853900817779268f));
    return _mm512_add_ps(_mm512_max_ps(yv, _mm512_setzero_ps()), _mm512_mul_ps(s, p));
}

static inline __m512 siluv(__m512 z)
{
    __m512 e = exp2q(_mm512_mul_ps(z, _mm512_set1_ps(-1.4426950408889634f)));
    return _mm512_div_ps(z, _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
}

#define PD(x) _mm512_castps_pd(x)
#define PS(x) _mm512_castpd_ps(x)

/* 16x16 transpose: row i of src (src + i*ss) becomes column i of dst (dst + k*ds, aligned);
 * if neg, -value is also stored at dst + k*ds + 16 */
static inline void tr16(const float *src, int ss, float *dst, int ds, int neg)
{
    __m512 r[16], t[16], s[16], v[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(src + i * ss);
#pragma GCC unroll 8
    for (int m = 0; m < 8; m++) {
        t[2 * m] = _mm512_unpacklo_ps(r[2 * m], r[2 * m + 1]);
        t[2 * m + 1] = _mm512_unpackhi_ps(r[2 * m], r[2 * m + 1]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        s[4 * g + 0] = PS(_mm512_unpacklo_pd(PD(t[4 * g + 0]), PD(t[4 * g + 2])));
        s[4 * g + 1] = PS(_mm512_unpackhi_pd(PD(t[4 * g + 0]), PD(t[4 * g + 2])));
        s[4 * g + 2] = PS(_mm512_unpacklo_pd(PD(t[4 * g + 1]), PD(t[4 * g + 3])));
        s[4 * g + 3] = PS(_mm512_unpackhi_pd(PD(t[4 * g + 1]), PD(t[4 * g + 3])));
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        v[c] = _mm512_shuffle_f32x4(s[c], s[4 + c], 0x88);
        v[4 + c] = _mm512_shuffle_f32x4(s[c], s[4 + c], 0xdd);
        v[8 + c] = _mm512_shuffle_f32x4(s[8 + c], s[12 + c], 0x88);
        v[12 + c] = _mm512_shuffle_f32x4(s[8 + c], s[12 + c], 0xdd);
    }
    const __m512 sgn = _mm512_set1_ps(-0.0f);
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        __m512 o0 = _mm512_shuffle_f32x4(v[c], v[8 + c], 0x88);
        __m512 o1 = _mm512_shuffle_f32x4(v[c], v[8 + c], 0xdd);
        _mm512_store_ps(dst + c * ds, o0);
        _mm512_store_ps(dst + (8 + c) * ds, o1);
        if (neg) {
            _mm512_store_ps(dst + c * ds + 16, _mm512_xor_ps(o0, sgn));
            _mm512_store_ps(dst + (8 + c) * ds + 16, _mm512_xor_ps(o1, sgn));
        }
    }
}

void ssm_scan(const float *u, const float *delta, const float *A, const float *Bm,
              const float *Cm, const float *Dskip, const float *z, const float *delta_bias,
              float *y, int64_t B, int64_t D, int64_t L)
{
    _Alignas(64) float At[NS * 16];
    _Alignas(64) float Ablk[16 * 16];
    _Alignas(64) float dtR[16 * TC];   /* dt*log2e rows; reused as accR */
    _Alignas(64) float dtuR[16 * TC];
    _Alignas(64) float dtT[TC * 16];
    _Alignas(64) float dtuPM[TC * 32]; /* [t][0..15] = dtu', [t][16..31] = -dtu' */
    _Alignas(64) float accT[TC * 16];
    _Alignas(64) float lrow[16 * (TC + 32)];
    _Alignas(64) float lbR[16 * TC];
    _Alignas(64) float cpR[16 * TC];
    _Alignas(64) float LBC[TC * 32];   /* [t][0..15] = log2 ratio, [t][16..31] = C*|B|*ln2 */
    _Alignas(64) uint32_t OFF[TC * 16];
    _Alignas(64) float hs[GB * NS * 16];
    float lprev[16];
    const float L2E = 1.4426950408889634f;
    const __m512 vL2E = _mm512_set1_ps(L2E);
    const __m512 vLN2 = _mm512_set1_ps(0.6931471805599453f);
    const __m512 bmin = _mm512_set1_ps(8.673617379884035e-19f); /* 2^-60 */

    for (int i = 0; i < TC * 16; i++)
        accT[i] = 0.0f;

    /* inner-step exp2 of x (|x| < 2^17):
     *   s  = x + magic           magic = 1.5*2^18 (ulp 1/32): R = round(32x) sits in the low mantissa
     *                            bits, j = R mod 32 indexes the table, k = R/32 = K + j/32
     *   k' = s - (magic + a)     = k - a exactly, a = 1.4375 = 46/32
     *   w  = x - k'              = r + a, r = x - k in [-1/64, 1/64]
     *   2^r ~ c*((r + a)^2 + b)  quadratic with exact value and slope at r = 0 (c = ln2/(2a))
     *   dA = scalef(T[j] * fma(w, w, b), k'), floor(k') = K-2 (j < 14) or K-1 (j >= 14),
     *   T[j] = 2^(j/32) / v0 * (j < 14 ? 4 : 2), v0 = fl(a*a + b); T[0] tuned so x = 0 gives 1. */
    const float qa = 1.4375f;
    const float qb = 2.08134199255577f;
    const float v0 = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(qa), _mm_set_ss(qa), _mm_set_ss(qb)));
    _Alignas(64) uint32_t TG[32];
    {
        double a = 0.69314718055994530942 / 32.0, term = 1.0, c = 1.0, v = 1.0;
        for (int k = 1; k < 14; k++) {
            term *= a / (double)k;
            c += term;
        }
        for (int j = 0; j < 32; j++) {
            fu_t g;
            g.f = (float)(v / (double)v0);
            if (j == 0) {
                /* make T[0] * v0 == 1.0f exactly */
                fu_t best = g, cand;
                for (int dlt = -3; dlt <= 3; dlt++) {
                    cand.u = g.u + (uint32_t)dlt;
                    float pr = _mm_cvtss_f32(_mm_mul_ss(_mm_set_ss(cand.f), _mm_set_ss(v0)));
                    if (pr == 1.0f) {
                        best = cand;
                        break;
                    }
                }
                g = best;
            }
            g.f = g.f * ((j < 14) ? 4.0f : 2.0f);   /* exact power-of-two scaling */
            TG[j] = g.u;
            v *= c;
        }
    }
    const __m512 Tlo = _mm512_castsi512_ps(_mm512_load_si512((const void *)TG));
    const __m512 Thi = _mm512_castsi512_ps(_mm512_load_si512((const void *)(TG + 16)));
    const __m512 vmagic = _mm512_set1_ps(393216.0f);      /* 1.5 * 2^18: ulp 1/32 */
    const __m512 vmagica = _mm512_set1_ps(393217.4375f);  /* magic + a, exact */
    const __m512 vqb = _mm512_set1_ps(qb);

    for (int64_t b = 0; b < B; b++) {
        const float *Bb = Bm + b * NS * L;
        const float *Cb = Cm + b * NS * L;
        for (int64_t g0 = 0; g0 < D; g0 += 16 * GB) {
            int64_t gd = (D - g0) < 16 * GB ? (D - g0) : 16 * GB;
            int nblk = (int)((gd + 15) / 16);
            for (int i = 0; i < nblk * NS * 16; i++)
                hs[i] = 0.0f;

            for (int64_t t0 = 0; t0 < L; t0 += TC) {
                int tc = (L - t0) < TC ? (int)(L - t0) : TC;
                int nv = (tc + 15) / 16;

                /* per-(n,t) tables shared by all channels of the group */
                for (int n = 0; n < NS; n++) {
                    const float *bp = Bb + n * L + t0;
                    const float *cp = Cb + n * L + t0;
                    float *lr = lrow + n * (TC + 32);
                    for (int i = 0; i < nv; i++) {
                        int rem = tc - 16 * i;
                        __mmask16 m = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
                        __m512 bv = _mm512_maskz_loadu_ps(m, bp + 16 * i);
                        __m512 w = _mm512_max_ps(_mm512_abs_ps(bv), bmin);
                        _mm512_storeu_ps(lr + 1 + 16 * i, log2v(w));
                        __m512 cv = _mm512_maskz_loadu_ps(m, cp + 16 * i);
                        _mm512_store_ps(cpR + n * TC + 16 * i, _mm512_mul_ps(_mm512_mul_ps(cv, w), vLN2));
                    }
                    lr[0] = (t0 == 0) ? lr[1] : lprev[n];
                    lprev[n] = lr[tc];
                    for (int i = 0; i < nv; i++)
                        _mm512_store_ps(lbR + n * TC + 16 * i,
                                        _mm512_sub_ps(_mm512_loadu_ps(lr + 16 * i),
                                                      _mm512_loadu_ps(lr + 16 * i + 1)));
                    for (int t = 0; t < tc; t++)
                        OFF[t * 16 + n] = (bp[t] < 0.0f) ? 64u : 0u;
                }
                for (int i = 0; i < nv; i++) {
                    tr16(lbR + 16 * i, TC, LBC + i * 16 * 32, 32, 0);
                    tr16(cpR + 16 * i, TC, LBC + i * 16 * 32 + 16, 32, 0);
                }

                for (int blk = 0; blk < nblk; blk++) {
                    const int64_t d0 = g0 + 16 * blk;
                    const int nd = (D - d0) < 16 ? (int)(D - d0) : 16;

                    /* prefetch targets: next block (same chunk) or first block of next chunk */
                    int pf_nd = 0, pf_len = 0, pf_bc = 0, pf_bclen = 0;
                    int64_t pf_row = 0;
                    if (blk + 1 < nblk) {
                        int64_t d0n = d0 + 16;
                        pf_nd = (D - d0n) < 16 ? (int)(D - d0n) : 16;
                        pf_len = tc;
                        pf_row = (b * D + d0n) * L + t0;
                    } else if (t0 + TC < L) {
                        pf_nd = (D - g0) < 16 ? (int)(D - g0) : 16;
                        pf_len = (L - t0 - TC) < TC ? (int)(L - t0 - TC) : TC;
                        pf_row = (b * D + g0) * L + t0 + TC;
                        pf_bc = 1;
                        pf_bclen = pf_len;
                    }

                    /* At[n][j] = A[d0+j][n] */
                    if (nd == 16) {
                        tr16(A + d0 * NS, NS, At, 16, 0);
                    } else {
                        for (int j = 0; j < 16; j++)
                            for (int n = 0; n < NS; n++)
                                Ablk[j * 16 + n] = (j < nd) ? A[(d0 + j) * NS + n] : 0.0f;
                        tr16(Ablk, 16, At, 16, 0);
                    }

                    /* phase 1: dt*log2e and dt*log2e*u, row layout */
                    for (int j = 0; j < 16; j++) {
                        if (j < nd) {
                            const int64_t row = (b * D + d0 + j) * L + t0;
                            const __m512 biasL = _mm512_set1_ps(delta_bias[d0 + j] * L2E);
                            for (int i = 0; i < nv; i++) {
                                int rem = tc - 16 * i;
                                __mmask16 m = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
                                __m512 dv = _mm512_maskz_loadu_ps(m, delta + row + 16 * i);
                                __m512 uv = _mm512_maskz_loadu_ps(m, u + row + 16 * i);
                                __m512 dtL = softplus2v(_mm512_fmadd_ps(dv, vL2E, biasL));
                                _mm512_store_ps(dtR + j * TC + 16 * i, dtL);
                                _mm512_store_ps(dtuR + j * TC + 16 * i, _mm512_mul_ps(dtL, uv));
                            }
                        } else {
                            for (int i = 0; i < nv; i++) {
                                _mm512_store_ps(dtR + j * TC + 16 * i, _mm512_setzero_ps());
                                _mm512_store_ps(dtuR + j * TC + 16 * i, _mm512_setzero_ps());
                            }
                        }
                    }

                    /* transpose to [t][16] in registers */
                    for (int i = 0; i < nv; i++) {
                        tr16(dtR + 16 * i, TC, dtT + 256 * i, 16, 0);
                        tr16(dtuR + 16 * i, TC, dtuPM + 512 * i, 32, 1);
                    }

                    /* phase 2: scan on scaled state m = h/(|B| ln2), time outer, states in registers */
                    __m512 h[NS];
                    float *hb = hs + blk * NS * 16;
                    for (int n = 0; n < NS; n++)
                        h[n] = _mm512_load_ps(hb + n * 16);

                    for (int t = 0; t < tc; t++) {
                        {
                            int j = t >> 2, ln = (t & 3) * 16;
                            if (j < pf_nd && ln < pf_len) {
                                int64_t o = pf_row + j * L + ln;
                                _mm_prefetch((const char *)(delta + o), _MM_HINT_T0);
                                _mm_prefetch((const char *)(u + o), _MM_HINT_T0);
                                _mm_prefetch((const char *)(z + o), _MM_HINT_T0);
                                _mm_prefetch((const char *)(y + o), _MM_HINT_T0);
                            }
                            if (pf_bc && ln < pf_bclen) {
                                _mm_prefetch((const char *)(Bb + j * L + t0 + TC + ln), _MM_HINT_T0);
                                _mm_prefetch((const char *)(Cb + j * L + t0 + TC + ln), _MM_HINT_T0);
                            }
                        }
                        const __m512 dtv = _mm512_load_ps(dtT + t * 16);
                        const float *lc = LBC + t * 32;
                        const uint32_t *of = OFF + t * 16;
                        const char *pm = (const char *)(dtuPM + t * 32);
                        __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 16
                        for (int n = 0; n < NS; n++) {
                            __m512 x = _mm512_fmadd_ps(dtv, _mm512_load_ps(At + n * 16), _mm512_set1_ps(lc[n]));
                            __m512 sm = _mm512_add_ps(x, vmagic);
                            __m512 kk = _mm512_sub_ps(sm, vmagica);
                            __m512 ww = _mm512_sub_ps(x, kk);
                            __m512i si = _mm512_castps_si512(sm);
                            __m512 T = _mm512_permutex2var_ps(Tlo, si, Thi);
                            __m512 vv = _mm512_fmadd_ps(ww, ww, vqb);
                            __m512 dA = _mm512_scalef_ps(_mm512_mul_ps(T, vv), kk);
                            __m512 inp = _mm512_load_ps((const float *)(pm + of[n]));
                            h[n] = _mm512_fmadd_ps(dA, h[n], inp);
                            acc = _mm512_fmadd_ps(h[n], _mm512_set1_ps(lc[16 + n]), acc);
                        }
                        _mm512_store_ps(accT + t * 16, acc);
                    }

                    for (int n = 0; n < NS; n++)
                        _mm512_store_ps(hb + n * 16, h[n]);

                    /* acc back to row layout (into dtR) */
                    for (int i = 0; i < nv; i++)
                        tr16(accT + 256 * i, 16, dtR + 16 * i, TC, 0);

                    /* phase 3: output in row layout */
                    for (int j = 0; j < nd; j++) {
                        const int64_t row = (b * D + d0 + j) * L + t0;
                        const __m512 Ds = _mm512_set1_ps(Dskip[d0 + j]);
                        for (int i = 0; i < nv; i++) {
                            int rem = tc - 16 * i;
                            __mmask16 m = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
                            __m512 av = _mm512_load_ps(dtR + j * TC + 16 * i);
                            __m512 uv = _mm512_maskz_loadu_ps(m, u + row + 16 * i);
                            __m512 zv = _mm512_maskz_loadu_ps(m, z + row + 16 * i);
                            __m512 o = _mm512_fmadd_ps(Ds, uv, av);
                            o = _mm512_mul_ps(o, siluv(zv));
                            _mm512_mask_storeu_ps(y + row + 16 * i, m, o);
                        }
                    }
                }
            }
        }
    }
}
