/*
 * encodings.c - the options of `table` and `heatmap`, and the grids they show, computed
 * through the library on the chosen backend:
 *
 *   sinusoidal  posenc_sinusoidal: rows = positions, columns = dimensions
 *   rope        angle pos*w_j from posenc_rope_freqs (host, double), or cos/sin of it read
 *               back from posenc_rope rotating unit pairs (1, 0) on the backend:
 *               rows = positions, columns = pairs j
 *   alibi       posenc_alibi with logits NULL: rows = queries, columns = keys, one head
 *   t5          posenc_relbias with table[b] = b, so each cell shows the bucket of k - q
 */
#include "tool.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Options, as bits of enc_opts.seen, and the kinds each one applies to. */
enum {
    OPT_DIM = 1u << 0,
    OPT_POS = 1u << 1,
    OPT_BASE = 1u << 2,
    OPT_LAYOUT = 1u << 3,
    OPT_FREQ_SHIFT = 1u << 4,
    OPT_VALUE = 1u << 5,
    OPT_SCALING = 1u << 6,
    OPT_FACTOR = 1u << 7,
    OPT_ORIG_CTX = 1u << 8,
    OPT_HEADS = 1u << 9,
    OPT_HEAD = 1u << 10,
    OPT_MAX_BIAS = 1u << 11,
    OPT_CAUSAL = 1u << 12,
    OPT_SYMMETRIC = 1u << 13,
    OPT_BUCKETS = 1u << 14,
    OPT_MAX_DISTANCE = 1u << 15,
    OPT_DTYPE = 1u << 16,
};

#define K_SIN (1u << ENC_SINUSOIDAL)
#define K_ROPE (1u << ENC_ROPE)
#define K_ALIBI (1u << ENC_ALIBI)
#define K_T5 (1u << ENC_T5)

static const struct {
    unsigned bit;
    const char *name;
    unsigned kinds;
} opt_table[] = {
    {OPT_DIM, "--dim", K_SIN | K_ROPE},
    {OPT_POS, "--pos", K_SIN | K_ROPE},
    {OPT_BASE, "--base", K_SIN | K_ROPE},
    {OPT_LAYOUT, "--layout", K_SIN},
    {OPT_FREQ_SHIFT, "--freq-shift", K_SIN},
    {OPT_VALUE, "--value", K_ROPE},
    {OPT_SCALING, "--scaling", K_ROPE},
    {OPT_FACTOR, "--factor", K_ROPE},
    {OPT_ORIG_CTX, "--orig-ctx", K_ROPE},
    {OPT_HEADS, "--heads", K_ALIBI},
    {OPT_HEAD, "--head", K_ALIBI},
    {OPT_MAX_BIAS, "--max-bias", K_ALIBI},
    {OPT_CAUSAL, "--causal", K_ALIBI | K_T5},
    {OPT_SYMMETRIC, "--symmetric", K_ALIBI},
    {OPT_BUCKETS, "--buckets", K_T5},
    {OPT_MAX_DISTANCE, "--max-distance", K_T5},
    {OPT_DTYPE, "--dtype", K_SIN | K_ROPE | K_ALIBI | K_T5},
};

static const char *const kind_names[ENC_KIND_COUNT] = {"sinusoidal", "rope", "alibi", "t5"};

