/*
 * cpu_fast.c - the fast path of the CPU backend: a small pthread pool and contiguous,
 * vectorisable row loops for the memory-bound ops.
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
 * ahead, and large out-of-place RoPE and sinusoidal outputs are written with streaming
 * stores (PE_FAST_NT_BYTES). Elsewhere the portable loops run.
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
#include "cpu_fast.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Below this many bytes moved per thread, a job uses fewer threads (waking a worker costs
 * more than it saves). POSENC_CPU_MIN_SPLIT=<bytes>, read at context creation, replaces
 * it (the tests set 1 to split even tiny ops over every thread). */
#define PE_FAST_MIN_BYTES_PER_THREAD (256 * 1024)
/* RoPE computes the next token's cos/sin in slices of at least this many pairs (so that
 * pe_sincos_block still runs vector-wide). */
#define PE_ROPE_SLICE 16
/* RoPE outputs of at least this many bytes are written out of place with streaming
 * (non-temporal) stores: the destination's lines are not read for ownership first, which
 * is a third of the memory traffic of an out-of-place op (the copy ceiling's memcpy
 * avoids it too). Smaller outputs stay in the caches for whatever reads them next. */
#define PE_FAST_NT_BYTES (16.0 * 1024 * 1024)
/* Chunks per thread of the dynamic split: a thread finishes at most one chunk (about
 * 1 / (n_threads * PE_FAST_CHUNKS_PER_THREAD) of the job) after the others. Each chunk
 * starts its double-buffered sin/cos pipeline afresh (one table not overlapped). */
#define PE_FAST_CHUNKS_PER_THREAD 16
/* A worker that finished a job spins this long for the next before it sleeps on the
 * condition variable, and the caller likewise for the workers' end: a wake-up through the
 * kernel costs tens of microseconds (more in a VM), a decode step's op under a millisecond. */
#define PE_FAST_SPIN_NS 100000
/* Copy segments (elements): the unit of work of pe_cpu_fast_copy. */
#define PE_FAST_COPY_SEG 32768

/* AVX2 clones (8 floats per instruction instead of SSE2's 4) of the loops that are
 * compute-bound or close to it in L1: sin/cos, the rotation, the fused adds. Picked at load
 * time on x86-64 with GCC; elsewhere the portable version alone. Not with Clang: Clang 14
 * gives the clones' resolvers global names ("add_row.resolver"), which two libraries
 * built that way would both define. The AVX2 / F16C rows below are separate functions
 * and run with either compiler. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones) && !defined(POSENC_NO_TARGET_CLONES)
#define PE_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef PE_CLONES
#define PE_CLONES
#endif

/* ------------------------------------------------------------------------------------ */
/* The pool                                                                             */
/* ------------------------------------------------------------------------------------ */

static void f16_rows_init(void);

struct pe_fast_job;
typedef void (*pe_fast_fn)(const struct pe_fast_job *job, int64_t begin, int64_t end,
                           float *scratch);

struct pe_fast_job {
    pe_fast_fn fn;
    const void *op;
    int64_t n_items;
};

struct pe_fast_worker {
    struct pe_cpu_fast *f;
    int tid;
    pthread_t thread;
};

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

/* Take chunks of the current job until none is left. */
static void run_chunks(struct pe_cpu_fast *f, const struct pe_fast_job *job, float *scratch)
{
    const int64_t n = job->n_items, chunk = f->chunk;
    for (;;) {
        const int64_t b = atomic_fetch_add_explicit(&f->next, chunk, memory_order_relaxed);
        if (b >= n)
            break;
        job->fn(job, b, b + chunk < n ? b + chunk : n, scratch);
    }
}

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin (for at most PE_FAST_SPIN_NS) while the pool has no job newer than `seen` (worker)
 * or, with seen = UINT64_MAX, while workers of the current job are still running (caller). */
static void spin_wait(struct pe_cpu_fast *f, uint64_t seen)
{
    const int64_t t0 = mono_ns();
    for (unsigned i = 1;; i++) {
        if (seen == UINT64_MAX ? atomic_load(&f->remaining) == 0
                               : atomic_load(&f->generation) != seen || atomic_load(&f->stop))
            return;
        cpu_relax();
        if (i % 64 == 0 && mono_ns() - t0 > PE_FAST_SPIN_NS)
            return;
    }
}

static void *worker_main(void *arg)
{
    struct pe_fast_worker *w = arg;
    struct pe_cpu_fast *f = w->f;
    uint64_t seen = 0;
    for (;;) {
        spin_wait(f, seen); /* the next job often follows at once: no sleep, no wake-up */
        pthread_mutex_lock(&f->mu);
        while (!f->stop && f->generation == seen)
            pthread_cond_wait(&f->wake, &f->mu);
        if (f->stop) {
            pthread_mutex_unlock(&f->mu);
            break;
        }
        seen = f->generation;
        if (w->tid >= f->n_active) {
            pthread_mutex_unlock(&f->mu);
            continue;
        }
        const struct pe_fast_job *job = f->job;
        float *scratch = f->scratch[w->tid];
        pthread_mutex_unlock(&f->mu);
        run_chunks(f, job, scratch);
        pthread_mutex_lock(&f->mu);
        if (--f->remaining == 0)
            pthread_cond_signal(&f->done);
        pthread_mutex_unlock(&f->mu);
    }
    return NULL;
}

/* Run job->fn over [0, n_items) in contiguous chunks that the threads take in turn.
 * `bytes` (read + written) decides how many threads are worth waking. */
static void fast_run(struct pe_cpu_fast *f, const struct pe_fast_job *job, double bytes)
{
    int64_t nt = f->n_threads;
    if (nt > job->n_items)
        nt = job->n_items;
    double by_size = bytes / f->min_split;
    if ((double)nt > by_size)
        nt = by_size < 1.0 ? 1 : (int64_t)by_size;
    if (nt <= 1) {
        job->fn(job, 0, job->n_items, f->scratch[0]);
        return;
    }
    int64_t chunk = (job->n_items + nt * PE_FAST_CHUNKS_PER_THREAD - 1) /
                    (nt * PE_FAST_CHUNKS_PER_THREAD);
    f->chunk = chunk < 1 ? 1 : chunk;
    atomic_store_explicit(&f->next, 0, memory_order_relaxed);
    pthread_mutex_lock(&f->mu);
    f->job = job;
    f->n_active = (int)nt;
    f->remaining = (int)nt - 1;
    f->generation++;
    pthread_cond_broadcast(&f->wake);
    pthread_mutex_unlock(&f->mu);

    run_chunks(f, job, f->scratch[0]);

    spin_wait(f, UINT64_MAX); /* the workers' last chunks end about when the caller's does */
    pthread_mutex_lock(&f->mu);
    while (f->remaining > 0)
        pthread_cond_wait(&f->done, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

/* Make every thread's scratch hold at least n floats. Called between jobs only (the
 * workers are waiting), so no lock is needed beyond the hand-off in fast_run. */
static posenc_status fast_reserve(struct pe_cpu_fast *f, size_t n)
{
    if (n <= f->scratch_cap)
        return POSENC_OK;
    size_t cap = f->scratch_cap ? f->scratch_cap : 4096;
    while (cap < n)
        cap *= 2;
    size_t bytes = cap * sizeof(float);
    for (int t = 0; t < f->n_threads; t++) {
        free(f->scratch[t]);
        f->scratch[t] = aligned_alloc(64, bytes);
        if (!f->scratch[t]) {
            for (int k = 0; k < f->n_threads; k++) {
                free(f->scratch[k]);
                f->scratch[k] = NULL;
            }
            f->scratch_cap = 0;
            return pe_error(f->ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "out of host memory for %d x %zu bytes of CPU scratch",
                            f->n_threads, bytes);
        }
    }
    f->scratch_cap = cap;
    return POSENC_OK;
}

posenc_status pe_cpu_fast_create(posenc_context *ctx, int32_t n_threads, struct pe_cpu_fast **out)
{
    *out = NULL;
    f16_rows_init();
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int32_t)(n < PE_MAX_THREADS ? n : PE_MAX_THREADS) : 1;
    }
    struct pe_cpu_fast *f = calloc(1, sizeof(*f));
    if (!f)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for the CPU pool");
    f->ctx = ctx;
    f->n_threads = 1;
    f->min_split = PE_FAST_MIN_BYTES_PER_THREAD;
    const char *env = getenv("POSENC_CPU_MIN_SPLIT");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        if (*end == '\0' && v >= 1.0)
            f->min_split = v;
    }
    f->scratch = calloc((size_t)n_threads, sizeof(*f->scratch));
    f->workers = calloc((size_t)n_threads, sizeof(*f->workers));
    if (!f->scratch || !f->workers) {
        free(f->scratch);
        free(f->workers);
        free(f);
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for the CPU pool");
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->wake, NULL);
    pthread_cond_init(&f->done, NULL);
    for (int t = 1; t < n_threads; t++) {
        struct pe_fast_worker *w = &f->workers[t - 1];
        w->f = f;
        w->tid = t;
        int err = pthread_create(&w->thread, NULL, worker_main, w);
        if (err != 0) {
            pe_log(ctx, POSENC_LOG_WARN,
                   "cpu: could not start worker thread %d of %d (error %d); using %d", t,
                   (int)n_threads, err, f->n_threads);
            break;
        }
        f->n_threads = t + 1;
    }
    posenc_status st = fast_reserve(f, 4096);
    if (st != POSENC_OK) {
        pe_cpu_fast_destroy(f);
        return st;
    }
    pe_log(ctx, POSENC_LOG_INFO, "cpu: fast path with %d thread(s)", f->n_threads);
    *out = f;
    return POSENC_OK;
}

