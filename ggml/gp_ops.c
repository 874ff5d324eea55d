/*
 * gp_ops.c - the ggml backend's ops: which ggml nodes posenc runs (supports_op, answered
 * from the node alone, without touching a device) and how each becomes posenc calls
 * (graph_compute). docs/ggml.md lists the ops and what is refused and why.
 *
 * A ggml tensor maps onto a posenc_tensor as it is: ne/nb are the same convention, the
 * buffer is the posenc buffer behind the tensor's ggml buffer and the offset is the
 * tensor's data pointer less the buffer's fake base (gp_impl.h).
 */
#include "gp_impl.h"

#include <math.h>
#include <string.h>

static bool gp_dtype(enum ggml_type t, posenc_dtype *out)
{
    switch (t) {
    case GGML_TYPE_F32: *out = POSENC_DTYPE_F32; return true;
    case GGML_TYPE_F16: *out = POSENC_DTYPE_F16; return true;
    case GGML_TYPE_I32: *out = POSENC_DTYPE_I32; return true;
    case GGML_TYPE_I64: *out = POSENC_DTYPE_I64; return true;
    default: return false;
    }
}

static bool gp_is_float(const struct ggml_tensor *t)
{
    return t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16;
}

/* The posenc view of a ggml tensor whose type gp_dtype knows (checked by supports_op). */
static posenc_tensor gp_view(const struct ggml_tensor *t)
{
    posenc_tensor v;
    memset(&v, 0, sizeof(v));
    v.buffer = gp_tensor_buffer(t);
    v.offset = gp_tensor_offset(t);
    gp_dtype(t->type, &v.dtype);
    for (int k = 0; k < 4; k++) {
        v.ne[k] = t->ne[k];
        v.nb[k] = (int64_t)t->nb[k];
    }
    return v;
}

/*
 * supports_op asks posenc itself, in check-only mode (posenc_context_set_check_only), so the
 * answer includes the device's limits (a row longer than one binding, ...). The node's
 * tensors have no memory yet: each is described without a buffer, every distinct
 * allocation in its own address region (so two tensors never seem to overlap) at its view
 * offset (so views of one tensor keep their real relation: in place is in place).
 */
struct gp_check {
    const struct ggml_tensor *roots[GGML_MAX_SRC + 1];
    int n_roots;
};

static posenc_tensor gp_check_view(struct gp_check *c, const struct ggml_tensor *t)
{
    const struct ggml_tensor *root = t->view_src ? t->view_src : t;
    int r = 0;
    while (r < c->n_roots && c->roots[r] != root)
        r++;
    if (r == c->n_roots && c->n_roots < GGML_MAX_SRC + 1)
        c->roots[c->n_roots++] = root;
    posenc_tensor v;
    memset(&v, 0, sizeof(v));
    v.buffer = NULL;
    v.offset = ((size_t)r << 40) + (t->view_src ? t->view_offs : 0);
    gp_dtype(t->type, &v.dtype);
    for (int k = 0; k < 4; k++) {
        v.ne[k] = t->ne[k];
        v.nb[k] = (int64_t)t->nb[k];
    }
    return v;
}

/* Ask the device's context in check-only mode: begin (lock, mode on) ... end (mode off,
 * unlock; true when posenc accepted the call). */
static struct gp_device *gp_check_begin(const struct gp_device *cdev)
{
    struct gp_device *dev = (struct gp_device *)cdev; /* the lock and the mode change */
    pthread_mutex_lock(&dev->lock);
    posenc_context_set_check_only(dev->ctx, 1);
    return dev;
}

static bool gp_check_end(struct gp_device *dev, posenc_status st)
{
    posenc_context_set_check_only(dev->ctx, 0);
    pthread_mutex_unlock(&dev->lock);
    return st == POSENC_OK;
}

/* ---- RoPE ------------------------------------------------------------------------------- */

static int gp_rope_streams(const struct ggml_tensor *node)
{
    const int mode = ((const int32_t *)node->op_params)[2];
    return (mode & GGML_ROPE_TYPE_MROPE) ? 4 : 1; /* M-RoPE, IMROPE and VISION: 4 per token */
}

