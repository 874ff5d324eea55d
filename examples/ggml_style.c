/*
 * ggml_style.c - what a ggml backend author writes to run ggml's positional-encoding nodes
 * on posenc.
 *
 * The program holds tensors the way ggml does (type, ne[4] element counts, nb[4] byte
 * strides, innermost first; views into another tensor's memory; an op with its packed
 * op_params and src[] inputs) and builds the nodes ggml's graph builders make:
 *
 *   GGML_OP_ROPE                 ggml_rope_ext / ggml_rope_multi, modes 0, 2, 8, 24, 40
 *                                (YaRN and freq_factors in one node, a strided Q view)
 *   GGML_OP_SOFT_MAX             ggml_soft_max_ext with max_bias > 0 (ALiBi)
 *   GGML_OP_TIMESTEP_EMBEDDING   ggml_timestep_embedding (diffusion), even and odd dim
 *
 * Each node is then evaluated twice:
 *   - by cpu_*(): ggml's CPU algorithm for the node, written out here in f32 as ggml's
 *     CPU backend does it (theta recurrence, YaRN ramp, M-RoPE sectors, row softmax);
 *   - by pe_*(): the dispatch a ggml backend would do: map the node's tensors onto
 *     posenc_tensor views (same ne, same nb) and its op_params onto posenc params, and run
 *     it on the posenc backend chosen with --backend.
 * and the two results are compared (max |diff| and ggml test-backend-ops' NMSE).
 *
 *   ggml_style [--backend cpu|opencl|vulkan|auto] [--device N] [--debug]
 *
 * Exit status: 0 all nodes match; 1 a mismatch or an error; 77 the backend is not
 * available (a skip for test runners; POSENC_TEST_REQUIRE=name,... turns that into an
 * error, as in the test suites). An op the backend does not support is reported as SKIP
 * and does not fail. --debug turns on the backend's validation (Vulkan validation layer)
 * and fails if it reports anything.
 */
#include <posenc.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================================== */
/* A miniature ggml: tensors, views and op nodes                                              */
/* ======================================================================================== */

enum mg_type { MG_TYPE_F32, MG_TYPE_I32 };

enum mg_op { MG_OP_NONE, MG_OP_ROPE, MG_OP_SOFT_MAX, MG_OP_TIMESTEP_EMBEDDING };

/* ggml's GGML_ROPE_TYPE_* */
enum {
    MG_ROPE_NORMAL = 0,
    MG_ROPE_NEOX = 2,
    MG_ROPE_MROPE = 8,
    MG_ROPE_VISION = 24,
    MG_ROPE_IMROPE = 40
};

#define MG_MAX_SRC 3
#define MG_MAX_OP_PARAMS 64 /* bytes, as GGML_MAX_OP_PARAMS */

struct mg_tensor {
    enum mg_type type;
    int64_t ne[4]; /* elements per dimension, innermost first */
    size_t nb[4];  /* bytes per step in each dimension */
    enum mg_op op;
    int32_t op_params[MG_MAX_OP_PARAMS / sizeof(int32_t)];
    struct mg_tensor *src[MG_MAX_SRC];
    struct mg_tensor *view_src; /* a view: data = view_src->data + view_offs */
    size_t view_offs;
    void *data;
    const char *name;
};

/* The tensors of one graph, freed together (ggml's context). */
struct mg_context {
    struct mg_tensor *t[64];
    int n;
};

static size_t mg_type_size(enum mg_type type)
{
    (void)type;
    return 4; /* f32 and i32 */
}

/* Bytes spanned by the tensor (ggml_nbytes). */
static size_t mg_nbytes(const struct mg_tensor *t)
{
    size_t n = mg_type_size(t->type);
    for (int i = 0; i < 4; i++)
        n += (size_t)(t->ne[i] - 1) * t->nb[i];
    return n;
}

