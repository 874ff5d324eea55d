/*
 * backend_cpu.c - the CPU backend: the reference loops, and the dispatch to the fast path.
 *
 * The reference: plain loops over all four dimensions through the strides; angles and
 * sin/cos in double, one rounding to the storage type at the end. Every other backend is
 * tested against it (a context created with POSENC_CONTEXT_CPU_REFERENCE runs only these
 * loops), so it stays obvious rather than fast.
 *
 * Without that flag the context also owns a struct pe_cpu_fast (src/cpu/cpu_pool.c: a
 * thread pool; cpu_fast.c and cpu_fast_sincos.c: vectorisable row loops) and the ops
 * that have a fast version (rope, sinusoidal, learned, alibi, copy; attention's one pass
 * in cpu_attn.c) go there; the others run the reference loops.
 */
#include "backend.h"
#include "cpu_fast.h"
#include "posenc_config.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest buffer: malloc refuses more than PTRDIFF_MAX bytes; a multiple of the 64-byte
 * alignment, so rounding it up cannot wrap. */
#define PE_CPU_MAX_BUFFER ((size_t)PTRDIFF_MAX & ~(size_t)63)

struct pe_cpu_backend {
    struct pe_backend base;
    struct pe_cpu_fast *fast; /* NULL: reference loops only */
    /* Host scratch of the reference loops (RoPE cos/sin, a softmax row), grown only: the
     * launches of an op cut into several, and the query blocks of posenc_attention, come
     * largest first, so only the first one allocates -- before anything is written. */
    double *scratch;
    size_t scratch_cap;
};

static struct pe_cpu_fast *fast_of(struct pe_backend *be)
{
    return ((struct pe_cpu_backend *)be)->fast;
}
_Static_assert(offsetof(struct pe_cpu_backend, base) == 0, "base must be first");

/* At least n doubles of the backend's scratch (see struct pe_cpu_backend). */
static double *cpu_scratch(struct pe_backend *be, size_t n, const char *what)
{
    struct pe_cpu_backend *cpu = (struct pe_cpu_backend *)be;
    if (n == 0)
        n = 1;
    if (n > cpu->scratch_cap) {
        double *p = malloc(n * sizeof(double));
        if (!p) {
            pe_error(be->ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for %zu doubles (%s)",
                     n, what);
            return NULL;
        }
        free(cpu->scratch);
        cpu->scratch = p;
        cpu->scratch_cap = n;
    }
    return cpu->scratch;
}

/* ---- element access ------------------------------------------------------------------ */

static double load(const struct pe_view *v, int64_t idx)
{
    const unsigned char *base = v->mem;
    switch (v->dtype) {
    case POSENC_DTYPE_F32: {
        float f;
        memcpy(&f, base + (size_t)idx * 4, 4);
        return f;
    }
    case POSENC_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, base + (size_t)idx * 2, 2);
        return pe_f16_to_double(h);
    }
    case POSENC_DTYPE_I32: {
        int32_t i;
        memcpy(&i, base + (size_t)idx * 4, 4);
        return i;
    }
    case POSENC_DTYPE_I64: {
        int64_t i;
        memcpy(&i, base + (size_t)idx * 8, 8);
        return (double)i;
    }
    }
    return 0.0;
}

static void store(const struct pe_view *v, int64_t idx, double value)
{
    unsigned char *base = v->mem;
    if (v->dtype == POSENC_DTYPE_F32) {
        float f = (float)value;
        memcpy(base + (size_t)idx * 4, &f, 4);
    } else if (v->dtype == POSENC_DTYPE_I32) {
        int32_t i = (int32_t)value; /* copy only: the value came from an int32 */
        memcpy(base + (size_t)idx * 4, &i, 4);
    } else {
        uint16_t h = pe_f16_from_double(value);
        memcpy(base + (size_t)idx * 2, &h, 2);
    }
}

static int64_t elem(const struct pe_view *v, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return v->offset + i0 * v->st[0] + i1 * v->st[1] + i2 * v->st[2] + i3 * v->st[3];
}

/* ---- ops ------------------------------------------------------------------------------ */

/* dst = src converted, one rounding (f32 -> f16 through double is exact then rounded once). */
static posenc_status cpu_copy(struct pe_backend *be, const struct pe_copy_op *op)
{
    if (fast_of(be))
        return pe_cpu_fast_copy(fast_of(be), op);
    const struct pe_view *s = &op->src, *d = &op->dst;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < d->ne[0]; i0++)
                    store(d, elem(d, i0, i1, i2, i3), load(s, elem(s, i0, i1, i2, i3)));
    return POSENC_OK;
}

