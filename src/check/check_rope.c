/* check_rope.c - the RoPE verification cases and their runner (see check.h). */
#include "check_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- static tables the cases point at --------------------------------------------------- */

enum { PC_MAX_PAIRS = 64 };
static float longrope_short[PC_MAX_PAIRS], longrope_long[PC_MAX_PAIRS];
static float ggml_freq_factors[PC_MAX_PAIRS], user_freqs[PC_MAX_PAIRS];
static uint8_t pixtral_streams[PC_MAX_PAIRS];

static void init_tables(void)
{
    for (int j = 0; j < PC_MAX_PAIRS; j++) {
        double r = (double)j / (PC_MAX_PAIRS - 1);
        longrope_short[j] = (float)(1.0 + 0.5 * r * r);  /* Phi-3-like shapes: 1 .. 1.5 */
        longrope_long[j] = (float)(1.0 + 40.0 * r * r);  /* 1 .. 41 */
        ggml_freq_factors[j] = (float)(j < 40 ? 1.0 : 1.0 + (j - 40) * 0.3);
        user_freqs[j] = (float)pow(10000.0, -(double)j / PC_MAX_PAIRS) * 0.75f;
        pixtral_streams[j] = (uint8_t)(j % 2);          /* h, w alternating (2-D grid) */
    }
}

/* ---- the case table ---------------------------------------------------------------------- */

static const char *mode_name(posenc_rope_mode m)
{
    static const char *names[] = {"normal", "neox", "mrope", "imrope", "vision"};
    return (unsigned)m < 5 ? names[m] : "?";
}

static const char *scaling_name(posenc_rope_scaling_kind k)
{
    static const char *names[] = {"none", "linear", "ntk", "dynamic_ntk", "yarn", "llama3",
                                  "longrope", "ggml_yarn"};
    return (unsigned)k < 8 ? names[k] : "?";
}

static void name_rope(struct pc_case *c, const char *tag)
{
    static const char *pos_names[] = {"seq", "large", "float"};
    static const char *calls[] = {"rope", "rope_qk", "rope_rerotate"};
    char extra[96] = "";
    size_t n = 0;
    if (c->rope.n_offs)
        n += (size_t)snprintf(extra + n, sizeof(extra) - n, "/n_offs=%d", c->rope.n_offs);
    if (c->rope.flags & POSENC_ROPE_BACKWARD)
        n += (size_t)snprintf(extra + n, sizeof(extra) - n, "/backward");
    if (c->rope_call == PC_ROPE_QK)
        n += (size_t)snprintf(extra + n, sizeof(extra) - n, "/k_heads=%lld",
                              (long long)c->k_heads);
    if (c->rope_call == PC_ROPE_REROTATE)
        n += (size_t)snprintf(extra + n, sizeof(extra) - n, "/shift=%lld",
                              (long long)c->pos_shift);
    snprintf(c->name, sizeof(c->name), "%s/%s%s%s/ne=%lldx%lldx%lldx%lld/%s/n_dims=%d/%s%s/pos=%s%s/%s/%s%s",
             calls[c->rope_call], posenc_dtype_name(c->x_dtype),
             c->x_dtype != c->dtype ? "->" : "", c->x_dtype != c->dtype ? posenc_dtype_name(c->dtype) : "",
             (long long)c->ne[0], (long long)c->ne[1], (long long)c->ne[2], (long long)c->ne[3],
             mode_name(c->rope.mode), c->rope.n_dims ? c->rope.n_dims : (int)(c->ne[0] - c->rope.n_offs),
             scaling_name(c->rope.scaling.kind), tag, pos_names[c->pos_kind],
             c->pos_batched ? "/pos_batched" : "", c->has_x == 2 ? "inplace" : "out",
             view_name(c->view), extra);
}

