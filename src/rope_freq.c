/*
 * rope_freq.c - the RoPE tables: parameter checks, defaults, and per rotated pair j its
 * frequency w_j and position stream, plus the magnitude (mscale), computed once on the
 * host in double for every mode and scaling kind (pe_rope_table_build). Also the public
 * posenc_rope_freqs() and the ggml op_params import posenc_rope_params_from_ggml().
 *
 * Semantics follow (read, not copied):
 *  - Hugging Face transformers modeling_rope_utils.py for LINEAR, DYNAMIC_NTK, YARN,
 *    LLAMA3 and LONGROPE (_compute_*_parameters);
 *  - ggml's CPU rope (ggml_rope_yarn_corr_dims, rope_yarn_ramp, rope_yarn,
 *    ggml_mrope_cache_init) for GGML_YARN, the M-RoPE / IMROPE / VISION stream maps and
 *    the op_params layout.
 *
 * Order of the steps for one pair j: base frequency (mode exponent, NTK base) ->
 * divided by freq_factors[j] (as ggml divides theta_extrap by src[2]) -> the scaling
 * kind's per-pair rule. A user `freqs` table replaces all of it.
 */
#include "internal.h"
#include "tensor.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PE_PI 3.14159265358979323846

/* Which posenc_rope_scaling fields a kind reads (all others must be 0). */
enum {
    USE_FACTOR = 1u << 0,
    USE_ORIG_CTX = 1u << 1,
    USE_SEQ_LEN = 1u << 2,
    USE_BETAS = 1u << 3,
    USE_ATTENTION = 1u << 4,
    USE_MSCALE = 1u << 5,
    USE_EXT = 1u << 6,
    USE_LLAMA3 = 1u << 7,
    USE_LONGROPE = 1u << 8,
    USE_TRUNCATE = 1u << 9
};

static const unsigned kind_uses[] = {
    [POSENC_ROPE_SCALING_NONE] = 0,
    [POSENC_ROPE_SCALING_LINEAR] = USE_FACTOR,
    [POSENC_ROPE_SCALING_NTK] = USE_FACTOR,
    [POSENC_ROPE_SCALING_DYNAMIC_NTK] = USE_FACTOR | USE_ORIG_CTX | USE_SEQ_LEN,
    [POSENC_ROPE_SCALING_YARN] =
        USE_FACTOR | USE_ORIG_CTX | USE_BETAS | USE_ATTENTION | USE_MSCALE | USE_TRUNCATE,
    [POSENC_ROPE_SCALING_LLAMA3] = USE_FACTOR | USE_ORIG_CTX | USE_LLAMA3,
    [POSENC_ROPE_SCALING_LONGROPE] = USE_FACTOR | USE_ORIG_CTX | USE_SEQ_LEN | USE_ATTENTION |
                                     USE_LONGROPE,
    [POSENC_ROPE_SCALING_GGML_YARN] = USE_FACTOR | USE_ORIG_CTX | USE_BETAS | USE_EXT,
};

static const char *const kind_names[] = {"NONE", "LINEAR", "NTK", "DYNAMIC_NTK",
                                         "YARN", "LLAMA3", "LONGROPE", "GGML_YARN"};
static const char *const mode_names[] = {"NORMAL", "NEOX", "MROPE", "IMROPE", "VISION"};

/* The params, checked, with every default applied. */
struct rope_res {
    posenc_rope_mode mode;
    int64_t n_dims, n_offs, n_pairs;
    int64_t n_freq;          /* the dim of the frequency sequence: n_dims (VISION: n_dims/2) */
    int64_t sections[4];
    int64_t sect_sum;
    const uint8_t *pair_stream;
    const float *freq_factors;
    const float *freqs;
    double base, attn_factor;
    posenc_rope_scaling_kind kind;
    double factor, beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim;
    double ext_factor, low_ff, high_ff;
    int64_t original_ctx, seq_len;
    const float *short_factor, *long_factor;
    int truncate;
};

#define BAD(...) return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, __VA_ARGS__)

/* v must be finite and >= 0 (0 selects the default). */
static posenc_status check_nonneg(posenc_context *ctx, const char *name, float v)
{
    if (!isfinite(v) || v < 0.0f)
        BAD("params->%s = %g must be finite and >= 0 (0 = default)", name, (double)v);
    return POSENC_OK;
}

/* Every entry of a [n] float table must be finite and > 0. */
static posenc_status check_table(posenc_context *ctx, const char *name, const float *t, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        if (!isfinite(t[j]) || t[j] <= 0.0f)
            BAD("params->%s[%lld] = %g must be finite and > 0", name, (long long)j,
                (double)t[j]);
    return POSENC_OK;
}

