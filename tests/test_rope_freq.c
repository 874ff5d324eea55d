/*
 * test_rope_freq.c - the host-side RoPE tables (src/rope_freq.c): posenc_rope_freqs,
 * pe_rope_table_build and posenc_rope_params_from_ggml. Pure host code: the harness runs
 * it once per backend (--backend NAME), the checks are the same each time.
 *
 *  - known values from the papers / model configs (default frequencies, YaRN correction
 *    dims, Llama 3.1, LongRoPE, dynamic NTK), each recomputed in double inside this file;
 *  - every scaling kind and mode against an independent recomputation (exp/log here,
 *    pow() in the library; ggml's iterative theta *= theta_scale loop for the ggml import);
 *  - every invalid parameter: exact status and a message naming the field.
 *
 * Tolerances: REL_EXACT = 1e-13 relative for "same formula, different evaluation order":
 * both sides are double; the exponent argument -2k*ln(base)/n is below 20 in magnitude so
 * an ulp of error there is < 4e-15 relative in w, and ggml's loop multiplies up to 64
 * rounded factors (< 64 * 1.1e-16 = 7e-15). Any formula error is > 1e-6.
 */
#include "../src/internal.h"
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REL_EXACT 1e-13
#define PI_D 3.14159265358979323846
#define MAXP 256

/* ---- helpers ------------------------------------------------------------------------- */

static void assert_rel(double got, double want, double tol, const char *what, int64_t j)
{
    double err = fabs(got - want) / fmax(fabs(want), 1e-300);
    if (!(err <= tol))
        fail_msg("%s[%lld]: got %.17g, want %.17g (rel err %.3g > %.3g)", what, (long long)j,
                 got, want, err, tol);
}

static void assert_abs(double got, double want, double tol, const char *what)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("%s: got %.17g, want %.17g (|err| %.3g > %.3g)", what, got, want,
                 fabs(got - want), tol);
}

/* Independent base frequency: base^(-2k/n) through exp/log (the library uses pow). */
static double ref_w(double base, double k, double n)
{
    return exp(-2.0 * k * log(base) / n);
}

/* posenc_rope_freqs must succeed; returns n_pairs. */
static int64_t freqs_ok(int64_t head_dim, const struct posenc_rope_params *p, double *freq,
                        uint8_t *stream, struct posenc_rope_info *info)
{
    posenc_status st = posenc_rope_freqs(head_dim, p, freq, stream, info);
    if (st != POSENC_OK)
        fail_msg("posenc_rope_freqs: %s", posenc_status_string(st));
    return info ? info->n_dims / 2 : 0;
}

/* HF _compute_yarn_parameters, written from the reference's description. */
static void ref_hf_yarn(int n, double base, double factor, double orig, double beta_fast,
                        double beta_slow, int truncate, double *freq, double *lo_out,
                        double *hi_out)
{
    double lo = n * log(orig / (beta_fast * 2 * PI_D)) / (2 * log(base));
    double hi = n * log(orig / (beta_slow * 2 * PI_D)) / (2 * log(base));
    if (truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    lo = lo < 0 ? 0 : lo;
    hi = hi > n - 1 ? n - 1 : hi;
    *lo_out = lo;
    *hi_out = hi;
    if (lo == hi)
        hi += 0.001;
    for (int j = 0; j < n / 2; j++) {
        double extrap = ref_w(base, j, n), interp = extrap / factor;
        double lin = (j - lo) / (hi - lo);
        double ramp = lin < 0 ? 0 : lin > 1 ? 1 : lin;
        double ef = 1 - ramp;
        freq[j] = interp * (1 - ef) + extrap * ef;
    }
}

/* ---- default table ------------------------------------------------------------------- */

static void test_default_freqs(void **state)
{
    (void)state;
    double f[MAXP];
    uint8_t s[MAXP];
    struct posenc_rope_info info;
    int64_t np = freqs_ok(128, NULL, f, s, &info);
    assert_int_equal(np, 64);
    /* omega_1 = 10000^(-2/128) = 0.865964323...; the literal has 9 decimals: 5e-10 */
    assert_abs(f[1], 0.865964323, 5e-10, "omega_1 literal");
    for (int64_t j = 0; j < np; j++) {
        assert_rel(f[j], ref_w(1e4, (double)j, 128), REL_EXACT, "default", j);
        assert_int_equal(s[j], 0);
    }
    assert_int_equal(info.n_dims, 128);
    assert_int_equal(info.n_streams, 1);
    assert_true(info.base == 10000.0 && info.mscale == 1.0 && info.softmax_scale == 1.0);
    assert_true(info.corr_low == 0.0 && info.corr_high == 0.0 && info.seq_len == 0);

    /* all-zero params == NULL; NEOX has the same table */
    struct posenc_rope_params p;
    memset(&p, 0, sizeof(p));
    double g[MAXP];
    p.mode = POSENC_ROPE_NEOX;
    freqs_ok(128, &p, g, NULL, &info);
    for (int64_t j = 0; j < np; j++)
        assert_true(g[j] == f[j]); /* same computation: bit-identical */

    /* partial rotation: n_offs 32 and n_dims 0 -> 96 rotated dims */
    memset(&p, 0, sizeof(p));
    p.n_offs = 32;
    p.freq_base = 5e5f;
    p.attn_factor = 0.5f;
    np = freqs_ok(128, &p, g, NULL, &info);
    assert_int_equal(np, 48);
    for (int64_t j = 0; j < np; j++)
        assert_rel(g[j], ref_w(5e5, (double)j, 96), REL_EXACT, "n_offs 32", j);
    assert_true(info.mscale == 0.5); /* attn_factor alone: exact */

    /* the internal table: the GPU words are w * 2/pi as hi + lo (pe_freq_split), fields
     * resolved */
    struct pe_rope_table t;
    assert_int_equal(pe_rope_table_build(th.ref, 128, &p, 0, &t), POSENC_OK);
    assert_int_equal(t.n_pairs, 48);
    assert_int_equal(t.n_dims, 96);
    assert_int_equal(t.n_offs, 32);
    assert_int_equal(t.mode, POSENC_ROPE_NORMAL);
    for (int64_t j = 0; j < t.n_pairs; j++) {
        assert_true(t.freq[j] == g[j]);
        const double v = g[j] * 0.63661977236758134308;
        assert_true(t.freq_f32[j] == (float)v);
        assert_true(t.freq_f32[t.n_pairs + j] == (float)(v - (double)(float)v));
        assert_int_equal(t.stream[j], 0);
    }
    pe_rope_table_free(&t);
    assert_null(t.freq);
    assert_int_equal(t.n_pairs, 0);
    pe_rope_table_free(&t); /* twice is harmless */
    pe_rope_table_free(NULL);
}

/* ---- linear, NTK, freq_factors, user freqs ----------------------------------------------- */

static void test_linear_ntk_factors(void **state)
{
    (void)state;
    double f[MAXP];
    struct posenc_rope_info info;
    struct posenc_rope_params p;

    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_LINEAR;
    p.scaling.factor = 3.0f;
    int64_t np = freqs_ok(128, &p, f, NULL, &info);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], ref_w(1e4, (double)j, 128) / 3.0, REL_EXACT, "linear", j);
    assert_true(info.mscale == 1.0 && info.base == 1e4);

    /* static NTK: base' = base * s^(n/(n-2)) */
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_NTK;
    p.scaling.factor = 4.0f;
    np = freqs_ok(128, &p, f, NULL, &info);
    double base = 1e4 * exp(128.0 / 126.0 * log(4.0));
    assert_rel(info.base, base, REL_EXACT, "ntk base", 0);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], ref_w(base, (double)j, 128), REL_EXACT, "ntk", j);

    /* freq_factors divide w_j (ggml src[2], rope_freqs.weight) */
    float ff[64];
    for (int j = 0; j < 64; j++)
        ff[j] = 1.0f + 0.25f * (float)(j % 5);
    memset(&p, 0, sizeof(p));
    p.freq_factors = ff;
    np = freqs_ok(128, &p, f, NULL, &info);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], ref_w(1e4, (double)j, 128) / ff[j], REL_EXACT, "freq_factors", j);

    /* user freqs replace everything; mscale = attn_factor; streams still by mode */
    float uf[40];
    for (int j = 0; j < 40; j++)
        uf[j] = 0.5f / (float)(j + 1);
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_MROPE;
    p.sections[0] = 10;
    p.sections[1] = 30;
    p.freqs = uf;
    p.attn_factor = 1.5f;
    p.freq_base = 777.0f;
    uint8_t s[MAXP];
    np = freqs_ok(80, &p, f, s, &info);
    assert_int_equal(np, 40);
    for (int64_t j = 0; j < np; j++) {
        assert_true(f[j] == (double)uf[j]); /* copied: exact */
        assert_int_equal(s[j], j < 10 ? 0 : 1);
    }
    assert_true(info.mscale == 1.5 && info.base == 777.0);
    assert_int_equal(info.n_streams, 2);
}

