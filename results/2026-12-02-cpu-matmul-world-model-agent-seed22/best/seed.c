/* AVX-512 register-blocked GEMM: C[i, j] = sum_k A[i, k] * B[k, j], row-major, fp32.
 * B is packed into PW = 16*NVEC column panels (K x PW each, 64B aligned, zero padded);
 * the packing is done by the first row block's tiles while they compute.
 * Micro-tile MR x PW in MR*NVEC zmm accumulators, per k NVEC panel loads and
 * one broadcast of A per row; k unrolled by 2. A last vector with <= 8 real columns
 * runs as a ymm accumulator. The next A block is prefetched during the first panel. */
#include <stdint.h>
#include <stdlib.h>
#include <immintrin.h>

#define MR 6
#define NVEC 4
#define PW (16 * NVEC)
#define L1_FIT_BYTES (24 * 1024)

static float *g_buf = 0;
static size_t g_cap = 0;

static float *get_buf(size_t nfloats)
{
    if (nfloats > g_cap) {
        if (g_buf) free(g_buf);
        size_t bytes = ((nfloats * sizeof(float)) + 63) & ~(size_t)63;
        g_buf = (float *)aligned_alloc(64, bytes);
        g_cap = g_buf ? nfloats : 0;
    }
    return g_buf;
}

static inline __mmask16 cols_mask16(int64_t cols)
{
    return (__mmask16)(cols >= 16 ? 0xFFFFu : (cols > 0 ? ((1u << cols) - 1u) : 0u));
}

/* nz: number of zmm column vectors (0..NVEC); yl: one more ymm column vector after them.
 * pk = 1: read B in place (Bsrc, row stride ldb, panel width w) and write the packed
 * panel Bp; pk = 0: read the packed panel Bp. */
static inline __attribute__((always_inline)) void tile(
    const float *restrict A, float *restrict Bp, const float *restrict Bsrc, int64_t ldb,
    int64_t w, float *restrict C, int64_t K, int64_t N, const int mr, const int nz,
    const int yl, const int pk, __mmask16 mlast, __mmask8 my, const float *pf)
{
    __m512 acc[MR][NVEC];
    __m256 accy[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
#pragma GCC unroll 4
        for (int v = 0; v < NVEC; v++)
            acc[r][v] = _mm512_setzero_ps();
        accy[r] = _mm256_setzero_ps();
    }
    __mmask16 vm[NVEC + 1];
#pragma GCC unroll 5
    for (int v = 0; v <= NVEC; v++)
        vm[v] = pk ? cols_mask16(w - 16 * v) : (__mmask16)0xFFFF;

#define KSTEP(SRC, DST, KK)                                                      \
    do {                                                                         \
        __m512 bv[NVEC];                                                         \
        __m256 by = _mm256_setzero_ps();                                         \
        _Pragma("GCC unroll 4")                                                  \
        for (int v = 0; v < NVEC; v++) {                                         \
            bv[v] = _mm512_setzero_ps();                                         \
            if (v < nz) {                                                        \
                if (pk) {                                                        \
                    bv[v] = _mm512_maskz_loadu_ps(vm[v], (SRC) + 16 * v);        \
                    _mm512_store_ps((DST) + 16 * v, bv[v]);                      \
                } else {                                                         \
                    bv[v] = _mm512_load_ps((DST) + 16 * v);                      \
                }                                                                \
            }                                                                    \
        }                                                                        \
        if (yl) {                                                                \
            if (pk) {                                                            \
                by = _mm256_maskz_loadu_ps((__mmask8)vm[nz], (SRC) + 16 * nz);   \
                _mm256_store_ps((DST) + 16 * nz, by);                            \
            } else {                                                             \
                by = _mm256_load_ps((DST) + 16 * nz);                            \
            }                                                                    \
        }                                                                        \
        _Pragma("GCC unroll 8")                                                  \
        for (int r = 0; r < MR; r++) {                                           \
            if (r < mr) {                                                        \
                __m512 av = _mm512_set1_ps(A[r * K + (KK)]);                     \
                _Pragma("GCC unroll 4")                                          \
                for (int v = 0; v < NVEC; v++)                                   \
                    if (v < nz) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]); \
                if (yl) accy[r] = _mm256_fmadd_ps(_mm512_castps512_ps256(av), by, accy[r]); \
            }                                                                    \
        }                                                                        \
    } while (0)

    float *d = Bp;
    const float *s = Bsrc;
    const int64_t sstep = pk ? ldb : 0;
    int64_t k = 0;
    for (; k + 1 < K; k += 2, d += 2 * PW, s += 2 * sstep) {
        if (pf && (k & 15) == 0) {
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++)
                _mm_prefetch((const char *)(pf + r * K + k), _MM_HINT_T0);
        }
        KSTEP(s, d, k);
        KSTEP(s + sstep, d + PW, k + 1);
    }
    if (k < K) {
        KSTEP(s, d, k);
    }
