/*
 * check_encodings.c - verification cases and their runner for the learned-position,
 * 2-D (sin-cos, resize) and attention-bias (relative, ALiBi) ops (see check.h).
 *
 * Every case runs on the device under test and on the CPU reference with the same seeded
 * inputs; the output starts poisoned (or holds the input, in place, or the gradient
 * table being accumulated into) inside guard bytes that must come back unchanged. Each
 * element is compared against a bound derived below, next to the op it belongs to, from
 * f32 rounding (u = 2^-24, the unit roundoff) and, for f16 outputs, one f16 rounding.
 *
 * Views: "padded" pads every stride and offsets by one element; "permuted" swaps dims 1
 * and 2 in memory, and for 2-D tensors ([d, rows], tables) swaps dims 0 and 1 (a
 * transposed, column-major table).
 */
#include "check_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24 /* f32 unit roundoff */

static const float user_slopes[3] = {0.7f, 0.0625f, 0.3f};

/* ---- naming ------------------------------------------------------------------------------ */

static const char *dt_name(posenc_dtype t)
{
    return posenc_dtype_name(t);
}

/* "table", "add_x16" (separate input of that dtype) or "inplace". */
static const char *x_mode(const struct pc_case *c, char *buf, size_t n)
{
    if (c->has_x == 0)
        snprintf(buf, n, "no_x");
    else if (c->has_x == 2)
        snprintf(buf, n, "inplace");
    else
        snprintf(buf, n, "add_x%s", c->x_dtype == POSENC_DTYPE_F16 ? "16" : "32");
    return buf;
}

static int64_t relbias_n_buckets(const struct posenc_relbias_params *p)
{
    if (p->kind == POSENC_RELBIAS_CLIPPED)
        return 2 * (int64_t)p->max_distance + 1;
    return p->num_buckets ? p->num_buckets : 32;
}

static void name_case(struct pc_case *c)
{
    char xm[16], extra[96] = "";
    size_t e = 0;
    const char *op = pc_op_name(c->op);
    const char *v = view_name(c->view);
    long long n0 = c->ne[0], n1 = c->ne[1], n2 = c->ne[2], n3 = c->ne[3];
    switch (c->op) {
    case PC_OP_LEARNED:
        snprintf(c->name, sizeof(c->name),
                 "%s/%s/ne=%lldx%lldx%lldx%lld/rows=%lld/table=%s/%s%s/%s",
                 op, dt_name(c->dtype), n0, n1, n2, n3, (long long)c->rows,
                 dt_name(c->table_dtype), x_mode(c, xm, sizeof(xm)),
                 c->pos_batched ? "/pos_batched" : "", v);
        break;
    case PC_OP_LEARNED_BACKWARD:
        snprintf(c->name, sizeof(c->name), "%s/%s/dy=%lldx%lldx%lldx%lld/%s/rows=%lld%s/%s", op,
                 dt_name(c->dtype), n0, n1, n2, n3, dt_name(c->x_dtype), (long long)c->rows,
                 c->pos_batched ? "/pos_batched" : "", v);
        break;
    case PC_OP_SINCOS_2D:
        if (c->grid2d.base != 0.0f)
            e += (size_t)snprintf(extra + e, sizeof(extra) - e, "/base=%g", (double)c->grid2d.base);
        if (c->grid2d.grid_scale != 0.0f)
            e += (size_t)snprintf(extra + e, sizeof(extra) - e, "/grid_scale=%g",
                                  (double)c->grid2d.grid_scale);
        snprintf(c->name, sizeof(c->name), "%s/%s/d=%lld/grid=%lldx%lld%s%s/%s", op,
                 dt_name(c->dtype), n0, (long long)c->grid[0], (long long)c->grid[1],
                 c->grid2d.cls_token ? "/cls" : "", extra, v);
        break;
    case PC_OP_RESIZE_2D:
        snprintf(c->name, sizeof(c->name), "%s/%s->%s/d=%lld/%lldx%lld->%lldx%lld/%s%s/%s", op,
                 dt_name(c->table_dtype), dt_name(c->dtype), n0, (long long)c->grid[0],
                 (long long)c->grid[1], (long long)c->grid[2], (long long)c->grid[3],
                 c->resize.filter == POSENC_RESIZE_BILINEAR ? "bilinear" : "bicubic",
                 c->resize.cls_token ? "/cls" : "", v);
        break;
    case PC_OP_RELBIAS:
    case PC_OP_RELBIAS_BACKWARD: {
        const struct posenc_relbias_params *p = &c->relbias;
        if (p->kind == POSENC_RELBIAS_T5)
            e += (size_t)snprintf(extra + e, sizeof(extra) - e, "t5/%s/buckets=%lld/max_dist=%d",
                                  p->causal ? "causal" : "bidir", (long long)relbias_n_buckets(p),
                                  p->max_distance ? p->max_distance : 128);
        else
            e += (size_t)snprintf(extra + e, sizeof(extra) - e, "clipped/max_dist=%d",
                                  p->max_distance);
        if (p->q_offset || p->k_offset)
            e += (size_t)snprintf(extra + e, sizeof(extra) - e, "/q_off=%d/k_off=%d", p->q_offset,
                                  p->k_offset);
        if (c->op == PC_OP_RELBIAS)
            snprintf(c->name, sizeof(c->name), "%s/%s/ne=%lldx%lldx%lldx%lld/%s/table=%s/%s/%s",
                     op, dt_name(c->dtype), n0, n1, n2, n3, extra, dt_name(c->table_dtype),
                     x_mode(c, xm, sizeof(xm)), v);
        else
            snprintf(c->name, sizeof(c->name), "%s/%s/dlogits=%lldx%lldx%lldx%lld/%s/%s/%s", op,
                     dt_name(c->dtype), n0, n1, n2, n3, dt_name(c->x_dtype), extra, v);
        break;
    }
    case PC_OP_ALIBI: {
        const struct posenc_alibi_params *p = &c->alibi;
        e += (size_t)snprintf(extra + e, sizeof(extra) - e, "%s%s",
                              p->causal ? "/causal" : "", p->symmetric ? "/symmetric" : "");
        if (p->max_bias != 0.0f)
            e += (size_t)snprintf(extra + e, sizeof(extra) - e, "/max_bias=%g",
                                  (double)p->max_bias);
        if (p->slopes)
            e += (size_t)snprintf(extra + e, sizeof(extra) - e, "/user_slopes");
        if (p->q_offset || p->k_offset)
            e += (size_t)snprintf(extra + e, sizeof(extra) - e, "/q_off=%d/k_off=%d", p->q_offset,
                                  p->k_offset);
        snprintf(c->name, sizeof(c->name), "%s/%s/ne=%lldx%lldx%lldx%lld/heads=%lld%s/%s/%s", op,
                 dt_name(c->dtype), n0, n1, n2, n3, n2, extra, x_mode(c, xm, sizeof(xm)), v);
        break;
    }
    default:
        snprintf(c->name, sizeof(c->name), "?");
        break;
    }
}

