#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>

#define MR 8
#define NR 32
#define KC 192

static float *g_buf = NULL;
static size_t g_cap = 0;

static float *get_buf(size_t n)
{
    if (n > g_cap) {
        free(g_buf);
        size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
        g_buf = (float *)aligned_alloc(64, bytes);
        g_cap = n;
    }
    return g_buf;
}

static inline __attribute__((always_inline)) void
kern(const int mr, const float *A, int64_t lda, const float *Bp, int64_t kb,
     float *C, int64_t ldc, __mmask16 m0, __mmask16 m1, int accumulate)
{
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        c0[r] = _mm512_setzero_ps();
        c1[r] = _mm512_setzero_ps();
    }
#pragma GCC unroll 2
    for (int64_t k = 0; k < kb; k++) {
        __m512 b0 = _mm512_load_ps(Bp + k * NR);
        __m512 b1 = _mm512_load_ps(Bp + k * NR + 16);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            __m512 a = _mm512_set1_ps(A[r * lda + k]);
            c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
        }
    }
    if (m0 == 0xFFFF && m1 == 0xFFFF) {
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            float *cr = C + r * ldc;
            __m512 x0 = c0[r], x1 = c1[r];
            if (accumulate) {
                x0 = _mm512_add_ps(x0, _mm512_loadu_ps(cr));
                x1 = _mm512_add_ps(x1, _mm512_loadu_ps(cr + 16));
            }
            _mm512_storeu_ps(cr, x0);
            _mm512_storeu_ps(cr + 16, x1);
        }
    } else {
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            float *cr = C + r * ldc;
            __m512 x0 = c0[r], x1 = c1[r];
            if (accumulate) {
                x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, cr));
                x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, cr + 16));
            }
            _mm512_mask_storeu_ps(cr, m0, x0);
            _mm512_mask_storeu_ps(cr + 16, m1, x1);
        }
    }
}

static void kern_dispatch(int mr, const float *A, int64_t lda, const float *Bp, int64_t kb,
                          float *C, int64_t ldc, __mmask16 m0, __mmask16 m1, int acc)
{
    switch (mr) {
    case 8: kern(8, A, lda, Bp, kb, C, ldc, m0, m1, acc); break;
    case 7: kern(7, A, lda, Bp, kb, C, ldc, m0, m1, acc); break;
    case 6: kern(6, A, lda, Bp, kb, C, ldc, m0, m1, acc); break;
    case 5: kern(5, A, lda, Bp, kb, C, ldc, m0, m1, acc); break;
    case 4: kern(4, A, lda, Bp, kb, C, ldc, m0, m1, acc); break;
    case 3: kern(3, A, lda, Bp, kb, C, ldc, m0, m1, acc); break;
    case 2: kern(2, A, lda, Bp, kb, C, ldc, m0, m1, acc); break;
    default: kern(1, A, lda, Bp, kb, C, ldc, m0, m1, acc); break;
    }
}

static inline __mmask16 lane_mask(int64_t n)
{
    if (n >= 16) return (__mmask16)0xFFFF;
    if (n <= 0) return (__mmask16)0;
    return (__mmask16)((1u << n) - 1u);
}

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    int64_t np = (N + NR - 1) / NR;
    int64_t nkb = (K + KC - 1) / KC;
    int64_t kcb = (K + nkb - 1) / nkb;
    float *Bp = get_buf((size_t)(np * NR * kcb));

    for (int64_t k0 = 0; k0 < K; k0 += kcb) {
        int64_t kb = K - k0 < kcb ? K - k0 : kcb;
        /* pack B[k0:k0+kb, :] into panels [np][kb][NR] */
        for (int64_t p = 0; p < np; p++) {
            int64_t j0 = p * NR;
            __mmask16 m0 = lane_mask(N - j0);
            __mmask16 m1 = lane_mask(N - j0 - 16);
            float *dst = Bp + p * kb * NR;
            const float *src = B + k0 * N + j0;
            for (int64_t k = 0; k < kb; k++) {
                _mm512_store_ps(dst + k * NR, _mm512_maskz_loadu_ps(m0, src + k * N));
                _mm512_store_ps(dst + k * NR + 16, _mm512_maskz_loadu_ps(m1, src + k * N + 16));
            }
        }
        int acc = (k0 != 0);
        for (int64_t p = 0; p < np; p++) {
            int64_t j0 = p * NR;
            __mmask16 m0 = lane_mask(N - j0);
            __mmask16 m1 = lane_mask(N - j0 - 16);
            const float *bp = Bp + p * kb * NR;
            for (int64_t i0 = 0; i0 < M; i0 += MR) {
                int mr = (int)(M - i0 < MR ? M - i0 : MR);
                kern_dispatch(mr, A + i0 * K + k0, K, bp, kb, C + i0 * N + j0, N, m0, m1, acc);
            }
        }
    }
}
