/*
 * test_rope.c - posenc_rope, posenc_rope_qk and posenc_rope_rerotate on one backend
 * (--backend NAME).
 *
 *  - every shared RoPE case (src/check/check_rope.c) against the CPU reference;
 *  - ggml's CPU semantics, re-implemented here independently in double from ggml's
 *    algorithm (theta recurrence, YaRN ramp, M-RoPE sectors), through
 *    posenc_rope_params_from_ggml, for modes 0, 2, 8, 24, 40 and a YaRN node;
 *  - the accuracy contract at positions up to 2^24, against double (test_large_positions);
 *  - properties on this backend: norms kept (times mscale), q.k depends only on the
 *    position offset, backward(forward(x)) = mscale^2 x, re-rotation = rotating afresh;
 *  - bad input: exact statuses, a message naming the argument, output untouched.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- helpers ---------------------------------------------------------------------------- */

/* Rotate host x [d, h, t, 1] f32 with int positions pos [t, streams] on the dut. */
static float *rope_dut(const float *x, int64_t d, int64_t h, int64_t t, const int32_t *pos,
                       int64_t streams, const struct posenc_rope_params *p)
{
    size_t n = (size_t)(d * h * t);
    posenc_buffer *xb = th_upload(th.dut, x, n * 4);
    posenc_buffer *pb = th_upload(th.dut, pos, (size_t)(t * streams) * 4);
    posenc_buffer *db = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, n * 4, &db), POSENC_OK);
    posenc_tensor xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, d, h, t, 1);
    posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, d, h, t, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, t, streams, 1, 1);
    posenc_status st = posenc_rope(th.dut, &xt, &pt, &dt, p);
    if (st != POSENC_OK)
        fail_msg("posenc_rope: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(th.dut));
    float *out = th_download(db);
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&db);
    th_check_warnings();
    return out;
}

static float *random_floats(size_t n, uint64_t seed)
{
    float *v = malloc(n * sizeof(float));
    assert_non_null(v);
    th_fill_unit(v, n, &seed);
    return v;
}

/* ---- ggml's CPU semantics, independently, in double --------------------------------------- */

static double ggml_corr_dim(int n_dims, int n_ctx_orig, double n_rot, double base)
{
    return n_dims * log(n_ctx_orig / (n_rot * 2 * M_PI)) / (2 * log(base));
}

/* y = rope of one head [ne0] of ggml's op at positions p[4] (the token's streams). */
static void ggml_rope_head(const float *x, double *y, int ne0, int n_dims, int mode,
                           int n_ctx_orig, double base, double freq_scale, double ext_factor,
                           double attn_factor, double beta_fast, double beta_slow,
                           const int sections[4], const double p[4])
{
    double corr[2] = {0, 0};
    corr[0] = fmax(0.0, floor(ggml_corr_dim(n_dims, n_ctx_orig, beta_fast, base)));
    corr[1] = fmin(n_dims - 1.0, ceil(ggml_corr_dim(n_dims, n_ctx_orig, beta_slow, base)));
    const double theta_scale = pow(base, -2.0 / n_dims);
    const bool is_mrope = mode == 8 || mode == 40 || mode == 24;
    const bool is_vision = mode == 24;
    int sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
    int n_pairs_cache = is_vision ? n_dims : n_dims / 2; /* ggml: i0 < ne0 for vision */
    double theta_t = p[0], theta_h = p[1], theta_w = p[2], theta_e = p[3];
    double *cs = malloc(sizeof(double) * 2 * (size_t)n_pairs_cache);
    assert_non_null(cs);
    for (int i = 0; i < n_pairs_cache; i++) {
        int i0 = 2 * i;
        double theta = theta_t;
        if (is_mrope) {
            int sector = i % sect_dims;
            if (is_vision) {
                if (sector == 0)
                    theta_t = p[0];
                else if (sector == sections[0])
                    theta_h = p[1];
                theta = sector < sections[0] ? theta_t : theta_h;
            } else if (mode == 40) {
                if (sector % 3 == 1 && sector < 3 * sections[1])
                    theta = theta_h;
                else if (sector % 3 == 2 && sector < 3 * sections[2])
                    theta = theta_w;
                else if (sector % 3 == 0 && sector < 3 * sections[0])
                    theta = theta_t;
                else
                    theta = theta_e;
            } else {
                if (sector >= sections[0] && sector < sections[0] + sections[1])
                    theta = theta_h;
                else if (sector >= sections[0] + sections[1] &&
                         sector < sections[0] + sections[1] + sections[2])
                    theta = theta_w;
                else if (sector >= sections[0] + sections[1] + sections[2])
                    theta = theta_e;
            }
        }
        /* rope_yarn */
        double theta_interp = freq_scale * theta, ang = theta_interp, ms = attn_factor;
        if (ext_factor != 0.0) {
            double yy = (i0 / 2 - corr[0]) / fmax(0.001, corr[1] - corr[0]);
            double ramp = (1.0 - fmin(1.0, fmax(0.0, yy))) * ext_factor;
            ang = theta_interp * (1 - ramp) + theta * ramp;
            ms *= 1.0 + 0.1 * log(1.0 / freq_scale);
        }
        cs[2 * i] = cos(ang) * ms;
        cs[2 * i + 1] = sin(ang) * ms;
        theta_t *= theta_scale;
        theta_h *= theta_scale;
        theta_w *= theta_scale;
        theta_e *= theta_scale;
    }
    for (int i = 0; i < ne0; i++)
        y[i] = x[i];
    int n_rot_pairs = is_vision ? n_dims : n_dims / 2, off = is_vision ? n_dims : n_dims / 2;
    for (int i = 0; i < n_rot_pairs; i++) {
        int a = mode == 0 ? 2 * i : i, b = mode == 0 ? 2 * i + 1 : i + off;
        double c = cs[2 * i], s = cs[2 * i + 1];
        y[a] = x[a] * c - x[b] * s;
        y[b] = x[a] * s + x[b] * c;
    }
    free(cs);
}