/* ---- the case tables -------------------------------------------------------------------- */

static posenc_dtype other(posenc_dtype t)
{
    return t == POSENC_DTYPE_F32 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
}

static struct pc_case blank(enum pc_op op, uint64_t seed)
{
    struct pc_case c;
    memset(&c, 0, sizeof(c));
    c.op = op;
    c.dtype = c.x_dtype = c.table_dtype = POSENC_DTYPE_F32;
    c.ne[0] = c.ne[1] = c.ne[2] = c.ne[3] = 1;
    c.seed = seed;
    return c;
}

static void learned_cases(struct pc_case **cases, size_t *n, size_t *cap, bool fwd, bool bwd)
{
    /* d, T, B, rows: odd sizes, a long sequence, a GPT-2-width table */
    static const int64_t fwd_shapes[][4] = {
        {1, 7, 1, 9}, {7, 93, 2, 100}, {93, 7, 3, 2048}, {768, 16, 1, 1024}};
    /* backward: few rows, so rows collect many tokens (up to 128 in the last shape) */
    static const int64_t bwd_shapes[][4] = {
        {1, 7, 1, 3}, {7, 93, 2, 10}, {93, 7, 3, 50}, {64, 512, 1, 4}};
    uint64_t seed = 7000;
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0 && !fwd) || (pass == 1 && !bwd))
            continue;
        const int64_t(*shapes)[4] = pass == 0 ? fwd_shapes : bwd_shapes;
        for (int s = 0; s < 4; s++)
            for (int dt = 0; dt < 2; dt++)
                for (int v = 0; v < 3; v++) {
                    struct pc_case c =
                        blank(pass == 0 ? PC_OP_LEARNED : PC_OP_LEARNED_BACKWARD, seed++);
                    c.dtype = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                    c.x_dtype = c.table_dtype = c.dtype;
                    c.ne[0] = shapes[s][0];
                    c.ne[1] = shapes[s][1];
                    c.ne[2] = shapes[s][2];
                    c.rows = shapes[s][3];
                    c.view = (enum pc_view)v;
                    int k = s * 6 + dt * 3 + v;
                    c.pos_batched = c.ne[2] > 1 && (k % 2);
                    if (pass == 0) {
                        c.has_x = k % 3;
                        if (k % 4 == 1)
                            c.table_dtype = other(c.dtype);
                        if (c.has_x == 1 && k % 5 == 2)
                            c.x_dtype = other(c.dtype);
                    } else if (k % 4 == 1) {
                        c.x_dtype = other(c.dtype); /* dy in the other dtype */
                    }
                    name_case(&c);
                    add_case(cases, n, cap, &c);
                }
    }
}

static void sincos_cases(struct pc_case **cases, size_t *n, size_t *cap)
{
    /* d, grid_h, grid_w: the smallest, odd grids, ViT-B/16 at 224 (14x14, d = 768) */
    static const int64_t shapes[][3] = {{4, 1, 1}, {28, 7, 5}, {768, 14, 14}, {64, 3, 93}};
    uint64_t seed = 7100;
    for (int s = 0; s < 4; s++)
        for (int cls = 0; cls < 2; cls++)
            for (int dt = 0; dt < 2; dt++) {
                struct pc_case c = blank(PC_OP_SINCOS_2D, seed++);
                c.dtype = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                c.grid[0] = shapes[s][1];
                c.grid[1] = shapes[s][2];
                c.grid2d.cls_token = cls;
                c.ne[0] = shapes[s][0];
                c.ne[1] = c.grid[0] * c.grid[1] + cls;
                int k = s * 4 + cls * 2 + dt;
                c.view = (enum pc_view)(k % 3);
                if (k % 5 == 1)
                    c.grid2d.grid_scale = 2.0f;  /* DiT: grid 32 over base size 16 */
                if (k % 7 == 3)
                    c.grid2d.grid_scale = 0.75f; /* a fractional interpolation scale */
                if (k % 6 == 2)
                    c.grid2d.base = 100.0f;
                name_case(&c);
                add_case(cases, n, cap, &c);
            }
}