static posenc_status cpu_sinusoidal(struct pe_backend *be, const struct pe_sinusoidal_op *op)
{
    if (fast_of(be))
        return pe_cpu_fast_sinusoidal(fast_of(be), op);
    const struct pe_view *d = &op->dst;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++) {
                double p = load(&op->pos, op->pos.offset + i1 * op->pos.st[0] +
                                              i2 * op->pos.st[1] + i3 * op->pos.st[2]);
                for (int64_t i = 0; i < op->half; i++) {
                    double angle = p * op->freq[i];
                    int64_t is, ic; /* i0 of the sin and the cos value */
                    switch (op->layout) {
                    case POSENC_SIN_INTERLEAVED: is = 2 * i; ic = 2 * i + 1; break;
                    case POSENC_SIN_HALF_SPLIT: is = i; ic = op->half + i; break;
                    default: ic = i; is = op->half + i; break;
                    }
                    double vs = sin(angle), vc = cos(angle);
                    if (op->x.mem) {
                        vs += load(&op->x, elem(&op->x, is, i1, i2, i3)) * op->x_scale;
                        vc += load(&op->x, elem(&op->x, ic, i1, i2, i3)) * op->x_scale;
                    }
                    store(d, elem(d, is, i1, i2, i3), vs);
                    store(d, elem(d, ic, i1, i2, i3), vc);
                }
            }
    return POSENC_OK;
}

/* Rotate one tensor (x -> dst) with the per-(token, pair) cos/sin in cs[2*j], cs[2*j+1]. */
static void cpu_rope_tensor(const struct pe_rope_op *op, const struct pe_view *x,
                            const struct pe_view *d, int64_t i2, int64_t d2, int64_t i3,
                            const double *cs)
{
    int64_t lo = op->n_offs, hi = op->n_offs + 2 * op->n_pairs;
    for (int64_t i1 = 0; i1 < x->ne[1]; i1++) {
        for (int64_t j = 0; j < op->n_pairs; j++) {
            int64_t a = op->pairing == 0 ? lo + 2 * j : lo + j;
            int64_t b = op->pairing == 0 ? a + 1 : a + op->n_pairs;
            double xa = load(x, elem(x, a, i1, i2, i3)), xb = load(x, elem(x, b, i1, i2, i3));
            double c = cs[2 * j], s = cs[2 * j + 1];
            store(d, elem(d, a, i1, d2, i3), xa * c - xb * s);
            store(d, elem(d, b, i1, d2, i3), xa * s + xb * c);
        }
        for (int64_t i0 = 0; i0 < x->ne[0]; i0++)
            if (i0 < lo || i0 >= hi)
                store(d, elem(d, i0, i1, d2, i3), load(x, elem(x, i0, i1, i2, i3)));
    }
}

static double pos_at(const struct pe_view *p, int64_t t, int64_t stream, int64_t batch)
{
    return load(p, p->offset + t * p->st[0] + stream * p->st[1] + batch * p->st[2]);
}

/* The row index of element idx of an i32 / i64 view, or -1 when it is outside [0, n_rows)
 * (posenc_set_rows, posenc_rope_set_rows: such a row is skipped). */
static int64_t row_index(const struct pe_view *r, int64_t idx, int64_t n_rows)
{
    int64_t v;
    if (r->dtype == POSENC_DTYPE_I64) {
        memcpy(&v, (const unsigned char *)r->mem + (size_t)idx * 8, 8);
    } else {
        int32_t w;
        memcpy(&w, (const unsigned char *)r->mem + (size_t)idx * 4, 4);
        v = w;
    }
    return v >= 0 && v < n_rows ? v : -1;
}

static posenc_status cpu_rope(struct pe_backend *be, const struct pe_rope_op *op)
{
    if (fast_of(be))
        return pe_cpu_fast_rope(fast_of(be), op);
    double *cs = cpu_scratch(be, 2 * (size_t)op->n_pairs, "cos/sin");
    if (!cs)
        return POSENC_ERR_OUT_OF_MEMORY;
    for (int64_t i3 = 0; i3 < op->x.ne[3]; i3++)
        for (int64_t i2 = 0; i2 < op->x.ne[2]; i2++) {
            /* rope_set_rows: the destination token (an invalid index skips the token) */
            int64_t d2 = i2;
            if (op->rows.mem) {
                d2 = row_index(&op->rows, op->rows.offset + i2 * op->rows.st[0] +
                                              i3 * op->rows.st[1], op->n_rows);
                if (d2 < 0)
                    continue;
            }
            /* cos/sin once per (token, pair), in double, shared by every head */
            for (int64_t j = 0; j < op->n_pairs; j++) {
                double angle = op->sign * pos_at(&op->pos, i2, op->stream[j], i3) * op->freq[j];
                if (op->pos_from.mem)
                    angle -= pos_at(&op->pos_from, i2, op->stream_from[j], i3) * op->freq_from[j];
                cs[2 * j] = cos(angle) * op->mscale;
                cs[2 * j + 1] = sin(angle) * op->mscale;
            }
            cpu_rope_tensor(op, &op->x, &op->dst, i2, d2, i3, cs);
            if (op->x2.mem)
                cpu_rope_tensor(op, &op->x2, &op->dst2, i2, i2, i3, cs);
        }
    return POSENC_OK;
}