#undef KSTEP

    const int full_last = (mlast == (__mmask16)0xFFFF);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (r < mr) {
            float *c = C + r * N;
#pragma GCC unroll 4
            for (int v = 0; v < NVEC; v++) {
                if (v < nz) {
                    if (yl || v < nz - 1 || full_last) _mm512_storeu_ps(c + 16 * v, acc[r][v]);
                    else _mm512_mask_storeu_ps(c + 16 * v, mlast, acc[r][v]);
                }
            }
            if (yl) _mm256_mask_storeu_ps(c + 16 * nz, my, accy[r]);
        }
    }
}

#define TARGS Ai, Bp, Bsrc, ldb, w, Cij, K, N
#define TDEF(NAME, NZ, YL, PK)                                                       \
    static void NAME(const float *Ai, float *Bp, const float *Bsrc, int64_t ldb,      \
                     int64_t w, float *Cij, int64_t K, int64_t N, int mr,             \
                     __mmask16 ml, __mmask8 my, const float *pf)                      \
    {                                                                                \
        switch (mr) {                                                                \
        case 6: tile(TARGS, 6, NZ, YL, PK, ml, my, pf); break;                       \
        case 5: tile(TARGS, 5, NZ, YL, PK, ml, my, pf); break;                       \
        case 4: tile(TARGS, 4, NZ, YL, PK, ml, my, pf); break;                       \
        case 3: tile(TARGS, 3, NZ, YL, PK, ml, my, pf); break;                       \
        case 2: tile(TARGS, 2, NZ, YL, PK, ml, my, pf); break;                       \
        default: tile(TARGS, 1, NZ, YL, PK, ml, my, pf); break;                      \
        }                                                                            \
    }

TDEF(tile_z1, 1, 0, 0)
TDEF(tile_z2, 2, 0, 0)
TDEF(tile_z3, 3, 0, 0)
TDEF(tile_z4, 4, 0, 0)
TDEF(tile_y0, 0, 1, 0)
TDEF(tile_y1, 1, 1, 0)
TDEF(tile_y2, 2, 1, 0)
TDEF(tile_y3, 3, 1, 0)
TDEF(tile_pz1, 1, 0, 1)
TDEF(tile_pz2, 2, 0, 1)
TDEF(tile_pz3, 3, 0, 1)
TDEF(tile_pz4, 4, 0, 1)
TDEF(tile_py0, 0, 1, 1)
TDEF(tile_py1, 1, 1, 1)
TDEF(tile_py2, 2, 1, 1)
TDEF(tile_py3, 3, 1, 1)

/* pack all of B: panel p holds B[:, PW*p : PW*p+PW] as K rows of PW floats, zero padded */
static void pack_b(const float *restrict B, float *restrict Bp, int64_t K, int64_t N)
{
    int64_t nfull = N / PW;
    int64_t w = N - nfull * PW; /* width of the partial last panel, 0 if none */
    __mmask16 pm[NVEC];
    for (int v = 0; v < NVEC; v++)
        pm[v] = cols_mask16(w - 16 * v);
    size_t pstride = (size_t)K * PW;
    for (int64_t k = 0; k < K; k++) {
        const float *src = B + k * N;
        float *dst = Bp + k * PW;
        for (int64_t p = 0; p < nfull; p++) {
#pragma GCC unroll 4
            for (int v = 0; v < NVEC; v++)
                _mm512_store_ps(dst + p * pstride + 16 * v,
                                _mm512_loadu_ps(src + p * PW + 16 * v));
        }
        if (w) {
#pragma GCC unroll 4
            for (int v = 0; v < NVEC; v++)
                _mm512_store_ps(dst + nfull * pstride + 16 * v,
                                _mm512_maskz_loadu_ps(pm[v], src + nfull * PW + 16 * v));
        }
    }
}

