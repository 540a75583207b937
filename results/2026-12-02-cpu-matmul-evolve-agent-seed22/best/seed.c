#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>

#define KC 512
#define OP_NONE 0
#define OP_STORE 1
#define OP_ADD 2
#define OP_SUB 3

#define AI static inline __attribute__((always_inline))

static float *g_bp = NULL; static size_t g_bcap = 0;
static float *g_ap = NULL; static size_t g_acap = 0;

static float *ensure(float **p, size_t *cap, size_t n)
{
    if (n > *cap) {
        free(*p);
        size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
        *p = (float *)aligned_alloc(64, bytes);
        *cap = *p ? n : 0;
    }
    return *p;
}

AI __mmask16 mask_lo(int64_t rem)
{
    if (rem >= 16) return (__mmask16)0xFFFF;
    if (rem <= 0) return (__mmask16)0;
    return (__mmask16)((1u << rem) - 1u);
}

/* ---------------- packing of B column panels ---------------- */
static void pack32(const float *src, int64_t N, int kc, __mmask16 m0, __mmask16 m1, float *dst)
{
    if (m0 == 0xFFFF && m1 == 0xFFFF) {
        for (int k = 0; k < kc; k++) {
            __m512 v0 = _mm512_loadu_ps(src);
            __m512 v1 = _mm512_loadu_ps(src + 16);
            _mm512_store_ps(dst, v0);
            _mm512_store_ps(dst + 16, v1);
            src += N; dst += 32;
        }
    } else {
        for (int k = 0; k < kc; k++) {
            __m512 v0 = _mm512_maskz_loadu_ps(m0, src);
            __m512 v1 = _mm512_maskz_loadu_ps(m1, src + 16);
            _mm512_store_ps(dst, v0);
            _mm512_store_ps(dst + 16, v1);
            src += N; dst += 32;
        }
    }
}

static void pack24(const float *src, int64_t N, int kc, __mmask8 m1, float *dst)
{
    for (int k = 0; k < kc; k++) {
        __m512 v0 = _mm512_loadu_ps(src);
        __m256 v1 = _mm256_maskz_loadu_ps(m1, src + 16);
        _mm512_storeu_ps(dst, v0);
        _mm256_storeu_ps(dst + 16, v1);
        src += N; dst += 24;
    }
}

static void pack16(const float *src, int64_t N, int kc, __mmask16 m0, float *dst)
{
    for (int k = 0; k < kc; k++) {
        _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(m0, src));
        src += N; dst += 16;
    }
}

/* full-width panel of (s1 + s*s2), s = +1 / -1 / 0 */
static void pack_sum32(const float *s1, const float *s2, int s, int64_t ldb, int kc, float *dst)
{
    if (s > 0) {
        for (int k = 0; k < kc; k++) {
            _mm512_store_ps(dst, _mm512_add_ps(_mm512_loadu_ps(s1), _mm512_loadu_ps(s2)));
            _mm512_store_ps(dst + 16, _mm512_add_ps(_mm512_loadu_ps(s1 + 16), _mm512_loadu_ps(s2 + 16)));
            s1 += ldb; s2 += ldb; dst += 32;
        }
    } else if (s < 0) {
        for (int k = 0; k < kc; k++) {
            _mm512_store_ps(dst, _mm512_sub_ps(_mm512_loadu_ps(s1), _mm512_loadu_ps(s2)));
            _mm512_store_ps(dst + 16, _mm512_sub_ps(_mm512_loadu_ps(s1 + 16), _mm512_loadu_ps(s2 + 16)));
            s1 += ldb; s2 += ldb; dst += 32;
        }
    } else {
        for (int k = 0; k < kc; k++) {
            _mm512_store_ps(dst, _mm512_loadu_ps(s1));
            _mm512_store_ps(dst + 16, _mm512_loadu_ps(s1 + 16));
            s1 += ldb; dst += 32;
        }
    }
}