/* dst = x + table[pos]: the sum in double, one rounding. */
static posenc_status cpu_learned(struct pe_backend *be, const struct pe_learned_op *op)
{
    if (fast_of(be))
        return pe_cpu_fast_learned(fast_of(be), op);
    const struct pe_view *d = &op->dst;
    for (int64_t b = 0; b < d->ne[2]; b++)
        for (int64_t t = 0; t < d->ne[1]; t++) {
            int64_t row = (int64_t)load(&op->pos, op->pos.offset + t * op->pos.st[0] +
                                                      b * op->pos.st[1]);
            for (int64_t i0 = 0; i0 < d->ne[0]; i0++) {
                double v = load(&op->table, elem(&op->table, i0, row, 0, 0));
                if (op->x.mem)
                    v += load(&op->x, elem(&op->x, i0, t, b, 0));
                store(d, elem(d, i0, t, b, 0), v);
            }
        }
    return POSENC_OK;
}

/* dtable[row] += the tokens of the row, summed in double in segment order, one rounding. */
static posenc_status cpu_learned_backward(struct pe_backend *be,
                                          const struct pe_learned_bwd_op *op)
{
    (void)be;
    const struct pe_view *dt = &op->dtable;
    for (int64_t s = 0; s < op->n_segments; s++) {
        int64_t row = op->seg_row[s];
        for (int64_t i0 = 0; i0 < dt->ne[0]; i0++) {
            double acc = 0.0;
            for (int64_t k = op->seg_start[s]; k < op->seg_start[s + 1]; k++) {
                int64_t e = op->entries[k];
                acc += load(&op->dy, elem(&op->dy, i0, e % op->n_tokens, e / op->n_tokens, 0));
            }
            int64_t at = elem(dt, i0, row, 0, 0);
            store(dt, at, load(dt, at) + acc);
        }
    }
    return POSENC_OK;
}

/* dst cell (r, c) = sum over the 4x4 taps of wy*wx*src, in double; the cls row copied. */
static posenc_status cpu_resize_2d(struct pe_backend *be, const struct pe_resize_op *op)
{
    (void)be;
    const int64_t cls = op->cls, d = op->dst.ne[0];
    if (cls)
        for (int64_t i0 = 0; i0 < d; i0++)
            store(&op->dst, elem(&op->dst, i0, 0, 0, 0),
                  load(&op->src, elem(&op->src, i0, 0, 0, 0)));
    for (int64_t r = 0; r < op->dst_h; r++)
        for (int64_t c = 0; c < op->dst_w; c++)
            for (int64_t i0 = 0; i0 < d; i0++) {
                double acc = 0.0;
                for (int a = 0; a < 4; a++)
                    for (int b = 0; b < 4; b++) {
                        int64_t row = cls + (int64_t)op->iy[4 * r + a] * op->src_w +
                                      op->ix[4 * c + b];
                        acc += op->wy[4 * r + a] * op->wx[4 * c + b] *
                               load(&op->src, elem(&op->src, i0, row, 0, 0));
                    }
                store(&op->dst, elem(&op->dst, i0, cls + r * op->dst_w + c, 0, 0), acc);
            }
    return POSENC_OK;
}

/* dst = logits + table[bucket(k_pos - q_pos), h], in double, one rounding. */
static posenc_status cpu_relbias(struct pe_backend *be, const struct pe_relbias_op *op)
{
    if (fast_of(be))
        return pe_cpu_fast_relbias(fast_of(be), op);
    const struct pe_view *d = &op->dst;
    for (int64_t b = 0; b < d->ne[3]; b++)
        for (int64_t h = 0; h < d->ne[2]; h++)
            for (int64_t q = 0; q < d->ne[1]; q++)
                for (int64_t k = 0; k < d->ne[0]; k++) {
                    int64_t rel = (k + op->k_offset) - (q + op->q_offset);
                    int64_t u = op->bucket[rel - op->rel_min];
                    double v = load(&op->table, elem(&op->table, u, h, 0, 0));
                    if (op->logits.mem)
                        v += load(&op->logits, elem(&op->logits, k, q, h, b));
                    store(d, elem(d, k, q, h, b), v);
                }
    return POSENC_OK;
}

