#include <stdint.h>
#include <stdlib.h>
#include <immintrin.h>

static float *g_bp = NULL;
static size_t g_cap = 0;

static float *bp_buffer(size_t nfloats)
{
    if (nfloats > g_cap) {
        if (g_bp) free(g_bp);
        size_t bytes = (nfloats * sizeof(float) + 63) & ~(size_t)63;
        g_bp = (float *)aligned_alloc(64, bytes);
        g_cap = g_bp ? nfloats : 0;
    }
    return g_bp;
}

static inline __mmask16 m16(int64_t r)
{
    if (r >= 16) return (__mmask16)0xFFFF;
    if (r <= 0) return (__mmask16)0;
    return (__mmask16)((1u << r) - 1u);
}

static inline __mmask8 m8(int64_t r)
{
    if (r >= 8) return (__mmask8)0xFF;
    if (r <= 0) return (__mmask8)0;
    return (__mmask8)((1u << r) - 1u);
}

/* panel of up to 32 columns starting at j0, stored K x 32, zero padded */
static void pack_panel(const float *B, float *dst, int64_t K, int64_t N, int64_t j0, int64_t w)
{
    const float *src = B + j0;
    if (w >= 32) {
        for (int64_t k = 0; k < K; k++) {
            _mm512_store_ps(dst + k * 32, _mm512_loadu_ps(src + k * N));
            _mm512_store_ps(dst + k * 32 + 16, _mm512_loadu_ps(src + k * N + 16));
        }
    } else {
        __mmask16 q0 = m16(w), q1 = m16(w - 16);
        for (int64_t k = 0; k < K; k++) {
            _mm512_store_ps(dst + k * 32, _mm512_maskz_loadu_ps(q0, src + k * N));
            if (q1)
                _mm512_store_ps(dst + k * 32 + 16, _mm512_maskz_loadu_ps(q1, src + k * N + 16));
            else
                _mm512_store_ps(dst + k * 32 + 16, _mm512_setzero_ps());
        }
    }
}

/* T_: 0 = two zmm (cols 0..31), 1 = zmm + ymm (0..23), 2 = one zmm (0..15), 3 = one ymm (0..7) */
#define RP(r) const float *a##r = A + (i0 + (MR_ > r ? r : 0)) * K;
#define DZ(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps(); \
              __m256 y##r = _mm256_setzero_ps();
#define FR(r) if (MR_ > r) { \
    if (T_ == 3) { \
        y##r = _mm256_fmadd_ps(_mm256_set1_ps(a##r[k]), by, y##r); \
    } else { \
        __m512 x = _mm512_set1_ps(a##r[k]); \
        c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0); \
        if (T_ == 0) c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1); \
        if (T_ == 1) y##r = _mm256_fmadd_ps(_mm512_castps512_ps256(x), by, y##r); \
    } }
#define SR(r) if (MR_ > r) { float *p = c + r * N; \
    if (T_ == 3) { \
        _mm256_mask_storeu_ps(p, my, y##r); \
    } else if (full) { \
        _mm512_storeu_ps(p, c##r##0); \
        _mm512_storeu_ps(p + 16, c##r##1); \
    } else { \
        _mm512_mask_storeu_ps(p, mz0, c##r##0); \
        if (T_ == 0) _mm512_mask_storeu_ps(p + 16, mz1, c##r##1); \
        if (T_ == 1) _mm256_mask_storeu_ps(p + 16, my, y##r); \
    } }

static inline __attribute__((always_inline))
void kern(const int MR_, const int T_, const float *A, int64_t K, const float *bp,
          float *C, int64_t N, int64_t i0, int64_t j0, int64_t w)
{
    RP(0) RP(1) RP(2) RP(3) RP(4) RP(5) RP(6) RP(7)
    DZ(0) DZ(1) DZ(2) DZ(3) DZ(4) DZ(5) DZ(6) DZ(7)
#pragma GCC unroll 4
    for (int64_t k = 0; k < K; k++) {
        const float *b = bp + k * 32;
        __m512 b0 = (T_ != 3) ? _mm512_load_ps(b) : _mm512_setzero_ps();
        __m512 b1 = (T_ == 0) ? _mm512_load_ps(b + 16) : _mm512_setzero_ps();
        __m256 by = (T_ == 1) ? _mm256_load_ps(b + 16)
                  : ((T_ == 3) ? _mm256_load_ps(b) : _mm256_setzero_ps());
        FR(0) FR(1) FR(2) FR(3) FR(4) FR(5) FR(6) FR(7)
    }
    float *c = C + i0 * N + j0;
    int full = (T_ == 0) && (w >= 32);
    __mmask16 mz0 = m16(w), mz1 = m16(w - 16);
    __mmask8 my = (T_ == 3) ? m8(w) : m8(w - 16);
    SR(0) SR(1) SR(2) SR(3) SR(4) SR(5) SR(6) SR(7)
}

typedef void (*kfn)(const float *, int64_t, const float *, float *, int64_t, int64_t, int64_t, int64_t);

#define GEN(m, t) static void k##m##_##t(const float *A, int64_t K, const float *bp, float *C, \
        int64_t N, int64_t i0, int64_t j0, int64_t w) { kern(m, t, A, K, bp, C, N, i0, j0, w); }
#define GENT(t) GEN(1, t) GEN(2, t) GEN(3, t) GEN(4, t) GEN(5, t) GEN(6, t) GEN(7, t) GEN(8, t)
GENT(0) GENT(1) GENT(2) GENT(3)
#define ROWT(t) { k1_##t, k2_##t, k3_##t, k4_##t, k5_##t, k6_##t, k7_##t, k8_##t }
static const kfn ktab[4][8] = { ROWT(0), ROWT(1), ROWT(2), ROWT(3) };

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    float *bp = bp_buffer((size_t)K * 32);
    if (!bp) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc += A[i * K + k] * B[k * N + j];
                C[i * N + j] = acc;
            }
        return;
    }
    for (int64_t j0 = 0; j0 < N; j0 += 32) {
        int64_t w = N - j0;
        if (w > 32) w = 32;
        int t = (w > 24) ? 0 : (w > 16) ? 1 : (w > 8) ? 2 : 3;
        pack_panel(B, bp, K, N, j0, w);
        for (int64_t i0 = 0; i0 < M; i0 += 8) {
            int64_t mr = M - i0;
            if (mr > 8) mr = 8;
            ktab[t][mr - 1](A, K, bp, C, N, i0, j0, w);
        }
    }
}