void pe_cpu_fast_destroy(struct pe_cpu_fast *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->wake);
    pthread_mutex_unlock(&f->mu);
    for (int t = 1; t < f->n_threads; t++)
        pthread_join(f->workers[t - 1].thread, NULL);
    for (int t = 0; t < f->n_threads; t++)
        free(f->scratch[t]);
    free(f->bias);
    pthread_cond_destroy(&f->done);
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->mu);
    free(f->scratch);
    free(f->workers);
    free(f);
}

int pe_cpu_fast_threads(const struct pe_cpu_fast *f)
{
    return f->n_threads;
}

/* ------------------------------------------------------------------------------------ */
/* sin / cos, f16                                                                       */
/* ------------------------------------------------------------------------------------ */

static inline uint64_t bits64(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static inline uint32_t bits32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float from_bits32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* pi/2 in parts of 33 bits (fdlibm's pio2_1, pio2_2): k * PE_PIO2_1 is exact for
 * |k| < 2^20, which PE_TRIG_FAST_MAX keeps. */
#define PE_PIO2_1 1.57079632673412561417e+00
#define PE_PIO2_2 6.07710050630396597660e-11
#define PE_TWO_OVER_PI 6.36619772367581382433e-01
#define PE_ROUND_MAGIC 0x1.8p52 /* x + magic - magic = nearest integer, for |x| < 2^51 */
#define PE_TRIG_FAST_MAX 4.0e5

/*
 * s[i] = sin(a[i]) * scale, c[i] = cos(a[i]) * scale in f32. The reduction by pi/2 is done
 * in double (k * PE_PIO2_1 is exact for |k| < 2^20, PE_PIO2_2 leaves an error below 1e-15
 * for |a| <= PE_TRIG_FAST_MAX), the reduced r (|r| <= pi/4) is rounded to f32 and the
 * polynomials are Cephes' sinf / cosf minimax ones in f32: measured against libm's double
 * sin/cos over 16 M random angles in [-4e5, 4e5], the largest error is 1.56 * 2^-24 (the
 * bounds of src/check/check.c allow 4 ulp, 8 * 2^-24, for the evaluation alone), then one
 * f32 rounding for the scale. Branch-free (the quadrant comes from the bits of the rounded
 * multiple of pi/2), so that it vectorises 8-wide in f32 (with AVX2): about 1 ns per
 * sin+cos pair against 3.6 ns for the double-precision polynomials this replaced. Angles
 * outside [-PE_TRIG_FAST_MAX, PE_TRIG_FAST_MAX] (and inf / NaN) are redone with libm.
 */
PE_CLONES
static void pe_sincos_block(const double *restrict a, float *restrict s, float *restrict c,
                            int64_t n, double scale)
{
    const float fscale = (float)scale;
    /* any angle outside the fast range (or NaN): an OR over the block, vectorised with
     * the rest, so that the scalar libm pass below runs only when needed (it was scalar
     * compares for every pair, 60% of this function's time) */
    uint32_t far = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i];
        far |= (uint32_t)!(fabs(x) <= PE_TRIG_FAST_MAX);
        const double t = x * PE_TWO_OVER_PI + PE_ROUND_MAGIC;
        const double k = t - PE_ROUND_MAGIC;
        const uint32_t q = (uint32_t)bits64(t); /* low bits: k mod 2^32 (two's complement) */
        const float r = (float)((x - k * PE_PIO2_1) - k * PE_PIO2_2);
        const float z = r * r;
        const float sp =
            r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f));
        const float cp = (1.0f - 0.5f * z) +
                         z * z *
                             (4.166664568298827e-2f +
                              z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f));
        /* quadrant k mod 4: odd swaps sin and cos; sin < 0 in 2, 3; cos < 0 in 1, 2 */
        const uint32_t swap = 0u - (q & 1u);
        const uint32_t su = bits32(sp), cu = bits32(cp);
        uint32_t so = (su & ~swap) | (cu & swap);
        uint32_t co = (cu & ~swap) | (su & swap);
        so ^= (q & 2u) << 30;
        co ^= ((q + 1u) & 2u) << 30;
        s[i] = from_bits32(so) * fscale;
        c[i] = from_bits32(co) * fscale;
    }
    if (far)
        for (int64_t i = 0; i < n; i++)
            if (!(fabs(a[i]) <= PE_TRIG_FAST_MAX)) {
                s[i] = (float)(sin(a[i]) * scale);
                c[i] = (float)(cos(a[i]) * scale);
            }
}

/* binary16 -> float, exact (F. Giesen's half_to_float, branch-free). */
static inline float h2f(uint16_t h)
{
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    const uint32_t e = o & 0x0f800000u;
    const uint32_t is_infnan = e == 0x0f800000u ? ~0u : 0u;
    const uint32_t is_small = e == 0u ? ~0u : 0u;
    o += 0x38000000u;                   /* exponent bias 15 -> 127 */
    o += is_infnan & 0x38000000u;       /* inf / NaN: exponent all ones */
    const uint32_t den = bits32(from_bits32(o + 0x00800000u) - from_bits32(0x38800000u));
    o = (is_small & den) | (~is_small & o); /* zero / subnormal: renormalised by the FPU */
    return from_bits32(o | (((uint32_t)h & 0x8000u) << 16));
}

/* float -> binary16, round to nearest even; overflow -> inf, NaN -> quiet NaN (F. Giesen's
 * float_to_half_fast3_rtne, branch-free). */
static inline uint16_t f2h(float f)
{
    uint32_t u = bits32(f);
    const uint32_t sign = u & 0x80000000u;
    u ^= sign;
    /* normal results: rebias, round to nearest even at bit 13 */
    const uint32_t norm = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13; /* (15-127)<<23 + 0xfff */
    /* subnormal results: let the FPU round by adding a magic number */
    const float magic = from_bits32(0x3f000000u); /* 0.5 = 2^-1: ulp 2^-24 */
    const uint32_t sub = bits32(from_bits32(u) + magic) - 0x3f000000u;
    /* inf / NaN */
    const uint32_t inf = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
    uint32_t o = u < 0x38800000u ? sub : norm;
    o = u >= 0x47800000u ? inf : o;
    return (uint16_t)(o | (sign >> 16));
}

/*
 * Rows of f16 <-> f32. The portable loops above vectorise but still cost ~10 integer
 * operations per element on baseline x86-64, more than the memory time of an element;
 * x86-64 CPUs with F16C (every x86 CPU since 2012) convert 8 elements per instruction.
 * The choice is made once per process (pthread_once).
 */
static void h2f_row_c(const uint16_t *restrict p, float *restrict out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = h2f(p[i]);
}

static void f2h_row_c(const float *restrict in, uint16_t *restrict p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = f2h(in[i]);
}

static void (*h2f_row)(const uint16_t *restrict, float *restrict, int64_t) = h2f_row_c;
static void (*f2h_row)(const float *restrict, uint16_t *restrict, int64_t) = f2h_row_c;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(POSENC_NO_F16C)
#include <immintrin.h>
#define PE_HAVE_F16C 1

