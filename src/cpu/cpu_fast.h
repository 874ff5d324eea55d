/*
 * cpu_fast.h - the fast path of the CPU backend (src/cpu/cpu_pool.c, cpu_fast.c,
 * cpu_fast_sincos.c, cpu_attn.c), private to src/cpu; what only the first three share is
 * in cpu_fast_internal.h.
 *
 * backend_cpu.c owns one struct pe_cpu_fast per context unless the context was created
 * with POSENC_CONTEXT_CPU_REFERENCE; each op slot of the CPU vtable calls the matching
 * function below when there is one, and the reference loops otherwise.
 */
#ifndef POSENC_CPU_FAST_H
#define POSENC_CPU_FAST_H

#include <math.h>
#include <string.h>
#include "backend.h"

struct pe_cpu_fast;

/* A pool of n_threads - 1 worker threads (the caller is thread 0); n_threads == 0 means
 * every online core. Reports failures with pe_error(ctx, ...). */
posenc_status pe_cpu_fast_create(posenc_context *ctx, int32_t n_threads,
                                 struct pe_cpu_fast **out);
void pe_cpu_fast_destroy(struct pe_cpu_fast *f);
/* Threads the pool runs (the caller included). */
int pe_cpu_fast_threads(const struct pe_cpu_fast *f);

posenc_status pe_cpu_fast_rope(struct pe_cpu_fast *f, const struct pe_rope_op *op);
posenc_status pe_cpu_fast_sinusoidal(struct pe_cpu_fast *f, const struct pe_sinusoidal_op *op);
posenc_status pe_cpu_fast_alibi(struct pe_cpu_fast *f, const struct pe_alibi_op *op);
posenc_status pe_cpu_fast_learned(struct pe_cpu_fast *f, const struct pe_learned_op *op);
posenc_status pe_cpu_fast_relbias(struct pe_cpu_fast *f, const struct pe_relbias_op *op);
posenc_status pe_cpu_fast_copy(struct pe_cpu_fast *f, const struct pe_copy_op *op);
posenc_status pe_cpu_fast_softmax(struct pe_cpu_fast *f, const struct pe_softmax_op *op);

/* For the other fast-path files (cpu_attn.c; defined in cpu_pool.c, the rows in cpu_fast.c): */
/* Items [begin, end) of a parallel job; scratch is the thread's own (pe_cpu_fast_reserve). */
typedef void (*pe_cpu_task_fn)(void *arg, int64_t begin, int64_t end, float *scratch);
/* Make every thread's scratch hold at least n_floats (64-byte aligned). Call between jobs. */
posenc_status pe_cpu_fast_reserve(struct pe_cpu_fast *f, size_t n_floats);
/* Run fn over [0, n_items) on the pool, in chunks the threads take in turn; `bytes` (the
 * work, in bytes moved or the equivalent) decides how many threads are worth waking. */
void pe_cpu_fast_parallel(struct pe_cpu_fast *f, pe_cpu_task_fn fn, void *arg, int64_t n_items,
                          double bytes);
/* n elements of v from element index idx (stride v->st[0]) to / from floats (f16 converted,
 * with F16C where the CPU has it; f32 -> f16 rounds to nearest even). */
void pe_cpu_load_row(const struct pe_view *v, int64_t idx, int64_t n, float *out);
void pe_cpu_store_row(const struct pe_view *v, int64_t idx, int64_t n, const float *in);
/* The context the pool reports errors to. */
posenc_context *pe_cpu_fast_context(const struct pe_cpu_fast *f);

/* posenc_attention's one pass (cpu_attn.c). */
posenc_status pe_cpu_fast_attn_fused(struct pe_cpu_fast *f, const struct pe_attn_fused_op *op);

/* The one-pass attention's loops for items of few rows with AVX2 + FMA + F16C
 * (cpu_attn_x86.c), on x86-64 built with GCC or Clang. Call them only when
 * pe_attn_x86_available() (the CPU has the three and the OS saves the YMM state). Rows are
 * read where they are: key j's K row starts kb * j bytes after k (V: vb, v), f16 or f32
 * with stride 1; D and Dv are multiples of 8. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(POSENC_NO_F16C)
#define PE_ATTN_X86 1
/* What the CPU has, from CPUID (cpu_fast.c): AVX + F16C with the OS saving the YMM state,
 * AVX2, FMA, AVX-512F with the OS saving the ZMM state (each 0 or 1; the others are 0
 * without the first). */
void pe_cpu_x86_features(int *avx_f16c, int *avx2, int *fma, int *avx512f);
bool pe_attn_x86_available(void);
/* Lines to prefetch (to L2: pf_line in cpu_attn_x86.c) a few at a time from inside a
 * compute loop, spread over the work rather than issued in one burst: a burst fills the
 * core's miss buffers and stalls the loads the work itself makes. Step i (i < end)
 * requests the line base + 64 i: the lines from base in address order, which the L2's own
 * prefetchers then run ahead in. The hot loops take four steps at once (pf_round). */
