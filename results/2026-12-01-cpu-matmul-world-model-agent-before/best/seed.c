/* GEMM with a 6x16 AVX2/FMA register-blocked microkernel and packed B panels.
 * C[i, j] = sum_k A[i, k] * B[k, j], row-major, fp32 accumulation.
 * For small B (K*N <= DIRECT_MAX) full panels are read from B directly.
 * A last panel of <= 8 columns uses a 12x8 tile (12 ymm accumulators).
 * K is split into balanced blocks of at most KC; C tile rows are prefetched.
 * B is packed once per K block for all panels; row blocks sweep the panels.
 * Microkernels are noinline per-row-count instances called through tables. */
#include <stdint.h>
#include <immintrin.h>

#define KC 256  // ksearch: knob values=[128, 192, 256, 384, 512]
#define UNROLL 4  // ksearch: knob values=[1, 2, 4, 8]
#define KS_PRAGMA(x) _Pragma(#x)
#define KS_UNROLL(n) KS_PRAGMA(GCC unroll n)
#define UNROLL_K() KS_UNROLL(UNROLL)
#define MR 6
#define NR 16
#define DIRECT_MAX 16384  // ksearch: knob values=[0, 4096, 16384, 65536]

static inline __attribute__((always_inline)) void
kern(const int mr, int64_t kc, const float *A, int64_t lda,
     const float *Bp, int64_t ldb, float *C, int64_t ldc, int accumulate,
     __m256i m0, __m256i m1, int full)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const float *a0 = A;
    const float *a1 = A + lda;
    const float *a2 = A + 2 * lda;
    const float *a3 = A + 3 * lda;
    const float *a4 = A + 4 * lda;
    const float *a5 = A + 5 * lda;

    /* prefetch the C tile rows so the epilogue does not stall on them */
#define PF(r)                                                         \
    if (mr > r) {                                                     \
        _mm_prefetch((const char *)(C + r * ldc), _MM_HINT_T0);       \
        _mm_prefetch((const char *)(C + r * ldc + 15), _MM_HINT_T0);  \
    }
    PF(0) PF(1) PF(2) PF(3) PF(4) PF(5)
#undef PF

#define ROW(r)                                                        \
    if (mr > r) {                                                     \
        __m256 a = _mm256_broadcast_ss(a##r + k);                     \
        c##r##0 = _mm256_fmadd_ps(a, b0, c##r##0);                    \
        c##r##1 = _mm256_fmadd_ps(a, b1, c##r##1);                    \
    }

UNROLL_K()
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(Bp + k * ldb);
        __m256 b1 = _mm256_loadu_ps(Bp + k * ldb + 8);
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
    }
#undef ROW