/* ROPE / ROPE_BACK node -> posenc params (device freq_factors left to the caller). */
static bool gp_rope_params(const struct ggml_tensor *node, struct posenc_rope_params *p)
{
    const struct ggml_tensor *x = node->src[0];
    if (posenc_rope_params_from_ggml((const int32_t *)node->op_params, 16, x->ne[0], NULL, p) !=
        POSENC_OK)
        return false;
    if (node->op == GGML_OP_ROPE_BACK)
        p->flags |= POSENC_ROPE_BACKWARD;
    return true;
}

/* What the node must be before posenc is asked (types, shapes posenc's views need). */
static bool gp_rope_static(const struct ggml_tensor *op)
{
    const struct ggml_tensor *x = op->src[0], *pos = op->src[1], *ff = op->src[2];
    if (!gp_is_float(x) || op->type != x->type || !pos || pos->type != GGML_TYPE_I32)
        return false;
    if (pos->ne[0] != x->ne[2] * gp_rope_streams(op) || ggml_nrows(pos) != 1)
        return false;
    if (ff && (ff->type != GGML_TYPE_F32 || ff->ne[1] != 1 || ff->ne[2] != 1 || ff->ne[3] != 1))
        return false;
    struct posenc_rope_params p;
    if (!gp_rope_params(op, &p))
        return false;
    if (ff && ff->ne[0] < p.n_dims / 2)
        return false;
    return true;
}

/* ggml's positions [T * S] (stream s of token t at s*T + t) as posenc's [T, S]. */
static posenc_tensor gp_rope_pos(posenc_tensor v, int64_t T, int S)
{
    v.ne[0] = T;
    v.ne[1] = S;
    v.ne[2] = v.ne[3] = 1;
    v.nb[1] = T * v.nb[0];
    v.nb[2] = v.nb[3] = S * v.nb[1];
    return v;
}

static bool gp_supports_rope(const struct gp_device *dev, const struct ggml_tensor *op)
{
    struct posenc_rope_params p;
    if (!gp_rope_static(op) || !gp_rope_params(op, &p))
        return false;
    struct gp_check c = {{NULL}, 0};
    posenc_tensor x = gp_check_view(&c, op->src[0]), d = gp_check_view(&c, op), ff;
    posenc_tensor pt = gp_rope_pos(gp_check_view(&c, op->src[1]), op->src[0]->ne[2],
                                   gp_rope_streams(op));
    if (op->src[2]) {
        ff = gp_check_view(&c, op->src[2]);
        p.freq_factors_tensor = &ff;
    }
    struct gp_device *dv = gp_check_begin(dev);
    return gp_check_end(dv, posenc_rope(dv->ctx, &x, &pt, &d, &p));
}

static void gp_rope(struct gp_device *dev, const struct ggml_tensor *node)
{
    const struct ggml_tensor *x = node->src[0];
    struct posenc_rope_params p;
    GGML_ASSERT(gp_rope_params(node, &p));
    posenc_tensor xt = gp_view(x), dt = gp_view(node), ff;
    posenc_tensor pt = gp_rope_pos(gp_view(node->src[1]), x->ne[2], gp_rope_streams(node));
    if (node->src[2]) {
        ff = gp_view(node->src[2]);
        p.freq_factors_tensor = &ff;
    }
    GP_CHECK(dev, posenc_rope(dev->ctx, &xt, &pt, &dt, &p), "posenc_rope");
}

/* ---- copies ----------------------------------------------------------------------------- */

/* CPY, DUP, CONT: src[0] -> node, f32 <-> f16 or i32 -> i32. ggml_cpy only asks for equal
 * element counts: the elements go in row-major order of each side's own shape. posenc_copy
 * converts over any strides between equal shapes, so a side that is contiguous is viewed
 * in the other side's shape, and when neither is, the elements go through a contiguous
 * temporary (two copies). */
/* A tensor whose bytes can be copied as int32 words: contiguous, a whole number of words,
 * at a word-aligned place (an allocated tensor is GP_ALIGNMENT-aligned; a view is where its
 * offset puts it). */