/* 16-wide panel of (s1 + s*s2), s = +1 / -1 / 0 */
static void pack_sum16(const float *s1, const float *s2, int s, int64_t ldb, int kc, float *dst)
{
    for (int k = 0; k < kc; k++) {
        __m512 v = _mm512_loadu_ps(s1);
        if (s > 0) v = _mm512_add_ps(v, _mm512_loadu_ps(s2));
        else if (s < 0) v = _mm512_sub_ps(v, _mm512_loadu_ps(s2));
        _mm512_store_ps(dst, v);
        s1 += ldb; s2 += ldb; dst += 16;
    }
}
/* ---------------- microkernels ---------------- */
#define AR0  p0[0]
#define AR1  p0[lda]
#define AR2  p0[lda2]
#define AR3  p3[0]
#define AR4  p3[lda]
#define AR5  p3[lda2]
#define AR6  p6[0]
#define AR7  p6[lda]
#define AR8  p6[lda2]
#define AR9  p9[0]
#define AR10 p9[lda]
#define AR11 p9[lda2]

#define ROWS8(X)  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define ROWS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#define PSET12 const float *p0 = a, *p3 = a + 3 * lda, *p6 = a + 6 * lda, *p9 = a + 9 * lda;
#define PINC12 p0++; p3++; p6++; p9++;
#define PSET8  const float *p0 = a, *p3 = a + 3 * lda, *p6 = a + 6 * lda;
#define PINC8  p0++; p3++; p6++;

/* width 32 */
#define D32(r) __m512 c##r##_0 = _mm512_setzero_ps(), c##r##_1 = _mm512_setzero_ps();
#define F32(r) { __m512 t = _mm512_set1_ps(AR##r); \
    c##r##_0 = _mm512_fmadd_ps(t, b0, c##r##_0); \
    c##r##_1 = _mm512_fmadd_ps(t, b1, c##r##_1); }