static void put_f(int32_t *w, float f)
{
    memcpy(w, &f, 4);
}

static void check_ggml_node(int mode, int ne0, int n_dims, const int sections[4],
                            double freq_scale, double ext_factor, double attn_factor,
                            int n_ctx_orig, double base)
{
    enum { H = 3, T = 5 };
    int32_t op[15] = {0, n_dims, mode, 0, n_ctx_orig};
    put_f(&op[5], (float)base);
    put_f(&op[6], (float)freq_scale);
    put_f(&op[7], (float)ext_factor);
    put_f(&op[8], (float)attn_factor);
    put_f(&op[9], 32.0f);
    put_f(&op[10], 1.0f);
    for (int i = 0; i < 4; i++)
        op[11 + i] = sections[i];
    struct posenc_rope_params p;
    posenc_status st = posenc_rope_params_from_ggml(op, 15, ne0, NULL, &p);
    if (st != POSENC_OK)
        fail_msg("posenc_rope_params_from_ggml(mode %d): %s", mode, posenc_status_string(st));
    int32_t pos[4 * T];
    uint64_t rng = 31 + (uint64_t)mode;
    for (int i = 0; i < 4 * T; i++)
        pos[i] = (int32_t)(pc_rand_uniform(&rng) * 3000);
    int streams = (mode == 8 || mode == 40 || mode == 24) ? 4 : 1;
    float *x = random_floats((size_t)(ne0 * H * T), 77 + (uint64_t)mode);
    float *y = rope_dut(x, ne0, H, T, pos, streams, &p);
    double *want = malloc(sizeof(double) * (size_t)ne0);
    assert_non_null(want);
    for (int t = 0; t < T; t++) {
        double pp[4] = {pos[t], pos[T + t], pos[2 * T + t], pos[3 * T + t]};
        if (streams == 1)
            pp[1] = pp[2] = pp[3] = pp[0];
        for (int h = 0; h < H; h++) {
            const float *xh = x + (t * H + h) * ne0;
            /* ggml's op params are f32: the same rounded values on both sides (the
             * difference was inside the old bound's 2 ulp of the f32 angle) */
            ggml_rope_head(xh, want, ne0, n_dims, mode, n_ctx_orig, (float)base,
                           (float)freq_scale, (float)ext_factor, (float)attn_factor, 32.0, 1.0,
                           sections, pp);
            for (int i = 0; i < ne0; i++) {
                /* the contract's bound (pc_bound_rope_f32: the same at every position),
                 * with |xa|+|xb| <= 2 and the magnitude up to 1.2; plus, for the scaled
                 * nodes, the tables' own difference: posenc_rope_params_from_ggml carries
                 * freq_scale as the f32 factor 1/freq_scale, so posenc's w differ from
                 * freq_scale * theta by up to ~2^-24 relative: 2 ulp32 of the angles
                 * (< 3000 * 1.5) cover it. Not the angle formation, held to the contract. */
                const bool scaled = freq_scale != 1.0 || ext_factor != 0.0;
                double bound = pc_bound_rope_f32(
                    pc_angle_err32(4500.0) + (scaled ? 2.0 * pc_ulp32(4500.0) : 0.0), 1.2, 2.0);
                double e = fabs(y[(t * H + h) * ne0 + i] - want[i]);
                if (e > bound)
                    fail_msg("ggml mode %d token %d head %d dim %d: got %.9g, ggml %.9g (err "
                             "%.3g > %.3g)",
                             mode, t, h, i, y[(t * H + h) * ne0 + i], want[i], e, bound);
            }
        }
    }
    free(want);
    free(x);
    free(y);
}