static bool gp_word_copyable(const struct ggml_tensor *t)
{
    return ggml_is_contiguous(t) && ggml_nbytes(t) % 4 == 0 && t->view_offs % 4 == 0;
}

static bool gp_supports_copy(const struct ggml_tensor *op)
{
    const struct ggml_tensor *src = op->src[0];
    bool floats = gp_is_float(src) && gp_is_float(op);
    bool ints = src->type == GGML_TYPE_I32 && op->type == GGML_TYPE_I32;
    if ((floats || ints) && ggml_nelements(src) == ggml_nelements(op))
        return true;
    /* any other type (bf16, quantized blocks) copies as raw words when both sides are
     * contiguous: the same bytes in the same order */
    return src->type == op->type && ggml_nbytes(src) == ggml_nbytes(op) &&
           gp_word_copyable(src) && gp_word_copyable(op);
}

/* t's memory (contiguous) seen with `shape`'s element counts, packed. */
static posenc_tensor gp_reshaped(posenc_tensor t, const struct ggml_tensor *shape)
{
    return posenc_tensor_contiguous(t.buffer, t.offset, t.dtype, shape->ne[0], shape->ne[1],
                                    shape->ne[2], shape->ne[3]);
}

static void gp_copy(struct gp_device *dev, const struct ggml_tensor *node)
{
    const struct ggml_tensor *src = node->src[0];
    bool converts = (gp_is_float(src) && gp_is_float(node)) ||
                    (src->type == GGML_TYPE_I32 && node->type == GGML_TYPE_I32);
    if (!converts) { /* a raw copy of whole words (gp_supports_copy) */
        int64_t words = (int64_t)(ggml_nbytes(src) / 4);
        posenc_tensor s = posenc_tensor_contiguous(gp_tensor_buffer(src), gp_tensor_offset(src),
                                                   POSENC_DTYPE_I32, words, 1, 1, 1);
        posenc_tensor d = posenc_tensor_contiguous(gp_tensor_buffer(node),
                                                   gp_tensor_offset(node), POSENC_DTYPE_I32,
                                                   words, 1, 1, 1);
        GP_CHECK(dev, posenc_copy(dev->ctx, &s, &d), "posenc_copy");
        return;
    }
    posenc_tensor s = gp_view(src), d = gp_view(node);
    if (ggml_are_same_shape(src, node)) {
        GP_CHECK(dev, posenc_copy(dev->ctx, &s, &d), "posenc_copy");
    } else if (ggml_is_contiguous(src)) {
        s = gp_reshaped(s, node);
        GP_CHECK(dev, posenc_copy(dev->ctx, &s, &d), "posenc_copy");
    } else if (ggml_is_contiguous(node)) {
        d = gp_reshaped(d, src);
        GP_CHECK(dev, posenc_copy(dev->ctx, &s, &d), "posenc_copy");
    } else {
        posenc_buffer *tmp = NULL;
        size_t bytes = (size_t)ggml_nelements(src) * posenc_dtype_size(d.dtype);
        GP_CHECK(dev, posenc_buffer_create(dev->ctx, bytes, &tmp), "posenc_buffer_create");
        posenc_tensor t = posenc_tensor_contiguous(tmp, 0, d.dtype, 1, 1, 1, 1);
        posenc_tensor ts = gp_reshaped(t, src), td = gp_reshaped(t, node);
        GP_CHECK(dev, posenc_copy(dev->ctx, &s, &ts), "posenc_copy");
        GP_CHECK(dev, posenc_copy(dev->ctx, &td, &d), "posenc_copy");
        posenc_buffer_destroy(&tmp);
    }
}

/* ---- softmax ---------------------------------------------------------------------------- */

/* ggml_soft_max_ext (+ add_sinks): posenc_softmax has ggml's semantics, broadcasting and
 * sinks; op_params are scale and max_bias as floats. ggml's scale = 0 has no posenc
 * spelling (0 means "1" there): refused. */
