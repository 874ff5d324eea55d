/*
 * split.c - ops larger than one launch may address.
 *
 * A GPU kernel reaches a tensor through a binding, and bindings have a size limit of
 * their own that can be far below the largest buffer: Vulkan's maxStorageBufferRange is
 * 128 MiB on lavapipe and many mobile GPUs, while a buffer may hold gigabytes. A backend
 * states its limit in pe_backend.max_binding (0 = none); POSENC_MAX_BINDING=<bytes> lowers
 * it for a context (to try a small device's limit on a big one, and for the tests).
 *
 * Every op whose output elements depend only on inputs at the same outer coordinates
 * (copy, sinusoidal, RoPE, learned, ALiBi, relative bias) is cut here along its outermost
 * dimensions into slices whose views each span at most the limit, and the backend runs one
 * launch per slice; the backend binds each view from its own first byte (Vulkan: a
 * descriptor window). The other ops (learned and relative-bias backward, 2-D resize, the
 * attention GEMMs) are refused with POSENC_ERR_UNSUPPORTED naming the limit when a view
 * exceeds it -- their outputs do not decompose that way.
 *
 * fill is cut like copy. set_rows (and rope_set_rows, which is RoPE with a rows view) write
 * destination rows chosen by data, so a cut of the source rows (tokens) moves the index
 * view and leaves the destination whole; the other dimensions cut both sides (set_rows
 * carries the broadcast bases of its index view instead of cutting it).
 *
 * Slicing dimension d at [a, a + n) of the op's main shape moves each view's offset by
 * a * stride and sets its extent to n; positions, slopes and q/k offsets follow the same
 * coordinate. Views are non-negative-strided (the front end checked), so a view's span is
 * (sum (ne[k] - 1) * st[k] + 1) elements, and the span of a slice depends on n only: the
 * largest slice that fits is found once per dimension by bisection.
 */
#include "split.h"

#include "backend.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

uint64_t pe_binding_limit(const posenc_context *ctx, const char **out_what)
{
    const struct pe_backend *be = ctx->backend;
    uint64_t lim = be ? be->max_binding : 0;
    const char *what = be && be->max_binding_name ? be->max_binding_name : "";
    if (ctx->max_binding_env && (lim == 0 || ctx->max_binding_env < lim)) {
        lim = ctx->max_binding_env;
        what = "POSENC_MAX_BINDING";
    }
    if (out_what)
        *out_what = what;
    return lim;
}

uint64_t pe_view_span_bytes(const struct pe_view *v)
{
    if (!v->mem)
        return 0;
    int64_t last = 0;
    for (int k = 0; k < 4; k++) {
        if (v->ne[k] <= 0)
            return 0;
        if (v->ne[k] > 1)
            last += (v->ne[k] - 1) * v->st[k];
    }
    return (uint64_t)(last + 1) * posenc_dtype_size(v->dtype);
}

/* ------------------------------------------------------------------------------------ */
/* Per-op descriptions                                                                  */
/* ------------------------------------------------------------------------------------ */

union pe_any_op {
    struct pe_copy_op copy;
    struct pe_sinusoidal_op sin;
    struct pe_rope_op rope;
    struct pe_learned_op learned;
    struct pe_alibi_op alibi;
    struct pe_relbias_op relbias;
    struct pe_fill_op fill;
    struct pe_set_rows_op set_rows;
    struct pe_softmax_op softmax;
};

/* A view of an op, by its place in the union. */
struct split_view {
    size_t off;       /* offsetof(union pe_any_op, ...) of a struct pe_view */
    const char *name; /* for messages */
};

struct split_desc {
    const char *name;
    int min_dim;                /* the innermost dimension that may be cut */
    size_t shape;               /* the view whose ne is the op's main shape */
    struct split_view views[8]; /* the views whose span must fit ({0, NULL} ends) */
    void (*slice)(union pe_any_op *op, int d, int64_t a, int64_t n);
    posenc_status (*run)(struct pe_backend *be, const union pe_any_op *op);
    /* Optional: when dimension d cannot be cut, split the op into two independent ops
     * (written to parts) and return true; the driver goes on with each. */
    bool (*apart)(const union pe_any_op *op, int d, union pe_any_op parts[2]);
};

