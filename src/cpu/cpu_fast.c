/*
 * cpu_fast.c - the fast path of the CPU backend: a small pthread pool (cpu_pool.c) and
 * contiguous, vectorisable row loops for the memory-bound ops. This file: the f16
 * conversions and rows, ALiBi, softmax, learned, relbias and copy; RoPE and sinusoidal
 * are in cpu_fast_sincos.c, the one-pass attention in cpu_attn.c, what the files share
 * in cpu_fast_internal.h.
 *
 * What is fast here: rope (every variant: NORMAL / NeoX pairing, partial rotation, fused
 * Q+K with GQA, backward, rerotate), sinusoidal, alibi, learned and copy. The other ops
 * (learned_backward, resize_2d, relbias, relbias_backward; sincos_2d has its own front end
 * and is not routed here either) call the reference loops of backend_cpu.c: they are small
 * or gather-bound and not on anyone's hot path.
 *
 * Work is split over independent output rows (tokens for rope, blocks of tokens of one
 * batch group for sinusoidal, (q, h, b) for alibi, (t, b) for learned, segments for copy):
 * the threads take contiguous chunks of items from a shared counter (about
 * PE_FAST_CHUNKS_PER_THREAD chunks per thread), so that a thread whose core is taken by
 * another process does not hold the others up at the end (a static split is as slow as
 * its slowest thread on a shared machine). Every output element is written by exactly
 * one thread, and an item's results do not depend on the chunk or thread that computes
 * it. Small jobs run on the calling thread alone (PE_FAST_MIN_BYTES_PER_THREAD).
 *
 * x86-64: the hot loops also have AVX2 clones (target_clones), RoPE rows with f32 or f16
 * storage use AVX2 + F16C intrinsics (8 elements per step, f16 converted in registers),
 * f16 rows elsewhere convert with F16C, RoPE rows prefetch the row PE_ROPE_PREFETCH rows
 * ahead, and large out-of-place RoPE, sinusoidal, learned, relbias and ALiBi f32 outputs
 * are written with streaming stores (PE_FAST_NT_BYTES, pe_cpu_stream_out). Elsewhere the
 * portable loops run.
 *
 * Accuracy (against the double reference, within the bounds of src/check/check.c):
 *  - angles are formed in double from the double frequency tables (better than the f32
 *    angle the bounds assume), and sin/cos come from pe_sincos_block(): a Cody-Waite
 *    reduction by pi/2 in double, then f32 minimax polynomials (8 lanes with AVX2), each
 *    result within 1.6 * 2^-24 of the exact sin/cos of the double angle (the bounds allow
 *    4 ulp for the evaluation); |angle| > 4e5, inf and NaN go to libm.
 *    cos/sin are computed once per (token, pair) and reused by every head (rope) or
 *    every batch row that shares the position (sinusoidal).
 *  - the rotation, the fused adds and alibi's slope * distance are plain f32 arithmetic
 *    (products and sums rounded once each; no contraction into fma in ISO C mode).
 *  - f16 storage goes through table-free, branch-free conversions (round to nearest
 *    even, NaN and infinities kept) that vectorise like the f32 loops.
 */
#include "cpu_fast_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Copy segments (elements): the unit of work of pe_cpu_fast_copy. */
#define PE_FAST_COPY_SEG 32768

/* ------------------------------------------------------------------------------------ */
/* f16                                                                                  */
/* ------------------------------------------------------------------------------------ */

/*
 * Rows of f16 <-> f32. The portable conversions (pe_cpu_h2f, pe_cpu_f2h in
 * cpu_fast_internal.h) vectorise but still cost ~10 integer operations per element on
 * baseline x86-64, more than the memory time of an element; x86-64 CPUs with F16C (every
 * x86 CPU since 2012) convert 8 elements per instruction. The choice is made once per
 * process (pthread_once).
 */
static void h2f_row_c(const uint16_t *restrict p, float *restrict out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = pe_cpu_h2f(p[i]);
}

static void f2h_row_c(const float *restrict in, uint16_t *restrict p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = pe_cpu_f2h(in[i]);
}

static void (*h2f_row)(const uint16_t *restrict, float *restrict, int64_t) = h2f_row_c;
static void (*f2h_row)(const float *restrict, uint16_t *restrict, int64_t) = f2h_row_c;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(POSENC_NO_F16C)

/* What the CPU has (set once, pthread_once): AVX + F16C (the f16 row conversions and the
 * fused f16 adds of learned and relbias), and AVX2 with it (the RoPE, sinusoidal and ALiBi
 * rows). */
static int have_f16c;
int pe_cpu_have_avx2_f16c; /* cpu_fast_sincos.c reads it too */

__attribute__((target("avx,f16c"))) static void h2f_row_f16c(const uint16_t *restrict p,
                                                               float *restrict out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))));
    for (; i < n; i++)
        out[i] = pe_cpu_h2f(p[i]);
}

__attribute__((target("avx,f16c"))) static void f2h_row_f16c(const float *restrict in,
                                                               uint16_t *restrict p, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        p[i] = pe_cpu_f2h(in[i]);
}