static struct pc_case base_case(int64_t d, int64_t h, int64_t t, int64_t b, posenc_rope_mode mode,
                                uint64_t seed)
{
    struct pc_case c;
    memset(&c, 0, sizeof(c));
    c.op = PC_OP_ROPE;
    c.dtype = c.x_dtype = POSENC_DTYPE_F32;
    c.ne[0] = d;
    c.ne[1] = h;
    c.ne[2] = t;
    c.ne[3] = b;
    c.rope.mode = mode;
    c.n_streams = mode == POSENC_ROPE_NORMAL || mode == POSENC_ROPE_NEOX ? 1
                  : mode == POSENC_ROPE_VISION ? 2 : 4;
    c.pos_kind = PC_POS_LARGE;
    c.pos_max = 100000;
    c.seed = seed;
    return c;
}

void pc_rope_cases(struct pc_case **cases, size_t *n, size_t *cap)
{
    init_tables();
    uint64_t seed = 5000;
    struct pc_case c;

    /* Real model shapes (a few tokens each; heads and head dims as the models have). */
    c = base_case(128, 32, 7, 1, POSENC_ROPE_NORMAL, seed++); /* llama (ggml mode 0) */
    name_rope(&c, "/llama");
    add_case(cases, n, cap, &c);
    c = base_case(128, 32, 7, 1, POSENC_ROPE_NEOX, seed++); /* llama in HF layout */
    c.view = PC_VIEW_PERMUTED;
    name_rope(&c, "/llama_hf");
    add_case(cases, n, cap, &c);
    c = base_case(64, 71, 5, 1, POSENC_ROPE_NEOX, seed++); /* falcon-7b */
    name_rope(&c, "/falcon");
    add_case(cases, n, cap, &c);
    c = base_case(80, 32, 6, 1, POSENC_ROPE_NEOX, seed++); /* phi-2: partial rotation */
    c.rope.n_dims = 32;
    name_rope(&c, "/phi2");
    add_case(cases, n, cap, &c);
    c = base_case(128, 12, 9, 1, POSENC_ROPE_MROPE, seed++); /* Qwen2-VL */
    c.rope.sections[0] = 16;
    c.rope.sections[1] = 24;
    c.rope.sections[2] = 24;
    c.rope.freq_base = 1000000.0f;
    c.pos_max = 4096;
    name_rope(&c, "/qwen2vl");
    add_case(cases, n, cap, &c);
    c = base_case(128, 8, 9, 1, POSENC_ROPE_IMROPE, seed++); /* Qwen3-VL */
    c.rope.sections[0] = 24;
    c.rope.sections[1] = 20;
    c.rope.sections[2] = 20;
    c.rope.freq_base = 5000000.0f;
    c.pos_max = 4096;
    name_rope(&c, "/qwen3vl");
    add_case(cases, n, cap, &c);
    c = base_case(80, 16, 11, 1, POSENC_ROPE_VISION, seed++); /* Qwen2-VL ViT */
    c.rope.sections[0] = 20;
    c.rope.sections[1] = 20;
    c.pos_max = 64;
    name_rope(&c, "/vit");
    add_case(cases, n, cap, &c);
    c = base_case(64, 4, 5, 1, POSENC_ROPE_NEOX, seed++); /* Pixtral-like 2-D map */
    c.rope.pair_stream = pixtral_streams;
    c.n_streams = 2;
    c.pos_max = 64;
    name_rope(&c, "/pixtral_map");
    add_case(cases, n, cap, &c);
    /* One decode step (a token at a large position): backends split the heads of a single
     * token over several work-groups / threads. In place, as KV-cache code does it. */
    c = base_case(128, 32, 1, 1, POSENC_ROPE_NEOX, seed++);
    c.has_x = 2;
    name_rope(&c, "/decode");
    add_case(cases, n, cap, &c);
    c = base_case(64, 12, 1, 2, POSENC_ROPE_NORMAL, seed++);
    c.dtype = c.x_dtype = POSENC_DTYPE_F16;
    c.has_x = 2;
    name_rope(&c, "/decode");
    add_case(cases, n, cap, &c);
    c = base_case(16, 16, 8192, 1, POSENC_ROPE_NORMAL, seed++); /* long sequence */
    c.pos_kind = PC_POS_SEQUENTIAL;
    name_rope(&c, "/long");
    add_case(cases, n, cap, &c);

    /* Every scaling kind on a llama-like head (fewer heads to keep the run short). */
    for (int k = 0; k <= POSENC_ROPE_SCALING_GGML_YARN; k++)
        for (int dt = 0; dt < 2; dt++) {
            c = base_case(128, 4, 5, 1, dt ? POSENC_ROPE_NEOX : POSENC_ROPE_NORMAL, seed++);
            if (dt)
                c.dtype = c.x_dtype = POSENC_DTYPE_F16;
            struct posenc_rope_scaling *s = &c.rope.scaling;
            s->kind = (posenc_rope_scaling_kind)k;
            switch (s->kind) {
            case POSENC_ROPE_SCALING_NONE: break;
            case POSENC_ROPE_SCALING_LINEAR: s->factor = 4.0f; break;
            case POSENC_ROPE_SCALING_NTK: s->factor = 4.0f; break;
            case POSENC_ROPE_SCALING_DYNAMIC_NTK:
                s->factor = 2.0f;
                s->original_ctx = 4096;
                s->seq_len = dt ? 0 : 8192; /* 0: posenc reads the positions back */
                c.pos_max = 8192;
                break;
            case POSENC_ROPE_SCALING_YARN:
                s->factor = 4.0f;
                s->original_ctx = 4096;
                if (dt) { /* DeepSeek form, GPT-OSS-style fractional ramp */
                    s->mscale = 0.707f;
                    s->mscale_all_dim = 0.707f;
                    s->flags = POSENC_ROPE_YARN_NO_TRUNCATE;
                }
                break;
            case POSENC_ROPE_SCALING_LLAMA3:
                s->factor = 8.0f;
                s->original_ctx = 8192;
                c.rope.freq_base = 500000.0f;
                break;
            case POSENC_ROPE_SCALING_LONGROPE:
                s->factor = 32.0f;
                s->original_ctx = 4096;
                s->short_factor = longrope_short;
                s->long_factor = longrope_long;
                s->seq_len = dt ? 0 : 2048; /* short factors, or read back (long) */
                c.pos_max = 100000;
                break;
            case POSENC_ROPE_SCALING_GGML_YARN:
                s->factor = 4.0f;
                s->original_ctx = 4096;
                s->ext_factor = 1.0f;
                c.rope.attn_factor = 1.0f;
                break;
            }
            name_rope(&c, "");
            add_case(cases, n, cap, &c);
        }
    c = base_case(128, 4, 5, 1, POSENC_ROPE_NORMAL, seed++);
    c.rope.freq_factors = ggml_freq_factors;
    c.rope.freq_base = 500000.0f;
    name_rope(&c, "/freq_factors");
    add_case(cases, n, cap, &c);
    c = base_case(128, 4, 5, 1, POSENC_ROPE_NEOX, seed++);
    c.rope.freqs = user_freqs;
    c.rope.attn_factor = 0.5f;
    name_rope(&c, "/user_freqs");
    add_case(cases, n, cap, &c);

    /* The grid: mode x partial x window offset x dtype x view x direction, odd sizes. */
    for (int mode = 0; mode < 2; mode++)
        for (int partial = 0; partial < 2; partial++)
            for (int offs = 0; offs < 2; offs++)
                for (int dt = 0; dt < 3; dt++)
                    for (int v = 0; v < 3; v++)
                        for (int bwd = 0; bwd < 2; bwd++) {
                            c = base_case(18, 3, 7, 2, (posenc_rope_mode)mode, seed++);
                            c.rope.n_offs = offs ? 2 : 0;
                            c.rope.n_dims = partial ? 10 : 0;
                            c.x_dtype = dt == 1 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                            c.dtype = dt == 0 ? POSENC_DTYPE_F32 : POSENC_DTYPE_F16;
                            c.view = (enum pc_view)v;
                            if (bwd)
                                c.rope.flags = POSENC_ROPE_BACKWARD;
                            int k = (int)(seed % 6);
                            c.pos_kind = (enum pc_pos_kind)(k % 3);
                            c.pos_max = c.pos_kind == PC_POS_LARGE ? 100000 : 1000;
                            c.pos_batched = k >= 3;
                            c.has_x = (c.x_dtype == c.dtype && (seed % 2)) ? 2 : 0;
                            name_rope(&c, "");
                            add_case(cases, n, cap, &c);
                        }

    /* Fused Q and K (GQA), out of place and in place. */
    for (int i = 0; i < 4; i++) {
        c = base_case(i < 2 ? 64 : 128, i < 2 ? 8 : 32, i < 2 ? 5 : 9, 1,
                      i % 2 ? POSENC_ROPE_NEOX : POSENC_ROPE_NORMAL, seed++);
        c.rope_call = PC_ROPE_QK;
        c.k_heads = i < 2 ? 2 : 8;
        c.has_x = i >= 2 ? 2 : 0;
        if (i == 1)
            c.dtype = c.x_dtype = POSENC_DTYPE_F16;
        if (i == 3)
            c.view = PC_VIEW_PADDED;
        name_rope(&c, "");
        add_case(cases, n, cap, &c);
    }

    /* Re-rotation: context shift with one table; and a dynamic-NTK table switch. */
    for (int i = 0; i < 3; i++) {
        c = base_case(64, 4, 6, 1, i == 1 ? POSENC_ROPE_NORMAL : POSENC_ROPE_NEOX, seed++);
        c.rope_call = PC_ROPE_REROTATE;
        c.pos_max = 8192;
        c.pos_shift = 100;
        if (i == 2) {
            c.pos_shift = 0;
            c.rope_from.scaling.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK;
            c.rope_from.scaling.factor = 2.0f;
            c.rope_from.scaling.original_ctx = 4096;
            c.rope_from.scaling.seq_len = 5000;
            c.rope.scaling = c.rope_from.scaling;
            c.rope.scaling.seq_len = 8192;
            c.rope_from.mode = c.rope.mode;
        } else {
            c.rope_from = c.rope;
        }
        c.has_x = i == 1 ? 2 : 0;
        if (i == 1)
            c.dtype = c.x_dtype = POSENC_DTYPE_F16;
        name_rope(&c, i == 2 ? "/ntk_switch" : "");
        add_case(cases, n, cap, &c);
    }

    /* 16 MiB f16 outputs out of place, NORMAL and NeoX: the streaming-store rows of the CPU
     * fast path (PE_FAST_NT_BYTES) and of OpenCL CPU devices (f16 through
     * pe_nt_store_half*). Seeds of their own, so that the cases above keep theirs. */
    for (int k = 0; k < 2; k++) {
        c = base_case(128, 32, 2048, 1, k ? POSENC_ROPE_NEOX : POSENC_ROPE_NORMAL, 9100 + k);
        c.dtype = c.x_dtype = POSENC_DTYPE_F16;
        name_rope(&c, "/nt");
        add_case(cases, n, cap, &c);
    }

    /* f16 with runs of 8 dims (Vulkan: one uvec4 of 8 halves per access, G = 8 in
     * rope.comp): partial rotation and window offsets (copy units of 8 dims), f32 -> f16,
     * fused Q/K in place, NORMAL and NeoX. Seeds of their own. */
    for (int k = 0; k < 8; k++) {
        const posenc_rope_mode mode = k % 2 ? POSENC_ROPE_NEOX : POSENC_ROPE_NORMAL;
        c = base_case(k < 2 ? 80 : 64, 6, 5, 2, mode, 9200 + (uint64_t)k);
        c.dtype = c.x_dtype = POSENC_DTYPE_F16;
        if (k < 2) {
            c.rope.n_dims = 32; /* 48 dims copied */
        } else if (k < 4) {
            c.rope.n_offs = 8; /* window at 8, 24 dims copied */
            c.rope.n_dims = 32;
            c.has_x = k == 3 ? 2 : 0;
        } else if (k < 6) {
            c.x_dtype = POSENC_DTYPE_F32; /* f32 -> f16 */
        } else {
            c.ne[0] = 128;
            c.rope_call = PC_ROPE_QK;
            c.k_heads = 2;
            c.has_x = 2;
        }
        name_rope(&c, "/g8");
        add_case(cases, n, cap, &c);
    }

    /* The accuracy contract at positions up to 2^24 (random below 2^24): NORMAL, NEOX,
     * YaRN-scaled, fused Q/K, backward, f16 storage and f32 positions, held to the same
     * bound as every other case (pc_bound_rope_f32: no term grows with the position).
     * Seeds of their own. */
    for (int k = 0; k < 7; k++) {
        c = base_case(128, 32, 9, 1, k % 2 ? POSENC_ROPE_NEOX : POSENC_ROPE_NORMAL,
                      9300 + (uint64_t)k);
        c.pos_max = 16777216;
        if (k == 2) {
            c.rope.scaling.kind = POSENC_ROPE_SCALING_YARN;
            c.rope.scaling.factor = 4.0f;
            c.rope.scaling.original_ctx = 4096;
        } else if (k == 3) {
            c.rope_call = PC_ROPE_QK;
            c.k_heads = 8;
        } else if (k == 4) {
            c.rope.flags = POSENC_ROPE_BACKWARD;
        } else if (k == 5) {
            c.dtype = c.x_dtype = POSENC_DTYPE_F16;
        } else if (k == 6) {
            c.pos_kind = PC_POS_FLOAT;
        }
        name_rope(&c, "/pos<2^24");
        add_case(cases, n, cap, &c);
    }
}

