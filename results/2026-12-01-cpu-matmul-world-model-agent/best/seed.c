/* AVX-512 GEMM: C[i, j] = sum_k A[i, k] * B[k, j], row-major, fp32.
 * Register-blocked MRx32 micro-kernel on unpacked B (B rows are stride-1),
 * masked loads/stores for ragged N, row-count variants for ragged M,
 * software prefetch of B rows PF steps ahead. */
#include <stdint.h>
#include <math.h>
#include <immintrin.h>

#define MR 8  // ksearch: knob values=[4, 6, 8, 10, 12, 14]
#define PF 8  // ksearch: knob values=[0, 4, 8, 16]

static inline __attribute__((always_inline)) void kern(const int R, const int NV,
    const float *restrict A, const float *restrict B, float *restrict C,
    int64_t K, int64_t N, __mmask16 m0, __mmask16 m1)
{
    __m512 acc[MR][2];
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++) {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * N;
        if (PF > 0) {
            /* prefetching past the end of B is harmless (no fault) */
            _mm_prefetch((const char *)(b + PF * N), _MM_HINT_T0);
            if (NV > 1) _mm_prefetch((const char *)(b + PF * N + 16), _MM_HINT_T0);
        }
        __m512 b0 = _mm512_maskz_loadu_ps(m0, b);
        __m512 b1 = _mm512_setzero_ps();
        if (NV > 1) b1 = _mm512_maskz_loadu_ps(m1, b + 16);
#pragma GCC unroll 14
        for (int r = 0; r < MR; r++) {
            if (r < R) {
                __m512 a = _mm512_set1_ps(A[r * K + k]);
                acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
                if (NV > 1) acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
            }
        }
    }
#pragma GCC unroll 14
    for (int r = 0; r < MR; r++) {
        if (r < R) {
            _mm512_mask_storeu_ps(C + r * N, m0, acc[r][0]);
            if (NV > 1) _mm512_mask_storeu_ps(C + r * N + 16, m1, acc[r][1]);
        }
    }
}

#define KCALL(R, NV) kern(R, NV, Ai, Bj, Cij, K, N, m0, m1)
#define RCASE(R, NV) case R: if ((R) < MR) KCALL((R) < MR ? (R) : 1, NV); break;

#define REMSWITCH(NV)                                                        \
    switch (rem) {                                                           \
    RCASE(1, NV) RCASE(2, NV) RCASE(3, NV) RCASE(4, NV) RCASE(5, NV)         \
    RCASE(6, NV) RCASE(7, NV) RCASE(8, NV) RCASE(9, NV) RCASE(10, NV)        \
    RCASE(11, NV) RCASE(12, NV) RCASE(13, NV)                                \
    default: break;                                                          \
    }

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    for (int64_t j = 0; j < N; j += 32) {
        int64_t w = N - j;
        if (w > 32) w = 32;
        __mmask16 m0, m1;
        int nv;
        if (w >= 16) {
            m0 = (__mmask16)0xFFFF;
            m1 = (__mmask16)((w - 16) >= 16 ? 0xFFFF : ((1u << (w - 16)) - 1u));
            nv = (w > 16) ? 2 : 1;
        } else {
            m0 = (__mmask16)((1u << w) - 1u);
            m1 = 0;
            nv = 1;
        }
        const float *Bj = B + j;
        int64_t i = 0;
        if (nv == 2) {
            for (; i + MR <= M; i += MR) {
                const float *Ai = A + i * K;
                float *Cij = C + i * N + j;
                KCALL(MR, 2);
            }
        } else {
            for (; i + MR <= M; i += MR) {
                const float *Ai = A + i * K;
                float *Cij = C + i * N + j;
                KCALL(MR, 1);
            }
        }
        int64_t rem = M - i;
        if (rem > 0) {
            const float *Ai = A + i * K;
            float *Cij = C + i * N + j;
            if (nv == 2) {
                REMSWITCH(2)
            } else {
                REMSWITCH(1)
            }
        }
    }
}
