/*
 * test_learned.c - posenc_learned and posenc_learned_backward on one backend
 * (--backend NAME).
 *
 *  - every shared learned / learned_backward case (src/check) against the CPU reference;
 *  - values computed here independently in double: inputs are small dyadic rationals
 *    (k/8), so every sum is exact in f32 and f16 and the results must match bit for bit;
 *  - the seed's property: a table rejects a position >= its length (the "2,049th token"
 *    of a 2,048-row table): POSENC_ERR_OUT_OF_RANGE naming the token and its value, the
 *    output untouched, on every backend;
 *  - the backward pass gives the same bits on two runs (no float atomics);
 *  - bad input: exact statuses, a message naming the argument, output untouched.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A dyadic value k/8 with |k| <= 32, from a seed: exact in f16 and f32, and so are sums of
 * a few hundred of them. */
static float dyadic(uint64_t *rng)
{
    return (float)((int)(pc_rand_u64(rng) % 65) - 32) / 8.0f;
}

/* ---- forward, against double ------------------------------------------------------------ */

/* x [D, T, B] + table[pos[t, b]] with batch positions, f32 and f16 outputs, with and without
 * x, table in the other dtype: every value is exact, so the device must match bit for bit. */
static void test_forward_exact(void **state)
{
    (void)state;
    enum { D = 5, T = 4, B = 2, ROWS = 6 };
    uint64_t rng = 42;
    float table[D * ROWS], x[D * T * B];
    int32_t pos[T * B] = {5, 0, 3, 3, 1, 1, 4, 2}; /* [T, B]: batch rows differ */
    for (int i = 0; i < D * ROWS; i++)
        table[i] = dyadic(&rng);
    for (int i = 0; i < D * T * B; i++)
        x[i] = dyadic(&rng);
    for (int dt = 0; dt < 2; dt++)
        for (int with_x = 0; with_x < 2; with_x++) {
            posenc_dtype odt = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
            posenc_dtype tdt = dt ? POSENC_DTYPE_F32 : POSENC_DTYPE_F16; /* mixed */
            size_t tes = posenc_dtype_size(tdt), oes = posenc_dtype_size(odt);
            unsigned char timg[D * ROWS * 4];
            for (int i = 0; i < D * ROWS; i++)
                th_put_elem(timg, (size_t)i, table[i], tdt == POSENC_DTYPE_F16);
            posenc_buffer *tb = th_upload(th.dut, timg, D * ROWS * tes);
            posenc_buffer *xb = th_upload(th.dut, x, sizeof(x));
            posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
            posenc_buffer *db = NULL;
            assert_int_equal(posenc_buffer_create(th.dut, D * T * B * oes, &db), POSENC_OK);
            posenc_tensor tt = posenc_tensor_contiguous(tb, 0, tdt, D, ROWS, 1, 1);
            posenc_tensor xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, T, B, 1);
            posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, B, 1, 1);
            posenc_tensor dst = posenc_tensor_contiguous(db, 0, odt, D, T, B, 1);
            th_expect(posenc_learned(th.dut, with_x ? &xt : NULL, &pt, &tt, &dst), POSENC_OK, NULL,
                      "learned");
            unsigned char *out = th_download(db);
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++)
                    for (int i = 0; i < D; i++) {
                        int e = i + D * (t + T * b);
                        double want = (double)table[i + D * pos[t + T * b]] + (with_x ? x[e] : 0.0);
                        const double got = th_elem(out, (size_t)e, odt == POSENC_DTYPE_F16);
                        if (got != want)
                            fail_msg("%s x=%d: (%d, %d, %d) = %.9g, want %.9g",
                                     posenc_dtype_name(odt), with_x, i, t, b, got, want);
                    }
            free(out);
            posenc_buffer_destroy(&tb);
            posenc_buffer_destroy(&xb);
            posenc_buffer_destroy(&pb);
            posenc_buffer_destroy(&db);
        }
    th_check_warnings();
}