const char enc_options_help[] =
    "  --kind sinusoidal|rope|alibi|t5   what to show (required)\n"
    "  --backend cpu|opencl|vulkan|auto  where to compute (default cpu)\n"
    "  --dtype f32|f16                   storage of the op's output (default f32)\n"
    "  --len N                           positions 0..N-1 (biases: N queries x N keys)\n"
    "  --quiet                           no progress on stderr (shown for large grids,\n"
    "                                    only when stderr is a terminal)\n"
    "sinusoidal and rope:\n"
    "  --dim D                           model / head dimension (even)\n"
    "  --pos SPEC                        positions instead of --len: 2 | 0:64 | 0:64:8 |\n"
    "                                    1,5,9.5 (fractional positions are time stamps)\n"
    "  --base F                          frequency base > 1 (default 10000)\n"
    "sinusoidal:\n"
    "  --layout interleaved|half-split|cos-first   (default interleaved: the paper)\n"
    "  --freq-shift F                    w_i = base^(-i/(d/2 - F)) (default 0)\n"
    "rope (columns are pairs j < d/2):\n"
    "  --value angle|cos|sin             angle pos*w_j from posenc_rope_freqs (default), or\n"
    "                                    cos/sin read back from posenc_rope on the backend\n"
    "  --scaling none|linear|ntk|dynamic|yarn|llama3|longrope|ggml-yarn\n"
    "                                    frequency scaling (default none); longrope: short\n"
    "                                    factors 1, long factors factor^(j/(d/2-1)); ggml-yarn:\n"
    "                                    ext_factor 1, beta_fast 32, beta_slow 1\n"
    "  --factor F                        scaling factor s > 0 (default 4)\n"
    "  --orig-ctx N                      original context of dynamic, yarn, llama3,\n"
    "                                    longrope, ggml-yarn (default 4096)\n"
    "alibi (rows are queries, columns keys):\n"
    "  --heads H  --head h               head count (default 8) and the head shown (0)\n"
    "  --max-bias F                      > 0 (default 8: the paper's slopes m_h =\n"
    "                                    2^(-8(h+1)/H)); ggml's max_bias 0, \"no ALiBi\", has\n"
    "                                    no picture\n"
    "  --causal  --symmetric             mask keys after the query / bias -m|q-k|\n"
    "t5 (the bucket of k - q through posenc_relbias with table[b] = b):\n"
    "  --buckets N  --max-distance N     (default 32 and 128)   --causal: decoder buckets\n";

void enc_opts_init(struct enc_opts *o, int64_t dim, int64_t len)
{
    memset(o, 0, sizeof(*o));
    o->kind = -1;
    o->backend = POSENC_BACKEND_CPU;
    o->dtype = POSENC_DTYPE_F32;
    o->dim = dim;
    o->len = len;
    o->value = ENC_VALUE_ANGLE;
    o->heads = 8;
    o->scaling = POSENC_ROPE_SCALING_NONE;
    o->factor = TOOL_DEFAULT_FACTOR;
    o->orig_ctx = TOOL_DEFAULT_ORIG_CTX;
}

static int parse_int_opt(const char *cmd, const char *opt, const char *s, int64_t lo,
                         int64_t hi, int64_t *out)
{
    if (!tool_parse_i64(s, out) || *out < lo || *out > hi) {
        tool_error(cmd, "%s must be an integer in [%lld, %lld], got '%s'", opt, (long long)lo,
                   (long long)hi, s);
        return 0;
    }
    return 1;
}

static int parse_float_opt(const char *cmd, const char *opt, const char *s, float *out)
{
    double v;
    if (!tool_parse_double(s, &v) || fabs(v) > 3.0e38) {
        tool_error(cmd, "%s must be a number, got '%s'", opt, s);
        return 0;
    }
    if (v != 0.0 && !(fabs((double)(float)v) >= FLT_MIN)) {
        tool_error(cmd, "%s = %s is too small for a 32-bit float (it would become 0)", opt, s);
        return 0;
    }
    *out = (float)v;
    return 1;
}

