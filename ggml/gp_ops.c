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

static bool gp_supports_rope(const struct ggml_tensor *op)
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
static posenc_tensor gp_rope_pos(const struct ggml_tensor *pos, int64_t T, int S)
{
    posenc_tensor v = gp_view(pos);
    v.ne[0] = T;
    v.ne[1] = S;
    v.ne[2] = v.ne[3] = 1;
    v.nb[1] = T * v.nb[0];
    v.nb[2] = v.nb[3] = S * v.nb[1];
    return v;
}

static void gp_rope(struct gp_device *dev, const struct ggml_tensor *node)
{
    const struct ggml_tensor *x = node->src[0];
    struct posenc_rope_params p;
    GGML_ASSERT(gp_rope_params(node, &p));
    posenc_tensor xt = gp_view(x), dt = gp_view(node), ff;
    posenc_tensor pt = gp_rope_pos(node->src[1], x->ne[2], gp_rope_streams(node));
    if (node->src[2]) {
        ff = gp_view(node->src[2]);
        p.freq_factors_tensor = &ff;
    }
    GP_CHECK(dev, posenc_rope(dev->ctx, &xt, &pt, &dt, &p), "posenc_rope");
}

/* ---- copies ----------------------------------------------------------------------------- */

/* CPY, DUP, CONT: src[0] -> node. posenc_copy converts f32 <-> f16 over any strides when
 * the shapes match; ggml_cpy only asks for equal element counts, so other shapes run when
 * both sides are contiguous (then both are one row). */
static bool gp_supports_copy(const struct ggml_tensor *op)
{
    const struct ggml_tensor *src = op->src[0];
    bool floats = gp_is_float(src) && gp_is_float(op);
    bool ints = src->type == GGML_TYPE_I32 && op->type == GGML_TYPE_I32;
    if (!floats && !ints)
        return false;
    if (ggml_are_same_shape(src, op))
        return true;
    return ggml_nelements(src) == ggml_nelements(op) && ggml_is_contiguous(src) &&
           ggml_is_contiguous(op);
}

static void gp_copy(struct gp_device *dev, const struct ggml_tensor *node)
{
    const struct ggml_tensor *src = node->src[0];
    posenc_tensor s = gp_view(src), d = gp_view(node);
    if (!ggml_are_same_shape(src, node)) {
        s = posenc_tensor_contiguous(s.buffer, s.offset, s.dtype, ggml_nelements(src), 1, 1, 1);
        d = posenc_tensor_contiguous(d.buffer, d.offset, d.dtype, ggml_nelements(node), 1, 1, 1);
    }
    GP_CHECK(dev, posenc_copy(dev->ctx, &s, &d), "posenc_copy");
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
    (void)dev;
    switch (op->op) {
    case GGML_OP_NONE:
    case GGML_OP_RESHAPE:
    case GGML_OP_VIEW:
    case GGML_OP_PERMUTE:
    case GGML_OP_TRANSPOSE:
        return true;
    case GGML_OP_ROPE:
    case GGML_OP_ROPE_BACK:
        return gp_supports_rope(op);
    case GGML_OP_CPY:
    case GGML_OP_DUP:
    case GGML_OP_CONT:
        return gp_supports_copy(op);
    case GGML_OP_TIMESTEP_EMBEDDING:
        return gp_supports_timestep(op);
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
        case GGML_OP_ROPE_BACK:
            gp_rope(dev, node);
            break;
        case GGML_OP_CPY:
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            gp_copy(dev, node);
            break;
        case GGML_OP_TIMESTEP_EMBEDDING:
            gp_timestep(dev, node);
            break;
        default:
            GGML_LOG_ERROR("%s: op %s reached graph_compute but supports_op refuses it\n",
                           dev->name, ggml_op_desc(node));
            return GGML_STATUS_FAILED;
        }
    }
    return GGML_STATUS_SUCCESS;
}