static void resize_cases(struct pc_case **cases, size_t *n, size_t *cap)
{
    /* d, src h, w, dst h, w: up (ViT 224 -> 256), down, mixed, from 1x1, DINOv2's 37x37
     * (518 px) to 16x16 (224 px), same size */
    static const int64_t shapes[][5] = {{1, 14, 14, 16, 16}, {7, 16, 16, 14, 14},
                                        {93, 7, 5, 3, 9},    {16, 1, 1, 4, 4},
                                        {32, 37, 37, 16, 16}, {8, 5, 5, 5, 5}};
    uint64_t seed = 7200;
    for (int s = 0; s < 6; s++)
        for (int f = 0; f < 2; f++)
            for (int cls = 0; cls < 2; cls++) {
                struct pc_case c = blank(PC_OP_RESIZE_2D, seed++);
                int k = s * 4 + f * 2 + cls;
                c.dtype = (k % 2) ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                c.table_dtype = (k % 5 == 3) ? other(c.dtype) : c.dtype;
                for (int i = 0; i < 4; i++)
                    c.grid[i] = shapes[s][1 + i];
                c.resize.filter = f ? POSENC_RESIZE_BILINEAR : POSENC_RESIZE_BICUBIC;
                c.resize.cls_token = cls;
                c.ne[0] = shapes[s][0];
                c.ne[1] = c.grid[2] * c.grid[3] + cls;
                c.view = (enum pc_view)(k % 3);
                name_case(&c);
                add_case(cases, n, cap, &c);
            }
}

/* Shapes [K, Q, H, B] and params of the relative-bias cases. */
struct rb_cfg {
    int64_t ne[4];
    posenc_relbias_kind kind;
    int32_t num_buckets, max_distance, causal, q_offset, k_offset;
};

static const struct rb_cfg rb_cfgs[] = {
    {{7, 7, 8, 1}, POSENC_RELBIAS_T5, 0, 0, 0, 0, 0},       /* T5 encoder, defaults */
    {{93, 1, 12, 1}, POSENC_RELBIAS_T5, 0, 0, 1, 92, 0},    /* T5 decoder: one decode step */
    {{300, 5, 2, 2}, POSENC_RELBIAS_T5, 32, 128, 0, 150, 0}, /* saturates in both directions */
    {{33, 20, 3, 2}, POSENC_RELBIAS_CLIPPED, 0, 4, 0, 13, 0}, /* Shaw, KV cache */
    {{1, 93, 1, 1}, POSENC_RELBIAS_T5, 16, 64, 0, 0, 50},   /* other bucket counts */
    {{7, 7, 4, 3}, POSENC_RELBIAS_CLIPPED, 0, 2, 0, 0, 3},
};

static void relbias_cases(struct pc_case **cases, size_t *n, size_t *cap, bool fwd, bool bwd)
{
    uint64_t seed = 7300;
    for (size_t s = 0; s < sizeof(rb_cfgs) / sizeof(rb_cfgs[0]); s++)
        for (int dt = 0; dt < 2; dt++) {
            const struct rb_cfg *g = &rb_cfgs[s];
            struct pc_case c = blank(PC_OP_RELBIAS, 0);
            memcpy(c.ne, g->ne, sizeof(c.ne));
            c.dtype = c.x_dtype = c.table_dtype = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
            c.relbias.kind = g->kind;
            c.relbias.num_buckets = g->num_buckets;
            c.relbias.max_distance = g->max_distance;
            c.relbias.causal = g->causal;
            c.relbias.q_offset = g->q_offset;
            c.relbias.k_offset = g->k_offset;
            for (int v = 0; v < 3 && fwd; v++) {
                struct pc_case f = c;
                int k = (int)s * 6 + dt * 3 + v;
                f.seed = seed++;
                f.view = (enum pc_view)v;
                f.has_x = k % 3;
                if (k % 4 == 1)
                    f.table_dtype = other(f.dtype);
                if (f.has_x == 1 && k % 5 == 2)
                    f.x_dtype = other(f.dtype);
                name_case(&f);
                add_case(cases, n, cap, &f);
            }
            if (bwd) {
                struct pc_case b = c;
                b.op = PC_OP_RELBIAS_BACKWARD;
                b.seed = seed++;
                b.view = (enum pc_view)((s + (size_t)dt) % 3);
                if (s % 2)
                    b.x_dtype = other(b.dtype);
                name_case(&b);
                add_case(cases, n, cap, &b);
            }
        }
}

struct alibi_cfg {
    int64_t ne[4];
    int32_t causal, symmetric, q_offset, k_offset;
    float max_bias;
    int user_slopes;
};

static const struct alibi_cfg alibi_cfgs[] = {
    {{7, 7, 8, 1}, 1, 0, 0, 0, 0.0f, 0},     /* 8 heads, causal: 2^-1 .. 2^-8 */
    {{93, 1, 12, 1}, 1, 0, 92, 0, 0.0f, 0},  /* 12 heads, one decode step after 92 tokens */
    {{33, 20, 8, 2}, 0, 1, 13, 0, 0.0f, 0},  /* symmetric (encoder), KV cache */
    {{20, 33, 12, 1}, 0, 0, 0, 13, 0.0f, 0}, /* neither: keys ahead get +m*distance */
    {{93, 93, 1, 1}, 1, 0, 0, 0, 0.0f, 0},   /* one head, a long causal square */
    {{9, 9, 7, 2}, 1, 0, 0, 0, 16.0f, 0},    /* 7 heads (not a power of 2), max_bias 16 */
    {{5, 5, 3, 1}, 1, 1, 0, 0, 0.0f, 1},     /* user slopes, causal and symmetric */
    {{48, 20, 4, 1}, 1, 0, 7, 0, 0.0f, 0},   /* rows of 16-multiples: vector kernels */
    {{32, 9, 2, 2}, 0, 1, 0, 3, 0.0f, 0},    /* the same, symmetric, batched */
};