int enc_parse_opt(const char *cmd, struct enc_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    unsigned bit = 0;
    for (size_t k = 0; k < sizeof(opt_table) / sizeof(opt_table[0]); k++)
        if (!strcmp(a, opt_table[k].name))
            bit = opt_table[k].bit;
    int is_flag = bit == OPT_CAUSAL || bit == OPT_SYMMETRIC;
    if (!strcmp(a, "--quiet")) {
        o->quiet = 1;
        return 1;
    }
    if (!bit && strcmp(a, "--kind") && strcmp(a, "--backend") && strcmp(a, "--len"))
        return 0;
    const char *v = is_flag ? "" : tool_value(cmd, argc, argv, i);
    if (!v)
        return -1;
    o->seen |= bit;
    int64_t n;
    if (!strcmp(a, "--kind")) {
        o->kind = -1;
        for (int k = 0; k < ENC_KIND_COUNT; k++)
            if (!strcmp(v, kind_names[k]))
                o->kind = k;
        if (o->kind < 0) {
            tool_error(cmd, "unknown --kind '%s' (sinusoidal, rope, alibi, t5)", v);
            return -1;
        }
    } else if (!strcmp(a, "--backend")) {
        if (!tool_parse_backend(v, &o->backend)) {
            tool_error(cmd, "unknown backend '%s' (cpu, opencl, vulkan, auto)", v);
            return -1;
        }
    } else if (!strcmp(a, "--len")) {
        if (!parse_int_opt(cmd, a, v, 1, 1 << 20, &o->len))
            return -1;
        o->pos_spec = NULL;
    } else if (bit == OPT_DTYPE) {
        if (!strcmp(v, "f32"))
            o->dtype = POSENC_DTYPE_F32;
        else if (!strcmp(v, "f16"))
            o->dtype = POSENC_DTYPE_F16;
        else {
            tool_error(cmd, "unknown --dtype '%s' (f32, f16)", v);
            return -1;
        }
    } else if (bit == OPT_DIM) {
        if (!parse_int_opt(cmd, a, v, 2, 1 << 16, &o->dim))
            return -1;
        if (o->dim % 2) {
            tool_error(cmd, "--dim must be even, got %lld", (long long)o->dim);
            return -1;
        }
    } else if (bit == OPT_POS) {
        o->pos_spec = v;
    } else if (bit == OPT_BASE) {
        if (!parse_float_opt(cmd, a, v, &o->sin.base))
            return -1;
        if (!(o->sin.base > 1.0f)) {
            tool_error(cmd, "--base must be a number > 1, got '%s'", v);
            return -1;
        }
        o->rope.freq_base = o->sin.base;
    } else if (bit == OPT_LAYOUT) {
        if (!strcmp(v, "interleaved"))
            o->sin.layout = POSENC_SIN_INTERLEAVED;
        else if (!strcmp(v, "half-split"))
            o->sin.layout = POSENC_SIN_HALF_SPLIT;
        else if (!strcmp(v, "cos-first"))
            o->sin.layout = POSENC_SIN_HALF_SPLIT_COS_FIRST;
        else {
            tool_error(cmd, "unknown --layout '%s' (interleaved, half-split, cos-first)", v);
            return -1;
        }
    } else if (bit == OPT_FREQ_SHIFT) {
        if (!parse_float_opt(cmd, a, v, &o->sin.freq_shift))
            return -1;
    } else if (bit == OPT_VALUE) {
        if (!strcmp(v, "angle"))
            o->value = ENC_VALUE_ANGLE;
        else if (!strcmp(v, "cos"))
            o->value = ENC_VALUE_COS;
        else if (!strcmp(v, "sin"))
            o->value = ENC_VALUE_SIN;
        else {
            tool_error(cmd, "unknown --value '%s' (angle, cos, sin)", v);
            return -1;
        }
    } else if (bit == OPT_SCALING) {
        if (!tool_parse_scaling(v, &o->scaling)) {
            tool_error(cmd, "unknown --scaling '%s' (%s)", v, tool_scaling_list);
            return -1;
        }
    } else if (bit == OPT_FACTOR) {
        if (!tool_parse_factor(cmd, a, v, &o->factor))
            return -1;
    } else if (bit == OPT_ORIG_CTX) {
        if (!parse_int_opt(cmd, a, v, 1, INT32_MAX, &o->orig_ctx))
            return -1;
    } else if (bit == OPT_HEADS) {
        if (!parse_int_opt(cmd, a, v, 1, 4096, &o->heads))
            return -1;
    } else if (bit == OPT_HEAD) {
        if (!parse_int_opt(cmd, a, v, 0, 4095, &o->head))
            return -1;
    } else if (bit == OPT_MAX_BIAS) {
        if (!parse_float_opt(cmd, a, v, &o->alibi.max_bias))
            return -1;
        if (!(o->alibi.max_bias > 0.0f)) {
            tool_error(cmd, "--max-bias must be > 0, got '%s' (the slopes are "
                            "2^(-max_bias*(h+1)/H); ggml's max_bias 0 means no ALiBi at all, "
                            "which has no bias to show)", v);
            return -1;
        }
    } else if (bit == OPT_CAUSAL) {
        o->alibi.causal = 1;
        o->t5.causal = 1;
    } else if (bit == OPT_SYMMETRIC) {
        o->alibi.symmetric = 1;
    } else if (bit == OPT_BUCKETS) {
        if (!parse_int_opt(cmd, a, v, 2, 1 << 16, &n))
            return -1;
        o->t5.num_buckets = (int32_t)n;
    } else if (bit == OPT_MAX_DISTANCE) {
        if (!parse_int_opt(cmd, a, v, 1, INT32_MAX, &n))
            return -1;
        o->t5.max_distance = (int32_t)n;
    }
    return 1;
}