/* Rows longer than one work-item's span and not a multiple of 16, inside rows padded to
 * 608 elements (x, dst and the table), so that the GPU backends' vector kernels run (on
 * OpenCL CPU devices one work-item takes 256 elements: two full spans and a partial one
 * ending in single elements). d = 600, T = 5, B = 2, 7 table rows, f32 and f16 throughout,
 * out of place and in place; dyadic values, so the sums are exact and the device must
 * match bit for bit; the 8 padding elements of every row must stay untouched. */
static void test_forward_long_rows(void **state)
{
    (void)state;
    enum { D = 600, DP = 608, T = 5, B = 2, ROWS = 7 };
    static float table[DP * ROWS], x[DP * T * B];
    const float pad = 77.0f;
    int32_t pos[T * B] = {6, 0, 3, 3, 1, 5, 4, 2, 0, 6};
    uint64_t rng = 4242;
    for (int i = 0; i < DP * ROWS; i++)
        table[i] = i % DP < D ? dyadic(&rng) : pad;
    for (int i = 0; i < DP * T * B; i++)
        x[i] = i % DP < D ? dyadic(&rng) : pad;
    for (int dt = 0; dt < 2; dt++)
        for (int in_place = 0; in_place < 2; in_place++)
            for (int shared = 0; shared < 2; shared++) {
                const posenc_dtype d = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                const size_t es = posenc_dtype_size(d);
                static unsigned char timg[DP * ROWS * 4], ximg[DP * T * B * 4],
                    pimg[DP * T * B * 4];
                for (int i = 0; i < DP * ROWS; i++)
                    th_put_elem(timg, (size_t)i, table[i], dt);
                for (int i = 0; i < DP * T * B; i++) {
                    th_put_elem(ximg, (size_t)i, x[i], dt);
                    th_put_elem(pimg, (size_t)i, pad, dt);
                }
                posenc_buffer *tb = th_upload(th.dut, timg, DP * ROWS * es);
                posenc_buffer *xb = th_upload(th.dut, ximg, DP * T * B * es);
                posenc_buffer *db = th_upload(th.dut, pimg, DP * T * B * es);
                posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
                posenc_tensor tt = posenc_tensor_contiguous(tb, 0, d, D, ROWS, 1, 1);
                tt.nb[1] = (int64_t)(DP * es);
                tt.nb[2] = tt.nb[3] = tt.nb[1] * ROWS;
                posenc_tensor xt = posenc_tensor_contiguous(xb, 0, d, D, T, B, 1);
                xt.nb[1] = (int64_t)(DP * es);
                xt.nb[2] = xt.nb[1] * T;
                xt.nb[3] = xt.nb[2] * B;
                posenc_tensor dst = xt;
                if (!in_place)
                    dst.buffer = db;
                /* shared: positions [T, 1], the first batch row's for every row */
                posenc_tensor pt =
                    posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, shared ? 1 : B, 1, 1);
                th_expect(posenc_learned(th.dut, &xt, &pt, &tt, &dst), POSENC_OK, NULL,
                          "learned long rows");
                unsigned char *out = th_download(in_place ? xb : db);
                for (int b = 0; b < B; b++)
                    for (int t = 0; t < T; t++)
                        for (int i = 0; i < DP; i++) {
                            const int e = i + DP * (t + T * b);
                            const int prow = pos[t + T * (shared ? 0 : b)];
                            const double want = i < D ? (double)table[i + DP * prow] + x[e] : pad;
                            const double got = th_elem(out, (size_t)e, dt);
                            if (got != want)
                                fail_msg("%s in place %d shared %d: (%d, %d, %d) = %.9g, want "
                                         "%.9g%s", posenc_dtype_name(d), in_place, shared, i, t, b,
                                         got, want, i < D ? "" : " (padding)");
                        }
                free(out);
                posenc_buffer_destroy(&tb);
                posenc_buffer_destroy(&xb);
                posenc_buffer_destroy(&db);
                posenc_buffer_destroy(&pb);
            }
    th_check_warnings();
}

/* Outputs of 16 MiB and more out of place: the CPU backend and OpenCL on CPU devices write
 * them with streaming stores, which want aligned rows, so two layouts are checked: rows of
 * 1024 elements from the buffer's start (every row aligned: the streaming path, and
 * OpenCL's 16-wide one), and rows of 1028 from one element in (no row aligned: the
 * plain-store fallbacks). x [D, T, 2] f32 or [D, 2T, 2] f16 (16 MiB or more out) with
 * batch positions, dyadic values: every sum exact, the device must match bit for bit; the
 * element before a shifted dst, or after an aligned one, must stay as it was. */
