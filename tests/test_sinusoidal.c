/*
 * test_sinusoidal.c - posenc_sinusoidal on one backend (--backend NAME).
 *
 *  - every shared verification case (src/check) against the CPU reference;
 *  - the seed documents' worked examples and an independent double-precision formula
 *    (pow() instead of the library's exp/log) on this backend directly;
 *  - properties from the seeds: values in [-1, 1]; PE(pos+k) is a fixed rotation of
 *    PE(pos) per frequency;
 *  - bad input: exact statuses, a message naming the argument, output untouched.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared cases ---------------------------------------------------------------------- */

/* ---- helpers -------------------------------------------------------------------------- */

/* Run a table-only encoding of `n` int positions with dimension d on the dut, f32. */
static float *encode(int64_t d, const int32_t *pos, int64_t n,
                     const struct posenc_sinusoidal_params *p)
{
    posenc_buffer *pb = th_upload(th.dut, pos, (size_t)n * 4);
    posenc_buffer *db = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, (size_t)(d * n) * 4, &db), POSENC_OK);
    posenc_tensor dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, d, n, 1, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, n, 1, 1, 1);
    assert_int_equal(posenc_sinusoidal(th.dut, NULL, &pt, &dst, p), POSENC_OK);
    float *out = th_download(db);
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&pb);
    th_check_warnings();
    return out;
}

/* ---- seed vectors ----------------------------------------------------------------------- */

/* d_model = 6, pos = 2: [0.909, -0.416, 0.092, 0.995, 0.004, 0.999] to 3 decimals. */
static void test_seed_d6_pos2(void **state)
{
    (void)state;
    int32_t pos = 2;
    float *v = encode(6, &pos, 1, NULL);
    static const double rounded[6] = {0.909, -0.416, 0.092, 0.995, 0.004, 0.999};
    for (int i = 0; i < 3; i++) {
        double a = 2.0 / pow(10000.0, 2.0 * i / 6.0); /* exact angle, double */
        double want[2] = {sin(a), cos(a)};
        for (int k = 0; k < 2; k++) {
            double got = v[2 * i + k];
            /* bound: the contract's sin/cos error + rounding, at every position (check.c) */
            double bound = pc_bound_sincos_f32(a, 0.0);
            if (fabs(got - want[k]) > bound)
                fail_msg("PE(2, %d) = %.9f, double says %.9f (bound %.3g)", 2 * i + k, got,
                         want[k], bound);
            /* and the seed's figure, which is the value truncated to 3 decimals
             * (cos(0.0928) = 0.99569 is printed as 0.995) */
            assert_true(fabs(trunc(got * 1000.0) - rounded[2 * i + k] * 1000.0) < 0.5);
        }
    }
    free(v);
}

/* d_model = 4, pos = 0: PE = [0, 1, 0, 1]; added to [0.51, -0.22, 0.88, 0.14] gives
 * [0.51, 0.78, 0.88, 1.14]. */
static void test_seed_d4_pos0_add(void **state)
{
    (void)state;
    const float x[4] = {0.51f, -0.22f, 0.88f, 0.14f};
    int32_t pos = 0;
    posenc_buffer *xb = th_upload(th.dut, x, sizeof(x));
    posenc_buffer *pb = th_upload(th.dut, &pos, 4);
    posenc_buffer *db = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, 16, &db), POSENC_OK);
    posenc_tensor xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, 4, 1, 1, 1);
    posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, 4, 1, 1, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 1, 1, 1, 1);

    assert_int_equal(posenc_sinusoidal(th.dut, NULL, &pt, &dt, NULL), POSENC_OK);
    float pe[4];
    assert_int_equal(posenc_buffer_read(db, 0, pe, sizeof(pe)), POSENC_OK);
    /* angle 0: sin 0 = 0 and cos 0 = 1 exactly on every backend (4 ulp of 0 is 0 and
     * the only error source left is the evaluation of sin/cos at 0) */
    const float pe_want[4] = {0.0f, 1.0f, 0.0f, 1.0f};
    for (int i = 0; i < 4; i++)
        assert_true(fabs(pe[i] - pe_want[i]) <= pc_bound_sincos_f32(0.0, 0.0));

    assert_int_equal(posenc_sinusoidal(th.dut, &xt, &pt, &dt, NULL), POSENC_OK);
    float y[4];
    assert_int_equal(posenc_buffer_read(db, 0, y, sizeof(y)), POSENC_OK);
    const double want[4] = {0.51, 0.78, 0.88, 1.14};
    for (int i = 0; i < 4; i++) {
        /* x is the f32 nearest the decimal (<= 0.5 ulp away), plus the fused bound */
        double bound = pc_bound_sincos_f32(0.0, fabs(x[i])) + 0.5 * pc_ulp32(x[i]);
        if (fabs(y[i] - want[i]) > bound)
            fail_msg("y[%d] = %.9f, want %.2f (bound %.3g)", i, y[i], want[i], bound);
    }
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&db);
    th_check_warnings();
}