#define RARGS Ai, Bpp, Bsrc, ldb, w, Cij, K, N
/* one tile: row block starting at i0 with mr rows, panel p; pk: pack the panel from B */
static inline __attribute__((always_inline)) void run_tile(
    const float *A, const float *B, float *Bp, float *C, int64_t K, int64_t N,
    int64_t i0, int mr, int64_t p, const float *pf, int pk)
{
    int64_t j0 = p * PW;
    int64_t w = N - j0;
    if (w > PW) w = PW;
    int nv = (int)((w + 15) / 16);
    int64_t lastcols = w - 16 * (nv - 1);
    __mmask16 ml = cols_mask16(lastcols);
    const float *Ai = A + i0 * K;
    float *Bpp = Bp + (size_t)p * K * PW;
    const float *Bsrc = B + j0;
    int64_t ldb = N;
    float *Cij = C + i0 * N + j0;
    if (lastcols <= 8) {
        /* last vector as ymm: nz = nv - 1 full zmm vectors + one ymm */
        __mmask8 my = (__mmask8)(lastcols >= 8 ? 0xFFu : ((1u << lastcols) - 1u));
        if (pk) {
            switch (nv - 1) {
            case 3: tile_py3(RARGS, mr, 0xFFFF, my, pf); break;
            case 2: tile_py2(RARGS, mr, 0xFFFF, my, pf); break;
            case 1: tile_py1(RARGS, mr, 0xFFFF, my, pf); break;
            default: tile_py0(RARGS, mr, 0xFFFF, my, pf); break;
            }
        } else {
            switch (nv - 1) {
            case 3: tile_y3(RARGS, mr, 0xFFFF, my, pf); break;
            case 2: tile_y2(RARGS, mr, 0xFFFF, my, pf); break;
            case 1: tile_y1(RARGS, mr, 0xFFFF, my, pf); break;
            default: tile_y0(RARGS, mr, 0xFFFF, my, pf); break;
            }
        }
    } else {
        if (pk) {
            switch (nv) {
            case 4: tile_pz4(RARGS, mr, ml, 0xFF, pf); break;
            case 3: tile_pz3(RARGS, mr, ml, 0xFF, pf); break;
            case 2: tile_pz2(RARGS, mr, ml, 0xFF, pf); break;
            default: tile_pz1(RARGS, mr, ml, 0xFF, pf); break;
            }
        } else {
            switch (nv) {
            case 4: tile_z4(RARGS, mr, ml, 0xFF, pf); break;
            case 3: tile_z3(RARGS, mr, ml, 0xFF, pf); break;
            case 2: tile_z2(RARGS, mr, ml, 0xFF, pf); break;
            default: tile_z1(RARGS, mr, ml, 0xFF, pf); break;
            }
        }
    }
}
#undef TARGS
#undef RARGS

void matmul(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
    int64_t np = (N + PW - 1) / PW;
    float *Bp = get_buf((size_t)K * PW * (size_t)np);
    if (!Bp) { /* allocation failure: plain fallback */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++) acc += A[i * K + k] * B[k * N + j];
                C[i * N + j] = acc;
            }
        return;
    }

    /* prefetch the first A block (its rows are cold) */
    {
        int64_t r0 = M < MR ? M : MR;
        for (int64_t r = 0; r < r0; r++) {
            const float *row = A + r * K;
            for (int64_t k = 0; k < K; k += 16)
                _mm_prefetch((const char *)(row + k), _MM_HINT_T0);
        }
    }

    size_t bytes_all = (size_t)K * PW * (size_t)np * sizeof(float);
    size_t bytes_panel = (size_t)K * PW * sizeof(float);
    int panels_outer = (np > 1) && (bytes_all > L1_FIT_BYTES) && (bytes_panel <= L1_FIT_BYTES);

    if (panels_outer) {
        pack_b(B, Bp, K, N);
        for (int64_t p = 0; p < np; p++) {
            for (int64_t i0 = 0; i0 < M; i0 += MR) {
                int64_t mrem = M - i0;
                int mr = mrem >= MR ? MR : (int)mrem;
                run_tile(A, B, Bp, C, K, N, i0, mr, p, 0, 0);
            }
        }
    } else {
        /* balanced split of M into nb blocks of base or base+1 (<= MR) rows */
        int64_t nb = (M + MR - 1) / MR;
        int64_t base = M / nb, extra = M % nb;
        int64_t i0 = 0;
        for (int64_t blk = 0; blk < nb; blk++) {
            int mr = (int)(base + (blk < extra ? 1 : 0));
            const float *pf_next = 0;
            if (i0 + mr + MR <= M) pf_next = A + (i0 + mr) * K;
            int pk = (blk == 0);
            for (int64_t p = 0; p < np; p++)
                run_tile(A, B, Bp, C, K, N, i0, mr, p, (p == 0) ? pf_next : 0, pk);
            i0 += mr;
        }
    }
}