/* What the CPU has (set once, pthread_once): AVX + F16C (the f16 row conversions and the
 * fused f16 adds of learned and relbias), and AVX2 with it (the RoPE, sinusoidal and ALiBi
 * rows). */
static int have_f16c, have_avx2_f16c;

__attribute__((target("avx,f16c"))) static void h2f_row_f16c(const uint16_t *restrict p,
                                                               float *restrict out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))));
    for (; i < n; i++)
        out[i] = h2f(p[i]);
}

__attribute__((target("avx,f16c"))) static void f2h_row_f16c(const float *restrict in,
                                                               uint16_t *restrict p, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        p[i] = f2h(in[i]);
}

/* Fused adds of f16 rows, converted in registers (the generic rows convert through L1
 * copies: three passes). The same arithmetic as h2f, add_row in f32, f2h. x may be out
 * (in place: each vector is loaded before it is stored). */
__attribute__((target("avx,f16c"))) static void add_row_f16_f32(const uint16_t *x,
                                                                  const float *b, uint16_t *out,
                                                                  int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(out + i),
                         _mm256_cvtps_ph(_mm256_add_ps(_mm256_cvtph_ps(_mm_loadu_si128(
                                                           (const __m128i *)(const void *)(x + i))),
                                                       _mm256_loadu_ps(b + i)),
                                         _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        out[i] = f2h(h2f(x[i]) + b[i]);
}

__attribute__((target("avx,f16c"))) static void add_row_f16_f16(const uint16_t *x,
                                                                  const uint16_t *t,
                                                                  uint16_t *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(
            (__m128i *)(void *)(out + i),
            _mm256_cvtps_ph(
                _mm256_add_ps(
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))),
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(t + i)))),
                _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        out[i] = f2h(h2f(x[i]) + h2f(t[i]));
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
        have_avx2_f16c = avx2;
    }
#endif
}

static void f16_rows_init(void)
{
    pthread_once(&f16_once, pick_f16_rows);
}

/* ------------------------------------------------------------------------------------ */
/* Rows                                                                                 */
/* ------------------------------------------------------------------------------------ */

static inline bool direct_f32(const struct pe_view *v)
{
    return v->dtype == POSENC_DTYPE_F32 && v->st[0] == 1;
}

static inline int64_t at4(const struct pe_view *v, int64_t i1, int64_t i2, int64_t i3)
{
    return v->offset + i1 * v->st[1] + i2 * v->st[2] + i3 * v->st[3];
}

static inline bool same_view(const struct pe_view *a, const struct pe_view *b)
{
    return a->mem == b->mem && a->dtype == b->dtype && a->offset == b->offset &&
           a->st[0] == b->st[0] && a->st[1] == b->st[1] && a->st[2] == b->st[2] &&
           a->st[3] == b->st[3];
}

/* n elements of v from element index idx (stride st[0]) as floats into out. */
static void load_row(const struct pe_view *v, int64_t idx, int64_t n, float *restrict out)
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
                out[i] = h2f(p[i * st]);
        }
    }
}

/* n floats into v from element index idx (stride st[0]), converted to v's dtype. */
static void store_row(const struct pe_view *v, int64_t idx, int64_t n, const float *restrict in)
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
                p[i * st] = f2h(in[i]);
        }
    }
}

/* A row of an input as contiguous floats: the memory itself when it is f32 with stride 1
 * and not also the output (in place), else a converted copy in tmp. */
static inline const float *input_row(const struct pe_view *v, int64_t idx, int64_t n,
                                     bool aliased, float *tmp)
{
    if (direct_f32(v) && !aliased)
        return (const float *)v->mem + idx;
    load_row(v, idx, n, tmp);
    return tmp;
}

/* Where to write an output row: the memory itself when f32 with stride 1, else tmp
 * (then store_row). */
static inline float *output_row(const struct pe_view *v, int64_t idx, float *tmp)
{
    return direct_f32(v) ? (float *)v->mem + idx : tmp;
}

static inline void finish_row(const struct pe_view *v, int64_t idx, int64_t n, float *row)
{
    if (!direct_f32(v))
        store_row(v, idx, n, row);
}

static inline double load_pos(const struct pe_view *p, int64_t idx)
{
    if (p->dtype == POSENC_DTYPE_I32)
        return (double)((const int32_t *)p->mem)[idx];
    return (double)((const float *)p->mem)[idx];
}

/* Scratch layout helper: n floats from *used, rounded to 16 floats (64 bytes). */
static size_t carve(size_t *used, size_t n)
{
    size_t at = *used;
    *used += (n + 15) & ~(size_t)15;
    return at;
}

/* ------------------------------------------------------------------------------------ */
/* RoPE                                                                                 */
/* ------------------------------------------------------------------------------------ */

struct rope_job {
    struct pe_fast_job base;
    const struct pe_rope_op *op;
    int64_t n_streams;        /* streams read per token (max stream + 1) */
    int64_t n_streams_from;
    int64_t rows;             /* heads of x + heads of x2 */
    bool nt;                  /* streaming stores for out-of-place outputs (large ops) */
    size_t off_ang, off_tab[2], off_pv, off_in, off_out;
};

/* The per-token table: tab = [c (np) | s (np) | cc (2 np) | ss (2 np)] with c, s the
 * cos/sin of each pair times mscale, and for adjacent pairs (NORMAL) the same spread over
 * the pair's two dims: cc = (c0, c0, c1, c1, ...), ss = (-s0, s0, -s1, s1, ...), so that
 * y[i] = x[i] cc[i] + x[i^1] ss[i] (what the vector rows use). */
#define PE_ROPE_TAB(np) (6 * (size_t)(np))

/* Pairs [j0, j1) of token (i2, i3)'s table. restrict pointers and AVX2 clones, so that the
 * angle and cc/ss loops vectorise. */
PE_CLONES
static void rope_table(const struct rope_job *rj, int64_t i2, int64_t i3, int64_t j0, int64_t j1,
                       double *restrict ang, double *restrict pv, float *restrict tab)
{
    const struct pe_rope_op *op = rj->op;
    if (j1 <= j0)
        return;
    const int64_t np = op->n_pairs;
    float *restrict c = tab, *restrict s = tab + np, *restrict cc = tab + 2 * np,
                    *restrict ss = tab + 4 * np;
    const struct pe_view *pos = &op->pos;
    for (int64_t k = 0; k < rj->n_streams; k++)
        pv[k] = (double)op->sign * load_pos(pos, pos->offset + i2 * pos->st[0] + k * pos->st[1] +
                                                     i3 * pos->st[2]);
    const double *restrict freq = op->freq;
    if (rj->n_streams == 1) { /* one position per token (NORMAL, NEOX): vectorises */
        const double p = pv[0];
        for (int64_t j = j0; j < j1; j++)
            ang[j] = p * freq[j];
    } else {
        for (int64_t j = j0; j < j1; j++)
            ang[j] = pv[op->stream[j]] * op->freq[j];
    }
    if (op->pos_from.mem) {
        const struct pe_view *pf = &op->pos_from;
        for (int64_t k = 0; k < rj->n_streams_from; k++)
            pv[k] = load_pos(pf, pf->offset + i2 * pf->st[0] + k * pf->st[1] + i3 * pf->st[2]);
        for (int64_t j = j0; j < j1; j++)
            ang[j] -= pv[op->stream_from[j]] * op->freq_from[j];
    }
    pe_sincos_block(ang + j0, s + j0, c + j0, j1 - j0, op->mscale);
    if (op->pairing == 0)
        for (int64_t j = j0; j < j1; j++) {
            cc[2 * j] = cc[2 * j + 1] = c[j];
            ss[2 * j] = -s[j];
            ss[2 * j + 1] = s[j];
        }
}

#ifdef PE_HAVE_F16C
/*
 * RoPE rows with AVX2 (and F16C for f16 storage): 8 elements per step, converted in
 * registers. Adjacent pairs use y = x*cc + swap(x)*ss (swap exchanges the two dims of each
 * pair); half-split pairs y_a = a*c - b*s, y_b = a*s + b*c. Each step loads before it
 * stores the same elements, so in == out (in place) is fine. The same arithmetic as
 * rope_row (a*c + b*(-s) == a*c - b*s exactly).
 */