static const struct pe_view *view_at(const union pe_any_op *op, size_t off)
{
    return (const struct pe_view *)((const char *)op + off);
}

#define V(member, name) {offsetof(union pe_any_op, member), name}

static void cut(struct pe_view *v, int d, int64_t a, int64_t n)
{
    if (!v->mem)
        return;
    v->offset += a * v->st[d];
    v->ne[d] = n;
}

/* A broadcast-aware cut of a positions view: a dimension of extent 1 (stride 0) is
 * shared by every index and stays as it is. */
static void cut_shared(struct pe_view *v, int d, int64_t a, int64_t n)
{
    if (v->mem && v->ne[d] > 1)
        cut(v, d, a, n);
}

/* copy: src, dst [4], any dimension. */
static void copy_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    cut(&op->copy.src, d, a, n);
    cut(&op->copy.dst, d, a, n);
}
static posenc_status copy_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->copy(be, &op->copy);
}

/* sinusoidal: dst, x [d, T, B2, B3]; pos dims 0..2 follow dims 1..3. Dimension 0 holds
 * the (sin, cos) pairs of one position and is not cut. */
static void sin_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    cut(&op->sin.dst, d, a, n);
    cut(&op->sin.x, d, a, n);
    cut_shared(&op->sin.pos, d - 1, a, n);
}
static posenc_status sin_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->sinusoidal(be, &op->sin);
}

/* rope: x, dst, x2, dst2 [head_dim, H, T, B]; pos / pos_from [T, streams, B]. Heads
 * (dimension 1) are cut only without x2: q and k have different head counts.
 * rope_set_rows (rows set): dst [head_dim, H, R, B] is written at any token row, so a
 * token cut moves the rows view instead of dst. */
static void rope_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    struct pe_rope_op *r = &op->rope;
    cut(&r->x, d, a, n);
    if (r->rows.mem && d == 2)
        cut(&r->rows, 0, a, n);
    else
        cut(&r->dst, d, a, n);
    if (r->rows.mem && d == 3)
        cut_shared(&r->rows, 1, a, n);
    cut(&r->x2, d, a, n);
    cut(&r->dst2, d, a, n);
    if (d == 2) {
        cut(&r->pos, 0, a, n);
        cut(&r->pos_from, 0, a, n);
    } else if (d == 3) {
        cut_shared(&r->pos, 2, a, n);
        cut_shared(&r->pos_from, 2, a, n);
    }
}
static posenc_status rope_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->rope(be, &op->rope);
}
/* posenc_rope_qk: q and k have different head counts, so heads are not cut while both are
 * in the op; rotate them apart instead. */
static bool rope_apart(const union pe_any_op *op, int d, union pe_any_op parts[2])
{
    if (d != 1 || !op->rope.x2.mem)
        return false;
    parts[0] = parts[1] = *op;
    parts[1].rope.x = op->rope.x2;
    parts[1].rope.dst = op->rope.dst2;
    for (int i = 0; i < 2; i++) {
        memset(&parts[i].rope.x2, 0, sizeof parts[i].rope.x2);
        memset(&parts[i].rope.dst2, 0, sizeof parts[i].rope.dst2);
    }
    return true;
}

/* learned: x, dst [d, T, B]; pos [T, B]; the table is read at any row and not cut. */
static void learned_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    cut(&op->learned.dst, d, a, n);
    cut(&op->learned.x, d, a, n);
    cut_shared(&op->learned.pos, d - 1, a, n);
}
static posenc_status learned_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->learned(be, &op->learned);
}

/* alibi: logits, dst [K, Q, H, B]; key and query cuts move the offsets, head cuts the
 * slopes. */
static void alibi_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    struct pe_alibi_op *o = &op->alibi;
    cut(&o->dst, d, a, n);
    cut(&o->logits, d, a, n);
    if (d == 0)
        o->k_offset += a;
    else if (d == 1)
        o->q_offset += a;
    else if (d == 2) {
        o->slopes += a;
        o->slopes_f32 += a;
        o->h_off += a;
    }
}
static posenc_status alibi_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->alibi(be, &op->alibi);
}