/* dtable[u, h] += every dlogits element of bucket u, summed in double in the op's order
 * (rel ascending, then b, then q), one rounding. */
static posenc_status cpu_relbias_backward(struct pe_backend *be,
                                          const struct pe_relbias_bwd_op *op)
{
    (void)be;
    const struct pe_view *g = &op->dlogits, *dt = &op->dtable;
    const int64_t K = g->ne[0], Q = g->ne[1];
    for (int64_t h = 0; h < dt->ne[1]; h++)
        for (int64_t u = 0; u < op->n_buckets; u++) {
            double acc = 0.0;
            for (int64_t i = op->seg_start[u]; i < op->seg_start[u + 1]; i++) {
                int64_t rel = op->rels[i] + op->rel_min;
                for (int64_t b = 0; b < g->ne[3]; b++)
                    for (int64_t q = 0; q < Q; q++) {
                        int64_t k = q + op->q_offset + rel - op->k_offset;
                        if (k >= 0 && k < K)
                            acc += load(g, elem(g, k, q, h, b));
                    }
            }
            int64_t at = elem(dt, u, h, 0, 0);
            store(dt, at, load(dt, at) + acc);
        }
    return POSENC_OK;
}

/* dst = logits - slope[h] * dist (dist = q_pos - k_pos, or |.| symmetric), in double,
 * one rounding; -inf where causal masks. */
static posenc_status cpu_alibi(struct pe_backend *be, const struct pe_alibi_op *op)
{
    if (fast_of(be))
        return pe_cpu_fast_alibi(fast_of(be), op);
    const struct pe_view *d = &op->dst;
    for (int64_t b = 0; b < d->ne[3]; b++)
        for (int64_t h = 0; h < d->ne[2]; h++)
            for (int64_t q = 0; q < d->ne[1]; q++)
                for (int64_t k = 0; k < d->ne[0]; k++) {
                    int64_t qp = q + op->q_offset, kp = k + op->k_offset;
                    double v;
                    if (op->causal && kp > qp) {
                        v = -INFINITY;
                    } else {
                        int64_t dist = qp - kp;
                        if (op->symmetric && dist < 0)
                            dist = -dist;
                        v = -op->slopes[h] * (double)dist;
                        if (op->logits.mem)
                            v += load(&op->logits, elem(&op->logits, k, q, h, b));
                    }
                    store(d, elem(d, k, q, h, b), v);
                }
    return POSENC_OK;
}

/* ---- softmax (posenc_softmax, ggml's GGML_OP_SOFT_MAX) ---------------------------------- */

/* Each row in double: v_k = scale*x_k + slope*mask_k, m = max(max v, sink), exp, sum, one
 * rounding per output. The row is staged first, so dst may be x itself. A row with
 * m = -inf (all masked, no finite sink) is NaN, as ggml's exp(-inf - -inf). */
static posenc_status cpu_softmax(struct pe_backend *be, const struct pe_softmax_op *op)
{
    if (fast_of(be))
        return pe_cpu_fast_softmax(fast_of(be), op);
    const struct pe_view *x = &op->x, *d = &op->dst, *mk = &op->mask;
    const int64_t n = x->ne[0];
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!v)
        return pe_error(be->ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for a row of %lld "
                        "values", (long long)n);
    for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
            const int64_t h = op->h_off + i2, b = op->b_off + i3;
            const double slope = op->slopes ? op->slopes[h] : 1.0;
            const bool has_sink = op->sinks.mem != NULL;
            const double sink = has_sink ? load(&op->sinks, op->sinks.offset +
                                                                h * op->sinks.st[0])
                                         : -INFINITY;
            for (int64_t i1 = 0; i1 < x->ne[1]; i1++) {
                double m = sink;
                for (int64_t k = 0; k < n; k++) {
                    double t = op->scale * load(x, elem(x, k, i1, i2, i3));
                    if (mk->mem)
                        t += slope * load(mk, elem(mk, k, i1, h % mk->ne[2], b % mk->ne[3]));
                    v[k] = t;
                    if (t > m || isnan(t))
                        m = t;
                }
                double sum = has_sink ? exp(sink - m) : 0.0;
                for (int64_t k = 0; k < n; k++) {
                    v[k] = exp(v[k] - m); /* m = -inf: NaN, as ggml */
                    sum += v[k];
                }
                for (int64_t k = 0; k < n; k++)
                    store(d, elem(d, k, i1, i2, i3), m == -INFINITY ? NAN : v[k] / sum);
            }
        }
    free(v);
    return POSENC_OK;
}