static void test_forward_large(void **state)
{
    (void)state;
    enum { DMAX = 1028, T = 2048, B = 2, ROWS = 97 };
    uint64_t rng = 777;
    static float table[DMAX * ROWS];
    for (int dt = 0; dt < 2; dt++)
        for (int shift = 0; shift < 2; shift++) {
            const int D = shift ? 1028 : 1024;
            for (int i = 0; i < D * ROWS; i++)
                table[i] = dyadic(&rng);
            const posenc_dtype d = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
            const size_t es = posenc_dtype_size(d);
            const int64_t Tn = dt ? 2 * T : T; /* 16 MiB of f16 too */
            const size_t n = (size_t)D * (size_t)Tn * B;
            unsigned char *ximg = malloc(n * es), *timg = malloc((size_t)D * ROWS * es);
            int32_t *pos = malloc((size_t)Tn * B * sizeof(int32_t));
            float *x = malloc(n * sizeof(float));
            assert_non_null(ximg);
            assert_non_null(timg);
            assert_non_null(pos);
            assert_non_null(x);
            for (size_t i = 0; i < n; i++) {
                x[i] = dyadic(&rng);
                th_put_elem(ximg, i, x[i], dt);
            }
            for (int i = 0; i < D * ROWS; i++)
                th_put_elem(timg, (size_t)i, table[i], dt);
            for (int64_t i = 0; i < Tn * B; i++)
                pos[i] = (int32_t)(pc_rand_u64(&rng) % ROWS);
            posenc_buffer *xb = th_upload(th.dut, ximg, n * es);
            posenc_buffer *tb = th_upload(th.dut, timg, (size_t)D * ROWS * es);
            posenc_buffer *pb = th_upload(th.dut, pos, (size_t)Tn * B * sizeof(int32_t));
            posenc_buffer *db = NULL;
            assert_int_equal(posenc_buffer_create(th.dut, (n + 1) * es, &db), POSENC_OK);
            assert_int_equal(posenc_fill(th.dut,
                                         &(posenc_tensor){.buffer = db, .dtype = d,
                                                          .ne = {(int64_t)n + 1, 1, 1, 1},
                                                          .nb = {(int64_t)es,
                                                                 (int64_t)((n + 1) * es),
                                                                 (int64_t)((n + 1) * es),
                                                                 (int64_t)((n + 1) * es)}},
                                         3.0),
                             POSENC_OK);
            posenc_tensor xt = posenc_tensor_contiguous(xb, 0, d, D, Tn, B, 1);
            posenc_tensor tt = posenc_tensor_contiguous(tb, 0, d, D, ROWS, 1, 1);
            posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, Tn, B, 1, 1);
            posenc_tensor dst = posenc_tensor_contiguous(db, (size_t)shift * es, d, D, Tn, B, 1);
            th_expect(posenc_learned(th.dut, &xt, &pt, &tt, &dst), POSENC_OK, NULL,
                      "learned, 16 MiB out of place");
            unsigned char *out = th_download(db);
            for (size_t e = 0; e <= n; e++) {
                double want = 3.0; /* the fill, before a shifted dst or after an aligned one */
                if (e >= (size_t)shift && e < n + (size_t)shift) {
                    const size_t i = e - (size_t)shift;
                    const int64_t c = (int64_t)(i % D), tb_ = (int64_t)(i / D);
                    want = (double)table[c + (int64_t)D * pos[tb_]] + x[i];
                }
                const double got = th_elem(out, e, dt);
                if (got != want)
                    fail_msg("%s dst shifted %d: element %zu = %.9g, want %.9g",
                             posenc_dtype_name(d), shift, e, got, want);
            }
            free(out);
            free(ximg);
            free(timg);
            free(pos);
            free(x);
            posenc_buffer_destroy(&xb);
            posenc_buffer_destroy(&tb);
            posenc_buffer_destroy(&pb);
            posenc_buffer_destroy(&db);
        }
    th_check_warnings();
}