static posenc_status check_scaling(posenc_context *ctx, const struct posenc_rope_scaling *s,
                                   int32_t seq_len_arg, struct rope_res *r)
{
    if ((int)s->kind < 0 || s->kind > POSENC_ROPE_SCALING_GGML_YARN)
        BAD("params->scaling.kind = %d is not a posenc_rope_scaling_kind", (int)s->kind);
    const char *kn = kind_names[s->kind];
    unsigned use = kind_uses[s->kind];
    if (s->flags & ~(uint32_t)POSENC_ROPE_YARN_NO_TRUNCATE)
        BAD("params->scaling.flags = 0x%x has unknown bits", s->flags);
    if ((s->flags & POSENC_ROPE_YARN_NO_TRUNCATE) && !(use & USE_TRUNCATE))
        BAD("params->scaling.flags = 0x%x: POSENC_ROPE_YARN_NO_TRUNCATE is only used by YARN, "
            "not by scaling kind %s", s->flags, kn);

    /* fields the kind does not read must be 0 */
    const struct {
        const char *name;
        double v;
        unsigned bit;
    } fields[] = {
        {"factor", s->factor, USE_FACTOR},
        {"original_ctx", s->original_ctx, USE_ORIG_CTX},
        {"seq_len", s->seq_len, USE_SEQ_LEN},
        {"beta_fast", s->beta_fast, USE_BETAS},
        {"beta_slow", s->beta_slow, USE_BETAS},
        {"attention_factor", s->attention_factor, USE_ATTENTION},
        {"mscale", s->mscale, USE_MSCALE},
        {"mscale_all_dim", s->mscale_all_dim, USE_MSCALE},
        {"ext_factor", s->ext_factor, USE_EXT},
        {"low_freq_factor", s->low_freq_factor, USE_LLAMA3},
        {"high_freq_factor", s->high_freq_factor, USE_LLAMA3},
    };
    for (size_t i = 0; i < PE_ARRAY_SIZE(fields); i++)
        if (!(use & fields[i].bit) && fields[i].v != 0.0)
            BAD("params->scaling.%s = %g is not used by scaling kind %s (must be 0)",
                fields[i].name, fields[i].v, kn);
    if (!(use & USE_LONGROPE) && s->short_factor)
        BAD("params->scaling.short_factor is set but not used by scaling kind %s (must be NULL)",
            kn);
    if (!(use & USE_LONGROPE) && s->long_factor)
        BAD("params->scaling.long_factor is set but not used by scaling kind %s (must be NULL)",
            kn);

    r->kind = s->kind;
    r->factor = 1.0;
    if (use & USE_FACTOR) {
        if (!isfinite(s->factor) || s->factor < 0.0f)
            BAD("params->scaling.factor = %g must be finite and > 0 (0 = 1)", (double)s->factor);
        if (s->factor != 0.0f)
            r->factor = s->factor;
    }
    if (use & USE_ORIG_CTX) {
        /* GGML_YARN takes ggml's n_ctx_orig = 0 (what ggml_rope_ext(..., n_ctx_orig = 0,
         * ext_factor != 0) means: correction dims [0, -inf], see apply_scaling) */
        bool zero_ok = s->kind == POSENC_ROPE_SCALING_GGML_YARN;
        if (s->original_ctx < 0 || (s->original_ctx == 0 && !zero_ok))
            BAD("params->scaling.original_ctx = %d must be > 0 for scaling kind %s",
                s->original_ctx, kn);
        r->original_ctx = s->original_ctx;
    }
    if (use & USE_SEQ_LEN) {
        if (s->seq_len < 0)
            BAD("params->scaling.seq_len = %d must be >= 0", s->seq_len);
        r->seq_len = s->seq_len > 0 ? s->seq_len : seq_len_arg;
        if (r->seq_len <= 0)
            BAD("params->scaling.seq_len = 0 and the sequence length is unknown: scaling kind %s "
                "needs it (> 0)", kn);
    }
    if (use & USE_BETAS) {
        posenc_status st;
        if ((st = check_nonneg(ctx, "scaling.beta_fast", s->beta_fast)) != POSENC_OK ||
            (st = check_nonneg(ctx, "scaling.beta_slow", s->beta_slow)) != POSENC_OK)
            return st;
        r->beta_fast = s->beta_fast != 0.0f ? (double)s->beta_fast : 32.0;
        r->beta_slow = s->beta_slow != 0.0f ? (double)s->beta_slow : 1.0;
    }
    if (use & USE_ATTENTION) {
        PE_RETURN_IF_ERROR(check_nonneg(ctx, "scaling.attention_factor", s->attention_factor));
        r->attention_factor = s->attention_factor;
    }
    if (use & USE_MSCALE) {
        PE_RETURN_IF_ERROR(check_nonneg(ctx, "scaling.mscale", s->mscale));
        PE_RETURN_IF_ERROR(check_nonneg(ctx, "scaling.mscale_all_dim", s->mscale_all_dim));
        r->mscale = s->mscale;
        r->mscale_all_dim = s->mscale_all_dim;
    }
    if (use & USE_EXT) {
        if (!isfinite(s->ext_factor) || s->ext_factor < 0.0f)
            BAD("params->scaling.ext_factor = %g must be finite and >= 0",
                (double)s->ext_factor);
        r->ext_factor = s->ext_factor;
    }
    if (use & USE_LLAMA3) {
        PE_RETURN_IF_ERROR(check_nonneg(ctx, "scaling.low_freq_factor", s->low_freq_factor));
        PE_RETURN_IF_ERROR(check_nonneg(ctx, "scaling.high_freq_factor", s->high_freq_factor));
        r->low_ff = s->low_freq_factor != 0.0f ? (double)s->low_freq_factor : 1.0;
        r->high_ff = s->high_freq_factor != 0.0f ? (double)s->high_freq_factor : 4.0;
        if (!(r->high_ff > r->low_ff))
            BAD("params->scaling.high_freq_factor = %g must be > low_freq_factor = %g "
                "(after defaults 4 and 1)", r->high_ff, r->low_ff);
    }
    if (use & USE_LONGROPE) {
        if (!s->short_factor)
            BAD("params->scaling.short_factor is NULL: LONGROPE needs short_factor and "
                "long_factor [n_dims/2 = %lld]", (long long)r->n_pairs);
        if (!s->long_factor)
            BAD("params->scaling.long_factor is NULL: LONGROPE needs short_factor and "
                "long_factor [n_dims/2 = %lld]", (long long)r->n_pairs);
        PE_RETURN_IF_ERROR(check_table(ctx, "scaling.short_factor", s->short_factor, r->n_pairs));
        PE_RETURN_IF_ERROR(check_table(ctx, "scaling.long_factor", s->long_factor, r->n_pairs));
        r->short_factor = s->short_factor;
        r->long_factor = s->long_factor;
        if (r->attention_factor == 0.0 && r->factor > 1.0 && r->original_ctx < 2)
            BAD("params->scaling.original_ctx = %lld: LONGROPE's default attention factor "
                "divides by ln(original_ctx), so it must be >= 2 (or set attention_factor)",
                (long long)r->original_ctx);
    }
    if ((s->kind == POSENC_ROPE_SCALING_NTK || s->kind == POSENC_ROPE_SCALING_DYNAMIC_NTK) &&
        r->n_freq <= 2)
        BAD("params->n_dims = %lld: scaling kind %s needs a frequency dim > 2 (its exponent "
            "is n/(n-2))", (long long)r->n_dims, kn);
    if ((s->kind == POSENC_ROPE_SCALING_YARN || s->kind == POSENC_ROPE_SCALING_GGML_YARN) &&
        r->base == 1.0)
        BAD("params->freq_base = 1: scaling kind %s's correction dims divide by ln(base)", kn);
    r->truncate = !(s->flags & POSENC_ROPE_YARN_NO_TRUNCATE);
    return POSENC_OK;
}