static int64_t mg_nelements(const struct mg_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static struct mg_tensor *mg_alloc(struct mg_context *ctx)
{
    if (ctx->n == (int)(sizeof(ctx->t) / sizeof(ctx->t[0]))) {
        fprintf(stderr, "ggml_style: too many tensors\n");
        exit(1);
    }
    struct mg_tensor *t = calloc(1, sizeof(*t));
    if (!t) {
        fprintf(stderr, "ggml_style: out of memory\n");
        exit(1);
    }
    ctx->t[ctx->n++] = t;
    return t;
}

/* A contiguous tensor with its own (zeroed) memory: ggml_new_tensor_4d. */
static struct mg_tensor *mg_new_tensor(struct mg_context *ctx, enum mg_type type, int64_t ne0,
                                       int64_t ne1, int64_t ne2, int64_t ne3)
{
    struct mg_tensor *t = mg_alloc(ctx);
    t->type = type;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = ne2, t->ne[3] = ne3;
    t->nb[0] = mg_type_size(type);
    for (int i = 1; i < 4; i++)
        t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
    t->data = calloc(1, mg_nbytes(t));
    if (!t->data) {
        fprintf(stderr, "ggml_style: out of memory\n");
        exit(1);
    }
    return t;
}

/* ggml_view_3d: a strided window into a's memory (no copy). */
static struct mg_tensor *mg_view_3d(struct mg_context *ctx, struct mg_tensor *a, int64_t ne0,
                                    int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset)
{
    struct mg_tensor *t = mg_alloc(ctx);
    t->type = a->type;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = ne2, t->ne[3] = 1;
    t->nb[0] = mg_type_size(a->type), t->nb[1] = nb1, t->nb[2] = nb2, t->nb[3] = nb2 * (size_t)ne2;
    t->view_src = a->view_src ? a->view_src : a;
    t->view_offs = (a->view_src ? a->view_offs : 0) + offset;
    t->data = (char *)a->data + offset;
    return t;
}

/* A result tensor of a's shape (ggml_dup_tensor: contiguous, not a view). */
static struct mg_tensor *mg_dup_tensor(struct mg_context *ctx, const struct mg_tensor *a)
{
    return mg_new_tensor(ctx, a->type, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

static void mg_free(struct mg_context *ctx)
{
    for (int i = 0; i < ctx->n; i++) {
        if (!ctx->t[i]->view_src)
            free(ctx->t[i]->data);
        free(ctx->t[i]);
    }
    ctx->n = 0;
}

static float mg_get_op_param_f32(const struct mg_tensor *t, int i)
{
    float f;
    memcpy(&f, &t->op_params[i], sizeof(f));
    return f;
}

/* Element (i0, i1, i2, i3) of an F32 tensor, through its strides. */
static float *mg_f32(const struct mg_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return (float *)((char *)t->data + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] +
                     (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3]);
}

/* ---- graph builders, packing op_params exactly as ggml.c does ---------------------------- */

/* ggml_rope_impl: the 15 words ggml stores for GGML_OP_ROPE. */
static struct mg_tensor *mg_rope_impl(struct mg_context *ctx, struct mg_tensor *a,
                                      struct mg_tensor *b, struct mg_tensor *c, int n_dims,
                                      const int sections[4], int mode, int n_ctx_orig,
                                      float freq_base, float freq_scale, float ext_factor,
                                      float attn_factor, float beta_fast, float beta_slow)
{
    const bool mrope_used = (mode & MG_ROPE_MROPE) != 0;
    /* ggml asserts: b is an I32 vector with one position per token (4 for M-RoPE) */
    if (b->type != MG_TYPE_I32 || b->ne[0] != a->ne[2] * (mrope_used ? 4 : 1)) {
        fprintf(stderr, "ggml_style: rope positions have the wrong shape\n");
        exit(1);
    }
    struct mg_tensor *r = mg_dup_tensor(ctx, a);
    int32_t params[15] = {/* n_past */ 0, n_dims, mode, /* n_ctx */ 0, n_ctx_orig};
    memcpy(params + 5, &freq_base, sizeof(float));
    memcpy(params + 6, &freq_scale, sizeof(float));
    memcpy(params + 7, &ext_factor, sizeof(float));
    memcpy(params + 8, &attn_factor, sizeof(float));
    memcpy(params + 9, &beta_fast, sizeof(float));
    memcpy(params + 10, &beta_slow, sizeof(float));
    if (mrope_used && sections)
        memcpy(params + 11, sections, sizeof(int32_t) * 4);
    else
        memset(params + 11, 0, sizeof(int32_t) * 4);
    memcpy(r->op_params, params, sizeof(params));
    r->op = MG_OP_ROPE;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return r;
}

/* ggml_rope_ext(ctx, a, b, c, n_dims, mode, n_ctx_orig, freq_base, ...) */
static struct mg_tensor *mg_rope_ext(struct mg_context *ctx, struct mg_tensor *a,
                                     struct mg_tensor *b, struct mg_tensor *c, int n_dims, int mode,
                                     int n_ctx_orig, float freq_base, float freq_scale,
                                     float ext_factor, float attn_factor, float beta_fast,
                                     float beta_slow)
{
    return mg_rope_impl(ctx, a, b, c, n_dims, NULL, mode, n_ctx_orig, freq_base, freq_scale,
                        ext_factor, attn_factor, beta_fast, beta_slow);
}

/* ggml_rope_multi(ctx, a, b, c, n_dims, sections, mode, ...): M-RoPE, IMROPE, vision. */
static struct mg_tensor *mg_rope_multi(struct mg_context *ctx, struct mg_tensor *a,
                                       struct mg_tensor *b, struct mg_tensor *c, int n_dims,
                                       const int sections[4], int mode, int n_ctx_orig,
                                       float freq_base, float freq_scale, float ext_factor,
                                       float attn_factor, float beta_fast, float beta_slow)
{
    return mg_rope_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale,
                        ext_factor, attn_factor, beta_fast, beta_slow);
}

/* ggml_soft_max_ext(ctx, a, mask, scale, max_bias): softmax(a*scale + slope_h*mask). */
static struct mg_tensor *mg_soft_max_ext(struct mg_context *ctx, struct mg_tensor *a,
                                         struct mg_tensor *mask, float scale, float max_bias)
{
    struct mg_tensor *r = mg_dup_tensor(ctx, a);
    float params[2] = {scale, max_bias};
    memcpy(r->op_params, params, sizeof(params));
    r->op = MG_OP_SOFT_MAX;
    r->src[0] = a;
    r->src[1] = mask;
    return r;
}

/* ggml_timestep_embedding(ctx, timesteps, dim, max_period): [dim, N]. */
static struct mg_tensor *mg_timestep_embedding(struct mg_context *ctx, struct mg_tensor *timesteps,
                                               int dim, int max_period)
{
    struct mg_tensor *r = mg_new_tensor(ctx, MG_TYPE_F32, dim, timesteps->ne[0], 1, 1);
    r->op_params[0] = dim;
    r->op_params[1] = max_period;
    r->op = MG_OP_TIMESTEP_EMBEDDING;
    r->src[0] = timesteps;
    return r;
}

/* ======================================================================================== */
/* The CPU evaluation of each node: ggml's CPU algorithms, in f32 as ggml computes them        */
/* ======================================================================================== */

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

static void yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast, float beta_slow,
                           float dims[2])
{
    float start = floorf(yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, base));
    float end = ceilf(yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, base));
    dims[0] = fmaxf(0.0f, start);
    dims[1] = fminf((float)(n_dims - 1), end);
}

