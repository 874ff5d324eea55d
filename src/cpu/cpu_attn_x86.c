/*
 * cpu_attn_x86.c - the inner loops of the CPU one-pass attention (cpu_attn.c) for items of
 * few rows (decode: the query heads of a K/V head) with AVX2, FMA and F16C: K and V rows
 * are read where they are (f16 converted in registers, f32 as it is), not copied to f32
 * rows first, and every multiply-add is one fused instruction.
 *
 * Why a separate file with intrinsics: posenc builds as ISO C11, where GCC does not contract
 * a * b + c into an FMA (-ffp-contract=off), and target_clones("avx2") does not enable FMA
 * or F16C at all; the generic loops of cpu_attn.c therefore run a multiply and an add per
 * term and convert f16 rows through L1 copies. Measured on the decode shape (1 query
 * x 4096 keys, 32 query heads over 8 K/V heads, d 128, f16 K/V), those loops are what bound
 * the generic path, not memory.
 *
 * Arithmetic (the bound in src/check/check_attention.c, "one pass", covers it: each fused
 * multiply-add rounds once where the generic loop rounds twice):
 *  - scores: x[r][j] = sum over i of q_r[i] k_j[i], in 8 lanes (i mod 8), each lane a chain
 *    of FMAs in order of i, the lanes added pairwise ((0+1)+(2+3)) + ((4+5)+(6+7)) by
 *    horizontal adds;
 *  - softmax: the tile's max and sum of the p_j in 8 lanes (j mod 8) added pairwise, exp as
 *    pe_cpu_exp_f32 with fused multiply-adds;
 *  - values: acc_r = acc_r * alpha_r, then acc_r[i] = fma(p_r[j], v_j[i], acc_r[i]) for j
 *    in order; an item of one row per K/V head (MHA decode) sums even and odd keys apart and
 *    adds the two at the end of the tile.
 * The choice is made once per process from CPUID (AVX2, FMA, F16C, and the OS saving the
 * YMM state); the same machine always takes the same path, so a context's results are the
 * same every call. POSENC_CPU_X86=0 in the environment makes the process take the generic
 * loops instead (the test suites run the CPU attention cases both ways).
 */
#include "cpu_fast.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef PE_ATTN_X86
#include <immintrin.h>

#define PE_X86 __attribute__((target("avx2,fma,f16c")))
#define PE_X86_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

static int have_x86;
static pthread_once_t x86_once = PTHREAD_ONCE_INIT;

static void x86_detect(void)
{
    const char *env = getenv("POSENC_CPU_X86");
    if (env && strcmp(env, "0") == 0)
        return; /* the generic loops, as on a CPU without the three (tests run both) */
    int avx_f16c, avx2, fma;
    pe_cpu_x86_features(&avx_f16c, &avx2, &fma);
    have_x86 = avx_f16c && avx2 && fma;
}

bool pe_attn_x86_available(void)
{
    pthread_once(&x86_once, x86_detect);
    return have_x86 != 0;
}

/* 8 elements of a row from element i: f16 converted, or f32. */
PE_X86_INLINE __m256 ld8(const void *row, int64_t i, const int f16)
{
    if (f16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)row + i)));
    return _mm256_loadu_ps((const float *)row + i);
}