/* ---- YaRN ------------------------------------------------------------------------------- */

static void test_yarn(void **state)
{
    (void)state;
    double f[MAXP], r[MAXP], lo, hi;
    struct posenc_rope_info info;
    struct posenc_rope_params p;

    /* d=128, base 1e4, L=4096, betas 32/1: corr dims (20, 46) truncated */
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.factor = 4.0f;
    p.scaling.original_ctx = 4096;
    int64_t np = freqs_ok(128, &p, f, NULL, &info);
    assert_true(info.corr_low == 20.0 && info.corr_high == 46.0); /* integers: exact */
    ref_hf_yarn(128, 1e4, 4.0, 4096, 32, 1, 1, r, &lo, &hi);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], r[j], REL_EXACT, "yarn", j);
    /* mscale = 0.1 ln 4 + 1 (HF get_mscale); one log: 1e-15 */
    assert_rel(info.mscale, 0.1 * log(4.0) + 1.0, 1e-15, "yarn mscale", 0);
    assert_true(info.softmax_scale == 1.0);
    /* the ramp ends: pairs below low are pure extrapolation, above high interpolation */
    assert_rel(f[5], ref_w(1e4, 5, 128), REL_EXACT, "yarn extrap", 5);
    assert_rel(f[60], ref_w(1e4, 60, 128) / 4.0, REL_EXACT, "yarn interp", 60);

    /* not truncated: (20.944, 45.027); literals have 3 decimals -> 5e-4; the exact values
     * from this file's own formula at 1e-13 */
    p.scaling.flags = POSENC_ROPE_YARN_NO_TRUNCATE;
    freqs_ok(128, &p, f, NULL, &info);
    assert_abs(info.corr_low, 20.944, 5e-4, "corr_low no-trunc");
    assert_abs(info.corr_high, 45.027, 5e-4, "corr_high no-trunc");
    ref_hf_yarn(128, 1e4, 4.0, 4096, 32, 1, 0, r, &lo, &hi);
    assert_rel(info.corr_low, lo, REL_EXACT, "corr_low", 0);
    assert_rel(info.corr_high, hi, REL_EXACT, "corr_high", 0);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], r[j], REL_EXACT, "yarn no-trunc", j);

    /* GPT-OSS: d=64, base 150000, L=4096, factor 32, no truncation: (8.0928, 17.398);
     * literals have 4 and 3 decimals -> 5e-5 and 5e-4 */
    memset(&p, 0, sizeof(p));
    p.freq_base = 150000.0f;
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.factor = 32.0f;
    p.scaling.original_ctx = 4096;
    p.scaling.beta_fast = 32.0f;
    p.scaling.beta_slow = 1.0f;
    p.scaling.flags = POSENC_ROPE_YARN_NO_TRUNCATE;
    np = freqs_ok(64, &p, f, NULL, &info);
    assert_abs(info.corr_low, 8.0928, 5e-5, "gpt-oss corr_low");
    assert_abs(info.corr_high, 17.398, 5e-4, "gpt-oss corr_high");
    ref_hf_yarn(64, 150000.0, 32.0, 4096, 32, 1, 0, r, &lo, &hi);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], r[j], REL_EXACT, "gpt-oss", j);
    assert_rel(info.mscale, 0.1 * log(32.0) + 1.0, 1e-15, "gpt-oss mscale", 0);

    /* both correction dims at or below 0: d=64, L=64, betas 32 / 11 give -3.977 and -0.267,
     * truncated to -4 and -0, clamped to 0 and -0. low == high, the ramp's singularity,
     * which HF widens by 0.001: pair 0 extrapolates (w), every other pair interpolates
     * (w / 4), each exactly (a blend with weights 1 and 0) */
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.factor = 4.0f;
    p.scaling.original_ctx = 64;
    p.scaling.beta_fast = 32.0f;
    p.scaling.beta_slow = 11.0f;
    np = freqs_ok(64, &p, f, NULL, &info);
    assert_true(info.corr_low == 0.0 && info.corr_high == 0.0);
    assert_rel(f[0], ref_w(1e4, 0, 64), REL_EXACT, "yarn low == high", 0);
    for (int64_t j = 1; j < np; j++)
        assert_rel(f[j], ref_w(1e4, (int)j, 64) / 4.0, REL_EXACT, "yarn low == high", j);
    ref_hf_yarn(64, 1e4, 4.0, 64, 32, 11, 1, r, &lo, &hi);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], r[j], REL_EXACT, "yarn low == high (ref)", j);

    /* DeepSeek: mscale == mscale_all_dim -> attention factor 1, softmax scale
     * get_mscale(s, mscale_all_dim)^2; frequencies as plain YaRN */
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.factor = 40.0f;
    p.scaling.original_ctx = 4096;
    p.scaling.mscale = 0.707f;
    p.scaling.mscale_all_dim = 0.707f;
    p.attn_factor = 2.0f;
    np = freqs_ok(64, &p, f, NULL, &info);
    assert_rel(info.mscale, 2.0, 1e-15, "deepseek mscale", 0);
    double m = 0.1 * (double)0.707f * log(40.0) + 1.0;
    assert_rel(info.softmax_scale, m * m, 1e-14, "deepseek softmax_scale", 0);
    ref_hf_yarn(64, 1e4, 40.0, 4096, 32, 1, 1, r, &lo, &hi);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], r[j], REL_EXACT, "deepseek", j);
    /* mscale 1, mscale_all_dim 0.707: ratio of the two get_mscale values */
    p.scaling.mscale = 1.0f;
    freqs_ok(64, &p, f, NULL, &info);
    assert_rel(info.mscale, 2.0 * (0.1 * log(40.0) + 1.0) / m, 1e-14, "deepseek ratio", 0);
    /* only mscale set: HF ignores it (needs both) -> default get_mscale(s) */
    p.scaling.mscale_all_dim = 0.0f;
    freqs_ok(64, &p, f, NULL, &info);
    assert_rel(info.mscale, 2.0 * (0.1 * log(40.0) + 1.0), 1e-15, "mscale alone", 0);
    assert_true(info.softmax_scale == 1.0);
    /* explicit attention_factor wins */
    p.scaling.attention_factor = 1.25f;
    freqs_ok(64, &p, f, NULL, &info);
    assert_rel(info.mscale, 2.5, 1e-15, "attention_factor", 0);
}

/* ---- Llama 3.x ------------------------------------------------------------------------- */