/* rope_yarn: cos/sin of the (YaRN-blended) angle, times the magnitude. */
static void rope_yarn(float theta_extrap, float freq_scale, const float corr_dims[2], int64_t i0,
                      float ext_factor, float mscale, float *cos_theta, float *sin_theta)
{
    float theta_interp = freq_scale * theta_extrap;
    float theta = theta_interp;
    if (ext_factor != 0.0f) {
        float y = ((float)(i0 / 2) - corr_dims[0]) / fmaxf(0.001f, corr_dims[1] - corr_dims[0]);
        float ramp_mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * ext_factor;
        theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    }
    *cos_theta = cosf(theta) * mscale;
    *sin_theta = sinf(theta) * mscale;
}

static void cpu_rope(const struct mg_tensor *node, struct mg_tensor *out)
{
    const struct mg_tensor *a = node->src[0], *b = node->src[1], *c = node->src[2];
    const int n_dims = node->op_params[1], mode = node->op_params[2];
    const int n_ctx_orig = node->op_params[4];
    const float freq_base = mg_get_op_param_f32(node, 5), freq_scale = mg_get_op_param_f32(node, 6);
    const float ext_factor = mg_get_op_param_f32(node, 7),
                attn_factor = mg_get_op_param_f32(node, 8);
    const float beta_fast = mg_get_op_param_f32(node, 9), beta_slow = mg_get_op_param_f32(node, 10);
    const int *sections = &node->op_params[11];
    const int64_t ne0 = a->ne[0], ne2 = a->ne[2];

    const float theta_scale = powf(freq_base, -2.0f / n_dims);
    float corr_dims[2];
    yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr_dims);
    const bool mrope_used = (mode & MG_ROPE_MROPE) != 0; /* 8, 24 and 40 */
    const bool is_imrope = mode == MG_ROPE_IMROPE, is_vision = mode == MG_ROPE_VISION;
    const float *ff = c ? (const float *)c->data : NULL;
    const int32_t *pos = b->data;
    float *cache = malloc(sizeof(float) * (size_t)ne0);
    if (!cache)
        exit(1);

    for (int64_t i3 = 0; i3 < a->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < ne2; i2++) {
            /* the cos/sin cache of this token, theta_k = p * theta_scale^k, for the dims that
             * rotate (ggml fills all ne0; only these are read, and freq_factors has n_dims/2) */
            const int64_t n_cache = is_vision ? ne0 : n_dims;
            if (!mrope_used) {
                float theta = (float)pos[i2];
                for (int64_t i0 = 0; i0 < n_cache; i0 += 2) {
                    const float f = ff ? ff[i0 / 2] : 1.0f;
                    rope_yarn(theta / f, freq_scale, corr_dims, i0, ext_factor, attn_factor,
                              &cache[i0], &cache[i0 + 1]);
                    theta *= theta_scale;
                }
            } else {
                const float p_t = (float)pos[i2], p_h = (float)pos[i2 + ne2];
                const float p_w = (float)pos[i2 + 2 * ne2], p_e = (float)pos[i2 + 3 * ne2];
                float theta_t = p_t, theta_h = p_h, theta_w = p_w, theta_e = p_e;
                const int sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
                const int sec_w = sections[1] + sections[0], sec_e = sections[2] + sec_w;
                for (int64_t i0 = 0; i0 < n_cache; i0 += 2) {
                    const float f = ff ? ff[i0 / 2] : 1.0f;
                    const int sector = (int)((i0 / 2) % sect_dims);
                    if (is_vision) { /* each section restarts its frequencies */
                        if (sector == 0)
                            theta_t = p_t;
                        else if (sector == sections[0])
                            theta_h = p_h;
                        else if (sector == sec_w)
                            theta_w = p_w;
                        else if (sector == sec_e)
                            theta_e = p_e;
                    }
                    float theta = theta_t;
                    if (is_imrope) { /* t, h, w interleaved */
                        if (sector % 3 == 1 && sector < 3 * sections[1])
                            theta = theta_h;
                        else if (sector % 3 == 2 && sector < 3 * sections[2])
                            theta = theta_w;
                        else if (sector % 3 == 0 && sector < 3 * sections[0])
                            theta = theta_t;
                        else
                            theta = theta_e;
                    } else {
                        if (sector >= sections[0] && sector < sec_w)
                            theta = theta_h;
                        else if (sector >= sec_w && sector < sec_w + sections[2])
                            theta = theta_w;
                        else if (sector >= sec_w + sections[2])
                            theta = theta_e;
                    }
                    rope_yarn(theta / f, freq_scale, corr_dims, i0, ext_factor, attn_factor,
                              &cache[i0], &cache[i0 + 1]);
                    theta_t *= theta_scale;
                    theta_h *= theta_scale;
                    theta_w *= theta_scale;
                    theta_e *= theta_scale;
                }
            }
            /* rotate every head with the token's cache */
            const int64_t n = n_cache;
            const int64_t n_offset = mode == MG_ROPE_NORMAL ? 1 : is_vision ? n_dims : n_dims / 2;
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < ne0; i0++) /* dims past n_dims are copied */
                    *mg_f32(out, i0, i1, i2, i3) = *mg_f32(a, i0, i1, i2, i3);
                for (int64_t i0 = 0; i0 < n; i0 += 2) {
                    const int64_t ic = mode == MG_ROPE_NORMAL ? i0 : i0 / 2;
                    const float cos_t = cache[i0], sin_t = cache[i0 + 1];
                    const float x0 = *mg_f32(a, ic, i1, i2, i3);
                    const float x1 = *mg_f32(a, ic + n_offset, i1, i2, i3);
                    *mg_f32(out, ic, i1, i2, i3) = x0 * cos_t - x1 * sin_t;
                    *mg_f32(out, ic + n_offset, i1, i2, i3) = x0 * sin_t + x1 * cos_t;
                }
            }
        }
    }
    free(cache);
}

