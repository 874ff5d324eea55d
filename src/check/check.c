/* check.c - run verification cases on a device under test against the CPU reference. */
#include "check_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *pc_op_name(enum pc_op op)
{
    switch (op) {
    case PC_OP_SINUSOIDAL: return "sinusoidal";
    case PC_OP_ROPE: return "rope";
    case PC_OP_LEARNED: return "learned";
    case PC_OP_LEARNED_BACKWARD: return "learned_backward";
    case PC_OP_SINCOS_2D: return "sincos_2d";
    case PC_OP_RESIZE_2D: return "resize_2d";
    case PC_OP_RELBIAS: return "relbias";
    case PC_OP_RELBIAS_BACKWARD: return "relbias_backward";
    case PC_OP_ALIBI: return "alibi";
    case PC_OP_COPY: return "copy";
    case PC_OP_ATTENTION: return "attention";
    case PC_OP_COUNT: break;
    }
    return "?";
}

uint64_t pc_rand_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double pc_rand_uniform(uint64_t *s)
{
    return (double)(pc_rand_u64(s) >> 11) * 0x1p-53;
}

/* ---- tolerances ------------------------------------------------------------------------ */

double pc_ulp32(double v)
{
    v = fabs(v);
    if (v < 0x1p-126)
        return 0x1p-149;
    int e;
    frexp(v, &e); /* v in [2^(e-1), 2^e) */
    return ldexp(1.0, e - 1 - 23);
}

double pc_ulp16(double v)
{
    v = fabs(v);
    if (v < 0x1p-14)
        return 0x1p-24;
    int e;
    frexp(v, &e);
    return ldexp(1.0, e - 1 - 10);
}

double pc_angle_err32(double a)
{
    return fabs(a) <= PC_ANGLE_MAX ? 0.0 : 2.0;
}

/*
 * Bound for a backend's f32 sin/cos of the angle a = pos*w against the exact value:
 *  - the angle and sin/cos together, PC_SINCOS_ERR = 4 * 2^-24 for |a| <= 2^24 on every
 *    backend: the CPU backend forms a in double and reduces it in double (libm past 4e5);
 *    the OpenCL and Vulkan kernels take w in quarter turns (w*2/pi) as two f32 words
 *    (hi + lo), form pos*w exactly as an unevaluated sum (Dekker's product, or fma on
 *    OpenCL devices with fma in hardware), take the whole quarter turns out exactly, turn
 *    the rest into radians with a two-word pi/2, then evaluate Cephes' f32 polynomials
 *    (cl/common.cl, shaders/common.glsl). Measured: at most 1.6 * 2^-24 (|a| <= 1e6) and
 *    2.5 * 2^-24 (|a| <= 2^24) including the result's own rounding to f32, over 4 M angles
 *    of an exact emulation of both forms, and the kernels' own outputs
 *    (docs/accuracy.md, "Angles"). No term grows with the position.
 *  - the reference's rounding of its double result to f32: 0.5 ulp <= 2^-24 (u).
 *  - fused y = x*scale + pe: the f32 product and sum round twice, <= u*|x*scale| + u*|y|
 *    with |y| <= |x*scale| + 1; the reference rounds its double result once (0.5 ulp of y).
 * Past |a| = 2^24 the contract is only |v| <= 1 (pc_angle_err32).
 */
double pc_bound_sincos_f32(double a, double xs)
{
    const double u = 0x1p-24;
    double b = pc_angle_err32(a) + PC_SINCOS_ERR + u;
    if (xs > 0.0)
        b += u * xs + 1.5 * pc_ulp32(xs + 1.0);
    return b;
}

/*
 * One rotated element y = m*(xa cos - xb sin) computed in f32 against the exact value:
 *  - cos and sin of the angle: PC_SINCOS_ERR each (see above), plus `angle_err` (0 inside
 *    the contract; re-rotation adds the rounding of the difference of two reduced angles);
 *  - m is rounded to f32 (u) and multiplied into cos and sin (u);
 *  - the two products xa*c, xb*s and their difference round (u each, relative to
 *    m*(|xa|+|xb|), which bounds every intermediate);
 *  - the reference rounds its double result once (u).
 * Every term scales with m*(|xa|+|xb|), so the bound is m*xsum*(angle_err + 4u + 6u).
 */