/* Check `in` (NULL = defaults) for a head of head_dim dims and resolve it into *r. */
static posenc_status resolve(posenc_context *ctx, int64_t head_dim,
                             const struct posenc_rope_params *in, int32_t seq_len_arg,
                             struct rope_res *r)
{
    struct posenc_rope_params zero;
    memset(&zero, 0, sizeof(zero));
    const struct posenc_rope_params *p = in ? in : &zero;
    memset(r, 0, sizeof(*r));

    for (size_t i = 0; i < PE_ARRAY_SIZE(p->reserved); i++)
        if (p->reserved[i])
            BAD("params->reserved[%zu] = %u, must be 0", i, p->reserved[i]);
    if (p->flags & ~(uint32_t)POSENC_ROPE_BACKWARD)
        BAD("params->flags = 0x%x has unknown bits", p->flags);
    if (p->freq_factors_tensor) /* pe_rope_table_build reads it first when it can */
        BAD("params->freq_factors_tensor is set, but this call has no context to read it "
            "from: pass the factors as params->freq_factors (host memory) instead");
    if ((int)p->mode < 0 || p->mode > POSENC_ROPE_VISION)
        BAD("params->mode = %d is not a posenc_rope_mode", (int)p->mode);
    r->mode = p->mode;
    const char *mn = mode_names[p->mode];

    if (head_dim < 2)
        BAD("head_dim = %lld must be >= 2", (long long)head_dim);
    if (p->n_offs < 0)
        BAD("params->n_offs = %d must be >= 0", p->n_offs);
    if (p->n_offs >= head_dim)
        BAD("params->n_offs = %d leaves no dims to rotate in head_dim = %lld", p->n_offs,
            (long long)head_dim);
    int64_t avail = head_dim - p->n_offs;
    int64_t n = p->n_dims;
    if (n == 0) {
        n = avail;
        if (n > INT32_MAX - 1)
            BAD("params->n_dims = 0 selects head_dim - n_offs = %lld, which does not fit int32",
                (long long)n);
        if (n % 2 != 0)
            BAD("params->n_dims = 0 selects head_dim - n_offs = %lld, which is odd: n_dims "
                "must be even", (long long)n);
    } else {
        if (n < 0)
            BAD("params->n_dims = %d must be > 0 (0 = head_dim - n_offs)", p->n_dims);
        if (n % 2 != 0)
            BAD("params->n_dims = %d must be even", p->n_dims);
        if (n > avail)
            BAD("params->n_dims = %d > head_dim - n_offs = %lld", p->n_dims, (long long)avail);
    }
    r->n_dims = n;
    r->n_offs = p->n_offs;
    r->n_pairs = n / 2;
    r->n_freq = p->mode == POSENC_ROPE_VISION ? n / 2 : n;

    if (!isfinite(p->freq_base) || p->freq_base < 0.0f)
        BAD("params->freq_base = %g must be finite and > 0 (0 = 10000)", (double)p->freq_base);
    r->base = p->freq_base != 0.0f ? (double)p->freq_base : 10000.0;
    if (!isfinite(p->attn_factor) || p->attn_factor < 0.0f)
        BAD("params->attn_factor = %g must be finite and > 0 (0 = 1)", (double)p->attn_factor);
    r->attn_factor = p->attn_factor != 0.0f ? (double)p->attn_factor : 1.0;

    /* sections */
    int multi = p->mode == POSENC_ROPE_MROPE || p->mode == POSENC_ROPE_IMROPE ||
                p->mode == POSENC_ROPE_VISION;
    for (int i = 0; i < 4; i++) {
        if (!multi && p->sections[i] != 0)
            BAD("params->sections[%d] = %d: only MROPE, IMROPE and VISION use sections "
                "(must be 0 for %s)", i, p->sections[i], mn);
        if (p->sections[i] < 0)
            BAD("params->sections[%d] = %d must be >= 0", i, p->sections[i]);
        if (p->mode == POSENC_ROPE_VISION && i >= 2 && p->sections[i] != 0)
            BAD("params->sections[%d] = %d: VISION uses sections[0] and sections[1] only "
                "(must be 0)", i, p->sections[i]);
        r->sections[i] = p->sections[i];
        r->sect_sum += p->sections[i];
    }
    if (multi && r->sect_sum == 0)
        BAD("params->sections = {0, 0, 0, 0}: %s needs at least one non-zero section", mn);
    if (p->mode == POSENC_ROPE_VISION && r->sect_sum != r->n_pairs)
        BAD("params->sections[0] + params->sections[1] = %lld must equal n_dims/2 = %lld for "
            "VISION", (long long)r->sect_sum, (long long)r->n_pairs);