/* The ALiBi slope of head h (ggml: m0^(h+1) for the first 2^floor(log2 H) heads, then
 * m1^(2(h-n)+1)); 1 when max_bias is 0 (the mask is then added as it is). */
static float alibi_slope(float max_bias, uint32_t n_head, uint32_t h)
{
    if (max_bias <= 0.0f)
        return 1.0f;
    const uint32_t n_head_log2 = 1u << (uint32_t)floor(log2(n_head));
    const float m0 = powf(2.0f, -(max_bias) / n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);
    return h < n_head_log2 ? powf(m0, (float)(h + 1))
                           : powf(m1, (float)(2 * (h - n_head_log2) + 1));
}

/* softmax of one row w[0..n-1] into d, as ggml: max-subtracted, the sum in double. */
static void softmax_row(int64_t n, const float *w, float *d)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        max = fmaxf(max, w[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        d[i] = expf(w[i] - max);
        sum += d[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        d[i] *= inv;
}

/* The pre-softmax row ggml forms: x*scale + slope*mask. */
static void soft_max_logits(const struct mg_tensor *node, int64_t i1, int64_t i2, int64_t i3,
                            float *w)
{
    const struct mg_tensor *a = node->src[0], *mask = node->src[1];
    const float scale = mg_get_op_param_f32(node, 0), max_bias = mg_get_op_param_f32(node, 1);
    const float slope = alibi_slope(max_bias, (uint32_t)a->ne[2], (uint32_t)i2);
    for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
        w[i0] = *mg_f32(a, i0, i1, i2, i3) * scale;
        if (mask) /* mask rows: one per query; heads / batches broadcast */
            w[i0] += slope * *mg_f32(mask, i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
    }
}

static void cpu_soft_max(const struct mg_tensor *node, struct mg_tensor *out)
{
    const struct mg_tensor *a = node->src[0];
    float *w = malloc(sizeof(float) * (size_t)a->ne[0]);
    if (!w)
        exit(1);
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                soft_max_logits(node, i1, i2, i3, w);
                softmax_row(a->ne[0], w, mg_f32(out, 0, i1, i2, i3));
            }
    free(w);
}

static void cpu_timestep_embedding(const struct mg_tensor *node, struct mg_tensor *out)
{
    const struct mg_tensor *ts = node->src[0];
    const int dim = node->op_params[0], max_period = node->op_params[1];
    const int half = dim / 2;
    for (int64_t i = 0; i < ts->ne[0]; i++) {
        float *embed = mg_f32(out, 0, i, 0, 0);
        const float timestep = ((const float *)ts->data)[i];
        for (int j = 0; j < half; j++) {
            float freq = expf(-logf((float)max_period) * j / half);
            float arg = timestep * freq;
            embed[j] = cosf(arg);
            embed[j + half] = sinf(arg);
        }
        if (dim % 2 != 0)
            embed[2 * half] = 0.0f;
    }
}

static void cpu_compute(const struct mg_tensor *node, struct mg_tensor *out)
{
    switch (node->op) {
    case MG_OP_ROPE: cpu_rope(node, out); break;
    case MG_OP_SOFT_MAX: cpu_soft_max(node, out); break;
    case MG_OP_TIMESTEP_EMBEDDING: cpu_timestep_embedding(node, out); break;
    case MG_OP_NONE: break;
    }
}

/* ======================================================================================== */
/* The posenc dispatch: what a ggml backend's graph_compute does for these nodes              */
/* ======================================================================================== */

/*
 * In a real backend, ggml's tensors already live in the backend's buffers (a buffer type
 * whose buffers are posenc_buffers); here each source is uploaded before the op. A view
 * keeps its parent's memory and becomes a posenc_tensor with the view's offset and
 * strides: posenc reads ne/nb exactly as ggml lays them out, so no copy is ever needed.
 */
/* Why the dispatch itself declined a node (NULL: the reason is posenc's last error). */
static const char *pe_decline_reason;

struct pe_upload {
    posenc_buffer *buf[MG_MAX_SRC + 1];
    int n;
};

static void pe_upload_free(struct pe_upload *u)
{
    for (int i = 0; i < u->n; i++)
        posenc_buffer_destroy(&u->buf[i]);
    u->n = 0;
}

static posenc_dtype pe_dtype(enum mg_type type)
{
    return type == MG_TYPE_I32 ? POSENC_DTYPE_I32 : POSENC_DTYPE_F32;
}

/* The posenc view of a ggml tensor: same ne, same nb, offset into its parent's memory. */
static posenc_tensor pe_view(posenc_buffer *buf, size_t offset, const struct mg_tensor *t)
{
    posenc_tensor v = {.buffer = buf, .offset = offset, .dtype = pe_dtype(t->type)};
    for (int i = 0; i < 4; i++) {
        v.ne[i] = t->ne[i];
        v.nb[i] = (int64_t)t->nb[i];
    }
    return v;
}

/* Upload t (the whole parent tensor when t is a view) and describe it as a posenc view. */
static posenc_status pe_upload(posenc_context *ctx, struct pe_upload *u, const struct mg_tensor *t,
                               posenc_tensor *out)
{
    const struct mg_tensor *base = t->view_src ? t->view_src : t;
    posenc_buffer *buf = NULL;
    posenc_status st = posenc_buffer_create(ctx, mg_nbytes(base), &buf);
    if (st != POSENC_OK)
        return st;
    u->buf[u->n++] = buf;
    st = posenc_buffer_write(buf, 0, base->data, mg_nbytes(base));
    *out = pe_view(buf, t->view_src ? t->view_offs : 0, t);
    return st;
}

/* An output buffer for a node (contiguous, as ggml allocates it). */
static posenc_status pe_output(posenc_context *ctx, struct pe_upload *u,
                               const struct mg_tensor *node, posenc_tensor *out)
{
    posenc_buffer *buf = NULL;
    posenc_status st = posenc_buffer_create(ctx, mg_nbytes(node), &buf);
    if (st != POSENC_OK)
        return st;
    u->buf[u->n++] = buf;
    *out = pe_view(buf, 0, node);
    return POSENC_OK;
}

/*
 * GGML_OP_ROPE. posenc_rope_params_from_ggml reads the 15 op_params words (mode, n_dims,
 * n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow,
 * sections) with ggml's meaning. src[1] holds one I32 position per token, or for M-RoPE /
 * vision 4 streams of them one after the other: posenc's [T, 4] position tensor is the same
 * memory. src[2] (freq_factors) is read on the host during the call: a backend whose
 * tensors are on the device passes a host copy of it (it is a model weight, loaded once).
 */
static posenc_status pe_rope(posenc_context *ctx, const struct mg_tensor *node, float *result)
{
    const struct mg_tensor *a = node->src[0], *b = node->src[1], *c = node->src[2];
    struct posenc_rope_params p;
    posenc_status st = posenc_rope_params_from_ggml(node->op_params, a->ne[0],
                                                    c ? (const float *)c->data : NULL, &p);
    if (st != POSENC_OK) {
        fprintf(stderr, "  posenc_rope_params_from_ggml: %s\n", posenc_status_string(st));
        return st;
    }
    struct pe_upload u = {0};
    posenc_tensor x, pos, dst;
    if ((st = pe_upload(ctx, &u, a, &x)) != POSENC_OK ||
        (st = pe_upload(ctx, &u, b, &pos)) != POSENC_OK ||
        (st = pe_output(ctx, &u, node, &dst)) != POSENC_OK)
        goto done;
    const int64_t streams = (node->op_params[2] & MG_ROPE_MROPE) ? 4 : 1;
    pos.ne[0] = a->ne[2];
    pos.ne[1] = streams;
    pos.nb[1] = pos.ne[0] * 4;
    pos.nb[2] = pos.nb[3] = pos.nb[1] * streams;
    st = posenc_rope(ctx, &x, &pos, &dst, &p);
    if (st == POSENC_OK)
        st = posenc_buffer_read(u.buf[u.n - 1], 0, result, mg_nbytes(node));
done:
    pe_upload_free(&u);
    return st;
}

/*
 * GGML_OP_SOFT_MAX with max_bias > 0 is ALiBi: softmax(x*scale + slope_h*mask). ggml takes
 * the positions from the mask; posenc computes the bias from positions. So the dispatch
 * recognises the two masks ALiBi graphs use (the mask is a graph input the host fills):
 *
 *   KEYPOS   mask[k, q] = k (ggml's former ggml_alibi: + slope*k on every row, no causal
 *            mask). posenc's bias is -slope*(q - k) = slope*k - slope*q: the same row
 *            shifted by the constant slope*q, and softmax is shift-invariant per row, so
 *            the probabilities are equal although the logits differ.
 *   DISTANCE mask[k, q] = -(qpos - k) for k <= qpos, -inf after, qpos = q + n_kv - n_q
 *            (llama.cpp's KQ mask for ALiBi models, -|qpos - kpos|, causal): exactly
 *            posenc's causal bias with q_offset = n_kv - n_q.
 *
 * posenc_alibi writes the bias [n_kv, n_q, H, B] (logits NULL); the backend's own softmax
 * kernel (here: softmax_row on the host) then forms softmax(x*scale + bias). Any other
 * mask (max_bias = 0, padding masks, ...) is not an ALiBi node: the backend keeps it.
 */
enum alibi_mask { MASK_OTHER, MASK_KEYPOS, MASK_DISTANCE };

static enum alibi_mask classify_mask(const struct mg_tensor *node, int32_t *q_offset)
{
    const struct mg_tensor *a = node->src[0], *mask = node->src[1];
    if (!mask || mask->ne[2] != 1 || mask->ne[3] != 1)
        return MASK_OTHER;
    const int64_t nk = a->ne[0], nq = a->ne[1];
    bool keypos = true, distance = nk >= nq;
    *q_offset = (int32_t)(nk - nq);
    for (int64_t q = 0; q < nq; q++)
        for (int64_t k = 0; k < nk; k++) {
            const float m = *mg_f32(mask, k, q, 0, 0);
            const int64_t qpos = q + *q_offset;
            keypos = keypos && m == (float)k;
            distance = distance && m == (k <= qpos ? -(float)(qpos - k) : -INFINITY);
        }
    return keypos ? MASK_KEYPOS : distance ? MASK_DISTANCE : MASK_OTHER;
}

/* shift: the largest per-row constant between ggml's logits and posenc's (0 for DISTANCE),
 * shift_dev: how far any logit is from "ggml's minus that row's constant" (rounding only). */
struct logit_shift {
    float shift, shift_dev;
};

static posenc_status pe_soft_max(posenc_context *ctx, const struct mg_tensor *node, float *result,
                                 struct logit_shift *out_shift)
{
    const struct mg_tensor *a = node->src[0];
    const float scale = mg_get_op_param_f32(node, 0), max_bias = mg_get_op_param_f32(node, 1);
    int32_t q_offset = 0;
    const enum alibi_mask form = classify_mask(node, &q_offset);
    if (!(max_bias > 0.0f) || form == MASK_OTHER) {
        pe_decline_reason = "not ALiBi (max_bias 0, or a mask that is not a position mask)";
        return POSENC_ERR_UNSUPPORTED;
    }
    struct posenc_alibi_params ap = {.max_bias = max_bias};
    if (form == MASK_DISTANCE) {
        ap.causal = 1;
        ap.q_offset = q_offset;
    }
    struct pe_upload u = {0};
    posenc_tensor bias;
    posenc_status st = pe_output(ctx, &u, node, &bias);
    if (st == POSENC_OK)
        st = posenc_alibi(ctx, NULL, &bias, &ap);
    if (st == POSENC_OK)
        st = posenc_buffer_read(u.buf[0], 0, result, mg_nbytes(node));
    pe_upload_free(&u);
    if (st != POSENC_OK)
        return st;

    /* the backend's softmax kernel: softmax(x*scale + bias) per row (result holds the bias
     * on entry, contiguous like the node). On the way, compare the logits with ggml's. */
    float *w = malloc(sizeof(float) * (size_t)a->ne[0] * 2);
    if (!w)
        return POSENC_ERR_OUT_OF_MEMORY;
    float *g = w + a->ne[0];
    out_shift->shift = out_shift->shift_dev = 0.0f;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                float *row = result + ((i3 * a->ne[2] + i2) * a->ne[1] + i1) * a->ne[0];
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
                    w[i0] = *mg_f32(a, i0, i1, i2, i3) * scale + row[i0];
                soft_max_logits(node, i1, i2, i3, g);
                const float shift = g[0] - w[0]; /* key 0 is never masked */
                out_shift->shift = fmaxf(out_shift->shift, fabsf(shift));
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
                    if (isfinite(g[i0]) || isfinite(w[i0]))
                        out_shift->shift_dev =
                            fmaxf(out_shift->shift_dev, fabsf(g[i0] - w[i0] - shift));
                softmax_row(a->ne[0], w, row);
            }
    free(w);
    return POSENC_OK;
}