static bool gp_softmax_params(const struct ggml_tensor *op, struct posenc_softmax_params *p)
{
    memset(p, 0, sizeof(*p));
    p->scale = ggml_get_op_params_f32(op, 0);
    p->max_bias = ggml_get_op_params_f32(op, 1);
    return p->scale != 0.0f && isfinite(p->scale) && isfinite(p->max_bias) && p->max_bias >= 0;
}

static bool gp_supports_softmax(const struct gp_device *dev, const struct ggml_tensor *op)
{
    const struct ggml_tensor *x = op->src[0], *mask = op->src[1], *sinks = op->src[2];
    struct posenc_softmax_params p;
    if (!gp_is_float(x) || !gp_is_float(op) || !ggml_are_same_shape(x, op) ||
        !gp_softmax_params(op, &p))
        return false;
    if (mask && (!gp_is_float(mask) || mask->ne[0] != x->ne[0] || mask->ne[1] < x->ne[1] ||
                 x->ne[2] % mask->ne[2] != 0 || x->ne[3] % mask->ne[3] != 0))
        return false;
    if (sinks && (sinks->type != GGML_TYPE_F32 || sinks->ne[0] != x->ne[2] ||
                  ggml_nelements(sinks) != sinks->ne[0]))
        return false;
    struct gp_check c = {{NULL}, 0};
    posenc_tensor xv = gp_check_view(&c, x), dv = gp_check_view(&c, op), mv, sv;
    if (mask)
        mv = gp_check_view(&c, mask);
    if (sinks)
        sv = gp_check_view(&c, sinks);
    struct gp_device *d = gp_check_begin(dev);
    return gp_check_end(d, posenc_softmax(d->ctx, &xv, mask ? &mv : NULL, sinks ? &sv : NULL,
                                          &dv, &p));
}

static void gp_softmax(struct gp_device *dev, const struct ggml_tensor *node)
{
    struct posenc_softmax_params p;
    GGML_ASSERT(gp_softmax_params(node, &p));
    posenc_tensor x = gp_view(node->src[0]), d = gp_view(node), m, s;
    if (node->src[1])
        m = gp_view(node->src[1]);
    if (node->src[2])
        s = gp_view(node->src[2]);
    GP_CHECK(dev,
             posenc_softmax(dev->ctx, &x, node->src[1] ? &m : NULL, node->src[2] ? &s : NULL,
                            &d, &p),
             "posenc_softmax");
}

/* ---- flash_attn_ext ------------------------------------------------------------------------ */

/*
 * ggml_flash_attn_ext(q, k, v, mask, scale, max_bias, logit_softcap) (+ add_sinks) as
 * posenc_attention without weights (the one-pass path; devices without it refuse in
 * supports_op, since the extras need it and the multi-pass path would materialise the
 * logits). ggml's shapes: q [D, Tq, Hq, B] f32, k [D, Tk, Hk, B], v [Dv, Tk, Hk, B] f16 or
 * f32, mask [Tk, >= Tq (padded), 1 or Hq, 1 or B] f16, sinks [Hq] f32, result
 * [Dv, Hq, Tq, B] f32 -- posenc's q / k / v are the same memory with dims 1 and 2
 * swapped (strides permuted), the result is posenc's dst as is, the mask a view of its
 * first Tq rows (and Tk columns).
 *
 * ggml's CPU backend: s = q.k * scale; with logit_softcap c != 0 it divides scale by c
 * first and takes c * tanh(s): c * tanh(q.k * scale / c), which is posenc's softcap
 * (c * tanh(s / c) of the scaled score). With max_bias > 0 the mask is multiplied by the
 * head's ALiBi slope, h < n = 2^floor(log2 Hq): 2^(-max_bias (h + 1) / n), else
 * 2^(-max_bias / 2 (2 (h - n) + 1) / n): posenc_alibi_slopes' rule (in double; ggml's
 * powf in f32), given as mask_slopes. A row whose every key is masked gives 0 in both.
 * scale = 0 has no posenc spelling (0 means 1/sqrt(D) there): refused.
 */
struct gp_fa {
    float scale, max_bias, softcap;
    float slopes[512];
};