static void test_llama3(void **state)
{
    (void)state;
    double f[MAXP], w[MAXP];
    struct posenc_rope_info info;
    struct posenc_rope_params p;
    memset(&p, 0, sizeof(p));
    p.freq_base = 5e5f;
    freqs_ok(128, &p, w, NULL, &info);
    p.scaling.kind = POSENC_ROPE_SCALING_LLAMA3;
    p.scaling.factor = 8.0f;
    p.scaling.low_freq_factor = 1.0f;
    p.scaling.high_freq_factor = 4.0f;
    p.scaling.original_ctx = 8192;
    int64_t np = freqs_ok(128, &p, f, NULL, &info);
    /* pairs 0..28: wavelength < 8192/4, unchanged (the same double: exact) */
    for (int64_t j = 0; j <= 28; j++)
        assert_true(f[j] == w[j]);
    /* pair 29 scaled by 0.828168 (literal 6 decimals -> 5e-7) */
    assert_abs(f[29] / w[29], 0.828168, 5e-7, "llama3 pair 29 ratio");
    /* wavelength > 8192 (pairs 35..63): w/8, a power of two: exact */
    for (int64_t j = 35; j < np; j++)
        assert_true(f[j] == w[j] / 8.0);
    /* every pair against the HF rule recomputed here */
    for (int64_t j = 0; j < np; j++) {
        double wj = ref_w(5e5, (double)j, 128), wl = 2 * PI_D / wj, want;
        if (wl < 8192.0 / 4.0)
            want = wj;
        else if (wl > 8192.0 / 1.0)
            want = wj / 8.0;
        else {
            double sm = (8192.0 / wl - 1.0) / (4.0 - 1.0);
            want = (1 - sm) * wj / 8.0 + sm * wj;
        }
        assert_rel(f[j], want, REL_EXACT, "llama3", j);
    }
    assert_true(info.mscale == 1.0);
    /* defaults low 1 / high 4 give the same table */
    double g[MAXP];
    p.scaling.low_freq_factor = 0.0f;
    p.scaling.high_freq_factor = 0.0f;
    freqs_ok(128, &p, g, NULL, &info);
    for (int64_t j = 0; j < np; j++)
        assert_true(g[j] == f[j]);
}

/* ---- LongRoPE --------------------------------------------------------------------------- */

static void test_longrope(void **state)
{
    (void)state;
    float sf[48], lf[48];
    for (int j = 0; j < 48; j++) {
        sf[j] = 1.0f + 0.01f * (float)j;
        lf[j] = 1.0f + 0.5f * (float)j;
    }
    double f[MAXP];
    struct posenc_rope_info info;
    struct posenc_rope_params p;
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_LONGROPE;
    p.scaling.factor = 32.0f;
    p.scaling.original_ctx = 4096;
    p.scaling.short_factor = sf;
    p.scaling.long_factor = lf;
    p.scaling.seq_len = 4096;
    int64_t np = freqs_ok(96, &p, f, NULL, &info);
    assert_int_equal(np, 48);
    /* attention factor sqrt(1 + ln 32 / ln 4096) = 1.1902381 (literal 8 digits -> 1e-7),
     * and the exact sqrt(17/12) (ln32/ln4096 = 5/12) at 1e-15 */
    assert_abs(info.mscale, 1.1902381, 1e-7, "longrope attention factor");
    assert_rel(info.mscale, sqrt(17.0 / 12.0), 1e-15, "longrope sqrt(17/12)", 0);
    assert_int_equal(info.long_factors, 0);
    assert_int_equal(info.seq_len, 4096);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], ref_w(1e4, (double)j, 96) / sf[j], REL_EXACT, "longrope short", j);
    /* one past original_ctx: long factors */
    p.scaling.seq_len = 4097;
    freqs_ok(96, &p, f, NULL, &info);
    assert_int_equal(info.long_factors, 1);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], ref_w(1e4, (double)j, 96) / lf[j], REL_EXACT, "longrope long", j);
    /* seq_len from the front end (argument) when the field is 0 */
    p.scaling.seq_len = 0;
    struct pe_rope_table t;
    assert_int_equal(pe_rope_table_build(th.ref, 96, &p, 5000, &t), POSENC_OK);
    assert_int_equal(t.info.long_factors, 1);
    assert_int_equal(t.info.seq_len, 5000);
    pe_rope_table_free(&t);
    /* posenc_rope_freqs has no positions: seq_len is required */
    assert_int_equal(posenc_rope_freqs(96, &p, f, NULL, &info), POSENC_ERR_INVALID_ARGUMENT);
    /* explicit attention factor, and factor <= 1 -> 1 */
    p.scaling.seq_len = 100;
    p.scaling.attention_factor = 1.2f;
    freqs_ok(96, &p, f, NULL, &info);
    assert_rel(info.mscale, (double)1.2f, 1e-15, "longrope attention_factor", 0);
    p.scaling.attention_factor = 0.0f;
    p.scaling.factor = 0.0f;
    freqs_ok(96, &p, f, NULL, &info);
    assert_true(info.mscale == 1.0);
}

/* ---- dynamic NTK ------------------------------------------------------------------------ */

static void test_dynamic_ntk(void **state)
{
    (void)state;
    double f[MAXP], w[MAXP];
    struct posenc_rope_info info;
    struct posenc_rope_params p;
    memset(&p, 0, sizeof(p));
    freqs_ok(128, &p, w, NULL, &info);
    p.scaling.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK;
    p.scaling.factor = 2.0f;
    p.scaling.original_ctx = 4096;
    p.scaling.seq_len = 8192;
    int64_t np = freqs_ok(128, &p, f, NULL, &info);
    /* base 30527.737 (literal 3 decimals -> 5e-4) and 1e4 * 3^(128/126) at 1e-13 */
    assert_abs(info.base, 30527.737, 5e-4, "dynamic base literal");
    double base = 1e4 * exp(128.0 / 126.0 * log(2.0 * 8192 / 4096 - 1.0));
    assert_rel(info.base, base, REL_EXACT, "dynamic base", 0);
    assert_int_equal(info.seq_len, 8192);
    for (int64_t j = 0; j < np; j++)
        assert_rel(f[j], ref_w(base, (double)j, 128), REL_EXACT, "dynamic", j);
    /* at (and below) the original length the base is unchanged: identical table */
    for (int32_t L = 4096; L >= 4095; L--) {
        p.scaling.seq_len = L;
        freqs_ok(128, &p, f, NULL, &info);
        assert_true(info.base == 1e4);
        for (int64_t j = 0; j < np; j++)
            assert_true(f[j] == w[j]);
    }
    /* the front end's seq_len argument */
    p.scaling.seq_len = 0;
    struct pe_rope_table t;
    assert_int_equal(pe_rope_table_build(th.ref, 128, &p, 8192, &t), POSENC_OK);
    assert_rel(t.info.base, base, REL_EXACT, "dynamic base (arg)", 0);
    pe_rope_table_free(&t);
}

/* ---- streams: M-RoPE, IMROPE, VISION, pair_stream ---------------------------------------- */