/*
 * GGML_OP_TIMESTEP_EMBEDDING: for j < half = dim/2, freq_j = exp(-ln(max_period) j/half),
 * embed[j] = cos(t freq_j), embed[half + j] = sin(t freq_j); an odd dim leaves one last
 * column, which ggml sets to 0. That is posenc_sinusoidal with base = max_period,
 * freq_shift 0 (w_i = base^(-i/half)) and the cos-first half-split layout, on the view of
 * the first 2*half columns (row stride nb[1] = dim*4 bytes); the pad column is written
 * separately.
 */
static posenc_status pe_timestep_embedding(posenc_context *ctx, const struct mg_tensor *node,
                                           float *result)
{
    const struct mg_tensor *ts = node->src[0];
    const int dim = node->op_params[0], max_period = node->op_params[1], half = dim / 2;
    if (half < 1 || max_period < 1) {
        pe_decline_reason = "dim < 2 or max_period < 1";
        return POSENC_ERR_UNSUPPORTED;
    }
    struct pe_upload u = {0};
    posenc_tensor pos, dst;
    posenc_status st;
    if ((st = pe_upload(ctx, &u, ts, &pos)) != POSENC_OK ||
        (st = pe_output(ctx, &u, node, &dst)) != POSENC_OK)
        goto done;
    posenc_tensor emb = dst;
    emb.ne[0] = 2 * half; /* strided: rows keep nb[1] = dim * 4 */
    const struct posenc_sinusoidal_params sp = {.base = (float)max_period,
                                                .layout = POSENC_SIN_HALF_SPLIT_COS_FIRST};
    st = posenc_sinusoidal(ctx, NULL, &pos, &emb, &sp);
    /* the pad column (a posenc_copy from a zero tensor would do it in one launch) */
    const float zero = 0.0f;
    for (int64_t i = 0; st == POSENC_OK && dim % 2 != 0 && i < node->ne[1]; i++)
        st = posenc_buffer_write(dst.buffer, (size_t)(2 * half) * 4 + (size_t)i * node->nb[1],
                                 &zero, 4);
    if (st == POSENC_OK)
        st = posenc_buffer_read(dst.buffer, 0, result, mg_nbytes(node));
done:
    pe_upload_free(&u);
    return st;
}