static int parse_positions(const char *cmd, const char *spec, double **out, int64_t *out_n);

int enc_check(const char *cmd, struct enc_opts *o)
{
    if (o->kind < 0) {
        tool_error(cmd, "--kind is required (sinusoidal, rope, alibi, t5)");
        return 0;
    }
    for (size_t k = 0; k < sizeof(opt_table) / sizeof(opt_table[0]); k++)
        if ((o->seen & opt_table[k].bit) && !(opt_table[k].kinds & (1u << o->kind))) {
            tool_error(cmd, "%s does not apply to --kind %s", opt_table[k].name,
                       kind_names[o->kind]);
            return 0;
        }
    if (o->kind == ENC_ROPE && o->value == ENC_VALUE_ANGLE && (o->seen & OPT_DTYPE)) {
        tool_error(cmd, "--dtype applies to --value cos|sin only (angles are host doubles)");
        return 0;
    }
    if (o->kind == ENC_ROPE && o->scaling == POSENC_ROPE_SCALING_NONE &&
        (o->seen & (OPT_FACTOR | OPT_ORIG_CTX))) {
        tool_error(cmd, "--factor and --orig-ctx need --scaling (%s)", tool_scaling_list);
        return 0;
    }
    if (o->kind == ENC_ROPE && (o->seen & OPT_ORIG_CTX) && !tool_scaling_uses_orig(o->scaling)) {
        tool_error(cmd, "--orig-ctx does not apply to --scaling %s (only to dynamic, yarn, "
                        "llama3, longrope, ggml-yarn)", tool_scaling_name(o->scaling));
        return 0;
    }
    if (o->pos_spec) { /* parsed again by enc_compute; here only to fail as a usage error */
        double *p;
        int64_t n;
        if (!parse_positions(cmd, o->pos_spec, &p, &n))
            return 0;
        free(p);
    }
    if (o->kind == ENC_ALIBI && o->head >= o->heads) {
        tool_error(cmd, "--head %lld is not below --heads %lld", (long long)o->head,
                   (long long)o->heads);
        return 0;
    }
    return 1;
}

/* ---- positions ----------------------------------------------------------------------- */

/* Parse "2", "0:64", "0:64:8", "1,5,9.5" (items may be ranges) into a malloc'd array. */
static int parse_positions(const char *cmd, const char *spec, double **out, int64_t *out_n)
{
    size_t cap = 16, n = 0;
    double *p = malloc(cap * sizeof(*p));
    char *copy = malloc(strlen(spec) + 1);
    if (!p || !copy) {
        free(p);
        free(copy);
        tool_error(cmd, "out of memory");
        return 0;
    }
    strcpy(copy, spec);
    int ok = 1;
    char *save = NULL;
    size_t len = strlen(spec);
    if (len == 0 || spec[0] == ',' || spec[len - 1] == ',' || strstr(spec, ",,"))
        ok = 0;
    for (char *item = strtok_r(copy, ",", &save); ok && item; item = strtok_r(NULL, ",", &save)) {
        double f[3] = {0, 0, 1};
        int nf = 0;
        char *save2 = NULL;
        for (char *t = strtok_r(item, ":", &save2); t; t = strtok_r(NULL, ":", &save2)) {
            if (nf == 3 || !tool_parse_double(t, &f[nf])) {
                ok = 0;
                break;
            }
            nf++;
        }
        if (!ok || nf == 0 || (nf >= 2 && (f[2] <= 0 || f[1] < f[0]))) {
            ok = 0;
            break;
        }
        size_t count = nf == 1 ? 1 : (size_t)ceil((f[1] - f[0]) / f[2] - 1e-9);
        if (count > ((size_t)1 << 20) || n + count > ((size_t)1 << 20)) {
            ok = 0;
            break;
        }
        for (size_t k = 0; k < count; k++) {
            if (n == cap) {
                double *q = realloc(p, 2 * cap * sizeof(*p));
                if (!q) {
                    ok = 0;
                    break;
                }
                p = q;
                cap *= 2;
            }
            p[n++] = f[0] + (double)k * f[2];
        }
    }
    free(copy);
    if (!ok || n == 0) {
        tool_error(cmd, "bad --pos '%s' (examples: 2 | 0:64 | 0:64:8 | 1,5,9.5; at most 2^20)",
                   spec);
        free(p);
        return 0;
    }
    for (size_t k = 0; k < n; k++)
        if (p[k] < 0 || p[k] > 16777216.0) {
            tool_error(cmd, "--pos: position %g is outside [0, 2^24]", p[k]);
            free(p);
            return 0;
        }
    *out = p;
    *out_n = (int64_t)n;
    return 1;
}

