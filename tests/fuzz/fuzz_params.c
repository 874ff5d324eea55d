/*
 * fuzz_params.c - a libFuzzer target over posenc's argument validation and host-side tables
 * (built with -Dfuzz=true and CC=clang, see tests/fuzz/meson.build; run by scripts/test).
 *
 * The input is decoded, byte by byte, into one call: which op, its shape (dims 0..7 or an
 * extreme value), every tensor descriptor (buffer, dtype, ne, nb, offset, aliasing another
 * argument, NULL), every params field (0 = default, small values, NaN / inf / negatives,
 * unknown enum values, table pointers), and the first bytes of the position / table data.
 * A byte stream of zeros decodes to a valid call on 4-sized dims with default params, so
 * small seeds reach the kernels and the mutator works outward from there.
 *
 * Calls: posenc_sinusoidal, posenc_rope / _qk / _rerotate, posenc_learned / _backward,
 * posenc_sincos_2d, posenc_resize_2d, posenc_relbias / _backward, posenc_alibi, posenc_copy
 * on a CPU context (the reference loops, or the threaded fast path under a 4 KiB binding
 * limit so that larger ops are cut into several launches; chosen by the input),
 * posenc_attention (every encoding, mask, explicit positions, GQA, weights) on a CPU
 * context whose 1 KiB binding limit runs its queries in blocks (the reference loops or
 * the fast path, chosen by the input; the all-zero input runs 80 queries as 2 blocks),
 * with small real buffers; and the host helpers posenc_rope_freqs, posenc_rope_params_from_
 * ggml, posenc_sinusoidal_freqs, posenc_relbias_bucket, posenc_alibi_slopes,
 * posenc_tensor_contiguous / _nelements.
 *
 * Oracles, besides ASan / UBSan / LeakSanitizer: the status is a known posenc_status; a
 * failing call on a context leaves a non-empty message; a failing call leaves every buffer
 * byte as it was. posenc_attention is also run differentially: the same call (same bytes
 * in buffers of its own) on a context of the same kind without a binding limit, where it
 * runs unblocked, is the oracle. The blocked call must return the oracle's status, or
 * UNSUPPORTED for a view over the binding limit (the only thing a limit adds), and when it
 * succeeds every byte of every buffer must equal the oracle's: tolerance 0, because the
 * blocks change no arithmetic -- each logit, softmax row and output element is computed by
 * the same code from the same inputs whatever block holds its query (the CPU attention
 * steps are per-row double loops; the input encodings run once over whole Q / K / V
 * before the blocks, and the fast path's row loops do not depend on how a limit cuts an op
 * into launches; ALiBi / relative biases are made once for the caller's whole range).
 * Calls without weights run that comparison with POSENC_ATTENTION_UNFUSED on both sides
 * (the one-pass path rounds differently, and a binding limit sends a call back to the
 * multi-pass path); the one-pass call itself runs on the unlimited context and must
 * return the oracle's status.
 *
 * Work is bounded: a call whose tensors would pass validation with more than 2^14 elements
 * (stride-0 broadcasts, overlapping input views) is skipped, as are host helpers asked for
 * tables larger than the arrays given to them (a contract the caller owns).
 */
#include "posenc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUF 4
#define BUF_BYTES 32768
#define TAB_N 4096
#define WORK_LIMIT (1 << 14)
#define DIM_LIMIT 4096

static posenc_context *ctx_ref, *ctx_fast, *ctx_other;
/* attention: blocked under a 1 KiB binding limit (reference, fast), and the oracles of the
 * same kinds without a limit, with buffers of their own (obufs[0]: ctx_ref's, [1]:
 * ctx_fast_nolim's) */
static posenc_context *ctx_att[2], *ctx_fast_nolim;
static posenc_buffer *obufs[2][NBUF];
static posenc_buffer *bufs[NBUF], *foreign;
static unsigned char *pattern[NBUF], *readback;
static float tab_f[4][TAB_N];
static uint8_t tab_u8[TAB_N];

/* ---- the byte reader --------------------------------------------------------------------- */

struct rd {
    const uint8_t *p;
    size_t n;
};

static uint8_t u8(struct rd *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

static uint32_t u32(struct rd *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)u8(r) << (8 * i);
    return v;
}

static uint64_t u64(struct rd *r)
{
    return (uint64_t)u32(r) | ((uint64_t)u32(r) << 32);
}

static const int64_t big_ints[16] = {-1,
                                     -2,
                                     8,
                                     9,
                                     16,
                                     65,
                                     1 << 20,
                                     (int64_t)1 << 24,
                                     INT32_MAX,
                                     (int64_t)INT32_MAX + 1,
                                     (int64_t)1 << 40,
                                     (int64_t)1 << 62,
                                     INT64_MAX,
                                     INT64_MIN,
                                     -((int64_t)1 << 40),
                                     3};

/* A dim: mostly 0..7 (0 decodes to 4), sometimes an extreme value. */
static int64_t dim(struct rd *r)
{
    uint8_t v = u8(r);
    if (v < 0xF0)
        return (v + 4) % 8;
    return big_ints[v - 0xF0];
}

/* A count that is 1 .. 8 mostly (0 decodes to 1), sometimes an extreme value. */
static int64_t small1(struct rd *r)
{
    uint8_t v = u8(r);
    if (v < 0xF0)
        return 1 + v % 8;
    return big_ints[v - 0xF0];
}

/* Saturating arithmetic for derived shapes (the fuzzer itself must not overflow). */
static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX) : r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b < 0 ? INT64_MIN : INT64_MAX) : r;
}