/* ---- running a case ---------------------------------------------------------------------- */

struct pc_rope_images {
    struct pc_img x, dst, k, k_out, pos, pos_from;
    int has_k, has_from;
};

static void free_timg(struct pc_img *t)
{
    free(t->img);
    t->img = NULL;
}

static bool alloc_timg(struct pc_img *t, const int64_t ne[4], posenc_dtype dt, enum pc_view v)
{
    return pc_img_alloc(t, ne, dt, make_layout(ne, posenc_dtype_size(dt), v));
}

static bool make_rope_images(const struct pc_case *c, struct pc_rope_images *im)
{
    memset(im, 0, sizeof(*im));
    uint64_t rng = c->seed * 0x2545f4914f6cdd1dull + 7;
    im->has_k = c->rope_call == PC_ROPE_QK;
    im->has_from = c->rope_call == PC_ROPE_REROTATE;
    if (!alloc_timg(&im->x, c->ne, c->x_dtype, c->view))
        return false;
    pc_img_fill_random(&im->x, &rng);
    if (!alloc_timg(&im->dst, c->ne, c->dtype, c->view))
        return false;
    if (c->has_x == 2)
        memcpy(im->dst.img, im->x.img, im->x.l.bytes); /* in place: dst starts as x */
    if (im->has_k) {
        int64_t kne[4] = {c->ne[0], c->k_heads, c->ne[2], c->ne[3]};
        if (!alloc_timg(&im->k, kne, c->x_dtype, c->view) ||
            !alloc_timg(&im->k_out, kne, c->dtype, c->view))
            return false;
        pc_img_fill_random(&im->k, &rng);
        if (c->has_x == 2)
            memcpy(im->k_out.img, im->k.img, im->k.l.bytes);
    }
    /* positions [T, S, P, 1], padded views get strided positions too */
    int64_t pne[4] = {c->ne[2], c->n_streams, c->pos_batched ? c->ne[3] : 1, 1};
    posenc_dtype pdt = c->pos_kind == PC_POS_FLOAT ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32;
    enum pc_view pv = c->view == PC_VIEW_PADDED ? PC_VIEW_PADDED : PC_VIEW_CONTIGUOUS;
    if (!alloc_timg(&im->pos, pne, pdt, pv))
        return false;
    if (im->has_from && !alloc_timg(&im->pos_from, pne, pdt, pv))
        return false;
    for (int64_t b = 0; b < pne[2]; b++)
        for (int64_t s = 0; s < pne[1]; s++)
            for (int64_t t = 0; t < pne[0]; t++) {
                double p;
                switch (c->pos_kind) {
                case PC_POS_SEQUENTIAL: p = (double)(t + 3 * b + s); break;
                case PC_POS_LARGE: p = floor(pc_rand_uniform(&rng) * (double)c->pos_max); break;
                default: p = pc_rand_uniform(&rng) * (double)c->pos_max; break;
                }
                if (im->has_from) {
                    set_val(im->pos_from.img, byte_at(&im->pos_from.l, t, s, b, 0), pdt, p);
                    p -= (double)c->pos_shift;
                }
                set_val(im->pos.img, byte_at(&im->pos.l, t, s, b, 0), pdt, p);
            }
    return true;
}

