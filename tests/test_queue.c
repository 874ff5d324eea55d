/*
 * test_queue.c - many small ops queued back to back (issue #17): a runtime issues hundreds
 * of decode-size ops per token, and an op must not wait for the ones before it.
 *
 * On every backend: 100 decode-shape RoPE calls (x [128, 32, 1, 1] f32, each at its own
 * position) queued without a wait, independent or chained in place on one buffer, a
 * posenc_buffer_write and a posenc_buffer_destroy in the middle of a queue, and
 * posenc_context_flush; every result is compared with the CPU reference after finish.
 * Then one-pass attention and ALiBi calls that share their inputs, and a chain of them,
 * compared bit for bit with the same ops run one at a time.
 * On Vulkan the backend's counters (pe_vk_counters, an internal function) show it
 * structurally: the host never synchronises with a batch's fence until finish / read
 * (pe_vk_counters counts every fence wait, signalled or not), fewer submissions than ops,
 * and barriers exactly where an op depends on an earlier one of the same batch.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if TH_HAVE_VULKAN
/* src/vulkan/vk_submit.c (internal, reachable: tests link the library's objects). */
void pe_vk_counters(posenc_context *ctx, uint64_t *out_host_waits, uint64_t *out_submits,
                    uint64_t *out_barriers, uint64_t *out_allocs);
#endif
/* src/scratch.c (internal): the scratch's counts, and the bytes it keeps at most */
void pe_scratch_stats(const posenc_context *ctx, uint64_t *out_made, int *out_kept,
                      size_t *out_bytes);
void pe_scratch_release(posenc_context *ctx);
extern size_t pe_scratch_keep;
/* src/context.c (test-only): fail the n-th device allocation */
extern int64_t pe_fault_countdown;

enum { D = 128, H = 32, NX = D * H, NOPS = 100 };

struct counters {
    uint64_t waits, submits, barriers, allocs;
};

static struct counters counters(void)
{
    struct counters c = {0, 0, 0, 0};
#if TH_HAVE_VULKAN
    pe_vk_counters(th.dut, &c.waits, &c.submits, &c.barriers, &c.allocs);
#endif
    return c;
}

static bool is_vulkan(void)
{
    return th.kind == POSENC_BACKEND_VULKAN && TH_HAVE_VULKAN;
}

static const struct posenc_rope_params g_rope = {.mode = POSENC_ROPE_NEOX};

static float g_x[NOPS][NX];
static int32_t g_pos[NOPS];

static void make_inputs(void)
{
    uint64_t s = 0x9e17;
    for (int i = 0; i < NOPS; i++) {
        th_fill_unit(g_x[i], NX, &s);
        g_pos[i] = 7 + 13 * i; /* < 1300: every angle is < 2048 rad (frequencies <= 1) */
    }
}

static posenc_tensor x_tensor(posenc_buffer *b)
{
    return posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, D, H, 1, 1);
}

/* The position of op i: one element of the positions buffer. */
static posenc_tensor pos_tensor(posenc_buffer *b, int i)
{
    return posenc_tensor_contiguous(b, (size_t)i * sizeof(int32_t), POSENC_DTYPE_I32, 1, 1, 1,
                                    1);
}

/* One rotated element from dut and from the reference: each is within
 * pc_bound_rope_f32 of the exact value (angles < 2048 rad: the angle's own f32 rounding
 * of 2 ulps of 2048 on top of the contract; |xa| + |xb| <= 2), so they differ by at most
 * twice that, plus an ulp of the value for the final store. `steps` ops applied in
 * sequence: a rotation keeps the error of a pair's earlier steps, so the bound adds up. */
static double bound(double ref, int steps)
{
    return 2.0 * steps * pc_bound_rope_f32(2.0 * pc_ulp32(2048.0), 1.0, 2.0) + pc_ulp32(ref);
}

static void compare(const float *got, const float *ref, int steps, const char *what, int op)
{
    for (int k = 0; k < NX; k++) {
        double b = bound(ref[k], steps);
        if (!(fabs((double)got[k] - ref[k]) <= b))
            fail_msg("%s, op %d: element %d = %.9g, reference %.9g (bound %.3g)", what, op, k,
                     got[k], ref[k], b);
    }
}

/* The reference of rope(x, pos[i]) for every i, on th.ref. */
static float g_ref[NOPS][NX];