    /* per-pair tables */
    if (p->pair_stream) {
        for (int64_t j = 0; j < r->n_pairs; j++)
            if (p->pair_stream[j] > 3)
                BAD("params->pair_stream[%lld] = %u must be 0..3", (long long)j,
                    (unsigned)p->pair_stream[j]);
        r->pair_stream = p->pair_stream;
    }
    if (p->freqs) {
        if (p->freq_factors)
            BAD("params->freq_factors must be NULL when params->freqs is set (the user "
                "frequencies replace them)");
        if (p->scaling.kind != POSENC_ROPE_SCALING_NONE)
            BAD("params->scaling.kind = %d: params->freqs replaces the scaling, so the kind "
                "must be NONE", (int)p->scaling.kind);
        PE_RETURN_IF_ERROR(check_table(ctx, "freqs", p->freqs, r->n_pairs));
        r->freqs = p->freqs;
    }
    if (p->freq_factors) {
        PE_RETURN_IF_ERROR(check_table(ctx, "freq_factors", p->freq_factors, r->n_pairs));
        r->freq_factors = p->freq_factors;
    }
    return check_scaling(ctx, &p->scaling, seq_len_arg, r);
}

/* ---- the table -------------------------------------------------------------------- */

/* Position stream of pair j (ggml_mrope_cache_init's sector rules). */
static uint8_t pair_stream(const struct rope_res *r, int64_t j)
{
    if (r->pair_stream)
        return r->pair_stream[j];
    const int64_t *s = r->sections;
    int64_t sector = r->sect_sum > 0 ? j % r->sect_sum : 0;
    switch (r->mode) {
    case POSENC_ROPE_MROPE:
        if (sector < s[0])
            return 0;
        if (sector < s[0] + s[1])
            return 1;
        if (sector < s[0] + s[1] + s[2])
            return 2;
        return 3;
    case POSENC_ROPE_IMROPE: /* Qwen3-VL interleaved: t h w t h w ... then the 4th stream */
        if (sector % 3 == 1 && sector < 3 * s[1])
            return 1;
        if (sector % 3 == 2 && sector < 3 * s[2])
            return 2;
        if (sector % 3 == 0 && sector < 3 * s[0])
            return 0;
        return 3;
    case POSENC_ROPE_VISION:
        return j < s[0] ? 0 : 1;
    default:
        return 0;
    }
}

/* Index of pair j in its frequency sequence: j, or VISION's index inside its section. */
static int64_t freq_index(const struct rope_res *r, int64_t j)
{
    if (r->mode == POSENC_ROPE_VISION && j >= r->sections[0])
        return j - r->sections[0];
    return j;
}

/* HF find_correction_dim / ggml_rope_yarn_corr_dim: the dim (in pairs) whose wavelength
 * makes n_rot turns over orig_ctx positions. */
static double yarn_corr_dim(double n, double orig_ctx, double n_rot, double base)
{
    return n * log(orig_ctx / (n_rot * 2.0 * PE_PI)) / (2.0 * log(base));
}

