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
 *    pe_cpu_exp_f32 with fused multiply-adds; with AVX-512 and a tile of whole vectors of
 *    16, four rows at a time (softmax4): sums in 16 lanes folded in the order written there,
 *    alpha by the same vector exp (within the same bound); ALiBi's bias, where cpu_attn.c
 *    leaves it to those rows' max pass, is the same product and difference as its
 *    alibi_tile;
 *  - values: acc_r = acc_r * alpha_r, then acc_r[i] = fma(p_r[j], v_j[i], acc_r[i]) for j
 *    in order; an item of one row per K/V head (MHA decode) sums even and odd keys apart and
 *    adds the two at the end of the tile.
 * The loops are written once (cpu_attn_x86_body.h) for 8 lanes (AVX2) and 16 (AVX-512F,
 * where D / Dv are multiples of 16): the 16-lane scores fold lanes i and i + 8 first, then
 * add as above. The choice is made once per process from CPUID (AVX2, FMA, F16C, AVX-512F
 * and the OS saving the YMM / ZMM state); the same machine always takes the same path, so a
 * context's results are the same every call. POSENC_CPU_X86=0 in the environment makes the
 * process take the generic loops instead, POSENC_CPU_X86=avx2 the 8-lane ones (the test
 * suites run the CPU attention cases all three ways).
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

static int have_x86, have_avx512;
/* The prefetches of the next tile go to L2 (prefetcht2) on every CPU. On the Zen 4 host
 * (2 vCPUs) they went to L1 (prefetcht0) from 2026-12-04 to 12-05: measured after a 64 MiB
 * copy (K and V partly still in the L3) t0 was faster, d 64 1 x 4096 0.37-0.42 against
 * 0.49-0.54 ms. With K and V from memory (a 640 MiB read sweep, then a 1 MiB copy that
 * wakes the pool's worker, as posenc bench now times it) t2 is: 32|8 heads, f16 K/V, the
 * two alternated call by call in one process, medians (2026-12-05): d 64 1 x 4096 355
 * against 395 us (600 calls), d 128 633 against 731 (300); 1 x 32768 d 64 2.45 against
 * 2.78 ms, d 128 5.46 against 6.91. With K and V in the L3 (calls back to back) t0 was
 * 1-1.5% faster (276 / 541 against 278 / 550 us). prefetcht1 is t2's equal, no prefetch
 * 2.4-2.9x the time. A line to L1 holds one of the core's few L1 miss buffers until it
 * arrives from memory; to L2 it does not, and more lines are in flight. */
static pthread_once_t x86_once = PTHREAD_ONCE_INIT;

static void x86_detect(void)
{
    const char *env = getenv("POSENC_CPU_X86");
    if (env && strcmp(env, "0") == 0)
        return; /* the generic loops, as on a CPU without the three (tests run both) */
    int avx_f16c, avx2, fma, avx512f;
    pe_cpu_x86_features(&avx_f16c, &avx2, &fma, &avx512f);
    have_x86 = avx_f16c && avx2 && fma;
    /* POSENC_CPU_X86=avx2: the 8-lane loops on an AVX-512 CPU too (tests run both) */
    have_avx512 = have_x86 && avx512f && !(env && strcmp(env, "avx2") == 0);
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

PE_X86_INLINE float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

PE_X86_INLINE float hsum1(__m256 a)
{
    return _mm_cvtss_f32(hsum4(a, a, a, a));
}

/* A loop's own copy of the stream (an empty one for NULL), kept in registers: through the
 * caller's pointer every step would be a load and a store the loop's stores may alias. */
__attribute__((always_inline)) static inline struct pe_attn_x86_pf_stream
pf_local(const struct pe_attn_x86_pf_stream *pf)
{
    if (pf)
        return *pf;
    return (struct pe_attn_x86_pf_stream){NULL, 0, 0};
}

/* Line p to L2. */
__attribute__((always_inline)) static inline void pf_line(const char *p)
{
    _mm_prefetch(p, _MM_HINT_T2);
}

/* The stream's next line, if any. */
__attribute__((always_inline)) static inline void pf_step(struct pe_attn_x86_pf_stream *s)
{
    if (s->i < s->end) {
        pf_line(s->base + s->i * 64);
        s->i++;
    }
}

/* Four steps: four adjacent lines from one address (what is left, where fewer remain). */
__attribute__((always_inline)) static inline void pf_round(struct pe_attn_x86_pf_stream *s)
{
    if (s->i + 4 <= s->end) {
        const char *p = s->base + s->i * 64;
        pf_line(p);
        pf_line(p + 64);
        pf_line(p + 128);
        pf_line(p + 192);
        s->i += 4;
        return;
    }
    while (s->i < s->end)
        pf_step(s);
}

/* The rest of the stream, now. */
__attribute__((always_inline)) static inline void pf_rest(struct pe_attn_x86_pf_stream *s)
{
    while (s->i < s->end)
        pf_round(s);
}

/* Key j's row: kt rows from k, kb bytes apart. */
#define KROW(k, kb, j) ((const void *)((const char *)(k) + (j) * (kb)))

#define SFX(name) name##_avx2
#define PE_IN PE_X86_INLINE
#define PE_FN PE_X86
#define PV __m256
#define VW 8
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(x) _mm256_set1_ps(x)
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps(p, v)
#define V_FMA_BC(p, b, c) _mm256_fmadd_ps(_mm256_broadcast_ss(p), b, c)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_LDROW(row, i, f16) ld8(row, i, f16)
#define V_HSUM4(a, b, c, d) hsum4(a, b, c, d)
#define V_HSUM1(a) hsum1(a)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_HMAX(a) hmax8(a)
#define V_FNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define V_FLOOR(a) _mm256_floor_ps(a)
#define V_POW2I(n) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), \
                                                           _mm256_set1_epi32(127)), 23))