static void test_ggml_modes(void **state)
{
    (void)state;
    const int none[4] = {0, 0, 0, 0};
    const int qwen2vl[4] = {16, 24, 24, 0};
    const int qwen3vl[4] = {24, 20, 20, 0};
    const int vit[4] = {20, 20, 20, 20}; /* ggml's clip: d_head/4 each; vision uses two */
    check_ggml_node(0, 128, 128, none, 1.0, 0.0, 1.0, 0, 10000.0);      /* llama */
    check_ggml_node(0, 80, 32, none, 1.0, 0.0, 1.0, 0, 10000.0);        /* partial NORMAL */
    check_ggml_node(2, 64, 64, none, 1.0, 0.0, 1.0, 0, 10000.0);        /* falcon */
    check_ggml_node(2, 80, 32, none, 0.25, 0.0, 1.0, 0, 10000.0);       /* phi-2, linear */
    check_ggml_node(8, 128, 128, qwen2vl, 1.0, 0.0, 1.0, 0, 1000000.0); /* M-RoPE */
    check_ggml_node(40, 128, 128, qwen3vl, 1.0, 0.0, 1.0, 0, 5000000.0); /* IMROPE */
    check_ggml_node(24, 80, 40, vit, 1.0, 0.0, 1.0, 0, 10000.0);        /* VISION */
    check_ggml_node(2, 128, 128, none, 0.25, 1.0, 1.0, 4096, 10000.0);  /* YaRN node */
    check_ggml_node(0, 64, 64, none, 0.125, 0.5, 0.9, 2048, 500000.0);  /* partial ramp */
    /* test-backend-ops' scaled nodes: ext_factor with n_ctx_orig 0 (ggml's degenerate
     * correction dims [0, -inf]) */
    check_ggml_node(0, 128, 128, none, 1.4245, 0.7465, 1.4245, 0, 10000.0);
    check_ggml_node(2, 80, 32, none, 1.4245, 0.7465, 1.0, 0, 10000.0);
}

/* ---- the context's cache of resolved tables (src/rope_freq.c) ---------------------------- */

/*
 * The accuracy contract at large positions, against double on this backend: RoPE f32
 * [128, 32, T] (NORMAL, NEOX, and NEOX with YaRN: a scaled table with mscale != 1) at
 * positions up to 2^24 - 1 (1e5, 1e6, 2^23, 2^24 - 1 and random ones), every element
 * within pc_bound_rope_f32(0, mscale, |xa| + |xb|) of mscale*(xa cos(p w) - xb sin(p w))
 * computed here in double from posenc_rope_freqs' table. That bound is the same at every
 * position (check.c: 4 * 2^-24 for the angle and sin/cos, measured at most 2.5 * 2^-24 up
 * to 2^24, plus the rotation's roundings, all times mscale*(|xa| + |xb|)); before the
 * angles were formed from two-word frequencies the GPU backends were off by 8e-3 at 1e5
 * and 1.2 at 2^24.
 */
static void test_large_positions(void **state)
{
    (void)state;
    enum { D = 128, H = 32, T = 48 };
    float *x = random_floats((size_t)D * H * T, 77);
    int32_t pos[T];
    const int32_t fixed[] = {0, 1, 99999, 100000, 999999, 1000000, 8388607, 8388608,
                             16777213, 16777214, 16777215, 12345678};
    uint64_t rng = 4242;
    for (int t = 0; t < T; t++)
        pos[t] = t < (int)(sizeof(fixed) / sizeof(fixed[0]))
                     ? fixed[t]
                     : (int32_t)floor(pc_rand_uniform(&rng) * 16777216.0);
    for (int v = 0; v < 3; v++) {
        struct posenc_rope_params p;
        memset(&p, 0, sizeof(p));
        p.mode = v == 0 ? POSENC_ROPE_NORMAL : POSENC_ROPE_NEOX;
        if (v == 2) {
            p.scaling.kind = POSENC_ROPE_SCALING_YARN;
            p.scaling.factor = 4.0f;
            p.scaling.original_ctx = 4096;
        }
        double w[D / 2];
        struct posenc_rope_info info;
        assert_int_equal(posenc_rope_freqs(D, &p, w, NULL, &info), POSENC_OK);
        const double m = info.mscale;
        float *y = rope_dut(x, D, H, T, pos, 1, &p);
        double worst = 0.0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D / 2; j++) {
                const double a = (double)pos[t] * w[j];
                const double c = cos(a), sn = sin(a);
                const int ia = v == 0 ? 2 * j : j, ib = v == 0 ? 2 * j + 1 : j + D / 2;
                for (int h = 0; h < H; h++) {
                    const float *xh = x + ((size_t)t * H + h) * D, *yh = y + ((size_t)t * H + h) * D;
                    const double ya = m * (xh[ia] * c - xh[ib] * sn);
                    const double yb = m * (xh[ia] * sn + xh[ib] * c);
                    const double b = pc_bound_rope_f32(0.0, m, fabs(xh[ia]) + fabs(xh[ib]));
                    const double e = fmax(fabs(yh[ia] - ya), fabs(yh[ib] - yb));
                    if (e / b > worst)
                        worst = e / b;
                    if (!(e <= b))
                        fail_msg("variant %d pos %d pair %d head %d: got (%.9g, %.9g), double "
                                 "(%.9g, %.9g), err %.3g > bound %.3g",
                                 v, pos[t], j, h, yh[ia], yh[ib], ya, yb, e, b);
                }
            }
        print_message("large positions, variant %d: worst err / bound = %.3f\n", v, worst);
        free(y);
    }
    free(x);
}