static void alibi_cases(struct pc_case **cases, size_t *n, size_t *cap)
{
    uint64_t seed = 7400;
    for (size_t s = 0; s < sizeof(alibi_cfgs) / sizeof(alibi_cfgs[0]); s++)
        for (int dt = 0; dt < 2; dt++)
            for (int v = 0; v < 3; v++) {
                const struct alibi_cfg *g = &alibi_cfgs[s];
                struct pc_case c = blank(PC_OP_ALIBI, seed++);
                memcpy(c.ne, g->ne, sizeof(c.ne));
                c.dtype = c.x_dtype = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                c.view = (enum pc_view)v;
                int k = (int)s * 6 + dt * 3 + v;
                c.has_x = k % 3;
                if (c.has_x == 1 && k % 4 == 1)
                    c.x_dtype = other(c.dtype);
                c.alibi.causal = g->causal;
                c.alibi.symmetric = g->symmetric;
                c.alibi.q_offset = g->q_offset;
                c.alibi.k_offset = g->k_offset;
                c.alibi.max_bias = g->max_bias;
                c.alibi.slopes = g->user_slopes ? user_slopes : NULL;
                name_case(&c);
                add_case(cases, n, cap, &c);
            }
    /* Contiguous rows of 8-multiples with logits added and in place (the loop above adds
     * contiguous views without logits only): the f16 vector kernels (Vulkan: 8 keys as one
     * uvec4 of halves), f16 and mixed dtypes, every flag combination. Seeds of their own. */
    static const struct alibi_cfg vec8[] = {
        {{64, 12, 3, 2}, 1, 0, 0, 0, 0.0f, 0},  /* f16 + f16 logits, causal */
        {{64, 12, 3, 2}, 1, 0, 7, 0, 0.0f, 0},  /* f16 in place, causal */
        {{40, 8, 4, 1}, 0, 1, 3, 0, 0.0f, 0},   /* f16 + f32 logits, symmetric */
        {{40, 8, 4, 1}, 0, 0, 0, 3, 0.0f, 0},   /* f32 + f16 logits, neither */
        {{24, 16, 2, 2}, 1, 1, 0, 0, 8.0f, 0},  /* f16 in place, causal and symmetric */
        {{24, 8, 5, 1}, 1, 0, 16, 0, 0.0f, 0},  /* f16 table only */
    };
    for (int i = 0; i < (int)(sizeof(vec8) / sizeof(vec8[0])); i++) {
        const struct alibi_cfg *g = &vec8[i];
        struct pc_case c = blank(PC_OP_ALIBI, 7600 + (uint64_t)i);
        memcpy(c.ne, g->ne, sizeof(c.ne));
        c.dtype = c.x_dtype = i == 3 ? POSENC_DTYPE_F32 : POSENC_DTYPE_F16;
        c.view = PC_VIEW_CONTIGUOUS;
        c.has_x = i == 5 ? 0 : (i == 1 || i == 4) ? 2 : 1;
        if (i == 2 || i == 3)
            c.x_dtype = other(c.dtype);
        c.alibi.causal = g->causal;
        c.alibi.symmetric = g->symmetric;
        c.alibi.q_offset = g->q_offset;
        c.alibi.k_offset = g->k_offset;
        c.alibi.max_bias = g->max_bias;
        name_case(&c);
        add_case(cases, n, cap, &c);
    }
}

void pc_encoding_cases(enum pc_op op, struct pc_case **cases, size_t *n, size_t *cap)
{
    bool all = op == PC_OP_COUNT;
    if (all || op == PC_OP_LEARNED || op == PC_OP_LEARNED_BACKWARD)
        learned_cases(cases, n, cap, all || op == PC_OP_LEARNED,
                      all || op == PC_OP_LEARNED_BACKWARD);
    if (all || op == PC_OP_SINCOS_2D)
        sincos_cases(cases, n, cap);
    if (all || op == PC_OP_RESIZE_2D)
        resize_cases(cases, n, cap);
    if (all || op == PC_OP_RELBIAS || op == PC_OP_RELBIAS_BACKWARD)
        relbias_cases(cases, n, cap, all || op == PC_OP_RELBIAS,
                      all || op == PC_OP_RELBIAS_BACKWARD);
    if (all || op == PC_OP_ALIBI)
        alibi_cases(cases, n, cap);
}

/* ---- images ------------------------------------------------------------------------------ */

/* out: dst or dtable; in: x, dy, src, logits or dlogits; table: learned / relbias table;
 * pos: learned positions. */
struct enc_images {
    struct pc_img out, in, table, pos;
};

static struct pc_layout enc_layout(const int64_t ne[4], size_t es, enum pc_view v)
{
    if (v != PC_VIEW_PERMUTED || ne[2] != 1 || ne[3] != 1)
        return make_layout(ne, es, v);
    /* a 2-D tensor, transposed: dim 1 innermost */
    struct pc_layout l;
    memset(&l, 0, sizeof(l));
    int64_t e = (int64_t)es;
    l.offset = PC_GUARD;
    l.nb[1] = e;
    l.nb[0] = e * ne[1];
    l.nb[2] = l.nb[3] = l.nb[0] * ne[0];
    l.bytes = l.offset + (size_t)(ne[0] * ne[1]) * es + PC_GUARD;
    return l;
}

static bool alloc_img(struct pc_img *t, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                      posenc_dtype dt, enum pc_view v)
{
    const int64_t ne[4] = {n0, n1, n2, n3};
    return pc_img_alloc(t, ne, dt, enc_layout(ne, posenc_dtype_size(dt), v));
}

static void free_images(struct enc_images *im)
{
    free(im->out.img);
    free(im->in.img);
    free(im->table.img);
    free(im->pos.img);
    memset(im, 0, sizeof(*im));
}

/* Positions [T, P] i32 in [0, rows): token 0 gets the last row and token 1 row 0 (the
 * edges), the rest uniform. Padded views read every other int. */