/* An int field: 0 (the default) for 0, small values, extremes, or raw. */
static int32_t i32s(struct rd *r)
{
    uint8_t v = u8(r);
    if (v < 0x80)
        return v % 16;
    if (v < 0xC0)
        return -(int32_t)(v % 8) - 1;
    if (v < 0xF0) {
        static const int32_t e[] = {32, 64, 128, 4096, 8192, 1 << 24, (1 << 24) + 1, INT32_MAX,
                                    INT32_MIN, 1 << 30, 100, 1000, 24, 40, 2, 99};
        return e[v % 16];
    }
    return (int32_t)u32(r);
}

/* A float field: 0 (the default) for 0, ordinary values, or the special ones. */
static float f32s(struct rd *r)
{
    uint8_t v = u8(r);
    static const float e[32] = {0.0f,  1.0f,     0.5f,      2.0f,     4.0f,   8.0f,   10000.0f,
                                32.0f, 1e6f,     -1.0f,     -0.0f,    0.25f,  1.5f,   3.0f,
                                0.1f,  500000.f, 1e-45f,    1e-30f,   1e30f,  3.4e38f, 65504.f,
                                16.0f, 0.001f,   1.0000001f, 0.9999999f, 100.f, 7.0f, 64.0f,
                                128.0f, 2048.0f, 1e-7f,     -8.0f};
    if (v < 0xE0)
        return e[v % 32];
    switch (v & 7) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return -NAN;
    default: {
        uint32_t b = u32(r);
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    }
}

/* An enum / flag field: 0 .. n-1, or any int. */
static int32_t enumv(struct rd *r, int n)
{
    uint8_t v = u8(r);
    return v < 0xF0 ? v % n : i32s(r);
}

/* ---- tensors ------------------------------------------------------------------------------- */

struct targ {
    posenc_tensor t;
    int present;
};

static posenc_tensor contiguous(posenc_buffer *b, size_t off, posenc_dtype dt, const int64_t ne[4])
{
    return posenc_tensor_contiguous(b, off, dt, ne[0], ne[1], ne[2], ne[3]);
}

/*
 * Decode one tensor argument shaped like `ne` (dtype `dt`, default buffer `defbuf`, default
 * byte offset `defoff`), possibly perturbed: other dims, dtype, strides, offset, buffer,
 * NULL, or an alias of an earlier argument.
 */
static void tensor_arg(struct rd *r, struct targ *out, const int64_t ne_in[4], posenc_dtype dt,
                       int defbuf, size_t defoff, const struct targ *prev, int n_prev)
{
    uint8_t c = u8(r);
    int64_t ne[4] = {ne_in[0], ne_in[1], ne_in[2], ne_in[3]};
    out->present = !(c & 0x40);
    if (c & 0x04) { /* perturb one dim */
        uint8_t k = u8(r) % 4;
        ne[k] = dim(r);
    }
    if (c & 0x08) { /* another dtype */
        uint8_t v = u8(r);
        dt = v < 0xF0 ? (posenc_dtype)(v % 3) : (posenc_dtype)(int32_t)u32(r);
    }
    posenc_buffer *b = bufs[defbuf];
    if (c & 0x20) {
        uint8_t v = u8(r) % 8;
        b = v < NBUF ? bufs[v] : v == 4 ? foreign : v == 5 ? NULL : bufs[defbuf];
    }
    size_t off = defoff;
    if (c & 0x10) {
        uint8_t v = u8(r);
        static const size_t e[8] = {1, 2, 3, BUF_BYTES, BUF_BYTES - 4, (size_t)-4, (size_t)-1,
                                    (size_t)1 << 40};
        off = v < 0xF8 ? (size_t)v * 4 : e[v & 7];
    }
    out->t = contiguous(b, off, dt, ne);
    switch (c & 3) {
    case 0: break;
    case 1: /* padded rows */
        for (int k = 1; k < 4; k++)
            out->t.nb[k] = sat_add(out->t.nb[k], sat_mul(k * 4, out->t.nb[0] ? out->t.nb[0] : 1));
        break;
    case 2: { /* dims 1 and 2 swapped in memory */
        int64_t t1 = out->t.nb[1];
        out->t.nb[1] = sat_mul(sat_mul(out->t.nb[0], ne[0] > 0 ? ne[0] : 1), ne[2] > 0 ? ne[2] : 1);
        out->t.nb[2] = t1;
        break;
    }
    case 3: /* raw strides */
        for (int k = 0; k < 4; k++) {
            uint8_t v = u8(r);
            out->t.nb[k] = v < 0xF0 ? ((int64_t)(int8_t)v) * 2 : big_ints[v - 0xF0];
        }
        break;
    }
    if ((c & 0x80) && n_prev > 0) { /* an alias of an earlier argument, shifted */
        const struct targ *src = &prev[u8(r) % n_prev];
        out->t = src->t;
        out->t.offset += (size_t)(u8(r) % 16) * 2;
        out->present = 1;
    }
}

/* Would this view pass posenc's descriptor checks (known dtype, non-negative ne / nb, in
 * its buffer)? Mirrors the checks in spirit; it may say "fits" for views posenc rejects
 * (then the call is merely skipped when large). */