/* relbias: logits, dst [K, Q, H, B]; table [n_buckets, H] follows the head cuts. A key
 * or query cut narrows the window of relative positions to the slice's own, as the front
 * end forms it for a whole op (rel_min = k_offset - (q_offset + Q - 1), n_rel = K + Q - 1):
 * a subrange of the op's, so the bucket list is the op's from rel_min on. */
static void relbias_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    struct pe_relbias_op *o = &op->relbias;
    cut(&o->dst, d, a, n);
    cut(&o->logits, d, a, n);
    if (d == 0)
        o->k_offset += a;
    else if (d == 1)
        o->q_offset += a;
    else if (d == 2)
        cut(&o->table, 1, a, n);
    if (d <= 1) {
        const int64_t rel_min = o->k_offset - (o->q_offset + o->dst.ne[1] - 1);
        o->bucket += rel_min - o->rel_min;
        o->rel_min = rel_min;
        o->n_rel = o->dst.ne[0] + o->dst.ne[1] - 1;
    }
}
static posenc_status relbias_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->relbias(be, &op->relbias);
}

static const struct split_desc copy_desc = {
    "copy", 0, offsetof(union pe_any_op, copy.dst),
    {V(copy.src, "src"), V(copy.dst, "dst")}, copy_slice, copy_run, NULL};
static const struct split_desc sin_desc = {
    "sinusoidal", 1, offsetof(union pe_any_op, sin.dst),
    {V(sin.dst, "dst"), V(sin.x, "x"), V(sin.pos, "pos")}, sin_slice, sin_run, NULL};
static const struct split_desc rope_desc = {
    "rope", 1, offsetof(union pe_any_op, rope.x),
    {V(rope.x, "x"), V(rope.dst, "dst"), V(rope.x2, "k"), V(rope.dst2, "k_out"),
     V(rope.pos, "pos"), V(rope.pos_from, "pos_from"), V(rope.rows, "rows")},
    rope_slice, rope_run, rope_apart};
static const struct split_desc learned_desc = {
    "learned", 1, offsetof(union pe_any_op, learned.dst),
    {V(learned.dst, "dst"), V(learned.x, "x"), V(learned.pos, "pos"),
     V(learned.table, "table")},
    learned_slice, learned_run, NULL};
static const struct split_desc alibi_desc = {
    "alibi", 0, offsetof(union pe_any_op, alibi.dst),
    {V(alibi.dst, "dst"), V(alibi.logits, "logits")}, alibi_slice, alibi_run, NULL};
static const struct split_desc relbias_desc = {
    "relbias", 0, offsetof(union pe_any_op, relbias.dst),
    {V(relbias.dst, "dst"), V(relbias.logits, "logits"), V(relbias.table, "table")},
    relbias_slice, relbias_run, NULL};
/* fill: dst [4], any dimension. */
static void fill_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    cut(&op->fill.dst, d, a, n);
    if (d == 0) /* a ramp's first element of the slice: bits + step a (mod 2^32) */
        op->fill.bits += op->fill.step * (uint32_t)a;
}
static posenc_status fill_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->fill(be, &op->fill);
}

/* set_rows: src [n, r, d2, d3], dst [n, R, d2, d3]. A cut of dim 1 (source rows) moves the
 * rows view and leaves dst whole (any row may be written); dims 2 and 3 move dst and the
 * broadcast bases (the rows view repeats with period e2 / e3, so it is not cut). */
static void set_rows_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    struct pe_set_rows_op *o = &op->set_rows;
    cut(&o->src, d, a, n);
    if (d == 1) {
        cut(&o->rows, 0, a, n);
        return;
    }
    cut(&o->dst, d, a, n);
    if (d == 2)
        o->base2 += a;
    else if (d == 3)
        o->base3 += a;
}
static posenc_status set_rows_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->set_rows(be, &op->set_rows);
}

static const struct split_desc fill_desc = {
    "fill", 0, offsetof(union pe_any_op, fill.dst), {V(fill.dst, "dst")}, fill_slice, fill_run,
    NULL};