static void free_rope_images(struct pc_rope_images *im)
{
    free_timg(&im->x);
    free_timg(&im->dst);
    free_timg(&im->k);
    free_timg(&im->k_out);
    free_timg(&im->pos);
    free_timg(&im->pos_from);
}

/* Run the case on ctx; fills out_dst (and out_k) with the whole output images. */
static posenc_status run_rope_on(posenc_context *ctx, const struct pc_case *c,
                                 const struct pc_rope_images *im, unsigned char *out_dst,
                                 unsigned char *out_k, char *msg, size_t msg_size)
{
    posenc_buffer *bx = NULL, *bd = NULL, *bk = NULL, *bko = NULL, *bp = NULL, *bpf = NULL;
    bool inplace = c->has_x == 2;
    posenc_status st = upload(ctx, im->dst.img, im->dst.l.bytes, &bd);
    if (st == POSENC_OK && !inplace)
        st = upload(ctx, im->x.img, im->x.l.bytes, &bx);
    if (st == POSENC_OK && im->has_k) {
        st = upload(ctx, im->k_out.img, im->k_out.l.bytes, &bko);
        if (st == POSENC_OK && !inplace)
            st = upload(ctx, im->k.img, im->k.l.bytes, &bk);
    }
    if (st == POSENC_OK)
        st = upload(ctx, im->pos.img, im->pos.l.bytes, &bp);
    if (st == POSENC_OK && im->has_from)
        st = upload(ctx, im->pos_from.img, im->pos_from.l.bytes, &bpf);
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "setup: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
        goto done;
    }
    posenc_tensor dst = view_of(bd, &im->dst.l, im->dst.dt, im->dst.ne);
    posenc_tensor x = inplace ? dst : view_of(bx, &im->x.l, im->x.dt, im->x.ne);
    posenc_tensor pos = view_of(bp, &im->pos.l, im->pos.dt, im->pos.ne);
    switch (c->rope_call) {
    case PC_ROPE:
        st = posenc_rope(ctx, &x, &pos, &dst, &c->rope);
        break;
    case PC_ROPE_QK: {
        posenc_tensor ko = view_of(bko, &im->k_out.l, im->k_out.dt, im->k_out.ne);
        posenc_tensor k = inplace ? ko : view_of(bk, &im->k.l, im->k.dt, im->k.ne);
        st = posenc_rope_qk(ctx, &x, &k, &pos, &dst, &ko, &c->rope);
        break;
    }
    default: {
        posenc_tensor pf = view_of(bpf, &im->pos_from.l, im->pos_from.dt, im->pos_from.ne);
        st = posenc_rope_rerotate(ctx, &x, &pf, &c->rope_from, &pos, &c->rope, &dst);
        break;
    }
    }
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "%s: %s", posenc_status_string(st), posenc_context_last_error(ctx));
        goto done;
    }
    st = posenc_buffer_read(bd, 0, out_dst, im->dst.l.bytes);
    if (st == POSENC_OK && im->has_k)
        st = posenc_buffer_read(bko, 0, out_k, im->k_out.l.bytes);
    if (st != POSENC_OK)
        snprintf(msg, msg_size, "read: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
done:
    posenc_buffer_destroy(&bx);
    posenc_buffer_destroy(&bd);
    posenc_buffer_destroy(&bk);
    posenc_buffer_destroy(&bko);
    posenc_buffer_destroy(&bp);
    posenc_buffer_destroy(&bpf);
    return st;
}