#define STORE(r)                                                      \
    if (mr > r) {                                                     \
        float *cr = C + r * ldc;                                      \
        if (full) {                                                   \
            if (accumulate) {                                         \
                c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(cr));     \
                c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(cr + 8)); \
            }                                                         \
            _mm256_storeu_ps(cr, c##r##0);                            \
            _mm256_storeu_ps(cr + 8, c##r##1);                        \
        } else {                                                      \
            if (accumulate) {                                         \
                c##r##0 = _mm256_add_ps(c##r##0, _mm256_maskload_ps(cr, m0));     \
                c##r##1 = _mm256_add_ps(c##r##1, _mm256_maskload_ps(cr + 8, m1)); \
            }                                                         \
            _mm256_maskstore_ps(cr, m0, c##r##0);                     \
            _mm256_maskstore_ps(cr + 8, m1, c##r##1);                 \
        }                                                             \
    }
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
#undef STORE
}

/* Narrow-panel kernel for the last panel when it has <= 8 columns:
 * up to 12 rows x 8 columns, 12 ymm accumulators, B packed kc x 8. */
#define MRN 12
static inline __attribute__((always_inline)) void
kern_narrow(const int mr, int64_t kc, const float *A, int64_t lda,
            const float *Bp, float *C, int64_t ldc, int accumulate, __m256i m0)
{
    __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
    __m256 c2 = _mm256_setzero_ps(), c3 = _mm256_setzero_ps();
    __m256 c4 = _mm256_setzero_ps(), c5 = _mm256_setzero_ps();
    __m256 c6 = _mm256_setzero_ps(), c7 = _mm256_setzero_ps();
    __m256 c8 = _mm256_setzero_ps(), c9 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();

#define NROW(r)                                                       \
    if (mr > r) {                                                     \
        __m256 a = _mm256_broadcast_ss(A + r * lda + k);              \
        c##r = _mm256_fmadd_ps(a, b0, c##r);                          \
    }

UNROLL_K()
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(Bp + k * 8);
        NROW(0) NROW(1) NROW(2) NROW(3) NROW(4) NROW(5)
        NROW(6) NROW(7) NROW(8) NROW(9) NROW(10) NROW(11)
    }
#undef NROW

#define NSTORE(r)                                                     \
    if (mr > r) {                                                     \
        float *cr = C + r * ldc;                                      \
        if (accumulate)                                               \
            c##r = _mm256_add_ps(c##r, _mm256_maskload_ps(cr, m0));   \
        _mm256_maskstore_ps(cr, m0, c##r);                            \
    }
    NSTORE(0) NSTORE(1) NSTORE(2) NSTORE(3) NSTORE(4) NSTORE(5)
    NSTORE(6) NSTORE(7) NSTORE(8) NSTORE(9) NSTORE(10) NSTORE(11)
#undef NSTORE
}

/* Separate non-inlined instances per row count, called through tables, so the
 * hot loops get their own register allocation independent of the driver. */
typedef void (*kfn_t)(int64_t kc, const float *A, int64_t lda, const float *Bp,
                      int64_t ldb, float *C, int64_t ldc, int accumulate,
                      __m256i m0, __m256i m1, int full);
typedef void (*knfn_t)(int64_t kc, const float *A, int64_t lda, const float *Bp,
                       float *C, int64_t ldc, int accumulate, __m256i m0);

#define KINST(n)                                                              \
    static __attribute__((noinline)) void kern_##n(                           \
        int64_t kc, const float *A, int64_t lda, const float *Bp, int64_t ldb, \
        float *C, int64_t ldc, int accumulate, __m256i m0, __m256i m1, int full) \
    {                                                                         \
        kern(n, kc, A, lda, Bp, ldb, C, ldc, accumulate, m0, m1, full);       \
    }
KINST(1) KINST(2) KINST(3) KINST(4) KINST(5) KINST(6)
#undef KINST

#define KNINST(n)                                                             \
    static __attribute__((noinline)) void kern_narrow_##n(                    \
        int64_t kc, const float *A, int64_t lda, const float *Bp,             \
        float *C, int64_t ldc, int accumulate, __m256i m0)                    \
    {                                                                         \
        kern_narrow(n, kc, A, lda, Bp, C, ldc, accumulate, m0);               \
    }
KNINST(1) KNINST(2) KNINST(3) KNINST(4) KNINST(5) KNINST(6)
KNINST(7) KNINST(8) KNINST(9) KNINST(10) KNINST(11) KNINST(12)
#undef KNINST

static const kfn_t ktab[MR + 1] = {
    kern_1, kern_1, kern_2, kern_3, kern_4, kern_5, kern_6
};
static const knfn_t kntab[MRN + 1] = {
    kern_narrow_1, kern_narrow_1, kern_narrow_2, kern_narrow_3, kern_narrow_4,
    kern_narrow_5, kern_narrow_6, kern_narrow_7, kern_narrow_8, kern_narrow_9,
    kern_narrow_10, kern_narrow_11, kern_narrow_12
};

/* Driver: per (column chunk of NC, K block), B is packed once into contiguous
 * 16-wide panels (a last panel of <= 8 columns is packed 8 wide); when B is small
 * (K*N <= DIRECT_MAX) full panels are read from B directly instead. Then each
 * 6-row block of A sweeps all 16-wide panels (A rows stay in L1), and the narrow
 * panel is done by 12-row blocks. */