static void test_streams(void **state)
{
    (void)state;
    double f[MAXP];
    uint8_t s[MAXP];
    struct posenc_rope_info info;
    struct posenc_rope_params p;

    /* Qwen2-VL M-RoPE {16, 24, 24, 0}, d=128: contiguous sections t, h, w; w_j global */
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_MROPE;
    p.freq_base = 1e6f;
    int sec[4] = {16, 24, 24, 0};
    memcpy(p.sections, sec, sizeof(sec));
    int64_t np = freqs_ok(128, &p, f, s, &info);
    int64_t j = 0;
    for (int st = 0; st < 4; st++)
        for (int k = 0; k < sec[st]; k++, j++)
            assert_int_equal(s[j], st);
    assert_int_equal(j, np);
    for (j = 0; j < np; j++)
        assert_rel(f[j], ref_w(1e6, (double)j, 128), REL_EXACT, "mrope", j);
    assert_int_equal(info.n_streams, 3);

    /* sections covering fewer pairs repeat: {2, 3, 1, 0} over 16 pairs */
    int small[4] = {2, 3, 1, 0};
    memcpy(p.sections, small, sizeof(small));
    np = freqs_ok(32, &p, f, s, &info);
    static const uint8_t rep[6] = {0, 0, 1, 1, 1, 2};
    for (j = 0; j < np; j++)
        assert_int_equal(s[j], rep[j % 6]);

    /* Qwen3-VL IMROPE {24, 20, 20, 0}, d=128: t h w interleaved while each section lasts */
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_IMROPE;
    p.freq_base = 5e6f;
    int isec[4] = {24, 20, 20, 0};
    memcpy(p.sections, isec, sizeof(isec));
    np = freqs_ok(128, &p, f, s, &info);
    int used[4] = {0, 0, 0, 0}, maxs = 0;
    for (j = 0; j < np; j++) {
        int want = 3;
        if (j % 3 == 1 && j < 3 * 20)
            want = 1;
        else if (j % 3 == 2 && j < 3 * 20)
            want = 2;
        else if (j % 3 == 0 && j < 3 * 24)
            want = 0;
        assert_int_equal(s[j], want);
        used[want]++;
        maxs = want > maxs ? want : maxs;
        assert_rel(f[j], ref_w(5e6, (double)j, 128), REL_EXACT, "imrope", j);
    }
    /* h and w get 20 pairs each; t the 22 multiples of 3 below 64 (those below 72);
     * pairs 61 and 62 fall to the 4th stream (ggml's rule) */
    assert_int_equal(used[0], 22);
    assert_int_equal(used[1], 20);
    assert_int_equal(used[2], 20);
    assert_int_equal(used[3], 2);
    assert_int_equal(s[61], 3);
    assert_int_equal(s[62], 3);
    assert_int_equal(info.n_streams, maxs + 1);

    /* VISION (Qwen2-VL ViT, head 80): sections {20, 20}, frequency index restarts */
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_VISION;
    p.sections[0] = 20;
    p.sections[1] = 20;
    np = freqs_ok(80, &p, f, s, &info);
    assert_int_equal(np, 40);
    for (j = 0; j < np; j++) {
        int64_t k = j < 20 ? j : j - 20;
        assert_int_equal(s[j], j < 20 ? 0 : 1);
        assert_rel(f[j], ref_w(1e4, (double)k, 40), REL_EXACT, "vision", j);
    }
    assert_int_equal(info.n_streams, 2);
    /* VISION {10, 10} over a 40-dim window of an 80-dim head */
    p.sections[0] = 10;
    p.sections[1] = 10;
    p.n_dims = 40;
    np = freqs_ok(80, &p, f, s, &info);
    assert_int_equal(np, 20);
    for (j = 0; j < np; j++) {
        int64_t k = j < 10 ? j : j - 10;
        assert_int_equal(s[j], j < 10 ? 0 : 1);
        assert_rel(f[j], ref_w(1e4, (double)k, 20), REL_EXACT, "vision 10/10", j);
    }

    /* pair_stream overrides the mode's map (frequencies unchanged) */
    uint8_t ps[64];
    for (j = 0; j < 64; j++)
        ps[j] = (uint8_t)((j / 2) % 4);
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_NEOX;
    p.pair_stream = ps;
    np = freqs_ok(128, &p, f, s, &info);
    for (j = 0; j < np; j++) {
        assert_int_equal(s[j], ps[j]);
        assert_rel(f[j], ref_w(1e4, (double)j, 128), REL_EXACT, "pair_stream", j);
    }
    assert_int_equal(info.n_streams, 4);
}

/* ---- ggml import ------------------------------------------------------------------------ */

static void ggml_op(int32_t op[15], int n_dims, int mode, int n_ctx_orig, float base, float fs,
                    float ext, float attn, float beta_fast, float beta_slow, const int sec[4])
{
    memset(op, 0, 15 * sizeof(int32_t));
    op[0] = 7; /* n_past: unused */
    op[1] = n_dims;
    op[2] = mode;
    op[3] = 1234; /* n_ctx: unused */
    op[4] = n_ctx_orig;
    float fl[6] = {base, fs, ext, attn, beta_fast, beta_slow};
    memcpy(&op[5], fl, sizeof(fl));
    if (sec)
        memcpy(&op[11], sec, 4 * sizeof(int32_t));
}

/*
 * ggml's CPU rope cache (ggml_rope_cache_init / ggml_mrope_cache_init + rope_yarn), in
 * double, at position 1 on every stream: freq[j] = the angle of pair j, stream[j] = the
 * stream whose theta it took. Written from a reading of ggml-cpu/ops.cpp.
 */
static void ref_ggml(const int32_t op[15], int64_t ne0, const float *ff, double *freq,
                     uint8_t *stream, double *mscale_out)
{
    int n_dims = op[1], mode = op[2], n_ctx_orig = op[4];
    float fb, fs, ext, attn, bf, bs;
    memcpy(&fb, &op[5], 4);
    memcpy(&fs, &op[6], 4);
    memcpy(&ext, &op[7], 4);
    memcpy(&attn, &op[8], 4);
    memcpy(&bf, &op[9], 4);
    memcpy(&bs, &op[10], 4);
    const int32_t *sec = &op[11];
    int is_mrope = (mode & 8) != 0, is_imrope = mode == 40, is_vision = mode == 24;
    double theta_scale = pow((double)fb, -2.0 / n_dims);
    double c0 = n_dims * log(n_ctx_orig / ((double)bf * 2 * PI_D)) / (2 * log((double)fb));
    double c1 = n_dims * log(n_ctx_orig / ((double)bs * 2 * PI_D)) / (2 * log((double)fb));
    double lo = fmax(0.0, floor(c0)), hi = fmin(n_dims - 1.0, ceil(c1));
    int sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    int sec_w = sec[0] + sec[1], sec_e = sec_w + sec[2];
    double tk[4] = {1, 1, 1, 1};
    double mscale = attn;
    int64_t n_pairs = is_vision ? ne0 / 2 : n_dims / 2;
    for (int64_t i0 = 0; i0 < ne0; i0 += 2) {
        int st = 0;
        if (is_mrope) {
            int sector = (int)((i0 / 2) % sect_dims);
            if (is_vision) { /* indep_sects: theta restarts at each section */
                if (sector == 0)
                    tk[0] = 1;
                else if (sector == sec[0])
                    tk[1] = 1;
                else if (sector == sec_w)
                    tk[2] = 1;
                else if (sector == sec_e)
                    tk[3] = 1;
            }
            if (is_imrope) {
                if (sector % 3 == 1 && sector < 3 * sec[1])
                    st = 1;
                else if (sector % 3 == 2 && sector < 3 * sec[2])
                    st = 2;
                else if (sector % 3 == 0 && sector < 3 * sec[0])
                    st = 0;
                else
                    st = 3;
            } else {
                if (sector >= sec[0] && sector < sec_w)
                    st = 1;
                else if (sector >= sec_w && sector < sec_w + sec[2])
                    st = 2;
                else if (sector >= sec_w + sec[2])
                    st = 3;
            }
        }
        double extrap = tk[st] / (ff ? ff[i0 / 2] : 1.0);
        double interp = (double)fs * extrap, theta = interp, m = attn;
        if (ext != 0.0f) {
            double y = ((double)(i0 / 2) - lo) / fmax(0.001, hi - lo);
            double mix = (1.0 - fmin(1.0, fmax(0.0, y))) * ext;
            theta = interp * (1 - mix) + extrap * mix;
            m *= 1.0 + 0.1 * log(1.0 / fs);
        }
        if (i0 / 2 < n_pairs) {
            freq[i0 / 2] = theta;
            stream[i0 / 2] = (uint8_t)st;
            mscale = m;
        }
        for (int k = 0; k < 4; k++)
            tk[k] *= theta_scale;
    }
    *mscale_out = mscale;
}

/* Convert, then compare the posenc table with the ggml loop. */
static void check_ggml_case(const char *name, const int32_t op[15], int64_t ne0,
                            const float *ff, posenc_rope_mode want_mode,
                            posenc_rope_scaling_kind want_kind, double tol)
{
    struct posenc_rope_params p;
    memset(&p, 0xAB, sizeof(p));
    posenc_status st = posenc_rope_params_from_ggml(op, 15, ne0, ff, &p);
    if (st != POSENC_OK)
        fail_msg("%s: posenc_rope_params_from_ggml: %s", name, posenc_status_string(st));
    assert_int_equal(p.mode, want_mode);
    assert_int_equal(p.scaling.kind, want_kind);
    assert_int_equal(p.n_offs, 0);
    assert_ptr_equal(p.freq_factors, ff);
    assert_null(p.freqs);
    assert_null(p.pair_stream);
    for (int i = 0; i < 4; i++)
        assert_int_equal(p.reserved[i], 0);
    float fb, attn;
    memcpy(&fb, &op[5], 4);
    memcpy(&attn, &op[8], 4);
    assert_true(p.freq_base == fb && p.attn_factor == attn);
    assert_int_equal(p.n_dims, want_mode == POSENC_ROPE_VISION ? 2 * op[1] : op[1]);

    double f[MAXP], r[MAXP], ms;
    uint8_t s[MAXP], rs[MAXP];
    struct posenc_rope_info info;
    int64_t np = freqs_ok(ne0, &p, f, s, &info);
    ref_ggml(op, ne0, ff, r, rs, &ms);
    for (int64_t j = 0; j < np; j++) {
        assert_rel(f[j], r[j], tol, name, j);
        if (s[j] != rs[j])
            fail_msg("%s: stream[%lld] = %u, ggml %u", name, (long long)j, s[j], rs[j]);
    }
    assert_rel(info.mscale, ms, tol, name, -1);
}