/* ---- backward, against double ----------------------------------------------------------- */

static float *backward_dut(const float *dy, int64_t d, int64_t T, int64_t B, const int32_t *pos,
                           int64_t pos_b, const float *dtable0, int64_t rows)
{
    posenc_buffer *yb = th_upload(th.dut, dy, (size_t)(d * T * B) * 4);
    posenc_buffer *pb = th_upload(th.dut, pos, (size_t)(T * pos_b) * 4);
    posenc_buffer *gb = th_upload(th.dut, dtable0, (size_t)(d * rows) * 4);
    posenc_tensor yt = posenc_tensor_contiguous(yb, 0, POSENC_DTYPE_F32, d, T, B, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, pos_b, 1, 1);
    posenc_tensor gt = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, d, rows, 1, 1);
    th_expect(posenc_learned_backward(th.dut, &yt, &pt, &gt), POSENC_OK, NULL, "learned_backward");
    float *out = th_download(gb);
    posenc_buffer_destroy(&yb);
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&gb);
    th_check_warnings();
    return out;
}

/* dtable[pos] += dy with repeated positions (shared by the batch): exact dyadic sums. */
static void test_backward_exact(void **state)
{
    (void)state;
    enum { D = 3, T = 9, B = 2, ROWS = 5 };
    uint64_t rng = 7;
    float dy[D * T * B], g0[D * ROWS];
    const int32_t pos[T] = {2, 0, 2, 4, 2, 0, 1, 2, 4}; /* row 3 gets nothing */
    for (int i = 0; i < D * T * B; i++)
        dy[i] = dyadic(&rng);
    for (int i = 0; i < D * ROWS; i++)
        g0[i] = dyadic(&rng);
    float *g = backward_dut(dy, D, T, B, pos, 1, g0, ROWS);
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < D; i++) {
            double want = g0[i + D * r];
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++)
                    if (pos[t] == r)
                        want += dy[i + D * (t + T * b)];
            if (g[i + D * r] != want)
                fail_msg("dtable[%d, %d] = %.9g, want %.9g", i, r, g[i + D * r], want);
        }
    free(g);
}

/* Two runs of a large, rounding-heavy accumulation give the same bits. */
static void test_backward_deterministic(void **state)
{
    (void)state;
    enum { D = 64, T = 1000, B = 2, ROWS = 7 };
    float *dy = malloc(sizeof(float) * D * T * B), *g0 = malloc(sizeof(float) * D * ROWS);
    int32_t *pos = malloc(sizeof(int32_t) * T * B);
    assert_true(dy && g0 && pos);
    uint64_t rng = 99;
    for (int i = 0; i < D * T * B; i++)
        dy[i] = (float)(pc_rand_uniform(&rng) * 2.0 - 1.0) * 1e-3f;
    for (int i = 0; i < D * ROWS; i++)
        g0[i] = (float)(pc_rand_uniform(&rng) * 2.0 - 1.0);
    for (int i = 0; i < T * B; i++)
        pos[i] = (int32_t)(pc_rand_u64(&rng) % ROWS);
    float *a = backward_dut(dy, D, T, B, pos, B, g0, ROWS);
    float *b = backward_dut(dy, D, T, B, pos, B, g0, ROWS);
    if (memcmp(a, b, sizeof(float) * D * ROWS) != 0)
        fail_msg("two runs of learned_backward differ");
    free(a);
    free(b);
    free(dy);
    free(g0);
    free(pos);
}

/* ---- out of range ------------------------------------------------------------------------- */