#define NC 1024
static float Bpk[KC * NC] __attribute__((aligned(64)));

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mfull = _mm256_set1_epi32(-1);
    const int direct = (K * N <= DIRECT_MAX);
    /* balanced K blocks of at most KC (e.g. K=384 -> 2 x 192) */
    const int64_t nkb = (K + KC - 1) / KC;
    int64_t kcb = (K + nkb - 1) / nkb;
    kcb = (kcb + 3) & ~(int64_t)3;
    if (kcb > KC) kcb = KC;

    for (int64_t jc = 0; jc < N; jc += NC) {
        int64_t nc = (N - jc) < NC ? (N - jc) : NC;
        int64_t nwide = nc / NR;          /* full 16-wide panels */
        int rem = (int)(nc - nwide * NR); /* leftover columns, 0..15 */
        int64_t nwp = nwide + (rem > 8);  /* panels handled by the 6x16 kernel */
        int narrow = (rem > 0 && rem <= 8);
        __m256i mr0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), idx);
        __m256i mr1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem - 8), idx);

        for (int64_t k0 = 0; k0 < K; k0 += kcb) {
            int64_t kc = (K - k0) < kcb ? (K - k0) : kcb;
            int accumulate = (k0 > 0);

            /* pack B[k0:k0+kc, jc:jc+nc] (full panels only when not direct) */
            if (!direct) {
                for (int64_t p = 0; p < nwide; p++) {
                    float *dst = Bpk + p * NR * kc;
                    const float *src = B + k0 * N + jc + p * NR;
                    for (int64_t k = 0; k < kc; k++) {
                        _mm256_store_ps(dst + k * NR, _mm256_loadu_ps(src + k * N));
                        _mm256_store_ps(dst + k * NR + 8, _mm256_loadu_ps(src + k * N + 8));
                    }
                }
            }
            if (rem > 8) {
                float *dst = Bpk + nwide * NR * kc;
                const float *src = B + k0 * N + jc + nwide * NR;
                for (int64_t k = 0; k < kc; k++) {
                    _mm256_store_ps(dst + k * NR, _mm256_maskload_ps(src + k * N, mr0));
                    _mm256_store_ps(dst + k * NR + 8, _mm256_maskload_ps(src + k * N + 8, mr1));
                }
            } else if (narrow) {
                float *dst = Bpk + nwide * NR * kc;
                const float *src = B + k0 * N + jc + nwide * NR;
                for (int64_t k = 0; k < kc; k++)
                    _mm256_store_ps(dst + k * 8, _mm256_maskload_ps(src + k * N, mr0));
            }

            /* 6x16 tiles */
            if (nwp > 0) {
                for (int64_t i0 = 0; i0 < M; i0 += MR) {
                    int mr = (M - i0) < MR ? (int)(M - i0) : MR;
                    const float *Ai = A + i0 * K + k0;
                    for (int64_t p = 0; p < nwp; p++) {
                        int full = (p < nwide);
                        const float *Bpp;
                        int64_t ldb;
                        if (full && direct) {
                            Bpp = B + k0 * N + jc + p * NR;
                            ldb = N;
                        } else {
                            Bpp = Bpk + p * NR * kc;
                            ldb = NR;
                        }
                        float *Ci = C + i0 * N + jc + p * NR;
                        __m256i m0 = full ? mfull : mr0;
                        __m256i m1 = full ? mfull : mr1;
                        ktab[mr](kc, Ai, K, Bpp, ldb, Ci, N, accumulate, m0, m1, full);
                    }
                }
            }

            /* 12x8 tiles for a narrow last panel */
            if (narrow) {
                const float *Bpp = Bpk + nwide * NR * kc;
                for (int64_t i0 = 0; i0 < M; i0 += MRN) {
                    int mr = (M - i0) < MRN ? (int)(M - i0) : MRN;
                    const float *Ai = A + i0 * K + k0;
                    float *Ci = C + i0 * N + jc + nwide * NR;
                    kntab[mr](kc, Ai, K, Bpp, Ci, N, accumulate, mr0);
                }
            }
        }
    }
}