/* HF get_mscale(scale, mscale) (YaRN / DeepSeek). */
static double yarn_get_mscale(double scale, double mscale)
{
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

/* Apply the scaling kind's per-pair rule to freq[] (base frequencies already divided by
 * freq_factors) and set the info fields it owns. `base` is the base after (dynamic) NTK. */
static void apply_scaling(const struct rope_res *r, double base, double *freq,
                          struct posenc_rope_info *info)
{
    const int64_t np = r->n_pairs;
    const double nf = (double)r->n_freq;
    const double f = r->factor;
    double mscale = 1.0;

    switch (r->kind) {
    case POSENC_ROPE_SCALING_LINEAR:
        for (int64_t j = 0; j < np; j++)
            freq[j] /= f;
        break;
    case POSENC_ROPE_SCALING_YARN: {
        /* HF _compute_yarn_parameters: blend w/f (interpolation) and w (extrapolation) by
         * a linear ramp between the correction dims. */
        double oc = (double)r->original_ctx;
        double lo = yarn_corr_dim(nf, oc, r->beta_fast, base);
        double hi = yarn_corr_dim(nf, oc, r->beta_slow, base);
        if (r->truncate) {
            lo = floor(lo);
            hi = ceil(hi);
        }
        lo = fmax(lo, 0.0);
        hi = fmin(hi, nf - 1.0);
        info->corr_low = lo;
        info->corr_high = hi;
        if (lo == hi)
            hi += 0.001; /* HF: prevent the singularity */
        for (int64_t j = 0; j < np; j++) {
            double ramp = fmin(fmax(((double)freq_index(r, j) - lo) / (hi - lo), 0.0), 1.0);
            double extrap = 1.0 - ramp; /* inv_freq_extrapolation_factor */
            freq[j] = freq[j] / f * (1.0 - extrap) + freq[j] * extrap;
        }
        if (r->attention_factor != 0.0)
            mscale = r->attention_factor;
        else if (r->mscale != 0.0 && r->mscale_all_dim != 0.0)
            mscale = yarn_get_mscale(f, r->mscale) / yarn_get_mscale(f, r->mscale_all_dim);
        else
            mscale = yarn_get_mscale(f, 1.0);
        if (r->mscale_all_dim != 0.0) {
            double m = yarn_get_mscale(f, r->mscale_all_dim);
            info->softmax_scale = m * m;
        }
        break;
    }
    case POSENC_ROPE_SCALING_LLAMA3: {
        /* HF _compute_llama3_parameters */
        double oc = (double)r->original_ctx;
        double low_wavelen = oc / r->low_ff, high_wavelen = oc / r->high_ff;
        for (int64_t j = 0; j < np; j++) {
            double w = freq[j], wavelen = 2.0 * PE_PI / w;
            if (wavelen < high_wavelen)
                continue; /* high frequency: kept */
            if (wavelen > low_wavelen) {
                freq[j] = w / f; /* low frequency: interpolated */
            } else {
                double smooth = (oc / wavelen - r->low_ff) / (r->high_ff - r->low_ff);
                freq[j] = (1.0 - smooth) * w / f + smooth * w;
            }
        }
        break;
    }
    case POSENC_ROPE_SCALING_LONGROPE: {
        /* HF _compute_longrope_parameters + longrope_frequency_update */
        info->seq_len = (int32_t)r->seq_len;
        info->long_factors = r->seq_len > r->original_ctx;
        const float *ext = info->long_factors ? r->long_factor : r->short_factor;
        for (int64_t j = 0; j < np; j++)
            freq[j] /= (double)ext[j];
        if (r->attention_factor != 0.0)
            mscale = r->attention_factor;
        else if (f <= 1.0)
            mscale = 1.0;
        else
            mscale = sqrt(1.0 + log(f) / log((double)r->original_ctx));
        break;
    }
    case POSENC_ROPE_SCALING_GGML_YARN: {
        /* ggml rope_yarn: corr dims in ggml's n_dims (VISION: half of posenc's), floor/ceil,
         * clamped; the ramp runs over the global pair index i0/2; blended by ext_factor. */
        double fs = 1.0 / f, oc = (double)r->original_ctx;
        double lo = fmax(0.0, floor(yarn_corr_dim(nf, oc, r->beta_fast, base)));
        double hi = fmin(nf - 1.0, ceil(yarn_corr_dim(nf, oc, r->beta_slow, base)));
        info->corr_low = lo;
        info->corr_high = hi;
        if (r->ext_factor != 0.0) {
            for (int64_t j = 0; j < np; j++) {
                double y = ((double)j - lo) / fmax(0.001, hi - lo);
                double mix = (1.0 - fmin(1.0, fmax(0.0, y))) * r->ext_factor;
                freq[j] = freq[j] * fs * (1.0 - mix) + freq[j] * mix;
            }
            mscale = 1.0 + 0.1 * log(1.0 / fs);
        } else {
            for (int64_t j = 0; j < np; j++)
                freq[j] *= fs;
        }
        break;
    }
    case POSENC_ROPE_SCALING_DYNAMIC_NTK:
        info->seq_len = (int32_t)r->seq_len;
        break;
    default: /* NONE; NTK only changes the base */
        break;
    }
    info->mscale = r->attn_factor * mscale;
}

/* Fill freq[n_pairs], stream[n_pairs] and *info from a resolved description. */
static void fill(const struct rope_res *r, double *freq, uint8_t *stream,
                 struct posenc_rope_info *info)
{
    const int64_t np = r->n_pairs;
    const double nf = (double)r->n_freq;
    const double f = r->factor;
    double base = r->base;
    int max_stream = 0;

    memset(info, 0, sizeof(*info));
    for (int64_t j = 0; j < np; j++) {
        stream[j] = pair_stream(r, j);
        if (stream[j] > max_stream)
            max_stream = stream[j];
    }
    if (r->kind == POSENC_ROPE_SCALING_NTK)
        base *= pow(f, nf / (nf - 2.0));
    if (r->kind == POSENC_ROPE_SCALING_DYNAMIC_NTK) {
        double L = (double)r->seq_len, oc = (double)r->original_ctx;
        if (L > oc) /* HF: seq_len = max(seq_len, original); at or below it the base stays */
            base *= pow(f * L / oc - (f - 1.0), nf / (nf - 2.0));
    }
    info->n_dims = (int32_t)r->n_dims;
    info->n_streams = max_stream + 1;
    info->base = base;
    info->softmax_scale = 1.0;

    if (r->freqs) { /* the user's table replaces base, exponents and scaling */
        for (int64_t j = 0; j < np; j++)
            freq[j] = (double)r->freqs[j];
        info->mscale = r->attn_factor;
        return;
    }
    for (int64_t j = 0; j < np; j++) {
        double w = pow(base, -2.0 * (double)freq_index(r, j) / nf);
        if (r->freq_factors)
            w /= (double)r->freq_factors[j];
        freq[j] = w;
    }
    apply_scaling(r, base, freq, info);
}

/* ---- freq_factors on the device ------------------------------------------------------ */

/*
 * params->freq_factors_tensor is read back once and kept per context: an entry is keyed on
 * the buffer's serial number, the view (offset, stride, count) and the buffer's write
 * generation, so any write posenc makes to the buffer invalidates it (internal.h). A
 * wrapped buffer is read every time.
 */
#define PE_FF_CACHE_ENTRIES 4

struct pe_ff_cache_entry {
    bool used;
    uint64_t buffer_id, generation, last_use;
    size_t offset;
    int64_t stride, n;
    float *values;
};

struct pe_ff_cache {
    uint64_t clock;
    struct pe_ff_cache_entry e[PE_FF_CACHE_ENTRIES];
};

static void ff_cache_free(posenc_context *ctx)
{
    if (!ctx->ff_cache)
        return;
    for (int k = 0; k < PE_FF_CACHE_ENTRIES; k++)
        free(ctx->ff_cache->e[k].values);
    free(ctx->ff_cache);
    ctx->ff_cache = NULL;
}

/* Read t's first n f32 values into *out_values (owned by the cache, or by the caller when
 * *out_owned: free it). */
static posenc_status ff_read(posenc_context *ctx, const posenc_tensor *t, int64_t n,
                             float **out_values, bool *out_owned)
{
    struct posenc_buffer *b = t->buffer;
    *out_owned = false;
    if (ctx->check_only) { /* the factors are data: ones check the rest */
        float *ones = malloc((size_t)n * sizeof(float));
        if (!ones)
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "out of host memory for %lld freq_factors", (long long)n);
        for (int64_t j = 0; j < n; j++)
            ones[j] = 1.0f;
        *out_values = ones;
        *out_owned = true;
        return POSENC_OK;
    }
    if (!b->wrapped && ctx->ff_cache) {
        for (int k = 0; k < PE_FF_CACHE_ENTRIES; k++) {
            struct pe_ff_cache_entry *e = &ctx->ff_cache->e[k];
            if (e->used && e->buffer_id == b->id && e->generation == b->generation &&
                e->offset == t->offset && e->stride == t->nb[0] && e->n >= n) {
                e->last_use = ++ctx->ff_cache->clock;
                *out_values = e->values;
                return POSENC_OK;
            }
        }
    }
    size_t span = (size_t)((n - 1) * t->nb[0]) + sizeof(float);
    unsigned char *img = malloc(span);
    float *v = malloc((size_t)n * sizeof(float));
    if (!img || !v) {
        free(img);
        free(v);
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory reading %lld freq_factors", (long long)n);
    }
    posenc_status st = posenc_buffer_read(b, t->offset, img, span);
    if (st != POSENC_OK) {
        free(img);
        free(v);
        return st;
    }
    for (int64_t j = 0; j < n; j++)
        memcpy(&v[j], img + (size_t)(j * t->nb[0]), sizeof(float));
    free(img);
    if (!b->wrapped && !ctx->ff_cache)
        ctx->ff_cache = calloc(1, sizeof(*ctx->ff_cache)); /* NULL: no cache, still correct */
    if (b->wrapped || !ctx->ff_cache) {
        *out_values = v;
        *out_owned = true;
        return POSENC_OK;
    }
    struct pe_ff_cache_entry *victim = &ctx->ff_cache->e[0];
    for (int k = 0; k < PE_FF_CACHE_ENTRIES; k++) {
        struct pe_ff_cache_entry *e = &ctx->ff_cache->e[k];
        if (!e->used || (victim->used && e->last_use < victim->last_use))
            victim = e;
    }
    free(victim->values);
    *victim = (struct pe_ff_cache_entry){true, b->id, b->generation, ++ctx->ff_cache->clock,
                                         t->offset, t->nb[0], n, v};
    *out_values = v;
    return POSENC_OK;
}

