/* tensor.c - tensor descriptors: construction and the checks every op shares. */
#include "tensor.h"

#include <string.h>

size_t posenc_dtype_size(posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F32: return 4;
    case POSENC_DTYPE_F16: return 2;
    case POSENC_DTYPE_I32: return 4;
    case POSENC_DTYPE_I64: return 8;
    }
    return 0;
}

const char *posenc_dtype_name(posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F32: return "f32";
    case POSENC_DTYPE_F16: return "f16";
    case POSENC_DTYPE_I32: return "i32";
    case POSENC_DTYPE_I64: return "i64";
    }
    return "?";
}

posenc_tensor posenc_tensor_contiguous(posenc_buffer *buffer, size_t offset, posenc_dtype dtype,
                                       int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
    posenc_tensor t;
    memset(&t, 0, sizeof(t));
    t.buffer = buffer;
    t.offset = offset;
    t.dtype = dtype;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.ne[2] = ne2;
    t.ne[3] = ne3;
    t.nb[0] = (int64_t)posenc_dtype_size(dtype);
    for (int k = 1; k < 4; k++) {
        int64_t m = t.ne[k - 1] > 0 ? t.ne[k - 1] : 1;
        /* saturate instead of overflowing (signed overflow is undefined): such a view is
         * past any buffer, and every op rejects it */
        t.nb[k] = t.nb[k - 1] > INT64_MAX / m ? INT64_MAX : t.nb[k - 1] * m;
    }
    return t;
}

int64_t posenc_tensor_nelements(const posenc_tensor *t)
{
    if (!t)
        return -1;
    int64_t n = 1;
    for (int k = 0; k < 4; k++) {
        if (t->ne[k] < 0)
            return -1;
        if (t->ne[k] == 0)
            return 0;
    }
    for (int k = 0; k < 4; k++) {
        if (n > INT64_MAX / t->ne[k])
            return -1;
        n *= t->ne[k];
    }
    return n;
}

/* a*b + c with overflow detection on uint64. */
static bool mul_add_u64(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    uint64_t p = a * b;
    if (p > UINT64_MAX - c)
        return false;
    *out = p + c;
    return true;
}

bool pe_tensor_empty(const posenc_tensor *t)
{
    return t->ne[0] == 0 || t->ne[1] == 0 || t->ne[2] == 0 || t->ne[3] == 0;
}