static int could_pass(const posenc_tensor *t)
{
    if (!t->buffer)
        return 0;
    size_t es = posenc_dtype_size(t->dtype);
    if (!es)
        return 0;
    int empty = 0;
    for (int k = 0; k < 4; k++) {
        if (t->ne[k] < 0 || t->nb[k] < 0)
            return 0;
        if (t->ne[k] == 0)
            empty = 1;
    }
    if (empty)
        return 1;
    uint64_t end = (uint64_t)t->offset, step;
    if (__builtin_add_overflow(end, (uint64_t)es, &end))
        return 0;
    for (int k = 0; k < 4; k++)
        if (__builtin_mul_overflow((uint64_t)(t->ne[k] - 1), (uint64_t)t->nb[k], &step) ||
            __builtin_add_overflow(end, step, &end))
            return 0;
    return end <= posenc_buffer_size(t->buffer);
}

/* Too much work: an argument that may be accepted and is large. */
static int too_big(const struct targ *a, int n)
{
    for (int i = 0; i < n; i++) {
        if (!a[i].present || !could_pass(&a[i].t))
            continue;
        int64_t ne = posenc_tensor_nelements(&a[i].t);
        if (ne < 0 || ne > WORK_LIMIT)
            return 1;
        for (int k = 0; k < 4; k++)
            if (a[i].t.ne[k] > DIM_LIMIT)
                return 1;
    }
    return 0;
}

static const posenc_tensor *P(const struct targ *a)
{
    return a->present ? &a->t : NULL;
}

/* ---- params ------------------------------------------------------------------------------- */

static const float *ftab(struct rd *r)
{
    uint8_t v = u8(r);
    return v < 0x80 ? NULL : tab_f[v % 4];
}

static void reserved(struct rd *r, uint32_t *res, size_t n)
{
    if (u8(r) == 0xFF)
        res[u8(r) % n] = u32(r) | 1;
}

static void rope_params(struct rd *r, struct posenc_rope_params *p)
{
    memset(p, 0, sizeof(*p));
    p->mode = (posenc_rope_mode)(enumv(r, 5));
    p->n_dims = i32s(r);
    p->n_offs = i32s(r);
    p->freq_base = f32s(r);
    p->attn_factor = f32s(r);
    for (int i = 0; i < 4; i++)
        p->sections[i] = i32s(r);
    p->pair_stream = u8(r) >= 0xC0 ? tab_u8 : NULL;
    p->freq_factors = ftab(r);
    p->freqs = ftab(r);
    p->flags = (uint32_t)enumv(r, 2);
    struct posenc_rope_scaling *s = &p->scaling;
    uint8_t k = u8(r);
    s->kind = (posenc_rope_scaling_kind)(k < 0xF0 ? k % 8 : i32s(r));
    if (u8(r) & 1) { /* all fields, used or not */
        s->factor = f32s(r);
        s->original_ctx = i32s(r);
        s->seq_len = i32s(r);
        s->beta_fast = f32s(r);
        s->beta_slow = f32s(r);
        s->attention_factor = f32s(r);
        s->mscale = f32s(r);
        s->mscale_all_dim = f32s(r);
        s->ext_factor = f32s(r);
        s->low_freq_factor = f32s(r);
        s->high_freq_factor = f32s(r);
        s->short_factor = ftab(r);
        s->long_factor = ftab(r);
        s->flags = (uint32_t)enumv(r, 2);
    }
    reserved(r, p->reserved, 4);
}

/* ---- the calls ----------------------------------------------------------------------------- */

enum { OP_SIN, OP_ROPE, OP_ROPE_QK, OP_REROT, OP_LEARNED, OP_LEARNED_BWD, OP_SINCOS2D,
       OP_RESIZE, OP_RELBIAS, OP_RELBIAS_BWD, OP_ALIBI, OP_COPY, OP_SIN_FREQS, OP_ROPE_FREQS,
       OP_GGML, OP_BUCKET, OP_SLOPES, OP_CONTIG, OP_ATTENTION, OP_COUNT };

static void reset_buffers(struct rd *r)
{
    /* the positions / tables buffer starts with 64 bytes from the input (any int / float) */
    for (int i = 0; i < 64; i++)
        pattern[1][i] = u8(r);
    for (int i = 0; i < 8; i++)
        for (int t = 0; t < 4; t++)
            tab_f[t][i] = (u8(r) & 1) ? f32s(r) : 1.0f;
    for (int i = 0; i < 8; i++)
        tab_u8[i] = u8(r) % 5;
    for (int b = 0; b < NBUF; b++)
        posenc_buffer_write(bufs[b], 0, pattern[b], BUF_BYTES);
    posenc_buffer_write(foreign, 0, pattern[0], BUF_BYTES);
}

static void check_untouched(posenc_context *ctx, posenc_status st)
{
    if (st < POSENC_OK || st > POSENC_ERR_INTERNAL) {
        fprintf(stderr, "unknown status %d\n", (int)st);
        abort();
    }
    if (st == POSENC_ERR_INTERNAL) {
        fprintf(stderr, "internal error: %s\n", posenc_context_last_error(ctx));
        abort();
    }
    if (st == POSENC_OK)
        return;
    if (!posenc_context_last_error(ctx)[0]) {
        fprintf(stderr, "status %d with an empty message\n", (int)st);
        abort();
    }
    for (int b = 0; b < NBUF; b++) {
        posenc_buffer_read(bufs[b], 0, readback, BUF_BYTES);
        if (memcmp(readback, pattern[b], BUF_BYTES) != 0) {
            fprintf(stderr, "status %d (%s) but buffer %d was written\n", (int)st,
                    posenc_context_last_error(ctx), b);
            abort();
        }
    }
}