double pc_bound_rope_f32(double angle_err, double m, double xsum)
{
    const double u = 0x1p-24;
    return fabs(m) * xsum * (angle_err + PC_SINCOS_ERR + 6.0 * u);
}

/* An f16 result is the f32 value (within bound_f32 of exact) rounded to f16, and the
 * reference is the exact value rounded once: they differ by at most bound_f32 plus one
 * f16 ulp at the larger magnitude. */
double pc_bound_to_f16(double bound_f32, double value)
{
    return bound_f32 + pc_ulp16(fabs(value) + bound_f32);
}

/* ---- the case table ---------------------------------------------------------------------- */

void add_case(struct pc_case **cases, size_t *n, size_t *cap, const struct pc_case *c)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        struct pc_case *p = realloc(*cases, nc * sizeof(*p));
        if (!p)
            return; /* the table is shorter; pc_cases reports the count it has */
        *cases = p;
        *cap = nc;
    }
    (*cases)[(*n)++] = *c;
}

const char *view_name(enum pc_view v)
{
    return v == PC_VIEW_CONTIGUOUS ? "contig" : v == PC_VIEW_PADDED ? "padded" : "permuted";
}

static const char *layout_name(posenc_sin_layout l)
{
    return l == POSENC_SIN_INTERLEAVED ? "interleaved"
           : l == POSENC_SIN_HALF_SPLIT ? "half_split" : "cos_first";
}

static void name_sinusoidal(struct pc_case *c)
{
    static const char *pos_names[] = {"seq", "large", "float"};
    char extra[64] = "";
    if (c->sin.base != 0.0f)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "/base=%g",
                 (double)c->sin.base);
    if (c->sin.freq_shift != 0.0f)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "/shift=%g",
                 (double)c->sin.freq_shift);
    if (c->sin.x_scale != 0.0f)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "/xscale=%g",
                 (double)c->sin.x_scale);
    snprintf(c->name, sizeof(c->name),
             "sinusoidal/%s/ne=%lldx%lldx%lldx%lld/%s/pos=%s%s%s/%s/%s%s",
             posenc_dtype_name(c->dtype), (long long)c->ne[0], (long long)c->ne[1],
             (long long)c->ne[2], (long long)c->ne[3], layout_name(c->sin.layout),
             pos_names[c->pos_kind], c->pos_batched ? "/pos_batched" : "",
             c->pos_kind == PC_POS_SEQUENTIAL ? ""
             : c->pos_max > 100000            ? "<2^24"
             : c->pos_kind == PC_POS_LARGE    ? "<1e5"
                                              : "<1e3",
             c->has_x == 0 ? "table" : c->has_x == 2 ? "inplace"
                           : (c->x_dtype == POSENC_DTYPE_F16 ? "add_x16" : "add_x32"),
             view_name(c->view), extra);
}