struct pe_attn_x86_pf_stream {
    const char *base;
    int64_t i, end;
};
/* The next tile's K lines (taken by the scores) and V lines (by the weighted sum of V). */
struct pe_attn_x86_pf {
    struct pe_attn_x86_pf_stream k, v;
};
/* Every line left in s, now. */
void pe_attn_x86_prefetch(struct pe_attn_x86_pf_stream *s);
/* x[r xs + j] = q_r . k_j for the nr rows of qs (D floats each, scale applied) and keys
 * j < kt. pf: the next tile's K lines, requested along the way. */
void pe_attn_x86_scores(const float *qs, int64_t nr, int64_t D, const void *k, int64_t kb,
                        bool k_f16, int64_t kt, float *x, int64_t xs,
                        const struct pe_attn_x86_pf_stream *pf);
/* RoPE inside the pass (pe_attn_fused_op.krot) for pe_attn_x86_scores_rot: key j's row is
 * rotated as it is loaded, with the table row at tab + j ts (mscale cos at each pair's
 * first dim, mscale sin at its second): pairs (lo + 2p, lo + 2p + 1) where adjacent, else
 * (lo + p, lo + p + P), for the window [lo, lo + 2P); the other dims as stored. */
struct pe_attn_x86_rot {
    const float *tab;
    int64_t ts;
    int64_t lo, P;
    int adjacent;
};
/* Whether pe_attn_x86_scores_rot takes this window for rows of D elements: lo and the
 * window's end, and for NeoX-style pairs P, whole vectors of the loops' width. */
bool pe_attn_x86_rot_fits(int64_t D, int64_t lo, int64_t P, int adjacent);
/* pe_attn_x86_scores with each key row rotated by rot as it is read. */
void pe_attn_x86_scores_rot(const float *qs, int64_t nr, int64_t D, const void *k, int64_t kb,
                            bool k_f16, int64_t kt, float *x, int64_t xs,
                            const struct pe_attn_x86_pf_stream *pf,
                            const struct pe_attn_x86_rot *rot);
/* For each r of rows[0 .. n_rows): acc_r = acc_r alpha_r + sum over j < kt of
 * x[r xs + j] v_j (acc_r: Dv floats at acc + r Dv; alpha indexed by r too). */
void pe_attn_x86_accum(const float *x, int64_t xs, const int64_t *rows, int64_t n_rows,
                       const float *alpha, int64_t kt, const void *v, int64_t vb, bool v_f16,
                       float *acc, int64_t Dv, const struct pe_attn_x86_pf_stream *pf);
/* How many of a tile's nr rows (the first ones) the softmax step takes four at a time: with
 * AVX-512F and kt a multiple of 16, nr rounded down to a multiple of 4; else 0. */
int64_t pe_attn_x86_rows4(int64_t nr, int64_t kt);
/* ALiBi's bias left to the softmax step for those rows: row r's logits get x[j] -=
 * slope[r] * (float)d, d = d0[r] - j (|d| where symmetric), as cpu_attn.c's alibi_tile does
 * (the same product and difference, so the same bits), in the pass that finds the max. */
struct pe_attn_x86_alibi {
    const float *slope;
    const int32_t *d0;
    int symmetric;
};
/* The online-softmax step (cpu_attn.c's row_softmax) for rows r < nr over a tile (row r: kt
 * logits at x + r xs, which become the p_j; m[r], l[r] updated), 16 lanes where the CPU has
 * AVX-512F: alpha[r] = exp(m_old - m_new) (0 for the first keys seen), or -1 when every key
 * so far is masked (that row's x untouched but for ab's bias); the rows with alpha >= 0
 * listed in live, their count returned. The first pe_attn_x86_rows4 rows go four at a
 * time (one max, exp and sum for the four: see cpu_attn_x86.c); ab: ALiBi's bias for those
 * rows, or NULL (the caller adds the others' itself). */
int64_t pe_attn_x86_softmax_rows(float *x, int64_t xs, int64_t nr, int64_t kt, float *m, float *l,
                                 float *alpha, int64_t *live, const struct pe_attn_x86_alibi *ab);
#endif

/* AVX2 clones (8 floats per instruction instead of SSE2's 4) of the loops that are
 * compute-bound or close to it in L1 (cpu_fast.c, cpu_fast_sincos.c, cpu_attn.c): sin/cos,
 * the rotation, the fused adds. Picked at load time on x86-64 with GCC; elsewhere the
 * portable version alone. Not with Clang: Clang 14 gives the clones' resolvers global names
 * ("add_row.resolver"), which two libraries built that way would both define. The AVX2 /
 * F16C rows (cpu_fast.c, cpu_fast_sincos.c, cpu_attn_x86.c) are separate functions and run
 * with either compiler. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones) && !defined(POSENC_NO_TARGET_CLONES)
#define PE_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef PE_CLONES
#define PE_CLONES
#endif

/* exp(x) for x <= 0 in f32, vectorisable (softmax and attention share it): x = n ln2 + r
 * (Cody-Waite), Cephes' degree-6 polynomial, 2^n in the exponent bits; within 2e-7
 * relative on [-87.3, 0], 0 below. */
static inline float pe_cpu_exp_f32(float x)
{
    const float lo = -87.33654f; /* ln(2^-126): 2^n stays a normal number */
    const float xc = x > lo ? x : lo;
    const float n = floorf(xc * 1.44269504088896341f + 0.5f);
    const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return x > lo ? p * scale : 0.0f;
}

#endif