static bool make_positions(const struct pc_case *c, struct enc_images *im, uint64_t *rng)
{
    int64_t T = c->ne[1], P = c->pos_batched ? c->ne[2] : 1;
    if (!alloc_img(&im->pos, T, P, 1, 1, POSENC_DTYPE_I32, PC_VIEW_CONTIGUOUS))
        return false;
    if (c->view == PC_VIEW_PADDED) {
        struct pc_layout *l = &im->pos.l;
        l->nb[0] = 8;
        l->nb[1] = 8 * T + 4;
        l->bytes = l->offset + (size_t)(l->nb[1] * P) + PC_GUARD;
        free(im->pos.img);
        im->pos.img = calloc(1, l->bytes);
        if (!im->pos.img)
            return false;
    }
    for (int64_t b = 0; b < P; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t r = (int64_t)floor(pc_rand_uniform(rng) * (double)c->rows);
            if (t == 0)
                r = c->rows - 1;
            else if (t == 1)
                r = 0;
            set_val(im->pos.img, byte_at(&im->pos.l, t, b, 0, 0), POSENC_DTYPE_I32, (double)r);
        }
    return true;
}

static bool make_images(const struct pc_case *c, struct enc_images *im)
{
    memset(im, 0, sizeof(*im));
    uint64_t rng = c->seed * 0x2545f4914f6cdd1dull + 11;
    const int64_t *ne = c->ne;
    bool fused = c->op == PC_OP_LEARNED || c->op == PC_OP_RELBIAS || c->op == PC_OP_ALIBI;
    switch (c->op) {
    case PC_OP_LEARNED:
    case PC_OP_RELBIAS:
    case PC_OP_ALIBI:
        if (!alloc_img(&im->out, ne[0], ne[1], ne[2], ne[3], c->dtype, c->view))
            return false;
        break;
    case PC_OP_LEARNED_BACKWARD:
        if (!alloc_img(&im->out, ne[0], c->rows, 1, 1, c->dtype, c->view) ||
            !alloc_img(&im->in, ne[0], ne[1], ne[2], ne[3], c->x_dtype, c->view))
            return false;
        pc_img_fill_random(&im->out, &rng); /* the gradient accumulated so far */
        pc_img_fill_random(&im->in, &rng);
        return make_positions(c, im, &rng);
    case PC_OP_SINCOS_2D:
        return alloc_img(&im->out, ne[0], ne[1], 1, 1, c->dtype, c->view);
    case PC_OP_RESIZE_2D:
        if (!alloc_img(&im->out, ne[0], ne[1], 1, 1, c->dtype, c->view) ||
            !alloc_img(&im->in, ne[0], c->grid[0] * c->grid[1] + c->resize.cls_token, 1, 1,
                       c->table_dtype, c->view))
            return false;
        pc_img_fill_random(&im->in, &rng);
        return true;
    case PC_OP_RELBIAS_BACKWARD:
        if (!alloc_img(&im->out, relbias_n_buckets(&c->relbias), ne[2], 1, 1, c->dtype,
                       c->view) ||
            !alloc_img(&im->in, ne[0], ne[1], ne[2], ne[3], c->x_dtype, c->view))
            return false;
        pc_img_fill_random(&im->out, &rng);
        pc_img_fill_random(&im->in, &rng);
        return true;
    default:
        return false;
    }
    if (fused && c->has_x == 1) {
        if (!alloc_img(&im->in, ne[0], ne[1], ne[2], ne[3], c->x_dtype, c->view))
            return false;
        pc_img_fill_random(&im->in, &rng);
    } else if (fused && c->has_x == 2) {
        /* in place: the output starts as the input (same dtype and layout); a copy is
         * kept as the "input" image, for the bounds */
        pc_img_fill_random(&im->out, &rng);
        if (!alloc_img(&im->in, ne[0], ne[1], ne[2], ne[3], c->dtype, c->view))
            return false;
        memcpy(im->in.img, im->out.img, im->out.l.bytes);
    }
    if (c->op == PC_OP_LEARNED) {
        if (!alloc_img(&im->table, ne[0], c->rows, 1, 1, c->table_dtype, c->view))
            return false;
        pc_img_fill_random(&im->table, &rng);
        return make_positions(c, im, &rng);
    }
    if (c->op == PC_OP_RELBIAS) {
        if (!alloc_img(&im->table, relbias_n_buckets(&c->relbias), ne[2], 1, 1, c->table_dtype,
                       c->view))
            return false;
        pc_img_fill_random(&im->table, &rng);
    }
    return true;
}

/* ---- running on one context -------------------------------------------------------------- */

static posenc_tensor tensor_of(posenc_buffer *b, const struct pc_img *t)
{
    return view_of(b, &t->l, t->dt, t->ne);
}