/* The host's own copy of the table the op uses (public posenc_rope_freqs). */
struct pc_table {
    double freq[PC_MAX_PAIRS * 2];
    uint8_t stream[PC_MAX_PAIRS * 2];
    struct posenc_rope_info info;
};

static double max_position(const struct pc_img *pos)
{
    double mx = 0.0;
    for (int64_t b = 0; b < pos->ne[2]; b++)
        for (int64_t s = 0; s < pos->ne[1]; s++)
            for (int64_t t = 0; t < pos->ne[0]; t++)
                mx = fmax(mx, get_val(pos->img, byte_at(&pos->l, t, s, b, 0), pos->dt));
    return mx;
}

static posenc_status host_table(const struct pc_case *c, const struct posenc_rope_params *p,
                                const struct pc_img *pos, struct pc_table *t)
{
    struct posenc_rope_params q = *p;
    if (q.scaling.seq_len == 0 && (q.scaling.kind == POSENC_ROPE_SCALING_DYNAMIC_NTK ||
                                   q.scaling.kind == POSENC_ROPE_SCALING_LONGROPE))
        q.scaling.seq_len = (int32_t)floor(max_position(pos)) + 1;
    return posenc_rope_freqs(c->ne[0], &q, t->freq, t->stream, &t->info);
}