/* Out-of-range pair frequencies: a freq factor of 1e-44 makes w_0 = 1e44, past f32:
 * INVALID_ARGUMENT up front on every backend, dst untouched (the GPU kernels take the
 * frequencies as f32 words; they used to give NaN where the CPU gave finite values). User
 * frequencies below FLT_MIN (1e-40, an f32 denormal) are a valid table: sin 0, cos 1
 * within the contract's bound on every backend. */
static void test_out_of_range_freqs(void **state)
{
    (void)state;
    enum { D = 16, H = 2, T = 3 };
    float ff[D / 2], fr[D / 2];
    for (int j = 0; j < D / 2; j++) {
        ff[j] = 1.0f;
        fr[j] = j == 3 ? 1e-40f : 0.5f / (float)(j + 1);
    }
    ff[0] = 1e-44f;
    float *x = random_floats((size_t)D * H * T, 5);
    int32_t pos[T] = {0, 7, 16777215};
    posenc_buffer *xb = th_upload(th.dut, x, sizeof(float) * D * H * T);
    posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
    posenc_buffer *db = th_upload(th.dut, x, sizeof(float) * D * H * T);
    posenc_tensor xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    struct posenc_rope_params p;
    memset(&p, 0, sizeof(p));
    p.freq_factors = ff;
    assert_int_equal(posenc_rope(th.dut, &xt, &pt, &dt, &p), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "f32 range"));
    float *y = th_download(db);
    assert_memory_equal(y, x, sizeof(float) * D * H * T);
    free(y);
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_NEOX;
    p.freqs = fr;
    free(rope_dut(x, D, H, T, pos, 1, &p)); /* warm: the same call as below */
    y = rope_dut(x, D, H, T, pos, 1, &p);
    double w[D / 2];
    struct posenc_rope_info info;
    assert_int_equal(posenc_rope_freqs(D, &p, w, NULL, &info), POSENC_OK);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < D / 2; j++) {
                const float *xh = x + (t * H + h) * D, *yh = y + (t * H + h) * D;
                const double a = pos[t] * w[j];
                const double ya = info.mscale * (xh[j] * cos(a) - xh[j + D / 2] * sin(a));
                const double b = pc_bound_rope_f32(pc_angle_err32(a), info.mscale,
                                                   fabs(xh[j]) + fabs(xh[j + D / 2]));
                if (!(fabs(yh[j] - ya) <= b))
                    fail_msg("pos %d pair %d: %.9g, double %.9g", pos[t], j, yh[j], ya);
            }
    free(y);
    free(x);
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&db);
    th_check_warnings();
}