static void sinusoidal_cases(struct pc_case **cases, size_t *n, size_t *cap)
{
    static const int64_t shapes[][4] = {
        {6, 3, 1, 1},   /* the seed's d_model = 6 */
        {2, 1, 1, 1},   /* smallest */
        {4, 7, 1, 1},
        {64, 93, 1, 1}, /* odd token count */
        {94, 7, 3, 2},  /* odd half (47), batch dims */
        {512, 33, 2, 1},
    };
    uint64_t seed = 1000;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int dt = 0; dt < 2; dt++)
            for (int layout = 0; layout < 3; layout++)
                for (int v = 0; v < 3; v++) {
                    struct pc_case c;
                    memset(&c, 0, sizeof(c));
                    c.op = PC_OP_SINUSOIDAL;
                    c.dtype = dt ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
                    c.x_dtype = c.dtype;
                    memcpy(c.ne, shapes[s], sizeof(c.ne));
                    c.view = (enum pc_view)v;
                    c.sin.layout = (posenc_sin_layout)layout;
                    c.seed = seed++;
                    /* rotate through inputs so every combination of view/layout meets
                     * each position kind and each fused mode somewhere in the table */
                    int k = (int)(s * 7 + (size_t)layout * 3 + (size_t)v);
                    c.pos_kind = (enum pc_pos_kind)(k % 3);
                    c.pos_max = c.pos_kind == PC_POS_LARGE ? 100000 : 1000;
                    c.has_x = (k / 3) % 3;
                    if (c.has_x == 1 && (k % 2))
                        c.x_dtype = dt ? POSENC_DTYPE_F32 : POSENC_DTYPE_F16;
                    c.pos_batched = c.ne[2] > 1 && (k % 2);
                    if (k % 5 == 1)
                        c.sin.base = 100.0f;
                    if (k % 7 == 3 && c.ne[0] > 2) /* shift must stay < d/2 */
                        c.sin.freq_shift = 1.0f;
                    if (c.has_x && k % 4 == 2)
                        c.sin.x_scale = sqrtf((float)c.ne[0]);
                    name_sinusoidal(&c);
                    add_case(cases, n, cap, &c);
                }
    /* a long sequence: positions 0..8191 in one launch, the large-angle end of the bound */
    struct pc_case c;
    memset(&c, 0, sizeof(c));
    c.op = PC_OP_SINUSOIDAL;
    c.dtype = c.x_dtype = POSENC_DTYPE_F32;
    c.ne[0] = 128;
    c.ne[1] = 8192;
    c.ne[2] = c.ne[3] = 1;
    c.seed = seed++;
    name_sinusoidal(&c);
    add_case(cases, n, cap, &c);
    /* a 16 MiB f32 output, fused add out of place, positions shared by the batch: the CPU
     * fast path's streaming-store rows (PE_FAST_NT_BYTES) and the OpenCL streaming stores */
    c.ne[0] = 256;
    c.ne[1] = 8192;
    c.ne[2] = 2;
    c.has_x = 1;
    c.pos_max = 1000;
    c.seed = seed++;
    name_sinusoidal(&c);
    add_case(cases, n, cap, &c);
    /* the same in f16 (16 MiB out): the CPU F16C rows with 32-byte streaming stores; a
     * padded view (odd element offset, padded rows) so that rows of every alignment meet
     * both the streaming and the plain stores, and d = 264 leaves an 8-wide step and no
     * 16-wide tail */
    c.dtype = c.x_dtype = POSENC_DTYPE_F16;
    c.ne[0] = 264;
    c.ne[1] = 8192;
    c.ne[2] = 4;
    c.view = PC_VIEW_PADDED;
    c.seed = seed++;
    name_sinusoidal(&c);
    add_case(cases, n, cap, &c);
    /* The accuracy contract at positions up to 2^24: integer and f32 positions, f32 and f16,
     * the vector paths (d = 128) and the general ones (odd half, permuted view), ggml's
     * timestep layout (cos first), fused add; the same bound as every other case (no term
     * grows with the position). Seeds of their own. */
    for (int k = 0; k < 6; k++) {
        memset(&c, 0, sizeof(c));
        c.op = PC_OP_SINUSOIDAL;
        c.dtype = c.x_dtype = k % 3 == 2 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
        c.ne[0] = k < 3 ? 128 : 94;
        c.ne[1] = 33;
        c.ne[2] = c.ne[3] = 1;
        c.view = k < 3 ? PC_VIEW_CONTIGUOUS : PC_VIEW_PERMUTED;
        c.sin.layout = (posenc_sin_layout)(k % 3);
        c.pos_kind = k % 2 ? PC_POS_FLOAT : PC_POS_LARGE;
        c.pos_max = 16777216;
        c.has_x = k == 1 || k == 4 ? 1 : 0;
        c.seed = 9400 + (uint64_t)k;
        name_sinusoidal(&c);
        add_case(cases, n, cap, &c);
    }
}