/* A refused ggml node: INVALID_ARGUMENT, and posenc_last_error() (this thread's message of
 * a call without a context) names what was wrong. */
#define GGML_BAD(call, what)                                                               \
    do {                                                                                   \
        assert_int_equal((call), POSENC_ERR_INVALID_ARGUMENT);                             \
        if (!strstr(posenc_last_error(), (what)))                                          \
            fail_msg("%s: posenc_last_error() = \"%s\", want \"%s\" in it", #call,        \
                     posenc_last_error(), (what));                                         \
    } while (0)

static void test_ggml_import(void **state)
{
    (void)state;
    int32_t op[15];
    struct posenc_rope_params p;

    /* NORMAL, full head */
    ggml_op(op, 128, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, NULL);
    check_ggml_case("ggml normal", op, 128, NULL, POSENC_ROPE_NORMAL, POSENC_ROPE_SCALING_NONE,
                    REL_EXACT);
    /* NEOX, partial (64 of 128), attn_factor */
    ggml_op(op, 64, 2, 0, 1e6f, 1.0f, 0.0f, 0.75f, 32.0f, 1.0f, NULL);
    check_ggml_case("ggml neox", op, 128, NULL, POSENC_ROPE_NEOX, POSENC_ROPE_SCALING_NONE,
                    REL_EXACT);
    /* M-RoPE Qwen2-VL: ggml's theta runs on through all sections (global pair index) */
    static const int qwen2vl[4] = {16, 24, 24, 0};
    ggml_op(op, 128, 8, 0, 1e6f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, qwen2vl);
    check_ggml_case("ggml mrope", op, 128, NULL, POSENC_ROPE_MROPE, POSENC_ROPE_SCALING_NONE,
                    REL_EXACT);
    assert_int_equal(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), POSENC_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(p.sections[i], qwen2vl[i]);
    /* M-RoPE with sections repeating over the pairs */
    static const int rep[4] = {3, 2, 2, 1};
    ggml_op(op, 64, 8, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, rep);
    check_ggml_case("ggml mrope repeat", op, 64, NULL, POSENC_ROPE_MROPE,
                    POSENC_ROPE_SCALING_NONE, REL_EXACT);
    /* IMROPE Qwen3-VL */
    static const int qwen3vl[4] = {24, 20, 20, 0};
    ggml_op(op, 128, 40, 0, 5e6f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, qwen3vl);
    check_ggml_case("ggml imrope", op, 128, NULL, POSENC_ROPE_IMROPE, POSENC_ROPE_SCALING_NONE,
                    REL_EXACT);
    /* VISION, Qwen2-VL ViT head 80: ggml n_dims 40 = ne0/2, sections {20,20,20,20} */
    static const int vit[4] = {20, 20, 20, 20};
    ggml_op(op, 40, 24, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, vit);
    check_ggml_case("ggml vision", op, 80, NULL, POSENC_ROPE_VISION, POSENC_ROPE_SCALING_NONE,
                    REL_EXACT);
    assert_int_equal(posenc_rope_params_from_ggml(op, 15, 80, NULL, &p), POSENC_OK);
    assert_true(p.n_dims == 80 && p.sections[0] == 20 && p.sections[1] == 20 &&
                p.sections[2] == 0 && p.sections[3] == 0);

    /* a YaRN node (NEOX, freq_scale 1/4, ext 1, n_ctx_orig 4096) with freq_factors */
    float ff[64];
    for (int j = 0; j < 64; j++)
        ff[j] = 1.0f + 0.125f * (float)(j % 7);
    ggml_op(op, 128, 2, 4096, 1e4f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f, NULL);
    check_ggml_case("ggml yarn", op, 128, ff, POSENC_ROPE_NEOX, POSENC_ROPE_SCALING_GGML_YARN,
                    REL_EXACT);
    assert_int_equal(posenc_rope_params_from_ggml(op, 15, 128, ff, &p), POSENC_OK);
    assert_true(p.scaling.factor == 4.0f && p.scaling.original_ctx == 4096 &&
                p.scaling.ext_factor == 1.0f && p.scaling.beta_fast == 32.0f &&
                p.scaling.beta_slow == 1.0f);
    /* ext_factor 0.5, NORMAL partial, attn_factor 0.9 */
    ggml_op(op, 64, 0, 2048, 5e5f, 0.125f, 0.5f, 0.9f, 24.0f, 2.0f, NULL);
    check_ggml_case("ggml yarn ext 0.5", op, 128, NULL, POSENC_ROPE_NORMAL,
                    POSENC_ROPE_SCALING_GGML_YARN, REL_EXACT);
    /* YaRN on M-RoPE and on VISION (ggml's ramp uses the global pair index, its corr
     * dims ggml's n_dims) */
    ggml_op(op, 128, 8, 4096, 1e6f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f, qwen2vl);
    check_ggml_case("ggml mrope yarn", op, 128, NULL, POSENC_ROPE_MROPE,
                    POSENC_ROPE_SCALING_GGML_YARN, REL_EXACT);
    ggml_op(op, 40, 24, 1024, 1e4f, 0.5f, 1.0f, 1.0f, 32.0f, 1.0f, vit);
    check_ggml_case("ggml vision yarn", op, 80, NULL, POSENC_ROPE_VISION,
                    POSENC_ROPE_SCALING_GGML_YARN, REL_EXACT);
    /* freq_scale != 1 without n_ctx_orig and ext_factor: LINEAR */
    ggml_op(op, 128, 2, 0, 1e4f, 0.5f, 0.0f, 1.0f, 32.0f, 1.0f, NULL);
    check_ggml_case("ggml linear", op, 128, NULL, POSENC_ROPE_NEOX, POSENC_ROPE_SCALING_LINEAR,
                    REL_EXACT);
    /* with n_ctx_orig but ext_factor 0: GGML_YARN reduces to pure interpolation */
    ggml_op(op, 128, 2, 4096, 1e4f, 0.5f, 0.0f, 1.0f, 32.0f, 1.0f, NULL);
    check_ggml_case("ggml yarn ext 0", op, 128, NULL, POSENC_ROPE_NEOX,
                    POSENC_ROPE_SCALING_GGML_YARN, REL_EXACT);
    /* freq_scale 1/3: posenc stores factor = 1/freq_scale as a float, so the scale comes
     * back within one f32 rounding of ggml's (3e-8 relative): tolerance 1e-7 */
    ggml_op(op, 128, 2, 4096, 1e4f, 1.0f / 3.0f, 1.0f, 1.0f, 32.0f, 1.0f, NULL);
    check_ggml_case("ggml yarn 1/3", op, 128, NULL, POSENC_ROPE_NEOX,
                    POSENC_ROPE_SCALING_GGML_YARN, 1e-7);

    /* invalid nodes */
    ggml_op(op, 128, 1, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, NULL);
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "mode) = 1 ");
    op[2] = 16; /* GGML_ROPE_TYPE_MROPE | 8 without the bit: not a ggml mode */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "mode) = 16");
    op[2] = 0;
    op[1] = 7; /* odd n_dims */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "n_dims");
    op[1] = 130; /* > ne0 */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "n_dims");
    ggml_op(op, 128, 0, 0, 1e4f, 1.0f, 0.0f, 0.0f, 32.0f, 1.0f, NULL); /* attn_factor 0 */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "attn_factor = 0");
    ggml_op(op, 128, 0, 0, 0.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, NULL); /* freq_base 0 */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "freq_base = 0");
    /* ext_factor with n_ctx_orig 0 is what ggml_rope_ext(..., 0, ..., ef != 0, ...) builds
     * (test-backend-ops' ROPE cases do): ggml's correction dims become [0, -inf] and only
     * pair 0 keeps its unscaled frequency; ref_ggml gets there through log(0) in double.
     * Tolerance as "ggml yarn 1/3": the factor's f32 round trip (3e-8 relative). */
    ggml_op(op, 128, 0, 0, 1e4f, 1.4245f, 0.7465f, 1.4245f, 1.0f, 1.0f, NULL);
    check_ggml_case("ggml yarn n_ctx_orig 0", op, 128, NULL, POSENC_ROPE_NORMAL,
                    POSENC_ROPE_SCALING_GGML_YARN, 1e-7);
    ggml_op(op, 128, 0, 4096, 1e4f, 0.5f, 1.0f, 1.0f, 0.0f, 1.0f, NULL); /* beta_fast 0 */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "beta_fast = 0");
    ggml_op(op, 128, 0, 4096, 1e4f, 0.5f, 1.0f, 1.0f, 32.0f, 0.0f, NULL); /* beta_slow 0 */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "beta_slow = 0");
    static const int sec_normal[4] = {8, 8, 8, 0};
    ggml_op(op, 48, 0, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, sec_normal); /* unread words */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "sections[0]) = 8, must be 0 in mode 0");
    ggml_op(op, 128, 0, 0, 1e4f, -0.5f, 0.0f, 1.0f, 32.0f, 1.0f, NULL); /* freq_scale < 0 */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "freq_scale = -0.5");
    static const int zero[4] = {0, 0, 0, 0};
    ggml_op(op, 128, 8, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, zero); /* M-RoPE, no sections */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, &p), "sections");
    static const int badvit[4] = {10, 20, 0, 0};
    ggml_op(op, 40, 24, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, badvit); /* 10+20 != 40 */
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 80, NULL, &p), "sections");
    GGML_BAD(posenc_rope_params_from_ggml(NULL, 15, 128, NULL, &p), "op_params is NULL");
    ggml_op(op, 128, 0, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, NULL);
    GGML_BAD(posenc_rope_params_from_ggml(op, 15, 128, NULL, NULL), "out is NULL");
}