/* ---- computing through the library -------------------------------------------------- */

#define lib_failed tool_lib_failed

/* A buffer on ctx holding positions p[0..n-1] as I32 (all integers) or F32 values. */
static posenc_status upload_positions(posenc_context *ctx, const double *p, int64_t n,
                                      posenc_buffer **out_buf, posenc_tensor *out_t)
{
    int integer = 1;
    for (int64_t i = 0; i < n; i++)
        if (p[i] != floor(p[i]))
            integer = 0;
    void *host = malloc((size_t)n * 4);
    if (!host)
        return POSENC_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++) {
        if (integer)
            ((int32_t *)host)[i] = (int32_t)p[i];
        else
            ((float *)host)[i] = (float)p[i];
    }
    posenc_status st = posenc_buffer_create(ctx, (size_t)n * 4, out_buf);
    if (st == POSENC_OK)
        st = posenc_buffer_write(*out_buf, 0, host, (size_t)n * 4);
    free(host);
    *out_t = posenc_tensor_contiguous(*out_buf, 0, integer ? POSENC_DTYPE_I32 : POSENC_DTYPE_F32,
                                      n, 1, 1, 1);
    return st;
}

/* Read `n` elements of `dtype` from b into doubles. */
static posenc_status read_values(posenc_buffer *b, posenc_dtype dtype, int64_t n, double *out)
{
    size_t es = posenc_dtype_size(dtype);
    void *host = malloc((size_t)n * es);
    if (!host)
        return POSENC_ERR_OUT_OF_MEMORY;
    posenc_status st = posenc_buffer_read(b, 0, host, (size_t)n * es);
    for (int64_t i = 0; st == POSENC_OK && i < n; i++)
        out[i] = dtype == POSENC_DTYPE_F16 ? posenc_f16_to_f32(((uint16_t *)host)[i])
                                           : ((float *)host)[i];
    free(host);
    return st;
}


static int compute_sinusoidal(const char *cmd, posenc_context *ctx, const struct enc_opts *o,
                              struct enc_grid *g)
{
    static const char *const layouts[] = {"interleaved", "half-split", "cos-first"};
    int64_t D = g->cols, T = g->rows;
    posenc_buffer *pb = NULL, *db = NULL;
    posenc_tensor pt, dt;
    posenc_status st = upload_positions(ctx, g->row_pos, T, &pb, &pt);
    if (st == POSENC_OK)
        st = posenc_buffer_create(ctx, (size_t)(D * T) * posenc_dtype_size(o->dtype), &db);
    const char *call = "posenc_buffer_create";
    if (st == POSENC_OK) {
        dt = posenc_tensor_contiguous(db, 0, o->dtype, D, T, 1, 1);
        call = "posenc_sinusoidal";
        st = posenc_sinusoidal(ctx, NULL, &pt, &dt, &o->sin);
    }
    if (st == POSENC_OK) {
        call = "posenc_buffer_read";
        st = read_values(db, o->dtype, D * T, g->v);
    }
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&db);
    if (st != POSENC_OK)
        return lib_failed(cmd, ctx, call, st);
    snprintf(g->title, sizeof(g->title), "sinusoidal PE, d=%lld, base %g, %s%s",
             (long long)D, o->sin.base ? (double)o->sin.base : 10000.0, layouts[o->sin.layout],
             o->dtype == POSENC_DTYPE_F16 ? ", f16" : "");
    g->symmetric = 1;
    return 1;
}