/* The paper's formula evaluated independently in double (pow, not exp/log), d = 128,
 * positions 0..63 and large ones up to 2^24 - 1, every layout: the bound
 * (pc_bound_sincos_f32, 5 * 2^-24 for |pos w| <= 2^24) is the same at every position. */
static void test_independent_double(void **state)
{
    (void)state;
    enum { D = 128, N = 80 };
    int32_t pos[N];
    for (int i = 0; i < 64; i++)
        pos[i] = i;
    const int32_t far[16] = {100,    511,     1000,    4095,    4096,     12345,
                             65535,  100000,  999999,  1000000, 8388607,  8388608,
                             9999991, 16777213, 16777214, 16777215};
    memcpy(pos + 64, far, sizeof(far));
    for (int layout = 0; layout < 3; layout++) {
        struct posenc_sinusoidal_params p = {.layout = (posenc_sin_layout)layout};
        float *v = encode(D, pos, N, &p);
        for (int t = 0; t < N; t++)
            for (int i = 0; i < D / 2; i++) {
                double a = pos[t] / pow(10000.0, 2.0 * i / D);
                int is = layout == 0 ? 2 * i : layout == 1 ? i : D / 2 + i;
                int ic = layout == 0 ? 2 * i + 1 : layout == 1 ? D / 2 + i : i;
                double bound = pc_bound_sincos_f32(a, 0.0);
                double es = fabs(v[t * D + is] - sin(a)), ec = fabs(v[t * D + ic] - cos(a));
                if (es > bound || ec > bound)
                    fail_msg("layout %d pos %d pair %d: sin err %.3g cos err %.3g > %.3g",
                             layout, pos[t], i, es, ec, bound);
            }
        free(v);
    }
}

/* f32 positions (diffusion timesteps, time series) up to 2^24, ggml's timestep layout (cos
 * first, freq_shift 0) and the paper's, fused into x (x*scale + PE), against double from
 * posenc_sinusoidal_freqs: exact relative to the f32 position given, the same bound at
 * every position. */