static posenc_status run_on(posenc_context *ctx, const struct pc_case *c,
                            const struct enc_images *im, unsigned char *out_img, char *msg,
                            size_t msg_size)
{
    posenc_buffer *bo = NULL, *bi = NULL, *bt = NULL, *bp = NULL;
    bool inplace = c->has_x == 2;
    posenc_status st = upload(ctx, im->out.img, im->out.l.bytes, &bo);
    if (st == POSENC_OK && im->in.img && !inplace)
        st = upload(ctx, im->in.img, im->in.l.bytes, &bi);
    if (st == POSENC_OK && im->table.img)
        st = upload(ctx, im->table.img, im->table.l.bytes, &bt);
    if (st == POSENC_OK && im->pos.img)
        st = upload(ctx, im->pos.img, im->pos.l.bytes, &bp);
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "setup: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
        goto done;
    }
    posenc_tensor out = tensor_of(bo, &im->out);
    posenc_tensor in = inplace ? out : (bi ? tensor_of(bi, &im->in) : out);
    const posenc_tensor *xp = (c->has_x || !(c->op == PC_OP_LEARNED || c->op == PC_OP_RELBIAS ||
                                             c->op == PC_OP_ALIBI))
                                  ? &in
                                  : NULL;
    posenc_tensor table = bt ? tensor_of(bt, &im->table) : out;
    posenc_tensor pos = bp ? tensor_of(bp, &im->pos) : out;
    switch (c->op) {
    case PC_OP_LEARNED: st = posenc_learned(ctx, xp, &pos, &table, &out); break;
    case PC_OP_LEARNED_BACKWARD: st = posenc_learned_backward(ctx, &in, &pos, &out); break;
    case PC_OP_SINCOS_2D:
        st = posenc_sincos_2d(ctx, c->grid[0], c->grid[1], &out, &c->grid2d);
        break;
    case PC_OP_RESIZE_2D:
        st = posenc_resize_2d(ctx, &in, c->grid[0], c->grid[1], &out, c->grid[2], c->grid[3],
                              &c->resize);
        break;
    case PC_OP_RELBIAS: st = posenc_relbias(ctx, xp, &table, &out, &c->relbias); break;
    case PC_OP_RELBIAS_BACKWARD: st = posenc_relbias_backward(ctx, &in, &out, &c->relbias); break;
    case PC_OP_ALIBI: st = posenc_alibi(ctx, xp, &out, &c->alibi); break;
    default: st = POSENC_ERR_INTERNAL; break;
    }
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "%s: %s", posenc_status_string(st), posenc_context_last_error(ctx));
        goto done;
    }
    st = posenc_buffer_read(bo, 0, out_img, im->out.l.bytes);
    if (st != POSENC_OK)
        snprintf(msg, msg_size, "read: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
done:
    posenc_buffer_destroy(&bo);
    posenc_buffer_destroy(&bi);
    posenc_buffer_destroy(&bt);
    posenc_buffer_destroy(&bp);
    return st;
}

/* ---- bounds -------------------------------------------------------------------------------- */

/*
 * One f32 addition s = a + b of two values exact in f32 (f32 inputs, or f16 inputs widened
 * exactly). A device adds in f32: correctly rounded, within half an ulp of s. The
 * reference adds in double (exact, or within 2^-53 |s|) and rounds once to f32: within
 * half an ulp (plus that sliver). The two roundings of (nearly) the same value differ by at
 * most one ulp of s. With a single term (no addition) nothing is rounded in f32: 0.
 */
static double bound_add_f32(double s, bool added)
{
    return added ? pc_ulp32(fabs(s)) : 0.0;
}

/* The output stored as f16: the f32 bound plus one f16 rounding (pc_bound_to_f16). */
static double to_dtype(posenc_dtype dt, double b32, double ref_value)
{
    return dt == POSENC_DTYPE_F16 ? pc_bound_to_f16(b32, ref_value) : b32;
}

/*
 * Accumulation dtable += sum of n terms (learned_backward, relbias_backward). A device
 * sums the n terms in f32 in some order (n - 1 roundings) and adds the sum to the old
 * value (one more): n roundings, each at most u times a partial sum bounded by
 * S = |old| + sum |terms|, so |device - exact| <= gamma_n S with gamma_n = n u / (1 - n u)
 * (Higham, Accuracy and Stability, Lemma 3.1; the brief's n*u*sum|dy|). The reference
 * sums in double (error ~ n 2^-53 S, negligible against it: counted by the factor 1.01)
 * and rounds once: half an ulp of the result, taken as one ulp. No terms: the old value
 * stays (a device may skip the row or add 0): 0.
 */
static double bound_accumulate(int64_t n_terms, double S, double ref_value)
{
    if (n_terms == 0)
        return 0.0;
    double n = (double)n_terms;
    return 1.01 * n * U32 / (1.0 - n * U32) * S + pc_ulp32(fabs(ref_value));
}

/*
 * resize_2d: y = sum over 16 taps of wy_a * wx_b * src. A device holds each weight rounded
 * to f32 (relative error u each), multiplies the two weights and the source (two
 * roundings) and sums 16 products (15 roundings), in any order or separably (first the
 * rows, then the columns: fewer roundings), so |device - exact| <= (2 + 2 + 15) u (1 + O(u))
 * sum |wy wx src|: 20 u S. The reference computes in double and rounds once (one ulp
 * of y).
 */
static double bound_resize(double S, double ref_value)
{
    return 20.0 * U32 * S + pc_ulp32(fabs(ref_value));
}

/*
 * ALiBi: y = x - m*dist, dist an integer, exact in f32 (|dist| <= 2^24, checked by the
 * front end). A device rounds m to f32 (u m), multiplies by dist (u m |dist| (1+u)) and
 * subtracts from x (u |y'|): |device - exact| <= (2u + u^2) m|dist| + u (|y| + 2.01 u
 * m|dist|) <= 2.01 u m|dist| + u |y|. The reference rounds its double result once (u |y|,
 * taken as one ulp). Masked elements are -inf on both sides (compared exactly).
 */
static double bound_alibi(double m_dist, double y)
{
    return 2.01 * U32 * m_dist + U32 * fabs(y) + pc_ulp32(fabs(y));
}

/* The torch taps of one axis, recomputed here from the formulas (UpSample.h:
 * area_pixel_compute_source_index, guard_index_and_lambda, cubic_convolution1/2) to know
 * which source elements and weights feed each output: written independently of the
 * library's front end. */