#ifndef PE_ROPE_PREFETCH
#define PE_ROPE_PREFETCH 4
#endif
#define PE_ROPE_ROW_AVX2(NAME, T, LOAD8, STORE8, TOF, FROMF)                                      \
    __attribute__((target("avx2,f16c"))) static void NAME(                                        \
        const T *in, T *out, int64_t in_stride, int64_t out_stride, int64_t n_rows,               \
        const float *tab, int64_t head_dim, int64_t lo, int64_t np, int pairing, bool copy_rest)  \
    {                                                                                             \
        const float *c = tab, *s = tab + np, *cc = tab + 2 * np, *ss = tab + 4 * np;              \
        for (int64_t row = 0; row < n_rows; row++, in += in_stride, out += out_stride) {          \
            /* the row PE_ROPE_PREFETCH rows ahead: its loads are in flight while this one   \
             * computes (prefetches past the end of the buffer are harmless) */               \
            for (int64_t b = 0; b < head_dim * (int64_t)sizeof(T); b += 64)                    \
                _mm_prefetch((const char *)(in + PE_ROPE_PREFETCH * in_stride) + b,            \
                             _MM_HINT_T0);                                                    \
            if (copy_rest) {                                                                      \
                const int64_t hi = lo + 2 * np;                                                   \
                if (lo > 0)                                                                       \
                    memcpy(out, in, (size_t)lo * sizeof(T));                                      \
                if (hi < head_dim)                                                                \
                    memcpy(out + hi, in + hi, (size_t)(head_dim - hi) * sizeof(T));               \
            }                                                                                     \
            const T *xa = in + lo;                                                                \
            T *ya = out + lo;                                                                     \
            int64_t j = 0;                                                                        \
            if (pairing == 0) {                                                                   \
                for (; j + 8 <= 2 * np; j += 8) {                                                 \
                    const __m256 x = LOAD8(xa + j);                                               \
                    const __m256 xs = _mm256_permute_ps(x, 0xb1);                                 \
                    const __m256 y = _mm256_add_ps(_mm256_mul_ps(x, _mm256_loadu_ps(cc + j)),     \
                                                   _mm256_mul_ps(xs, _mm256_loadu_ps(ss + j)));   \
                    STORE8(ya + j, y);                                                            \
                }                                                                                 \
                for (j /= 2; j < np; j++) {                                                       \
                    const float a = TOF(xa[2 * j]), b = TOF(xa[2 * j + 1]);                       \
                    ya[2 * j] = FROMF(a * c[j] - b * s[j]);                                       \
                    ya[2 * j + 1] = FROMF(a * s[j] + b * c[j]);                                   \
                }                                                                                 \
            } else {                                                                              \
                const T *xb = xa + np;                                                            \
                T *yb = ya + np;                                                                  \
                for (; j + 8 <= np; j += 8) {                                                     \
                    const __m256 a = LOAD8(xa + j), b = LOAD8(xb + j);                            \
                    const __m256 cv = _mm256_loadu_ps(c + j), sv = _mm256_loadu_ps(s + j);        \
                    const __m256 y1 = _mm256_sub_ps(_mm256_mul_ps(a, cv), _mm256_mul_ps(b, sv));  \
                    const __m256 y2 = _mm256_add_ps(_mm256_mul_ps(a, sv), _mm256_mul_ps(b, cv));  \
                    STORE8(ya + j, y1);                                                           \
                    STORE8(yb + j, y2);                                                           \
                }                                                                                 \
                for (; j < np; j++) {                                                             \
                    const float a = TOF(xa[j]), b = TOF(xb[j]);                                   \
                    ya[j] = FROMF(a * c[j] - b * s[j]);                                           \
                    yb[j] = FROMF(a * s[j] + b * c[j]);                                           \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }

#define PE_LOAD8_F32(p) _mm256_loadu_ps(p)
#define PE_STORE8_F32(p, v) _mm256_storeu_ps((p), (v))
#define PE_LOAD8_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define PE_STORE8_F16(p, v)                                                                       \
    _mm_storeu_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define PE_ID(v) (v)
PE_ROPE_ROW_AVX2(rope_row_avx2_f32, float, PE_LOAD8_F32, PE_STORE8_F32, PE_ID, PE_ID)
PE_ROPE_ROW_AVX2(rope_row_avx2_f16, uint16_t, PE_LOAD8_F16, PE_STORE8_F16, h2f, f2h)
/* Streaming (non-temporal) stores for outputs much larger than the caches: no read for
 * ownership of the destination lines. The destination of every 8-wide store must be
 * aligned (32 bytes f32, 16 bytes f16): rope_head checks it. */
#define PE_STORE8_F32_NT(p, v) _mm256_stream_ps((p), (v))
#define PE_STORE8_F16_NT(p, v)                                                                    \
    _mm_stream_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
PE_ROPE_ROW_AVX2(rope_row_avx2_f32_nt, float, PE_LOAD8_F32, PE_STORE8_F32_NT, PE_ID, PE_ID)
PE_ROPE_ROW_AVX2(rope_row_avx2_f16_nt, uint16_t, PE_LOAD8_F16, PE_STORE8_F16_NT, h2f, f2h)

__attribute__((target("sse2"))) static void store_fence(void)
{
    _mm_sfence();
}
#endif

/* One head row: the window rotated, the other dims copied (unless in place, where they
 * are already there). in and out never alias (in place goes through a copy of x). */
PE_CLONES
static void rope_row(const float *restrict in, float *restrict out, const float *restrict c,
                     const float *restrict s, int64_t head_dim, int64_t lo, int64_t np,
                     int pairing, bool copy_rest)
{
    if (copy_rest) {
        const int64_t hi = lo + 2 * np;
        if (lo > 0)
            memcpy(out, in, (size_t)lo * sizeof(float));
        if (hi < head_dim)
            memcpy(out + hi, in + hi, (size_t)(head_dim - hi) * sizeof(float));
    }
    const float *restrict xa = in + lo;
    float *restrict ya = out + lo;
    if (pairing == 0) {
        for (int64_t j = 0; j < np; j++) {
            const float a = xa[2 * j], b = xa[2 * j + 1];
            ya[2 * j] = a * c[j] - b * s[j];
            ya[2 * j + 1] = a * s[j] + b * c[j];
        }
    } else {
        const float *restrict xb = xa + np;
        float *restrict yb = ya + np;
        for (int64_t j = 0; j < np; j++) {
            const float a = xa[j], b = xb[j];
            ya[j] = a * c[j] - b * s[j];
            yb[j] = a * s[j] + b * c[j];
        }
    }
}

/* Heads [h0, h1) of tensor x -> d for token (i2, i3), written at d's token d2 (i2, or
 * rope_set_rows' row); nt: streaming stores where the rows are aligned. */
static void rope_heads(const struct pe_rope_op *op, const struct pe_view *x,
                       const struct pe_view *d, bool in_place, bool nt, int64_t h0, int64_t h1,
                       int64_t i2, int64_t d2, int64_t i3, const float *tab, float *tin,
                       float *tout)
{
    if (h1 <= h0)
        return;
    const int64_t hd = x->ne[0], np = op->n_pairs;
    (void)nt;
#ifdef PE_HAVE_F16C
    if (have_avx2_f16c && x->dtype == d->dtype && x->st[0] == 1 && d->st[0] == 1) {
        /* every row in one call: no per-row dispatch */
        const int64_t xi = at4(x, h0, i2, i3), di = at4(d, h0, d2, i3), n = h1 - h0;
        const size_t es = x->dtype == POSENC_DTYPE_F32 ? 4 : 2;
        const uintptr_t w = (uintptr_t)((unsigned char *)d->mem + (size_t)(di + op->n_offs) * es);
        const bool nt_rows = nt && np % 8 == 0 && w % (8 * es) == 0 &&
                             ((size_t)d->st[1] * es) % (8 * es) == 0;
        if (x->dtype == POSENC_DTYPE_F32)
            (nt_rows ? rope_row_avx2_f32_nt : rope_row_avx2_f32)(
                (const float *)x->mem + xi, (float *)d->mem + di, x->st[1], d->st[1], n, tab, hd,
                op->n_offs, np, op->pairing, !in_place);
        else
            (nt_rows ? rope_row_avx2_f16_nt : rope_row_avx2_f16)(
                (const uint16_t *)x->mem + xi, (uint16_t *)d->mem + di, x->st[1], d->st[1], n,
                tab, hd, op->n_offs, np, op->pairing, !in_place);
        return;
    }
#endif
    const float *c = tab, *s = tab + np;
    /* the dims outside the window are already in place only when out is x's memory */
    const bool copy_rest = !(in_place && direct_f32(d));
    for (int64_t h = h0; h < h1; h++) {
        const int64_t xi = at4(x, h, i2, i3), di = at4(d, h, d2, i3);
        const float *in = input_row(x, xi, hd, in_place, tin);
        float *out = output_row(d, di, tout);
        rope_row(in, out, c, s, hd, op->n_offs, np, op->pairing, copy_rest);
        finish_row(d, di, hd, out);
    }
}

/* Rows [r0, r1) of token (i2, i3): heads of x, then heads of x2. */
static void rope_rows(const struct rope_job *rj, int64_t r0, int64_t r1, int64_t i2, int64_t i3,
                      const float *tab, float *tin, float *tout)
{
    const struct pe_rope_op *op = rj->op;
    const int64_t H1 = op->x.ne[1];
    int64_t d2 = i2;
    if (op->rows.mem) {
        /* rope_set_rows: the destination token; an index outside [0, n_rows) skips it */
        const struct pe_view *rv = &op->rows;
        const int64_t ri = rv->offset + i2 * rv->st[0] + i3 * rv->st[1];
        d2 = rv->dtype == POSENC_DTYPE_I64 ? ((const int64_t *)rv->mem)[ri]
                                           : (int64_t)((const int32_t *)rv->mem)[ri];
        if (d2 < 0 || d2 >= op->n_rows)
            return;
    }
    const bool in1 = same_view(&op->x, &op->dst);
    rope_heads(op, &op->x, &op->dst, in1, rj->nt && !in1, r0, r1 < H1 ? r1 : H1, i2, d2, i3,
               tab, tin, tout);
    if (op->x2.mem && r1 > H1) {
        const bool in2 = same_view(&op->x2, &op->dst2);
        rope_heads(op, &op->x2, &op->dst2, in2, rj->nt && !in2, r0 > H1 ? r0 - H1 : 0, r1 - H1,
                   i2, i2, i3, tab, tin, tout);
    }
}

static void rope_run(const struct pe_fast_job *job, int64_t begin, int64_t end, float *scratch)
{
    const struct rope_job *rj = (const struct rope_job *)job;
    const struct pe_rope_op *op = rj->op;
    const int64_t T = op->x.ne[2], np = op->n_pairs;
    double *ang = (double *)(void *)(scratch + rj->off_ang);
    double *pv = (double *)(void *)(scratch + rj->off_pv);
    float *tin = scratch + rj->off_in, *tout = scratch + rj->off_out;

    /* Double-buffered cos/sin: while the heads of token `it` stream through memory, the
     * table of token it + 1 is computed a slice at a time between head rows, so that
     * the sin/cos work overlaps the memory traffic instead of adding to it. Slices hold
     * at least PE_ROPE_SLICE pairs so that pe_sincos_block still runs vector-wide. */
    const int64_t rows = rj->rows;
    int64_t n_slices = np / PE_ROPE_SLICE;
    if (n_slices > rows)
        n_slices = rows;
    if (n_slices < 1)
        n_slices = 1;
    float *tabs[2] = {scratch + rj->off_tab[0], scratch + rj->off_tab[1]};
    if (begin < end)
        rope_table(rj, begin % T, begin / T, 0, np, ang, pv, tabs[0]);
    for (int64_t it = begin; it < end; it++) {
        const int64_t i2 = it % T, i3 = it / T;
        const float *tab = tabs[(it - begin) & 1];
        float *next_tab = tabs[(it - begin + 1) & 1];
        const bool next = it + 1 < end;
        const int64_t n2 = (it + 1) % T, n3 = (it + 1) / T;
        /* the rows in n_slices groups, slice k of the next table after group k */
        for (int64_t k = 0; k < n_slices; k++) {
            rope_rows(rj, rows * k / n_slices, rows * (k + 1) / n_slices, i2, i3, tab, tin, tout);
            if (next)
                rope_table(rj, n2, n3, np * k / n_slices, np * (k + 1) / n_slices, ang, pv,
                           next_tab);
        }
        if (next && rows == 0)
            rope_table(rj, n2, n3, 0, np, ang, pv, next_tab);
    }
#ifdef PE_HAVE_F16C
    if (rj->nt)
        store_fence(); /* streaming stores are weakly ordered: drain them before the join */
#endif
}

posenc_status pe_cpu_fast_rope(struct pe_cpu_fast *f, const struct pe_rope_op *op)
{
    const int64_t T = op->x.ne[2], B = op->x.ne[3], hd = op->x.ne[0], np = op->n_pairs;
    const int64_t H2 = op->x2.mem ? op->x2.ne[1] : 0;
    struct rope_job rj;
    memset(&rj, 0, sizeof(rj));
    rj.op = op;
    rj.rows = op->x.ne[1] + H2;
    for (int64_t j = 0; j < np; j++) {
        if (op->stream[j] + 1 > rj.n_streams)
            rj.n_streams = op->stream[j] + 1;
        if (op->pos_from.mem && op->stream_from[j] + 1 > rj.n_streams_from)
            rj.n_streams_from = op->stream_from[j] + 1;
    }
    size_t used = 0;
    rj.off_ang = carve(&used, 2 * (size_t)np);
    rj.off_pv = carve(&used, 2 * 256);
    rj.off_tab[0] = carve(&used, PE_ROPE_TAB(np));
    rj.off_tab[1] = carve(&used, PE_ROPE_TAB(np));
    rj.off_in = carve(&used, (size_t)hd);
    rj.off_out = carve(&used, (size_t)hd);
    PE_RETURN_IF_ERROR(fast_reserve(f, used));
    rj.base.fn = rope_run;
    rj.base.op = op;
    rj.base.n_items = T * B;
    /* outputs much larger than the caches: streaming stores (out-of-place rows only) */
    rj.nt = (double)T * (double)B * (double)hd *
                ((double)op->x.ne[1] * (double)posenc_dtype_size(op->dst.dtype) +
                 (double)H2 * (op->x2.mem ? (double)posenc_dtype_size(op->dst2.dtype) : 0.0)) >=
            PE_FAST_NT_BYTES;
    const double bytes = (double)T * (double)B * (double)hd *
                         ((double)op->x.ne[1] * (double)(posenc_dtype_size(op->x.dtype) +
                                                         posenc_dtype_size(op->dst.dtype)) +
                          (double)H2 * (op->x2.mem ? (double)(posenc_dtype_size(op->x2.dtype) +
                                                              posenc_dtype_size(op->dst2.dtype))
                                                   : 0.0));
    fast_run(f, &rj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Sinusoidal                                                                           */
/* ------------------------------------------------------------------------------------ */

struct sin_job {
    struct pe_fast_job base;
    const struct pe_sinusoidal_op *op;
    int64_t groups2;          /* 1 when the positions are shared by dim 2, else ne[2] */
    int64_t block;            /* tokens per item */
    bool nt;                  /* streaming stores for large out-of-place outputs */
    int kernel;               /* SIN_K_*: the row kernel */
    size_t off_ang, off_sc, off_tab[2], off_in, off_out;
};

/* The row kernels: generic (any dtypes and strides, through L1 copies of the row), or,
 * with AVX + F16C, whole rows of f32 -> f32 or f16 -> f16 (x absent or the same dtype as
 * dst, both with stride 1) converted in registers. */
enum { SIN_K_GENERIC, SIN_K_F32, SIN_K_F16 };

/*
 * The per-token table is laid out as the output row itself (d = 2 half floats): sin and
 * cos interleaved, or the two halves in the layout's order. A row is then
 * out[k] = x[k] * scale + tab[k] (or tab[k] alone without x): one stream of independent
 * elements, the same arithmetic as before (the product rounded, then the sum), and no
 * shuffles in the loop.
 */
PE_CLONES
static void sin_row(const float *restrict x, float *restrict out, const float *restrict tab,
                    int64_t n, float scale)
{
    if (x) {
        for (int64_t k = 0; k < n; k++)
            out[k] = x[k] * scale + tab[k];
    } else {
        memcpy(out, tab, (size_t)n * sizeof(float));
    }
}

/* sin/cos of every pair of token i1 (batch group g2, i3) into tab (the output row's
 * layout); sc: scratch for 2 half floats. The loops use restrict pointers (and AVX2
 * clones) so that they vectorise: the angle loop was scalar, 8% of the f16 op's time. */
PE_CLONES
static void sin_table(const struct sin_job *sj, int64_t i1, int64_t g2, int64_t i3,
                      double *restrict ang, float *restrict sc, float *restrict tab)
{
    const struct pe_sinusoidal_op *op = sj->op;
    const struct pe_view *pos = &op->pos;
    const int64_t half = op->half;
    const double *restrict freq = op->freq;
    const double p =
        load_pos(pos, pos->offset + i1 * pos->st[0] + g2 * pos->st[1] + i3 * pos->st[2]);
    for (int64_t i = 0; i < half; i++)
        ang[i] = p * freq[i];
    if (op->layout == POSENC_SIN_HALF_SPLIT) {
        pe_sincos_block(ang, tab, tab + half, half, 1.0);
    } else if (op->layout == POSENC_SIN_HALF_SPLIT_COS_FIRST) {
        pe_sincos_block(ang, tab + half, tab, half, 1.0);
    } else {
        pe_sincos_block(ang, sc, sc + half, half, 1.0);
        const float *restrict sv = sc, *restrict cv = sc + half;
        for (int64_t i = 0; i < half; i++) {
            tab[2 * i] = sv[i];
            tab[2 * i + 1] = cv[i];
        }
    }
}

#ifdef PE_HAVE_F16C
/* A row of f32: out = x * scale + tab (x NULL: tab); nt: streaming stores (out 32-byte
 * aligned, checked by the caller). x may be out (in place): each vector is loaded before
 * it is stored. */
__attribute__((target("avx"))) static void sin_row_f32(const float *x, float *out,
                                                       const float *tab, int64_t n, float scale,
                                                       bool nt)
{
    const __m256 sv = _mm256_set1_ps(scale);
    int64_t k = 0;
    if (nt) {
        if (x)
            for (; k + 8 <= n; k += 8)
                _mm256_stream_ps(out + k, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), sv),
                                                        _mm256_loadu_ps(tab + k)));
        else
            for (; k + 8 <= n; k += 8)
                _mm256_stream_ps(out + k, _mm256_loadu_ps(tab + k));
    } else if (x) {
        for (; k + 8 <= n; k += 8)
            _mm256_storeu_ps(out + k, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), sv),
                                                    _mm256_loadu_ps(tab + k)));
    } else {
        for (; k + 8 <= n; k += 8)
            _mm256_storeu_ps(out + k, _mm256_loadu_ps(tab + k));
    }
    for (; k < n; k++)
        out[k] = x ? x[k] * scale + tab[k] : tab[k];
}