static void test_large_f32_positions(void **state)
{
    (void)state;
    enum { D = 64, N = 12 };
    const float pos[N] = {0.5f,       999.25f,     12345.678f,  99999.5f,
                          999999.5f,  1000000.0f,  4194303.75f, 8388607.5f,
                          8388608.0f, 16777214.0f, 16777215.0f, 3.0e6f};
    float x[N * D];
    uint64_t rng = 99;
    th_fill_unit(x, N * D, &rng);
    for (int layout = 0; layout < 3; layout += 2) {
        struct posenc_sinusoidal_params p = {.layout = (posenc_sin_layout)layout,
                                             .x_scale = 0.5f};
        double w[D / 2];
        assert_int_equal(posenc_sinusoidal_freqs(D, &p, w), POSENC_OK);
        posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
        posenc_buffer *xb = th_upload(th.dut, x, sizeof(x));
        posenc_buffer *db = NULL;
        assert_int_equal(posenc_buffer_create(th.dut, sizeof(x), &db), POSENC_OK);
        posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, N, 1, 1);
        posenc_tensor xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, N, 1, 1);
        posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_F32, N, 1, 1, 1);
        assert_int_equal(posenc_sinusoidal(th.dut, &xt, &pt, &dt, &p), POSENC_OK);
        float *v = th_download(db);
        for (int t = 0; t < N; t++)
            for (int i = 0; i < D / 2; i++) {
                const double a = (double)pos[t] * w[i];
                const int is = layout == 0 ? 2 * i : D / 2 + i, ic = layout == 0 ? 2 * i + 1 : i;
                const double ws = 0.5 * x[t * D + is] + sin(a), wc = 0.5 * x[t * D + ic] + cos(a);
                const double bs = pc_bound_sincos_f32(a, fabs(0.5 * x[t * D + is]));
                const double bc = pc_bound_sincos_f32(a, fabs(0.5 * x[t * D + ic]));
                if (!(fabs(v[t * D + is] - ws) <= bs) || !(fabs(v[t * D + ic] - wc) <= bc))
                    fail_msg("layout %d pos %.9g pair %d: (%.9g, %.9g), double (%.9g, %.9g), "
                             "bounds %.3g %.3g",
                             layout, (double)pos[t], i, v[t * D + is], v[t * D + ic], ws, wc, bs,
                             bc);
            }
        free(v);
        posenc_buffer_destroy(&db);
        posenc_buffer_destroy(&xb);
        posenc_buffer_destroy(&pb);
        th_check_warnings();
    }
}

/* A frequency past the f32 range (base below 1 with a large freq_shift: w up to 1e40) is
 * INVALID_ARGUMENT up front on every backend (the GPU kernels take frequencies as f32
 * words; a NaN there against the CPU's finite value was the alternative); a frequency
 * below FLT_MIN is a valid table (sin 0, cos 1 within the bound on every backend). */
static void test_out_of_range_freqs(void **state)
{
    (void)state;
    int32_t pos[2] = {0, 3};
    posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
    posenc_buffer *db = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, 2 * 4 * 4, &db), POSENC_OK);
    const float sentinel[8] = {7, 7, 7, 7, 7, 7, 7, 7};
    assert_int_equal(posenc_buffer_write(db, 0, sentinel, sizeof(sentinel)), POSENC_OK);
    posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, 4, 2, 1, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 2, 1, 1, 1);
    struct posenc_sinusoidal_params big = {.base = 1e-20f, .freq_shift = 1.5f};
    assert_int_equal(posenc_sinusoidal(th.dut, NULL, &pt, &dt, &big),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "f32 range"));
    float *v = th_download(db);
    assert_memory_equal(v, sentinel, sizeof(sentinel)); /* untouched */
    free(v);
    /* tiny: w_1 = (3e38)^-1 = 3.3e-39 (an f32 denormal) */
    struct posenc_sinusoidal_params tiny = {.base = 3e38f, .freq_shift = 1.0f,
                                            .layout = POSENC_SIN_HALF_SPLIT};
    assert_int_equal(posenc_sinusoidal(th.dut, NULL, &pt, &dt, &tiny), POSENC_OK);
    v = th_download(db);
    double w[2];
    assert_int_equal(posenc_sinusoidal_freqs(4, &tiny, w), POSENC_OK);
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 2; i++) {
            const double a = pos[t] * w[i];
            assert_true(fabs(v[t * 4 + i] - sin(a)) <= pc_bound_sincos_f32(a, 0.0));
            assert_true(fabs(v[t * 4 + 2 + i] - cos(a)) <= pc_bound_sincos_f32(a, 0.0));
        }
    free(v);
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&pb);
    th_check_warnings();
}

/* The fairseq / diffusers frequency convention: w_i = base^(-i/(d/2-1)), so the last
 * frequency is exactly 1/base; checked through the frequency table and the op. */