static void check_taps(int64_t in, int64_t out, int filter, int64_t i, int64_t idx[4],
                       double w[4])
{
    double real = (double)in / (double)out * ((double)i + 0.5) - 0.5;
    if (filter == POSENC_RESIZE_BILINEAR) {
        if (in == out)
            real = (double)i; /* torch copies */
        if (real < 0.0)
            real = 0.0;
        int64_t i0 = (int64_t)real < in - 1 ? (int64_t)real : in - 1;
        double l = real - (double)i0;
        l = l < 0 ? 0 : l > 1 ? 1 : l;
        idx[0] = i0;
        idx[1] = i0 < in - 1 ? i0 + 1 : i0;
        idx[2] = idx[3] = i0;
        w[0] = 1.0 - l;
        w[1] = l;
        w[2] = w[3] = 0.0;
        return;
    }
    const double A = -0.75;
    int64_t i0 = (int64_t)floor(real);
    if (i0 > in - 1)
        i0 = in - 1;
    double t = real - (double)i0;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double x[4] = {t + 1.0, t, 1.0 - t, 2.0 - t};
    for (int j = 0; j < 4; j++) {
        double a = x[j];
        w[j] = a <= 1.0 ? ((A + 2) * a - (A + 3)) * a * a + 1
                        : ((A * a - 5 * A) * a + 8 * A) * a - 4 * A;
        int64_t k = i0 - 1 + j;
        idx[j] = k < 0 ? 0 : k > in - 1 ? in - 1 : k;
    }
}

/* Per-case host data the bounds need. */
struct enc_host {
    double *freq;          /* sincos_2d: [d/4] */
    double *slopes;        /* alibi: [H] */
    int32_t *bucket;       /* relbias: [n_rel], index rel - rel_min */
    int64_t rel_min;
    double *sum_abs;       /* backward: [d or 1, rows or buckets*H] sum |terms| */
    int64_t *count;        /* backward: terms per row / (bucket, h) */
};

static void free_host(struct enc_host *h)
{
    free(h->freq);
    free(h->slopes);
    free(h->bucket);
    free(h->sum_abs);
    free(h->count);
}

static int32_t pos_at(const struct enc_images *im, const struct pc_case *c, int64_t t, int64_t b)
{
    return (int32_t)pc_img_val(&im->pos, t, c->pos_batched ? b : 0, 0, 0);
}

static bool make_host(const struct pc_case *c, const struct enc_images *im, struct enc_host *h)
{
    memset(h, 0, sizeof(*h));
    const int64_t *ne = c->ne;
    switch (c->op) {
    case PC_OP_SINCOS_2D: {
        struct posenc_sinusoidal_params sp;
        memset(&sp, 0, sizeof(sp));
        sp.base = c->grid2d.base;
        sp.layout = POSENC_SIN_HALF_SPLIT;
        h->freq = malloc(sizeof(double) * (size_t)(ne[0] / 4));
        return h->freq && posenc_sinusoidal_freqs(ne[0] / 2, &sp, h->freq) == POSENC_OK;
    }
    case PC_OP_ALIBI:
        h->slopes = malloc(sizeof(double) * (size_t)ne[2]);
        return h->slopes && posenc_alibi_slopes(ne[2], &c->alibi, h->slopes) == POSENC_OK;
    case PC_OP_RELBIAS:
    case PC_OP_RELBIAS_BACKWARD: {
        int64_t n_rel = ne[0] + ne[1] - 1;
        h->rel_min = (int64_t)c->relbias.k_offset - ((int64_t)c->relbias.q_offset + ne[1] - 1);
        h->bucket = malloc(sizeof(int32_t) * (size_t)n_rel);
        if (!h->bucket)
            return false;
        for (int64_t i = 0; i < n_rel; i++)
            if (posenc_relbias_bucket(&c->relbias, h->rel_min + i, &h->bucket[i]) != POSENC_OK)
                return false;
        if (c->op == PC_OP_RELBIAS)
            return true;
        int64_t nb = relbias_n_buckets(&c->relbias), H = ne[2];
        h->sum_abs = calloc((size_t)(nb * H), sizeof(double));
        h->count = calloc((size_t)(nb * H), sizeof(int64_t));
        if (!h->sum_abs || !h->count)
            return false;
        for (int64_t b = 0; b < ne[3]; b++)
            for (int64_t hh = 0; hh < H; hh++)
                for (int64_t q = 0; q < ne[1]; q++)
                    for (int64_t k = 0; k < ne[0]; k++) {
                        int64_t rel = (k + c->relbias.k_offset) - (q + c->relbias.q_offset);
                        int64_t u = h->bucket[rel - h->rel_min];
                        h->sum_abs[u + nb * hh] += fabs(pc_img_val(&im->in, k, q, hh, b));
                        h->count[u + nb * hh]++;
                    }
        return true;
    }
    case PC_OP_LEARNED_BACKWARD: {
        int64_t d = ne[0], rows = c->rows;
        h->sum_abs = calloc((size_t)(d * rows), sizeof(double));
        h->count = calloc((size_t)rows, sizeof(int64_t));
        if (!h->sum_abs || !h->count)
            return false;
        for (int64_t b = 0; b < ne[2]; b++)
            for (int64_t t = 0; t < ne[1]; t++) {
                int32_t r = pos_at(im, c, t, b);
                h->count[r]++;
                for (int64_t i0 = 0; i0 < d; i0++)
                    h->sum_abs[i0 + d * r] += fabs(pc_img_val(&im->in, i0, t, b, 0));
            }
        return true;
    }
    default:
        return true;
    }
}