static int compute_rope(const char *cmd, posenc_context *ctx, const struct enc_opts *o,
                        struct enc_grid *g)
{
    int64_t J = g->cols, T = g->rows, D = o->dim;
    struct posenc_rope_params rp = o->rope;
    double maxp = 0;
    for (int64_t t = 0; t < T; t++)
        maxp = fmax(maxp, g->row_pos[t]);
    float *factors = NULL;
    if (!tool_scaling_setup(cmd, &rp.scaling, o->scaling, o->factor, o->orig_ctx, J,
                            (int64_t)ceil(maxp) + 1, &factors))
        return 0;
    double *w = malloc((size_t)J * sizeof(*w)), *w0 = malloc((size_t)J * sizeof(*w0));
    struct posenc_rope_info info;
    if (!w || !w0) {
        free(w);
        free(w0);
        free(factors);
        return lib_failed(cmd, NULL, "malloc", POSENC_ERR_OUT_OF_MEMORY);
    }
    struct posenc_rope_params unscaled = rp;
    memset(&unscaled.scaling, 0, sizeof(unscaled.scaling));
    posenc_status st = posenc_rope_freqs(D, &rp, w, NULL, &info);
    if (st == POSENC_OK)
        st = posenc_rope_freqs(D, &unscaled, w0, NULL, NULL);
    if (st != POSENC_OK) {
        free(w);
        free(w0);
        free(factors);
        return lib_failed(cmd, NULL, "posenc_rope_freqs", st);
    }
    char sc[96] = "";
    if (rp.scaling.kind != POSENC_ROPE_SCALING_NONE) {
        snprintf(sc, sizeof(sc), ", %s x%g", tool_scaling_label(rp.scaling.kind),
                 (double)rp.scaling.factor);
        if (rp.scaling.original_ctx)
            snprintf(sc + strlen(sc), sizeof(sc) - strlen(sc), " (orig %d)",
                     (int)rp.scaling.original_ctx);
        /* which pairs the scaling changed, and by how much at most */
        int64_t first = -1, last = -1, n_changed = 0;
        double slowest = 1.0, fastest = 1.0;
        for (int64_t j = 0; j < J; j++) {
            double ratio = w0[j] / w[j];
            if (fabs(ratio - 1.0) > 1e-6) {
                if (first < 0)
                    first = j;
                last = j;
                n_changed++;
                slowest = fmax(slowest, ratio);
                fastest = fmin(fastest, ratio);
            }
        }
        const char *how = slowest >= 1.0 / fastest ? "slowed" : "sped up";
        double most = slowest >= 1.0 / fastest ? slowest : 1.0 / fastest;
        if (n_changed == 0)
            snprintf(g->note, sizeof(g->note), "the scaling changes no pair here%s",
                     rp.scaling.seq_len && rp.scaling.seq_len <= rp.scaling.original_ctx
                         ? " (positions within the original context)" : "");
        else if (n_changed == 1)
            snprintf(g->note, sizeof(g->note), "pair %lld of %lld %s, x%.3g", (long long)first,
                     (long long)J, how, most);
        else if (n_changed == last - first + 1)
            snprintf(g->note, sizeof(g->note), "pairs %lld-%lld of %lld %s, up to x%.3g",
                     (long long)first, (long long)last, (long long)J, how, most);
        else
            snprintf(g->note, sizeof(g->note), "%lld of %lld pairs %s, up to x%.3g",
                     (long long)n_changed, (long long)J, how, most);
    }
    free(w0);
    free(factors);
    static const char *const what[] = {"angle pos*w_j (rad)", "cos(pos*w_j)", "sin(pos*w_j)"};
    snprintf(g->title, sizeof(g->title), "RoPE %s, d=%lld, base %g%s%s", what[o->value],
             (long long)D, info.base, sc, o->dtype == POSENC_DTYPE_F16 ? ", f16" : "");
    if (o->value == ENC_VALUE_ANGLE) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < J; j++)
                g->v[t * J + j] = g->row_pos[t] * w[j];
        free(w);
        g->angle = 1;
        snprintf(g->device, sizeof(g->device), "host, double (posenc_rope_freqs)");
        return 1;
    }
    free(w);
    /* the same scaling for posenc_rope (LongRoPE's arrays again) */
    if (!tool_scaling_setup(cmd, &rp.scaling, o->scaling, o->factor, o->orig_ctx, J,
                            (int64_t)ceil(maxp) + 1, &factors))
        return 0;
    /* Rotate unit pairs (1, 0) in NORMAL mode: y[2j] = mscale*cos, y[2j+1] = mscale*sin. */
    rp.mode = POSENC_ROPE_NORMAL;
    float *x = calloc((size_t)(D * T), sizeof(*x));
    double *y = malloc((size_t)(D * T) * sizeof(*y));
    posenc_buffer *pb = NULL, *xb = NULL, *yb = NULL;
    posenc_tensor pt, xt, yt;
    const char *call = "malloc";
    st = POSENC_ERR_OUT_OF_MEMORY;
    if (x && y) {
        for (int64_t i = 0; i < D * T; i += 2)
            x[i] = 1.0f;
        call = "posenc_buffer_create";
        st = upload_positions(ctx, g->row_pos, T, &pb, &pt);
    }
    if (st == POSENC_OK)
        st = posenc_buffer_create(ctx, (size_t)(D * T) * 4, &xb);
    if (st == POSENC_OK)
        st = posenc_buffer_write(xb, 0, x, (size_t)(D * T) * 4);
    if (st == POSENC_OK)
        st = posenc_buffer_create(ctx, (size_t)(D * T) * posenc_dtype_size(o->dtype), &yb);
    if (st == POSENC_OK) {
        xt = posenc_tensor_contiguous(xb, 0, POSENC_DTYPE_F32, D, 1, T, 1);
        yt = posenc_tensor_contiguous(yb, 0, o->dtype, D, 1, T, 1);
        call = "posenc_rope";
        st = posenc_rope(ctx, &xt, &pt, &yt, &rp);
    }
    if (st == POSENC_OK) {
        call = "posenc_buffer_read";
        st = read_values(yb, o->dtype, D * T, y);
    }
    if (st == POSENC_OK)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < J; j++)
                g->v[t * J + j] =
                    y[t * D + 2 * j + (o->value == ENC_VALUE_SIN)] / info.mscale;
    posenc_buffer_destroy(&pb);
    posenc_buffer_destroy(&xb);
    posenc_buffer_destroy(&yb);
    free(x);
    free(y);
    free(factors);
    if (st != POSENC_OK)
        return lib_failed(cmd, ctx, call, st);
    g->symmetric = 1;
    return 1;
}