/* Current ggml nodes carry 16 words; word 15 is n_offs (ggml_rope_set_offset). A node
 * with n_offs must rotate [n_offs, n_offs + n_dims), and a word count posenc does not know
 * must be refused rather than read as the old layout. */
static void test_ggml_import_16_words(void **state)
{
    (void)state;
    int32_t op[16];
    struct posenc_rope_params p;
    ggml_op(op, 32, 2, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, NULL);
    op[15] = 16;
    assert_int_equal(posenc_rope_params_from_ggml(op, 16, 64, NULL, &p), POSENC_OK);
    assert_int_equal(p.n_offs, 16);
    assert_int_equal(p.n_dims, 32);
    assert_int_equal(p.mode, POSENC_ROPE_NEOX);
    /* the same node read as 15 words: n_offs 0 (the layout before word 15 existed) */
    assert_int_equal(posenc_rope_params_from_ggml(op, 15, 64, NULL, &p), POSENC_OK);
    assert_int_equal(p.n_offs, 0);
    /* the window past the head: 16 + 32 > 40 */
    assert_int_equal(posenc_rope_params_from_ggml(op, 16, 40, NULL, &p),
                     POSENC_ERR_INVALID_ARGUMENT);
    op[15] = -2;
    assert_int_equal(posenc_rope_params_from_ggml(op, 16, 64, NULL, &p),
                     POSENC_ERR_INVALID_ARGUMENT);
    op[15] = 0;
    for (size_t n = 0; n < 20; n++)
        if (n != 15 && n != 16)
            assert_int_equal(posenc_rope_params_from_ggml(op, n, 64, NULL, &p),
                             POSENC_ERR_INVALID_ARGUMENT);
    /* the table of the offset node is the table of the plain one, moved */
    double f0[MAXP], f1[MAXP];
    struct posenc_rope_info info;
    assert_int_equal(posenc_rope_params_from_ggml(op, 16, 64, NULL, &p), POSENC_OK);
    assert_int_equal(posenc_rope_freqs(64, &p, f0, NULL, &info), POSENC_OK);
    op[15] = 32;
    assert_int_equal(posenc_rope_params_from_ggml(op, 16, 64, NULL, &p), POSENC_OK);
    assert_int_equal(posenc_rope_freqs(64, &p, f1, NULL, &info), POSENC_OK);
    assert_memory_equal(f0, f1, 16 * sizeof(double));
}

/* GGML_YARN and HF YaRN agree for ext_factor 1 and factor > 1, and differ only where
 * documented (ext_factor blend, factor <= 1 mscale, NO_TRUNCATE, attention_factor). */
static void test_ggml_vs_hf_yarn(void **state)
{
    (void)state;
    double a[MAXP], b[MAXP];
    struct posenc_rope_info ia, ib;
    struct posenc_rope_params hf, gg;
    memset(&hf, 0, sizeof(hf));
    hf.scaling.kind = POSENC_ROPE_SCALING_YARN;
    hf.scaling.factor = 4.0f;
    hf.scaling.original_ctx = 4096;
    gg = hf;
    gg.scaling.kind = POSENC_ROPE_SCALING_GGML_YARN;
    gg.scaling.ext_factor = 1.0f;
    int64_t np = freqs_ok(128, &hf, a, NULL, &ia);
    freqs_ok(128, &gg, b, NULL, &ib);
    /* same blend, evaluated in a different order: a few ulp (1e-15) */
    for (int64_t j = 0; j < np; j++)
        assert_rel(b[j], a[j], 1e-15, "ggml vs hf", j);
    assert_true(ia.corr_low == ib.corr_low && ia.corr_high == ib.corr_high);
    assert_rel(ib.mscale, ia.mscale, 1e-15, "ggml vs hf mscale", 0);

    /* ext_factor 0.5 only in ggml: the ramp region and below differ */
    gg.scaling.ext_factor = 0.5f;
    freqs_ok(128, &gg, b, NULL, &ib);
    assert_true(fabs(b[0] / a[0] - 1.0) > 0.1); /* (1+1/4)/2 of w vs w */
    /* factor < 1: HF get_mscale gives 1, ggml 1 + 0.1 ln(factor) */
    hf.scaling.factor = 0.5f;
    gg.scaling.factor = 0.5f;
    gg.scaling.ext_factor = 1.0f;
    freqs_ok(128, &hf, a, NULL, &ia);
    freqs_ok(128, &gg, b, NULL, &ib);
    assert_true(ia.mscale == 1.0);
    assert_rel(ib.mscale, 1.0 + 0.1 * log(0.5), 1e-15, "ggml mscale factor<1", 0);
}

/* ---- invalid parameters -------------------------------------------------------------------- */

static void expect_bad(int line, int64_t head_dim, const struct posenc_rope_params *p,
                       int32_t seq_len, const char *needle)
{
    struct pe_rope_table t;
    memset(&t, 0x5A, sizeof(t));
    posenc_status st = pe_rope_table_build(th.ref, head_dim, p, seq_len, &t);
    const char *msg = posenc_context_last_error(th.ref);
    if (st != POSENC_ERR_INVALID_ARGUMENT)
        fail_msg("line %d: status %s, want INVALID_ARGUMENT (%s)", line,
                 posenc_status_string(st), msg);
    if (!strstr(msg, needle))
        fail_msg("line %d: message \"%s\" does not name \"%s\"", line, msg, needle);
    /* the table is zeroed on failure (safe to free) */
    assert_null(t.freq);
    assert_null(t.freq_f32);
    assert_null(t.stream);
    pe_rope_table_free(&t);
    /* the public call fails the same way and leaves the outputs alone */
    if (seq_len == 0) {
        double f[4] = {-1, -1, -1, -1};
        uint8_t s[4] = {9, 9, 9, 9};
        struct posenc_rope_info info;
        memset(&info, 0x5A, sizeof(info));
        assert_int_equal(posenc_rope_freqs(head_dim, p, f, s, &info), POSENC_ERR_INVALID_ARGUMENT);
        assert_true(f[0] == -1 && f[3] == -1 && s[0] == 9 && info.n_dims == 0x5A5A5A5A);
    }
}

#define BAD(hd, pp, sl, needle) expect_bad(__LINE__, hd, pp, sl, needle)
#define RESET() memset(&p, 0, sizeof(p))