#define S32(r) if ((r) < mr) { float *cr = c + (int64_t)(r) * ldc; \
    if (full) { \
        if (accum) { \
            c##r##_0 = _mm512_add_ps(c##r##_0, _mm512_loadu_ps(cr)); \
            c##r##_1 = _mm512_add_ps(c##r##_1, _mm512_loadu_ps(cr + 16)); } \
        _mm512_storeu_ps(cr, c##r##_0); \
        _mm512_storeu_ps(cr + 16, c##r##_1); \
    } else { \
        if (accum) { \
            c##r##_0 = _mm512_add_ps(c##r##_0, _mm512_maskz_loadu_ps(m0, cr)); \
            c##r##_1 = _mm512_add_ps(c##r##_1, _mm512_maskz_loadu_ps(m1, cr + 16)); } \
        _mm512_mask_storeu_ps(cr, m0, c##r##_0); \
        _mm512_mask_storeu_ps(cr + 16, m1, c##r##_1); } }
#define LB32 __m512 b0 = _mm512_loadu_ps(bp); __m512 b1 = _mm512_loadu_ps(bp + 16);

/* width 24: zmm + ymm sharing one broadcast */
#define D24(r) __m512 c##r##_0 = _mm512_setzero_ps(); __m256 y##r = _mm256_setzero_ps();
#define F24(r) { __m512 t = _mm512_set1_ps(AR##r); \
    c##r##_0 = _mm512_fmadd_ps(t, b0, c##r##_0); \
    y##r = _mm256_fmadd_ps(_mm512_castps512_ps256(t), b1, y##r); }
#define S24(r) if ((r) < mr) { float *cr = c + (int64_t)(r) * ldc; \
    if (accum) { \
        c##r##_0 = _mm512_add_ps(c##r##_0, _mm512_loadu_ps(cr)); \
        y##r = _mm256_add_ps(y##r, _mm256_maskz_loadu_ps((__mmask8)m1, cr + 16)); } \
    _mm512_storeu_ps(cr, c##r##_0); \
    if (full) _mm256_storeu_ps(cr + 16, y##r); \
    else _mm256_mask_storeu_ps(cr + 16, (__mmask8)m1, y##r); }
#define LB24 __m512 b0 = _mm512_loadu_ps(bp); __m256 b1 = _mm256_loadu_ps(bp + 16);

/* width 16 */
#define D16(r) __m512 c##r##_0 = _mm512_setzero_ps();
#define F16(r) { __m512 t = _mm512_set1_ps(AR##r); c##r##_0 = _mm512_fmadd_ps(t, b0, c##r##_0); }
#define S16(r) if ((r) < mr) { float *cr = c + (int64_t)(r) * ldc; \
    if (accum) c##r##_0 = _mm512_add_ps(c##r##_0, _mm512_maskz_loadu_ps(m0, cr)); \
    if (full) _mm512_storeu_ps(cr, c##r##_0); \
    else _mm512_mask_storeu_ps(cr, m0, c##r##_0); }
#define LB16 __m512 b0 = _mm512_loadu_ps(bp);

typedef void (*kern_t)(int, const float *, int64_t, const float *, int64_t, float *, int64_t,
                       int, __mmask16, __mmask16, int);

/* FULLX: expression telling whether the tile's columns are all valid */
#define KERNEL(NAME, ROWS, PSET, PINC, D, F, S, LB, W, FULLX) \
static void NAME(int kc, const float *a, int64_t lda, const float *restrict bp, int64_t ldb, \
                 float *c, int64_t ldc, int mr, __mmask16 m0, __mmask16 m1, int accum) \
{ \
    const int64_t lda2 = 2 * lda; \
    const int full = (FULLX); \
    (void)m0; (void)m1; (void)lda2; (void)full; \
    PSET \
    ROWS(D) \
    _Pragma("GCC unroll 4") \
    for (int k = 0; k < kc; k++) { \
        _mm_prefetch((const char *)(bp + 8 * ldb), _MM_HINT_T0); \
        _mm_prefetch((const char *)(bp + 8 * ldb + (W) - 1), _MM_HINT_T0); \
        LB \
        bp += ldb; \
        ROWS(F) \
        PINC \
    } \
    ROWS(S) \
}

KERNEL(k12x32, ROWS12, PSET12, PINC12, D32, F32, S32, LB32, 32, (m0 == 0xFFFF && m1 == 0xFFFF))
KERNEL(k8x32,  ROWS8,  PSET8,  PINC8,  D32, F32, S32, LB32, 32, (m0 == 0xFFFF && m1 == 0xFFFF))
KERNEL(k12x24, ROWS12, PSET12, PINC12, D24, F24, S24, LB24, 24, ((m1 & 0xFF) == 0xFF))
KERNEL(k8x24,  ROWS8,  PSET8,  PINC8,  D24, F24, S24, LB24, 24, ((m1 & 0xFF) == 0xFF))
KERNEL(k12x16, ROWS12, PSET12, PINC12, D16, F16, S16, LB16, 16, (m0 == 0xFFFF))
KERNEL(k8x16,  ROWS8,  PSET8,  PINC8,  D16, F16, S16, LB16, 16, (m0 == 0xFFFF))

/* ---------------- Strassen product kernels (full 32-wide tiles, two destinations) ---------------- */
AI void outf(float *p, __m512 v, int op)
{
    if (op == OP_STORE) _mm512_storeu_ps(p, v);
    else if (op == OP_ADD) _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), v));
    else if (op == OP_SUB) _mm512_storeu_ps(p, _mm512_sub_ps(_mm512_loadu_ps(p), v));
}

#define SG(r) if ((r) < mr) { float *cr = c + (int64_t)(r) * ldc; \
    outf(cr, c##r##_0, op1); outf(cr + 16, c##r##_1, op1); \
    if (op2) { float *cq = c2 + (int64_t)(r) * ldc; \
        outf(cq, c##r##_0, op2); outf(cq + 16, c##r##_1, op2); } }

#define KGEN(NAME, ROWS, PSET, PINC) \
static void NAME(int kc, const float *a, int64_t lda, const float *restrict bp, \
                 float *c, int op1, float *c2, int op2, int64_t ldc, int mr) \
{ \
    const int64_t lda2 = 2 * lda; (void)lda2; \
    PSET \
    ROWS(D32) \
    _Pragma("GCC unroll 4") \
    for (int k = 0; k < kc; k++) { \
        _mm_prefetch((const char *)(bp + 256), _MM_HINT_T0); \
        _mm_prefetch((const char *)(bp + 272), _MM_HINT_T0); \
        LB32 \
        bp += 32; \
        ROWS(F32) \
        PINC \
    } \
    ROWS(SG) \
}

KGEN(kg12, ROWS12, PSET12, PINC12)
KGEN(kg8,  ROWS8,  PSET8,  PINC8)

#define SG16(r) if ((r) < mr) { \
    outf(c + (int64_t)(r) * ldc, c##r##_0, op1); \
    if (op2) outf(c2 + (int64_t)(r) * ldc, c##r##_0, op2); }

#define KGEN16(NAME, ROWS, PSET, PINC) \
static void NAME(int kc, const float *a, int64_t lda, const float *restrict bp, \
                 float *c, int op1, float *c2, int op2, int64_t ldc, int mr) \
{ \
    const int64_t lda2 = 2 * lda; (void)lda2; \
    PSET \
    ROWS(D16) \
    _Pragma("GCC unroll 4") \
    for (int k = 0; k < kc; k++) { \
        _mm_prefetch((const char *)(bp + 128), _MM_HINT_T0); \
        LB16 \
        bp += 16; \
        ROWS(F16) \
        PINC \
    } \
    ROWS(SG16) \
}

KGEN16(kg12x16, ROWS12, PSET12, PINC12)
KGEN16(kg8x16,  ROWS8,  PSET8,  PINC8)

/* ---------------- drivers ---------------- */
static void naive(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

static void plan_rows(int64_t M, int64_t *n12, int64_t *n8)
{
    int64_t q12 = M / 12, r12 = M % 12;
    if (r12 == 0)                  { *n12 = q12;     *n8 = 0; }
    else if (r12 <= 4 && q12 >= 1) { *n12 = q12 - 1; *n8 = 2; }
    else if (r12 <= 8)             { *n12 = q12;     *n8 = 1; }
    else                           { *n12 = q12 + 1; *n8 = 0; }
}

static int gemm_plain(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    int64_t nfull = N / 32, rem = N % 32, jt = nfull * 32;
    int tw = 0;
    if (rem > 24) tw = 32; else if (rem > 16) tw = 24; else if (rem > 0) tw = 16;
    __mmask16 tm0 = 0xFFFF, tm1 = 0;
    if (tw == 32 || tw == 24) { tm0 = 0xFFFF; tm1 = mask_lo(rem - 16); }
    else if (tw == 16) { tm0 = mask_lo(rem); tm1 = 0; }
    size_t wsum = (size_t)nfull * 32 + (size_t)tw;

    int kcmax = K < KC ? (int)K : KC;
    float *bp = ensure(&g_bp, &g_bcap, wsum * (size_t)kcmax + 64);
    float *ap = ensure(&g_ap, &g_acap, (size_t)12 * kcmax + 64);
    if (!bp || !ap) return 0;

    /* small B (<= 64 KB): stream full 32-wide panels straight from B (no packing pass);
       only the narrow tail panel is packed */
    const int direct = (K * N <= 16384) || (K * N <= 131072 && ((N * 4) % 4096) != 0);

    int64_t n12, n8; plan_rows(M, &n12, &n8);
    int64_t nblk = n12 + n8;

    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int kc = (int)((K - k0) < KC ? (K - k0) : KC);
        const float *bk = B + k0 * N;
        if (!direct)
            for (int64_t p = 0; p < nfull; p++)
                pack32(bk + p * 32, N, kc, 0xFFFF, 0xFFFF, bp + (size_t)p * kc * 32);
        float *qt = bp + (size_t)nfull * kc * 32;
        if (tw == 32) pack32(bk + jt, N, kc, tm0, tm1, qt);
        else if (tw == 24) pack24(bk + jt, N, kc, (__mmask8)tm1, qt);
        else if (tw == 16) pack16(bk + jt, N, kc, tm0, qt);

        int accum = k0 > 0;
        int64_t i0 = 0;
        for (int64_t blk = 0; blk < nblk && i0 < M; blk++) {
            int bs = blk < n12 ? 12 : 8;
            int mr = (int)((M - i0) < bs ? (M - i0) : bs);
            const float *a; int64_t lda;
            if (mr == bs) {
                a = A + i0 * K + k0; lda = K;
            } else {
                for (int r = 0; r < bs; r++) {
                    if (r < mr) memcpy(ap + (size_t)r * kc, A + (i0 + r) * K + k0, (size_t)kc * sizeof(float));
                    else memset(ap + (size_t)r * kc, 0, (size_t)kc * sizeof(float));
                }
                a = ap; lda = kc;
            }
            kern_t f32 = bs == 12 ? k12x32 : k8x32;
            float *crow = C + i0 * N;
            if (direct) {
                for (int64_t p = 0; p < nfull; p++)
                    f32(kc, a, lda, bk + p * 32, N, crow + p * 32, N, mr, 0xFFFF, 0xFFFF, accum);
            } else {
                for (int64_t p = 0; p < nfull; p++)
                    f32(kc, a, lda, bp + (size_t)p * kc * 32, 32, crow + p * 32, N, mr, 0xFFFF, 0xFFFF, accum);
            }
            if (tw == 32) f32(kc, a, lda, qt, 32, crow + jt, N, mr, tm0, tm1, accum);
            else if (tw == 24) (bs == 12 ? k12x24 : k8x24)(kc, a, lda, qt, 24, crow + jt, N, mr, tm0, tm1, accum);
            else if (tw == 16) (bs == 12 ? k12x16 : k8x16)(kc, a, lda, qt, 16, crow + jt, N, mr, tm0, tm1, accum);
            i0 += bs;
        }
    }
    return 1;
}

/* Strassen product: ops on C1/C2 of (A1 + sa*A2)[M,K] @ (B1 + sb*B2)[K,N], N a multiple of 32 */
static int gemm_sub(const float *A1, const float *A2, int sa, int64_t lda,
                    const float *B1, const float *B2, int sb, int64_t ldb,
                    int64_t M, int64_t K, int64_t N,
                    float *C1, int op1, float *C2, int op2, int64_t ldc)
{
    if (!A2 || sa == 0) { A2 = A1; sa = 0; }
    if (!B2 || sb == 0) { B2 = B1; sb = 0; }
    if (!op2 || !C2) { C2 = C1; op2 = OP_NONE; }
    int64_t np = N / 32;
    int t16 = (N % 32) == 16;            /* caller guarantees N % 16 == 0 */
    int kcmax = K < KC ? (int)K : KC;
    float *bp = ensure(&g_bp, &g_bcap, ((size_t)np * 32 + (size_t)t16 * 16) * kcmax + 64);
    float *ap = ensure(&g_ap, &g_acap, (size_t)12 * kcmax + 64);
    if (!bp || !ap) return 0;
    int64_t n12, n8; plan_rows(M, &n12, &n8);
    int64_t nblk = n12 + n8;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int kc = (int)((K - k0) < KC ? (K - k0) : KC);
        int o1 = op1, o2 = op2;
        if (k0 > 0) {
            if (o1 == OP_STORE) o1 = OP_ADD;
            if (o2 == OP_STORE) o2 = OP_ADD;
        }
        for (int64_t p = 0; p < np; p++)
            pack_sum32(B1 + k0 * ldb + p * 32, B2 + k0 * ldb + p * 32, sb, ldb, kc, bp + (size_t)p * kc * 32);
        float *qt = bp + (size_t)np * kc * 32;
        if (t16)
            pack_sum16(B1 + k0 * ldb + np * 32, B2 + k0 * ldb + np * 32, sb, ldb, kc, qt);
        int64_t i0 = 0;
        for (int64_t blk = 0; blk < nblk && i0 < M; blk++) {
            int bs = blk < n12 ? 12 : 8;
            int mr = (int)((M - i0) < bs ? (M - i0) : bs);
            const float *a; int64_t la;
            if (mr == bs && sa == 0) {
                a = A1 + i0 * lda + k0; la = lda;
            } else {
                for (int r = 0; r < bs; r++) {
                    float *restrict d = ap + (size_t)r * kc;
                    if (r < mr) {
                        const float *restrict x = A1 + (i0 + r) * lda + k0;
                        const float *restrict y = A2 + (i0 + r) * lda + k0;
                        if (sa > 0)      { for (int j = 0; j < kc; j++) d[j] = x[j] + y[j]; }
                        else if (sa < 0) { for (int j = 0; j < kc; j++) d[j] = x[j] - y[j]; }
                        else memcpy(d, x, (size_t)kc * sizeof(float));
                    } else {
                        memset(d, 0, (size_t)kc * sizeof(float));
                    }
                }
                a = ap; la = kc;
            }
            for (int64_t p = 0; p < np; p++) {
                const float *bpp = bp + (size_t)p * kc * 32;
                float *c1 = C1 + i0 * ldc + p * 32, *c2 = C2 + i0 * ldc + p * 32;
                if (bs == 12) kg12(kc, a, la, bpp, c1, o1, c2, o2, ldc, mr);
                else          kg8(kc, a, la, bpp, c1, o1, c2, o2, ldc, mr);
            }
            if (t16) {
                float *c1 = C1 + i0 * ldc + np * 32, *c2 = C2 + i0 * ldc + np * 32;
                if (bs == 12) kg12x16(kc, a, la, qt, c1, o1, c2, o2, ldc, mr);
                else          kg8x16(kc, a, la, qt, c1, o1, c2, o2, ldc, mr);
            }
            i0 += bs;
        }
    }
    return 1;
}

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    if (M >= 256 && K >= 256 && N >= 256 && !(M & 1) && !(K & 1) && !(N & 1) && ((N / 2) % 16) == 0) {
        int64_t m = M / 2, k = K / 2, n = N / 2;
        const float *A11 = A, *A12 = A + k, *A21 = A + m * K, *A22 = A + m * K + k;
        const float *B11 = B, *B12 = B + n, *B21 = B + k * N, *B22 = B + k * N + n;
        float *C11 = C, *C12 = C + n, *C21 = C + m * N, *C22 = C + m * N + n;
        int ok = 1;
        /* M1 = (A11+A22)(B11+B22) -> C11 = , C22 = */
        ok &= gemm_sub(A11, A22, +1, K, B11, B22, +1, N, m, k, n, C11, OP_STORE, C22, OP_STORE, N);
        /* M2 = (A21+A22) B11 -> C21 = , C22 -= */
        if (ok) ok &= gemm_sub(A21, A22, +1, K, B11, NULL, 0, N, m, k, n, C21, OP_STORE, C22, OP_SUB, N);
        /* M3 = A11 (B12-B22) -> C12 = , C22 += */
        if (ok) ok &= gemm_sub(A11, NULL, 0, K, B12, B22, -1, N, m, k, n, C12, OP_STORE, C22, OP_ADD, N);
        /* M4 = A22 (B21-B11) -> C11 += , C21 += */
        if (ok) ok &= gemm_sub(A22, NULL, 0, K, B21, B11, -1, N, m, k, n, C11, OP_ADD, C21, OP_ADD, N);
        /* M5 = (A11+A12) B22 -> C11 -= , C12 += */
        if (ok) ok &= gemm_sub(A11, A12, +1, K, B22, NULL, 0, N, m, k, n, C11, OP_SUB, C12, OP_ADD, N);
        /* M6 = (A21-A11)(B11+B12) -> C22 += */
        if (ok) ok &= gemm_sub(A21, A11, -1, K, B11, B12, +1, N, m, k, n, C22, OP_ADD, NULL, OP_NONE, N);
        /* M7 = (A12-A22)(B21+B22) -> C11 += */
        if (ok) ok &= gemm_sub(A12, A22, -1, K, B21, B22, +1, N, m, k, n, C11, OP_ADD, NULL, OP_NONE, N);
        if (ok) return;
    }
    if (!gemm_plain(A, B, C, M, K, N)) naive(A, B, C, M, K, N);
}