/* ALiBi (posenc_alibi, logits NULL) or T5 buckets (posenc_relbias, table[b] = b). */
static int compute_bias(const char *cmd, posenc_context *ctx, const struct enc_opts *o,
                        struct enc_grid *g)
{
    int64_t N = g->rows;
    int64_t H = o->kind == ENC_ALIBI ? o->heads : 1;
    int64_t h = o->kind == ENC_ALIBI ? o->head : 0;
    size_t es = posenc_dtype_size(o->dtype);
    posenc_buffer *db = NULL, *tb = NULL;
    posenc_tensor dt, tt;
    double *all = malloc((size_t)(N * N * H) * sizeof(*all));
    const char *call = "posenc_buffer_create";
    posenc_status st = all ? posenc_buffer_create(ctx, (size_t)(N * N * H) * es, &db)
                           : POSENC_ERR_OUT_OF_MEMORY;
    if (st == POSENC_OK)
        dt = posenc_tensor_contiguous(db, 0, o->dtype, N, N, H, 1);
    if (st == POSENC_OK && o->kind == ENC_ALIBI) {
        call = "posenc_alibi";
        st = posenc_alibi(ctx, NULL, &dt, &o->alibi);
        double *slopes = malloc((size_t)H * sizeof(*slopes));
        if (slopes && posenc_alibi_slopes(H, &o->alibi, slopes) == POSENC_OK)
            snprintf(g->title, sizeof(g->title), "ALiBi bias, head %lld of %lld (slope %g)%s%s%s",
                     (long long)h, (long long)H, slopes[h], o->alibi.causal ? ", causal" : "",
                     o->alibi.symmetric ? ", symmetric" : "",
                     o->dtype == POSENC_DTYPE_F16 ? ", f16" : "");
        free(slopes);
    } else if (st == POSENC_OK) {
        int32_t nb = o->t5.num_buckets ? o->t5.num_buckets : 32;
        float *table = malloc((size_t)nb * sizeof(*table));
        for (int32_t b = 0; table && b < nb; b++)
            table[b] = (float)b;
        st = table ? posenc_buffer_create(ctx, (size_t)nb * 4, &tb) : POSENC_ERR_OUT_OF_MEMORY;
        if (st == POSENC_OK)
            st = posenc_buffer_write(tb, 0, table, (size_t)nb * 4);
        free(table);
        if (st == POSENC_OK) {
            tt = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, nb, 1, 1, 1);
            call = "posenc_relbias";
            st = posenc_relbias(ctx, NULL, &tt, &dt, &o->t5);
        }
        snprintf(g->title, sizeof(g->title), "T5 bucket(k-q), %d buckets, max dist %d, %s%s",
                 (int)nb, o->t5.max_distance ? (int)o->t5.max_distance : 128,
                 o->t5.causal ? "causal" : "bidirectional",
                 o->dtype == POSENC_DTYPE_F16 ? ", f16" : "");
        g->integer = 1;
    }
    if (st == POSENC_OK) {
        call = "posenc_buffer_read";
        st = read_values(db, o->dtype, N * N * H, all);
    }
    if (st == POSENC_OK)
        memcpy(g->v, all + h * N * N, (size_t)(N * N) * sizeof(*all));
    free(all);
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&tb);
    if (st != POSENC_OK)
        return lib_failed(cmd, ctx, call, st);
    return 1;
}