static bool gp_fa_params(const struct ggml_tensor *op, struct gp_fa *f)
{
    f->scale = ggml_get_op_params_f32(op, 0);
    f->max_bias = ggml_get_op_params_f32(op, 1);
    f->softcap = ggml_get_op_params_f32(op, 2);
    const int64_t Hq = op->src[0]->ne[2];
    if (f->scale == 0.0f || !isfinite(f->scale) || !isfinite(f->max_bias) ||
        f->max_bias < 0.0f || !isfinite(f->softcap) || f->softcap < 0.0f)
        return false;
    if (f->max_bias > 0.0f) {
        double d[512];
        struct posenc_alibi_params ap;
        memset(&ap, 0, sizeof(ap));
        ap.max_bias = f->max_bias;
        if (Hq > 512 || posenc_alibi_slopes(Hq, &ap, d) != POSENC_OK)
            return false;
        for (int64_t h = 0; h < Hq; h++)
            f->slopes[h] = (float)d[h];
    }
    return true;
}

/* The node's posenc views (check-only descriptions when c is set). */
static void gp_fa_views(const struct ggml_tensor *op, struct gp_check *c, posenc_tensor *q,
                        posenc_tensor *k, posenc_tensor *v, posenc_tensor *m, posenc_tensor *s,
                        posenc_tensor *d)
{
    const struct ggml_tensor *src[3] = {op->src[0], op->src[1], op->src[2]};
    posenc_tensor *out[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        posenc_tensor t = c ? gp_check_view(c, src[i]) : gp_view(src[i]);
        /* [D, T, H, B] -> [D, H, T, B] */
        const int64_t ne1 = t.ne[1], nb1 = t.nb[1];
        t.ne[1] = t.ne[2];
        t.nb[1] = t.nb[2];
        t.ne[2] = ne1;
        t.nb[2] = nb1;
        *out[i] = t;
    }
    *d = c ? gp_check_view(c, op) : gp_view(op);
    const struct ggml_tensor *mask = op->src[3], *sinks = op->src[4];
    if (mask) {
        *m = c ? gp_check_view(c, mask) : gp_view(mask);
        m->ne[0] = op->src[1]->ne[1]; /* Tk */
        m->ne[1] = op->src[0]->ne[1]; /* Tq: the rows past it are padding */
    }
    if (sinks)
        *s = c ? gp_check_view(c, sinks) : gp_view(sinks);
}

static posenc_status gp_fa_call(posenc_context *ctx, const struct ggml_tensor *op,
                                const struct gp_fa *f, const posenc_tensor *q,
                                const posenc_tensor *k, const posenc_tensor *v,
                                const posenc_tensor *m, const posenc_tensor *s,
                                const posenc_tensor *d)
{
    struct posenc_attention_params p;
    memset(&p, 0, sizeof(p));
    p.encoding = POSENC_ATTENTION_NONE;
    p.scale = f->scale;
    p.softcap = f->softcap;
    if (op->src[3])
        p.mask = m;
    if (op->src[3] && f->max_bias > 0.0f)
        p.mask_slopes = f->slopes;
    if (op->src[4])
        p.sinks = s;
    return posenc_attention(ctx, q, k, v, d, NULL, &p);
}