/* ======================================================================================== */
/* The graph and the comparison                                                              */
/* ======================================================================================== */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static double rng_uniform(void) /* [0, 1), splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static void fill_uniform(struct mg_tensor *t, float lo, float hi)
{
    float *d = t->data;
    for (int64_t i = 0; i < mg_nelements(t); i++)
        d[i] = lo + (hi - lo) * (float)rng_uniform();
}

static struct mg_tensor *positions(struct mg_context *ctx, int64_t n, int32_t max)
{
    struct mg_tensor *p = mg_new_tensor(ctx, MG_TYPE_I32, n, 1, 1, 1);
    for (int64_t i = 0; i < n; i++)
        ((int32_t *)p->data)[i] = (int32_t)(rng_uniform() * max);
    return p;
}

struct node_case {
    const char *label;
    struct mg_tensor *node;
    double tol; /* max |posenc - cpu| allowed */
};

struct run_stats {
    int ran, skipped, failed;
};

static void run_case(posenc_context *ctx, struct mg_context *g, const struct node_case *c,
                     struct run_stats *s)
{
    struct mg_tensor *node = c->node;
    struct mg_tensor *ref = mg_dup_tensor(g, node);
    float *got = calloc(1, mg_nbytes(node));
    if (!got)
        exit(1);
    cpu_compute(node, ref);