/* Build the table of params whose freq_factors live on the device. */
static posenc_status build_with_device_ff(posenc_context *ctx, int64_t head_dim,
                                          const struct posenc_rope_params *params,
                                          int32_t seq_len, struct pe_rope_table *out)
{
    const posenc_tensor *t = params->freq_factors_tensor;
    if (params->freq_factors || params->freqs)
        BAD("params->freq_factors_tensor must be NULL when params->%s is set",
            params->freq_factors ? "freq_factors" : "freqs");
    PE_RETURN_IF_ERROR(pe_check_tensor(ctx, "params->freq_factors_tensor", t, false, NULL));
    if (t->dtype != POSENC_DTYPE_F32)
        BAD("params->freq_factors_tensor->dtype = %s, must be f32", posenc_dtype_name(t->dtype));
    if (t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        BAD("params->freq_factors_tensor->ne = [%lld, %lld, %lld, %lld], must be [n, 1, 1, 1]",
            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    /* the pair count first (without the factors), then read exactly that many */
    struct posenc_rope_params p = *params;
    p.freq_factors_tensor = NULL;
    struct rope_res r;
    PE_RETURN_IF_ERROR(resolve(ctx, head_dim, &p, seq_len, &r));
    if (t->ne[0] < r.n_pairs)
        BAD("params->freq_factors_tensor->ne[0] = %lld, needs n_dims/2 = %lld values",
            (long long)t->ne[0], (long long)r.n_pairs);
    float *values = NULL;
    bool owned = false;
    PE_RETURN_IF_ERROR(ff_read(ctx, t, r.n_pairs, &values, &owned));
    p.freq_factors = values;
    posenc_status st = pe_rope_table_build(ctx, head_dim, &p, seq_len, out);
    if (owned)
        free(values);
    return st;
}

posenc_status pe_rope_table_build(posenc_context *ctx, int64_t head_dim,
                                  const struct posenc_rope_params *params, int32_t seq_len,
                                  struct pe_rope_table *out)
{
    if (!out)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "out is NULL");
    memset(out, 0, sizeof(*out));
    if (ctx && params && params->freq_factors_tensor)
        return build_with_device_ff(ctx, head_dim, params, seq_len, out);
    struct rope_res r;
    PE_RETURN_IF_ERROR(resolve(ctx, head_dim, params, seq_len, &r));

    size_t n = (size_t)r.n_pairs;
    double *freq = malloc(n * sizeof(*freq));
    float *freq_f32 = malloc(2 * n * sizeof(*freq_f32));
    uint8_t *stream = malloc(n);
    if (!freq || !freq_f32 || !stream) {
        free(freq);
        free(freq_f32);
        free(stream);
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory for a RoPE table of %lld pairs", (long long)n);
    }
    fill(&r, freq, stream, &out->info);
    int64_t bad_j = 0;
    if (!pe_freq_split(freq, (int64_t)n, freq_f32, freq_f32 + n, &bad_j)) {
        posenc_status st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                                    "pair %lld's frequency %g is out of the f32 range (the "
                                    "GPU kernels take it as f32 words): check freq_base, "
                                    "freq_factors, freqs and the scaling",
                                    (long long)bad_j, freq[bad_j]);
        free(freq);
        free(freq_f32);
        free(stream);
        return st;
    }
    out->n_pairs = r.n_pairs;
    out->n_dims = r.n_dims;
    out->n_offs = r.n_offs;
    out->mode = r.mode;
    out->freq = freq;
    out->freq_f32 = freq_f32;
    out->stream = stream;
    return POSENC_OK;
}