static void make_reference(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    posenc_buffer *pos = th_upload(th.ref, g_pos, sizeof g_pos);
    posenc_buffer *x = NULL, *y = NULL;
    assert_int_equal(posenc_buffer_create(th.ref, sizeof g_x[0], &x), POSENC_OK);
    assert_int_equal(posenc_buffer_create(th.ref, sizeof g_x[0], &y), POSENC_OK);
    posenc_tensor tx = x_tensor(x), ty = x_tensor(y);
    for (int i = 0; i < NOPS; i++) {
        posenc_tensor tp = pos_tensor(pos, i);
        assert_int_equal(posenc_buffer_write(x, 0, g_x[i], sizeof g_x[i]), POSENC_OK);
        assert_int_equal(posenc_rope(th.ref, &tx, &tp, &ty, &g_rope), POSENC_OK);
        assert_int_equal(posenc_buffer_read(y, 0, g_ref[i], sizeof g_ref[i]), POSENC_OK);
    }
    posenc_buffer_destroy(&pos);
    posenc_buffer_destroy(&x);
    posenc_buffer_destroy(&y);
}

/* 100 independent RoPE calls, each on its own input and output buffer. */
static void test_queue_independent(void **state)
{
    (void)state;
    make_reference();
    posenc_context *ctx = th.dut;
    posenc_buffer *pos = th_upload(ctx, g_pos, sizeof g_pos);
    posenc_buffer *x[NOPS], *y[NOPS];
    for (int i = 0; i < NOPS; i++) {
        x[i] = th_upload(ctx, g_x[i], sizeof g_x[i]);
        assert_int_equal(posenc_buffer_create(ctx, sizeof g_x[i], &y[i]), POSENC_OK);
    }
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);

    struct counters c0 = counters();
    for (int i = 0; i < NOPS; i++) {
        posenc_tensor tx = x_tensor(x[i]), ty = x_tensor(y[i]), tp = pos_tensor(pos, i);
        assert_int_equal(posenc_rope(ctx, &tx, &tp, &ty, &g_rope), POSENC_OK);
    }
    struct counters c1 = counters();
    if (is_vulkan()) {
        /* The 100th call returned without the host ever synchronising with a batch's
         * fence (counted even when the fence had already signalled, so this does not
         * depend on the device's speed): nothing waited for the first op's results. With
         * one command buffer and fence, every op after the first waited (99). */
        assert_int_equal(c1.waits - c0.waits, 0);
        /* Batched: fewer submissions than ops (some ops are still unsubmitted). */
        assert_true(c1.submits - c0.submits < NOPS / 2);
        /* No op reads or writes what another wrote (the positions are only read): no
         * barrier between them. */
        assert_int_equal(c1.barriers - c0.barriers, 0);
    }
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    for (int i = 0; i < NOPS; i++) {
        float got[NX];
        assert_int_equal(posenc_buffer_read(y[i], 0, got, sizeof got), POSENC_OK);
        compare(got, g_ref[i], 1, "independent", i);
        posenc_buffer_destroy(&x[i]);
        posenc_buffer_destroy(&y[i]);
    }
    posenc_buffer_destroy(&pos);
    th_check_warnings();
}

/* 100 RoPE calls in place on one buffer, each depending on the one before. */
static void test_queue_chained(void **state)
{
    (void)state;
    make_reference();
    posenc_context *ctx = th.dut;
    posenc_buffer *pos = th_upload(ctx, g_pos, sizeof g_pos);
    posenc_buffer *x = th_upload(ctx, g_x[0], sizeof g_x[0]);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    posenc_tensor tx = x_tensor(x);

    struct counters c0 = counters();
    for (int i = 0; i < NOPS; i++) {
        posenc_tensor tp = pos_tensor(pos, i);
        assert_int_equal(posenc_rope(ctx, &tx, &tp, &tx, &g_rope), POSENC_OK);
    }
    struct counters c1 = counters();
    if (is_vulkan())
        assert_int_equal(c1.waits - c0.waits, 0);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    if (is_vulkan()) {
        /* Every op but the first of each batch follows a barrier (each batch starts after
         * the previous one's end barrier): barriers + batches = ops. */
        struct counters c2 = counters();
        assert_int_equal((c2.barriers - c0.barriers) + (c2.submits - c0.submits), NOPS);
    }
    float got[NX];
    assert_int_equal(posenc_buffer_read(x, 0, got, sizeof got), POSENC_OK);

    /* The same chain on the reference. */
    posenc_buffer *rpos = th_upload(th.ref, g_pos, sizeof g_pos);
    posenc_buffer *rx = th_upload(th.ref, g_x[0], sizeof g_x[0]);
    posenc_tensor trx = x_tensor(rx);
    for (int i = 0; i < NOPS; i++) {
        posenc_tensor tp = pos_tensor(rpos, i);
        assert_int_equal(posenc_rope(th.ref, &trx, &tp, &trx, &g_rope), POSENC_OK);
    }
    float ref[NX];
    assert_int_equal(posenc_buffer_read(rx, 0, ref, sizeof ref), POSENC_OK);
    compare(got, ref, NOPS, "chained in place", NOPS - 1);
    posenc_buffer_destroy(&rpos);
    posenc_buffer_destroy(&rx);
    posenc_buffer_destroy(&pos);
    posenc_buffer_destroy(&x);
    th_check_warnings();
}