static void run_ctx_op(struct rd *r, int op, posenc_context *ctx)
{
    /* the shape: D (even by default), H, T, B, plus extra dims */
    int64_t D = sat_mul(2, dim(r)), H = dim(r), T = dim(r), B = dim(r), E = dim(r);
    struct targ a[6];
    memset(a, 0, sizeof(a));
    posenc_status st = POSENC_OK;
    const posenc_dtype F = POSENC_DTYPE_F32, I = POSENC_DTYPE_I32;
    switch (op) {
    case OP_SIN: {
        struct posenc_sinusoidal_params p = {0};
        p.base = f32s(r);
        p.x_scale = f32s(r);
        p.freq_shift = f32s(r);
        p.layout = (posenc_sin_layout)(enumv(r, 3));
        reserved(r, p.reserved, 4);
        const int64_t dne[4] = {D, T, B, 1}, pne[4] = {T, 1, 1, 1};
        tensor_arg(r, &a[0], dne, F, 2, 0, a, 0);
        tensor_arg(r, &a[1], pne, u8(r) & 1 ? F : I, 1, 0, a, 1);
        tensor_arg(r, &a[2], dne, F, 0, 0, a, 2);
        if (too_big(a, 3))
            return;
        st = posenc_sinusoidal(ctx, P(&a[2]), P(&a[1]), P(&a[0]), u8(r) == 0xFF ? NULL : &p);
        break;
    }
    case OP_ROPE:
    case OP_ROPE_QK:
    case OP_REROT: {
        struct posenc_rope_params p, p2;
        rope_params(r, &p);
        rope_params(r, &p2);
        const int64_t xne[4] = {D, H, T, B}, kne[4] = {D, E, T, B}, pne[4] = {T, 1 + u8(r) % 4, 1, 1};
        if (op == OP_ROPE) {
            tensor_arg(r, &a[0], xne, F, 0, 0, a, 0);
            tensor_arg(r, &a[1], pne, u8(r) & 1 ? F : I, 1, 0, a, 1);
            tensor_arg(r, &a[2], xne, F, 2, 0, a, 2);
            if (too_big(a, 3))
                return;
            st = posenc_rope(ctx, P(&a[0]), P(&a[1]), P(&a[2]), &p);
        } else if (op == OP_ROPE_QK) {
            tensor_arg(r, &a[0], xne, F, 0, 0, a, 0);
            tensor_arg(r, &a[1], kne, F, 0, BUF_BYTES / 2, a, 1);
            tensor_arg(r, &a[2], pne, I, 1, 0, a, 2);
            tensor_arg(r, &a[3], xne, F, 2, 0, a, 3);
            tensor_arg(r, &a[4], kne, F, 3, 0, a, 4);
            if (too_big(a, 5))
                return;
            st = posenc_rope_qk(ctx, P(&a[0]), P(&a[1]), P(&a[2]), P(&a[3]), P(&a[4]), &p);
        } else {
            tensor_arg(r, &a[0], xne, F, 0, 0, a, 0);
            tensor_arg(r, &a[1], pne, I, 1, 0, a, 1);
            tensor_arg(r, &a[2], pne, I, 1, 256, a, 2);
            tensor_arg(r, &a[3], xne, F, 2, 0, a, 3);
            if (too_big(a, 4))
                return;
            st = posenc_rope_rerotate(ctx, P(&a[0]), P(&a[1]), &p, P(&a[2]), &p2, P(&a[3]));
        }
        break;
    }
    case OP_LEARNED:
    case OP_LEARNED_BWD: {
        const int64_t tne[4] = {D, T, B, 1}, pne[4] = {T, u8(r) & 1 ? B : 1, 1, 1},
                      tab[4] = {D, sat_add(E, 1), 1, 1};
        tensor_arg(r, &a[0], tne, F, 0, 0, a, 0);
        tensor_arg(r, &a[1], pne, I, 1, 0, a, 1);
        tensor_arg(r, &a[2], tab, F, op == OP_LEARNED ? 3 : 2, 0, a, 2);
        if (op == OP_LEARNED)
            tensor_arg(r, &a[3], tne, F, 2, 0, a, 3);
        if (too_big(a, 4))
            return;
        if (op == OP_LEARNED)
            st = posenc_learned(ctx, P(&a[0]), P(&a[1]), P(&a[2]), P(&a[3]));
        else
            st = posenc_learned_backward(ctx, P(&a[0]), P(&a[1]), P(&a[2]));
        break;
    }
    case OP_SINCOS2D: {
        struct posenc_2d_params p = {0};
        p.base = f32s(r);
        p.grid_scale = f32s(r);
        p.cls_token = enumv(r, 2);
        reserved(r, p.reserved, 4);
        int64_t gh = H, gw = T;
        if (u8(r) == 0xFF)
            gh = dim(r);
        const int64_t dne[4] = {sat_mul(2, D), sat_add(sat_mul(gh, gw), p.cls_token), 1, 1};
        tensor_arg(r, &a[0], dne, F, 2, 0, a, 0);
        if (too_big(a, 1))
            return;
        st = posenc_sincos_2d(ctx, gh, gw, P(&a[0]), &p);
        break;
    }
    case OP_RESIZE: {
        struct posenc_resize_params p = {0};
        p.filter = (posenc_resize_filter)(enumv(r, 2));
        p.cls_token = enumv(r, 2);
        reserved(r, p.reserved, 4);
        int64_t sh = H, sw = T, dh = B, dw = E;
        if (u8(r) == 0xFF) {
            sh = dim(r);
            dw = dim(r);
        }
        const int64_t sne[4] = {D, sat_add(sat_mul(sh, sw), p.cls_token), 1, 1},
                      dne[4] = {D, sat_add(sat_mul(dh, dw), p.cls_token), 1, 1};
        tensor_arg(r, &a[0], sne, F, 0, 0, a, 0);
        tensor_arg(r, &a[1], dne, F, 2, 0, a, 1);
        if (too_big(a, 2))
            return;
        st = posenc_resize_2d(ctx, P(&a[0]), sh, sw, P(&a[1]), dh, dw, &p);
        break;
    }
    case OP_RELBIAS:
    case OP_RELBIAS_BWD: {
        struct posenc_relbias_params p = {0};
        p.kind = (posenc_relbias_kind)(enumv(r, 2));
        p.num_buckets = i32s(r);
        p.max_distance = i32s(r);
        p.causal = i32s(r) % 3;
        p.q_offset = i32s(r);
        p.k_offset = i32s(r);
        reserved(r, p.reserved, 4);
        int64_t nb = p.kind == POSENC_RELBIAS_CLIPPED ? 2 * (int64_t)p.max_distance + 1
                                                      : (p.num_buckets ? p.num_buckets : 32);
        const int64_t lne[4] = {D, T, H, B}, tne[4] = {nb, H, 1, 1};
        tensor_arg(r, &a[0], lne, F, 0, 0, a, 0);
        tensor_arg(r, &a[1], tne, F, op == OP_RELBIAS ? 1 : 2, 0, a, 1);
        if (op == OP_RELBIAS)
            tensor_arg(r, &a[2], lne, F, 2, 0, a, 2);
        if (too_big(a, 3))
            return;
        if (op == OP_RELBIAS)
            st = posenc_relbias(ctx, P(&a[0]), P(&a[1]), P(&a[2]), &p);
        else
            st = posenc_relbias_backward(ctx, P(&a[0]), P(&a[1]), &p);
        break;
    }
    case OP_ALIBI: {
        struct posenc_alibi_params p = {0};
        p.max_bias = f32s(r);
        p.causal = i32s(r) % 3;
        p.symmetric = i32s(r) % 3;
        p.q_offset = i32s(r);
        p.k_offset = i32s(r);
        p.slopes = ftab(r);
        reserved(r, p.reserved, 4);
        const int64_t lne[4] = {D, T, H, B};
        tensor_arg(r, &a[0], lne, F, 0, 0, a, 0);
        tensor_arg(r, &a[1], lne, F, 2, 0, a, 1);
        if (too_big(a, 2))
            return;
        /* the caller owns the slopes' length: [H] */
        if (p.slopes && a[1].present && (a[1].t.ne[2] < 0 || a[1].t.ne[2] > TAB_N))
            p.slopes = NULL;
        st = posenc_alibi(ctx, P(&a[0]), P(&a[1]), &p);
        break;
    }
    case OP_COPY: {
        const int64_t ne[4] = {D, H, T, B};
        tensor_arg(r, &a[0], ne, u8(r) & 1 ? POSENC_DTYPE_F16 : F, 0, 0, a, 0);
        tensor_arg(r, &a[1], ne, u8(r) & 1 ? POSENC_DTYPE_F16 : F, 2, 0, a, 1);
        if (too_big(a, 2))
            return;
        st = posenc_copy(ctx, P(&a[0]), P(&a[1]));
        break;
    }
    }
    check_untouched(ctx, st);
}