struct pc_case *pc_cases(enum pc_op op, size_t *out_count)
{
    struct pc_case *cases = NULL;
    size_t n = 0, cap = 0;
    if (op == PC_OP_SINUSOIDAL || op == PC_OP_COUNT)
        sinusoidal_cases(&cases, &n, &cap);
    if (op == PC_OP_ROPE || op == PC_OP_COUNT)
        pc_rope_cases(&cases, &n, &cap);
    if (op >= PC_OP_LEARNED)
        pc_encoding_cases(op, &cases, &n, &cap);
    if (op == PC_OP_COPY || op == PC_OP_COUNT)
        pc_copy_cases(&cases, &n, &cap);
    if (op == PC_OP_ATTENTION || op == PC_OP_COUNT)
        pc_attention_cases(&cases, &n, &cap);
    /* POSENC_TEST_MAX_ELEMENTS=N drops the cases with more than N elements in a tensor
     * (scripts/test sets it for its valgrind and ThreadSanitizer passes, which run ~50x
     * and ~10x slower; the plain and ASan passes run every case). */
    const char *env = getenv("POSENC_TEST_MAX_ELEMENTS");
    if (env && *env) {
        const long long max = atoll(env);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const struct pc_case *c = &cases[i];
            long long el = (long long)(c->ne[0] * c->ne[1] * c->ne[2] * c->ne[3]);
            if (c->op == PC_OP_ATTENTION) {
                const long long lg = (long long)(c->attn.tk * c->ne[2] * c->ne[1] * c->ne[3]);
                el = lg > el ? lg : el;
            }
            if (max <= 0 || el <= max)
                cases[k++] = cases[i];
        }
        n = k;
    }
    *out_count = n;
    return cases;
}

/* ---- tensors on both contexts --------------------------------------------------------- */


struct pc_layout make_layout(const int64_t ne[4], size_t es, enum pc_view view)
{
    struct pc_layout l;
    memset(&l, 0, sizeof(l));
    int64_t e = (int64_t)es;
    l.offset = PC_GUARD;
    switch (view) {
    case PC_VIEW_CONTIGUOUS:
        l.nb[0] = e;
        l.nb[1] = e * ne[0];
        l.nb[2] = l.nb[1] * ne[1];
        l.nb[3] = l.nb[2] * ne[2];
        break;
    case PC_VIEW_PADDED:
        l.offset += es; /* an odd element offset */
        l.nb[0] = e;
        l.nb[1] = e * (ne[0] + 3);
        l.nb[2] = l.nb[1] * ne[1] + 5 * e;
        l.nb[3] = l.nb[2] * ne[2] + 2 * e;
        break;
    case PC_VIEW_PERMUTED:
        l.nb[0] = e;
        l.nb[2] = e * ne[0];
        l.nb[1] = l.nb[2] * ne[2];
        l.nb[3] = l.nb[1] * ne[1];
        break;
    }
    size_t end = l.offset + es;
    for (int k = 0; k < 4; k++)
        end += (size_t)((ne[k] - 1) * l.nb[k]);
    l.bytes = end + PC_GUARD;
    return l;
}

size_t byte_at(const struct pc_layout *l, int64_t i0, int64_t i1, int64_t i2,
                      int64_t i3)
{
    return l->offset + (size_t)(i0 * l->nb[0] + i1 * l->nb[1] + i2 * l->nb[2] + i3 * l->nb[3]);
}

double get_val(const unsigned char *img, size_t at, posenc_dtype dt)
{
    if (dt == POSENC_DTYPE_F32) {
        float f;
        memcpy(&f, img + at, 4);
        return f;
    }
    if (dt == POSENC_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, img + at, 2);
        return posenc_f16_to_f32(h);
    }
    int32_t i;
    memcpy(&i, img + at, 4);
    return i;
}

void set_val(unsigned char *img, size_t at, posenc_dtype dt, double v)
{
    if (dt == POSENC_DTYPE_F32) {
        float f = (float)v;
        memcpy(img + at, &f, 4);
    } else if (dt == POSENC_DTYPE_F16) {
        uint16_t h = posenc_f32_to_f16((float)v);
        memcpy(img + at, &h, 2);
    } else {
        int32_t i = (int32_t)v;
        memcpy(img + at, &i, 4);
    }
}