/* A write into an input of a queued op, and the destroy of another op's input, in the
 * middle of a queue: the op before the write sees the old contents, the one after it the
 * new, and neither the write nor the destroy waits. */
static void test_queue_write_destroy(void **state)
{
    (void)state;
    make_reference();
    posenc_context *ctx = th.dut;
    posenc_buffer *pos = th_upload(ctx, g_pos, sizeof g_pos);
    posenc_buffer *xa = th_upload(ctx, g_x[0], sizeof g_x[0]);
    posenc_buffer *xt = th_upload(ctx, g_x[2], sizeof g_x[2]);
    posenc_buffer *y[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(posenc_buffer_create(ctx, sizeof g_x[0], &y[i]), POSENC_OK);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    posenc_tensor ta = x_tensor(xa), tt = x_tensor(xt);
    posenc_tensor ty0 = x_tensor(y[0]), ty1 = x_tensor(y[1]), ty2 = x_tensor(y[2]);
    posenc_tensor p0 = pos_tensor(pos, 0), p1 = pos_tensor(pos, 1), p2 = pos_tensor(pos, 2);

    struct counters c0 = counters();
    assert_int_equal(posenc_rope(ctx, &ta, &p0, &ty0, &g_rope), POSENC_OK);
    assert_int_equal(posenc_rope(ctx, &tt, &p2, &ty2, &g_rope), POSENC_OK);
    assert_int_equal(posenc_buffer_write(xa, 0, g_x[1], sizeof g_x[1]), POSENC_OK);
    posenc_buffer_destroy(&xt);
    assert_int_equal(posenc_rope(ctx, &ta, &p1, &ty1, &g_rope), POSENC_OK);
    struct counters c1 = counters();
    if (is_vulkan())
        assert_int_equal(c1.waits - c0.waits, 0);
    for (int i = 0; i < 3; i++) {
        float got[NX];
        assert_int_equal(posenc_buffer_read(y[i], 0, got, sizeof got), POSENC_OK);
        compare(got, g_ref[i], 1, "write / destroy in the queue", i);
        posenc_buffer_destroy(&y[i]);
    }
    posenc_buffer_destroy(&xa);
    posenc_buffer_destroy(&pos);
    th_check_warnings();
}

/* Ops that share only inputs, and one that reads another's output (the barriers of the
 * other ops than RoPE: issue #20, attention in a runtime's graph). On Vulkan an op's
 * inputs are only read (each dispatch names the bindings it writes), so:
 *   - NSH one-pass attention calls (GQA decode, ALiBi) on one q, K and V into their own
 *     outputs record NSH times the barriers of one call alone (its own: the merge of a
 *     key split after the split), none between the calls, and allocate no device memory
 *     (the key splits' partials go to the backend's two buffers, taken in turn, which
 *     the call alone before them made);
 *   - NSH ALiBi calls on one logits tensor into their own outputs record none;
 *   - ALiBi on the last attention output, then ALiBi in place on that op's output: one
 *     barrier before each.
 * Every output is compared bit for bit with the same op run alone after a finish (the
 * same kernels on the same inputs); the separate runs are checked against the CPU
 * reference by the attention and bias suites. On the other backends the same calls run
 * and the same comparisons hold. */
enum { NSH = 6, AD = 64, AHQ = 8, AHK = 2, ATK = 1000 };

static void test_queue_shared_inputs(void **state)
{
    (void)state;
    posenc_context *ctx = th.dut;
    uint64_t s = 0x5eed;
    static float q[AD * AHQ], logits[ATK * AHQ];
    static uint16_t kv[2][AD * AHK * ATK];
    th_fill_unit(q, sizeof q / sizeof q[0], &s);
    for (int m = 0; m < 2; m++)
        th_fill_unit_f16(kv[m], sizeof kv[0] / sizeof kv[0][0], &s);
    for (size_t i = 0; i < sizeof logits / sizeof logits[0]; i++)
        logits[i] = (float)(4.0 * pc_rand_uniform(&s) - 2.0);
    posenc_buffer *bq = th_upload(ctx, q, sizeof q), *bk = th_upload(ctx, kv[0], sizeof kv[0]);
    posenc_buffer *bv = th_upload(ctx, kv[1], sizeof kv[1]);
    posenc_buffer *bl = th_upload(ctx, logits, sizeof logits);
    posenc_buffer *bo[NSH + 1], *bb[NSH + 1], *bc = NULL;
    for (int i = 0; i <= NSH; i++) {
        assert_int_equal(posenc_buffer_create(ctx, sizeof q, &bo[i]), POSENC_OK);
        assert_int_equal(posenc_buffer_create(ctx, sizeof logits, &bb[i]), POSENC_OK);
    }
    assert_int_equal(posenc_buffer_create(ctx, sizeof q, &bc), POSENC_OK);
    posenc_tensor tq = posenc_tensor_contiguous(bq, 0, POSENC_DTYPE_F32, AD, AHQ, 1, 1);
    posenc_tensor tk = posenc_tensor_contiguous(bk, 0, POSENC_DTYPE_F16, AD, AHK, ATK, 1);
    posenc_tensor tv = posenc_tensor_contiguous(bv, 0, POSENC_DTYPE_F16, AD, AHK, ATK, 1);
    posenc_tensor tl = posenc_tensor_contiguous(bl, 0, POSENC_DTYPE_F32, ATK, 1, AHQ, 1);
    posenc_tensor to[NSH + 1], tb[NSH + 1];
    for (int i = 0; i <= NSH; i++) {
        to[i] = posenc_tensor_contiguous(bo[i], 0, POSENC_DTYPE_F32, AD, AHQ, 1, 1);
        tb[i] = posenc_tensor_contiguous(bb[i], 0, POSENC_DTYPE_F32, ATK, 1, AHQ, 1);
    }
    struct posenc_attention_params ap = {.encoding = POSENC_ATTENTION_ALIBI, .causal = 1,
                                         .q_offset = ATK - 1};
    const struct posenc_alibi_params al = {.causal = 1, .q_offset = ATK - 1};
    /* the last attention output as logits [AD, 1, AHQ]: AD keys, one query, AHQ heads
     * (written after the last barrier of the attention calls) */
    posenc_tensor tol =
        posenc_tensor_contiguous(bo[NSH - 1], 0, POSENC_DTYPE_F32, AD, 1, AHQ, 1);
    posenc_tensor tc = posenc_tensor_contiguous(bc, 0, POSENC_DTYPE_F32, AD, 1, AHQ, 1);
    const struct posenc_alibi_params al2 = {.causal = 0, .q_offset = AD - 1};

    /* each op alone: the results to match, and one attention call's own barriers (twice,
     * so that both of the backend's partials buffers exist) */
    struct counters c0, c1;
    for (int r = 0; r < 2; r++) {
        assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
        c0 = counters();
        assert_int_equal(posenc_attention(ctx, &tq, &tk, &tv, &to[NSH], NULL, &ap), POSENC_OK);
        c1 = counters();
    }
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    assert_int_equal(posenc_alibi(ctx, &tl, &tb[NSH], &al), POSENC_OK);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    const uint64_t own = c1.barriers - c0.barriers;
    float *o_alone = th_download(bo[NSH]), *b_alone = th_download(bb[NSH]);

    /* NSH attention calls and NSH ALiBi calls on shared inputs, queued back to back */
    c0 = counters();
    for (int i = 0; i < NSH; i++)
        assert_int_equal(posenc_attention(ctx, &tq, &tk, &tv, &to[i], NULL, &ap), POSENC_OK);
    c1 = counters();
    for (int i = 0; i < NSH; i++)
        assert_int_equal(posenc_alibi(ctx, &tl, &tb[i], &al), POSENC_OK);
    struct counters c2 = counters();
    /* a chain: ALiBi reads the last attention output, then ALiBi reads that */
    assert_int_equal(posenc_alibi(ctx, &tol, &tc, &al2), POSENC_OK);
    assert_int_equal(posenc_alibi(ctx, &tc, &tc, &al2), POSENC_OK);
    struct counters c3 = counters();
    if (is_vulkan()) {
        assert_true(own <= 1); /* the merge's barrier after a key split, if any */
        assert_true(c3.submits == c0.submits); /* one batch: its barriers are all counted */
        assert_int_equal(c1.barriers - c0.barriers, NSH * own);
        assert_int_equal(c1.allocs - c0.allocs, 0);
        assert_int_equal(c2.barriers - c1.barriers, 0);
        assert_int_equal(c3.barriers - c2.barriers, 2);
    }
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    for (int i = 0; i < NSH; i++) {
        float *o = th_download(bo[i]), *b = th_download(bb[i]);
        assert_memory_equal(o, o_alone, sizeof q);
        assert_memory_equal(b, b_alone, sizeof logits);
        free(o);
        free(b);
    }
    float *chained = th_download(bc);
    /* the chain again, one op at a time */
    assert_int_equal(posenc_alibi(ctx, &tol, &tc, &al2), POSENC_OK);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    assert_int_equal(posenc_alibi(ctx, &tc, &tc, &al2), POSENC_OK);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    float *alone = th_download(bc);
    assert_memory_equal(chained, alone, sizeof q);
    free(chained);
    free(alone);
    free(o_alone);
    free(b_alone);
    for (int i = 0; i <= NSH; i++) {
        posenc_buffer_destroy(&bo[i]);
        posenc_buffer_destroy(&bb[i]);
    }
    posenc_buffer_destroy(&bc);
    posenc_buffer_destroy(&bq);
    posenc_buffer_destroy(&bk);
    posenc_buffer_destroy(&bv);
    posenc_buffer_destroy(&bl);
    th_check_warnings();
}

/* Composite ops' device temporaries (src/scratch.c): posenc_attention's encoded q and k
 * and implicit positions, the multi-pass path's logits, posenc_sincos_2d's coordinates are
 * taken from buffers the context keeps, so that a decode loop allocates no device memory
 * per call. One sequence of calls -- RoPE attention (GQA decode, one pass), the same with
 * the weights (multi-pass: a logits temporary), SINUSOIDAL attention and sincos_2d -- is
 * run with nothing kept (pe_scratch_keep = 0: every temporary made and destroyed per call,
 * as before the scratch existed), then three times with the default. Checked:
 *   - every output of every cached run is bit for bit the one with nothing kept (the same
 *     kernels on the same inputs: a reused buffer's old contents or a missing ordering
 *     between a call and the next one's writes to its buffers would show);
 *   - after the first cached run (Vulkan: the first two, which make the two sets of buffers
 *     taken in turn), the third makes no buffer and, on Vulkan, allocates no device memory
 *     (pe_vk_counters);
 *   - a decode loop whose keys grow by one per call (STK to STK + SGROW - 1) makes far fewer
 *     buffers than calls (the sizes are rounded up to classes 1/8 apart): at most
 *     SGROW / 4 with 4 temporaries per call (printed);
 *   - with what was kept dropped and pe_scratch_keep lowered to 16 KiB, no more than that
 *     is kept (the small temporaries are) and the calls still give the same bytes.
 * The separate runs' values are checked against the CPU reference by the attention and
 * vision suites. */
enum { SD = 64, SHQ = 8, SHK = 2, STK = 160, SGROW = 48, SNOUT = 4 };

struct scratch_io {
    posenc_buffer *q, *k, *v, *o[SNOUT], *w;
};

/* The sequence: outputs o[0..3] (attention ROPE, ROPE with weights w, SINUSOIDAL; sincos_2d). */
static void scratch_sequence(posenc_context *ctx, const struct scratch_io *io, int64_t tk)
{
    posenc_tensor tq = posenc_tensor_contiguous(io->q, 0, POSENC_DTYPE_F32, SD, SHQ, 1, 1);
    posenc_tensor tk_ = posenc_tensor_contiguous(io->k, 0, POSENC_DTYPE_F16, SD, SHK, tk, 1);
    posenc_tensor tv = posenc_tensor_contiguous(io->v, 0, POSENC_DTYPE_F16, SD, SHK, tk, 1);
    posenc_tensor to[SNOUT];
    for (int i = 0; i < 3; i++)
        to[i] = posenc_tensor_contiguous(io->o[i], 0, POSENC_DTYPE_F32, SD, SHQ, 1, 1);
    to[3] = posenc_tensor_contiguous(io->o[3], 0, POSENC_DTYPE_F32, SD, 7 * 5, 1, 1);
    posenc_tensor tw = posenc_tensor_contiguous(io->w, 0, POSENC_DTYPE_F32, tk, 1, SHQ, 1);
    struct posenc_attention_params ap = {.encoding = POSENC_ATTENTION_ROPE, .causal = 1,
                                         .q_offset = (int32_t)tk - 1};
    ap.rope.mode = POSENC_ROPE_NEOX;
    assert_int_equal(posenc_attention(ctx, &tq, &tk_, &tv, &to[0], NULL, &ap), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk_, &tv, &to[1], &tw, &ap), POSENC_OK);
    ap.encoding = POSENC_ATTENTION_SINUSOIDAL;
    assert_int_equal(posenc_attention(ctx, &tq, &tk_, &tv, &to[2], NULL, &ap), POSENC_OK);
    assert_int_equal(posenc_sincos_2d(ctx, 7, 5, &to[3], NULL), POSENC_OK);
}