bool pe_freq_split(const double *freq, int64_t n, float *hi, float *lo, int64_t *bad_j)
{
    const double two_over_pi = 0.63661977236758134308; /* 2/pi, within 2^-54 relative */
    for (int64_t j = 0; j < n; j++) {
        const double v = freq[j] * two_over_pi; /* quarter turns per position */
        const float h = (float)v;
        if (!isfinite(h) || !isfinite((float)freq[j])) {
            if (bad_j)
                *bad_j = j;
            return false;
        }
        if (fabs(v) < (double)FLT_MIN) {
            hi[j] = 0.0f;
            lo[j] = 0.0f;
            continue;
        }
        hi[j] = h;
        const float l = (float)(v - (double)h);
        lo[j] = fabsf(l) < FLT_MIN ? 0.0f : l; /* no denormal words either */
    }
    return true;
}

void pe_rope_table_free(struct pe_rope_table *t)
{
    if (!t)
        return;
    free(t->freq);
    free(t->freq_f32);
    free(t->stream);
    memset(t, 0, sizeof(*t));
}

/*
 * The context's cache of resolved tables. A decode step calls posenc_rope with the same
 * params every time; resolving them again (a pow per pair, the checks, three mallocs) was
 * about a third of the host instructions of a decode call on OpenCL. An entry is keyed by
 * head_dim, the sequence length used and the bytes of the whole params struct, so a field
 * added to the struct joins the key by itself (padding bytes that differ between calls
 * only cost a miss). Params with pointer fields (pair_stream, freq_factors, freqs,
 * LongRoPE's factor arrays) are not cached, as the arrays they point to may change between
 * calls. A hit returns the same table the same params resolved to before: resolution is a
 * pure function of the key. Least recently used entries are replaced, so that the two
 * tables of posenc_rope_rerotate are both alive at once. One thread at a time per context,
 * as every context call.
 */
#define PE_ROPE_CACHE_ENTRIES 4

struct pe_rope_cache_entry {
    bool used;
    bool has_params;
    int32_t seq_len;
    int64_t head_dim;
    uint64_t last_use;
    struct posenc_rope_params params; /* a byte copy of the caller's (when has_params) */
    struct pe_rope_table table;
};

struct pe_rope_cache {
    uint64_t clock;
    struct pe_rope_cache_entry e[PE_ROPE_CACHE_ENTRIES];
};

static bool rope_cacheable(const struct posenc_rope_params *p)
{
    return !p || !(p->pair_stream || p->freq_factors || p->freqs || p->scaling.short_factor ||
                   p->scaling.long_factor || p->freq_factors_tensor);
}

static bool rope_entry_matches(const struct pe_rope_cache_entry *e, int64_t head_dim,
                               const struct posenc_rope_params *p, int32_t seq_len)
{
    return e->used && e->head_dim == head_dim && e->seq_len == seq_len &&
           e->has_params == (p != NULL) && (!p || memcmp(&e->params, p, sizeof(*p)) == 0);
}

posenc_status pe_rope_table_cached(posenc_context *ctx, int64_t head_dim,
                                   const struct posenc_rope_params *params, int32_t seq_len,
                                   struct pe_rope_table *out, bool *owned)
{
    *owned = true;
    if (!ctx || !rope_cacheable(params))
        return pe_rope_table_build(ctx, head_dim, params, seq_len, out);
    if (!ctx->rope_cache) {
        ctx->rope_cache = calloc(1, sizeof(*ctx->rope_cache));
        if (!ctx->rope_cache) /* no cache: still correct */
            return pe_rope_table_build(ctx, head_dim, params, seq_len, out);
    }
    struct pe_rope_cache *c = ctx->rope_cache;
    struct pe_rope_cache_entry *victim = &c->e[0];
    for (int k = 0; k < PE_ROPE_CACHE_ENTRIES; k++) {
        struct pe_rope_cache_entry *e = &c->e[k];
        if (rope_entry_matches(e, head_dim, params, seq_len)) {
            e->last_use = ++c->clock;
            *out = e->table;
            *owned = false;
            return POSENC_OK;
        }
        if (!e->used || (victim->used && e->last_use < victim->last_use))
            victim = e;
    }
    struct pe_rope_table t;
    PE_RETURN_IF_ERROR(pe_rope_table_build(ctx, head_dim, params, seq_len, &t));
    if (victim->used)
        pe_rope_table_free(&victim->table);
    victim->used = true;
    victim->has_params = params != NULL;
    victim->seq_len = seq_len;
    victim->head_dim = head_dim;
    if (params)
        memcpy(&victim->params, params, sizeof(*params));
    victim->last_use = ++c->clock;
    victim->table = t;
    *out = t;
    *owned = false;
    return POSENC_OK;
}

void pe_rope_cache_free(posenc_context *ctx)
{
    if (!ctx)
        return;
    ff_cache_free(ctx);
    if (!ctx->rope_cache)
        return;
    for (int k = 0; k < PE_ROPE_CACHE_ENTRIES; k++)
        if (ctx->rope_cache->e[k].used)
            pe_rope_table_free(&ctx->rope_cache->e[k].table);
    free(ctx->rope_cache);
    ctx->rope_cache = NULL;
}

posenc_status posenc_rope_freqs(int64_t head_dim, const struct posenc_rope_params *params,
                                double *out_freq, uint8_t *out_stream,
                                struct posenc_rope_info *out_info)
{
    struct pe_rope_table t;
    PE_RETURN_IF_ERROR(pe_rope_table_build(NULL, head_dim, params, 0, &t));
    if (out_freq)
        memcpy(out_freq, t.freq, (size_t)t.n_pairs * sizeof(*out_freq));
    if (out_stream)
        memcpy(out_stream, t.stream, (size_t)t.n_pairs);
    if (out_info)
        *out_info = t.info;
    pe_rope_table_free(&t);
    return POSENC_OK;
}

/* ---- ggml op_params ------------------------------------------------------------------ */