#define V_MUL_IF_GT(x, lo, a, b) \
    _mm256_and_ps(_mm256_cmp_ps(x, lo, _CMP_GT_OQ), _mm256_mul_ps(a, b))
#define V_FMADDSUB(a, b, c) _mm256_fmaddsub_ps(a, b, c)
#define V_DUPEVEN(a) _mm256_moveldup_ps(a)
#define V_DUPODD(a) _mm256_movehdup_ps(a)
#define V_SWAP2(a) _mm256_permute_ps(a, 0xB1)
#include "cpu_attn_x86_body.h"
#undef SFX
#undef PE_IN
#undef PE_FN
#undef PV
#undef VW
#undef V_ZERO
#undef V_SET1
#undef V_LOAD
#undef V_STORE
#undef V_FMA_BC
#undef V_MUL
#undef V_ADD
#undef V_FMA
#undef V_LDROW
#undef V_HSUM4
#undef V_HSUM1
#undef V_MAX
#undef V_SUB
#undef V_HMAX
#undef V_FNMA
#undef V_FLOOR
#undef V_POW2I
#undef V_MUL_IF_GT
#undef V_FMADDSUB
#undef V_DUPEVEN
#undef V_DUPODD
#undef V_SWAP2

/* AVX-512 (F): 16 lanes, twice the work per instruction where D and Dv are multiples of 16. */
#define PE_X512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define PE_X512_INLINE __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static inline

PE_X512_INLINE __m512 ld16(const void *row, int64_t i, const int f16)
{
    if (f16)
        return _mm512_cvtph_ps(
            _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)row + i)));
    return _mm512_loadu_ps((const float *)row + i);
}

/* *p b + c with the float at p in every lane, read by the FMA itself ({1to16}). Written
 * out because GCC, given one _mm512_set1_ps(*p) feeding two FMAs (accum4x2: each p_j
 * times two vectors of V), emits a vbroadcastss that takes a vector pipe: on Zen 4 eight
 * FMAs, four such broadcasts and two f16 conversions of V take 10.2 cycles, eight FMAs
 * reading their broadcast from memory and the two conversions 8.0 (docs/performance.md).
 * The same single rounding as _mm512_fmadd_ps. */
PE_X512_INLINE __m512 fma_bc512(const float *p, __m512 b, __m512 c)
{
    __asm__("vfmadd231ps %[p]%{1to16%}, %[b], %[c]" : [c] "+v"(c) : [b] "v"(b), [p] "m"(*p));
    return c;
}