/* 8 halves at p as floats. */
__attribute__((target("avx,f16c"), always_inline)) static inline __m256 ld8h(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* 8 floats as halves, rounded to nearest even. */
__attribute__((target("avx,f16c"), always_inline)) static inline __m128i to8h(__m256 v)
{
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}

/* Fused adds of f16 rows, converted in registers (the generic rows convert through L1
 * copies: three passes). The same arithmetic as pe_cpu_h2f, add_row in f32, pe_cpu_f2h. x may
 * be out (in place: each vector is loaded before it is stored). */
__attribute__((target("avx,f16c"))) static void add_row_f16_f32(const uint16_t *x,
                                                                  const float *b, uint16_t *out,
                                                                  int64_t n, bool nt)
{
    int64_t i = 0;
    if (nt) /* out 16-byte aligned, not x: streaming stores */
        for (; i + 8 <= n; i += 8)
            _mm_stream_si128((__m128i *)(void *)(out + i),
                             to8h(_mm256_add_ps(ld8h(x + i), _mm256_loadu_ps(b + i))));
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(out + i),
                         to8h(_mm256_add_ps(ld8h(x + i), _mm256_loadu_ps(b + i))));
    for (; i < n; i++)
        out[i] = pe_cpu_f2h(pe_cpu_h2f(x[i]) + b[i]);
}

__attribute__((target("avx,f16c"))) static void add_row_f16_f16(const uint16_t *x,
                                                                  const uint16_t *t,
                                                                  uint16_t *out, int64_t n,
                                                                  bool nt)
{
    int64_t i = 0;
    if (nt) /* out 16-byte aligned: streaming stores */
        for (; i + 8 <= n; i += 8)
            _mm_stream_si128((__m128i *)(void *)(out + i),
                             to8h(_mm256_add_ps(ld8h(x + i), ld8h(t + i))));
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(out + i), to8h(_mm256_add_ps(ld8h(x + i), ld8h(t + i))));
    for (; i < n; i++)
        out[i] = pe_cpu_f2h(pe_cpu_h2f(x[i]) + pe_cpu_h2f(t[i]));
}

/* out = x + t, f32, with streaming stores (out 32-byte aligned): learned's and relbias'
 * large out-of-place rows, whose destination lines are then not read for ownership first. */
__attribute__((target("avx"))) static void add_row_f32_nt(const float *x, const float *t,
                                                          float *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_stream_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(t + i)));
    for (; i < n; i++)
        out[i] = x[i] + t[i];
}
#endif

static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

#ifdef PE_HAVE_F16C
#include <cpuid.h>

/* CPUID / XGETBV: AVX and F16C (leaf 1 ECX bits 28, 29) usable only when the OS saves
 * the YMM state (OSXSAVE, bit 27, and XCR0 bits 1-2); FMA is leaf 1 ECX bit 12, AVX2 leaf
 * 7 EBX bit 5, AVX-512F leaf 7 EBX bit 16 (with XCR0 bits 5-7). Read directly rather than with __builtin_cpu_supports, which Clang before
 * 15 does not know for "f16c". */
void pe_cpu_x86_features(int *avx_f16c, int *avx2, int *fma, int *avx512f)
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    *avx_f16c = *avx2 = *fma = *avx512f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
    if ((c & need) != need)
        return;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 6u) != 6u)
        return;
    *avx_f16c = 1;
    *fma = (int)((c >> 12) & 1u);
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        *avx2 = (b >> 5) & 1u;
        /* AVX-512F (EBX bit 16) with the OS saving the opmask and ZMM state (XCR0 5-7) */
        *avx512f = (int)((b >> 16) & 1u) && (lo & 0xe0u) == 0xe0u;
    }
}
#endif

static void pick_f16_rows(void)
{
#ifdef PE_HAVE_F16C
    int avx_f16c, avx2, fma, avx512f;
    pe_cpu_x86_features(&avx_f16c, &avx2, &fma, &avx512f);
    if (avx_f16c) {
        h2f_row = h2f_row_f16c;
        f2h_row = f2h_row_f16c;
        have_f16c = 1;
        pe_cpu_have_avx2_f16c = avx2;
    }
#endif
}

void pe_cpu_f16_rows_init(void)
{
    pthread_once(&f16_once, pick_f16_rows);
}

/* ------------------------------------------------------------------------------------ */
/* Rows                                                                                 */
/* ------------------------------------------------------------------------------------ */