bool pc_img_alloc(struct pc_img *t, const int64_t ne[4], posenc_dtype dt, struct pc_layout l)
{
    memcpy(t->ne, ne, sizeof(t->ne));
    t->dt = dt;
    t->l = l;
    t->img = malloc(l.bytes);
    if (t->img)
        memset(t->img, (int)PC_POISON, l.bytes);
    return t->img != NULL;
}

void pc_img_fill_random(struct pc_img *t, uint64_t *rng)
{
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                    pc_img_put(t, i0, i1, i2, i3, 4.0 * pc_rand_uniform(rng) - 2.0);
}

double pc_img_val(const struct pc_img *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return get_val(t->img, byte_at(&t->l, i0, i1, i2, i3), t->dt);
}

void pc_img_put(struct pc_img *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v)
{
    set_val(t->img, byte_at(&t->l, i0, i1, i2, i3), t->dt, v);
}

void pc_compare(struct pc_result *r, const char *what, int64_t i0, int64_t i1, int64_t i2,
                int64_t i3, double dv, double rv, double bound)
{
    double err;
    if (isnan(rv) || isnan(dv))
        err = (isnan(rv) && isnan(dv)) ? 0.0 : INFINITY;
    else if (isinf(rv) || isinf(dv))
        err = rv == dv ? 0.0 : INFINITY;
    else
        err = fabs(dv - rv);
    r->n_checked++;
    if (!(err <= bound)) {
        if (r->n_bad == 0)
            snprintf(r->msg, sizeof(r->msg),
                     "first bad element%s%s (%lld,%lld,%lld,%lld): got %.9g, reference %.9g, "
                     "|err| %.3g > bound %.3g",
                     what ? " of " : "", what ? what : "", (long long)i0, (long long)i1,
                     (long long)i2, (long long)i3, dv, rv, err, bound);
        r->n_bad++;
    }
    double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0.0);
    if (ratio > r->worst_ratio)
        r->worst_ratio = ratio;
    if (err > r->max_err || r->n_checked == 1) {
        r->max_err = err;
        r->bound_at_max = bound;
    }
}

/* Buffers of one context for one case. */
struct pc_bufs {
    posenc_buffer *dst, *x, *pos;
};

static void free_bufs(struct pc_bufs *b)
{
    posenc_buffer_destroy(&b->dst);
    posenc_buffer_destroy(&b->x);
    posenc_buffer_destroy(&b->pos);
}

posenc_status upload(posenc_context *ctx, const unsigned char *img, size_t bytes,
                            posenc_buffer **out)
{
    posenc_status st = posenc_buffer_create(ctx, bytes, out);
    if (st == POSENC_OK)
        st = posenc_buffer_write(*out, 0, img, bytes);
    return st;
}

/* Host images of one case: every input, and the initial output image. */
struct pc_images {
    posenc_dtype pos_dt;
    int64_t pos_ne[4];
    struct pc_layout dl, xl, pl;
    unsigned char *dst0, *x, *pos;
};

static void free_images(struct pc_images *im)
{
    free(im->dst0);
    free(im->x);
    free(im->pos);
}