static void test_freq_shift(void **state)
{
    (void)state;
    enum { D = 16 };
    struct posenc_sinusoidal_params p = {.freq_shift = 1.0f, .layout = POSENC_SIN_HALF_SPLIT};
    double w[D / 2];
    assert_int_equal(posenc_sinusoidal_freqs(D, &p, w), POSENC_OK);
    for (int i = 0; i < D / 2; i++)
        assert_true(fabs(w[i] - pow(10000.0, -(double)i / (D / 2 - 1))) <= 1e-15);
    int32_t pos = 1000;
    float *v = encode(D, &pos, 1, &p);
    for (int i = 0; i < D / 2; i++) {
        double a = 1000.0 * pow(10000.0, -(double)i / (D / 2 - 1));
        assert_true(fabs(v[i] - sin(a)) <= pc_bound_sincos_f32(a, 0.0));
        assert_true(fabs(v[D / 2 + i] - cos(a)) <= pc_bound_sincos_f32(a, 0.0));
    }
    free(v);
}

/* ---- properties ------------------------------------------------------------------------ */

/* Every value lies in [-1, 1], for float positions anywhere up to 1e6. */
static void test_range(void **state)
{
    (void)state;
    enum { D = 64, N = 257 };
    float pos[N];
    uint64_t rng = 7;
    for (int i = 0; i < N; i++)
        pos[i] = (float)(pc_rand_uniform(&rng) * 1e6);
    posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
    posenc_buffer *db = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, D * N * 4, &db), POSENC_OK);
    posenc_tensor dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, N, 1, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_F32, N, 1, 1, 1);
    assert_int_equal(posenc_sinusoidal(th.dut, NULL, &pt, &dst, NULL), POSENC_OK);
    float *v = th_download(db);
    for (int i = 0; i < D * N; i++)
        if (!(v[i] >= -1.0f && v[i] <= 1.0f))
            fail_msg("element %d = %.9g is outside [-1, 1]", i, v[i]);
    free(v);
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&pb);
    th_check_warnings();
}

/* PE(pos+k) = R(k*w_i) PE(pos) for each pair: [s'; c'] = [[cos b, sin b], [-sin b, cos b]]
 * [s; c] with b = k*w_i. The map depends on k only, not on pos. */
static void test_shift_is_rotation(void **state)
{
    (void)state;
    enum { D = 32, N = 6 };
    const int32_t k = 17;
    int32_t pos[N] = {0, 3, 10, 100, 250, 999};
    int32_t pos_k[N];
    for (int i = 0; i < N; i++)
        pos_k[i] = pos[i] + k;
    float *a = encode(D, pos, N, NULL);
    float *b = encode(D, pos_k, N, NULL);
    double w[D / 2];
    assert_int_equal(posenc_sinusoidal_freqs(D, NULL, w), POSENC_OK);
    for (int t = 0; t < N; t++)
        for (int i = 0; i < D / 2; i++) {
            double ang = k * w[i];
            double s = a[t * D + 2 * i], c = a[t * D + 2 * i + 1];
            double s2 = cos(ang) * s + sin(ang) * c;
            double c2 = -sin(ang) * s + cos(ang) * c;
            /* each input value is within B(pos*w) of exact, the rotation adds the two
             * errors (|cos b| + |sin b| <= sqrt 2 < 2), the shifted encoding is within
             * B((pos+k)*w) */
            double bound = 2.0 * pc_bound_sincos_f32(pos[t] * w[i], 0.0) +
                           pc_bound_sincos_f32(pos_k[t] * w[i], 0.0) + 1e-12;
            double e1 = fabs(b[t * D + 2 * i] - s2), e2 = fabs(b[t * D + 2 * i + 1] - c2);
            if (e1 > bound || e2 > bound)
                fail_msg("pos %d pair %d: rotation error %.3g / %.3g > %.3g", pos[t], i, e1, e2,
                         bound);
        }
    free(a);
    free(b);
}

/* ---- bad input ------------------------------------------------------------------------- */

enum { BD = 8, BT = 5 };
struct bad_env {
    posenc_buffer *db, *pb, *xb;
    posenc_tensor dst, pos, x;
};