/* n elements of v from element index idx (stride st[0]) as floats into out. */
void pe_cpu_load_row(const struct pe_view *v, int64_t idx, int64_t n, float *restrict out)
{
    const int64_t st = v->st[0];
    if (v->dtype == POSENC_DTYPE_F32) {
        const float *p = (const float *)v->mem + idx;
        if (st == 1) {
            memcpy(out, p, (size_t)n * sizeof(float));
        } else {
            for (int64_t i = 0; i < n; i++)
                out[i] = p[i * st];
        }
    } else {
        const uint16_t *p = (const uint16_t *)v->mem + idx;
        if (st == 1) {
            h2f_row(p, out, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                out[i] = pe_cpu_h2f(p[i * st]);
        }
    }
}

/* n floats into v from element index idx (stride st[0]), converted to v's dtype. */
void pe_cpu_store_row(const struct pe_view *v, int64_t idx, int64_t n, const float *restrict in)
{
    const int64_t st = v->st[0];
    if (v->dtype == POSENC_DTYPE_F32) {
        float *p = (float *)v->mem + idx;
        if (st == 1) {
            memcpy(p, in, (size_t)n * sizeof(float));
        } else {
            for (int64_t i = 0; i < n; i++)
                p[i * st] = in[i];
        }
    } else {
        uint16_t *p = (uint16_t *)v->mem + idx;
        if (st == 1) {
            f2h_row(in, p, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                p[i * st] = pe_cpu_f2h(in[i]);
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* ALiBi                                                                                */
/* ------------------------------------------------------------------------------------ */

struct alibi_job {
    struct pe_fast_job base;
    const struct pe_alibi_op *op;
    int kernel; /* ALIBI_K_*: the row kernel */
    bool nt;    /* ALIBI_K_F32, out of place, large: alibi_row_avx2_f32_nt */
    size_t off_in, off_out;
};

/* The row kernels: generic (any dtypes and strides, through L1 copies of the row), or,
 * with AVX2 + F16C, whole rows of f32 -> f32 or f16 -> f16 (logits absent or of dst's
 * dtype, both with stride 1) converted in registers. */
enum { ALIBI_K_GENERIC, ALIBI_K_F32, ALIBI_K_F16 };

/* out[k] = x[k] - m * (float)(base - k) for k in [k0, k1) (x NULL: -(m * dist)); the
 * distance base - k is exact in int32 (positions <= 2^24, checked by the front end). */
PE_CLONES
static void alibi_span(const float *restrict x, float *restrict out, int32_t k0, int32_t k1,
                       int32_t base, float m)
{
    if (x) {
        for (int32_t k = k0; k < k1; k++)
            out[k] = x[k] - m * (float)(base - k);
    } else {
        for (int32_t k = k0; k < k1; k++)
            out[k] = -(m * (float)(base - k));
    }
}

/* The same with the distance k - base (symmetric, keys after the query). */
PE_CLONES
static void alibi_span_after(const float *restrict x, float *restrict out, int32_t k0,
                             int32_t k1, int32_t base, float m)
{
    if (x) {
        for (int32_t k = k0; k < k1; k++)
            out[k] = x[k] - m * (float)(k - base);
    } else {
        for (int32_t k = k0; k < k1; k++)
            out[k] = -(m * (float)(k - base));
    }
}

#ifdef PE_HAVE_F16C
/*
 * A whole ALiBi row with AVX2 (and F16C for f16 storage), converted in registers:
 * out[k] = x[k] - m * (float)dist(k) with dist = base - k for k <= kq and, after kq,
 * -inf (causal), k - base (symmetric) or base - k again. The same operations in the same
 * order as alibi_span / alibi_span_after (int32 distance -> float, one product, one
 * difference; float(-d) == -float(d) and m * -d == -(m * d) exactly), so the results are
 * bit-identical to the portable rows. x may be out (in place: each vector is loaded before
 * it is stored) or NULL (no logits: -(m * dist)).
 */
#define PE_ALIBI_ROW_AVX2(NAME, T, LOAD8, STORE8, TOF, FROMF, ALIGN)                           \
    __attribute__((target("avx2,f16c"))) static void NAME(const T *x, T *out, int32_t K,       \
                                                          int32_t kq, int32_t base, float m,   \
                                                          int after)                           \
    {                                                                                          \
        const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                        \
        const __m256 mv = _mm256_set1_ps(m);                                                   \
        const __m256 ninf = _mm256_set1_ps(-INFINITY);                                         \
        /* segment 0: [0, kq] at base - k; segment 1: (kq, K) as `after` says */              \
        for (int seg = 0; seg < 2; seg++) {                                                    \
            const int32_t k0 = seg ? kq + 1 : 0, k1 = seg ? K : kq + 1;                        \
            const int mode = seg ? after : 0; /* 0: base - k, 1: k - base, 2: -inf */         \
            int32_t k = k0;                                                                    \
            /* ALIGN (streaming stores): elements one by one up to a 32-byte boundary */     \
            for (; ALIGN && k < k1 && ((uintptr_t)(out + k) & 31u) != 0; k++) {               \
                const float b = m * (float)(mode == 1 ? k - base : base - k);                  \
                out[k] = FROMF(mode == 2 ? -INFINITY : x ? TOF(x[k]) - b : -b);                \
            }                                                                                  \
            if (mode == 2) {                                                                   \
                for (; k + 8 <= k1; k += 8)                                                    \
                    STORE8(out + k, ninf);                                                     \
                for (; k < k1; k++)                                                            \
                    out[k] = FROMF(-INFINITY);                                                 \
                continue;                                                                      \
            }                                                                                  \
            const __m256i bv = _mm256_set1_epi32(base);                                        \
            for (; k + 8 <= k1; k += 8) {                                                      \
                const __m256i kv = _mm256_add_epi32(_mm256_set1_epi32(k), iota);               \
                const __m256i dv = mode ? _mm256_sub_epi32(kv, bv) : _mm256_sub_epi32(bv, kv); \
                const __m256 b = _mm256_mul_ps(mv, _mm256_cvtepi32_ps(dv));                    \
                STORE8(out + k, x ? _mm256_sub_ps(LOAD8(x + k), b)                             \
                                  : _mm256_xor_ps(b, _mm256_set1_ps(-0.0f)));                  \
            }                                                                                  \
            for (; k < k1; k++) {                                                              \
                const float b = m * (float)(mode ? k - base : base - k);                       \
                out[k] = FROMF(x ? TOF(x[k]) - b : -b);                                        \
            }                                                                                  \
        }                                                                                      \
    }
PE_ALIBI_ROW_AVX2(alibi_row_avx2_f32, float, PE_LOAD8_F32, PE_STORE8_F32, PE_ID, PE_ID, 0)
PE_ALIBI_ROW_AVX2(alibi_row_avx2_f16, uint16_t, PE_LOAD8_F16, PE_STORE8_F16, pe_cpu_h2f, pe_cpu_f2h,
                  0)
/* f32 rows with streaming stores (aligned by the prologue): large out-of-place outputs,
 * pe_cpu_stream_out */
PE_ALIBI_ROW_AVX2(alibi_row_avx2_f32_nt, float, PE_LOAD8_F32, PE_STORE8_F32_NT, PE_ID, PE_ID, 1)
#endif

static void alibi_run(const struct pe_fast_job *job, int64_t begin, int64_t end, float *scratch)
{
    const struct alibi_job *aj = (const struct alibi_job *)job;
    const struct pe_alibi_op *op = aj->op;
    const struct pe_view *d = &op->dst, *x = &op->logits;
    const int64_t K = d->ne[0], Q = d->ne[1], H = d->ne[2];
    const bool has_x = x->mem != NULL;
    const bool in_place = has_x && pe_cpu_same_view(x, d);
    float *tin = scratch + aj->off_in, *tout = scratch + aj->off_out;
    for (int64_t it = begin; it < end; it++) {
        const int64_t q = it % Q, h = (it / Q) % H, b = it / (Q * H);
        const int64_t di = pe_cpu_at4(d, q, h, b);
        const float m = op->slopes_f32[h];
        /* dist(k) = base - k with base = (q + q_offset) - k_offset; keys k <= base are at
         * or before the query */
        const int64_t base = q + op->q_offset - op->k_offset;
        const int32_t kq = (int32_t)(base < -1 ? -1 : base > K - 1 ? K - 1 : base);
#ifdef PE_HAVE_F16C
        if (aj->kernel != ALIBI_K_GENERIC) {
            const int after = op->causal ? 2 : op->symmetric ? 1 : 0;
            if (aj->kernel == ALIBI_K_F32)
                (aj->nt ? alibi_row_avx2_f32_nt : alibi_row_avx2_f32)(
                    has_x ? (const float *)x->mem + pe_cpu_at4(x, q, h, b) : NULL,
                    (float *)d->mem + di, (int32_t)K, kq, (int32_t)base, m, after);
            else
                alibi_row_avx2_f16(has_x ? (const uint16_t *)x->mem + pe_cpu_at4(x, q, h, b) : NULL,
                                   (uint16_t *)d->mem + di, (int32_t)K, kq, (int32_t)base, m,
                                   after);
            continue;
        }
#endif
        const float *xr =
            has_x ? pe_cpu_input_row(x, pe_cpu_at4(x, q, h, b), K, in_place, tin) : NULL;
        float *out = pe_cpu_output_row(d, di, tout);
        alibi_span(xr, out, 0, kq + 1, (int32_t)base, m);
        if (op->causal) {
            for (int64_t k = kq + 1; k < K; k++)
                out[k] = -INFINITY;
        } else if (op->symmetric) {
            alibi_span_after(xr, out, kq + 1, (int32_t)K, (int32_t)base, m);
        } else {
            alibi_span(xr, out, kq + 1, (int32_t)K, (int32_t)base, m);
        }
        pe_cpu_finish_row(d, di, K, out);
    }
#ifdef PE_HAVE_F16C
    if (aj->nt)
        pe_cpu_sfence(); /* streaming stores are weakly ordered: drain them before the join */
#endif
}

posenc_status pe_cpu_fast_alibi(struct pe_cpu_fast *f, const struct pe_alibi_op *op)
{
    const struct pe_view *d = &op->dst;
    struct alibi_job aj;
    memset(&aj, 0, sizeof(aj));
    aj.op = op;
    size_t used = 0;
    aj.off_in = pe_cpu_carve(&used, (size_t)d->ne[0]);
    aj.off_out = pe_cpu_carve(&used, (size_t)d->ne[0]);
    PE_RETURN_IF_ERROR(pe_cpu_fast_reserve(f, used));
    aj.kernel = ALIBI_K_GENERIC;
#ifdef PE_HAVE_F16C
    const struct pe_view *x = &op->logits;
    if (pe_cpu_have_avx2_f16c && d->st[0] == 1 && d->ne[0] <= INT32_MAX &&
        (!x->mem || (x->dtype == d->dtype && x->st[0] == 1)))
        aj.kernel = d->dtype == POSENC_DTYPE_F32 ? ALIBI_K_F32 : ALIBI_K_F16;
    aj.nt = aj.kernel == ALIBI_K_F32 && pe_cpu_stream_out(x, d);
#endif
    aj.base.fn = alibi_run;
    aj.base.op = op;
    aj.base.n_items = d->ne[1] * d->ne[2] * d->ne[3];
    const double n = (double)d->ne[0] * (double)aj.base.n_items;
    const double bytes = n * (double)(posenc_dtype_size(d->dtype) +
                                      (op->logits.mem ? posenc_dtype_size(op->logits.dtype) : 0));
    pe_cpu_fast_run(f, &aj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Softmax (posenc_softmax)                                                             */
/* ------------------------------------------------------------------------------------ */

/* Items are rows (i1, i2, i3) of x. Per row, as ggml's CPU op: v = scale*x + slope*mask in
 * f32, the max, expf(v - m) in f32 summed in double, the sink's exp added, then a multiply
 * by 1/sum in f32 -- within a few f32 ulp of the double reference. */
struct softmax_job {
    struct pe_fast_job base;
    const struct pe_softmax_op *op;
    size_t off_x, off_v, off_m;
};

PE_CLONES
static float softmax_prep(const float *restrict x, const float *restrict mk, float *restrict v,
                          int64_t n, float scale, float slope, float m)
{
    for (int64_t k = 0; k < n; k++) {
        const float t = mk ? scale * x[k] + slope * mk[k] : scale * x[k];
        v[k] = t;
        m = t > m ? t : m;
    }
    return m;
}

/*
 * exp(x) for the softmax's x = v - max <= 0, in f32 without a branch, so the row loop
 * vectorises (libm's expf does not without -ffast-math): x = n ln2 + r with ln2 in two
 * parts (Cody-Waite, |r| <= ln2/2), exp(r) by Cephes' degree-6 expf polynomial, 2^n
 * through the exponent bits. Relative error within 2e-7 (a few f32 ulp) for x in
 * [-87.3, 0]; below that (and -inf) it gives 0, where expf gives a value under 1.2e-38
 * (a subnormal or 0), which changes no normalised softmax output. NaN is never passed in
 * (the caller's any_nan path writes the NaN row).
 */
static inline float softmax_exp(float x)
{
    return pe_cpu_exp_f32(x);
}

/* v[k] = exp(v[k] - m) in place; returns the sum (in double) and sets *any_nan. The sum
 * runs in 8 lanes (k mod 8) added at the end, a fixed order, so the loop vectorises and
 * the result does not depend on the thread count. */
PE_CLONES
static double softmax_exp_row(float *restrict v, int64_t n, float m, int *restrict any_nan)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int nan_seen = 0;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int l = 0; l < 8; l++) {
            const float t = v[k + l] - m;
            nan_seen |= t != t;
            const float e = softmax_exp(t == t ? t : 0.0f);
            v[k + l] = e;
            acc[l] += (double)e;
        }
    for (; k < n; k++) {
        const float t = v[k] - m;
        nan_seen |= t != t;
        const float e = softmax_exp(t == t ? t : 0.0f);
        v[k] = e;
        acc[k % 8] += (double)e;
    }
    *any_nan = nan_seen;
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static void softmax_run(const struct pe_fast_job *job, int64_t begin, int64_t end,
                        float *scratch)
{
    const struct softmax_job *sj = (const struct softmax_job *)job;
    const struct pe_softmax_op *op = sj->op;
    const struct pe_view *x = &op->x, *d = &op->dst, *mk = &op->mask;
    const int64_t n = x->ne[0], R = x->ne[1], H = x->ne[2];
    const bool in_place = pe_cpu_same_view(x, d);
    float *tx = scratch + sj->off_x, *v = scratch + sj->off_v, *tm = scratch + sj->off_m;
    for (int64_t it = begin; it < end; it++) {
        const int64_t i1 = it % R, i2 = (it / R) % H, i3 = it / (R * H);
        const int64_t h = op->h_off + i2, b = op->b_off + i3;
        const float slope = op->slopes_f32 ? op->slopes_f32[h] : 1.0f;
        const bool has_sink = op->sinks.mem != NULL;
        const float sink =
            has_sink ? ((const float *)op->sinks.mem)[op->sinks.offset + h * op->sinks.st[0]]
                     : -INFINITY;
        /* x is read whole into v before dst is written: in place is safe */
        const float *xr = pe_cpu_input_row(x, pe_cpu_at4(x, i1, i2, i3), n, in_place, tx);
        const float *mr =
            mk->mem ? pe_cpu_input_row(mk, pe_cpu_at4(mk, i1, h % mk->ne[2], b % mk->ne[3]), n,
                                       false, tm)
                    : NULL;
        float m = softmax_prep(xr, mr, v, n, op->scale_f32, slope, sink);
        int row_nan = 0;
        double sum = has_sink ? (double)expf(sink - m) : 0.0;
        /* v_k - m <= 0 for every finite m; m = +inf or -inf rows are NaN or written below */
        if (isfinite(m))
            sum += softmax_exp_row(v, n, m, &row_nan);
        else
            for (int64_t k = 0; k < n; k++) {
                row_nan |= isnan(v[k]);
                const float e = expf(v[k] - m);
                v[k] = e;
                sum += (double)e;
            }
        const bool any_nan = isnan(sink) || row_nan;
        const int64_t di = pe_cpu_at4(d, i1, i2, i3);
        float *out = pe_cpu_output_row(d, di, v);
        if (m == -INFINITY || any_nan) { /* every v_k -inf and no finite sink: NaN (ggml) */
            for (int64_t k = 0; k < n; k++)
                out[k] = NAN;
        } else {
            const float inv = (float)(1.0 / sum);
            for (int64_t k = 0; k < n; k++)
                out[k] = v[k] * inv;
        }
        pe_cpu_finish_row(d, di, n, out);
    }
}

posenc_status pe_cpu_fast_softmax(struct pe_cpu_fast *f, const struct pe_softmax_op *op)
{
    const struct pe_view *x = &op->x;
    struct softmax_job sj;
    memset(&sj, 0, sizeof(sj));
    sj.op = op;
    size_t used = 0;
    sj.off_x = pe_cpu_carve(&used, (size_t)x->ne[0]);
    sj.off_v = pe_cpu_carve(&used, (size_t)x->ne[0]);
    sj.off_m = pe_cpu_carve(&used, (size_t)x->ne[0]);
    PE_RETURN_IF_ERROR(pe_cpu_fast_reserve(f, used));
    sj.base.fn = softmax_run;
    sj.base.op = op;
    sj.base.n_items = x->ne[1] * x->ne[2] * x->ne[3];
    const double n = (double)x->ne[0] * (double)sj.base.n_items;
    const double bytes =
        n * (double)(posenc_dtype_size(x->dtype) + posenc_dtype_size(op->dst.dtype) +
                     (op->mask.mem ? posenc_dtype_size(op->mask.dtype) : 0));
    pe_cpu_fast_run(f, &sj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Learned                                                                              */
/* ------------------------------------------------------------------------------------ */

/* Streaming stores for learned's, relbias' and ALiBi's (f32) large out-of-place outputs
 * (pe_cpu_stream_out): `posenc bench --backend cpu`, the previous build and this one
 * alternated, three rounds each (2026-12-04/05, Zen 4): learned add f32 [1024, 2048, 8]
 * 32.3-33.8 -> 42.1-43.1 GB/s (87.7-91.8 -> 114.9-121.5% of the ceiling beside the row),
 * relbias add f32 [2048, 2048, 32] 32.3-33.5 -> 44.9-50.4 GB/s (89.4-92.7 -> 131.4-134.1%),
 * alibi add f32 100.2-101.5 -> 118.5-120.2% where the ceiling ran at 38-39 GB/s (the same
 * where it ran at 62-67); the in-place rows unchanged. */
struct learned_job {
    struct pe_fast_job base;
    const struct pe_learned_op *op;
    bool f16_rows; /* x, table and dst f16 with stride 1: add_row_f16_f16 */
    bool f32_nt;   /* x, table and dst f32 with stride 1: add_row_f32_nt where aligned */
    bool nt;       /* large out of place: streaming stores (pe_cpu_stream_out) */
    size_t off_in, off_tab, off_out;
};

PE_CLONES
static void add_row(const float *restrict a, const float *restrict b, float *restrict out,
                    int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

static void learned_run(const struct pe_fast_job *job, int64_t begin, int64_t end,
                        float *scratch)
{
    const struct learned_job *lj = (const struct learned_job *)job;
    const struct pe_learned_op *op = lj->op;
    const struct pe_view *d = &op->dst, *x = &op->x, *tab = &op->table, *pos = &op->pos;
    const int64_t n = d->ne[0], T = d->ne[1];
    const bool has_x = x->mem != NULL;
    const bool in_place = has_x && pe_cpu_same_view(x, d);
    float *tin = scratch + lj->off_in, *ttab = scratch + lj->off_tab,
          *tout = scratch + lj->off_out;
    for (int64_t it = begin; it < end; it++) {
        const int64_t t = it % T, b = it / T;
        const int64_t row =
            (int64_t)((const int32_t *)pos->mem)[pos->offset + t * pos->st[0] + b * pos->st[1]];
        const int64_t di = pe_cpu_at4(d, t, b, 0);
#ifdef PE_HAVE_F16C
        if (lj->f16_rows) {
            uint16_t *o = (uint16_t *)d->mem + di;
            add_row_f16_f16((const uint16_t *)x->mem + pe_cpu_at4(x, t, b, 0),
                            (const uint16_t *)tab->mem + tab->offset + row * tab->st[1], o, n,
                            lj->nt && ((uintptr_t)o & 15u) == 0);
            continue;
        }
        if (lj->f32_nt && ((uintptr_t)((float *)d->mem + di) & 31u) == 0) {
            add_row_f32_nt((const float *)x->mem + pe_cpu_at4(x, t, b, 0),
                           (const float *)tab->mem + tab->offset + row * tab->st[1],
                           (float *)d->mem + di, n);
            continue;
        }
#endif
        const float *tr = pe_cpu_input_row(tab, tab->offset + row * tab->st[1], n, false, ttab);
        float *out = pe_cpu_output_row(d, di, tout);
        if (has_x) {
            const float *xr = pe_cpu_input_row(x, pe_cpu_at4(x, t, b, 0), n, in_place, tin);
            add_row(xr, tr, out, n);
        } else if (out != tr) {
            memcpy(out, tr, (size_t)n * sizeof(float));
        }
        pe_cpu_finish_row(d, di, n, out);
    }
#ifdef PE_HAVE_F16C
    if (lj->nt)
        pe_cpu_sfence(); /* streaming stores are weakly ordered: drain them before the join */
#endif
}

posenc_status pe_cpu_fast_learned(struct pe_cpu_fast *f, const struct pe_learned_op *op)
{
    const struct pe_view *d = &op->dst;
    struct learned_job lj;
    memset(&lj, 0, sizeof(lj));
    lj.op = op;
    size_t used = 0;
    lj.off_in = pe_cpu_carve(&used, (size_t)d->ne[0]);
    lj.off_tab = pe_cpu_carve(&used, (size_t)d->ne[0]);
    lj.off_out = pe_cpu_carve(&used, (size_t)d->ne[0]);
    PE_RETURN_IF_ERROR(pe_cpu_fast_reserve(f, used));
#ifdef PE_HAVE_F16C
    const struct pe_view *x = &op->x, *tab = &op->table;
    lj.f16_rows = have_f16c && x->mem && x->dtype == POSENC_DTYPE_F16 &&
                  tab->dtype == POSENC_DTYPE_F16 && d->dtype == POSENC_DTYPE_F16 &&
                  x->st[0] == 1 && tab->st[0] == 1 && d->st[0] == 1;
    lj.nt = have_f16c && x->mem && pe_cpu_stream_out(x, d);
    lj.f32_nt = lj.nt && x->dtype == POSENC_DTYPE_F32 && tab->dtype == POSENC_DTYPE_F32 &&
                d->dtype == POSENC_DTYPE_F32 && x->st[0] == 1 && tab->st[0] == 1 &&
                d->st[0] == 1;
#endif
    lj.base.fn = learned_run;
    lj.base.op = op;
    lj.base.n_items = d->ne[1] * d->ne[2];
    const double n = (double)d->ne[0] * (double)lj.base.n_items;
    const double bytes =
        n * (double)(posenc_dtype_size(d->dtype) + posenc_dtype_size(op->table.dtype) +
                     (op->x.mem ? posenc_dtype_size(op->x.dtype) : 0));
    pe_cpu_fast_run(f, &lj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Relative position bias                                                               */
/* ------------------------------------------------------------------------------------ */

/*
 * dst = logits + table[bucket(k_pos - q_pos), h]. The bias of a row depends only on the
 * relative position, and row q of head h sees relative positions rel_min + (Q - 1 - q) +
 * k for k = 0 .. K - 1 (rel_min = k_offset - (q_offset + Q - 1)): so the call first lays
 * out, per head, the bias of every relative position once (bias[h][i] = table[bucket[i],
 * h] as f32, n_rel = K + Q - 1 values), and each row is then one contiguous add,
 * out = x + bias[h] + (Q - 1 - q), instead of a bucket and a table lookup per element.
 */
struct relbias_job {
    struct pe_fast_job base;
    const struct pe_relbias_op *op;
    const float *bias; /* [H][n_rel] */
    bool f16_rows;     /* x and dst f16 with stride 1: add_row_f16_f32 */
    bool f32_nt;       /* x and dst f32 with stride 1: add_row_f32_nt where aligned */
    bool nt;           /* large out of place: streaming stores (pe_cpu_stream_out) */
    size_t off_in, off_out;
};

static void relbias_run(const struct pe_fast_job *job, int64_t begin, int64_t end,
                        float *scratch)
{
    const struct relbias_job *rj = (const struct relbias_job *)job;
    const struct pe_relbias_op *op = rj->op;
    const struct pe_view *d = &op->dst, *x = &op->logits;
    const int64_t K = d->ne[0], Q = d->ne[1], H = d->ne[2];
    const bool has_x = x->mem != NULL;
    const bool in_place = has_x && pe_cpu_same_view(x, d);
    float *tin = scratch + rj->off_in, *tout = scratch + rj->off_out;
    for (int64_t it = begin; it < end; it++) {
        const int64_t q = it % Q, h = (it / Q) % H, b = it / (Q * H);
        const float *bias = rj->bias + h * op->n_rel + (Q - 1 - q);
        const int64_t di = pe_cpu_at4(d, q, h, b);
#ifdef PE_HAVE_F16C
        if (rj->f16_rows) {
            uint16_t *o = (uint16_t *)d->mem + di;
            add_row_f16_f32((const uint16_t *)x->mem + pe_cpu_at4(x, q, h, b), bias, o, K,
                            rj->nt && ((uintptr_t)o & 15u) == 0);
            continue;
        }
        if (rj->f32_nt && ((uintptr_t)((float *)d->mem + di) & 31u) == 0) {
            add_row_f32_nt((const float *)x->mem + pe_cpu_at4(x, q, h, b), bias,
                           (float *)d->mem + di, K);
            continue;
        }
#endif
        float *out = pe_cpu_output_row(d, di, tout);
        if (has_x)
            add_row(pe_cpu_input_row(x, pe_cpu_at4(x, q, h, b), K, in_place, tin), bias, out, K);
        else
            memcpy(out, bias, (size_t)K * sizeof(float));
        pe_cpu_finish_row(d, di, K, out);
    }
#ifdef PE_HAVE_F16C
    if (rj->nt)
        pe_cpu_sfence(); /* streaming stores are weakly ordered: drain them before the join */
#endif
}

posenc_status pe_cpu_fast_relbias(struct pe_cpu_fast *f, const struct pe_relbias_op *op)
{
    const struct pe_view *d = &op->dst, *tab = &op->table;
    const int64_t K = d->ne[0], Q = d->ne[1], H = d->ne[2];
    if (op->n_rel != K + Q - 1)
        return pe_error(f->ctx, POSENC_ERR_INTERNAL, "relbias: %lld relative positions for "
                        "K = %lld, Q = %lld", (long long)op->n_rel, (long long)K, (long long)Q);
    struct relbias_job rj;
    memset(&rj, 0, sizeof(rj));
    rj.op = op;
    size_t used = 0;
    rj.off_in = pe_cpu_carve(&used, (size_t)K);
    rj.off_out = pe_cpu_carve(&used, (size_t)K);
    PE_RETURN_IF_ERROR(pe_cpu_fast_reserve(f, used));
    const size_t n_bias = (size_t)H * (size_t)op->n_rel;
    if (n_bias > f->bias_cap) {
        float *grown = malloc(n_bias * sizeof(float));
        if (!grown)
            return pe_error(f->ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "out of host memory for the relbias table (%lld x %lld floats)",
                            (long long)H, (long long)op->n_rel);
        free(f->bias);
        f->bias = grown;
        f->bias_cap = n_bias;
    }
    float *bias = f->bias;
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < op->n_rel; i++) {
            const int64_t e = tab->offset + op->bucket[i] * tab->st[0] + h * tab->st[1];
            bias[h * op->n_rel + i] = tab->dtype == POSENC_DTYPE_F32
                                          ? ((const float *)tab->mem)[e]
                                          : pe_cpu_h2f(((const uint16_t *)tab->mem)[e]);
        }
    rj.bias = bias;
#ifdef PE_HAVE_F16C
    const struct pe_view *x = &op->logits;
    rj.f16_rows = have_f16c && x->mem && x->dtype == POSENC_DTYPE_F16 &&
                  d->dtype == POSENC_DTYPE_F16 && x->st[0] == 1 && d->st[0] == 1;
    rj.nt = have_f16c && x->mem && pe_cpu_stream_out(x, d);
    rj.f32_nt = rj.nt && x->dtype == POSENC_DTYPE_F32 && d->dtype == POSENC_DTYPE_F32 &&
                x->st[0] == 1 && d->st[0] == 1;
#endif
    rj.base.fn = relbias_run;
    rj.base.op = op;
    rj.base.n_items = Q * H * d->ne[3];
    const double n = (double)K * (double)rj.base.n_items;
    const double bytes = n * (double)(posenc_dtype_size(d->dtype) +
                                      (op->logits.mem ? posenc_dtype_size(op->logits.dtype) : 0));
    pe_cpu_fast_run(f, &rj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Copy                                                                                 */
/* ------------------------------------------------------------------------------------ */

struct copy_job {
    struct pe_fast_job base;
    const struct pe_copy_op *op;
    int64_t ne[4], ss[4], ds[4]; /* shape and strides (elements) after merging dims */
    int64_t n_seg;               /* segments per row of ne[0] elements */
};

static void copy_span(const struct pe_view *src, const struct pe_view *dst, int64_t si,
                      int64_t di, int64_t n, int64_t ss, int64_t ds)
{
    const size_t es = posenc_dtype_size(src->dtype);
    if (src->dtype == dst->dtype) {
        if (ss == 1 && ds == 1) {
            memcpy((unsigned char *)dst->mem + (size_t)di * es,
                   (const unsigned char *)src->mem + (size_t)si * es, (size_t)n * es);
        } else if (es == 4) {
            const uint32_t *s = (const uint32_t *)src->mem + si;
            uint32_t *d = (uint32_t *)dst->mem + di;
            for (int64_t i = 0; i < n; i++)
                d[i * ds] = s[i * ss];
        } else {
            const uint16_t *s = (const uint16_t *)src->mem + si;
            uint16_t *d = (uint16_t *)dst->mem + di;
            for (int64_t i = 0; i < n; i++)
                d[i * ds] = s[i * ss];
        }
    } else if (src->dtype == POSENC_DTYPE_F32) { /* f32 -> f16 */
        const float *s = (const float *)src->mem + si;
        uint16_t *d = (uint16_t *)dst->mem + di;
        if (ss == 1 && ds == 1) {
            f2h_row(s, d, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                d[i * ds] = pe_cpu_f2h(s[i * ss]);
        }
    } else { /* f16 -> f32 */
        const uint16_t *s = (const uint16_t *)src->mem + si;
        float *d = (float *)dst->mem + di;
        if (ss == 1 && ds == 1) {
            h2f_row(s, d, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                d[i * ds] = pe_cpu_h2f(s[i * ss]);
        }
    }
}

static void copy_run(const struct pe_fast_job *job, int64_t begin, int64_t end, float *scratch)
{
    (void)scratch;
    const struct copy_job *cj = (const struct copy_job *)job;
    const struct pe_copy_op *op = cj->op;
    const int64_t L = cj->ne[0], S = cj->n_seg;
    for (int64_t it = begin; it < end; it++) {
        const int64_t seg = it % S, row = it / S;
        const int64_t i1 = row % cj->ne[1], i2 = (row / cj->ne[1]) % cj->ne[2],
                      i3 = row / (cj->ne[1] * cj->ne[2]);
        const int64_t e0 = seg * PE_FAST_COPY_SEG;
        const int64_t n = L - e0 < PE_FAST_COPY_SEG ? L - e0 : PE_FAST_COPY_SEG;
        const int64_t si = op->src.offset + e0 * cj->ss[0] + i1 * cj->ss[1] + i2 * cj->ss[2] +
                           i3 * cj->ss[3];
        const int64_t di = op->dst.offset + e0 * cj->ds[0] + i1 * cj->ds[1] + i2 * cj->ds[2] +
                           i3 * cj->ds[3];
        copy_span(&op->src, &op->dst, si, di, n, cj->ss[0], cj->ds[0]);
    }
}

posenc_status pe_cpu_fast_copy(struct pe_cpu_fast *f, const struct pe_copy_op *op)
{
    struct copy_job cj;
    memset(&cj, 0, sizeof(cj));
    cj.op = op;
    /* Merge dimension k+1 into k while both tensors step over dim k contiguously, so a
     * contiguous tensor becomes one long row (split into segments below). */
    int n = 0;
    for (int k = 0; k < 4; k++) {
        const int64_t ne = op->src.ne[k], ss = op->src.st[k], ds = op->dst.st[k];
        if (ne == 1)
            continue;
        if (n > 0 && ss == cj.ss[n - 1] * cj.ne[n - 1] && ds == cj.ds[n - 1] * cj.ne[n - 1]) {
            cj.ne[n - 1] *= ne;
            continue;
        }
        cj.ne[n] = ne;
        cj.ss[n] = ss;
        cj.ds[n] = ds;
        n++;
    }
    for (int k = n; k < 4; k++) {
        cj.ne[k] = 1;
        cj.ss[k] = cj.ds[k] = 0;
    }
    if (n == 0) { /* a single element */
        cj.ss[0] = cj.ds[0] = 1;
    }
    cj.n_seg = (cj.ne[0] + PE_FAST_COPY_SEG - 1) / PE_FAST_COPY_SEG;
    cj.base.fn = copy_run;
    cj.base.op = op;
    cj.base.n_items = cj.n_seg * cj.ne[1] * cj.ne[2] * cj.ne[3];
    const double elems = (double)cj.ne[0] * (double)cj.ne[1] * (double)cj.ne[2] * (double)cj.ne[3];
    const double bytes =
        elems * (double)(posenc_dtype_size(op->src.dtype) + posenc_dtype_size(op->dst.dtype));
    pe_cpu_fast_run(f, &cj.base, bytes);
    return POSENC_OK;
}