posenc_status pe_check_tensor(posenc_context *ctx, const char *name, const posenc_tensor *t,
                              bool is_output, struct pe_view *out_view)
{
    if (!t)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s is NULL", name);
    /* In check-only mode a view may be described without memory: no buffer to own it or
     * bound it (the overlap rules still apply, NULL counting as one buffer). */
    const bool unbound = !t->buffer && ctx->check_only;
    if (!t->buffer && !unbound)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->buffer is NULL", name);
    if (unbound)
        ; /* nothing to check about the buffer */
    else if (!t->buffer->ctx)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s->buffer belongs to a context that was destroyed", name);
    else if (t->buffer->ctx != ctx)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s->buffer belongs to another context", name);
    size_t es = posenc_dtype_size(t->dtype);
    if (es == 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->dtype = %d is not a posenc_dtype",
                        name, (int)t->dtype);
    for (int k = 0; k < 4; k++) {
        if (t->ne[k] < 0)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->ne[%d] = %lld is negative",
                            name, k, (long long)t->ne[k]);
        if (t->nb[k] < 0)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "%s->nb[%d] = %lld is negative (strides may not go backwards)", name,
                            k, (long long)t->nb[k]);
        if ((uint64_t)t->nb[k] % es != 0)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "%s->nb[%d] = %lld is not a multiple of the %s element size %zu",
                            name, k, (long long)t->nb[k], posenc_dtype_name(t->dtype), es);
    }
    if (t->offset % es != 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s->offset = %zu is not a multiple of the %s element size %zu", name,
                        t->offset, posenc_dtype_name(t->dtype), es);
    if (posenc_tensor_nelements(t) < 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s has %lld x %lld x %lld x %lld elements, which overflows int64", name,
                        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)t->ne[3]);
    if (!pe_tensor_empty(t)) {
        /* last byte touched: offset + sum (ne-1)*nb + es, all checked for overflow */
        uint64_t end = (uint64_t)t->offset + es;
        for (int k = 0; k < 4; k++) {
            if (!mul_add_u64((uint64_t)(t->ne[k] - 1), (uint64_t)t->nb[k], end, &end))
                return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                                "%s: ne[%d]*nb[%d] = %lld*%lld overflows 64 bits", name, k, k,
                                (long long)t->ne[k], (long long)t->nb[k]);
        }
        if (unbound && t->offset > SIZE_MAX - es)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s->offset = %zu overflows",
                            name, t->offset);
        if (!unbound && (t->offset > SIZE_MAX - es || end > (uint64_t)t->buffer->size))
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "%s runs past its buffer: it needs bytes [%zu, %llu) of a %zu-byte "
                            "buffer",
                            name, t->offset, (unsigned long long)end, t->buffer->size);
        if (is_output) {
            /* No two elements at one address: with the dimensions sorted by stride, each
             * stride must step over the whole extent of the dimensions inside it. */
            int order[4] = {0, 1, 2, 3};
            for (int a = 1; a < 4; a++)
                for (int b = a; b > 0 && t->nb[order[b]] < t->nb[order[b - 1]]; b--) {
                    int tmp = order[b];
                    order[b] = order[b - 1];
                    order[b - 1] = tmp;
                }
            uint64_t extent = es;
            for (int a = 0; a < 4; a++) {
                int k = order[a];
                if (t->ne[k] <= 1)
                    continue;
                if ((uint64_t)t->nb[k] < extent)
                    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                                    "%s->nb[%d] = %lld makes elements of the output overlap "
                                    "(needs >= %llu)",
                                    name, k, (long long)t->nb[k], (unsigned long long)extent);
                extent = (uint64_t)t->nb[k] * (uint64_t)(t->ne[k] - 1) + extent;
            }
            /* An op is about to write it (or fail before it does: a spurious miss of a
             * read-back cache costs a read, a missed write would cost a wrong answer). */
            pe_buffer_touch(t->buffer);
        }
    }
    if (out_view) {
        memset(out_view, 0, sizeof(*out_view));
        /* a view without a buffer (check-only mode) is still present: it gets an address
         * no backend ever sees, since nothing launches in that mode */
        static char unbound_mem;
        out_view->mem = t->buffer ? t->buffer->mem : &unbound_mem;
        out_view->dtype = t->dtype;
        out_view->offset = (int64_t)(t->offset / es);
        for (int k = 0; k < 4; k++) {
            out_view->ne[k] = t->ne[k];
            out_view->st[k] = t->nb[k] / (int64_t)es;
        }
    }
    return POSENC_OK;
}

void pe_tensor_byte_range(const posenc_tensor *t, uint64_t *begin, uint64_t *end)
{
    uint64_t e = (uint64_t)t->offset + posenc_dtype_size(t->dtype);
    for (int k = 0; k < 4; k++)
        e += (uint64_t)(t->ne[k] - 1) * (uint64_t)t->nb[k];
    *begin = t->offset;
    *end = e;
}

bool pe_tensors_overlap(const posenc_tensor *a, const posenc_tensor *b)
{
    if (!a || !b || a->buffer != b->buffer || pe_tensor_empty(a) || pe_tensor_empty(b))
        return false;
    uint64_t a0, a1, b0, b1;
    pe_tensor_byte_range(a, &a0, &a1);
    pe_tensor_byte_range(b, &b0, &b1);
    return a0 < b1 && b0 < a1;
}

/* A non-empty view for pe_tensors_share_elements: byte offset, element size and its
 * dimensions of extent > 1 and stride > 0, innermost (smallest stride) first. A stride-0
 * dimension repeats the same elements and drops out. */
struct ov_view {
    uint64_t off, es;
    int n;
    uint64_t ne[4], nb[4];
};

