/*
 * attn_vs_ggml.c - posenc_attention beside ggml_flash_attn_ext on ggml's own CPU backend, in
 * one process, on the same inputs (issue #20's side-by-side figures).
 *
 * Built only with the ggml backend (-Dggml_src / -Dggml_lib, scripts/ggml-deps fetches that
 * ggml): `build-ggml/ggml/attn-vs-ggml [threads = 2] [reps scale = 1]`. Not a test.
 *
 * Each row: 32 query heads over 8 K/V heads, q f32, K and V f16 in ggml's layout (one
 * head's rows together: ne = [D, Tk, Hk]), the queries the last Tq positions, ALiBi:
 *   ggml      ggml_flash_attn_ext(q, k, v, mask, 1/sqrt(D), max_bias = 8, 0): the mask
 *             holds kpos - qpos (-inf past the query) and ggml multiplies it by its slopes;
 *   mask      posenc_attention with the same mask (an f16 view of the same bytes) and
 *             mask_slopes = ggml's slopes (posenc_alibi_slopes, max_bias 8);
 *   alibi     posenc_attention with its own ALiBi encoding, causal, q_offset = Tk - Tq.
 * posenc reads copies of the same K / V bytes through views with the strides swapped.
 * Calls are alternated (ggml, mask, alibi, ggml, ...), each timed alone (host wall clock
 * around the call and, for posenc, posenc_context_finish) after two untimed rounds; the
 * medians are printed with the largest difference between ggml's output and each of
 * posenc's (ggml accumulates V in f16 on the CPU, so they differ by about an f16
 * rounding). K and V stay wherever the previous call left them (the caches; `posenc
 * bench` reads them from memory).
 */
#define _GNU_SOURCE
#include "posenc.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HQ 32
#define HK 8

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* xorshift64*, uniform in [-1, 1) */
static float urand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (float)((double)((*s * 2685821657736338717ull) >> 11) * 0x1p-52 - 1.0);
}