/* The tensor t of the blocked call, moved onto the oracle's buffers (the same bytes). */
static posenc_tensor remap(const posenc_tensor *t, int o)
{
    posenc_tensor m = *t;
    for (int b = 0; b < NBUF; b++)
        if (t->buffer == bufs[b])
            m.buffer = obufs[o][b];
    return m;
}

static const posenc_tensor *remap_opt(const posenc_tensor *t, posenc_tensor *store, int o)
{
    if (!t)
        return NULL;
    *store = remap(t, o);
    return store;
}

/* posenc_attention on a blocked context (ctx_att[o]), then differentially on the oracle. */
static void run_attention(struct rd *r, int o)
{
    posenc_context *ctx = ctx_att[o];
    /* the shape: head dim, K/V heads (1 .. 8 or extreme), queries (16 .. 128 or extreme),
     * keys, batch (1 .. 8 or extreme). All zeros: D = 4, one head, 80 queries, 4 keys, one
     * batch, whose logits (1280 bytes) run as blocks of 64 and 16 queries under the 1 KiB
     * limit, every view of each block within it. (More heads or batches: the weights and a
     * block of q span the other queries too; the fuzzer reaches both, refused or not.) */
    int64_t D = dim(r), Hk = small1(r), Tq = sat_add(sat_mul(16, dim(r)), 16), Tk = dim(r),
            B = small1(r);
    int64_t Hq = sat_mul(Hk, 1 + u8(r) % 3), Dv = dim(r);
    uint8_t fl = u8(r); /* 1 mask, 2 q_pos, 4 k_pos, 8 no weights, 16 PE_ON_V, 32 params NULL */
    struct posenc_attention_params p;
    memset(&p, 0, sizeof(p));
    p.encoding = (posenc_attention_encoding)enumv(r, 6);
    p.scale = f32s(r);
    p.causal = i32s(r) % 3;
    p.q_offset = i32s(r);
    p.k_offset = i32s(r);
    p.sinusoidal.base = f32s(r);
    p.sinusoidal.x_scale = f32s(r);
    p.sinusoidal.freq_shift = f32s(r);
    p.sinusoidal.layout = (posenc_sin_layout)enumv(r, 3);
    rope_params(r, &p.rope);
    p.alibi.max_bias = f32s(r);
    p.alibi.slopes = ftab(r);
    p.relbias.kind = (posenc_relbias_kind)enumv(r, 2);
    p.relbias.num_buckets = i32s(r);
    p.relbias.max_distance = i32s(r);
    p.relbias.causal = i32s(r) % 3;
    if (fl & 16)
        p.flags = POSENC_ATTENTION_PE_ON_V;
    reserved(r, p.reserved, 8);
    const int64_t S = 1 + u8(r) % 4;
    const int64_t nbk = p.relbias.kind == POSENC_RELBIAS_CLIPPED
                            ? 2 * (int64_t)p.relbias.max_distance + 1
                            : (p.relbias.num_buckets ? p.relbias.num_buckets : 32);
    const posenc_dtype F = POSENC_DTYPE_F32, I = POSENC_DTYPE_I32;
    const int64_t qne[4] = {D, Hq, Tq, B}, kne[4] = {D, Hk, Tk, B}, vne[4] = {Dv, Hk, Tk, B},
                  dne[4] = {Dv, Hq, Tq, B}, wne[4] = {Tk, Tq, Hq, B}, mne[4] = {Tk, Tq, 1, 1},
                  qpne[4] = {Tq, S, 1, 1}, kpne[4] = {Tk, S, 1, 1}, ltne[4] = {D, 160, 1, 1},
                  rtne[4] = {nbk, Hq, 1, 1};
    /* inputs in buffers 0 (floats) and 1 (positions), outputs in 2 and 3 */
    struct targ a[10];
    memset(a, 0, sizeof(a));
    tensor_arg(r, &a[0], qne, F, 0, 0, a, 0);
    tensor_arg(r, &a[1], kne, F, 0, 8192, a, 1);
    tensor_arg(r, &a[2], vne, F, 0, 12288, a, 2);
    tensor_arg(r, &a[3], dne, F, 2, 0, a, 3);
    tensor_arg(r, &a[4], wne, F, 3, 0, a, 4);
    tensor_arg(r, &a[5], mne, F, 0, 16384, a, 5);
    tensor_arg(r, &a[6], qpne, I, 1, 0, a, 6);
    tensor_arg(r, &a[7], kpne, I, 1, 512, a, 7);
    tensor_arg(r, &a[8], ltne, F, 0, 20480, a, 8);
    tensor_arg(r, &a[9], rtne, F, 0, 24576, a, 9);
    a[4].present &= !(fl & 8);
    a[5].present &= (fl & 1) != 0;
    a[6].present &= (fl & 2) != 0;
    a[7].present &= (fl & 4) != 0;
    if (too_big(a, 10))
        return;
    /* the caller owns the slopes' length: [Hq] */
    if (p.alibi.slopes && a[0].present && (a[0].t.ne[1] < 0 || a[0].t.ne[1] > TAB_N))
        p.alibi.slopes = NULL;
    p.mask = P(&a[5]);
    p.q_pos = P(&a[6]);
    p.k_pos = P(&a[7]);
    p.learned_table = P(&a[8]); /* read only by LEARNED / RELBIAS */
    p.relbias_table = P(&a[9]);
    const struct posenc_attention_params *pp = (fl & 32) ? NULL : &p;
    /* Without weights a backend with a one-pass kernel runs it when every view fits one
     * binding, and the multi-pass path otherwise: other roundings, so the blocked call and
     * its oracle both take the multi-pass path (POSENC_ATTENTION_UNFUSED; NULL params as
     * the zero struct they mean), and the one-pass path is run on its own below. */
    struct posenc_attention_params pu, p0;
    memset(&p0, 0, sizeof(p0));
    const int no_weights = !a[4].present;
    if (no_weights) {
        pu = pp ? p : p0;
        pu.flags |= POSENC_ATTENTION_UNFUSED;
    }
    const struct posenc_attention_params *pb = no_weights ? &pu : pp;
    posenc_status st = posenc_attention(ctx, P(&a[0]), P(&a[1]), P(&a[2]), P(&a[3]), P(&a[4]), pb);
    check_untouched(ctx, st);

    /* the oracle: the same call, unblocked, on the same bytes */
    posenc_context *octx = o ? ctx_fast_nolim : ctx_ref;
    for (int b = 0; b < NBUF; b++)
        posenc_buffer_write(obufs[o][b], 0, pattern[b], BUF_BYTES);
    posenc_tensor m[10], mask_m, qpos_m, kpos_m, lt_m, rt_m;
    for (int i = 0; i < 10; i++)
        m[i] = remap(&a[i].t, o);
    struct posenc_attention_params op = pb == pp ? p : pu;
    op.mask = remap_opt(p.mask, &mask_m, o);
    op.q_pos = remap_opt(p.q_pos, &qpos_m, o);
    op.k_pos = remap_opt(p.k_pos, &kpos_m, o);
    op.learned_table = remap_opt(p.learned_table, &lt_m, o);
    op.relbias_table = remap_opt(p.relbias_table, &rt_m, o);
    if (!pp) {
        /* NULL params (the zero struct; with UNFUSED when no weights): no mask, positions or
         * tables, as the blocked call had */
        op.mask = op.q_pos = op.k_pos = op.learned_table = op.relbias_table = NULL;
    }
#define PM(i) (a[i].present ? &m[i] : NULL)
    posenc_status ost = posenc_attention(octx, PM(0), PM(1), PM(2), PM(3), PM(4),
                                         pb ? &op : NULL);
    if (no_weights) {
        /* the one-pass path on the unlimited context, the caller's params as they are: the
         * oracle's status (its bytes are held to their bound by the suites, not here); then
         * the buffers back to the pattern for the oracle's own run */
        struct posenc_attention_params fp = p;
        fp.mask = op.mask;
        fp.q_pos = op.q_pos;
        fp.k_pos = op.k_pos;
        fp.learned_table = op.learned_table;
        fp.relbias_table = op.relbias_table;
        for (int b = 0; b < NBUF; b++)
            posenc_buffer_write(obufs[o][b], 0, pattern[b], BUF_BYTES);
        posenc_status fst = posenc_attention(octx, PM(0), PM(1), PM(2), PM(3), PM(4),
                                             pp ? &fp : NULL);
        if (fst != ost) {
            fprintf(stderr, "attention: %s one pass: status %d (%s); multi-pass: %d\n",
                    o ? "fast" : "reference", (int)fst, posenc_context_last_error(octx),
                    (int)ost);
            abort();
        }
        for (int b = 0; b < NBUF; b++)
            posenc_buffer_write(obufs[o][b], 0, pattern[b], BUF_BYTES);
        ost = posenc_attention(octx, PM(0), PM(1), PM(2), PM(3), PM(4), pb ? &op : NULL);
    }
#undef PM
    if (st != ost && !(st == POSENC_ERR_UNSUPPORTED && ost == POSENC_OK)) {
        fprintf(stderr, "attention: %s blocked: status %d (%s); unblocked: %d (%s)\n",
                o ? "fast" : "reference", (int)st, posenc_context_last_error(ctx), (int)ost,
                posenc_context_last_error(octx));
        abort();
    }
    if (st != POSENC_OK)
        return;
    unsigned char *want = malloc(BUF_BYTES);
    if (!want)
        abort();
    for (int b = 0; b < NBUF; b++) {
        posenc_buffer_read(bufs[b], 0, readback, BUF_BYTES);
        posenc_buffer_read(obufs[o][b], 0, want, BUF_BYTES);
        for (size_t i = 0; i < BUF_BYTES; i++)
            if (readback[i] != want[i]) {
                fprintf(stderr, "attention: %s blocked and unblocked differ in buffer %d at "
                        "byte %zu: 0x%02x, want 0x%02x\n", o ? "fast" : "reference", b, i,
                        readback[i], want[i]);
                abort();
            }
    }
    free(want);
}