static const struct split_desc set_rows_desc = {
    "set_rows", 0, offsetof(union pe_any_op, set_rows.src),
    {V(set_rows.src, "src"), V(set_rows.dst, "dst"), V(set_rows.rows, "rows")},
    set_rows_slice, set_rows_run, NULL};
/* softmax: x, dst [n, rows, H, B], rows (dim 0) never cut. A row cut moves the mask's
 * rows with x's; head and batch cuts move h_off / b_off (slopes, sinks and the mask plane
 * h % mask.ne[2] follow the global head) and keep the whole mask, except that a slice of
 * one head (batch) narrows the mask to that head's (batch's) plane. */
static void softmax_slice(union pe_any_op *op, int d, int64_t a, int64_t n)
{
    struct pe_softmax_op *o = &op->softmax;
    struct pe_view *m = &o->mask;
    cut(&o->x, d, a, n);
    cut(&o->dst, d, a, n);
    if (d == 1) {
        cut(m, 1, a, n);
        return;
    }
    int64_t *off = d == 2 ? &o->h_off : &o->b_off;
    if (m->mem && n == 1 && m->ne[d] > 1) {
        m->offset += ((*off + a) % m->ne[d]) * m->st[d];
        m->ne[d] = 1;
    }
    *off += a;
}
static posenc_status softmax_run(struct pe_backend *be, const union pe_any_op *op)
{
    return be->vt->softmax(be, &op->softmax);
}
static const struct split_desc softmax_desc = {
    "softmax", 1, offsetof(union pe_any_op, softmax.dst),
    {V(softmax.dst, "dst"), V(softmax.x, "x"), V(softmax.mask, "mask"),
     V(softmax.sinks, "sinks")},
    softmax_slice, softmax_run, NULL};
#undef V

/* ------------------------------------------------------------------------------------ */
/* The driver                                                                           */
/* ------------------------------------------------------------------------------------ */

/* The first view of `op` over `limit`, or -1. */
static int over_limit(const struct split_desc *sd, const union pe_any_op *op, uint64_t limit,
                      const char **out_name, uint64_t *out_span)
{
    for (size_t i = 0; i < PE_ARRAY_SIZE(sd->views) && sd->views[i].name; i++) {
        uint64_t s = pe_view_span_bytes(view_at(op, sd->views[i].off));
        if (s > limit) {
            *out_name = sd->views[i].name;
            *out_span = s;
            return (int)i;
        }
    }
    return -1;
}

struct split_run {
    posenc_context *ctx;
    const struct split_desc *sd;
    uint64_t limit;
    const char *what;
    bool dry;          /* count the launches, run nothing */
    int64_t launches;
};

static posenc_status split_rec(struct split_run *r, const union pe_any_op *op, int d)
{
    const char *name;
    uint64_t span;
    if (over_limit(r->sd, op, r->limit, &name, &span) < 0) {
        r->launches++;
        return r->dry ? POSENC_OK : r->sd->run(r->ctx->backend, op);
    }
    const int64_t *ne = view_at(op, r->sd->shape)->ne;
    while (d >= r->sd->min_dim && ne[d] <= 1)
        d--;
    union pe_any_op parts[2];
    if (r->sd->apart && r->sd->apart(op, d, parts)) {
        PE_RETURN_IF_ERROR(split_rec(r, &parts[0], d));
        return split_rec(r, &parts[1], d);
    }
    if (d < r->sd->min_dim)
        return pe_error(r->ctx, POSENC_ERR_UNSUPPORTED,
                        "%s: %s spans %" PRIu64 " bytes even when the op is cut into single "
                        "rows; the device allows at most %" PRIu64 " bytes in one binding (%s)",
                        r->sd->name, name, span, r->limit, r->what);
    /* The largest n whose slice fits (0 when even one index is too much). */
    const int64_t total = ne[d];
    int64_t lo = 0, hi = total - 1; /* the whole extent is known not to fit */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        union pe_any_op s = *op;
        r->sd->slice(&s, d, 0, mid);
        if (over_limit(r->sd, &s, r->limit, &name, &span) < 0)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int64_t step = lo > 0 ? lo : 1;
    for (int64_t a = 0; a < total; a += step) {
        union pe_any_op s = *op;
        r->sd->slice(&s, d, a, total - a < step ? total - a : step);
        PE_RETURN_IF_ERROR(split_rec(r, &s, d - 1));
    }
    return POSENC_OK;
}