/* Lanes i and i + 8 added: the 16 lanes to 8 (then hsum4's order). */
PE_X512_INLINE __m256 fold512(__m512 a)
{
    return _mm256_add_ps(_mm512_castps512_ps256(a),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

/* One level of a pairwise sum tree over two vectors, h = 8, 4, 2 or 1: lane e of the result
 * is x[e] + x[e ^ h] where e & h is clear and y[e] + y[e ^ h] where it is set (blend selects
 * y's lanes with e & h, idx = e ^ h, plus 16 for y's). One shuffle, one blend, one add. */
PE_X512_INLINE __m512 tree_step(__m512 x, __m512 y, __mmask16 sel, __m512i idx)
{
    const __m512 p = _mm512_mask_blend_ps(sel, x, y);
    const __m512 q = _mm512_permutex2var_ps(x, idx, y);
    return _mm512_add_ps(p, q);
}

/* tree_step with max for the add. */
PE_X512_INLINE __m512 tree_max(__m512 x, __m512 y, __mmask16 sel, __m512i idx)
{
    return _mm512_max_ps(_mm512_mask_blend_ps(sel, x, y), _mm512_permutex2var_ps(x, idx, y));
}

/* The 16 lane sums of a[n][u] (key n, row u; n < N, the other keys' sums 0) stored at
 * x[u xs + n]: 15 pairwise steps whose result holds row u's four keys in 128-bit lane u,
 * stored with four 16-byte stores. The order of the additions: lanes (e, e ^ 8), then 4,
 * 2, 1 apart, the same for every sum. Each step adds a blend of its two vectors to a
 * shuffle of them, or two shuffles, all of them in-lane or 128-bit-lane shuffles
 * (vshufps, vshuff32x4): on Zen 4 those run beside the FMAs, where the two-source
 * vpermt2ps of an earlier version took the FMA pipe (8 FMAs + 4 vpermt2ps: 11.6 cycles;
 * + 4 vshuff32x4: 8.0). */
PE_X512_INLINE void sums4x4(__m512 a[4][4], const int N, float *x, int64_t xs)
{
    __m512 t[4];
    for (int n = 0; n < 4; n++) {
        if (n >= N) {
            t[n] = _mm512_setzero_ps();
            continue;
        }
        /* rows 0 and 1 (2 and 3): lanes e + (e ^ 8), the first row's in lanes 0-7 */
        const __m512 s01 = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, a[n][0], a[n][1]),
                                         _mm512_shuffle_f32x4(a[n][0], a[n][1], 0x4E));
        const __m512 s23 = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, a[n][2], a[n][3]),
                                         _mm512_shuffle_f32x4(a[n][2], a[n][3], 0x4E));
        /* 128-bit lanes (0, 1) and (2, 3) of each: row u's four partial sums in lane u */
        t[n] = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88),
                             _mm512_shuffle_f32x4(s01, s23, 0xDD));
    }
    /* within each 128-bit lane: elements (e, e ^ 2) of keys 0 and 1 (2 and 3), then (e,
     * e ^ 1): keys 0-3 in order */
    const __m512 r01 = _mm512_add_ps(_mm512_mask_blend_ps(0xCCCC, t[0], t[1]),
                                     _mm512_shuffle_ps(t[0], t[1], 0x4E));
    const __m512 r23 = _mm512_add_ps(_mm512_mask_blend_ps(0xCCCC, t[2], t[3]),
                                     _mm512_shuffle_ps(t[2], t[3], 0x4E));
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(r01, r23, 0x88),
                                   _mm512_shuffle_ps(r01, r23, 0xDD));
    if (N == 4) {
        _mm_storeu_ps(x, _mm512_castps512_ps128(f));
        _mm_storeu_ps(x + xs, _mm512_extractf32x4_ps(f, 1));
        _mm_storeu_ps(x + 2 * xs, _mm512_extractf32x4_ps(f, 2));
        _mm_storeu_ps(x + 3 * xs, _mm512_extractf32x4_ps(f, 3));
        return;
    }
    float s[16];
    _mm512_storeu_ps(s, f);
    for (int u = 0; u < 4; u++)
        for (int n = 0; n < N; n++)
            x[u * xs + n] = s[4 * u + n];
}

#define SFX(name) name##_avx512
#define V_SUMS4X4(a, N, x, xs) sums4x4(a, N, x, xs)
#define PE_IN PE_X512_INLINE
#define PE_FN PE_X512
#define PV __m512
#define VW 16
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_FMA_BC(p, b, c) fma_bc512(p, b, c)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_LDROW(row, i, f16) ld16(row, i, f16)
#define V_HSUM4(a, b, c, d) hsum4(fold512(a), fold512(b), fold512(c), fold512(d))
#define V_HSUM1(a) hsum1(fold512(a))
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_SUB(a, b) _mm512_sub_ps(a, b)
#define V_HMAX(a) _mm512_reduce_max_ps(a)
#define V_FNMA(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define V_FLOOR(a) _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define V_POW2I(n) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), \
                                                           _mm512_set1_epi32(127)), 23))