static void test_invalid(void **state)
{
    (void)state;
    struct posenc_rope_params p;
    float ff[64], bad[64];
    uint8_t ps[64];
    for (int j = 0; j < 64; j++) {
        ff[j] = 1.0f;
        bad[j] = 1.0f;
        ps[j] = 0;
    }

    RESET();
    BAD(1, &p, 0, "head_dim = 1");
    BAD(0, NULL, 0, "head_dim = 0");
    BAD(-4, &p, 0, "head_dim = -4");
    p.mode = (posenc_rope_mode)5;
    BAD(128, &p, 0, "params->mode = 5");
    p.mode = (posenc_rope_mode)-1;
    BAD(128, &p, 0, "params->mode = -1");
    RESET();
    p.reserved[2] = 1;
    BAD(128, &p, 0, "params->reserved[2] = 1");
    RESET();
    p.flags = 0x2;
    BAD(128, &p, 0, "params->flags = 0x2");

    /* dims */
    RESET();
    p.n_dims = 7;
    BAD(128, &p, 0, "params->n_dims = 7 must be even");
    p.n_dims = -2;
    BAD(128, &p, 0, "params->n_dims = -2");
    p.n_dims = 130;
    BAD(128, &p, 0, "params->n_dims = 130");
    p.n_dims = 128;
    p.n_offs = 2;
    BAD(128, &p, 0, "head_dim - n_offs = 126");
    RESET();
    p.n_offs = -1;
    BAD(128, &p, 0, "params->n_offs = -1");
    p.n_offs = 128;
    BAD(128, &p, 0, "params->n_offs = 128");
    RESET();
    BAD(127, &p, 0, "odd");

    /* base, attn_factor */
    RESET();
    p.freq_base = NAN;
    BAD(128, &p, 0, "params->freq_base");
    p.freq_base = INFINITY;
    BAD(128, &p, 0, "params->freq_base = inf");
    p.freq_base = -1.0f;
    BAD(128, &p, 0, "params->freq_base = -1");
    RESET();
    p.attn_factor = -1.0f;
    BAD(128, &p, 0, "params->attn_factor = -1");
    p.attn_factor = NAN;
    BAD(128, &p, 0, "params->attn_factor");

    /* sections */
    RESET();
    p.sections[1] = 3;
    BAD(128, &p, 0, "params->sections[1] = 3");
    p.mode = POSENC_ROPE_NEOX;
    BAD(128, &p, 0, "NEOX");
    RESET();
    p.mode = POSENC_ROPE_MROPE;
    BAD(128, &p, 0, "params->sections = {0, 0, 0, 0}");
    p.mode = POSENC_ROPE_IMROPE;
    BAD(128, &p, 0, "IMROPE needs");
    p.sections[0] = 10;
    p.sections[2] = -1;
    BAD(128, &p, 0, "params->sections[2] = -1");
    RESET();
    p.mode = POSENC_ROPE_VISION;
    BAD(80, &p, 0, "params->sections = {0, 0, 0, 0}");
    p.sections[0] = 10;
    p.sections[1] = 10;
    BAD(80, &p, 0, "params->sections[0] + params->sections[1] = 20 must equal n_dims/2 = 40");
    p.sections[0] = 20;
    p.sections[1] = 20;
    p.sections[2] = 20;
    BAD(80, &p, 0, "params->sections[2] = 20");

    /* per-pair tables */
    RESET();
    ps[5] = 4;
    p.pair_stream = ps;
    BAD(128, &p, 0, "params->pair_stream[5] = 4");
    ps[5] = 0;
    RESET();
    bad[3] = 0.0f;
    p.freq_factors = bad;
    BAD(128, &p, 0, "params->freq_factors[3] = 0");
    bad[3] = NAN;
    BAD(128, &p, 0, "params->freq_factors[3] = nan");
    bad[3] = -1.0f;
    BAD(128, &p, 0, "params->freq_factors[3] = -1");
    RESET();
    bad[3] = INFINITY;
    p.freqs = bad;
    BAD(128, &p, 0, "params->freqs[3] = inf");
    bad[3] = 1.0f;
    p.freq_factors = ff;
    BAD(128, &p, 0, "params->freq_factors must be NULL");
    p.freq_factors = NULL;
    p.scaling.kind = POSENC_ROPE_SCALING_LINEAR;
    p.scaling.factor = 2.0f;
    BAD(128, &p, 0, "params->scaling.kind = 1");

    /* scaling: kind, flags, fields the kind does not use */
    RESET();
    p.scaling.kind = (posenc_rope_scaling_kind)8;
    BAD(128, &p, 0, "params->scaling.kind = 8");
    RESET();
    p.scaling.flags = 0x4;
    BAD(128, &p, 0, "params->scaling.flags = 0x4");
    p.scaling.flags = POSENC_ROPE_YARN_NO_TRUNCATE;
    p.scaling.kind = POSENC_ROPE_SCALING_LINEAR;
    BAD(128, &p, 0, "POSENC_ROPE_YARN_NO_TRUNCATE");
    RESET();
    p.scaling.factor = 2.0f;
    BAD(128, &p, 0, "params->scaling.factor = 2 is not used by scaling kind NONE");
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_LINEAR;
    p.scaling.original_ctx = 4096;
    BAD(128, &p, 0, "params->scaling.original_ctx = 4096 is not used by scaling kind LINEAR");
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_LINEAR;
    p.scaling.beta_fast = 32.0f;
    BAD(128, &p, 0, "params->scaling.beta_fast = 32 is not used");
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.original_ctx = 4096;
    p.scaling.ext_factor = 1.0f;
    BAD(128, &p, 0, "params->scaling.ext_factor = 1 is not used by scaling kind YARN");
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_LLAMA3;
    p.scaling.original_ctx = 8192;
    p.scaling.mscale = 1.0f;
    BAD(128, &p, 0, "params->scaling.mscale = 1 is not used by scaling kind LLAMA3");
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_NTK;
    p.scaling.seq_len = 100;
    BAD(128, &p, 0, "params->scaling.seq_len = 100 is not used by scaling kind NTK");
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_GGML_YARN;
    p.scaling.original_ctx = 4096;
    p.scaling.low_freq_factor = 1.0f;
    BAD(128, &p, 0, "params->scaling.low_freq_factor = 1 is not used");
    RESET();
    p.scaling.short_factor = ff;
    BAD(128, &p, 0, "params->scaling.short_factor is set but not used");
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.original_ctx = 4096;
    p.scaling.long_factor = ff;
    BAD(128, &p, 0, "params->scaling.long_factor is set but not used by scaling kind YARN");

    /* factor */
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_LINEAR;
    p.scaling.factor = NAN;
    BAD(128, &p, 0, "params->scaling.factor = nan");
    p.scaling.factor = INFINITY;
    BAD(128, &p, 0, "params->scaling.factor = inf");
    p.scaling.factor = -2.0f;
    BAD(128, &p, 0, "params->scaling.factor = -2");

    /* original_ctx and seq_len */
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    BAD(128, &p, 0, "params->scaling.original_ctx = 0 must be > 0 for scaling kind YARN");
    p.scaling.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK;
    p.scaling.original_ctx = -5;
    BAD(128, &p, 0, "params->scaling.original_ctx = -5");
    p.scaling.kind = POSENC_ROPE_SCALING_LLAMA3;
    BAD(128, &p, 0, "LLAMA3");
    p.scaling.kind = POSENC_ROPE_SCALING_GGML_YARN;
    BAD(128, &p, 0, "GGML_YARN");
    p.scaling.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK;
    p.scaling.original_ctx = 4096;
    BAD(128, &p, 0, "params->scaling.seq_len = 0 and the sequence length is unknown");
    p.scaling.seq_len = -3;
    BAD(128, &p, 0, "params->scaling.seq_len = -3");
    BAD(128, &p, 100, "params->scaling.seq_len = -3"); /* the argument does not hide it */

    /* YaRN fields */
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_YARN;
    p.scaling.original_ctx = 4096;
    p.scaling.beta_fast = NAN;
    BAD(128, &p, 0, "params->scaling.beta_fast = nan");
    p.scaling.beta_fast = 0.0f;
    p.scaling.beta_slow = -1.0f;
    BAD(128, &p, 0, "params->scaling.beta_slow = -1");
    p.scaling.beta_slow = 0.0f;
    p.scaling.attention_factor = -1.0f;
    BAD(128, &p, 0, "params->scaling.attention_factor = -1");
    p.scaling.attention_factor = 0.0f;
    p.scaling.mscale_all_dim = INFINITY;
    BAD(128, &p, 0, "params->scaling.mscale_all_dim = inf");
    p.scaling.mscale_all_dim = 0.0f;
    p.scaling.mscale = -0.5f;
    BAD(128, &p, 0, "params->scaling.mscale = -0.5");
    p.scaling.mscale = 0.0f;
    p.freq_base = 1.0f;
    BAD(128, &p, 0, "params->freq_base = 1");
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_GGML_YARN;
    p.scaling.original_ctx = 4096;
    p.scaling.ext_factor = -0.5f;
    BAD(128, &p, 0, "params->scaling.ext_factor = -0.5");
    p.scaling.ext_factor = NAN;
    BAD(128, &p, 0, "params->scaling.ext_factor = nan");

    /* Llama 3 */
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_LLAMA3;
    p.scaling.original_ctx = 8192;
    p.scaling.low_freq_factor = 2.0f;
    p.scaling.high_freq_factor = 1.0f;
    BAD(128, &p, 0, "params->scaling.high_freq_factor = 1 must be > low_freq_factor = 2");
    p.scaling.low_freq_factor = 4.0f; /* default high 4 == low 4 */
    p.scaling.high_freq_factor = 0.0f;
    BAD(128, &p, 0, "params->scaling.high_freq_factor = 4");
    p.scaling.low_freq_factor = NAN;
    BAD(128, &p, 0, "params->scaling.low_freq_factor = nan");

    /* LongRoPE */
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_LONGROPE;
    p.scaling.original_ctx = 4096;
    p.scaling.seq_len = 10;
    p.scaling.factor = 32.0f;
    BAD(128, &p, 0, "params->scaling.short_factor is NULL");
    p.scaling.short_factor = ff;
    BAD(128, &p, 0, "params->scaling.long_factor is NULL");
    bad[7] = 0.0f;
    p.scaling.long_factor = bad;
    BAD(128, &p, 0, "params->scaling.long_factor[7] = 0");
    bad[7] = 1.0f;
    p.scaling.original_ctx = 1;
    BAD(128, &p, 0, "params->scaling.original_ctx = 1");

    /* NTK exponent n/(n-2) needs n > 2 */
    RESET();
    p.scaling.kind = POSENC_ROPE_SCALING_NTK;
    p.scaling.factor = 2.0f;
    p.n_dims = 2;
    BAD(128, &p, 0, "params->n_dims = 2");

    /* out NULL */
    assert_int_equal(pe_rope_table_build(th.ref, 128, NULL, 0, NULL), POSENC_ERR_INVALID_ARGUMENT);

    /* everything above was valid apart from the named field: one valid call per kind */
    float one[64];
    for (int j = 0; j < 64; j++)
        one[j] = 1.0f;
    for (int k = 0; k <= POSENC_ROPE_SCALING_GGML_YARN; k++) {
        RESET();
        p.scaling.kind = (posenc_rope_scaling_kind)k;
        if (k != POSENC_ROPE_SCALING_NONE)
            p.scaling.factor = 2.0f;
        if (k >= POSENC_ROPE_SCALING_DYNAMIC_NTK && k != POSENC_ROPE_SCALING_NTK)
            p.scaling.original_ctx = 4096;
        if (k == POSENC_ROPE_SCALING_LONGROPE) {
            p.scaling.short_factor = one;
            p.scaling.long_factor = one;
        }
        struct pe_rope_table t;
        posenc_status st = pe_rope_table_build(th.ref, 128, &p, 5000, &t);
        if (st != POSENC_OK)
            fail_msg("kind %d: %s", k, posenc_context_last_error(th.ref));
        pe_rope_table_free(&t);
    }
}