#define CHECK(call)                                                                       \
    do {                                                                                  \
        posenc_status st_ = (call);                                                       \
        if (st_ != POSENC_OK) {                                                           \
            fprintf(stderr, "%s: %s: %s\n", #call, posenc_status_string(st_),             \
                    posenc_last_error());                                                 \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

struct shape {
    const char *name;
    int64_t D, Tq, Tk;
    int reps;
};

/* One row: returns 0, or 1 when a call failed (printed). */
static int run_row(posenc_context *pc, const struct shape *s, int threads, int reps)
{
    const int64_t D = s->D, Tq = s->Tq, Tk = s->Tk;
    const size_t q_n = (size_t)(D * Tq * HQ), kv_n = (size_t)(D * Tk * HK),
                 m_n = (size_t)(Tk * Tq), o_n = (size_t)(D * HQ * Tq);
    /* ggml's tensors, their work buffer and the graph in one context */
    const size_t mem = q_n * 4 + 2 * kv_n * 2 + m_n * 2 + o_n * 4 + ggml_graph_overhead() +
                       16 * ggml_tensor_overhead() + ((size_t)64 << 20);
    struct ggml_init_params ip = {mem, NULL, false};
    struct ggml_context *g = ggml_init(ip);
    if (!g) {
        fprintf(stderr, "%s: ggml_init(%zu bytes) failed\n", s->name, mem);
        return 1;
    }
    struct ggml_tensor *q = ggml_new_tensor_4d(g, GGML_TYPE_F32, D, Tq, HQ, 1);
    struct ggml_tensor *k = ggml_new_tensor_4d(g, GGML_TYPE_F16, D, Tk, HK, 1);
    struct ggml_tensor *v = ggml_new_tensor_4d(g, GGML_TYPE_F16, D, Tk, HK, 1);
    struct ggml_tensor *m = ggml_new_tensor_4d(g, GGML_TYPE_F16, Tk, Tq, 1, 1);
    uint64_t seed = 20261204u + (uint64_t)(D * 131 + Tq * 7 + Tk);
    float *qd = q->data;
    for (size_t i = 0; i < q_n; i++)
        qd[i] = urand(&seed);
    ggml_fp16_t *kd = k->data, *vd = v->data, *md = m->data;
    for (size_t i = 0; i < kv_n; i++) {
        kd[i] = ggml_fp32_to_fp16(urand(&seed));
        vd[i] = ggml_fp32_to_fp16(urand(&seed));
    }
    for (int64_t iq = 0; iq < Tq; iq++) {
        const int64_t qpos = Tk - Tq + iq;
        for (int64_t ik = 0; ik < Tk; ik++)
            md[iq * Tk + ik] = ggml_fp32_to_fp16(ik <= qpos ? (float)(ik - qpos) : -INFINITY);
    }
    const float scale = 1.0f / sqrtf((float)D);
    struct ggml_tensor *out = ggml_flash_attn_ext(g, q, k, v, m, scale, 8.0f, 0.0f);
    struct ggml_cgraph *gf = ggml_new_graph(g);
    ggml_build_forward_expand(gf, out);

    /* posenc: copies of the same bytes in buffers of posenc's own (ggml's context memory is
     * not checked against posenc_buffer_wrap_host's alignment) */
    posenc_buffer *bq, *bk, *bv, *bm, *bo1, *bo2;
    CHECK(posenc_buffer_create(pc, q_n * 4, &bq));
    CHECK(posenc_buffer_create(pc, kv_n * 2, &bk));
    CHECK(posenc_buffer_create(pc, kv_n * 2, &bv));
    CHECK(posenc_buffer_create(pc, m_n * 2, &bm));
    CHECK(posenc_buffer_create(pc, o_n * 4, &bo1));
    CHECK(posenc_buffer_create(pc, o_n * 4, &bo2));
    CHECK(posenc_buffer_write(bq, 0, q->data, q_n * 4));
    CHECK(posenc_buffer_write(bk, 0, k->data, kv_n * 2));
    CHECK(posenc_buffer_write(bv, 0, v->data, kv_n * 2));
    CHECK(posenc_buffer_write(bm, 0, m->data, m_n * 2));
    /* q [D, Hq, Tq] over ggml's [D, Tq, Hq]; K / V [D, Hk, Tk] over [D, Tk, Hk] */
    posenc_tensor tq = posenc_tensor_contiguous(bq, 0, POSENC_DTYPE_F32, D, HQ, Tq, 1);
    tq.nb[1] = D * Tq * 4;
    tq.nb[2] = D * 4;
    posenc_tensor tk = posenc_tensor_contiguous(bk, 0, POSENC_DTYPE_F16, D, HK, Tk, 1);
    tk.nb[1] = D * Tk * 2;
    tk.nb[2] = D * 2;
    posenc_tensor tv = tk;
    tv.buffer = bv;
    posenc_tensor tm = posenc_tensor_contiguous(bm, 0, POSENC_DTYPE_F16, Tk, Tq, 1, 1);
    posenc_tensor to1 = posenc_tensor_contiguous(bo1, 0, POSENC_DTYPE_F32, D, HQ, Tq, 1);
    posenc_tensor to2 = posenc_tensor_contiguous(bo2, 0, POSENC_DTYPE_F32, D, HQ, Tq, 1);

    double slopes_d[HQ];
    float slopes[HQ];
    struct posenc_alibi_params sp = {.max_bias = 8.0f};
    CHECK(posenc_alibi_slopes(HQ, &sp, slopes_d));
    for (int h = 0; h < HQ; h++)
        slopes[h] = (float)slopes_d[h];
    struct posenc_attention_params pm = {0}, pa = {0};
    pm.scale = pa.scale = scale;
    pm.mask = &tm;
    pm.mask_slopes = slopes;
    pa.encoding = POSENC_ATTENTION_ALIBI;
    pa.causal = 1;
    pa.q_offset = (int32_t)(Tk - Tq);
    pa.alibi.max_bias = 8.0f;

    double *t = malloc(3 * sizeof(double) * (size_t)reps);
    if (!t) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int r = -2; r < reps; r++) {
        double t0 = now_s();
        if (ggml_graph_compute_with_ctx(g, gf, threads) != GGML_STATUS_SUCCESS) {
            fprintf(stderr, "%s: ggml_graph_compute_with_ctx failed\n", s->name);
            return 1;
        }
        double t1 = now_s();
        CHECK(posenc_attention(pc, &tq, &tk, &tv, &to1, NULL, &pm));
        CHECK(posenc_context_finish(pc));
        double t2 = now_s();
        CHECK(posenc_attention(pc, &tq, &tk, &tv, &to2, NULL, &pa));
        CHECK(posenc_context_finish(pc));
        double t3 = now_s();
        if (r >= 0) {
            t[r] = t1 - t0;
            t[reps + r] = t2 - t1;
            t[2 * reps + r] = t3 - t2;
        }
    }
    float *o1 = malloc(o_n * 4), *o2 = malloc(o_n * 4);
    if (!o1 || !o2) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    CHECK(posenc_buffer_read(bo1, 0, o1, o_n * 4));
    CHECK(posenc_buffer_read(bo2, 0, o2, o_n * 4));
    const float *og = out->data; /* [Dv, Hq, Tq]: posenc's dst layout */
    double e1 = 0, e2 = 0;
    for (size_t i = 0; i < o_n; i++) {
        e1 = fmax(e1, fabs((double)o1[i] - og[i]));
        e2 = fmax(e2, fabs((double)o2[i] - og[i]));
    }
    const double mg = median(t, reps), m1 = median(t + reps, reps),
                 m2 = median(t + 2 * reps, reps);
    printf("%-24s %9.2f ms %9.2f ms %9.2f ms   %5.1fx   %.1e / %.1e\n", s->name, 1e3 * mg,
           1e3 * m1, 1e3 * m2, mg / fmin(m1, m2), e1, e2);
    fflush(stdout);
    free(o1);
    free(o2);
    free(t);
    posenc_buffer_destroy(&bq);
    posenc_buffer_destroy(&bk);
    posenc_buffer_destroy(&bv);
    posenc_buffer_destroy(&bm);
    posenc_buffer_destroy(&bo1);
    posenc_buffer_destroy(&bo2);
    ggml_free(g);
    return 0;
}

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    const double rs = argc > 2 ? atof(argv[2]) : 1.0;
    if (threads < 1 || !(rs > 0)) {
        fprintf(stderr, "usage: %s [threads >= 1] [reps scale > 0]\n", argv[0]);
        return 2;
    }
    static const struct shape shapes[] = {
        {"decode d128 1 x 4096", 128, 1, 4096, 50},
        {"decode d64 1 x 4096", 64, 1, 4096, 50},
        {"decode d128 1 x 32768", 128, 1, 32768, 10},
        {"decode d64 1 x 32768", 64, 1, 32768, 10},
        {"prefill d128 512 x 512", 128, 512, 512, 10},
        {"prefill d64 512 x 512", 64, 512, 512, 10},
    };
    struct posenc_context_params cp = {0};
    cp.backend = POSENC_BACKEND_CPU;
    cp.n_threads = threads;
    char err[256];
    posenc_context *pc = NULL;
    if (posenc_context_create(&cp, &pc, err, sizeof err) != POSENC_OK) {
        fprintf(stderr, "posenc_context_create: %s\n", err);
        return 1;
    }
    printf("posenc_attention (CPU backend) beside ggml_flash_attn_ext (ggml's CPU backend), "
           "%d threads each, 32|8 heads, q f32, K/V f16, ALiBi; medians, calls alternated\n",
           threads);
    printf("%-24s %12s %12s %12s %8s   %s\n", "shape", "ggml", "posenc mask", "posenc alibi",
           "ggml/pe", "max |posenc - ggml| (mask / alibi)");
    int bad = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int reps = (int)(shapes[i].reps * rs);
        bad |= run_row(pc, &shapes[i], threads, reps < 3 ? 3 : reps);
    }
    posenc_context_destroy(&pc);
    return bad;
}