/* ---- attention (the three steps of posenc_attention, internal.h) ---------------------- */

/* logits = scale * Q.K over the head dim: the dot product in double, scaled in double,
 * one rounding to f32. */
static posenc_status cpu_attn_scores(struct pe_backend *be, const struct pe_attn_scores_op *op)
{
    (void)be;
    const struct pe_view *q = &op->q, *k = &op->k, *l = &op->logits;
    const int64_t D = q->ne[0];
    for (int64_t b = 0; b < l->ne[3]; b++)
        for (int64_t h = 0; h < l->ne[2]; h++)
            for (int64_t iq = 0; iq < l->ne[1]; iq++)
                for (int64_t ik = 0; ik < l->ne[0]; ik++) {
                    double acc = 0.0;
                    for (int64_t i = 0; i < D; i++)
                        acc += load(q, elem(q, i, h, iq, b)) *
                               load(k, elem(k, i, h / op->group, ik, b));
                    store(l, elem(l, ik, iq, h, b), op->scale * acc);
                }
    return POSENC_OK;
}

/* The softmax of each row (q, h, b), max-subtracted, in double: masked keys (causal, or a
 * -inf mask / logit) get 0, and a row with every key masked is all zeros. */
static posenc_status cpu_attn_softmax(struct pe_backend *be, const struct pe_attn_softmax_op *op)
{
    const struct pe_view *l = &op->logits;
    const int64_t K = l->ne[0];
    double *x = cpu_scratch(be, (size_t)K, "a row of logits");
    if (!x)
        return POSENC_ERR_OUT_OF_MEMORY;
    for (int64_t b = 0; b < l->ne[3]; b++)
        for (int64_t h = 0; h < l->ne[2]; h++)
            for (int64_t iq = 0; iq < l->ne[1]; iq++) {
                double m = -INFINITY;
                for (int64_t ik = 0; ik < K; ik++) {
                    double v = load(l, elem(l, ik, iq, h, b));
                    if (op->mask.mem)
                        v += load(&op->mask, elem(&op->mask, ik, iq, h, b));
                    if (op->causal && ik + op->k_offset > iq + op->q_offset)
                        v = -INFINITY;
                    x[ik] = v;
                    if (v > m)
                        m = v;
                }
                double sum = 0.0;
                if (m != -INFINITY)
                    for (int64_t ik = 0; ik < K; ik++) {
                        x[ik] = exp(x[ik] - m); /* exp(-inf) = 0 */
                        sum += x[ik];
                    }
                for (int64_t ik = 0; ik < K; ik++) {
                    double pk = m == -INFINITY ? 0.0 : x[ik] / sum;
                    store(l, elem(l, ik, iq, h, b), pk);
                    if (op->weights.mem)
                        store(&op->weights, elem(&op->weights, ik, iq, h, b), pk);
                }
            }
    return POSENC_OK;
}

/* dst = P.V over the keys, in double, one rounding. */
static posenc_status cpu_attn_output(struct pe_backend *be, const struct pe_attn_output_op *op)
{
    (void)be;
    const struct pe_view *p = &op->p, *v = &op->v, *d = &op->dst;
    const int64_t K = p->ne[0];
    for (int64_t b = 0; b < d->ne[3]; b++)
        for (int64_t iq = 0; iq < d->ne[2]; iq++)
            for (int64_t h = 0; h < d->ne[1]; h++)
                for (int64_t i = 0; i < d->ne[0]; i++) {
                    double acc = 0.0;
                    for (int64_t ik = 0; ik < K; ik++)
                        acc += load(p, elem(p, ik, iq, h, b)) *
                               load(v, elem(v, i, h / op->group, ik, b));
                    store(d, elem(d, i, h, iq, b), acc);
                }
    return POSENC_OK;
}

/* The fast path rotates k itself (pe_attn_fused_op.has_krot); the reference loops take K'
 * made by the reference posenc_rope, in double. */
static bool cpu_attn_krot(struct pe_backend *be, int64_t D, int64_t Dv, int64_t rows)
{
    (void)D;
    (void)Dv;
    (void)rows;
    return fast_of(be) != NULL;
}