/* The sums of a, b, c, d's 8 lanes as one vector: ((0+1)+(2+3)) + ((4+5)+(6+7)) each. */
PE_X86_INLINE __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    const __m256 ab = _mm256_hadd_ps(a, b); /* a01 a23 b01 b23 | a45 a67 b45 b67 */
    const __m256 cd = _mm256_hadd_ps(c, d);
    const __m256 s = _mm256_hadd_ps(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 ... d4-7 */
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

PE_X86_INLINE float hsum1(__m256 a)
{
    return _mm_cvtss_f32(hsum4(a, a, a, a));
}

/* Key j's row: kt rows from k, kb bytes apart. */
#define KROW(k, kb, j) ((const void *)((const char *)(k) + (j) * (kb)))

/* Four rows of q against N (1-3) keys from key j: 4 N accumulators, each q load serving N
 * keys and each k load (converted once) four rows; with N = 3, 12 chains of FMAs in flight
 * (the latency of an FMA times the two FMA ports needs 8). */
PE_X86_INLINE void scores4n(const float *restrict q, int64_t D, const void *k, int64_t kb,
                            int64_t j, float *restrict x, int64_t xs, const int N, const int f16)
{
    __m256 a[3][4];
    for (int n = 0; n < N; n++)
        for (int u = 0; u < 4; u++)
            a[n][u] = _mm256_setzero_ps();
    for (int64_t i = 0; i < D; i += 8) {
        __m256 kk[3];
        for (int n = 0; n < N; n++)
            kk[n] = ld8(KROW(k, kb, j + n), i, f16);
        for (int u = 0; u < 4; u++) {
            const __m256 qu = _mm256_loadu_ps(q + u * D + i);
            for (int n = 0; n < N; n++)
                a[n][u] = _mm256_fmadd_ps(qu, kk[n], a[n][u]);
        }
    }
    for (int n = 0; n < N; n++) {
        float s[4];
        _mm_storeu_ps(s, hsum4(a[n][0], a[n][1], a[n][2], a[n][3]));
        for (int u = 0; u < 4; u++)
            x[u * xs + j + n] = s[u];
    }
}

PE_X86_INLINE void scores4(const float *restrict q, int64_t D, const void *k, int64_t kb,
                           int64_t kt, float *restrict x, int64_t xs, const int f16)
{
    int64_t j = 0;
    for (; j + 3 <= kt; j += 3)
        scores4n(q, D, k, kb, j, x, xs, 3, f16);
    if (kt - j == 2)
        scores4n(q, D, k, kb, j, x, xs, 2, f16);
    else if (kt - j == 1)
        scores4n(q, D, k, kb, j, x, xs, 1, f16);
}

/* One row: four keys at a time, one accumulator each. */
PE_X86_INLINE void scores1(const float *restrict q, int64_t D, const void *k, int64_t kb,
                           int64_t kt, float *restrict x, const int f16)
{
    int64_t j = 0;
    for (; j + 4 <= kt; j += 4) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < D; i += 8) {
            const __m256 qi = _mm256_loadu_ps(q + i);
            a0 = _mm256_fmadd_ps(qi, ld8(KROW(k, kb, j), i, f16), a0);
            a1 = _mm256_fmadd_ps(qi, ld8(KROW(k, kb, j + 1), i, f16), a1);
            a2 = _mm256_fmadd_ps(qi, ld8(KROW(k, kb, j + 2), i, f16), a2);
            a3 = _mm256_fmadd_ps(qi, ld8(KROW(k, kb, j + 3), i, f16), a3);
        }
        _mm_storeu_ps(x + j, hsum4(a0, a1, a2, a3));
    }
    for (; j < kt; j++) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t i = 0; i < D; i += 8)
            a = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), ld8(KROW(k, kb, j), i, f16), a);
        x[j] = hsum1(a);
    }
}

PE_X86_INLINE void scores_body(const float *restrict qs, int64_t nr, int64_t D, const void *k,
                               int64_t kb, int64_t kt, float *restrict x, int64_t xs,
                               const int f16)
{
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4)
        scores4(qs + r * D, D, k, kb, kt, x + r * xs, xs, f16);
    for (; r < nr; r++)
        scores1(qs + r * D, D, k, kb, kt, x + r * xs, f16);
}

PE_X86 static void scores_f16(const float *restrict qs, int64_t nr, int64_t D, const void *k,
                              int64_t kb, int64_t kt, float *restrict x, int64_t xs)
{
    scores_body(qs, nr, D, k, kb, kt, x, xs, 1);
}

PE_X86 static void scores_f32(const float *restrict qs, int64_t nr, int64_t D, const void *k,
                              int64_t kb, int64_t kt, float *restrict x, int64_t xs)
{
    scores_body(qs, nr, D, k, kb, kt, x, xs, 0);
}