/* A 2,048-row table and 2,049 tokens 0..2048: the 2,049th token (index 2048) is rejected. */
static void test_out_of_range(void **state)
{
    (void)state;
    enum { D = 4, ROWS = 2048, T = 2049 };
    float *table = calloc(D * ROWS, sizeof(float));
    int32_t *pos = malloc(sizeof(int32_t) * T);
    unsigned char *poison = malloc(D * T * 4);
    assert_true(table && pos && poison);
    for (int t = 0; t < T; t++)
        pos[t] = t;
    memset(poison, 0xA5, D * T * 4);
    posenc_buffer *tb = th_upload(th.dut, table, sizeof(float) * D * ROWS);
    posenc_buffer *pb = th_upload(th.dut, pos, sizeof(int32_t) * T);
    posenc_buffer *db = th_upload(th.dut, poison, D * T * 4);
    posenc_buffer *gb = th_upload(th.dut, poison, D * ROWS * 4);
    posenc_tensor tt = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, D, ROWS, 1, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, T, 1, 1);
    posenc_tensor gt = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, D, ROWS, 1, 1);
    const posenc_status OOR = POSENC_ERR_OUT_OF_RANGE;
    th_expect(posenc_learned(th.dut, NULL, &pt, &tt, &dt), OOR, "token 2048", "position 2048");
    th_expect(posenc_learned(th.dut, NULL, &pt, &tt, &dt), OOR, "2048 rows", "rows named");
    /* in place with x = dst: still untouched */
    th_expect(posenc_learned(th.dut, &dt, &pt, &tt, &dt), OOR, "position 2048", "in place");
    /* dy = dst's poison as a gradient: dtable untouched too */
    th_expect(posenc_learned_backward(th.dut, &dt, &pt, &gt), OOR, "token 2048", "backward");
    /* a negative position, in the second batch row of batched positions */
    int32_t neg[6] = {0, 1, 2, 0, -1, 2};
    posenc_buffer *nb = th_upload(th.dut, neg, sizeof(neg));
    posenc_tensor nt = posenc_tensor_contiguous(nb, 0, POSENC_DTYPE_I32, 3, 2, 1, 1);
    posenc_tensor d2 = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, 3, 2, 1);
    th_expect(posenc_learned(th.dut, NULL, &nt, &tt, &d2), OOR, "token 1 (batch 1)", "negative");
    th_expect(posenc_learned(th.dut, NULL, &nt, &tt, &d2), OOR, "position -1", "negative value");
    th_expect_untouched(db, 0xA5, "learned out of range");
    th_expect_untouched(gb, 0xA5, "learned_backward out of range");
    posenc_buffer_destroy(&tb);
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&gb);
    posenc_buffer_destroy(&nb);
    free(table);
    free(pos);
    free(poison);
    th_check_warnings();
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    enum { D = 8, T = 5, ROWS = 6 };
    const posenc_status INV = POSENC_ERR_INVALID_ARGUMENT;
    unsigned char poison[D * T * 4 * 2];
    memset(poison, 0xA5, sizeof(poison));
    float table[D * ROWS] = {0}, x[D * T] = {0};
    int32_t pos[2 * T] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
    posenc_buffer *db = th_upload(th.dut, poison, sizeof(poison));
    posenc_buffer *gb = th_upload(th.dut, poison, sizeof(poison));
    posenc_buffer *tb = th_upload(th.dut, table, sizeof(table));
    posenc_buffer *xb = th_upload(th.dut, x, sizeof(x));
    posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
    posenc_tensor dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, T, 1, 1);
    posenc_tensor dtab = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, D, ROWS, 1, 1);
    posenc_tensor tab = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, D, ROWS, 1, 1);
    posenc_tensor xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, T, 1, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor t;

    assert_int_equal(posenc_learned(NULL, NULL, &pt, &tab, &dst), INV);
    th_expect(posenc_learned(th.dut, NULL, &pt, &tab, NULL), INV, "dst is NULL", "dst NULL");
    th_expect(posenc_learned(th.dut, NULL, &pt, NULL, &dst), INV, "table is NULL", "table NULL");
    th_expect(posenc_learned(th.dut, NULL, NULL, &tab, &dst), INV, "pos is NULL", "pos NULL");
    t = dst;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_learned(th.dut, NULL, &pt, &tab, &t), INV, "dst->dtype", "i32 dst");
    t = tab;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_learned(th.dut, NULL, &pt, &t, &dst), INV, "table->dtype", "i32 table");
    t = pt;
    t.dtype = POSENC_DTYPE_F32;
    th_expect(posenc_learned(th.dut, NULL, &t, &tab, &dst), INV, "pos->dtype", "f32 pos");
    t = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, D / 2, ROWS, 1, 1);
    th_expect(posenc_learned(th.dut, NULL, &pt, &t, &dst), INV, "table->ne[0] = 4", "table d");
    t = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, D, 2, 3, 1);
    th_expect(posenc_learned(th.dut, NULL, &pt, &t, &dst), INV, "table->ne", "3-D table");
    t = pt;
    t.ne[0] = T - 1;
    th_expect(posenc_learned(th.dut, NULL, &t, &tab, &dst), INV, "pos->ne", "pos length");
    t = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 2, 1, 1); /* B = 1 */
    th_expect(posenc_learned(th.dut, NULL, &t, &tab, &dst), INV, "pos->ne", "pos batch");
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, T, 1, 2);
    posenc_tensor p4 = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    th_expect(posenc_learned(th.dut, NULL, &p4, &tab, &t), INV, "dst->ne", "4-D dst");
    t = xt;
    t.ne[1] = T - 1;
    th_expect(posenc_learned(th.dut, &t, &pt, &tab, &dst), INV, "x->ne", "x shape");
    t = posenc_tensor_contiguous(db, 4 * D, POSENC_DTYPE_F32, D, T, 1, 1);
    th_expect(posenc_learned(th.dut, &t, &pt, &tab, &dst), INV, "partially overlaps", "x overlap");
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, ROWS, 1, 1);
    posenc_tensor dhi = posenc_tensor_contiguous(db, 4 * D * 2, POSENC_DTYPE_F32, D, T, 1, 1);
    th_expect(posenc_learned(th.dut, NULL, &pt, &t, &dhi), INV, "table overlaps dst",
              "table in dst");
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    th_expect(posenc_learned(th.dut, NULL, &t, &tab, &dst), INV, "pos overlaps dst", "pos in dst");

    /* backward */
    assert_int_equal(posenc_learned_backward(NULL, &xt, &pt, &dtab), INV);
    th_expect(posenc_learned_backward(th.dut, NULL, &pt, &dtab), INV, "dy is NULL", "dy NULL");
    th_expect(posenc_learned_backward(th.dut, &xt, &pt, NULL), INV, "dtable is NULL",
              "dtable NULL");
    t = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, D + 1, ROWS, 1, 1);
    th_expect(posenc_learned_backward(th.dut, &xt, &pt, &t), INV, "dtable->ne[0]", "dtable d");
    t = posenc_tensor_contiguous(gb, 0, POSENC_DTYPE_F32, D, T, 1, 1);
    th_expect(posenc_learned_backward(th.dut, &t, &pt, &dtab), INV, "dy overlaps dtable",
              "dy in dtable");
    t = dtab;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_learned_backward(th.dut, &xt, &pt, &t), INV, "dtable->dtype", "i32 dtable");

    /* empty: a valid no-op that reads and writes nothing */
    t = dst;
    t.ne[1] = 0;
    posenc_tensor p0 = pt;
    p0.ne[0] = 0;
    th_expect(posenc_learned(th.dut, NULL, &p0, &tab, &t), POSENC_OK, NULL, "empty");
    assert_string_equal(posenc_context_last_error(th.dut), "");
    posenc_tensor y0 = xt;
    y0.ne[1] = 0;
    th_expect(posenc_learned_backward(th.dut, &y0, &p0, &dtab), POSENC_OK, NULL, "empty backward");

    th_expect_untouched(db, 0xA5, "learned");
    th_expect_untouched(gb, 0xA5, "learned_backward");
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&gb);
    posenc_buffer_destroy(&tb);
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&pb);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "learned");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_forward_exact),
        cmocka_unit_test(test_forward_long_rows),
        cmocka_unit_test(test_forward_large),
        cmocka_unit_test(test_backward_exact),
        cmocka_unit_test(test_backward_deterministic),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_bad_input),
    };
    static const enum pc_op ops[] = {PC_OP_LEARNED, PC_OP_LEARNED_BACKWARD};
    rc = th_run_with_cases("learned", fixed, sizeof(fixed) / sizeof(fixed[0]), ops,
                           sizeof(ops) / sizeof(ops[0]));
    th_fini();
    return rc;
}