static int same_floats(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Calls on one context with params that differ only in a scalar field, only in the
 * contents behind a pointer (the same pointer), and more distinct params than the cache
 * holds: every result is the one a fresh resolution gives. */
static void test_table_cache(void **state)
{
    (void)state;
    enum { D = 64, H = 2, T = 3, NP = D / 2 };
    const size_t n = (size_t)(D * H * T);
    const int32_t pos[T] = {5, 900, 77};
    float *x = random_floats(n, 4242);
    struct posenc_rope_params p;
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_NEOX;

    /* a scalar field: base A, base B, base A again */
    p.freq_base = 10000.0f;
    float *ya = rope_dut(x, D, H, T, pos, 1, &p);
    p.freq_base = 500000.0f;
    float *yb = rope_dut(x, D, H, T, pos, 1, &p);
    p.freq_base = 10000.0f;
    float *yc = rope_dut(x, D, H, T, pos, 1, &p);
    assert_true(same_floats(ya, yc, n));
    assert_false(same_floats(ya, yb, n));

    /* more distinct params than cache entries, then the first again */
    for (int k = 0; k < 7; k++) {
        p.freq_base = 1000.0f * (float)(k + 2);
        free(rope_dut(x, D, H, T, pos, 1, &p));
    }
    p.freq_base = 10000.0f;
    float *yd = rope_dut(x, D, H, T, pos, 1, &p);
    assert_true(same_floats(ya, yd, n));

    /* the same freq_factors pointer with new contents: not a cached table */
    float ff[NP], ff2[NP];
    for (int j = 0; j < NP; j++)
        ff[j] = 1.0f;
    p.freq_factors = ff;
    float *y1 = rope_dut(x, D, H, T, pos, 1, &p);
    assert_true(same_floats(ya, y1, n));
    for (int j = 0; j < NP; j++)
        ff[j] = ff2[j] = 2.0f + (float)j;
    float *y2 = rope_dut(x, D, H, T, pos, 1, &p);
    p.freq_factors = ff2;
    float *y3 = rope_dut(x, D, H, T, pos, 1, &p);
    assert_true(same_floats(y2, y3, n));
    assert_false(same_floats(y1, y2, n));
    free(x);
    free(ya);
    free(yb);
    free(yc);
    free(yd);
    free(y1);
    free(y2);
    free(y3);
}

/* freq_factors as a device tensor (ggml's src[2]): the same table, hence the same bits, as
 * the same factors from host memory; a read-back kept across calls must follow every write
 * posenc makes to the buffer (posenc_buffer_write, an op writing a view of it). */
static void test_freq_factors_tensor(void **state)
{
    (void)state;
    enum { D = 64, H = 2, T = 3, NP = D / 2, STRIDE = 2 };
    const size_t n = (size_t)(D * H * T);
    const int32_t pos[T] = {5, 900, 77};
    float *x = random_floats(n, 777);
    float ff[3][NP * STRIDE];
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < NP * STRIDE; j++)
            ff[k][j] = 0.9f + 0.01f * (float)((j * 7 + k * 13) % 21); /* [0.9, 1.1] */
    struct posenc_rope_params host;
    memset(&host, 0, sizeof(host));
    host.mode = POSENC_ROPE_NEOX;
    float want[3][NP];
    float *y_host[3];
    for (int k = 0; k < 3; k++) {
        for (int j = 0; j < NP; j++)
            want[k][j] = ff[k][j * STRIDE];
        host.freq_factors = want[k];
        y_host[k] = rope_dut(x, D, H, T, pos, 1, &host);
    }
    assert_false(same_floats(y_host[0], y_host[1], n));

    /* every other float of a buffer: a strided view, as a slice of a larger tensor is */
    posenc_buffer *fb = th_upload(th.dut, ff[0], sizeof(ff[0]));
    posenc_tensor ft = posenc_tensor_contiguous(fb, 0, POSENC_DTYPE_F32, NP, 1, 1, 1);
    ft.nb[0] = STRIDE * 4;
    struct posenc_rope_params dev;
    memset(&dev, 0, sizeof(dev));
    dev.mode = POSENC_ROPE_NEOX;
    dev.freq_factors_tensor = &ft;
    for (int rep = 0; rep < 2; rep++) { /* the second call reads the kept values */
        float *y = rope_dut(x, D, H, T, pos, 1, &dev);
        assert_true(same_floats(y, y_host[0], n));
        free(y);
    }
    /* written by posenc_buffer_write: the new values */
    assert_int_equal(posenc_buffer_write(fb, 0, ff[1], sizeof(ff[1])), POSENC_OK);
    float *y1 = rope_dut(x, D, H, T, pos, 1, &dev);
    assert_true(same_floats(y1, y_host[1], n));
    /* written by an op (a copy into the view): the new values again */
    posenc_buffer *src = th_upload(th.dut, want[2], sizeof(want[2]));
    posenc_tensor st = posenc_tensor_contiguous(src, 0, POSENC_DTYPE_F32, NP, 1, 1, 1);
    assert_int_equal(posenc_copy(th.dut, &st, &ft), POSENC_OK);
    float *y2 = rope_dut(x, D, H, T, pos, 1, &dev);
    assert_true(same_floats(y2, y_host[2], n));

    /* bad input: named, and nothing run */
    posenc_tensor bad = ft;
    bad.dtype = POSENC_DTYPE_I32;
    size_t na = (size_t)(D * H * T);
    posenc_buffer *xb = th_upload(th.dut, x, na * 4);
    posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
    posenc_tensor xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    dev.freq_factors_tensor = &bad;
    assert_int_equal(posenc_rope(th.dut, &xt, &pt, &xt, &dev), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "freq_factors_tensor->dtype"));
    bad = ft;
    bad.ne[0] = NP - 1;
    assert_int_equal(posenc_rope(th.dut, &xt, &pt, &xt, &dev), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "freq_factors_tensor->ne[0]"));
    dev.freq_factors_tensor = &ft;
    dev.freq_factors = want[0];
    assert_int_equal(posenc_rope(th.dut, &xt, &pt, &xt, &dev), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "freq_factors_tensor must be NULL"));
    dev.freq_factors = NULL;
    double f[NP];
    assert_int_equal(posenc_rope_freqs(D, &dev, f, NULL, NULL), POSENC_ERR_INVALID_ARGUMENT);
    float *xa = th_download(xb); /* untouched by the refused calls */
    assert_true(same_floats(xa, x, na));
    free(xa);
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&src);
    posenc_buffer_destroy(&fb);
    th_check_warnings();
    for (int k = 0; k < 3; k++)
        free(y_host[k]);
    free(y1);
    free(y2);
    free(x);
}