/* posenc_attention's one pass (pe_attn_fused_op): the fast path's f32 online softmax
 * (cpu_attn.c), or, in a reference context, the same math row by row in double (logits
 * of the row, max, exp, sums; one rounding per output), which is what the extras
 * (softcap, mask_slopes, sinks) are computed with there: the multi-pass path has none. */
static posenc_status cpu_attn_fused(struct pe_backend *be, const struct pe_attn_fused_op *op)
{
    if (fast_of(be))
        return pe_cpu_fast_attn_fused(fast_of(be), op);
    const struct pe_view *q = &op->q, *k = &op->k, *v = &op->v, *d = &op->dst, *mk = &op->mask;
    const int64_t D = q->ne[0], Tk = k->ne[2], Dv = v->ne[0];
    double *x = cpu_scratch(be, (size_t)(Tk + Dv), "a row of logits");
    if (!x)
        return POSENC_ERR_OUT_OF_MEMORY;
    double *o = x + Tk;
    for (int64_t b = 0; b < d->ne[3]; b++)
        for (int64_t iq = 0; iq < d->ne[2]; iq++)
            for (int64_t h = 0; h < d->ne[1]; h++) {
                const int64_t kvh = h / op->group, qp = iq + op->q_offset;
                double m = op->sinks.mem ? load(&op->sinks, op->sinks.offset +
                                                                h * op->sinks.st[0])
                                         : -INFINITY;
                const double sink = m;
                for (int64_t ik = 0; ik < Tk; ik++) {
                    double acc = 0.0;
                    for (int64_t i = 0; i < D; i++)
                        acc += load(q, elem(q, i, h, iq, b)) * load(k, elem(k, i, kvh, ik, b));
                    double s = op->scale * acc;
                    if (op->softcap > 0.0f)
                        s = op->softcap * tanh(s / op->softcap);
                    if (op->has_alibi) {
                        const struct pe_alibi_op *a = &op->alibi;
                        int64_t dist = (iq + a->q_offset) - (ik + a->k_offset);
                        if (a->causal && dist < 0)
                            s = -INFINITY;
                        if (a->symmetric && dist < 0)
                            dist = -dist;
                        s -= a->slopes[h] * (double)dist;
                    }
                    if (op->has_relbias) {
                        const struct pe_relbias_op *r = &op->relbias;
                        int64_t rel = (ik + r->k_offset) - (iq + r->q_offset);
                        s += load(&r->table, elem(&r->table, r->bucket[rel - r->rel_min], h, 0, 0));
                    }
                    if (mk->mem)
                        s += (op->mask_slopes ? op->mask_slopes[h] : 1.0) *
                             load(mk, elem(mk, ik, iq, h, b));
                    if (op->causal && ik + op->k_offset > qp)
                        s = -INFINITY;
                    x[ik] = s;
                    if (s > m)
                        m = s;
                }
                double sum = 0.0;
                for (int64_t i = 0; i < Dv; i++)
                    o[i] = 0.0;
                if (m != -INFINITY) {
                    if (op->sinks.mem)
                        sum = exp(sink - m);
                    for (int64_t ik = 0; ik < Tk; ik++) {
                        const double p = exp(x[ik] - m); /* exp(-inf) = 0 */
                        sum += p;
                        if (p != 0.0)
                            for (int64_t i = 0; i < Dv; i++)
                                o[i] += p * load(v, elem(v, i, kvh, ik, b));
                    }
                }
                for (int64_t i = 0; i < Dv; i++)
                    store(d, elem(d, i, h, iq, b), m == -INFINITY ? 0.0 : o[i] / sum);
            }
    return POSENC_OK;
}

/* ---- fill, set_rows -------------------------------------------------------------------- */

/* Every element gets the bits the front end converted (the same on every backend), plus
 * step i0 for a ramp (pe_fill_op). Both paths run this: a memset-like loop is already what the fast path would be. */
static posenc_status cpu_fill(struct pe_backend *be, const struct pe_fill_op *op)
{
    (void)be;
    const struct pe_view *d = &op->dst;
    const size_t es = posenc_dtype_size(d->dtype);
    unsigned char *base = d->mem;
    const uint16_t h = (uint16_t)op->bits;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++) {
                const int64_t row = elem(d, 0, i1, i2, i3);
                if (es == 4) {
                    for (int64_t i0 = 0; i0 < d->ne[0]; i0++) {
                        const uint32_t w = op->bits + op->step * (uint32_t)i0; /* mod 2^32 */
                        memcpy(base + (size_t)(row + i0 * d->st[0]) * 4, &w, 4);
                    }
                } else {
                    for (int64_t i0 = 0; i0 < d->ne[0]; i0++)
                        memcpy(base + (size_t)(row + i0 * d->st[0]) * 2, &h, 2);
                }
            }
    return POSENC_OK;
}