static bool gp_supports_fa(const struct gp_device *dev, const struct ggml_tensor *op)
{
    const struct ggml_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2];
    const struct ggml_tensor *mask = op->src[3], *sinks = op->src[4];
    struct gp_fa f;
    if (q->type != GGML_TYPE_F32 || !gp_is_float(k) || !gp_is_float(v) ||
        op->type != GGML_TYPE_F32 || !gp_fa_params(op, &f))
        return false; /* quantized and bf16 K / V among them */
    if (f.max_bias > 0.0f && !mask)
        return false;
    if (k->ne[3] != q->ne[3] || v->ne[3] != q->ne[3] || k->ne[2] != v->ne[2] ||
        k->ne[1] != v->ne[1] || k->ne[2] == 0 || q->ne[2] % k->ne[2] != 0)
        return false;
    if (mask && (mask->type != GGML_TYPE_F16 || mask->ne[0] < k->ne[1] ||
                 mask->ne[1] < q->ne[1] || (mask->ne[2] != 1 && mask->ne[2] != q->ne[2]) ||
                 (mask->ne[3] != 1 && mask->ne[3] != q->ne[3])))
        return false;
    if (sinks && (sinks->type != GGML_TYPE_F32 || sinks->ne[0] != q->ne[2] ||
                  ggml_nelements(sinks) != sinks->ne[0]))
        return false;
    struct gp_check c = {{NULL}, 0};
    posenc_tensor qv, kv, vv, mv, sv, dv;
    gp_fa_views(op, &c, &qv, &kv, &vv, &mv, &sv, &dv);
    struct gp_device *d = gp_check_begin(dev);
    /* a device without a one-pass kernel: posenc refuses the extras; without extras it
     * would take the multi-pass path (the logits in memory), which this op should not */
    const bool has_extras = f.softcap > 0.0f || (mask && f.max_bias > 0.0f) || sinks;
    posenc_status st = gp_fa_call(d->ctx, op, &f, &qv, &kv, &vv, &mv, &sv, &dv);
    if (st == POSENC_OK && !has_extras) {
        /* ask with a softcap to learn whether the device has the one-pass path */
        struct gp_fa probe = f;
        probe.softcap = 1.0f;
        st = gp_fa_call(d->ctx, op, &probe, &qv, &kv, &vv, &mv, &sv, &dv);
    }
    return gp_check_end(d, st);
}

static void gp_flash_attn(struct gp_device *dev, const struct ggml_tensor *node)
{
    struct gp_fa f;
    GGML_ASSERT(gp_fa_params(node, &f));
    posenc_tensor q, k, v, m, s, d;
    gp_fa_views(node, NULL, &q, &k, &v, &m, &s, &d);
    GP_CHECK(dev, gp_fa_call(dev->ctx, node, &f, &q, &k, &v, &m, &s, &d), "posenc_attention");
}

/* ---- set_rows ---------------------------------------------------------------------------- */

/* ggml_set_rows(a, b, c): the node is a view of a, src[0] = b (rows to write), src[1] = c
 * (i32 / i64 indices). ggml checks no index: posenc runs UNCHECKED (no read-back, no
 * host wait), where an index outside the destination skips its row. */
static const struct posenc_set_rows_params gp_rows_unchecked = {POSENC_ROWS_UNCHECKED, {0}};

static bool gp_is_index(const struct ggml_tensor *t)
{
    return t->type == GGML_TYPE_I32 || t->type == GGML_TYPE_I64;
}

static bool gp_set_rows_static(const struct ggml_tensor *op)
{
    const struct ggml_tensor *src = op->src[0], *rows = op->src[1];
    return gp_is_float(src) && gp_is_float(op) && gp_is_index(rows) &&
           src->ne[0] == op->ne[0] && src->ne[2] == op->ne[2] && src->ne[3] == op->ne[3] &&
           rows->ne[0] == src->ne[1] && rows->ne[3] == 1 && src->ne[2] % rows->ne[1] == 0 &&
           src->ne[3] % rows->ne[2] == 0;
}

static bool gp_supports_set_rows(const struct gp_device *dev, const struct ggml_tensor *op)
{
    if (!gp_set_rows_static(op))
        return false;
    struct gp_check c = {{NULL}, 0};
    posenc_tensor s = gp_check_view(&c, op->src[0]), r = gp_check_view(&c, op->src[1]);
    posenc_tensor d = gp_check_view(&c, op);
    struct gp_device *dv = gp_check_begin(dev);
    return gp_check_end(dv, posenc_set_rows(dv->ctx, &s, &r, &d, &gp_rows_unchecked));
}

static void gp_set_rows(struct gp_device *dev, const struct ggml_tensor *node)
{
    posenc_tensor s = gp_view(node->src[0]), r = gp_view(node->src[1]), d = gp_view(node);
    GP_CHECK(dev, posenc_set_rows(dev->ctx, &s, &r, &d, &gp_rows_unchecked), "posenc_set_rows");
}

/* ROPE -> VIEW -> SET_ROWS, the KV-cache write of llama.cpp's graphs (ggml's CUDA and
 * Vulkan backends fuse it too): the rotated rows go straight to their cache rows with
 * posenc_rope_set_rows, the intermediate is never written. The view must be the rope's
 * [head_dim*H, T] rows of batch 0 and the cache [head_dim*H, R] with packed rows. */
