/*
 * cpu_fast_internal.h - what the files of the CPU fast path share (src/cpu only;
 * backend_cpu.c and cpu_attn.c use cpu_fast.h): the pool's jobs and state, the f16
 * conversions, the row helpers and the F16C switch.
 *
 * cpu_pool.c: the worker threads, the parallel loop and the scratch; cpu_fast.c: the f16
 * rows and CPU features, ALiBi, softmax, learned, relbias and copy; cpu_fast_sincos.c:
 * RoPE and sinusoidal.
 */
#ifndef POSENC_CPU_FAST_INTERNAL_H
#define POSENC_CPU_FAST_INTERNAL_H

#include "cpu_fast.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* x86-64 with GCC or Clang: the F16C / AVX2 rows (intrinsics in functions with target
 * attributes, picked at run time by pe_cpu_f16_rows_init); POSENC_NO_F16C leaves them out. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(POSENC_NO_F16C)
#include <immintrin.h>
#define PE_HAVE_F16C 1
#endif

/* ------------------------------------------------------------------------------------ */
/* The pool (cpu_pool.c)                                                                */
/* ------------------------------------------------------------------------------------ */

/* A job of the pool: fn runs items [begin, end) with the thread's scratch; each op's job
 * (struct rope_job, ...) starts with one. */
struct pe_fast_job;
typedef void (*pe_fast_fn)(const struct pe_fast_job *job, int64_t begin, int64_t end,
                           float *scratch);

struct pe_fast_job {
    pe_fast_fn fn;
    const void *op;
    int64_t n_items;
};

/* The pool (cpu_pool.c); relbias (cpu_fast.c) keeps its bias table in it. */
struct pe_cpu_fast {
    posenc_context *ctx;
    int n_threads;                   /* the caller + started workers */
    struct pe_fast_worker *workers;  /* [n_threads - 1] */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    _Atomic uint64_t generation;     /* bumped for every job handed to the workers */
    const struct pe_fast_job *job;
    int n_active;                    /* threads of the current job, the caller included */
    _Atomic int remaining;           /* workers of the current job not finished yet */
    _Atomic int stop;
    _Atomic int64_t next;            /* the first item not handed out yet (dynamic split) */
    int64_t chunk;                   /* items per chunk of the current job */
    float **scratch;                 /* [n_threads], scratch_cap floats each, 64-aligned */
    size_t scratch_cap;
    /* relbias' bias table, grown only: the launches of a cut op come largest first, so
     * only the first allocates, before anything is written */
    float *bias;
    size_t bias_cap;
    double min_split;                /* bytes per thread worth a thread */
};

/* Run job->fn over [0, n_items) in contiguous chunks that the threads take in turn.
 * `bytes` (read + written) decides how many threads are worth waking. */
void pe_cpu_fast_run(struct pe_cpu_fast *f, const struct pe_fast_job *job, double bytes);

/* ------------------------------------------------------------------------------------ */
/* f16 and rows (cpu_fast.c)                                                            */
/* ------------------------------------------------------------------------------------ */

/* Pick the f16 row conversions (F16C where the CPU has it), once per process. */
void pe_cpu_f16_rows_init(void);
#ifdef PE_HAVE_F16C
/* The CPU has AVX2 and F16C (the RoPE, sinusoidal and ALiBi rows); set by
 * pe_cpu_f16_rows_init. */
extern int pe_cpu_have_avx2_f16c;
/* 8 elements of f32 / f16 storage to and from a vector of floats (the AVX2 rows). */
#define PE_LOAD8_F32(p) _mm256_loadu_ps(p)
#define PE_STORE8_F32(p, v) _mm256_storeu_ps((p), (v))
#define PE_LOAD8_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define PE_STORE8_F16(p, v)                                                                       \
    _mm_storeu_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define PE_ID(v) (v)
/* 8 f32 results with a streaming (non-temporal) store: p 32-byte aligned. */
#define PE_STORE8_F32_NT(p, v) _mm256_stream_ps((p), (v))
/* Streaming stores are weakly ordered: a job that made them drains them with this before
 * it returns to the pool's join. */
__attribute__((target("sse2"), always_inline)) static inline void pe_cpu_sfence(void)
{
    _mm_sfence();
}
#endif

/* Outputs of at least this many bytes are written out of place with streaming
 * (non-temporal) stores, where the op's rows have them (RoPE, sinusoidal, learned,
 * relbias, ALiBi f32): the destination's lines are not read for ownership first, which is
 * a third of the memory traffic of an out-of-place op (the copy ceiling's memcpy avoids it
 * too). Smaller outputs stay in the caches for whatever reads them next. */
#define PE_FAST_NT_BYTES (16.0 * 1024 * 1024)