static bool make_images(const struct pc_case *c, struct pc_images *im)
{
    memset(im, 0, sizeof(*im));
    uint64_t rng = c->seed * 0x2545f4914f6cdd1dull + 1;
    size_t es = posenc_dtype_size(c->dtype);
    im->dl = make_layout(c->ne, es, c->view);
    im->dst0 = malloc(im->dl.bytes);
    if (!im->dst0)
        return false;
    memset(im->dst0, (int)PC_POISON, im->dl.bytes);

    /* x: values in [-2, 2] */
    if (c->has_x) {
        posenc_dtype xdt = c->has_x == 2 ? c->dtype : c->x_dtype;
        im->xl = c->has_x == 2 ? im->dl : make_layout(c->ne, posenc_dtype_size(xdt), c->view);
        unsigned char *img = c->has_x == 2 ? im->dst0 : malloc(im->xl.bytes);
        if (!img)
            return false;
        if (c->has_x == 1) {
            memset(img, 0, im->xl.bytes);
            im->x = img;
        }
        for (int64_t i3 = 0; i3 < c->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < c->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < c->ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < c->ne[0]; i0++)
                        set_val(img, byte_at(&im->xl, i0, i1, i2, i3), xdt,
                                4.0 * pc_rand_uniform(&rng) - 2.0);
    }

    /* positions [T, P2, P3]: padded views get a strided position tensor too */
    im->pos_dt = c->pos_kind == PC_POS_FLOAT ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32;
    im->pos_ne[0] = c->ne[1];
    im->pos_ne[1] = c->pos_batched ? c->ne[2] : 1;
    im->pos_ne[2] = 1;
    im->pos_ne[3] = 1;
    im->pl = make_layout(im->pos_ne, 4, c->view == PC_VIEW_PADDED ? PC_VIEW_PADDED
                                                                  : PC_VIEW_CONTIGUOUS);
    if (c->view == PC_VIEW_PADDED) {
        im->pl.nb[0] = 8; /* every other int */
        im->pl.nb[1] = 8 * im->pos_ne[0] + 4;
        im->pl.bytes = im->pl.offset + (size_t)(im->pl.nb[1] * im->pos_ne[1]) + PC_GUARD;
    }
    im->pos = calloc(1, im->pl.bytes);
    if (!im->pos)
        return false;
    for (int64_t j = 0; j < im->pos_ne[1]; j++)
        for (int64_t t = 0; t < im->pos_ne[0]; t++) {
            double p;
            switch (c->pos_kind) {
            case PC_POS_SEQUENTIAL: p = (double)(t + 3 * j); break;
            case PC_POS_LARGE: p = floor(pc_rand_uniform(&rng) * (double)c->pos_max); break;
            default: p = pc_rand_uniform(&rng) * (double)c->pos_max; break;
            }
            set_val(im->pos, byte_at(&im->pl, t, j, 0, 0), im->pos_dt, p);
        }
    return true;
}

posenc_tensor view_of(posenc_buffer *b, const struct pc_layout *l, posenc_dtype dt,
                             const int64_t ne[4])
{
    posenc_tensor t;
    memset(&t, 0, sizeof(t));
    t.buffer = b;
    t.offset = l->offset;
    t.dtype = dt;
    for (int k = 0; k < 4; k++) {
        t.ne[k] = ne[k];
        t.nb[k] = l->nb[k];
    }
    return t;
}

/* Run the case's op on ctx; on success *out_img holds the whole dst buffer. */
static posenc_status run_on(posenc_context *ctx, const struct pc_case *c,
                            const struct pc_images *im, unsigned char *out_img, char *msg,
                            size_t msg_size)
{
    struct pc_bufs b = {0};
    posenc_status st = upload(ctx, im->dst0, im->dl.bytes, &b.dst);
    if (st == POSENC_OK && c->has_x == 1)
        st = upload(ctx, im->x, im->xl.bytes, &b.x);
    if (st == POSENC_OK)
        st = upload(ctx, im->pos, im->pl.bytes, &b.pos);
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "setup: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
        free_bufs(&b);
        return st;
    }
    posenc_tensor dst = view_of(b.dst, &im->dl, c->dtype, c->ne);
    posenc_tensor pos = view_of(b.pos, &im->pl, im->pos_dt, im->pos_ne);
    posenc_tensor x;
    const posenc_tensor *xp = NULL;
    if (c->has_x == 1) {
        x = view_of(b.x, &im->xl, c->x_dtype, c->ne);
        xp = &x;
    } else if (c->has_x == 2) {
        xp = &dst;
    }
    switch (c->op) {
    case PC_OP_SINUSOIDAL: st = posenc_sinusoidal(ctx, xp, &pos, &dst, &c->sin); break;
    default: st = POSENC_ERR_INTERNAL; break;
    }
    if (st != POSENC_OK) {
        snprintf(msg, msg_size, "%s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
    } else {
        st = posenc_buffer_read(b.dst, 0, out_img, im->dl.bytes);
        if (st != POSENC_OK)
            snprintf(msg, msg_size, "read: %s: %s", posenc_status_string(st),
                     posenc_context_last_error(ctx));
    }
    free_bufs(&b);
    return st;
}

