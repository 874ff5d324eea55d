/*
 * cpu_pool.c - the CPU fast path's thread pool (see cpu_fast.c for the fast path as a
 * whole): n_threads - 1 worker threads that take chunks of a job's items from a shared
 * counter and spin a while between jobs before they sleep, each thread's scratch, and the
 * parallel loop of the other fast-path files (pe_cpu_fast_parallel).
 */
#include "cpu_fast_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Below this many bytes moved per thread, a job uses fewer threads (waking a worker costs
 * more than it saves). POSENC_CPU_MIN_SPLIT=<bytes>, read at context creation, replaces
 * it (the tests set 1 to split even tiny ops over every thread). */
#define PE_FAST_MIN_BYTES_PER_THREAD (256 * 1024)
/* Chunks per thread of the dynamic split: a thread finishes at most one chunk (about
 * 1 / (n_threads * PE_FAST_CHUNKS_PER_THREAD) of the job) after the others. Each chunk
 * starts its double-buffered sin/cos pipeline afresh (one table not overlapped). */
#define PE_FAST_CHUNKS_PER_THREAD 16
/* A worker that finished a job spins this long for the next before it sleeps on the
 * condition variable, and the caller likewise for the workers' end: a wake-up through the
 * kernel costs tens of microseconds (more in a VM), a decode step's op under a millisecond. */
#define PE_FAST_SPIN_NS 100000

struct pe_fast_worker {
    struct pe_cpu_fast *f;
    int tid;
    pthread_t thread;
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
    const int64_t t0 = pe_mono_ns();
    for (unsigned i = 1;; i++) {
        if (seen == UINT64_MAX ? atomic_load(&f->remaining) == 0
                               : atomic_load(&f->generation) != seen || atomic_load(&f->stop))
            return;
        cpu_relax();
        if (i % 64 == 0 && pe_mono_ns() - t0 > PE_FAST_SPIN_NS)
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
void pe_cpu_fast_run(struct pe_cpu_fast *f, const struct pe_fast_job *job, double bytes)
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
 * workers are waiting), so no lock is needed beyond the hand-off in pe_cpu_fast_run. */
posenc_status pe_cpu_fast_reserve(struct pe_cpu_fast *f, size_t n)
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
    pe_cpu_f16_rows_init();
    if (n_threads <= 0) {
        const int n = pe_host_cpus();
        n_threads = n < PE_MAX_THREADS ? n : PE_MAX_THREADS;
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
    posenc_status st = pe_cpu_fast_reserve(f, 4096);
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
/* The pool for the other fast-path files (cpu_attn.c)                                  */
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

void pe_cpu_fast_parallel(struct pe_cpu_fast *f, pe_cpu_task_fn fn, void *arg, int64_t n_items,
                          double bytes)
{
    struct task_job tj;
    tj.base.fn = task_run;
    tj.base.op = NULL;
    tj.base.n_items = n_items;
    tj.fn = fn;
    tj.arg = arg;
    pe_cpu_fast_run(f, &tj.base, bytes);
}

posenc_context *pe_cpu_fast_context(const struct pe_cpu_fast *f)
{
    return f->ctx;
}