static bool gp_can_fuse_rope_set_rows(const struct ggml_cgraph *g, int i)
{
    static const enum ggml_op ops[3] = {GGML_OP_ROPE, GGML_OP_VIEW, GGML_OP_SET_ROWS};
    const int outputs[1] = {i + 2};
    if (i + 2 >= g->n_nodes || !ggml_can_fuse_subgraph(g, i, 3, ops, outputs, 1))
        return false;
    const struct ggml_tensor *rope = g->nodes[i], *view = g->nodes[i + 1], *sr = g->nodes[i + 2];
    const struct ggml_tensor *rows = sr->src[1];
    if (view->src[0] != rope || sr->src[0] != view || !gp_rope_static(rope) ||
        !gp_set_rows_static(sr))
        return false;
    const size_t es = ggml_type_size(rope->type), ed = ggml_type_size(sr->type);
    return view->view_offs == 0 && view->ne[0] == rope->ne[0] * rope->ne[1] &&
           view->ne[1] == rope->ne[2] && view->ne[2] == 1 && view->ne[3] == 1 &&
           view->nb[1] == rope->nb[2] && rope->nb[0] == es && rope->nb[1] == es * rope->ne[0] &&
           sr->nb[0] == ed && sr->ne[2] == 1 && sr->ne[3] == 1 && rows->ne[1] == 1 &&
           rows->ne[2] == 1;
}

/* Run the fused write; false (nothing run) when posenc would refuse it, e.g. a cache that
 * overlaps the rope's input: then the nodes run one by one. */
static bool gp_rope_set_rows(struct gp_device *dev, const struct ggml_tensor *rope,
                             const struct ggml_tensor *sr)
{
    const struct ggml_tensor *x = rope->src[0];
    struct posenc_rope_params p;
    GGML_ASSERT(gp_rope_params(rope, &p));
    posenc_tensor xt = gp_view(x), ff, rt = gp_view(sr->src[1]), dt = gp_view(sr);
    posenc_tensor pt = gp_rope_pos(gp_view(rope->src[1]), x->ne[2], gp_rope_streams(rope));
    xt.ne[3] = 1; /* the view takes batch 0 */
    if (rope->src[2]) {
        ff = gp_view(rope->src[2]);
        p.freq_factors_tensor = &ff;
    }
    /* the cache [head_dim*H, R] as [head_dim, H, R, 1] */
    dt.ne[0] = x->ne[0];
    dt.ne[1] = x->ne[1];
    dt.ne[2] = sr->ne[1];
    dt.ne[3] = 1;
    dt.nb[1] = dt.nb[0] * x->ne[0];
    dt.nb[2] = (int64_t)sr->nb[1];
    dt.nb[3] = (int64_t)sr->nb[2] * sr->ne[2];
    rt.ne[1] = rt.ne[2] = rt.ne[3] = 1;
    posenc_context_set_check_only(dev->ctx, 1);
    posenc_status st = posenc_rope_set_rows(dev->ctx, &xt, &pt, &rt, &dt, &p, &gp_rows_unchecked);
    posenc_context_set_check_only(dev->ctx, 0);
    if (st != POSENC_OK)
        return false;
    GP_CHECK(dev, posenc_rope_set_rows(dev->ctx, &xt, &pt, &rt, &dt, &p, &gp_rows_unchecked),
             "posenc_rope_set_rows");
    return true;
}

/* ---- timestep embedding ----------------------------------------------------------------- */

/* ggml: dst[j] = cos(t w_j), dst[j + half] = sin(t w_j), w_j = max_period^(-j/half), and
 * 0 in the last column when dim is odd: posenc's sinusoidal with the cos-first half-split
 * layout, base max_period. */