/* The outputs and weights, downloaded after a finish, one block. */
static unsigned char *scratch_results(posenc_context *ctx, const struct scratch_io *io,
                                      size_t *n)
{
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    size_t total = posenc_buffer_size(io->w);
    for (int i = 0; i < SNOUT; i++)
        total += posenc_buffer_size(io->o[i]);
    unsigned char *all = malloc(total), *p = all;
    assert_non_null(all);
    for (int i = 0; i <= SNOUT; i++) {
        posenc_buffer *b = i < SNOUT ? io->o[i] : io->w;
        assert_int_equal(posenc_buffer_read(b, 0, p, posenc_buffer_size(b)), POSENC_OK);
        p += posenc_buffer_size(b);
    }
    *n = total;
    return all;
}

static void test_queue_scratch(void **state)
{
    (void)state;
    posenc_context *ctx = th.dut;
    const int64_t tk_max = STK + SGROW;
    uint64_t s = 0x5c7a;
    float *q = malloc(sizeof(float) * SD * SHQ);
    uint16_t *kv[2];
    assert_non_null(q);
    th_fill_unit(q, SD * SHQ, &s);
    for (int m = 0; m < 2; m++) {
        kv[m] = malloc(sizeof(uint16_t) * SD * SHK * (size_t)tk_max);
        assert_non_null(kv[m]);
        th_fill_unit_f16(kv[m], (size_t)(SD * SHK * tk_max), &s);
    }
    struct scratch_io io;
    io.q = th_upload(ctx, q, sizeof(float) * SD * SHQ);
    io.k = th_upload(ctx, kv[0], sizeof(uint16_t) * SD * SHK * (size_t)tk_max);
    io.v = th_upload(ctx, kv[1], sizeof(uint16_t) * SD * SHK * (size_t)tk_max);
    /* zeroed: the calls write only the first part of each (all of it is compared) */
    float *zeros = calloc((size_t)tk_max * SHQ + SD * 7 * 5, sizeof(float));
    assert_non_null(zeros);
    for (int i = 0; i < SNOUT; i++)
        io.o[i] = th_upload(ctx, zeros, sizeof(float) * SD * 7 * 5);
    io.w = th_upload(ctx, zeros, sizeof(float) * (size_t)tk_max * SHQ);
    free(zeros);
    const size_t keep = pe_scratch_keep;
    uint64_t made0, made1;
    int kept;
    size_t kept_bytes;

    /* nothing kept: the results to match */
    pe_scratch_keep = 0;
    pe_scratch_stats(ctx, &made0, &kept, &kept_bytes);
    scratch_sequence(ctx, &io, STK);
    size_t n_gold, n;
    unsigned char *gold = scratch_results(ctx, &io, &n_gold);
    pe_scratch_stats(ctx, &made1, &kept, &kept_bytes);
    assert_int_equal(made1 - made0, 0);
    assert_int_equal(kept, 0);

    /* kept: three runs, the third makes nothing */
    pe_scratch_keep = keep;
    struct counters c0 = counters(), c1 = c0;
    for (int r = 0; r < 3; r++) {
        if (r == 2) {
            pe_scratch_stats(ctx, &made0, &kept, &kept_bytes);
            c0 = counters();
        }
        scratch_sequence(ctx, &io, STK);
        if (r == 2) {
            pe_scratch_stats(ctx, &made1, &kept, &kept_bytes);
            c1 = counters();
        }
        unsigned char *now = scratch_results(ctx, &io, &n);
        assert_int_equal(n, n_gold);
        assert_memory_equal(now, gold, n);
        free(now);
    }
    assert_int_equal(made1 - made0, 0);
    assert_true(kept > 0 && kept_bytes <= keep);
    if (is_vulkan())
        assert_int_equal(c1.allocs - c0.allocs, 0);

    /* a decode loop, one more key per call */
    pe_scratch_stats(ctx, &made0, &kept, &kept_bytes);
    for (int64_t tk = STK; tk < tk_max; tk++) {
        posenc_tensor tq = posenc_tensor_contiguous(io.q, 0, POSENC_DTYPE_F32, SD, SHQ, 1, 1);
        posenc_tensor tkk = posenc_tensor_contiguous(io.k, 0, POSENC_DTYPE_F16, SD, SHK, tk, 1);
        posenc_tensor tv = posenc_tensor_contiguous(io.v, 0, POSENC_DTYPE_F16, SD, SHK, tk, 1);
        posenc_tensor to = posenc_tensor_contiguous(io.o[0], 0, POSENC_DTYPE_F32, SD, SHQ, 1, 1);
        struct posenc_attention_params ap = {.encoding = POSENC_ATTENTION_ROPE, .causal = 1,
                                             .q_offset = (int32_t)tk - 1};
        assert_int_equal(posenc_attention(ctx, &tq, &tkk, &tv, &to, NULL, &ap), POSENC_OK);
    }
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    pe_scratch_stats(ctx, &made1, &kept, &kept_bytes);
    printf("  decode loop, %d calls of 4 temporaries: %llu buffers made, %d kept (%zu bytes)\n",
           SGROW, (unsigned long long)(made1 - made0), kept, kept_bytes);
    assert_true(made1 - made0 <= SGROW / 4);

    /* 16 KiB kept at most (what was kept dropped first): the same bytes */
    pe_scratch_release(ctx);
    pe_scratch_keep = 16384;
    for (int r = 0; r < 2; r++) {
        scratch_sequence(ctx, &io, STK);
        unsigned char *now = scratch_results(ctx, &io, &n);
        assert_memory_equal(now, gold, n);
        free(now);
        pe_scratch_stats(ctx, &made1, &kept, &kept_bytes);
        assert_true(kept > 0 && kept_bytes <= 16384);
    }
    pe_scratch_keep = keep;

    free(gold);
    free(q);
    free(kv[0]);
    free(kv[1]);
    posenc_buffer_destroy(&io.q);
    posenc_buffer_destroy(&io.k);
    posenc_buffer_destroy(&io.v);
    for (int i = 0; i < SNOUT; i++)
        posenc_buffer_destroy(&io.o[i]);
    posenc_buffer_destroy(&io.w);
    th_check_warnings();
}