/* The same for f16 x (or none) and f16 out, converted with F16C (f32 -> f16 rounds to
 * nearest even, as f2h). nt: streaming stores of 16 halves (out 32-byte aligned). */
__attribute__((target("avx,f16c"))) static void sin_row_f16(const uint16_t *x, uint16_t *out,
                                                            const float *tab, int64_t n,
                                                            float scale, bool nt)
{
    const __m256 sv = _mm256_set1_ps(scale);
    int64_t k = 0;
#define PE_SIN8_F16(at)                                                                         \
    (x ? _mm256_cvtps_ph(                                                                       \
             _mm256_add_ps(                                                                     \
                 _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + (at)))),   \
                               sv),                                                             \
                 _mm256_loadu_ps(tab + (at))),                                                  \
             _MM_FROUND_TO_NEAREST_INT)                                                         \
       : _mm256_cvtps_ph(_mm256_loadu_ps(tab + (at)), _MM_FROUND_TO_NEAREST_INT))
    if (nt) {
        for (; k + 16 <= n; k += 16) {
            const __m128i lo = PE_SIN8_F16(k), hi = PE_SIN8_F16(k + 8);
            _mm256_stream_si256((__m256i *)(void *)(out + k), _mm256_set_m128i(hi, lo));
        }
    }
    for (; k + 8 <= n; k += 8)
        _mm_storeu_si128((__m128i *)(void *)(out + k), PE_SIN8_F16(k));