/* posenc_last_error(): the reason of a failed call without a context, per thread. */
struct other_thread {
    char seen[PE_ERR_MAX];
};
static void *read_last_error_elsewhere(void *arg)
{
    struct other_thread *o = arg;
    snprintf(o->seen, sizeof(o->seen), "%s", posenc_last_error());
    return NULL;
}

#define LAST_ERROR_HAS(what)                                                               \
    do {                                                                                   \
        if (!strstr(posenc_last_error(), (what)))                                          \
            fail_msg("line %d: posenc_last_error() = \"%s\", want \"%s\" in it", __LINE__,  \
                     posenc_last_error(), (what));                                         \
    } while (0)

static void test_last_error(void **state)
{
    (void)state;
    /* the example of the tool: a negative linear factor */
    struct posenc_rope_params rp = {.scaling = {.kind = POSENC_ROPE_SCALING_LINEAR, .factor = -2}};
    double freq[64];
    assert_int_equal(posenc_rope_freqs(128, &rp, freq, NULL, NULL), POSENC_ERR_INVALID_ARGUMENT);
    LAST_ERROR_HAS("params->scaling.factor = -2");
    /* a success leaves the message as it was (read it right after the failure) */
    rp.scaling.factor = 2;
    assert_int_equal(posenc_rope_freqs(128, &rp, freq, NULL, NULL), POSENC_OK);
    LAST_ERROR_HAS("params->scaling.factor = -2");
    /* thread-local: another thread has its own (empty) message */
    struct other_thread o;
    pthread_t th_id;
    assert_int_equal(pthread_create(&th_id, NULL, read_last_error_elsewhere, &o), 0);
    assert_int_equal(pthread_join(th_id, NULL), 0);
    assert_string_equal(o.seen, "");

    double slopes[4];
    assert_int_equal(posenc_alibi_slopes(0, NULL, slopes), POSENC_ERR_INVALID_ARGUMENT);
    LAST_ERROR_HAS("n_head = 0");
    struct posenc_alibi_params ap = {.max_bias = -1.0f};
    assert_int_equal(posenc_alibi_slopes(4, &ap, slopes), POSENC_ERR_INVALID_ARGUMENT);
    LAST_ERROR_HAS("max_bias");
    assert_int_equal(posenc_relbias_bucket(NULL, 3, NULL), POSENC_ERR_INVALID_ARGUMENT);
    LAST_ERROR_HAS("out_bucket is NULL");
    assert_int_equal(posenc_sinusoidal_freqs(7, NULL, freq), POSENC_ERR_INVALID_ARGUMENT);
    LAST_ERROR_HAS("7");
    assert_int_equal(posenc_sinusoidal_freqs(8, NULL, NULL), POSENC_ERR_INVALID_ARGUMENT);
    LAST_ERROR_HAS("out_freq is NULL");
    /* context creation: the same text as its out_error */
    struct posenc_context_params cp = {.backend = (posenc_backend_kind)99};
    posenc_context *c = NULL;
    char err[256];
    assert_int_equal(posenc_context_create(&cp, &c, err, sizeof err), POSENC_ERR_INVALID_ARGUMENT);
    assert_string_equal(posenc_last_error(), err);
    LAST_ERROR_HAS("params->backend = 99");
    int32_t count;
    assert_int_equal(posenc_backend_device_count(POSENC_BACKEND_AUTO, &count, NULL, 0),
                     POSENC_ERR_INVALID_ARGUMENT);
    LAST_ERROR_HAS("is not CPU, OPENCL or VULKAN");
    /* a NULL context: the ops say so */
    assert_int_equal(posenc_rope(NULL, NULL, NULL, NULL, NULL), POSENC_ERR_INVALID_ARGUMENT);
    LAST_ERROR_HAS("ctx is NULL");
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "rope_freq");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_freqs),
        cmocka_unit_test(test_linear_ntk_factors),
        cmocka_unit_test(test_yarn),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_longrope),
        cmocka_unit_test(test_dynamic_ntk),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_ggml_import),
        cmocka_unit_test(test_ggml_import_16_words),
        cmocka_unit_test(test_ggml_vs_hf_yarn),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_last_error),
    };
    rc = th_run("rope_freq", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