static bool gp_supports_timestep(const struct ggml_tensor *op)
{
    const struct ggml_tensor *t = op->src[0];
    const int dim = ggml_get_op_params_i32(op, 0), max_period = ggml_get_op_params_i32(op, 1);
    return t->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 && t->ne[1] == 1 &&
           t->ne[2] == 1 && t->ne[3] == 1 && dim >= 1 && op->ne[0] == dim &&
           op->ne[1] == t->ne[0] && op->ne[2] == 1 && op->ne[3] == 1 && max_period > 0;
}

static void gp_timestep(struct gp_device *dev, const struct ggml_tensor *node)
{
    const struct ggml_tensor *ts = node->src[0];
    const int dim = ggml_get_op_params_i32(node, 0), max_period = ggml_get_op_params_i32(node, 1);
    const int half = dim / 2;
    posenc_tensor d = gp_view(node), pos = gp_view(ts);
    if (half > 0) {
        posenc_tensor dh = d;
        dh.ne[0] = 2 * half;
        struct posenc_sinusoidal_params sp;
        memset(&sp, 0, sizeof(sp));
        sp.base = (float)max_period;
        sp.layout = POSENC_SIN_HALF_SPLIT_COS_FIRST;
        GP_CHECK(dev, posenc_sinusoidal(dev->ctx, NULL, &pos, &dh, &sp), "posenc_sinusoidal");
    }
    if (dim % 2) {
        posenc_tensor col = d;
        col.offset += (size_t)(2 * half) * sizeof(float);
        col.ne[0] = 1;
        GP_CHECK(dev, posenc_fill(dev->ctx, &col, 0.0), "posenc_fill");
    }
}

/* ---- supports_op / graph_compute -------------------------------------------------------- */

bool gp_supports_op(const struct gp_device *dev, const struct ggml_tensor *op)
{
    switch (op->op) {
    case GGML_OP_NONE:
    case GGML_OP_RESHAPE:
    case GGML_OP_VIEW:
    case GGML_OP_PERMUTE:
    case GGML_OP_TRANSPOSE:
        return true;
    case GGML_OP_ROPE:
    case GGML_OP_ROPE_BACK:
        return gp_supports_rope(dev, op);
    case GGML_OP_CPY:
    case GGML_OP_DUP:
    case GGML_OP_CONT:
        return gp_supports_copy(op);
    case GGML_OP_TIMESTEP_EMBEDDING:
        return gp_supports_timestep(op);
    case GGML_OP_SOFT_MAX:
        return gp_supports_softmax(dev, op);
    case GGML_OP_SET_ROWS:
        return gp_supports_set_rows(dev, op);
    case GGML_OP_FLASH_ATTN_EXT:
        return gp_supports_fa(dev, op);
    default:
        return false;
    }
}

enum ggml_status gp_graph_compute(struct gp_device *dev, struct ggml_cgraph *cgraph)
{
    for (int i = 0; i < cgraph->n_nodes; i++) {
        struct ggml_tensor *node = cgraph->nodes[i];
        if (ggml_is_empty(node) || ggml_op_is_empty(node->op) ||
            (node->flags & GGML_TENSOR_FLAG_COMPUTE) == 0)
            continue;
        switch (node->op) {
        case GGML_OP_ROPE:
            if (gp_can_fuse_rope_set_rows(cgraph, i) &&
                gp_rope_set_rows(dev, node, cgraph->nodes[i + 2])) {
                i += 2;
                break;
            }
            gp_rope(dev, node);
            break;
        case GGML_OP_ROPE_BACK:
            gp_rope(dev, node);
            break;
        case GGML_OP_SOFT_MAX:
            gp_softmax(dev, node);
            break;
        case GGML_OP_SET_ROWS:
            gp_set_rows(dev, node);
            break;
        case GGML_OP_CPY:
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            gp_copy(dev, node);
            break;
        case GGML_OP_TIMESTEP_EMBEDDING:
            gp_timestep(dev, node);
            break;
        case GGML_OP_FLASH_ATTN_EXT:
            gp_flash_attn(dev, node);
            break;
        default:
            GGML_LOG_ERROR("%s: op %s reached graph_compute but supports_op refuses it\n",
                           dev->name, ggml_op_desc(node));
            return GGML_STATUS_FAILED;
        }
    }
    return GGML_STATUS_SUCCESS;
}