/* The bits of a float, and a float from its bits. */
static inline uint32_t pe_cpu_bits32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float pe_cpu_from_bits32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* binary16 -> float, exact (F. Giesen's half_to_float, branch-free). */
static inline float pe_cpu_h2f(uint16_t h)
{
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    const uint32_t e = o & 0x0f800000u;
    const uint32_t is_infnan = e == 0x0f800000u ? ~0u : 0u;
    const uint32_t is_small = e == 0u ? ~0u : 0u;
    o += 0x38000000u;                   /* exponent bias 15 -> 127 */
    o += is_infnan & 0x38000000u;       /* inf / NaN: exponent all ones */
    const uint32_t den =
        pe_cpu_bits32(pe_cpu_from_bits32(o + 0x00800000u) - pe_cpu_from_bits32(0x38800000u));
    o = (is_small & den) | (~is_small & o); /* zero / subnormal: renormalised by the FPU */
    return pe_cpu_from_bits32(o | (((uint32_t)h & 0x8000u) << 16));
}

/* float -> binary16, round to nearest even; overflow -> inf, NaN -> quiet NaN (F. Giesen's
 * float_to_half_fast3_rtne, branch-free). */
static inline uint16_t pe_cpu_f2h(float f)
{
    uint32_t u = pe_cpu_bits32(f);
    const uint32_t sign = u & 0x80000000u;
    u ^= sign;
    /* normal results: rebias, round to nearest even at bit 13 */
    const uint32_t norm = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13; /* (15-127)<<23 + 0xfff */
    /* subnormal results: let the FPU round by adding a magic number */
    const float magic = pe_cpu_from_bits32(0x3f000000u); /* 0.5 = 2^-1: ulp 2^-24 */
    const uint32_t sub = pe_cpu_bits32(pe_cpu_from_bits32(u) + magic) - 0x3f000000u;
    /* inf / NaN */
    const uint32_t inf = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
    uint32_t o = u < 0x38800000u ? sub : norm;
    o = u >= 0x47800000u ? inf : o;
    return (uint16_t)(o | (sign >> 16));
}

/* f32 with stride 1: rows read and written where they are. */
static inline bool pe_cpu_direct_f32(const struct pe_view *v)
{
    return v->dtype == POSENC_DTYPE_F32 && v->st[0] == 1;
}

/* The element index of (0, i1, i2, i3) in v. */
static inline int64_t pe_cpu_at4(const struct pe_view *v, int64_t i1, int64_t i2, int64_t i3)
{
    return v->offset + i1 * v->st[1] + i2 * v->st[2] + i3 * v->st[3];
}

/* The same elements (memory, dtype, offset, strides): an op in place. */
static inline bool pe_cpu_same_view(const struct pe_view *a, const struct pe_view *b)
{
    return a->mem == b->mem && a->dtype == b->dtype && a->offset == b->offset &&
           a->st[0] == b->st[0] && a->st[1] == b->st[1] && a->st[2] == b->st[2] &&
           a->st[3] == b->st[3];
}

/* Whether an op writes dst with streaming stores: dst of PE_FAST_NT_BYTES or more and not
 * the view of its input x (NULL or x->mem NULL: no input). */
static inline bool pe_cpu_stream_out(const struct pe_view *x, const struct pe_view *d)
{
    return !(x && x->mem && pe_cpu_same_view(x, d)) &&
           (double)d->ne[0] * (double)d->ne[1] * (double)d->ne[2] * (double)d->ne[3] *
                   (double)posenc_dtype_size(d->dtype) >=
               PE_FAST_NT_BYTES;
}

/* A row of an input as contiguous floats: the memory itself when it is f32 with stride 1
 * and not also the output (in place), else a converted copy in tmp. */
static inline const float *pe_cpu_input_row(const struct pe_view *v, int64_t idx, int64_t n,
                                            bool aliased, float *tmp)
{
    if (pe_cpu_direct_f32(v) && !aliased)
        return (const float *)v->mem + idx;
    pe_cpu_load_row(v, idx, n, tmp);
    return tmp;
}

/* Where to write an output row: the memory itself when f32 with stride 1, else tmp
 * (then pe_cpu_store_row). */
static inline float *pe_cpu_output_row(const struct pe_view *v, int64_t idx, float *tmp)
{
    return pe_cpu_direct_f32(v) ? (float *)v->mem + idx : tmp;
}

static inline void pe_cpu_finish_row(const struct pe_view *v, int64_t idx, int64_t n, float *row)
{
    if (!pe_cpu_direct_f32(v))
        pe_cpu_store_row(v, idx, n, row);
}

/* Scratch layout helper: n floats from *used, rounded to 16 floats (64 bytes). */
static inline size_t pe_cpu_carve(size_t *used, size_t n)
{
    size_t at = *used;
    *used += (n + 15) & ~(size_t)15;
    return at;
}

#endif