int enc_compute(const char *cmd, posenc_context *ctx, const struct enc_opts *o,
                struct enc_grid *g)
{
    memset(g, 0, sizeof(*g));
    int64_t rows = o->len;
    if (o->pos_spec && !parse_positions(cmd, o->pos_spec, &g->row_pos, &rows))
        return 0;
    int64_t cols = o->kind == ENC_SINUSOIDAL ? o->dim : o->kind == ENC_ROPE ? o->dim / 2 : rows;
    if (rows * cols > ((int64_t)1 << 26) / (o->kind == ENC_ALIBI ? o->heads : 1)) {
        tool_error(cmd, "%lld x %lld values are too many (at most 2^26)", (long long)rows,
                   (long long)cols);
        free(g->row_pos);
        return 0;
    }
    g->rows = rows;
    g->cols = cols;
    if (!g->row_pos) {
        g->row_pos = malloc((size_t)rows * sizeof(double));
        for (int64_t r = 0; g->row_pos && r < rows; r++)
            g->row_pos[r] = (double)r;
    }
    g->v = malloc((size_t)(rows * cols) * sizeof(double));
    if (!g->v || !g->row_pos) {
        enc_grid_free(g);
        tool_error(cmd, "out of memory");
        return 0;
    }
    static const char *const row_names[] = {"position", "position", "query", "query"};
    static const char *const col_names[] = {"dimension", "pair j", "key", "key"};
    g->row_name = row_names[o->kind];
    g->col_name = col_names[o->kind];
    struct posenc_device_info info;
    if (posenc_context_get_info(ctx, &info) == POSENC_OK)
        snprintf(g->device, sizeof(g->device), "%s (%s)", posenc_backend_name(info.backend),
                 info.device_name);
    tool_progress_init(o->quiet);
    if (rows * cols >= ((int64_t)1 << 20)) {
        char what[96];
        snprintf(what, sizeof(what), "computing %lld x %lld values on %s ...", (long long)rows,
                 (long long)cols, posenc_backend_name(o->backend));
        tool_progress(cmd, 0, 0, what);
    }
    int ok;
    switch (o->kind) {
    case ENC_SINUSOIDAL: ok = compute_sinusoidal(cmd, ctx, o, g); break;
    case ENC_ROPE: ok = compute_rope(cmd, ctx, o, g); break;
    default: ok = compute_bias(cmd, ctx, o, g); break;
    }
    tool_progress_clear();
    if (!ok)
        enc_grid_free(g);
    return ok;
}

void enc_grid_free(struct enc_grid *g)
{
    free(g->v);
    free(g->row_pos);
    g->v = g->row_pos = NULL;
}