static void run_host_op(struct rd *r, int op)
{
    static double out[TAB_N];
    static uint8_t streams[TAB_N];
    switch (op) {
    case OP_SIN_FREQS: {
        struct posenc_sinusoidal_params p = {0};
        p.base = f32s(r);
        p.freq_shift = f32s(r);
        p.layout = (posenc_sin_layout)i32s(r);
        int64_t d = sat_mul(2, dim(r));
        if (u8(r) == 0xFF)
            d = (int64_t)u64(r);
        if (d > 2 * TAB_N)
            return; /* out_freq has TAB_N entries */
        posenc_sinusoidal_freqs(d, &p, u8(r) == 0xFF ? NULL : out);
        break;
    }
    case OP_ROPE_FREQS: {
        struct posenc_rope_params p;
        rope_params(r, &p);
        int64_t hd = sat_mul(2, dim(r));
        if (u8(r) == 0xFF)
            hd = (int64_t)u64(r);
        /* the tables and outputs hold TAB_N pairs */
        if ((hd > 2 * TAB_N && p.n_dims == 0 && hd < INT32_MAX) || p.n_dims > 2 * TAB_N)
            return;
        if (p.n_dims <= 0 && hd > 2 * TAB_N)
            return;
        struct posenc_rope_info info;
        posenc_rope_freqs(hd, &p, u8(r) & 1 ? out : NULL, u8(r) & 1 ? streams : NULL,
                          u8(r) & 1 ? &info : NULL);
        break;
    }
    case OP_GGML: {
        int32_t op_params[15];
        for (int i = 0; i < 15; i++)
            op_params[i] = i32s(r);
        float fl[6];
        for (int i = 0; i < 6; i++) {
            fl[i] = f32s(r);
            memcpy(&op_params[5 + i], &fl[i], 4);
        }
        static const int32_t modes[8] = {0, 2, 8, 24, 40, 1, 3, -1};
        op_params[2] = modes[u8(r) % 8];
        int64_t hd = sat_mul(2, dim(r));
        if (u8(r) == 0xFF)
            hd = (int64_t)u64(r);
        const float *ff = hd <= 2 * TAB_N ? ftab(r) : NULL;
        struct posenc_rope_params out_p;
        posenc_rope_params_from_ggml(op_params, 15, hd, ff, u8(r) == 0xFF ? NULL : &out_p);
        break;
    }
    case OP_BUCKET: {
        struct posenc_relbias_params p = {0};
        p.kind = (posenc_relbias_kind)(enumv(r, 2));
        p.num_buckets = i32s(r);
        p.max_distance = i32s(r);
        p.causal = i32s(r) % 3;
        p.q_offset = i32s(r);
        p.k_offset = i32s(r);
        int32_t bucket;
        posenc_relbias_bucket(&p, (int64_t)u64(r), u8(r) == 0xFF ? NULL : &bucket);
        break;
    }
    case OP_SLOPES: {
        struct posenc_alibi_params p = {0};
        p.max_bias = f32s(r);
        p.causal = i32s(r) % 3;
        p.symmetric = i32s(r) % 3;
        p.slopes = ftab(r);
        int64_t n = sat_add(dim(r), u8(r) & 0x7F);
        if (u8(r) == 0xFF)
            n = (int64_t)u64(r);
        if (n > TAB_N)
            return;
        posenc_alibi_slopes(n, &p, u8(r) == 0xFF ? NULL : out);
        break;
    }
    case OP_CONTIG: {
        int64_t ne[4];
        for (int k = 0; k < 4; k++)
            ne[k] = u8(r) < 0xC0 ? dim(r) : (int64_t)u64(r);
        posenc_tensor t = posenc_tensor_contiguous(bufs[0], (size_t)u64(r),
                                                   (posenc_dtype)(u8(r) % 4), ne[0], ne[1],
                                                   ne[2], ne[3]);
        (void)posenc_tensor_nelements(&t);
        (void)posenc_dtype_name(t.dtype);
        break;
    }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void fuzz_params_cleanup(void);

/* Free everything (replay.c calls it at exit; libFuzzer has no such hook). */
void fuzz_params_cleanup(void)
{
    for (int b = 0; b < NBUF; b++) {
        posenc_buffer_destroy(&bufs[b]);
        free(pattern[b]);
        pattern[b] = NULL;
    }
    posenc_buffer_destroy(&foreign);
    for (int o = 0; o < 2; o++)
        for (int b = 0; b < NBUF; b++)
            posenc_buffer_destroy(&obufs[o][b]);
    free(readback);
    readback = NULL;
    posenc_context_destroy(&ctx_ref);
    posenc_context_destroy(&ctx_fast);
    posenc_context_destroy(&ctx_other);
    posenc_context_destroy(&ctx_att[0]);
    posenc_context_destroy(&ctx_att[1]);
    posenc_context_destroy(&ctx_fast_nolim);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    struct posenc_context_params rp = {.backend = POSENC_BACKEND_CPU,
                                       .flags = POSENC_CONTEXT_CPU_REFERENCE};
    struct posenc_context_params fp = {.backend = POSENC_BACKEND_CPU, .n_threads = 2};
    /* The fast context also has a 4 KiB binding limit, so that ops over it go through the
     * cut of src/split.c (planned before anything runs: a refused call must still leave
     * every buffer byte as it was). */
    if (setenv("POSENC_MAX_BINDING", "4096", 1) != 0)
        abort();
    posenc_status fst = posenc_context_create(&fp, &ctx_fast, NULL, 0);
    /* attention under the smallest limit posenc takes: its queries run in blocks */
    if (setenv("POSENC_MAX_BINDING", "1024", 1) != 0)
        abort();
    if (posenc_context_create(&rp, &ctx_att[0], NULL, 0) != POSENC_OK ||
        posenc_context_create(&fp, &ctx_att[1], NULL, 0) != POSENC_OK)
        abort();
    unsetenv("POSENC_MAX_BINDING");
    if (posenc_context_create(&rp, &ctx_ref, NULL, 0) != POSENC_OK || fst != POSENC_OK ||
        posenc_context_create(&rp, &ctx_other, NULL, 0) != POSENC_OK ||
        posenc_context_create(&fp, &ctx_fast_nolim, NULL, 0) != POSENC_OK)
        abort();
    for (int b = 0; b < NBUF; b++)
        if (posenc_buffer_create(ctx_ref, BUF_BYTES, &obufs[0][b]) != POSENC_OK ||
            posenc_buffer_create(ctx_fast_nolim, BUF_BYTES, &obufs[1][b]) != POSENC_OK)
            abort();
    readback = malloc(BUF_BYTES);
    for (int b = 0; b < NBUF; b++) {
        pattern[b] = malloc(BUF_BYTES);
        if (!pattern[b] || !readback)
            abort();
        for (int i = 0; i < BUF_BYTES / 4; i++) {
            /* small floats in the data buffers; in the positions buffer, i32 0..15 */
            float f = (float)((i * 7 + b) % 13 - 6) * 0.25f;
            int32_t v = i % 16;
            memcpy(pattern[b] + 4 * i, b == 1 ? (const void *)&v : (const void *)&f, 4);
        }
    }
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < TAB_N; i++)
            tab_f[t][i] = 1.0f;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rd r = {data, size};
    uint8_t sel = u8(&r);
    int op = (sel & 0x7F) % OP_COUNT; /* bit 7 picks the context, the rest the op */
    posenc_context *ctx = op == OP_ATTENTION ? ctx_att[sel >> 7]
                          : (sel & 0x80)     ? ctx_fast
                                             : ctx_ref;
    /* buffers of the chosen context (made once per context switch) */
    static posenc_context *bufs_ctx;
    if (bufs_ctx != ctx) {
        for (int b = 0; b < NBUF; b++)
            posenc_buffer_destroy(&bufs[b]);
        posenc_buffer_destroy(&foreign);
        for (int b = 0; b < NBUF; b++)
            if (posenc_buffer_create(ctx, BUF_BYTES, &bufs[b]) != POSENC_OK)
                abort();
        if (posenc_buffer_create(ctx_other, BUF_BYTES, &foreign) != POSENC_OK)
            abort();
        bufs_ctx = ctx;
    }
    reset_buffers(&r);
    if (op == OP_ATTENTION)
        run_attention(&r, sel >> 7);
    else if (op < OP_SIN_FREQS)
        run_ctx_op(&r, op, ctx);
    else
        run_host_op(&r, op);
    return 0;
}