void pe_attn_x86_scores(const float *qs, int64_t nr, int64_t D, const void *k, int64_t kb,
                        bool k_f16, int64_t kt, float *x, int64_t xs)
{
    if (k_f16)
        scores_f16(qs, nr, D, k, kb, kt, x, xs);
    else
        scores_f32(qs, nr, D, k, kb, kt, x, xs);
}

/* G (1-4) rows' acc over columns [i, i + 8 W) (W = 1 or 2 vectors a row): scaled by alpha,
 * then the tile's keys in order, each V load (converted once) serving the G rows. */
PE_X86_INLINE void accum_block(const float *const *xr, float *const *ar, const float *alpha,
                               int64_t kt, const void *v, int64_t vb, int64_t i, const int G,
                               const int W, const int f16)
{
    __m256 a[4][2];
    for (int u = 0; u < G; u++)
        for (int w = 0; w < W; w++)
            a[u][w] = _mm256_mul_ps(_mm256_loadu_ps(ar[u] + i + 8 * w), _mm256_set1_ps(alpha[u]));
    for (int64_t j = 0; j < kt; j++) {
        __m256 vv[2];
        for (int w = 0; w < W; w++)
            vv[w] = ld8(KROW(v, vb, j), i + 8 * w, f16);
        for (int u = 0; u < G; u++) {
            const __m256 p = _mm256_broadcast_ss(xr[u] + j);
            for (int w = 0; w < W; w++)
                a[u][w] = _mm256_fmadd_ps(p, vv[w], a[u][w]);
        }
    }
    for (int u = 0; u < G; u++)
        for (int w = 0; w < W; w++)
            _mm256_storeu_ps(ar[u] + i + 8 * w, a[u][w]);
}

/* Four rows, 16 columns from i: 8 accumulators written out (GCC keeps them in registers;
 * the array form of accum_block spilled the converted V rows in this case, the hot one of
 * GQA decode). */
PE_X86_INLINE void accum4x16(const float *const *xr, float *const *ar, const float *al,
                             int64_t kt, const void *v, int64_t vb, int64_t i, const int f16)
{
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
    __m256 a00 = _mm256_mul_ps(_mm256_loadu_ps(ar[0] + i), _mm256_set1_ps(al[0]));
    __m256 a01 = _mm256_mul_ps(_mm256_loadu_ps(ar[0] + i + 8), _mm256_set1_ps(al[0]));
    __m256 a10 = _mm256_mul_ps(_mm256_loadu_ps(ar[1] + i), _mm256_set1_ps(al[1]));
    __m256 a11 = _mm256_mul_ps(_mm256_loadu_ps(ar[1] + i + 8), _mm256_set1_ps(al[1]));
    __m256 a20 = _mm256_mul_ps(_mm256_loadu_ps(ar[2] + i), _mm256_set1_ps(al[2]));
    __m256 a21 = _mm256_mul_ps(_mm256_loadu_ps(ar[2] + i + 8), _mm256_set1_ps(al[2]));
    __m256 a30 = _mm256_mul_ps(_mm256_loadu_ps(ar[3] + i), _mm256_set1_ps(al[3]));
    __m256 a31 = _mm256_mul_ps(_mm256_loadu_ps(ar[3] + i + 8), _mm256_set1_ps(al[3]));
    const char *vp = v;
    for (int64_t j = 0; j < kt; j++, vp += vb) {
        const __m256 v0 = ld8(vp, i, f16), v1 = ld8(vp, i + 8, f16);
        __m256 p = _mm256_broadcast_ss(x0 + j);
        a00 = _mm256_fmadd_ps(p, v0, a00);
        a01 = _mm256_fmadd_ps(p, v1, a01);
        p = _mm256_broadcast_ss(x1 + j);
        a10 = _mm256_fmadd_ps(p, v0, a10);
        a11 = _mm256_fmadd_ps(p, v1, a11);
        p = _mm256_broadcast_ss(x2 + j);
        a20 = _mm256_fmadd_ps(p, v0, a20);
        a21 = _mm256_fmadd_ps(p, v1, a21);
        p = _mm256_broadcast_ss(x3 + j);
        a30 = _mm256_fmadd_ps(p, v0, a30);
        a31 = _mm256_fmadd_ps(p, v1, a31);
    }
    _mm256_storeu_ps(ar[0] + i, a00);
    _mm256_storeu_ps(ar[0] + i + 8, a01);
    _mm256_storeu_ps(ar[1] + i, a10);
    _mm256_storeu_ps(ar[1] + i + 8, a11);
    _mm256_storeu_ps(ar[2] + i, a20);
    _mm256_storeu_ps(ar[2] + i + 8, a21);
    _mm256_storeu_ps(ar[3] + i, a30);
    _mm256_storeu_ps(ar[3] + i + 8, a31);
}