/* dst[:, rows[i1, j2, j3], i2, i3] = src[:, i1, i2, i3]: the same dtype copies the bits
 * (one memcpy per row when both rows are contiguous), f32 <-> f16 converts through double
 * with one rounding (internal.h). Both paths run this. */
static posenc_status cpu_set_rows(struct pe_backend *be, const struct pe_set_rows_op *op)
{
    (void)be;
    const struct pe_view *s = &op->src, *d = &op->dst, *r = &op->rows;
    const size_t es = posenc_dtype_size(s->dtype);
    const bool same = s->dtype == d->dtype;
    const bool rows_flat = same && s->st[0] == 1 && d->st[0] == 1;
    const int64_t e2 = r->ne[1], e3 = r->ne[2];
    for (int64_t i3 = 0; i3 < s->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < s->ne[2]; i2++) {
            const int64_t j2 = (i2 + op->base2) % e2, j3 = (i3 + op->base3) % e3;
            for (int64_t i1 = 0; i1 < s->ne[1]; i1++) {
                const int64_t row =
                    row_index(r, r->offset + i1 * r->st[0] + j2 * r->st[1] + j3 * r->st[2],
                              op->n_rows);
                if (row < 0)
                    continue; /* POSENC_ROWS_UNCHECKED: skipped */
                const int64_t si = elem(s, 0, i1, i2, i3), di = elem(d, 0, row, i2, i3);
                if (rows_flat) {
                    memcpy((unsigned char *)d->mem + (size_t)di * es,
                           (const unsigned char *)s->mem + (size_t)si * es,
                           (size_t)s->ne[0] * es);
                } else if (same) {
                    for (int64_t i0 = 0; i0 < s->ne[0]; i0++)
                        memcpy((unsigned char *)d->mem + (size_t)(di + i0 * d->st[0]) * es,
                               (const unsigned char *)s->mem + (size_t)(si + i0 * s->st[0]) * es,
                               es);
                } else {
                    for (int64_t i0 = 0; i0 < s->ne[0]; i0++)
                        store(d, di + i0 * d->st[0], load(s, si + i0 * s->st[0]));
                }
            }
        }
    return POSENC_OK;
}

/* ---- device, buffers ------------------------------------------------------------------ */

static posenc_status cpu_device_count(int32_t *out_count, char *reason, size_t reason_size)
{
    (void)reason;
    (void)reason_size;
    *out_count = 1;
    return POSENC_OK;
}

static posenc_status cpu_create(posenc_context *ctx, int32_t device, bool gpu_only,
                                struct pe_backend **out)
{
    if (gpu_only)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, "the CPU backend has no GPU device");
    if (device != 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "device = %d: the CPU backend has one device (0)", (int)device);
    struct pe_cpu_backend *cpu = calloc(1, sizeof(*cpu));
    if (!cpu)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for the CPU backend");
    cpu->base.vt = &pe_cpu_vtable;
    cpu->base.ctx = ctx;
    if (!(ctx->flags & POSENC_CONTEXT_CPU_REFERENCE)) {
        posenc_status st = pe_cpu_fast_create(ctx, ctx->n_threads, &cpu->fast);
        if (st != POSENC_OK) {
            free(cpu);
            return st;
        }
    }
    *out = &cpu->base;
    return POSENC_OK;
}

static void cpu_destroy(struct pe_backend *be)
{
    pe_cpu_fast_destroy(fast_of(be));
    free(((struct pe_cpu_backend *)be)->scratch);
    free(be);
}

static void cpu_get_info(const struct pe_backend *be, struct posenc_device_info *out)
{
    const struct pe_cpu_fast *fast = ((const struct pe_cpu_backend *)be)->fast;
    out->type = POSENC_DEVICE_CPU;
    if (fast)
        snprintf(out->device_name, sizeof(out->device_name), "host CPU (%d thread%s)",
                 pe_cpu_fast_threads(fast), pe_cpu_fast_threads(fast) == 1 ? "" : "s");
    else
        pe_strlcpy(out->device_name, "host CPU (reference loops)", sizeof(out->device_name));
    pe_strlcpy(out->vendor, "posenc", sizeof(out->vendor));
    pe_strlcpy(out->driver_version, POSENC_VERSION_STRING, sizeof(out->driver_version));
    pe_strlcpy(out->api_version, "C11", sizeof(out->api_version));
    out->f16_storage = 1;
    out->f16_native = 0;
    out->max_buffer_size = (uint64_t)PE_CPU_MAX_BUFFER;
    out->max_workgroup_size = 1;
    out->compute_units = fast ? (uint32_t)pe_cpu_fast_threads(fast) : 1;
}