/* Compare one output tensor (dst of x, or k_out of k). */
static void compare_tensor(const struct pc_case *c, const struct pc_rope_images *im,
                           const struct pc_img *in, const struct pc_img *out,
                           const unsigned char *ref_img, const unsigned char *dut_img,
                           const struct pc_table *ta, const struct pc_table *tf,
                           struct pc_result *r)
{
    int64_t n_dims = ta->info.n_dims, n_pairs = n_dims / 2;
    int64_t lo = c->rope.n_offs, hi = lo + n_dims;
    bool adjacent = c->rope.mode == POSENC_ROPE_NORMAL;
    double m = tf ? ta->info.mscale / tf->info.mscale : ta->info.mscale;
    unsigned char *mask = calloc(1, out->l.bytes);
    if (!mask) {
        r->n_bad++;
        snprintf(r->msg, sizeof(r->msg), "out of host memory for the mask");
        return;
    }
    size_t es = posenc_dtype_size(out->dt);
    for (int64_t i3 = 0; i3 < out->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < out->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < out->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < out->ne[0]; i0++) {
                    size_t at = byte_at(&out->l, i0, i1, i2, i3);
                    memset(mask + at, 1, es);
                    double rv = get_val(ref_img, at, out->dt);
                    double dv = get_val(dut_img, at, out->dt);
                    double bound;
                    if (i0 < lo || i0 >= hi) {
                        /* copied: exact, except one f16 rounding of an f32 input */
                        bound = (out->dt == POSENC_DTYPE_F16 && in->dt == POSENC_DTYPE_F32)
                                    ? pc_ulp16(rv) : 0.0;
                    } else {
                        int64_t r0 = i0 - lo, j, a, b;
                        if (adjacent) {
                            j = r0 / 2;
                            a = lo + 2 * j;
                            b = a + 1;
                        } else {
                            j = r0 % n_pairs;
                            a = lo + j;
                            b = a + n_pairs;
                        }
                        int64_t pb = im->pos.ne[2] > 1 ? i3 : 0;
                        double p = get_val(im->pos.img, byte_at(&im->pos.l, i2, ta->stream[j], pb, 0),
                                           im->pos.dt);
                        double ang = p * ta->freq[j];
                        /* the contract's sin/cos error, the same at every position up to
                         * |angle| = 2^24 (pc_bound_rope_f32) */
                        double err = pc_angle_err32(ang);
                        if (tf) {
                            double pf = get_val(im->pos_from.img,
                                                byte_at(&im->pos_from.l, i2, tf->stream[j], pb, 0),
                                                im->pos_from.dt);
                            double af = pf * tf->freq[j];
                            /* the second angle's reduction and the rounding of the
                             * difference of the two reduced angles (|d| <= pi/2) */
                            err += pc_angle_err32(af) + PC_SINCOS_ERR + 0x1p-24;
                        }
                        double xsum = fabs(get_val(in->img, byte_at(&in->l, a, i1, i2, i3), in->dt)) +
                                      fabs(get_val(in->img, byte_at(&in->l, b, i1, i2, i3), in->dt));
                        bound = pc_bound_rope_f32(err, m, xsum);
                        if (out->dt == POSENC_DTYPE_F16)
                            bound = pc_bound_to_f16(bound, rv);
                    }
                    pc_compare(r, out == &im->dst ? "dst" : "k_out", i0, i1, i2, i3, dv, rv,
                               bound);
                }
    /* the initial image of the output: poison, or the input for in-place cases */
    const unsigned char *init = c->has_x == 2 ? in->img : out->img;
    for (size_t i = 0; i < out->l.bytes; i++)
        if (!mask[i] && (dut_img[i] != init[i] || ref_img[i] != init[i]))
            r->guard_bad++;
    free(mask);
}