/* One row (MHA decode: a K/V head's only row), 32 columns from i: four accumulators for
 * even keys and four for odd ones (8 chains in flight), added at the end. */
PE_X86_INLINE void accum1x32(const float *x0, float *a, float al, int64_t kt, const void *v,
                             int64_t vb, int64_t i, const int f16)
{
    const __m256 s = _mm256_set1_ps(al), z = _mm256_setzero_ps();
    __m256 e0 = _mm256_mul_ps(_mm256_loadu_ps(a + i), s);
    __m256 e1 = _mm256_mul_ps(_mm256_loadu_ps(a + i + 8), s);
    __m256 e2 = _mm256_mul_ps(_mm256_loadu_ps(a + i + 16), s);
    __m256 e3 = _mm256_mul_ps(_mm256_loadu_ps(a + i + 24), s);
    __m256 o0 = z, o1 = z, o2 = z, o3 = z;
    const char *vp = v;
    int64_t j = 0;
    for (; j + 2 <= kt; j += 2, vp += 2 * vb) {
        const __m256 p = _mm256_broadcast_ss(x0 + j), q = _mm256_broadcast_ss(x0 + j + 1);
        e0 = _mm256_fmadd_ps(p, ld8(vp, i, f16), e0);
        e1 = _mm256_fmadd_ps(p, ld8(vp, i + 8, f16), e1);
        e2 = _mm256_fmadd_ps(p, ld8(vp, i + 16, f16), e2);
        e3 = _mm256_fmadd_ps(p, ld8(vp, i + 24, f16), e3);
        o0 = _mm256_fmadd_ps(q, ld8(vp + vb, i, f16), o0);
        o1 = _mm256_fmadd_ps(q, ld8(vp + vb, i + 8, f16), o1);
        o2 = _mm256_fmadd_ps(q, ld8(vp + vb, i + 16, f16), o2);
        o3 = _mm256_fmadd_ps(q, ld8(vp + vb, i + 24, f16), o3);
    }
    if (j < kt) {
        const __m256 p = _mm256_broadcast_ss(x0 + j);
        e0 = _mm256_fmadd_ps(p, ld8(vp, i, f16), e0);
        e1 = _mm256_fmadd_ps(p, ld8(vp, i + 8, f16), e1);
        e2 = _mm256_fmadd_ps(p, ld8(vp, i + 16, f16), e2);
        e3 = _mm256_fmadd_ps(p, ld8(vp, i + 24, f16), e3);
    }
    _mm256_storeu_ps(a + i, _mm256_add_ps(e0, o0));
    _mm256_storeu_ps(a + i + 8, _mm256_add_ps(e1, o1));
    _mm256_storeu_ps(a + i + 16, _mm256_add_ps(e2, o2));
    _mm256_storeu_ps(a + i + 24, _mm256_add_ps(e3, o3));
}

