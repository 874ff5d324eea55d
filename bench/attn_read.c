/*
 * attn_read.c - decode attention against a plain read of its own K and V, in one process
 * (issue #20: "reading K and V once is the limit").
 *
 * posenc bench compares the decode rows with the copy ceiling. This program adds the other
 * reference, measured in the same rounds: two threads reading the same bytes of K and V
 * (one 8-byte load a 64-byte line, the next lines requested ahead), so that a decode call
 * can be put beside what the memory gives a read of that size. On the CPU backend the call
 * and the reads take the same host memory (wrapped); on OpenCL (a CPU device) the call
 * takes posenc's own buffers holding the same values, and the reads a host copy of them in
 * huge pages like those buffers. Each round:
 *
 *   copy   posenc_copy of 64 MiB f32 (the bench's ceiling; bytes read + written)
 *   read   after bench_sweep (twice the last-level cache read, as the bench does before its
 *          attention rows), K and V read once by two threads
 *   cold   after another copy and sweep, posenc_attention decode: q f32 [D, 32, 1], K / V
 *          f16 [D, 8, Tk], ALiBi, causal, the query last
 *   warm   the same call again at once (K and V wherever the cold call left them)
 *   fma    (x86-64 with AVX2 + FMA) the call's multiply-adds alone, 2 x 32 x Tk x D (q.k
 *          and p v for 32 query heads), split between two threads as the read is, run as
 *          12 independent chains of 16-lane (AVX-512F) or 8-lane fused multiply-adds with
 *          no memory operand: the fastest the arithmetic of the call can go on this CPU,
 *          whatever it reads. Its share of the ceiling is the most the call can score.
 *   order  after another copy and sweep, the same bytes read by two threads in the order
 *          the CPU backend's decode call reads them, with its prefetches and no arithmetic
 *          (read_half_tiled): what the memory gives that access pattern. Between it and the
 *          plain read lies what the order costs; between it and the call with its threads
 *          woken, what the arithmetic adds. (PoCL's kernel reads a tile's K of every head,
 *          then its V: not the same order, though as strided.)
 *
 * and prints the medians, each as GB/s of K and V and as a share of the ceiling.
 *
 *   attn_read [cpu|opencl] [D = 64] [Tk = 4096] [rounds = 60]
 */
#define _GNU_SOURCE
#include "bench_core.h"
#include "posenc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AR_FMA 1
#endif

#define AR_HK 8 /* K/V heads (q has 32: GQA 32/8, as posenc bench's rows) */