/* Per-element bound for the sinusoidal op; `img` is the reference's output image. */
static double sinusoidal_bound(const struct pc_case *c, const struct pc_images *im,
                               const double *freq, int64_t i0, int64_t i1, int64_t i2,
                               int64_t i3, double ref_value)
{
    int64_t half = c->ne[0] / 2;
    int64_t pair = c->sin.layout == POSENC_SIN_INTERLEAVED ? i0 / 2 : i0 % half;
    int64_t j = c->pos_batched ? i2 : 0;
    double p = get_val(im->pos, byte_at(&im->pl, i1, j, 0, 0), im->pos_dt);
    double a = fabs(p * freq[pair]);
    double xs = 0.0;
    if (c->has_x) {
        posenc_dtype xdt = c->has_x == 2 ? c->dtype : c->x_dtype;
        const unsigned char *ximg = c->has_x == 2 ? im->dst0 : im->x;
        float scale = c->sin.x_scale != 0.0f ? c->sin.x_scale : 1.0f;
        xs = fabs(get_val(ximg, byte_at(&im->xl, i0, i1, i2, i3), xdt) * scale);
    }
    double b = pc_bound_sincos_f32(a, xs);
    return c->dtype == POSENC_DTYPE_F16 ? pc_bound_to_f16(b, ref_value) : b;
}

void pc_run_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                 struct pc_result *r)
{
    if (c->op == PC_OP_ROPE) {
        pc_run_rope_case(ref, dut, c, r);
        return;
    }
    if (c->op == PC_OP_COPY) {
        pc_run_copy_case(ref, dut, c, r);
        return;
    }
    if (c->op == PC_OP_ATTENTION) {
        pc_run_attention_case(ref, dut, c, r);
        return;
    }
    if (c->op >= PC_OP_LEARNED && c->op < PC_OP_COUNT) {
        pc_run_encoding_case(ref, dut, c, r);
        return;
    }
    memset(r, 0, sizeof(*r));
    struct pc_images im;
    unsigned char *ref_img = NULL, *dut_img = NULL, *mask = NULL;
    double *freq = NULL;
    if (!make_images(c, &im)) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "out of host memory building the inputs");
        goto done;
    }
    ref_img = malloc(im.dl.bytes);
    dut_img = malloc(im.dl.bytes);
    mask = calloc(1, im.dl.bytes);
    freq = malloc(sizeof(double) * (size_t)(c->ne[0] / 2 + 1));
    if (!ref_img || !dut_img || !mask || !freq) {
        r->status = POSENC_ERR_OUT_OF_MEMORY;
        snprintf(r->msg, sizeof(r->msg), "out of host memory for the output images");
        goto done;
    }
    posenc_sinusoidal_freqs(c->ne[0], &c->sin, freq);
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
    size_t es = posenc_dtype_size(c->dtype);
    r->worst_ratio = 0.0;
    for (int64_t i3 = 0; i3 < c->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < c->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < c->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < c->ne[0]; i0++) {
                    size_t at = byte_at(&im.dl, i0, i1, i2, i3);
                    memset(mask + at, 1, es);
                    double rv = get_val(ref_img, at, c->dtype);
                    double dv = get_val(dut_img, at, c->dtype);
                    double bound = sinusoidal_bound(c, &im, freq, i0, i1, i2, i3, rv);
                    pc_compare(r, NULL, i0, i1, i2, i3, dv, rv, bound);
                }
    for (size_t i = 0; i < im.dl.bytes; i++)
        if (!mask[i] && (dut_img[i] != im.dst0[i] || ref_img[i] != im.dst0[i]))
            r->guard_bad++;
    if (r->guard_bad && r->n_bad == 0)
        snprintf(r->msg, sizeof(r->msg), "%lld bytes outside the output view were changed",
                 (long long)r->guard_bad);
    r->pass = r->n_bad == 0 && r->guard_bad == 0;
done:
    free(ref_img);
    free(dut_img);
    free(mask);
    free(freq);
    free_images(&im);
}