    struct logit_shift shift = {-1.0f, -1.0f};
    posenc_status st = POSENC_ERR_INTERNAL;
    pe_decline_reason = NULL;
    switch (node->op) {
    case MG_OP_ROPE: st = pe_rope(ctx, node, got); break;
    case MG_OP_SOFT_MAX: st = pe_soft_max(ctx, node, got, &shift); break;
    case MG_OP_TIMESTEP_EMBEDDING: st = pe_timestep_embedding(ctx, node, got); break;
    case MG_OP_NONE: break;
    }
    printf("%-44s ne=%lldx%lldx%lldx%lld  ", c->label, (long long)node->ne[0],
           (long long)node->ne[1], (long long)node->ne[2], (long long)node->ne[3]);
    if (st == POSENC_ERR_UNSUPPORTED) {
        printf("SKIP (unsupported: %s)\n",
               pe_decline_reason ? pe_decline_reason : posenc_context_last_error(ctx));
        s->skipped++;
    } else if (st != POSENC_OK) {
        printf("FAIL %s: %s\n", posenc_status_string(st), posenc_context_last_error(ctx));
        s->failed++;
    } else {
        /* max |diff| and ggml test-backend-ops' normalised mean squared error */
        const float *want = ref->data;
        double max_diff = 0.0, se = 0.0, ss = 0.0;
        for (int64_t i = 0; i < mg_nelements(node); i++) {
            const double d = fabs((double)got[i] - (double)want[i]);
            max_diff = (d > max_diff || d != d) ? d : max_diff;
            se += d * d;
            ss += (double)want[i] * want[i];
        }
        const double nmse = ss > 0 ? se / ss : se;
        const bool ok = max_diff <= c->tol && nmse <= 1e-7;
        printf("max|diff| %.2e (tol %.0e)  nmse %.1e", max_diff, c->tol, nmse);
        if (shift.shift >= 0) /* softmax nodes: ggml's and posenc's logits per row */
            printf("  logit rows differ by <= %.3g (+- %.1e)", shift.shift, shift.shift_dev);
        printf("  %s\n", ok ? "ok" : "MISMATCH");
        s->ran++;
        s->failed += !ok;
    }
    free(got);
}

/* ---- main -------------------------------------------------------------------------------- */

static int log_warnings;

static void on_log(posenc_log_level level, const char *message, void *user_data)
{
    (void)user_data;
    if (level == POSENC_LOG_WARN) { /* errors are reported with each call's status */
        fprintf(stderr, "posenc warning: %s\n", message);
        log_warnings++;
    }
}