#define CHECK(call)                                                                       \
    do {                                                                                  \
        posenc_status st_ = (call);                                                       \
        if (st_ != POSENC_OK) {                                                           \
            fprintf(stderr, "%s: %s: %s\n", #call, posenc_status_string(st_),             \
                    posenc_last_error());                                                 \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

/* Host memory on a 2 MiB boundary, transparent huge pages asked for (as posenc's own host
 * buffers of 2 MiB or more), written once so that every page is real. */
static void *host_alloc(size_t n, unsigned char fill)
{
    const size_t huge = (size_t)2 << 20;
    n = (n + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, n);
    if (!p)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    memset(p, fill, n);
    return p;
}

/* ---- the read: two threads, each half of K then half of V ---------------------------- */

static const unsigned char *rd_k, *rd_v;
static size_t rd_bytes; /* of K (and of V) */
static size_t rd_row;   /* bytes of a key's row of one head (D f16s) */
static volatile uint64_t rd_sink[2];
static pthread_mutex_t rd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rd_cv = PTHREAD_COND_INITIALIZER;
static int rd_req; /* the round asked for; -1: stop */
/* what a round runs on both threads: the read, the multiply-adds, or the read in the call's
 * order */
enum { RD_READ, RD_FMA, RD_ORDER };
static int rd_what;
static atomic_int rd_ready, rd_go, rd_done;

static void read_half(int id)
{
    const size_t h = rd_bytes / 2;
    uint64_t s = 0;
    for (int w = 0; w < 2; w++) {
        const unsigned char *p = (w ? rd_v : rd_k) + (size_t)id * h;
        for (size_t o = 0; o < h; o += 64) {
            __builtin_prefetch(p + o + 1024, 0, 1);
            uint64_t x;
            memcpy(&x, p + o, sizeof(x));
            s += x;
        }
    }
    rd_sink[id] = s;
}

/* The same bytes in the order of the CPU backend's decode call (cpu_attn.c): each thread
 * its half of the keys, in tiles of 64 keys; per tile, head by head, the head's K rows of
 * the tile and then its V rows (rows of one head are a whole key row apart: the other
 * heads lie between them); with each row read, its share of the next tile's rows is
 * requested in address order (a row's worth of lines, prefetch to L2, as the call's loops
 * do).
 * No arithmetic: what the memory gives that order. (Where a half ends inside a key's
 * row, as with an odd Tk, that last part row is not read.) */
#define RD_TILE 64
static void read_half_tiled(int id)
{
    const size_t h = rd_bytes / 2, krow = rd_row, tile = (size_t)RD_TILE * AR_HK * krow;
    uint64_t s = 0;
    const unsigned char *k = rd_k + (size_t)id * h, *v = rd_v + (size_t)id * h;
    for (size_t o = 0; o < tile && o < h; o += 64) { /* the first tile, at once */
        __builtin_prefetch(k + o, 0, 1);
        __builtin_prefetch(v + o, 0, 1);
    }
    for (size_t t0 = 0; t0 < h; t0 += tile) {
        const size_t nt = h - t0 < tile ? h - t0 : tile, next = t0 + tile;
        size_t pk = 0, pv = 0; /* lines of the next tile requested so far */
        for (int hd = 0; hd < AR_HK; hd++) {
            for (int w = 0; w < 2; w++) {
                const unsigned char *base = w ? v : k;
                size_t *pn = w ? &pv : &pk;
                for (size_t r = (size_t)hd * krow; r + krow <= nt; r += AR_HK * krow) {
                    for (size_t o = 0; o < krow; o += 64) {
                        uint64_t x;
                        memcpy(&x, base + t0 + r + o, sizeof(x));
                        s += x;
                    }
                    for (size_t l = 0; l < krow / 64; l++, (*pn)++) {
                        if (next + *pn * 64 >= h || *pn * 64 >= tile)
                            break;
                        __builtin_prefetch(base + next + *pn * 64, 0, 1);
                    }
                }
            }
        }
    }
    rd_sink[id] = s;
}

/* ---- the multiply-adds alone --------------------------------------------------------- */

static int64_t fma_lanes; /* per thread, set before the rounds */
static volatile float fma_sink[2];

#ifdef AR_FMA
static int fma_width; /* 16, 8, or 0: none */

/* n steps of 12 independent chains (more than latency x throughput on current cores). */
__attribute__((target("avx512f"))) static float fma_512(int64_t n)
{
    __m512 a[12];
    const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm512_set1_ps((float)i);
    for (int64_t s = 0; s < n; s++)
        for (int i = 0; i < 12; i++)
            a[i] = _mm512_fmadd_ps(a[i], m, c);
    for (int i = 1; i < 12; i++)
        a[0] = _mm512_add_ps(a[0], a[i]);
    return _mm512_reduce_add_ps(a[0]);
}

__attribute__((target("avx2,fma"))) static float fma_256(int64_t n)
{
    __m256 a[12];
    const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
    for (int i = 0; i < 12; i++)
        a[i] = _mm256_set1_ps((float)i);
    for (int64_t s = 0; s < n; s++)
        for (int i = 0; i < 12; i++)
            a[i] = _mm256_fmadd_ps(a[i], m, c);
    for (int i = 1; i < 12; i++)
        a[0] = _mm256_add_ps(a[0], a[i]);
    float f[8];
    _mm256_storeu_ps(f, a[0]);
    return f[0] + f[7];
}

static void fma_pick(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        fma_width = 16;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        fma_width = 8;
}

static void fma_half(int id)
{
    const int64_t n = (fma_lanes + 12 * fma_width - 1) / (12 * fma_width);
    fma_sink[id] = fma_width == 16 ? fma_512(n) : fma_256(n);
}
#endif

/* Thread id's half of a round's work. */
static void run_half(int id, int what)
{
#ifdef AR_FMA
    if (what == RD_FMA) {
        fma_half(id);
        return;
    }
#endif
    if (what == RD_ORDER)
        read_half_tiled(id);
    else
        read_half(id);
}

/* The second reader sleeps between rounds (the posenc calls need both cores); a round
 * starts once it is awake, so the wake-up is not timed. */
static void *reader(void *arg)
{
    (void)arg;
    for (int round = 1;; round++) {
        pthread_mutex_lock(&rd_mu);
        while (rd_req < round && rd_req >= 0)
            pthread_cond_wait(&rd_cv, &rd_mu);
        const int req = rd_req;
        pthread_mutex_unlock(&rd_mu);
        if (req < 0)
            return NULL;
        atomic_store(&rd_ready, round);
        while (atomic_load(&rd_go) < round)
            ;
        run_half(1, rd_what);
        atomic_fetch_add(&rd_done, 1);
    }
}

static double timed_read(int round, int what)
{
    rd_what = what; /* read by the reader after the lock below */
    const int done = atomic_load(&rd_done);
    pthread_mutex_lock(&rd_mu);
    rd_req = round;
    pthread_cond_signal(&rd_cv);
    pthread_mutex_unlock(&rd_mu);
    while (atomic_load(&rd_ready) < round)
        ;
    const double t0 = bench_now();
    atomic_store(&rd_go, round);
    run_half(0, what);
    while (atomic_load(&rd_done) == done)
        ;
    return bench_now() - t0;
}

int main(int argc, char **argv)
{
    const char *pocl_affinity = bench_pocl_affinity(); /* as posenc bench */
    posenc_backend_kind kind = POSENC_BACKEND_CPU;
    if (argc > 1 && !strcmp(argv[1], "opencl"))
        kind = POSENC_BACKEND_OPENCL;
    const int64_t D = argc > 2 ? atoll(argv[2]) : 64, Tk = argc > 3 ? atoll(argv[3]) : 4096;
    const int rounds = argc > 4 ? atoi(argv[4]) : 60;
    if ((argc > 1 && strcmp(argv[1], "cpu") && strcmp(argv[1], "opencl")) || D < 1 || D > 256 ||
        Tk < 1 || rounds < 1) {
        fprintf(stderr, "usage: attn_read [cpu|opencl] [D 1-256] [Tk >= 1] [rounds >= 1]\n");
        return 2;
    }
    struct posenc_context_params cp = {.backend = kind};
    posenc_context *ctx = NULL;
    char err[256];
    posenc_status cst = posenc_context_create(&cp, &ctx, err, sizeof(err));
    if (cst != POSENC_OK) {
        fprintf(stderr, "%s: %s\n", posenc_backend_name(kind), err);
        return cst == POSENC_ERR_UNAVAILABLE ? 77 : 1;
    }
    size_t align = 0;
    CHECK(posenc_buffer_host_alignment(ctx, &align));
    const size_t kv_bytes = (size_t)D * AR_HK * (size_t)Tk * 2, q_bytes = (size_t)D * 32 * 4;
    const size_t copy_bytes = (size_t)64 << 20;
    uint16_t *k = host_alloc(kv_bytes, 0), *v = host_alloc(kv_bytes, 0);
    float *qh = malloc(q_bytes), *src = malloc(copy_bytes);
    if (!k || !v || !qh || !src || align > ((size_t)2 << 20) || bench_sweep() != 0) {
        fprintf(stderr, "attn_read: out of host memory\n");
        return 1;
    }
    uint32_t s = 12345u; /* K, V and q in [-0.5, 0.5) */
    for (size_t i = 0; i < kv_bytes / 2; i++) {
        s = s * 1664525u + 1013904223u;
        k[i] = posenc_f32_to_f16((float)(s >> 8) * 0x1p-24f - 0.5f);
        s = s * 1664525u + 1013904223u;
        v[i] = posenc_f32_to_f16((float)(s >> 8) * 0x1p-24f - 0.5f);
    }
    for (size_t i = 0; i < q_bytes / 4; i++)
        qh[i] = (float)(i % 101) / 101.0f - 0.5f;
    for (size_t i = 0; i < copy_bytes / 4; i++)
        src[i] = (float)(i % 977);
    posenc_buffer *bk, *bv, *bq, *by, *c0, *c1;
    if (kind == POSENC_BACKEND_CPU) { /* the call reads the very bytes the read rows read */
        CHECK(posenc_buffer_wrap_host(ctx, k, kv_bytes, &bk));
        CHECK(posenc_buffer_wrap_host(ctx, v, kv_bytes, &bv));
    } else {
        /* posenc's own buffers, as posenc bench and a runtime have them: wrapped host
         * memory would add a map and an unmap of each buffer to every call (PoCL, d 64:
         * 438 us a call wrapped, 350 in posenc bench). On a CPU device they are host
         * memory in huge pages too, so the read rows, which read k and v, read memory of
         * the same kind and size. */
        CHECK(posenc_buffer_create(ctx, kv_bytes, &bk));
        CHECK(posenc_buffer_create(ctx, kv_bytes, &bv));
        CHECK(posenc_buffer_write(bk, 0, k, kv_bytes));
        CHECK(posenc_buffer_write(bv, 0, v, kv_bytes));
    }
    CHECK(posenc_buffer_create(ctx, q_bytes, &bq));
    CHECK(posenc_buffer_create(ctx, q_bytes, &by));
    CHECK(posenc_buffer_create(ctx, copy_bytes, &c0));
    CHECK(posenc_buffer_create(ctx, copy_bytes, &c1));
    CHECK(posenc_buffer_write(bq, 0, qh, q_bytes));
    CHECK(posenc_buffer_write(c0, 0, src, copy_bytes));
    free(src);
    free(qh);
    const posenc_tensor tq = posenc_tensor_contiguous(bq, 0, POSENC_DTYPE_F32, D, 32, 1, 1);
    const posenc_tensor ty = posenc_tensor_contiguous(by, 0, POSENC_DTYPE_F32, D, 32, 1, 1);
    const posenc_tensor tk = posenc_tensor_contiguous(bk, 0, POSENC_DTYPE_F16, D, AR_HK, Tk, 1);
    const posenc_tensor tv = posenc_tensor_contiguous(bv, 0, POSENC_DTYPE_F16, D, AR_HK, Tk, 1);
    const posenc_tensor t0 =
        posenc_tensor_contiguous(c0, 0, POSENC_DTYPE_F32, (int64_t)copy_bytes / 4, 1, 1, 1);
    const posenc_tensor t1 =
        posenc_tensor_contiguous(c1, 0, POSENC_DTYPE_F32, (int64_t)copy_bytes / 4, 1, 1, 1);
    const posenc_tensor s0 =
        posenc_tensor_contiguous(c0, 0, POSENC_DTYPE_F32, BENCH_WAKE_ELEMS, 1, 1, 1);
    const posenc_tensor s1 =
        posenc_tensor_contiguous(c1, 0, POSENC_DTYPE_F32, BENCH_WAKE_ELEMS, 1, 1, 1);
    struct posenc_attention_params ap;
    memset(&ap, 0, sizeof(ap));
    ap.encoding = POSENC_ATTENTION_ALIBI;
    ap.causal = 1;
    ap.q_offset = (int32_t)(Tk - 1);

    rd_k = (const unsigned char *)k;
    rd_v = (const unsigned char *)v;
    rd_bytes = kv_bytes;
    rd_row = (size_t)D * 2;
    pthread_t th;
    if (pthread_create(&th, NULL, reader, NULL) != 0) {
        fprintf(stderr, "attn_read: no reader thread\n");
        return 1;
    }
    double *t = malloc(8 * sizeof(double) * (size_t)rounds);
    if (!t)
        return 1;
    double *tc = t, *tr = t + 2 * rounds, *ta = t + 3 * rounds, *tw = t + 4 * rounds,
           *tf = t + 5 * rounds, *tb = t + 6 * rounds, *to = t + 7 * rounds;
    fma_lanes = 32 * Tk * D; /* per thread: half of 2 x 32 x Tk x D */
    int fw = 0;
#ifdef AR_FMA
    fma_pick();
    fw = fma_width;
#endif
    const int warmup = 3;
    int rn = 0; /* the reader's rounds */
    for (int r = -warmup; r < rounds; r++) {
        double c1t, c2t, rt, at, bt, wt, ft = 0.0, x;
        x = bench_now();
        CHECK(posenc_copy(ctx, &t0, &t1));
        CHECK(posenc_context_finish(ctx));
        c1t = bench_now() - x;
        bench_sweep();
        rt = timed_read(++rn, RD_READ);
        x = bench_now();
        CHECK(posenc_copy(ctx, &t0, &t1));
        CHECK(posenc_context_finish(ctx));
        c2t = bench_now() - x;
        bench_sweep();
        x = bench_now();
        CHECK(posenc_attention(ctx, &tq, &tk, &tv, &ty, NULL, &ap));
        CHECK(posenc_context_finish(ctx));
        at = bench_now() - x;
        x = bench_now();
        CHECK(posenc_attention(ctx, &tq, &tk, &tv, &ty, NULL, &ap));
        CHECK(posenc_context_finish(ctx));
        wt = bench_now() - x;
        /* cold again, but the backend's threads woken after the sweep by a 1 MiB copy */
        CHECK(posenc_copy(ctx, &t0, &t1));
        CHECK(posenc_context_finish(ctx));
        bench_sweep();
        CHECK(posenc_copy(ctx, &s0, &s1));
        CHECK(posenc_context_finish(ctx));
        x = bench_now();
        CHECK(posenc_attention(ctx, &tq, &tk, &tv, &ty, NULL, &ap));
        CHECK(posenc_context_finish(ctx));
        bt = bench_now() - x;
        if (fw)
            ft = timed_read(++rn, RD_FMA);
        CHECK(posenc_copy(ctx, &t0, &t1));
        CHECK(posenc_context_finish(ctx));
        bench_sweep();
        const double ot = timed_read(++rn, RD_ORDER);
        if (r < 0)
            continue;
        to[r] = ot;
        tc[2 * r] = c1t;
        tc[2 * r + 1] = c2t;
        tr[r] = rt;
        ta[r] = at;
        tw[r] = wt;
        tf[r] = ft;
        tb[r] = bt;
    }
    pthread_mutex_lock(&rd_mu);
    rd_req = -1;
    pthread_cond_signal(&rd_cv);
    pthread_mutex_unlock(&rd_mu);
    pthread_join(th, NULL);

    const double ceil = 2.0 * (double)copy_bytes / bench_median(tc, 2 * rounds) / 1e9;
    const double kv = 2.0 * (double)kv_bytes;
    const double mr = bench_median(tr, rounds), ma = bench_median(ta, rounds),
                 mw = bench_median(tw, rounds);
    struct posenc_device_info info;
    posenc_context_get_info(ctx, &info);
    printf("%s (%s), d %lld, 1 x %lld keys, K + V %.2f MiB, %d rounds, sweep %zu MiB; "
           "medians:\n",
           posenc_backend_name(kind), info.device_name, (long long)D, (long long)Tk,
           kv / 1048576.0, rounds, bench_sweep_bytes() >> 20);
    if (kind == POSENC_BACKEND_OPENCL)
        printf("  POCL_AFFINITY=%s\n", pocl_affinity);
    printf("  copy ceiling        %8.1f GB/s\n", ceil);
    printf("  read K + V          %8.1f us  %6.1f GB/s  %5.1f%% of the ceiling\n", mr * 1e6,
           kv / mr / 1e9, 100.0 * kv / mr / 1e9 / ceil);
    const double mo = bench_median(to, rounds);
    printf("  read, cpu call order%8.1f us  %6.1f GB/s  %5.1f%% of the ceiling\n", mo * 1e6,
           kv / mo / 1e9, 100.0 * kv / mo / 1e9 / ceil);
    printf("  attention, cold     %8.1f us  %6.1f GB/s  %5.1f%% of the ceiling, %5.1f%% of "
           "the read\n",
           ma * 1e6, kv / ma / 1e9, 100.0 * kv / ma / 1e9 / ceil, 100.0 * mr / ma);
    const double mb = bench_median(tb, rounds);
    printf("  ... threads woken   %8.1f us  %6.1f GB/s  %5.1f%% of the ceiling\n", mb * 1e6,
           kv / mb / 1e9, 100.0 * kv / mb / 1e9 / ceil);
    printf("  attention, warm     %8.1f us\n", mw * 1e6);
    if (fw) {
        const double mf = bench_median(tf, rounds);
        printf("  multiply-adds alone %8.1f us  %6.1f GB/s  %5.1f%% of the ceiling at most "
               "(%d lanes, %.1f G/s a thread)\n",
               mf * 1e6, kv / mf / 1e9, 100.0 * kv / mf / 1e9 / ceil, fw,
               (double)fma_lanes / mf / 1e9);
    }
    free(t);
    posenc_buffer_destroy(&bk);
    posenc_buffer_destroy(&bv);
    posenc_buffer_destroy(&bq);
    posenc_buffer_destroy(&by);
    posenc_buffer_destroy(&c0);
    posenc_buffer_destroy(&c1);
    posenc_context_destroy(&ctx);
    free(k);
    free(v);
    bench_sweep_free();
    return 0;
}