static void bad_setup(struct bad_env *e)
{
    memset(e, 0, sizeof(*e));
    unsigned char poison[BD * BT * 4 + 64];
    memset(poison, 0xA5, sizeof(poison));
    int32_t pos[BT] = {0, 1, 2, 3, 4};
    float x[BD * BT];
    for (int i = 0; i < BD * BT; i++)
        x[i] = (float)i;
    e->db = th_upload(th.dut, poison, sizeof(poison));
    e->pb = th_upload(th.dut, pos, sizeof(pos));
    e->xb = th_upload(th.dut, x, sizeof(x));
    e->dst = posenc_tensor_contiguous(e->db, 0, POSENC_DTYPE_F32, BD, BT, 1, 1);
    e->pos = posenc_tensor_contiguous(e->pb, 0, POSENC_DTYPE_I32, BT, 1, 1, 1);
    e->x = posenc_tensor_contiguous(e->xb, 0, POSENC_DTYPE_F32, BD, BT, 1, 1);
}

static void bad_teardown(struct bad_env *e)
{
    /* the output buffer is untouched: still all poison */
    th_expect_untouched(e->db, 0xA5, "dst");
    posenc_buffer_destroy(&e->db);
    posenc_buffer_destroy(&e->pb);
    posenc_buffer_destroy(&e->xb);
}