/* The scratch's fallbacks, on a context of the suite's backend that counts the errors it
 * logs: when making a buffer fails for lack of memory while the context keeps buffers no
 * call holds, those go and the allocation is tried again (or a kept buffer that fits is
 * taken); the call succeeds, logs no error and gives the bytes of the same call unarmed.
 * With nothing kept the failure stands: POSENC_ERR_OUT_OF_MEMORY, one error logged, dst
 * untouched. The failing allocation is the first device allocation of the call (armed
 * with pe_fault_countdown = 1): the call is the first with more keys than the kept
 * buffers were made for (SFB keys: also more than the 256 keys the kept RoPE table of
 * the STK-key calls covers, ops_attention.c's krot_table), so its first allocation is a
 * scratch buffer. */
enum { SFB = 300 };
static int g_errors_logged;

static void count_errors(posenc_log_level level, const char *msg, void *user)
{
    (void)msg;
    (void)user;
    if (level == POSENC_LOG_ERROR)
        g_errors_logged++;
}

static void test_queue_scratch_fallback(void **state)
{
    (void)state;
    struct posenc_context_params cp = {.backend = th.kind, .log_fn = count_errors,
                                       .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    char err[256];
    assert_int_equal(posenc_context_create(&cp, &ctx, err, sizeof err), POSENC_OK);
    const int64_t tk_max = SFB;
    uint64_t s = 0xfa11;
    float q[SD * SHQ], poison[SD * SHQ];
    static uint16_t kv[2][SD * SHK * SFB];
    th_fill_unit(q, SD * SHQ, &s);
    for (int i = 0; i < SD * SHQ; i++)
        poison[i] = -7.25f;
    for (int m = 0; m < 2; m++)
        th_fill_unit_f16(kv[m], (size_t)(SD * SHK * tk_max), &s);
    posenc_buffer *bq = th_upload(ctx, q, sizeof q), *bk = th_upload(ctx, kv[0], sizeof kv[0]);
    posenc_buffer *bv = th_upload(ctx, kv[1], sizeof kv[1]), *bo = th_upload(ctx, poison, sizeof q);
    posenc_tensor tq = posenc_tensor_contiguous(bq, 0, POSENC_DTYPE_F32, SD, SHQ, 1, 1);
    posenc_tensor to = posenc_tensor_contiguous(bo, 0, POSENC_DTYPE_F32, SD, SHQ, 1, 1);
    struct posenc_attention_params ap = {.encoding = POSENC_ATTENTION_ROPE, .causal = 1};
    float got[SD * SHQ], want[SD * SHQ];
    for (int pass = 0; pass < 2; pass++) {
        /* kept buffers for STK keys (pass 1: none kept), then tk_max keys armed */
        for (int r = 0; r < 2; r++) {
            const int64_t tk = STK;
            posenc_tensor tk_ = posenc_tensor_contiguous(bk, 0, POSENC_DTYPE_F16, SD, SHK, tk, 1);
            posenc_tensor tv = posenc_tensor_contiguous(bv, 0, POSENC_DTYPE_F16, SD, SHK, tk, 1);
            ap.q_offset = (int32_t)tk - 1;
            assert_int_equal(posenc_attention(ctx, &tq, &tk_, &tv, &to, NULL, &ap), POSENC_OK);
        }
        assert_int_equal(posenc_buffer_write(bo, 0, poison, sizeof poison), POSENC_OK);
        assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
        if (pass == 1)
            pe_scratch_release(ctx);
        posenc_tensor tk_ = posenc_tensor_contiguous(bk, 0, POSENC_DTYPE_F16, SD, SHK, tk_max, 1);
        posenc_tensor tv = posenc_tensor_contiguous(bv, 0, POSENC_DTYPE_F16, SD, SHK, tk_max, 1);
        ap.q_offset = (int32_t)tk_max - 1;
        g_errors_logged = 0;
        pe_fault_countdown = 1;
        const posenc_status st = posenc_attention(ctx, &tq, &tk_, &tv, &to, NULL, &ap);
        const bool hit = pe_fault_countdown == 0;
        pe_fault_countdown = 0;
        assert_true(hit);
        assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
        assert_int_equal(posenc_buffer_read(bo, 0, got, sizeof got), POSENC_OK);
        if (pass == 0) {
            assert_int_equal(st, POSENC_OK);
            assert_int_equal(g_errors_logged, 0);
            assert_int_equal(posenc_attention(ctx, &tq, &tk_, &tv, &to, NULL, &ap), POSENC_OK);
            assert_int_equal(posenc_buffer_read(bo, 0, want, sizeof want), POSENC_OK);
            assert_memory_equal(got, want, sizeof got);
        } else {
            assert_int_equal(st, POSENC_ERR_OUT_OF_MEMORY);
            assert_int_equal(g_errors_logged, 1);
            assert_memory_equal(got, poison, sizeof got);
        }
    }
    posenc_buffer_destroy(&bq);
    posenc_buffer_destroy(&bk);
    posenc_buffer_destroy(&bv);
    posenc_buffer_destroy(&bo);
    posenc_context_destroy(&ctx);
}

/* posenc_context_flush on every backend: starts the queued work, waits for nothing. */
static void test_flush(void **state)
{
    (void)state;
    make_reference();
    posenc_context *ctx = th.dut;
    assert_int_equal(posenc_context_flush(NULL), POSENC_ERR_INVALID_ARGUMENT);
    assert_string_equal(posenc_last_error(), "ctx is NULL");
    assert_int_equal(posenc_context_flush(ctx), POSENC_OK); /* nothing queued */

    posenc_buffer *pos = th_upload(ctx, g_pos, sizeof g_pos);
    posenc_buffer *x = th_upload(ctx, g_x[3], sizeof g_x[3]);
    posenc_buffer *y = NULL;
    assert_int_equal(posenc_buffer_create(ctx, sizeof g_x[3], &y), POSENC_OK);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    posenc_tensor tx = x_tensor(x), ty = x_tensor(y), tp = pos_tensor(pos, 3);

    struct counters c0 = counters();
    assert_int_equal(posenc_rope(ctx, &tx, &tp, &ty, &g_rope), POSENC_OK);
    struct counters c1 = counters();
    assert_int_equal(posenc_context_flush(ctx), POSENC_OK);
    struct counters c2 = counters();
    assert_int_equal(posenc_context_flush(ctx), POSENC_OK);
    struct counters c3 = counters();
    if (is_vulkan()) {
        assert_int_equal(c1.submits - c0.submits, 0); /* recorded, not submitted */
        assert_int_equal(c2.submits - c1.submits, 1); /* the flush submitted it */
        assert_int_equal(c3.submits - c2.submits, 0); /* nothing left to submit */
        assert_int_equal(c3.waits - c0.waits, 0);     /* and nothing waited */
    }
    float got[NX];
    assert_int_equal(posenc_buffer_read(y, 0, got, sizeof got), POSENC_OK);
    compare(got, g_ref[3], 1, "after posenc_context_flush", 3);
    posenc_buffer_destroy(&pos);
    posenc_buffer_destroy(&x);
    posenc_buffer_destroy(&y);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "queue");
    if (rc >= 0)
        return rc;
    make_inputs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_independent),
        cmocka_unit_test(test_queue_chained),
        cmocka_unit_test(test_queue_write_destroy),
        cmocka_unit_test(test_queue_shared_inputs),
        cmocka_unit_test(test_queue_scratch),
        cmocka_unit_test(test_queue_scratch_fallback),
        cmocka_unit_test(test_flush),
    };
    rc = th_run("queue", tests, sizeof tests / sizeof tests[0]);
    th_fini();
    return rc;
}