#define V_MUL_IF_GT(x, lo, a, b) \
    _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), a, b)
#define V_FMADDSUB(a, b, c) _mm512_fmaddsub_ps(a, b, c)
#define V_DUPEVEN(a) _mm512_moveldup_ps(a)
#define V_DUPODD(a) _mm512_movehdup_ps(a)
#define V_SWAP2(a) _mm512_permute_ps(a, 0xB1)
#define VI __m512i
#define VI_SET1(x) _mm512_set1_epi32(x)
#define VI_SUB(a, b) _mm512_sub_epi32(a, b)
#define VI_ABS(a) _mm512_abs_epi32(a)
#define VI_TO_PS(a) _mm512_cvtepi32_ps(a)
#define VI_LANES() _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#include "cpu_attn_x86_body.h"
#undef V_SUMS4X4

void pe_attn_x86_prefetch(struct pe_attn_x86_pf_stream *s)
{
    pf_rest(s);
}

void pe_attn_x86_scores(const float *qs, int64_t nr, int64_t D, const void *k, int64_t kb,
                        bool k_f16, int64_t kt, float *x, int64_t xs,
                        const struct pe_attn_x86_pf_stream *pf)
{
    if (have_avx512 && D % 16 == 0) {
        if (k_f16)
            scores_f16_avx512(qs, nr, D, k, kb, kt, x, xs, pf);
        else
            scores_f32_avx512(qs, nr, D, k, kb, kt, x, xs, pf);
    } else if (k_f16) {
        scores_f16_avx2(qs, nr, D, k, kb, kt, x, xs, pf);
    } else {
        scores_f32_avx2(qs, nr, D, k, kb, kt, x, xs, pf);
    }
}

bool pe_attn_x86_rot_fits(int64_t D, int64_t lo, int64_t P, int adjacent)
{
    pthread_once(&x86_once, x86_detect);
    const int64_t w = have_avx512 && D % 16 == 0 ? 16 : 8;
    return lo % w == 0 && (2 * P) % w == 0 && (adjacent || P % w == 0) && lo + 2 * P <= D;
}

void pe_attn_x86_scores_rot(const float *qs, int64_t nr, int64_t D, const void *k, int64_t kb,
                            bool k_f16, int64_t kt, float *x, int64_t xs,
                            const struct pe_attn_x86_pf_stream *pf,
                            const struct pe_attn_x86_rot *rot)
{
    if (have_avx512 && D % 16 == 0) {
        if (k_f16)
            scores_f16_rot_avx512(qs, nr, D, k, kb, kt, x, xs, pf, rot);
        else
            scores_f32_rot_avx512(qs, nr, D, k, kb, kt, x, xs, pf, rot);
    } else if (k_f16) {
        scores_f16_rot_avx2(qs, nr, D, k, kb, kt, x, xs, pf, rot);
    } else {
        scores_f32_rot_avx2(qs, nr, D, k, kb, kt, x, xs, pf, rot);
    }
}

void pe_attn_x86_accum(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                       const float *alpha, int64_t kt, const void *v, int64_t vb, bool v_f16,
                       float *acc, int64_t Dv, const struct pe_attn_x86_pf_stream *pf)
{
    if (have_avx512 && Dv % 16 == 0) {
        if (v_f16)
            accum_f16_avx512(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv, pf);
        else
            accum_f32_avx512(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv, pf);
    } else if (v_f16) {
        accum_f16_avx2(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv, pf);
    } else {
        accum_f32_avx2(x, xs, rows, n_rows, alpha, kt, v, vb, acc, Dv, pf);
    }
}

int64_t pe_attn_x86_rows4(int64_t nr, int64_t kt)
{
    return have_avx512 && kt % 16 == 0 ? nr - nr % 4 : 0; /* softmax_rows_avx512's test */
}

int64_t pe_attn_x86_softmax_rows(float *x, int64_t xs, int64_t nr, int64_t kt, float *m, float *l,
                                 float *alpha, int64_t *live, const struct pe_attn_x86_alibi *ab)
{
    if (have_avx512)
        return softmax_rows_avx512(x, xs, nr, kt, m, l, alpha, live, ab);
    return softmax_rows_avx2(x, xs, nr, kt, m, l, alpha, live, ab);
}

#else
/* not x86-64 with GCC / Clang: nothing here (PE_ATTN_X86 is not defined, cpu_fast.h) */
typedef int pe_attn_x86_none;
#endif