static void ov_make(const posenc_tensor *t, struct ov_view *v)
{
    memset(v, 0, sizeof(*v));
    v->off = t->offset;
    v->es = posenc_dtype_size(t->dtype);
    for (int k = 0; k < 4; k++) {
        if (t->ne[k] <= 1 || t->nb[k] == 0)
            continue;
        int i = v->n++;
        for (; i > 0 && v->nb[i - 1] > (uint64_t)t->nb[k]; i--) {
            v->nb[i] = v->nb[i - 1];
            v->ne[i] = v->ne[i - 1];
        }
        v->nb[i] = (uint64_t)t->nb[k];
        v->ne[i] = (uint64_t)t->ne[k];
    }
}

static uint64_t ov_end(const struct ov_view *v)
{
    uint64_t e = v->off + v->es;
    for (int i = 0; i < v->n; i++)
        e += (v->ne[i] - 1) * v->nb[i];
    return e;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* 1: a and b share a byte, 0: they do not, -1: *budget ran out. Byte ranges prune; the
 * residues of the addresses modulo the gcd of every stride separate views interleaved
 * element by element; otherwise the view with the larger outermost stride is cut into its
 * outermost slices, and only the slices whose byte range meets the other view recurse. */
static int ov_share(const struct ov_view *a, const struct ov_view *b, int64_t *budget)
{
    const uint64_t a0 = a->off, a1 = ov_end(a), b0 = b->off, b1 = ov_end(b);
    if (a1 <= b0 || b1 <= a0)
        return 0;
    if (a->n == 0 && b->n == 0)
        return 1;
    uint64_t g = 0;
    for (int i = 0; i < a->n; i++)
        g = gcd_u64(g, a->nb[i]);
    for (int i = 0; i < b->n; i++)
        g = gcd_u64(g, b->nb[i]);
    if (a->es + b->es <= g) {
        /* every element of a covers [a0, a0 + es_a) modulo g, every element of b
         * [b0, b0 + es_b): disjoint residues, disjoint bytes */
        const uint64_t ra = a0 % g, rb = b0 % g;
        if ((rb + g - ra) % g >= a->es && (ra + g - rb) % g >= b->es)
            return 0;
    }
    if (--*budget < 0)
        return -1;
    const struct ov_view *x = a, *y = b;
    if (a->n == 0 || (b->n > 0 && b->nb[b->n - 1] > a->nb[a->n - 1])) {
        x = b;
        y = a;
    }
    const uint64_t y0 = x == a ? b0 : a0, y1 = x == a ? b1 : a1;
    struct ov_view s = *x;
    s.n--;
    const uint64_t st = x->nb[s.n], ne = x->ne[s.n];
    const uint64_t inner = ov_end(&s) - s.off; /* bytes of one slice */
    /* slices i with off + i*st < y1 and off + i*st + inner > y0 */
    uint64_t lo = 0, hi = (y1 - 1 - x->off) / st + 1; /* y1 > x->off: the ranges meet */
    if (y0 >= x->off + inner)
        lo = (y0 - x->off - inner) / st + 1;
    if (hi > ne)
        hi = ne;
    for (uint64_t i = lo; i < hi; i++) {
        s.off = x->off + i * st;
        int r = ov_share(&s, y, budget);
        if (r != 0)
            return r;
    }
    return 0;
}

bool pe_tensors_share_elements(const posenc_tensor *a, const posenc_tensor *b)
{
    if (!pe_tensors_overlap(a, b))
        return false;
    struct ov_view va, vb;
    ov_make(a, &va);
    ov_make(b, &vb);
    int64_t budget = (int64_t)1 << 20; /* recursion steps; ~10 ms at worst */
    return ov_share(&va, &vb, &budget) != 0;
}

bool pe_tensors_identical(const posenc_tensor *a, const posenc_tensor *b)
{
    if (a->buffer != b->buffer || a->offset != b->offset || a->dtype != b->dtype)
        return false;
    for (int k = 0; k < 4; k++)
        if (a->ne[k] != b->ne[k] || (a->ne[k] > 1 && a->nb[k] != b->nb[k]))
            return false;
    return true;
}

bool pe_same_shape(const posenc_tensor *a, const posenc_tensor *b)
{
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] &&
           a->ne[3] == b->ne[3];
}