void pc_run_rope_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                      struct pc_result *r)
{
    memset(r, 0, sizeof(*r));
    struct pc_rope_images im;
    unsigned char *ref_d = NULL, *dut_d = NULL, *ref_k = NULL, *dut_k = NULL;
    struct pc_table *ta = calloc(1, sizeof(*ta)), *tf = calloc(1, sizeof(*tf));
    if (!ta || !tf || !make_rope_images(c, &im)) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "out of host memory building the inputs");
        free(ta);
        free(tf);
        free_rope_images(&im);
        return;
    }
    posenc_status st = host_table(c, &c->rope, &im.pos, ta);
    if (st == POSENC_OK && im.has_from)
        st = host_table(c, &c->rope_from, &im.pos_from, tf);
    if (st != POSENC_OK) {
        r->status = st;
        snprintf(r->msg, sizeof(r->msg), "posenc_rope_freqs failed on the case's params");
        goto done;
    }
    ref_d = malloc(im.dst.l.bytes);
    dut_d = malloc(im.dst.l.bytes);
    if (im.has_k) {
        ref_k = malloc(im.k_out.l.bytes);
        dut_k = malloc(im.k_out.l.bytes);
    }
    if (!ref_d || !dut_d || (im.has_k && (!ref_k || !dut_k))) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "out of host memory for the output images");
        goto done;
    }
    char msg[256];
    st = run_rope_on(ref, c, &im, ref_d, ref_k, msg, sizeof(msg));
    if (st != POSENC_OK) {
        r->status = st;
        snprintf(r->msg, sizeof(r->msg), "reference failed: %s", msg);
        goto done;
    }
    st = run_rope_on(dut, c, &im, dut_d, dut_k, msg, sizeof(msg));
    r->status = st;
    if (st != POSENC_OK) {
        snprintf(r->msg, sizeof(r->msg), "%s", msg);
        goto done;
    }
    compare_tensor(c, &im, &im.x, &im.dst, ref_d, dut_d, ta, im.has_from ? tf : NULL, r);
    if (im.has_k)
        compare_tensor(c, &im, &im.k, &im.k_out, ref_k, dut_k, ta, NULL, r);
    if (r->guard_bad && r->n_bad == 0)
        snprintf(r->msg, sizeof(r->msg), "%lld bytes outside the output views were changed",
                 (long long)r->guard_bad);
    r->pass = r->n_bad == 0 && r->guard_bad == 0;
done:
    free(ref_d);
    free(dut_d);
    free(ref_k);
    free(dut_k);
    free(ta);
    free(tf);
    free_rope_images(&im);
}