#undef PE_SIN8_F16
    for (; k < n; k++)
        out[k] = f2h(x ? h2f(x[k]) * scale + tab[k] : tab[k]);
}
#endif

/* The tables of tokens [t0 + k0, t0 + k1) of block (t0, g2, i3) into tab (token k at
 * tab + k * 2 * half). */
static void sin_tables(const struct sin_job *sj, int64_t t0, int64_t k0, int64_t k1, int64_t g2,
                       int64_t i3, double *ang, float *sc, float *tab)
{
    const int64_t half = sj->op->half;
    for (int64_t k = k0; k < k1; k++)
        sin_table(sj, t0 + k, g2, i3, ang, sc, tab + k * 2 * half);
}

/*
 * An item is a block of sj->block consecutive tokens of one batch group: each row i2 that
 * shares the positions is written for the whole block, token after token. With the
 * positions broadcast over dim 2, the rows of one token are a whole dim-2 stride apart in
 * memory; walking one row's block at a time keeps the accesses in a few long sequential
 * runs instead of one stream per row. The sin/cos tables are double-buffered as in RoPE:
 * while the rows of one block stream through memory, the tables of the next block of this
 * chunk are computed a slice after each row, so that the sin/cos work overlaps the
 * memory traffic instead of adding to it. Large out-of-place outputs are written with
 * streaming stores.
 */
static void sin_run(const struct pe_fast_job *job, int64_t begin, int64_t end, float *scratch)
{
    const struct sin_job *sj = (const struct sin_job *)job;
    const struct pe_sinusoidal_op *op = sj->op;
    const struct pe_view *d = &op->dst, *x = &op->x;
    const int64_t T = d->ne[1], G2 = sj->groups2, n = d->ne[0];
    const int64_t TB = sj->block, nb = (T + TB - 1) / TB;
    const bool has_x = x->mem != NULL;
    const bool in_place = has_x && same_view(x, d);
    double *ang = (double *)(void *)(scratch + sj->off_ang);
    float *sc = scratch + sj->off_sc;
    float *tin = scratch + sj->off_in, *tout = scratch + sj->off_out;
    float *tabs[2] = {scratch + sj->off_tab[0], scratch + sj->off_tab[1]};
    /* the rows that share one position: all of dim 2 when the positions are broadcast */
    const int64_t rows = G2 == 1 ? d->ne[2] : 1;
    if (begin < end) {
        const int64_t blk = begin % nb, t0 = blk * TB, t1 = t0 + TB < T ? t0 + TB : T;
        sin_tables(sj, t0, 0, t1 - t0, (begin / nb) % G2, begin / (nb * G2), ang, sc, tabs[0]);
    }
    for (int64_t it = begin; it < end; it++) {
        const int64_t blk = it % nb, g2 = (it / nb) % G2, i3 = it / (nb * G2);
        const int64_t t0 = blk * TB, t1 = t0 + TB < T ? t0 + TB : T;
        const float *tabs_now = tabs[(it - begin) & 1];
        float *tabs_next = tabs[(it - begin + 1) & 1];
        const bool next = it + 1 < end;
        const int64_t nblk = (it + 1) % nb, ng2 = ((it + 1) / nb) % G2, ni3 = (it + 1) / (nb * G2);
        const int64_t nt0 = nblk * TB, ntok = (nt0 + TB < T ? nt0 + TB : T) - nt0;
        for (int64_t r = 0; r < rows; r++) {
            const int64_t i2 = G2 == 1 ? r : g2;
            for (int64_t t = t0; t < t1; t++) {
                const float *tab = tabs_now + (t - t0) * n;
                const int64_t di = at4(d, t, i2, i3);
#ifdef PE_HAVE_F16C
                if (sj->kernel == SIN_K_F32) {
                    float *o = (float *)d->mem + di;
                    sin_row_f32(has_x ? (const float *)x->mem + at4(x, t, i2, i3) : NULL, o, tab,
                                n, op->x_scale, sj->nt && ((uintptr_t)o & 31u) == 0);
                    continue;
                }
                if (sj->kernel == SIN_K_F16) {
                    uint16_t *o = (uint16_t *)d->mem + di;
                    sin_row_f16(has_x ? (const uint16_t *)x->mem + at4(x, t, i2, i3) : NULL, o,
                                tab, n, op->x_scale, sj->nt && ((uintptr_t)o & 31u) == 0);
                    continue;
                }
#endif
                const float *xr =
                    has_x ? input_row(x, at4(x, t, i2, i3), n, in_place, tin) : NULL;
                float *out = output_row(d, di, tout);
                sin_row(xr, out, tab, n, op->x_scale);
                finish_row(d, di, n, out);
            }
            /* slice r of the next block's tables */
            if (next)
                sin_tables(sj, nt0, ntok * r / rows, ntok * (r + 1) / rows, ng2, ni3, ang, sc,
                           tabs_next);
        }
    }
#ifdef PE_HAVE_F16C
    if (sj->nt)
        store_fence(); /* streaming stores are weakly ordered: drain them before the join */
#endif
}