static posenc_status cpu_finish(struct pe_backend *be)
{
    (void)be;
    return POSENC_OK;
}

/* posenc_context_flush: ops run inside their calls, nothing is ever queued. */
static posenc_status cpu_flush(struct pe_backend *be)
{
    (void)be;
    return POSENC_OK;
}

static posenc_status cpu_buffer_create(struct pe_backend *be, size_t size, void **out_mem)
{
    /* 64-byte aligned; from 2 MiB up in huge pages where the OS has them (pe_host_alloc) */
    if (size > PE_CPU_MAX_BUFFER)
        return pe_error(be->ctx, POSENC_ERR_UNSUPPORTED,
                        "buffer size %zu bytes exceeds the CPU backend's largest buffer "
                        "(%zu bytes, PTRDIFF_MAX)",
                        size, (size_t)PE_CPU_MAX_BUFFER);
    bool huge;
    void *p = pe_host_alloc(size, &huge);
    if (!p)
        return pe_error(be->ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory allocating a %zu-byte buffer", size);
    *out_mem = p;
    return POSENC_OK;
}

static void cpu_buffer_destroy(struct pe_backend *be, void *mem)
{
    (void)be;
    free(mem);
}

static posenc_status cpu_buffer_write(struct pe_backend *be, void *mem, size_t offset,
                                      const void *src, size_t size)
{
    (void)be;
    memcpy((unsigned char *)mem + offset, src, size);
    return POSENC_OK;
}

static posenc_status cpu_buffer_read(struct pe_backend *be, void *mem, size_t offset, void *dst,
                                     size_t size)
{
    (void)be;
    memcpy(dst, (const unsigned char *)mem + offset, size);
    return POSENC_OK;
}

/* posenc_buffer_wrap_host: the caller's memory is the buffer. Every op reads and writes
 * through the view's pointer with unaligned vector loads / stores (the streaming stores
 * check their own alignment), so only the elements need their natural alignment: 8 bytes,
 * the largest element (i64 row indices), makes every legal offset of every dtype aligned. */
static posenc_status cpu_host_alignment(struct pe_backend *be, size_t *out_alignment)
{
    (void)be;
    *out_alignment = 8;
    return POSENC_OK;
}

static posenc_status cpu_buffer_wrap_host(struct pe_backend *be, void *ptr, size_t size,
                                          void **out_mem)
{
    if (size > PE_CPU_MAX_BUFFER)
        return pe_error(be->ctx, POSENC_ERR_UNSUPPORTED,
                        "size = %zu bytes exceeds the CPU backend's largest buffer "
                        "(%zu bytes, PTRDIFF_MAX)",
                        size, (size_t)PE_CPU_MAX_BUFFER);
    *out_mem = ptr;
    return POSENC_OK;
}

/* Ops finish before they return: nothing uses the memory any more, and it is not ours. */
static void cpu_buffer_unwrap_host(struct pe_backend *be, void *mem)
{
    (void)be;
    (void)mem;
}

const struct pe_backend_vtable pe_cpu_vtable = {
    .kind = POSENC_BACKEND_CPU,
    .name = "cpu",
    .device_count = cpu_device_count,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .get_info = cpu_get_info,
    .finish = cpu_finish,
    .buffer_create = cpu_buffer_create,
    .buffer_destroy = cpu_buffer_destroy,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .sinusoidal = cpu_sinusoidal,
    .rope = cpu_rope,
    .learned = cpu_learned,
    .learned_backward = cpu_learned_backward,
    .resize_2d = cpu_resize_2d,
    .relbias = cpu_relbias,
    .relbias_backward = cpu_relbias_backward,
    .alibi = cpu_alibi,
    .copy = cpu_copy,
    .softmax = cpu_softmax,
    .attn_scores = cpu_attn_scores,
    .attn_softmax = cpu_attn_softmax,
    .attn_output = cpu_attn_output,
    .fill = cpu_fill,
    .set_rows = cpu_set_rows,
    .host_alignment = cpu_host_alignment,
    .buffer_wrap_host = cpu_buffer_wrap_host,
    .buffer_unwrap_host = cpu_buffer_unwrap_host,
    .flush = cpu_flush,
    .attn_fused = cpu_attn_fused,
    .attn_krot = cpu_attn_krot,
};