static void test_bad_input(void **state)
{
    (void)state;
    struct bad_env e;
    bad_setup(&e);
    const posenc_status INV = POSENC_ERR_INVALID_ARGUMENT;
    posenc_tensor t;

    assert_int_equal(posenc_sinusoidal(NULL, NULL, &e.pos, &e.dst, NULL), INV);
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, NULL, NULL), INV, "dst", "dst NULL");
    th_expect(posenc_sinusoidal(th.dut, NULL, NULL, &e.dst, NULL), INV, "pos", "pos NULL");

    t = e.dst;
    t.buffer = NULL;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "dst->buffer", "no buffer");
    t = e.dst;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "dst->dtype", "i32 dst");
    t = e.dst;
    t.dtype = (posenc_dtype)9;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "dst->dtype", "dtype 9");
    t = e.pos;
    t.dtype = POSENC_DTYPE_F16;
    th_expect(posenc_sinusoidal(th.dut, NULL, &t, &e.dst, NULL), INV, "pos->dtype", "f16 pos");

    t = posenc_tensor_contiguous(e.db, 0, POSENC_DTYPE_F32, 7, BT, 1, 1); /* odd d */
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "d = 7", "odd d");
    t = e.pos;
    t.ne[0] = BT - 1;
    th_expect(posenc_sinusoidal(th.dut, NULL, &t, &e.dst, NULL), INV, "pos->ne", "pos too short");
    /* [2, 2] positions for dst [8, 5, 1, 1] */
    t = posenc_tensor_contiguous(e.pb, 0, POSENC_DTYPE_I32, 2, 2, 1, 1);
    th_expect(posenc_sinusoidal(th.dut, NULL, &t, &e.dst, NULL), INV, "pos->ne", "pos shape");
    t = e.x;
    t.ne[0] = 4;
    th_expect(posenc_sinusoidal(th.dut, &t, &e.pos, &e.dst, NULL), INV, "x->ne", "x shape");

    t = e.dst;
    t.ne[1] = BT + 100;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "dst runs past", "past end");
    t = e.dst;
    t.nb[1] = -32;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "dst->nb[1]", "negative nb");
    t = e.dst;
    t.offset = 2;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "dst->offset", "unaligned");
    t = e.dst;
    t.nb[1] = 6;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "dst->nb[1]", "nb not mult");
    t = e.dst;
    t.nb[1] = 4; /* rows overlap each other */
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "overlap", "self overlap");
    t = e.dst;
    t.ne[2] = INT64_MAX / 2;
    t.ne[3] = 4;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "overflows", "overflow");
    t = e.dst;
    t.ne[1] = -1;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &t, NULL), INV, "dst->ne[1]", "negative ne");

    /* x partially overlapping dst (shifted by one row) */
    t = e.dst;
    t.offset = 0;
    posenc_tensor half_dst = posenc_tensor_contiguous(e.db, 0, POSENC_DTYPE_F32, BD, 2, 1, 1);
    posenc_tensor half_x = posenc_tensor_contiguous(e.db, BD * 4, POSENC_DTYPE_F32, BD, 2, 1, 1);
    posenc_tensor pos2 = posenc_tensor_contiguous(e.pb, 0, POSENC_DTYPE_I32, 2, 1, 1, 1);
    th_expect(posenc_sinusoidal(th.dut, &half_x, &pos2, &half_dst, NULL), INV, "overlaps",
              "partial overlap");
    /* positions inside the output */
    posenc_tensor pos_in_dst = posenc_tensor_contiguous(e.db, 0, POSENC_DTYPE_I32, BT, 1, 1, 1);
    th_expect(posenc_sinusoidal(th.dut, NULL, &pos_in_dst, &e.dst, NULL), INV, "pos overlaps",
              "pos in dst");

    /* params */
    struct posenc_sinusoidal_params p;
    memset(&p, 0, sizeof(p));
    p.base = NAN;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &e.dst, &p), INV, "base", "NaN base");
    p.base = -2.0f;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &e.dst, &p), INV, "base", "negative base");
    p.base = INFINITY;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &e.dst, &p), INV, "base", "inf base");
    memset(&p, 0, sizeof(p));
    p.x_scale = INFINITY;
    th_expect(posenc_sinusoidal(th.dut, &e.x, &e.pos, &e.dst, &p), INV, "x_scale", "inf scale");
    memset(&p, 0, sizeof(p));
    p.freq_shift = 4.0f; /* d/2 = 4 */
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &e.dst, &p), INV, "freq_shift", "shift");
    memset(&p, 0, sizeof(p));
    p.layout = (posenc_sin_layout)7;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &e.dst, &p), INV, "layout", "layout 7");
    memset(&p, 0, sizeof(p));
    p.reserved[2] = 1;
    th_expect(posenc_sinusoidal(th.dut, NULL, &e.pos, &e.dst, &p), INV, "reserved", "reserved");

    /* a buffer of another context */
    posenc_context *other = NULL;
    struct posenc_context_params cp = {.backend = POSENC_BACKEND_CPU};
    assert_int_equal(posenc_context_create(&cp, &other, NULL, 0), POSENC_OK);
    posenc_buffer *ob = NULL;
    assert_int_equal(posenc_buffer_create(other, 64, &ob), POSENC_OK);
    t = posenc_tensor_contiguous(ob, 0, POSENC_DTYPE_I32, BT, 1, 1, 1);
    if (th.kind == POSENC_BACKEND_CPU) /* the ref is CPU too; still another context */
        th_expect(posenc_sinusoidal(th.dut, NULL, &t, &e.dst, NULL), INV, "another context",
                  "foreign buffer");
    else
        th_expect(posenc_sinusoidal(th.dut, NULL, &t, &e.dst, NULL), INV, "another context",
                  "foreign buffer");
    posenc_buffer_destroy(&ob);
    posenc_context_destroy(&other);

    /* empty tensors are a valid no-op that writes nothing */
    t = e.dst;
    t.ne[1] = 0;
    posenc_tensor pos0 = e.pos;
    pos0.ne[0] = 0;
    th_expect(posenc_sinusoidal(th.dut, NULL, &pos0, &t, NULL), POSENC_OK, NULL, "empty");
    assert_string_equal(posenc_context_last_error(th.dut), "");

    bad_teardown(&e);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "sinusoidal");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_seed_d6_pos2),
        cmocka_unit_test(test_seed_d4_pos0_add),
        cmocka_unit_test(test_independent_double),
        cmocka_unit_test(test_large_f32_positions),
        cmocka_unit_test(test_out_of_range_freqs),
        cmocka_unit_test(test_freq_shift),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_shift_is_rotation),
        cmocka_unit_test(test_bad_input),
    };
    static const enum pc_op ops[] = {PC_OP_SINUSOIDAL};
    rc = th_run_with_cases("sinusoidal", fixed, sizeof(fixed) / sizeof(fixed[0]), ops,
                           sizeof(ops) / sizeof(ops[0]));
    th_fini();
    return rc;
}