static posenc_status run_split(posenc_context *ctx, const struct split_desc *sd,
                               const union pe_any_op *op)
{
    struct split_run r = {.ctx = ctx, .sd = sd, .dry = true};
    r.limit = pe_binding_limit(ctx, &r.what);
    if (r.limit == 0)
        return ctx->check_only ? POSENC_OK : sd->run(ctx->backend, op);
    /* Plan first: a refusal must leave the outputs untouched, so nothing may run before
     * every slice is known to fit. */
    PE_RETURN_IF_ERROR(split_rec(&r, op, 3));
    if (ctx->check_only)
        return POSENC_OK; /* every launch would fit */
    if (r.launches == 1)
        return sd->run(ctx->backend, op);
    const int64_t planned = r.launches;
    r.dry = false;
    posenc_status st = POSENC_OK;
    /* GPU backends: every launch once without enqueueing, so that the programs /
     * pipelines and tables of all of them (a launch's variant may differ from the first's:
     * alignment, size thresholds) are made before the first one writes. */
    if (ctx->backend->vt->prepare_pass) {
        r.launches = 0;
        ctx->backend->prepare_only = true;
        st = split_rec(&r, op, 3);
        ctx->backend->prepare_only = false;
        if (st != POSENC_OK)
            return st;
    }
    r.launches = 0;
    st = split_rec(&r, op, 3);
    if (st == POSENC_OK && r.launches != planned)
        return pe_error(ctx, POSENC_ERR_INTERNAL, "%s: %" PRId64 " launches planned, %" PRId64
                        " run", sd->name, planned, r.launches);
    if (st == POSENC_OK)
        pe_log(ctx, POSENC_LOG_DEBUG, "%s: %" PRId64 " launches (binding limit %" PRIu64
               " bytes, %s)", sd->name, r.launches, r.limit, r.what);
    return st;
}

/* The entry points: each copies its op into the union the driver slices. */
#define PE_RUN_SPLIT(fn, member, op_type, desc)                                            \
    posenc_status fn(posenc_context *ctx, const op_type *op)                               \
    {                                                                                      \
        union pe_any_op u;                                                                 \
        memset(&u, 0, sizeof u);                                                           \
        u.member = *op;                                                                    \
        return run_split(ctx, &desc, &u);                                                  \
    }

PE_RUN_SPLIT(pe_run_copy, copy, struct pe_copy_op, copy_desc)
PE_RUN_SPLIT(pe_run_sinusoidal, sin, struct pe_sinusoidal_op, sin_desc)
PE_RUN_SPLIT(pe_run_rope, rope, struct pe_rope_op, rope_desc)
PE_RUN_SPLIT(pe_run_learned, learned, struct pe_learned_op, learned_desc)
PE_RUN_SPLIT(pe_run_alibi, alibi, struct pe_alibi_op, alibi_desc)
PE_RUN_SPLIT(pe_run_relbias, relbias, struct pe_relbias_op, relbias_desc)
PE_RUN_SPLIT(pe_run_fill, fill, struct pe_fill_op, fill_desc)
PE_RUN_SPLIT(pe_run_set_rows, set_rows, struct pe_set_rows_op, set_rows_desc)
PE_RUN_SPLIT(pe_run_softmax, softmax, struct pe_softmax_op, softmax_desc)

posenc_status pe_check_binding(posenc_context *ctx, const char *op_name, int n_views,
                               const struct pe_view *const *views, const char *const *names)
{
    const char *what;
    const uint64_t limit = pe_binding_limit(ctx, &what);
    if (limit == 0)
        return POSENC_OK;
    for (int i = 0; i < n_views; i++) {
        const uint64_t s = pe_view_span_bytes(views[i]);
        if (s > limit)
            return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                            "%s: %s spans %" PRIu64 " bytes; the device allows at most %" PRIu64
                            " bytes in one binding (%s) and this op is not split",
                            op_name, names[i], s, limit, what);
    }
    return POSENC_OK;
}