posenc_status pe_cpu_fast_sinusoidal(struct pe_cpu_fast *f, const struct pe_sinusoidal_op *op)
{
    const struct pe_view *d = &op->dst;
    const double n = (double)d->ne[0] * (double)d->ne[1] * (double)d->ne[2] * (double)d->ne[3];
    const double bytes =
        n * (double)(posenc_dtype_size(d->dtype) +
                     (op->x.mem ? posenc_dtype_size(op->x.dtype) : 0));
    struct sin_job sj;
    memset(&sj, 0, sizeof(sj));
    sj.op = op;
    sj.groups2 = op->pos.st[1] == 0 ? 1 : d->ne[2];
    size_t used = 0;
    /* blocks of tokens whose sin/cos tables fill about 64 KiB (at most 64 tokens) */
    sj.block = 65536 / (8 * (op->half > 0 ? op->half : 1));
    sj.block = sj.block < 1 ? 1 : sj.block > 64 ? 64 : sj.block;
    sj.off_ang = carve(&used, 2 * (size_t)op->half);
    sj.off_sc = carve(&used, 2 * (size_t)op->half);
    sj.off_tab[0] = carve(&used, 2 * (size_t)op->half * (size_t)sj.block);
    sj.off_tab[1] = carve(&used, 2 * (size_t)op->half * (size_t)sj.block);
    sj.off_in = carve(&used, (size_t)d->ne[0]);
    sj.off_out = carve(&used, (size_t)d->ne[0]);
    PE_RETURN_IF_ERROR(fast_reserve(f, used));
    sj.kernel = SIN_K_GENERIC;
#ifdef PE_HAVE_F16C
    const struct pe_view *x = &op->x;
    /* whole rows in registers: dst with stride 1 and x absent or of dst's dtype with
     * stride 1 (f16 needs F16C, which have_avx2_f16c implies) */
    if (have_avx2_f16c && d->st[0] == 1 && (!x->mem || (x->dtype == d->dtype && x->st[0] == 1)))
        sj.kernel = d->dtype == POSENC_DTYPE_F32 ? SIN_K_F32 : SIN_K_F16;
    /* large out-of-place outputs: streaming stores (rows that are not 32-byte aligned fall
     * back to plain stores in sin_run) */
    sj.nt = sj.kernel != SIN_K_GENERIC && !(x->mem && same_view(x, d)) &&
            n * (double)posenc_dtype_size(d->dtype) >= PE_FAST_NT_BYTES;
#endif
    sj.base.fn = sin_run;
    sj.base.op = op;
    sj.base.n_items = (d->ne[1] + sj.block - 1) / sj.block * sj.groups2 * d->ne[3];
    fast_run(f, &sj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* ALiBi                                                                                */
/* ------------------------------------------------------------------------------------ */

struct alibi_job {
    struct pe_fast_job base;
    const struct pe_alibi_op *op;
    int kernel; /* ALIBI_K_*: the row kernel */
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
#define PE_ALIBI_ROW_AVX2(NAME, T, LOAD8, STORE8, TOF, FROMF)                                  \
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
PE_ALIBI_ROW_AVX2(alibi_row_avx2_f32, float, PE_LOAD8_F32, PE_STORE8_F32, PE_ID, PE_ID)
PE_ALIBI_ROW_AVX2(alibi_row_avx2_f16, uint16_t, PE_LOAD8_F16, PE_STORE8_F16, h2f, f2h)
#endif

static void alibi_run(const struct pe_fast_job *job, int64_t begin, int64_t end, float *scratch)
{
    const struct alibi_job *aj = (const struct alibi_job *)job;
    const struct pe_alibi_op *op = aj->op;
    const struct pe_view *d = &op->dst, *x = &op->logits;
    const int64_t K = d->ne[0], Q = d->ne[1], H = d->ne[2];
    const bool has_x = x->mem != NULL;
    const bool in_place = has_x && same_view(x, d);
    float *tin = scratch + aj->off_in, *tout = scratch + aj->off_out;
    for (int64_t it = begin; it < end; it++) {
        const int64_t q = it % Q, h = (it / Q) % H, b = it / (Q * H);
        const int64_t di = at4(d, q, h, b);
        const float m = op->slopes_f32[h];
        /* dist(k) = base - k with base = (q + q_offset) - k_offset; keys k <= base are at
         * or before the query */
        const int64_t base = q + op->q_offset - op->k_offset;
        const int32_t kq = (int32_t)(base < -1 ? -1 : base > K - 1 ? K - 1 : base);
#ifdef PE_HAVE_F16C
        if (aj->kernel != ALIBI_K_GENERIC) {
            const int after = op->causal ? 2 : op->symmetric ? 1 : 0;
            if (aj->kernel == ALIBI_K_F32)
                alibi_row_avx2_f32(has_x ? (const float *)x->mem + at4(x, q, h, b) : NULL,
                                   (float *)d->mem + di, (int32_t)K, kq, (int32_t)base, m, after);
            else
                alibi_row_avx2_f16(has_x ? (const uint16_t *)x->mem + at4(x, q, h, b) : NULL,
                                   (uint16_t *)d->mem + di, (int32_t)K, kq, (int32_t)base, m,
                                   after);
            continue;
        }
#endif
        const float *xr = has_x ? input_row(x, at4(x, q, h, b), K, in_place, tin) : NULL;
        float *out = output_row(d, di, tout);
        alibi_span(xr, out, 0, kq + 1, (int32_t)base, m);
        if (op->causal) {
            for (int64_t k = kq + 1; k < K; k++)
                out[k] = -INFINITY;
        } else if (op->symmetric) {
            alibi_span_after(xr, out, kq + 1, (int32_t)K, (int32_t)base, m);
        } else {
            alibi_span(xr, out, kq + 1, (int32_t)K, (int32_t)base, m);
        }
        finish_row(d, di, K, out);
    }
}

posenc_status pe_cpu_fast_alibi(struct pe_cpu_fast *f, const struct pe_alibi_op *op)
{
    const struct pe_view *d = &op->dst;
    struct alibi_job aj;
    memset(&aj, 0, sizeof(aj));
    aj.op = op;
    size_t used = 0;
    aj.off_in = carve(&used, (size_t)d->ne[0]);
    aj.off_out = carve(&used, (size_t)d->ne[0]);
    PE_RETURN_IF_ERROR(fast_reserve(f, used));
    aj.kernel = ALIBI_K_GENERIC;
#ifdef PE_HAVE_F16C
    const struct pe_view *x = &op->logits;
    if (have_avx2_f16c && d->st[0] == 1 && d->ne[0] <= INT32_MAX &&
        (!x->mem || (x->dtype == d->dtype && x->st[0] == 1)))
        aj.kernel = d->dtype == POSENC_DTYPE_F32 ? ALIBI_K_F32 : ALIBI_K_F16;
#endif
    aj.base.fn = alibi_run;
    aj.base.op = op;
    aj.base.n_items = d->ne[1] * d->ne[2] * d->ne[3];
    const double n = (double)d->ne[0] * (double)aj.base.n_items;
    const double bytes = n * (double)(posenc_dtype_size(d->dtype) +
                                      (op->logits.mem ? posenc_dtype_size(op->logits.dtype) : 0));
    fast_run(f, &aj.base, bytes);
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
    const bool in_place = same_view(x, d);
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
        const float *xr = input_row(x, at4(x, i1, i2, i3), n, in_place, tx);
        const float *mr = mk->mem ? input_row(mk, at4(mk, i1, h % mk->ne[2], b % mk->ne[3]), n,
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
        const int64_t di = at4(d, i1, i2, i3);
        float *out = output_row(d, di, v);
        if (m == -INFINITY || any_nan) { /* every v_k -inf and no finite sink: NaN (ggml) */
            for (int64_t k = 0; k < n; k++)
                out[k] = NAN;
        } else {
            const float inv = (float)(1.0 / sum);
            for (int64_t k = 0; k < n; k++)
                out[k] = v[k] * inv;
        }
        finish_row(d, di, n, out);
    }
}

posenc_status pe_cpu_fast_softmax(struct pe_cpu_fast *f, const struct pe_softmax_op *op)
{
    const struct pe_view *x = &op->x;
    struct softmax_job sj;
    memset(&sj, 0, sizeof(sj));
    sj.op = op;
    size_t used = 0;
    sj.off_x = carve(&used, (size_t)x->ne[0]);
    sj.off_v = carve(&used, (size_t)x->ne[0]);
    sj.off_m = carve(&used, (size_t)x->ne[0]);
    PE_RETURN_IF_ERROR(fast_reserve(f, used));
    sj.base.fn = softmax_run;
    sj.base.op = op;
    sj.base.n_items = x->ne[1] * x->ne[2] * x->ne[3];
    const double n = (double)x->ne[0] * (double)sj.base.n_items;
    const double bytes =
        n * (double)(posenc_dtype_size(x->dtype) + posenc_dtype_size(op->dst.dtype) +
                     (op->mask.mem ? posenc_dtype_size(op->mask.dtype) : 0));
    fast_run(f, &sj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Learned                                                                              */
/* ------------------------------------------------------------------------------------ */

struct learned_job {
    struct pe_fast_job base;
    const struct pe_learned_op *op;
    bool f16_rows; /* x, table and dst f16 with stride 1: add_row_f16_f16 */
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
    const bool in_place = has_x && same_view(x, d);
    float *tin = scratch + lj->off_in, *ttab = scratch + lj->off_tab,
          *tout = scratch + lj->off_out;
    for (int64_t it = begin; it < end; it++) {
        const int64_t t = it % T, b = it / T;
        const int64_t row =
            (int64_t)((const int32_t *)pos->mem)[pos->offset + t * pos->st[0] + b * pos->st[1]];
        const int64_t di = at4(d, t, b, 0);
#ifdef PE_HAVE_F16C
        if (lj->f16_rows) {
            add_row_f16_f16((const uint16_t *)x->mem + at4(x, t, b, 0),
                            (const uint16_t *)tab->mem + tab->offset + row * tab->st[1],
                            (uint16_t *)d->mem + di, n);
            continue;
        }
#endif
        const float *tr = input_row(tab, tab->offset + row * tab->st[1], n, false, ttab);
        float *out = output_row(d, di, tout);
        if (has_x) {
            const float *xr = input_row(x, at4(x, t, b, 0), n, in_place, tin);
            add_row(xr, tr, out, n);
        } else if (out != tr) {
            memcpy(out, tr, (size_t)n * sizeof(float));
        }
        finish_row(d, di, n, out);
    }
}

posenc_status pe_cpu_fast_learned(struct pe_cpu_fast *f, const struct pe_learned_op *op)
{
    const struct pe_view *d = &op->dst;
    struct learned_job lj;
    memset(&lj, 0, sizeof(lj));
    lj.op = op;
    size_t used = 0;
    lj.off_in = carve(&used, (size_t)d->ne[0]);
    lj.off_tab = carve(&used, (size_t)d->ne[0]);
    lj.off_out = carve(&used, (size_t)d->ne[0]);
    PE_RETURN_IF_ERROR(fast_reserve(f, used));
#ifdef PE_HAVE_F16C
    const struct pe_view *x = &op->x, *tab = &op->table;
    lj.f16_rows = have_f16c && x->mem && x->dtype == POSENC_DTYPE_F16 &&
                  tab->dtype == POSENC_DTYPE_F16 && d->dtype == POSENC_DTYPE_F16 &&
                  x->st[0] == 1 && tab->st[0] == 1 && d->st[0] == 1;
#endif
    lj.base.fn = learned_run;
    lj.base.op = op;
    lj.base.n_items = d->ne[1] * d->ne[2];
    const double n = (double)d->ne[0] * (double)lj.base.n_items;
    const double bytes =
        n * (double)(posenc_dtype_size(d->dtype) + posenc_dtype_size(op->table.dtype) +
                     (op->x.mem ? posenc_dtype_size(op->x.dtype) : 0));
    fast_run(f, &lj.base, bytes);
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
    const bool in_place = has_x && same_view(x, d);
    float *tin = scratch + rj->off_in, *tout = scratch + rj->off_out;
    for (int64_t it = begin; it < end; it++) {
        const int64_t q = it % Q, h = (it / Q) % H, b = it / (Q * H);
        const float *bias = rj->bias + h * op->n_rel + (Q - 1 - q);
        const int64_t di = at4(d, q, h, b);
#ifdef PE_HAVE_F16C
        if (rj->f16_rows) {
            add_row_f16_f32((const uint16_t *)x->mem + at4(x, q, h, b),
                            bias, (uint16_t *)d->mem + di, K);
            continue;
        }
#endif
        float *out = output_row(d, di, tout);
        if (has_x)
            add_row(input_row(x, at4(x, q, h, b), K, in_place, tin), bias, out, K);
        else
            memcpy(out, bias, (size_t)K * sizeof(float));
        finish_row(d, di, K, out);
    }
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
    rj.off_in = carve(&used, (size_t)K);
    rj.off_out = carve(&used, (size_t)K);
    PE_RETURN_IF_ERROR(fast_reserve(f, used));
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
                                          : h2f(((const uint16_t *)tab->mem)[e]);
        }
    rj.bias = bias;
#ifdef PE_HAVE_F16C
    const struct pe_view *x = &op->logits;
    rj.f16_rows = have_f16c && x->mem && x->dtype == POSENC_DTYPE_F16 &&
                  d->dtype == POSENC_DTYPE_F16 && x->st[0] == 1 && d->st[0] == 1;
#endif
    rj.base.fn = relbias_run;
    rj.base.op = op;
    rj.base.n_items = Q * H * d->ne[3];
    const double n = (double)K * (double)rj.base.n_items;
    const double bytes = n * (double)(posenc_dtype_size(d->dtype) +
                                      (op->logits.mem ? posenc_dtype_size(op->logits.dtype) : 0));
    fast_run(f, &rj.base, bytes);
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
                d[i * ds] = f2h(s[i * ss]);
        }
    } else { /* f16 -> f32 */
        const uint16_t *s = (const uint16_t *)src->mem + si;
        float *d = (float *)dst->mem + di;
        if (ss == 1 && ds == 1) {
            h2f_row(s, d, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                d[i * ds] = h2f(s[i * ss]);
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
    fast_run(f, &cj.base, bytes);
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* The pool and rows for the other fast-path files (cpu_attn.c)                          */
/* ------------------------------------------------------------------------------------ */

struct task_job {
    struct pe_fast_job base;
    pe_cpu_task_fn fn;
    void *arg;
};

static void task_run(const struct pe_fast_job *job, int64_t begin, int64_t end, float *scratch)
{
    const struct task_job *tj = (const struct task_job *)job;
    tj->fn(tj->arg, begin, end, scratch);
}

posenc_status pe_cpu_fast_reserve(struct pe_cpu_fast *f, size_t n_floats)
{
    return fast_reserve(f, n_floats);
}

void pe_cpu_fast_parallel(struct pe_cpu_fast *f, pe_cpu_task_fn fn, void *arg, int64_t n_items,
                          double bytes)
{
    struct task_job tj;
    tj.base.fn = task_run;
    tj.base.op = NULL;
    tj.base.n_items = n_items;
    tj.fn = fn;
    tj.arg = arg;
    fast_run(f, &tj.base, bytes);
}

void pe_cpu_load_row(const struct pe_view *v, int64_t idx, int64_t n, float *out)
{
    load_row(v, idx, n, out);
}

void pe_cpu_store_row(const struct pe_view *v, int64_t idx, int64_t n, const float *in)
{
    store_row(v, idx, n, in);
}

posenc_context *pe_cpu_fast_context(const struct pe_cpu_fast *f)
{
    return f->ctx;
}