/* The bound for output element (i0..i3) whose reference value is rv. */
static double element_bound(const struct pc_case *c, const struct enc_images *im,
                            const struct enc_host *h, int64_t i0, int64_t i1, int64_t i2,
                            int64_t i3, double rv)
{
    posenc_dtype dt = c->dtype;
    switch (c->op) {
    case PC_OP_LEARNED: {
        double t = pc_img_val(&im->table, i0, pos_at(im, c, i1, i2), 0, 0);
        double x = c->has_x ? pc_img_val(&im->in, i0, i1, i2, 0) : 0.0;
        return to_dtype(dt, bound_add_f32(t + x, c->has_x != 0), rv);
    }
    case PC_OP_LEARNED_BACKWARD: {
        int64_t d = c->ne[0];
        double old = fabs(pc_img_val(&im->out, i0, i1, 0, 0));
        return to_dtype(dt, bound_accumulate(h->count[i1], old + h->sum_abs[i0 + d * i1], rv), rv);
    }
    case PC_OP_SINCOS_2D: {
        int64_t cls = c->grid2d.cls_token;
        if (i1 < cls)
            return 0.0; /* the class token's zero row: exact */
        int64_t tok = i1 - cls, half = c->ne[0] / 2, quarter = half / 2;
        int64_t coord = i0 < half ? tok % c->grid[1] : tok / c->grid[1];
        float gs = c->grid2d.grid_scale != 0.0f ? c->grid2d.grid_scale : 1.0f;
        double p = (double)((float)coord / gs); /* the f32 position both sides use */
        double a = fabs(p * h->freq[(i0 % half) % quarter]);
        return to_dtype(dt, pc_bound_sincos_f32(a, 0.0), rv);
    }
    case PC_OP_RESIZE_2D: {
        int64_t cls = c->resize.cls_token;
        if (i1 < cls) /* the class token, copied: exact unless narrowed to f16 */
            return (dt == POSENC_DTYPE_F16 && c->table_dtype == POSENC_DTYPE_F32) ? pc_ulp16(rv)
                                                                                 : 0.0;
        int64_t cell = i1 - cls, r = cell / c->grid[3], col = cell % c->grid[3];
        int64_t iy[4], ix[4];
        double wy[4], wx[4], S = 0.0;
        check_taps(c->grid[0], c->grid[2], c->resize.filter, r, iy, wy);
        check_taps(c->grid[1], c->grid[3], c->resize.filter, col, ix, wx);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                S += fabs(wy[a] * wx[b] *
                          pc_img_val(&im->in, i0, cls + iy[a] * c->grid[1] + ix[b], 0, 0));
        return to_dtype(dt, bound_resize(S, rv), rv);
    }
    case PC_OP_RELBIAS: {
        int64_t rel = (i0 + c->relbias.k_offset) - (i1 + c->relbias.q_offset);
        double t = pc_img_val(&im->table, h->bucket[rel - h->rel_min], i2, 0, 0);
        double x = c->has_x ? pc_img_val(&im->in, i0, i1, i2, i3) : 0.0;
        return to_dtype(dt, bound_add_f32(t + x, c->has_x != 0), rv);
    }
    case PC_OP_RELBIAS_BACKWARD: {
        int64_t nb = relbias_n_buckets(&c->relbias), at = i0 + nb * i1;
        double old = fabs(pc_img_val(&im->out, i0, i1, 0, 0));
        return to_dtype(dt, bound_accumulate(h->count[at], old + h->sum_abs[at], rv), rv);
    }
    case PC_OP_ALIBI: {
        int64_t qp = i1 + c->alibi.q_offset, kp = i0 + c->alibi.k_offset;
        int64_t dist = c->alibi.symmetric ? llabs(qp - kp) : qp - kp;
        double x = c->has_x ? pc_img_val(&im->in, i0, i1, i2, i3) : 0.0;
        double md = fabs(h->slopes[i2] * (double)dist);
        return to_dtype(dt, bound_alibi(md, x - h->slopes[i2] * (double)dist), rv);
    }
    default:
        return 0.0;
    }
}

/* ---- the runner ----------------------------------------------------------------------------- */

void pc_run_encoding_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                          struct pc_result *r)
{
    memset(r, 0, sizeof(*r));
    struct enc_images im;
    struct enc_host host;
    memset(&host, 0, sizeof(host));
    unsigned char *ref_img = NULL, *dut_img = NULL, *mask = NULL;
    if (!make_images(c, &im) || !make_host(c, &im, &host)) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "building the inputs or host tables failed");
        goto done;
    }
    const struct pc_img *o = &im.out;
    ref_img = malloc(o->l.bytes);
    dut_img = malloc(o->l.bytes);
    mask = calloc(1, o->l.bytes);
    if (!ref_img || !dut_img || !mask) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "out of host memory for the output images");
        goto done;
    }
    char msg[256];
    posenc_status st = run_on(ref, c, &im, ref_img, msg, sizeof(msg));
    if (st != POSENC_OK) {
        r->status = st;
        snprintf(r->msg, sizeof(r->msg), "reference failed: %s", msg);
        goto done;
    }
    st = run_on(dut, c, &im, dut_img, msg, sizeof(msg));
    r->status = st;
    if (st != POSENC_OK) {
        snprintf(r->msg, sizeof(r->msg), "%s", msg);
        goto done;
    }
    size_t es = posenc_dtype_size(o->dt);
    for (int64_t i3 = 0; i3 < o->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < o->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < o->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < o->ne[0]; i0++) {
                    size_t at = byte_at(&o->l, i0, i1, i2, i3);
                    memset(mask + at, 1, es);
                    double rv = get_val(ref_img, at, o->dt), dv = get_val(dut_img, at, o->dt);
                    double bound = element_bound(c, &im, &host, i0, i1, i2, i3, rv);
                    pc_compare(r, NULL, i0, i1, i2, i3, dv, rv, bound);
                }
    for (size_t i = 0; i < o->l.bytes; i++)
        if (!mask[i] && (dut_img[i] != o->img[i] || ref_img[i] != o->img[i]))
            r->guard_bad++;
    if (r->guard_bad && r->n_bad == 0)
        snprintf(r->msg, sizeof(r->msg), "%lld bytes outside the output view were changed",
                 (long long)r->guard_bad);
    r->pass = r->n_bad == 0 && r->guard_bad == 0;
done:
    free(ref_img);
    free(dut_img);
    free(mask);
    free_host(&host);
    free_images(&im);
}