PE_X86_INLINE void accum_rows(const float *x, int64_t xs, const int64_t *rows,
                              const float *alpha, int64_t kt, const void *v, int64_t vb,
                              float *acc, int64_t Dv, const int G, const int f16)
{
    const float *xr[4];
    float *ar[4], al[4];
    for (int u = 0; u < G; u++) {
        xr[u] = x + rows[u] * xs;
        ar[u] = acc + rows[u] * Dv;
        al[u] = alpha[rows[u]];
    }
    int64_t i = 0;
    if (G == 4)
        for (; i + 16 <= Dv; i += 16)
            accum4x16(xr, ar, al, kt, v, vb, i, f16);
    if (G == 1)
        for (; i + 32 <= Dv; i += 32)
            accum1x32(xr[0], ar[0], al[0], kt, v, vb, i, f16);
    for (; i + 16 <= Dv; i += 16)
        accum_block(xr, ar, al, kt, v, vb, i, G, 2, f16);
    if (i < Dv)
        accum_block(xr, ar, al, kt, v, vb, i, G, 1, f16);
}

PE_X86_INLINE void accum_body(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                              const float *alpha, int64_t kt, const void *v, int64_t vb,
                              float *acc, int64_t Dv, const int f16)
{
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4)
        accum_rows(x, xs, rows + r, alpha, kt, v, vb, acc, Dv, 4, f16);
    switch (n_rows - r) {
    case 3:
        accum_rows(x, xs, rows + r, alpha, kt, v, vb, acc, Dv, 3, f16);
        break;
    case 2:
        accum_rows(x, xs, rows + r, alpha, kt, v, vb, acc, Dv, 2, f16);
        break;
    case 1:
        accum_rows(x, xs, rows + r, alpha, kt, v, vb, acc, Dv, 1, f16);
        break;
    default:
        break;
    }
}

PE_X86 static void accum_f16(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                             const float *alpha, int64_t kt, const void *v, int64_t vb,
                             float *acc, int64_t Dv)
{
    accum_body(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv, 1);
}

PE_X86 static void accum_f32(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                             const float *alpha, int64_t kt, const void *v, int64_t vb,
                             float *acc, int64_t Dv)
{
    accum_body(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv, 0);
}

void pe_attn_x86_accum(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                       const float *alpha, int64_t kt, const void *v, int64_t vb, bool v_f16,
                       float *acc, int64_t Dv)
{
    if (v_f16)
        accum_f16(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv);
    else
        accum_f32(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv);
}

/* exp(x) for x <= 0 (or -inf), 8 lanes: pe_cpu_exp_f32 (cpu_fast.h) with fused
 * multiply-adds (within the same 2e-7 relative; 0 below -87.3). */
PE_X86_INLINE __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    const __m256 xc = _mm256_max_ps(x, lo);
    const __m256 n = _mm256_floor_ps(
        _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GT_OQ);
    return _mm256_and_ps(keep, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

PE_X86_INLINE float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

PE_X86 float pe_attn_x86_softmax(float *x, int64_t kt, float *m, float *l)
{
    const int64_t k8 = kt & ~(int64_t)7;
    __m256 mx = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < k8; j += 8)
        mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + j));
    float mt = hmax8(mx);
    for (int64_t j = k8; j < kt; j++)
        mt = x[j] > mt ? x[j] : mt;
    mt = *m > mt ? *m : mt;
    if (mt == -INFINITY)
        return -1.0f; /* every key so far masked */
    const float alpha = *m == -INFINITY ? 0.0f : pe_cpu_exp_f32(*m - mt);
    const __m256 mn = _mm256_set1_ps(mt);
    __m256 s = _mm256_setzero_ps();
    for (int64_t j = 0; j < k8; j += 8) {
        const __m256 p = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), mn));
        _mm256_storeu_ps(x + j, p);
        s = _mm256_add_ps(s, p);
    }
    float sum = hsum1(s);
    for (int64_t j = k8; j < kt; j++) {
        x[j] = pe_cpu_exp_f32(x[j] - mt);
        sum += x[j];
    }
    *l = *l * alpha + sum;
    *m = mt;
    return alpha;
}

#else
/* not x86-64 with GCC / Clang: nothing here (PE_ATTN_X86 is not defined, cpu_fast.h) */
typedef int pe_attn_x86_none;
#endif