/* POSENC_TEST_REQUIRE=cpu,opencl,...: a backend listed there must not be skipped. */
static bool required(const char *name)
{
    const char *req = getenv("POSENC_TEST_REQUIRE");
    const size_t n = strlen(name);
    for (const char *p = req; p && (p = strstr(p, name)) != NULL; p += n)
        if ((p == req || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    struct posenc_context_params cp = {
        .backend = POSENC_BACKEND_AUTO, .log_fn = on_log, .log_level = POSENC_LOG_WARN};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            const char *b = argv[++i];
            int k = 0;
            while (k < POSENC_BACKEND_COUNT &&
                   strcmp(b, posenc_backend_name((posenc_backend_kind)k)))
                k++;
            if (k == POSENC_BACKEND_COUNT) {
                fprintf(stderr, "ggml_style: unknown backend '%s'\n", b);
                return 2;
            }
            cp.backend = (posenc_backend_kind)k;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            cp.device = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--debug")) {
            cp.flags |= POSENC_CONTEXT_DEBUG;
        } else {
            fprintf(stderr, "usage: ggml_style [--backend cpu|opencl|vulkan|auto] [--device N] "
                            "[--debug]\n");
            return 2;
        }
    }

    posenc_context *ctx = NULL;
    char err[512];
    posenc_status st = posenc_context_create(&cp, &ctx, err, sizeof(err));
    if (st != POSENC_OK) {
        const char *name = posenc_backend_name(cp.backend);
        if (st == POSENC_ERR_UNAVAILABLE && !required(name)) {
            printf("SKIP: backend %s unavailable: %s\n", name, err);
            return 77;
        }
        fprintf(stderr, "ggml_style: backend %s: %s: %s\n", name, posenc_status_string(st), err);
        return 1;
    }
    struct posenc_device_info info;
    if (posenc_context_get_info(ctx, &info) == POSENC_OK)
        printf("posenc %s on %s: %s\n\n", posenc_version(), posenc_backend_name(info.backend),
               info.device_name);

    struct mg_context g = {0};
    struct node_case cases[16];
    int n = 0;
#define ADD_CASE(label_, node_, tol_) (cases[n++] = (struct node_case){(label_), (node_), (tol_)})
    const float base = 10000.0f, beta_fast = 32.0f, beta_slow = 1.0f;

    /* RoPE on Q and K as views into a fused QKV projection [3 * 4 heads * 64, 7 tokens];
     * K with partial rotation, YaRN x4 over 2048 and freq_factors (src[2]) */
    {
        const int64_t hd = 64, nh = 4, T = 7;
        struct mg_tensor *qkv = mg_new_tensor(&g, MG_TYPE_F32, 3 * nh * hd, T, 1, 1);
        fill_uniform(qkv, -1, 1);
        struct mg_tensor *q = mg_view_3d(&g, qkv, hd, nh, T, hd * 4, qkv->nb[1], 0);
        struct mg_tensor *k =
            mg_view_3d(&g, qkv, hd, nh, T, hd * 4, qkv->nb[1], (size_t)(nh * hd * 4));
        struct mg_tensor *pos = positions(&g, T, 1000);
        struct mg_tensor *ff = mg_new_tensor(&g, MG_TYPE_F32, 16, 1, 1, 1);
        for (int i = 0; i < 16; i++)
            ((float *)ff->data)[i] = i < 8 ? 1.0f : 1.0f + 0.5f * (float)(i - 8);
        ADD_CASE("rope mode 0 (normal), Q view of QKV",
                 mg_rope_ext(&g, q, pos, NULL, 64, MG_ROPE_NORMAL, 0, base, 1.0f, 0.0f, 1.0f,
                             beta_fast, beta_slow),
                 1e-3);
        ADD_CASE("rope mode 0 (normal), YaRN + freq_factors",
                 mg_rope_ext(&g, k, pos, ff, 32, MG_ROPE_NORMAL, 2048, base, 0.25f, 1.0f, 1.0f,
                             beta_fast, beta_slow),
                 1e-3);
    }
    /* RoPE NeoX, partial rotation (Phi-2: 32 of 80 dims), 2 sequences */
    {
        struct mg_tensor *x = mg_new_tensor(&g, MG_TYPE_F32, 80, 3, 6, 2);
        fill_uniform(x, -1, 1);
        struct mg_tensor *pos = positions(&g, 6, 1000);
        ADD_CASE("rope mode 2 (neox), n_dims 32 of 80",
                 mg_rope_ext(&g, x, pos, NULL, 32, MG_ROPE_NEOX, 0, base, 1.0f, 0.0f, 1.0f,
                             beta_fast, beta_slow),
                 1e-3);
    }
    /* M-RoPE (Qwen2-VL), interleaved M-RoPE (Qwen3-VL), vision (Qwen2-VL ViT) */
    {
        const int64_t T = 5;
        struct mg_tensor *x = mg_new_tensor(&g, MG_TYPE_F32, 128, 2, T, 1);
        struct mg_tensor *xv = mg_new_tensor(&g, MG_TYPE_F32, 64, 3, T, 1);
        fill_uniform(x, -1, 1);
        fill_uniform(xv, -1, 1);
        struct mg_tensor *pos4 = positions(&g, 4 * T, 1000); /* t[T], h[T], w[T], e[T] */
        const int s_mrope[4] = {16, 24, 24, 0}, s_imrope[4] = {24, 20, 20, 0};
        const int s_vision[4] = {16, 16, 0, 0};
        ADD_CASE("rope mode 8 (mrope), sections 16/24/24",
                 mg_rope_multi(&g, x, pos4, NULL, 128, s_mrope, MG_ROPE_MROPE, 0, 1e6f, 1.0f, 0.0f,
                               1.0f, beta_fast, beta_slow),
                 1e-3);
        ADD_CASE("rope mode 40 (imrope), sections 24/20/20",
                 mg_rope_multi(&g, x, pos4, NULL, 128, s_imrope, MG_ROPE_IMROPE, 0, 5e6f, 1.0f,
                               0.0f, 1.0f, beta_fast, beta_slow),
                 1e-3);
        ADD_CASE("rope mode 24 (vision), n_dims 32, 16/16",
                 mg_rope_multi(&g, xv, pos4, NULL, 32, s_vision, MG_ROPE_VISION, 0, base, 1.0f,
                               0.0f, 1.0f, beta_fast, beta_slow),
                 1e-3);
    }
    /* ALiBi softmax: KQ [n_kv, n_q, 12 heads] (12: the m1 slopes are used too) with
     * llama.cpp's mask; KQ [16, 16, 8 heads, 2] with the key-position mask */
    {
        const int64_t nkv = 24, nq = 5, H = 12;
        struct mg_tensor *kq = mg_new_tensor(&g, MG_TYPE_F32, nkv, nq, H, 1);
        struct mg_tensor *mask = mg_new_tensor(&g, MG_TYPE_F32, nkv, nq, 1, 1);
        fill_uniform(kq, -4, 4);
        for (int64_t q = 0; q < nq; q++) /* -|qpos - kpos|, causal */
            for (int64_t k = 0; k < nkv; k++) {
                const int64_t qpos = q + nkv - nq;
                *mg_f32(mask, k, q, 0, 0) = k <= qpos ? -(float)(qpos - k) : -INFINITY;
            }
        ADD_CASE("soft_max_ext ALiBi, causal distance mask",
                 mg_soft_max_ext(&g, kq, mask, 0.125f, 8.0f), 1e-5);
        struct mg_tensor *kq2 = mg_new_tensor(&g, MG_TYPE_F32, 16, 16, 8, 2);
        struct mg_tensor *mask2 = mg_new_tensor(&g, MG_TYPE_F32, 16, 16, 1, 1);
        fill_uniform(kq2, -4, 4);
        for (int64_t q = 0; q < 16; q++) /* + slope * key position, every row */
            for (int64_t k = 0; k < 16; k++)
                *mg_f32(mask2, k, q, 0, 0) = (float)k;
        ADD_CASE("soft_max_ext ALiBi, key-position mask",
                 mg_soft_max_ext(&g, kq2, mask2, 0.25f, 8.0f), 1e-5);
    }
    /* timestep embedding (Stable Diffusion: dim 320), and an odd dim */
    {
        struct mg_tensor *ts = mg_new_tensor(&g, MG_TYPE_F32, 5, 1, 1, 1);
        const float steps[5] = {0.0f, 1.0f, 17.5f, 250.0f, 999.0f};
        memcpy(ts->data, steps, sizeof(steps));
        ADD_CASE("timestep_embedding dim 320", mg_timestep_embedding(&g, ts, 320, 10000), 1e-3);
        ADD_CASE("timestep_embedding dim 15 (odd: zero pad)",
                 mg_timestep_embedding(&g, ts, 15, 10000), 1e-3);
    }
#undef ADD_CASE

    struct run_stats s = {0};
    for (int i = 0; i < n; i++)
        run_case(ctx, &g, &cases[i], &s);
    mg_free(&g);
    posenc_context_destroy(&ctx);

    printf("\n%d nodes matched, %d failed, %d skipped (unsupported)\n", s.ran - s.failed, s.failed,
           s.skipped);
    if (log_warnings) {
        fprintf(stderr, "ggml_style: %d warnings from the backend\n", log_warnings);
        return 1;
    }
    if (s.failed)
        return 1;
    return s.ran == 0 ? 77 : 0;
}