/* ---- properties -------------------------------------------------------------------------- */

/* |(y_a, y_b)| = mscale |(x_a, x_b)| for every pair, NEOX with YaRN (mscale != 1). */
static void test_norm_preserved(void **state)
{
    (void)state;
    enum { D = 64, H = 4, T = 9 };
    struct posenc_rope_params p = {.mode = POSENC_ROPE_NEOX};
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.factor = 8.0f;
    p.scaling.original_ctx = 2048;
    struct posenc_rope_info info;
    assert_int_equal(posenc_rope_freqs(D, &p, NULL, NULL, &info), POSENC_OK);
    assert_true(info.mscale > 1.2); /* 0.1 ln 8 + 1 = 1.2079 */
    int32_t pos[T];
    for (int t = 0; t < T; t++)
        pos[t] = t * 977;
    float *x = random_floats(D * H * T, 5);
    float *y = rope_dut(x, D, H, T, pos, 1, &p);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < D / 2; j++) {
                const float *xh = x + (t * H + h) * D, *yh = y + (t * H + h) * D;
                double nx = hypot(xh[j], xh[j + D / 2]), ny = hypot(yh[j], yh[j + D / 2]);
                /* each of y_a, y_b is within B of exact, so the pair's norm is within
                 * sqrt(2) B of mscale*|x| */
                double b = sqrt(2.0) * pc_bound_rope_f32(pc_angle_err32(pos[t] * 1.0), info.mscale,
                                                         fabs(xh[j]) + fabs(xh[j + D / 2]));
                if (fabs(ny - info.mscale * nx) > b)
                    fail_msg("token %d head %d pair %d: |y| = %.9g, mscale*|x| = %.9g", t, h, j,
                             ny, info.mscale * nx);
            }
    free(x);
    free(y);
}

/* q(p)·k(p') = q(p+s)·k(p'+s): the score depends on p - p' only. */
static void test_relative(void **state)
{
    (void)state;
    enum { D = 128 };
    const int32_t shifts[] = {0, 1, 500, 30000};
    for (int mode = 0; mode < 2; mode++) {
        struct posenc_rope_params p = {.mode = (posenc_rope_mode)mode};
        float *q = random_floats(D, 11), *k = random_floats(D, 12);
        double ref_dot = 0, bound = 0;
        for (size_t s = 0; s < sizeof(shifts) / sizeof(shifts[0]); s++) {
            int32_t pq = 7 + shifts[s], pk = 3 + shifts[s];
            float *qr = rope_dut(q, D, 1, 1, &pq, 1, &p);
            float *kr = rope_dut(k, D, 1, 1, &pk, 1, &p);
            double dot = 0, b = 0;
            for (int i = 0; i < D; i++) {
                dot += (double)qr[i] * kr[i];
                /* each rotated element is within B(angle) (angles <= pos, w <= 1) */
                double bq = pc_bound_rope_f32(pc_angle_err32(pq), 1.0, 2.0);
                double bk = pc_bound_rope_f32(pc_angle_err32(pk), 1.0, 2.0);
                b += fabs(qr[i]) * bk + fabs(kr[i]) * bq + bq * bk;
            }
            if (s == 0) {
                ref_dot = dot;
                bound = b;
            } else if (fabs(dot - ref_dot) > b + bound) {
                fail_msg("mode %d shift %d: q.k = %.9g, unshifted %.9g (bound %.3g)", mode,
                         shifts[s], dot, ref_dot, b + bound);
            }
            free(qr);
            free(kr);
        }
        free(q);
        free(k);
    }
}

/* backward(forward(x)) = mscale^2 x, partial rotation with a window offset. */
static void test_backward_inverts(void **state)
{
    (void)state;
    enum { D = 48, H = 3, T = 7 };
    struct posenc_rope_params p = {.mode = POSENC_ROPE_NEOX, .n_dims = 32, .n_offs = 8,
                                   .attn_factor = 0.8f};
    int32_t pos[T];
    for (int t = 0; t < T; t++)
        pos[t] = t * 1234 + 5;
    float *x = random_floats(D * H * T, 99);
    float *y = rope_dut(x, D, H, T, pos, 1, &p);
    p.flags = POSENC_ROPE_BACKWARD;
    float *z = rope_dut(y, D, H, T, pos, 1, &p);
    double m = 0.8;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D * H; i++) {
            int d = i % D;
            double want = (d >= 8 && d < 40) ? m * m * x[t * D * H + i] : x[t * D * H + i];
            /* forward: B1 = B(angle, m, |xa|+|xb| <= 2); backward of y (|ya|+|yb| <= 2m+2B1)
             * perturbed by B1 per element: m*2*B1 + B(angle, m, 2m + 2B1) */
            double b1 = pc_bound_rope_f32(pc_angle_err32(pos[t]), m, 2.0);
            double b = (d >= 8 && d < 40)
                           ? m * 2 * b1 + pc_bound_rope_f32(pc_angle_err32(pos[t]), m, 2 * m + 2 * b1)
                           : 0.0;
            double e = fabs(z[t * D * H + i] - want);
            if (e > b)
                fail_msg("token %d elem %d: %.9g, want %.9g (err %.3g > %.3g)", t, i,
                         z[t * D * H + i], want, e, b);
        }
    free(x);
    free(y);
    free(z);
}