/* ggml's GGML_ROPE_TYPE_* values */
enum {
    GGML_MODE_NORMAL = 0,
    GGML_MODE_NEOX = 2,
    GGML_MODE_MROPE = 8,
    GGML_MODE_VISION = 24,
    GGML_MODE_IMROPE = 40
};

posenc_status posenc_rope_params_from_ggml(const int32_t *op_params, size_t n_params,
                                           int64_t head_dim, const float *freq_factors,
                                           struct posenc_rope_params *out)
{
    if (!op_params || !out || (n_params != 15 && n_params != 16))
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "%s",
                        !op_params ? "op_params is NULL"
                        : !out     ? "out is NULL"
                                   : "n_params must be 15 or 16 (ggml's ROPE op_params words)");
    struct posenc_rope_params p;
    memset(&p, 0, sizeof(p));
    const int32_t n_dims = op_params[1], mode = op_params[2], n_ctx_orig = op_params[4];
    const int32_t n_offs = n_params == 16 ? op_params[15] : 0;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    memcpy(&freq_base, &op_params[5], sizeof(float));
    memcpy(&freq_scale, &op_params[6], sizeof(float));
    memcpy(&ext_factor, &op_params[7], sizeof(float));
    memcpy(&attn_factor, &op_params[8], sizeof(float));
    memcpy(&beta_fast, &op_params[9], sizeof(float));
    memcpy(&beta_slow, &op_params[10], sizeof(float));

    switch (mode) {
    case GGML_MODE_NORMAL: p.mode = POSENC_ROPE_NORMAL; break;
    case GGML_MODE_NEOX: p.mode = POSENC_ROPE_NEOX; break;
    case GGML_MODE_MROPE: p.mode = POSENC_ROPE_MROPE; break;
    case GGML_MODE_IMROPE: p.mode = POSENC_ROPE_IMROPE; break;
    case GGML_MODE_VISION: p.mode = POSENC_ROPE_VISION; break;
    default:
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                        "op_params[2] (mode) = %d is not a ggml RoPE mode (0, 2, 8, 24, 40)", mode);
    }
    /* ggml's 0 values have no posenc meaning (posenc reads 0 as "default") */
    if (n_dims <= 0 || n_offs < 0 || !(freq_base > 0.0f) || !isfinite(freq_base) ||
        !(attn_factor > 0.0f) || !isfinite(attn_factor))
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                        "op_params: n_dims = %d, n_offs = %d, freq_base = %g, attn_factor = %g: "
                        "n_dims must be > 0, n_offs >= 0, freq_base and attn_factor finite and > 0",
                        n_dims, n_offs, (double)freq_base, (double)attn_factor);
    bool uses_sections = p.mode == POSENC_ROPE_MROPE || p.mode == POSENC_ROPE_IMROPE ||
                         p.mode == POSENC_ROPE_VISION;
    /* sections ggml does not read. (VISION's sections[2..3] are read by ggml but cannot
     * change the result: posenc requires sections[0] + sections[1] = the pairs, so no
     * pair's sector reaches them.) */
    for (int i = 0; i < 4; i++)
        if (op_params[11 + i] != 0 && !uses_sections)
            return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                            "op_params[%d] (sections[%d]) = %d, must be 0 in mode %d", 11 + i, i,
                            op_params[11 + i], mode);
    if (p.mode == POSENC_ROPE_VISION) {
        if (n_dims > INT32_MAX / 2)
            return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                            "op_params[1] (n_dims) = %d is too large", n_dims);
        p.n_dims = 2 * n_dims; /* ggml VISION: n_dims = ne0/2, the whole head rotates */
        p.sections[0] = op_params[11];
        p.sections[1] = op_params[12];
    } else {
        p.n_dims = n_dims;
        if (p.mode == POSENC_ROPE_MROPE || p.mode == POSENC_ROPE_IMROPE)
            for (int i = 0; i < 4; i++)
                p.sections[i] = op_params[11 + i];
    }
    p.n_offs = n_offs;
    p.freq_base = freq_base;
    p.attn_factor = attn_factor;
    if (freq_scale != 1.0f || ext_factor != 0.0f) {
        if (!isfinite(freq_scale) || freq_scale <= 0.0f || !isfinite(ext_factor))
            return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                            "op_params: freq_scale = %g, ext_factor = %g: freq_scale must be "
                            "finite and > 0, ext_factor finite",
                            (double)freq_scale, (double)ext_factor);
        p.scaling.factor = 1.0f / freq_scale;
        if (!isfinite(p.scaling.factor))
            return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                            "op_params[6] (freq_scale) = %g: 1/freq_scale overflows",
                            (double)freq_scale);
        if (n_ctx_orig == 0 && ext_factor == 0.0f) {
            p.scaling.kind = POSENC_ROPE_SCALING_LINEAR; /* theta = freq_scale * theta */
        } else {
            /* beta 0 is a value to ggml and "the default" to posenc */
            if (beta_fast == 0.0f || beta_slow == 0.0f || n_ctx_orig < 0)
                return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                                "op_params: YaRN with beta_fast = %g, beta_slow = %g, "
                                "n_ctx_orig = %d: the betas must not be 0, n_ctx_orig >= 0",
                                (double)beta_fast, (double)beta_slow, n_ctx_orig);
            p.scaling.kind = POSENC_ROPE_SCALING_GGML_YARN;
            p.scaling.original_ctx = n_ctx_orig;
            p.scaling.ext_factor = ext_factor;
            p.scaling.beta_fast = beta_fast;
            p.scaling.beta_slow = beta_slow;
        }
    }
    p.freq_factors = freq_factors;

    struct rope_res r;
    PE_RETURN_IF_ERROR(resolve(NULL, head_dim, &p, 0, &r));
    *out = p;
    return POSENC_OK;
}
