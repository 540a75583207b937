#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>

#define MR 8
#define NR 32

static float *g_buf = NULL;
static size_t g_cap = 0;

static float *get_buf(size_t n)
{
    if (n > g_cap) {
        free(g_buf);
        size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
        g_buf = (float *)aligned_alloc(64, bytes);
        g_cap = g_buf ? n : 0;
    }
    return g_buf;
}

static inline __attribute__((always_inline))
void kern(const int mr, int64_t K, const float *A, int64_t lda,
          const float *Bp, float *C, int64_t ldc, __mmask16 m0, __mmask16 m1)
{
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (r < mr) { c0[r] = _mm512_setzero_ps(); c1[r] = _mm512_setzero_ps(); }
    }
    for (int64_t k = 0; k < K; k++) {
        __m512 b0 = _mm512_load_ps(Bp + k * NR);
        __m512 b1 = _mm512_load_ps(Bp + k * NR + 16);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            if (r < mr) {
                __m512 av = _mm512_set1_ps(A[r * lda + k]);
                c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
                c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (r < mr) {
            _mm512_mask_storeu_ps(C + r * ldc, m0, c0[r]);
            _mm512_mask_storeu_ps(C + r * ldc + 16, m1, c1[r]);
        }
    }
}

static void kern_dispatch(int mr, int64_t K, const float *A, int64_t lda,
                          const float *Bp, float *C, int64_t ldc, __mmask16 m0, __mmask16 m1)
{
    switch (mr) {
    case 8: kern(8, K, A, lda, Bp, C, ldc, m0, m1); break;
    case 7: kern(7, K, A, lda, Bp, C, ldc, m0, m1); break;
    case 6: kern(6, K, A, lda, Bp, C, ldc, m0, m1); break;
    case 5: kern(5, K, A, lda, Bp, C, ldc, m0, m1); break;
    case 4: kern(4, K, A, lda, Bp, C, ldc, m0, m1); break;
    case 3: kern(3, K, A, lda, Bp, C, ldc, m0, m1); break;
    case 2: kern(2, K, A, lda, Bp, C, ldc, m0, m1); break;
    default: kern(1, K, A, lda, Bp, C, ldc, m0, m1); break;
    }
}

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    int64_t np = (N + NR - 1) / NR;
    float *Bp = get_buf((size_t)(np * K * NR));
    if (!Bp) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc += A[i * K + k] * B[k * N + j];
                C[i * N + j] = acc;
            }
        return;
    }

    /* pack B into panels of NR columns, zero padded */
    for (int64_t p = 0; p < np; p++) {
        int64_t j0 = p * NR;
        int64_t nr = N - j0 < NR ? N - j0 : NR;
        __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
        __mmask16 m1 = nr <= 16 ? (__mmask16)0 : (nr >= 32 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nr - 16)) - 1));
        float *dst = Bp + p * K * NR;
        const float *src = B + j0;
        for (int64_t k = 0; k < K; k++) {
            __m512 v0 = _mm512_maskz_loadu_ps(m0, src + k * N);
            __m512 v1 = _mm512_maskz_loadu_ps(m1, src + k * N + 16);
            _mm512_store_ps(dst + k * NR, v0);
            _mm512_store_ps(dst + k * NR + 16, v1);
        }
    }

    for (int64_t p = 0; p < np; p++) {
        int64_t j0 = p * NR;
        int64_t nr = N - j0 < NR ? N - j0 : NR;
        __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
        __mmask16 m1 = nr <= 16 ? (__mmask16)0 : (nr >= 32 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nr - 16)) - 1));
        const float *bp = Bp + p * K * NR;
        for (int64_t i0 = 0; i0 < M; i0 += MR) {
            int mr = (int)(M - i0 < MR ? M - i0 : MR);
            kern_dispatch(mr, K, A + i0 * K, K, bp, C + i0 * N + j0, N, m0, m1);
        }
    }
}