/* rerotate(rope(x, A), A -> B) = rope(x, B): a context shift, and a dynamic-NTK switch. */
static void test_rerotate_equals_fresh(void **state)
{
    (void)state;
    enum { D = 64, H = 2, T = 6 };
    int32_t pa[T], pbv[T];
    for (int t = 0; t < T; t++) {
        pa[t] = 4000 + 37 * t;
        pbv[t] = pa[t] - 1000;
    }
    for (int variant = 0; variant < 2; variant++) {
        struct posenc_rope_params A = {.mode = POSENC_ROPE_NEOX}, B = A;
        const int32_t *to = pbv;
        if (variant == 1) {
            A.scaling.kind = B.scaling.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK;
            A.scaling.factor = B.scaling.factor = 2.0f;
            A.scaling.original_ctx = B.scaling.original_ctx = 2048;
            A.scaling.seq_len = 4096;
            B.scaling.seq_len = 8192;
            to = pa;
        }
        float *x = random_floats(D * H * T, 123 + (uint64_t)variant);
        float *ka = rope_dut(x, D, H, T, pa, 1, &A);
        float *fresh = rope_dut(x, D, H, T, to, 1, &B);
        /* rerotate on the device */
        posenc_buffer *kb = th_upload(th.dut, ka, sizeof(float) * D * H * T);
        posenc_buffer *pab = th_upload(th.dut, pa, sizeof(pa));
        posenc_buffer *pbb = th_upload(th.dut, to, sizeof(pa));
        posenc_tensor kt = posenc_tensor_contiguous(kb, 0, POSENC_DTYPE_F32, D, H, T, 1);
        posenc_tensor pat = posenc_tensor_contiguous(pab, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
        posenc_tensor pbt = posenc_tensor_contiguous(pbb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
        assert_int_equal(posenc_rope_rerotate(th.dut, &kt, &pat, &A, &pbt, &B, &kt), POSENC_OK);
        float *kr = th_download(kb);
        for (int i = 0; i < D * H * T; i++) {
            int t = i / (D * H);
            double ang = fmax(pa[t], to[t]);
            /* three rotations' errors (the contract's, plus a second reduced angle and the
             * rounding of the difference for the re-rotation), magnitudes 1 and |x| <= 1 */
            double b = 3.0 * pc_bound_rope_f32(pc_angle_err32(ang) + PC_SINCOS_ERR + 0x1p-24,
                                               1.0, 2.0);
            if (fabs(kr[i] - fresh[i]) > b)
                fail_msg("variant %d elem %d: rerotated %.9g, fresh %.9g (bound %.3g)", variant,
                         i, kr[i], fresh[i], b);
        }
        posenc_buffer_destroy(&kb);
        posenc_buffer_destroy(&pab);
        posenc_buffer_destroy(&pbb);
        free(kr);
        free(x);
        free(ka);
        free(fresh);
    }
    th_check_warnings();
}

/* ---- bad input ---------------------------------------------------------------------------- */

static void test_bad_input(void **state)
{
    (void)state;
    enum { D = 16, H = 2, T = 3 };
    const posenc_status INV = POSENC_ERR_INVALID_ARGUMENT;
    unsigned char poison[D * H * T * 4];
    memset(poison, 0xA5, sizeof(poison));
    float x[D * H * T] = {0};
    int32_t pos[4 * T] = {0};
    posenc_buffer *db = th_upload(th.dut, poison, sizeof(poison));
    posenc_buffer *kb = th_upload(th.dut, poison, sizeof(poison));
    posenc_buffer *xb = th_upload(th.dut, x, sizeof(x));
    posenc_buffer *pb = th_upload(th.dut, pos, sizeof(pos));
    posenc_tensor xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, H, T, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor t;
    struct posenc_rope_params p;

    assert_int_equal(posenc_rope(NULL, &xt, &pt, &dt, NULL), INV);
    th_expect(posenc_rope(th.dut, NULL, &pt, &dt, NULL), INV, "x is NULL", "x NULL");
    th_expect(posenc_rope(th.dut, &xt, NULL, &dt, NULL), INV, "pos is NULL", "pos NULL");
    th_expect(posenc_rope(th.dut, &xt, &pt, NULL, NULL), INV, "dst is NULL", "dst NULL");
    t = xt;
    t.dtype = POSENC_DTYPE_I32;
    th_expect(posenc_rope(th.dut, &t, &pt, &dt, NULL), INV, "x->dtype", "i32 x");
    t = pt;
    t.dtype = POSENC_DTYPE_F16;
    th_expect(posenc_rope(th.dut, &xt, &t, &dt, NULL), INV, "pos->dtype", "f16 pos");
    t = pt;
    t.ne[0] = T - 1;
    th_expect(posenc_rope(th.dut, &xt, &t, &dt, NULL), INV, "pos->ne", "pos length");
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, H, T - 1, 1);
    th_expect(posenc_rope(th.dut, &xt, &pt, &t, NULL), INV, "dst->ne", "dst shape");
    t = posenc_tensor_contiguous(db, 4 * D, POSENC_DTYPE_F32, D, H, T - 1, 1);
    posenc_tensor xs = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, H, T - 1, 1);
    posenc_tensor ps = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T - 1, 1, 1, 1);
    th_expect(posenc_rope(th.dut, &xs, &ps, &t, NULL), INV, "partially overlaps", "overlap");
    posenc_tensor pos_in_dst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    th_expect(posenc_rope(th.dut, &xt, &pos_in_dst, &dt, NULL), INV, "pos overlaps", "pos in dst");

    memset(&p, 0, sizeof(p));
    p.n_dims = 7;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "n_dims", "odd n_dims");
    p.n_dims = 18;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "n_dims", "n_dims > head");
    p.n_dims = 16;
    p.n_offs = 2;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "n_", "window past head");
    memset(&p, 0, sizeof(p));
    p.mode = (posenc_rope_mode)9;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "mode", "mode 9");
    memset(&p, 0, sizeof(p));
    p.freq_base = NAN;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "freq_base", "NaN base");
    memset(&p, 0, sizeof(p));
    p.freq_base = -1.0f;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "freq_base", "negative base");
    memset(&p, 0, sizeof(p));
    p.reserved[1] = 3;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "reserved", "reserved");
    memset(&p, 0, sizeof(p));
    p.scaling.kind = (posenc_rope_scaling_kind)99;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "kind", "scaling kind");
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_LINEAR;
    p.scaling.factor = -2.0f;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "factor", "negative factor");
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.factor = 4.0f;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "original_ctx", "yarn no ctx");
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_LONGROPE;
    p.scaling.factor = 4.0f;
    p.scaling.original_ctx = 64;
    p.scaling.seq_len = 10;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "factor", "longrope no factors");
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_MROPE;
    p.sections[0] = 2;
    p.sections[1] = 3;
    p.sections[2] = 3;
    th_expect(posenc_rope(th.dut, &xt, &pt, &dt, &p), INV, "streams", "too few streams");

    /* qk: mismatched shapes and overlapping outputs */
    posenc_tensor k_short = posenc_tensor_contiguous(kb, 0, POSENC_DTYPE_F32, D - 2, H, T, 1);
    th_expect(posenc_rope_qk(th.dut, &xt, &k_short, &pt, &dt, &k_short, NULL), INV, "k->ne",
              "qk head dims");
    th_expect(posenc_rope_qk(th.dut, &xt, &xt, &pt, &dt, &dt, NULL), INV, "overlaps",
              "qk aliasing");

    /* rerotate between different layouts */
    struct posenc_rope_params a = {.mode = POSENC_ROPE_NORMAL}, b = {.mode = POSENC_ROPE_NEOX};
    th_expect(posenc_rope_rerotate(th.dut, &xt, &pt, &a, &pt, &b, &dt), INV, "pairing",
              "rerotate layouts");
    a.flags = POSENC_ROPE_BACKWARD;
    th_expect(posenc_rope_rerotate(th.dut, &xt, &pt, &a, &pt, &a, &dt), INV, "BACKWARD",
              "rerotate backward");

    /* empty: a valid no-op */
    t = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, D, H, 0, 1);
    posenc_tensor x0 = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, H, 0, 1);
    posenc_tensor p0 = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 0, 1, 1, 1);
    th_expect(posenc_rope(th.dut, &x0, &p0, &t, NULL), POSENC_OK, NULL, "empty");

    th_expect_untouched(db, 0xA5, "dst");
    th_expect_untouched(kb, 0xA5, "k");
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&kb);
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&pb);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "rope");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_ggml_modes),
        cmocka_unit_test(test_table_cache),
        cmocka_unit_test(test_freq_factors_tensor),
        cmocka_unit_test(test_large_positions),
        cmocka_unit_test(test_out_of_range_freqs),
        cmocka_unit_test(test_norm_preserved),
        cmocka_unit_test(test_relative),
        cmocka_unit_test(test_backward_inverts),
        cmocka_unit_test(test_rerotate_equals_fresh),
        cmocka_unit_test(test_bad_input),
    };
    static const enum pc_op ops[] = {PC_OP_ROPE};
    rc = th_run_with_cases("rope", fixed, sizeof(fixed) / sizeof(fixed[0]), ops,
                           sizeof(ops) / sizeof(ops[0]));
    th_fini();
    return rc;
}
