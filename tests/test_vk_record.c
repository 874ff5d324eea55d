/*
 * test_vk_record.c - posenc ops recorded into the application's Vulkan command buffer
 * (posenc_vulkan_record_begin / _end) on a host-owned context, --backend vulkan only (the
 * other backends: nothing to run). The test plays the application as test_host_owned does
 * (host_owned.c: its own instance with the validation layer and synchronization
 * validation, device, queue, command buffer):
 *
 *  - test_vk_record: RoPE, copies and a chain of dependent ops recorded after the
 *    application's own vkCmdFillBuffer and before its vkCmdCopyBuffer, against the
 *    reference; what would need posenc's own submission or a wait (buffer read / write,
 *    posenc_sincos_2d) refused with POSENC_ERR_UNSUPPORTED; record_begin twice refused;
 *  - test_vk_record_orphan: a recording never submitted, destroyed with the context;
 *  - test_vk_record_many: three recordings in one command buffer, destroyed out of order;
 *  - test_vk_record_cut: ALiBi, relative bias and RoPE cut into launches under
 *    POSENC_MAX_BINDING = 1024, recorded, equal bit for bit to posenc's own submissions;
 *  - test_vk_attention: one-pass decode attention with key splits (ALiBi) and RoPE with
 *    explicit and with implicit positions, recorded and on posenc's own submissions: the
 *    same bits every way; the context's scratch keeps nothing more while recording.
 */
#include "host_owned.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if TH_HAVE_VULKAN
/* src/scratch.c (internal, reachable: tests link the library's objects) */
void pe_scratch_stats(const posenc_context *ctx, uint64_t *out_made, int *out_kept,
                      size_t *out_bytes);

/* ERROR messages of a context (a usage error posenc reports without a status). */
static int g_errors;

static void count_errors(posenc_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == POSENC_LOG_ERROR && strstr(msg, "posenc_vulkan_recording"))
        g_errors++;
    else
        th_log(level, msg, NULL);
}

/* posenc ops recorded into the application's own command buffer (issue #17), between
 * commands of the application's: a fill before them that an op reads, a copy after them
 * of an op's result. The application submits and waits; posenc never does. Checked with
 * synchronization validation on the application's instance (vk_host_open). */
static void test_vk_record(void **state)
{
    (void)state;
    ensure_reference();
    struct vk_host h;
    vk_host_open(&h);
    struct vk_buf fill, y, rb;
    vk_buf_make(&h, sizeof(g_x), false, &fill);
    vk_buf_make(&h, sizeof(g_x), false, &y);
    vk_buf_make(&h, sizeof(g_x), true, &rb); /* the application's read-back buffer */
    struct posenc_host_device host = vk_host_device(&h);
    posenc_context *ctx = create_host_ctx(&host);
    posenc_vulkan_recording *rec = NULL;

    /* Bad input: not a host-owned context, NULL arguments, end before begin. */
    assert_int_equal(posenc_vulkan_record_begin(th.dut, h.cmd), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "host-owned"));
    assert_int_equal(posenc_vulkan_record_begin(th.ref, h.cmd), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.ref), "host-owned"));
    assert_int_equal(posenc_vulkan_record_begin(NULL, h.cmd), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_vulkan_record_begin(ctx, NULL), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(ctx), "vk_command_buffer"));
    assert_int_equal(posenc_vulkan_record_end(ctx, &rec), POSENC_ERR_INVALID_ARGUMENT);
    assert_null(rec);
    assert_int_equal(posenc_vulkan_record_end(ctx, NULL), POSENC_ERR_INVALID_ARGUMENT);
    posenc_vulkan_recording_destroy(NULL);
    posenc_vulkan_recording_destroy(&rec);

    /* Inputs written before recording (posenc's own buffers: mapped on lavapipe). */
    posenc_buffer *bx = th_upload(ctx, g_x, sizeof(g_x));
    posenc_buffer *bp = th_upload(ctx, g_pos, sizeof(g_pos));
    posenc_buffer *by = vk_wrap(ctx, &y, sizeof(g_x)), *b16 = NULL, *bz = NULL;
    assert_int_equal(posenc_buffer_create(ctx, sizeof(g_x) / 2, &b16), POSENC_OK);
    assert_int_equal(posenc_buffer_create(ctx, sizeof(g_x), &bz), POSENC_OK);
    posenc_buffer *bf = vk_wrap(ctx, &fill, sizeof(g_x));
    posenc_tensor tx = posenc_tensor_contiguous(bx, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor ty = posenc_tensor_contiguous(by, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor tz = posenc_tensor_contiguous(bz, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor tf = posenc_tensor_contiguous(bf, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor t16 = posenc_tensor_contiguous(b16, 0, POSENC_DTYPE_F16, D, H, T, B);
    posenc_tensor tp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, T, 1, 1, 1);

    for (int round = 0; round < 2; round++) { /* the recording's resources are reusable */
        vk_begin(&h);
        const float v = 1.5f + (float)round;
        uint32_t bits;
        memcpy(&bits, &v, 4);
        vkCmdFillBuffer(h.cmd, fill.buf, 0, sizeof(g_x), bits); /* the application's */
        assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_OK);
        assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(posenc_context_last_error(ctx), "already recording"));
        assert_int_equal(posenc_rope(ctx, &tx, &tp, &ty, &g_rope), POSENC_OK);
        /* a chain: the rope reads and writes what the copy wrote */
        assert_int_equal(posenc_copy(ctx, &tx, &t16), POSENC_OK);
        assert_int_equal(posenc_rope(ctx, &t16, &tp, &t16, &g_rope), POSENC_OK);
        /* reads what the application's fill, earlier in the buffer, wrote */
        assert_int_equal(posenc_copy(ctx, &tf, &tz), POSENC_OK);
        /* what would need posenc's own submission or a wait is refused */
        float probe[4] = {0};
        assert_int_equal(posenc_buffer_read(by, 0, probe, sizeof probe), POSENC_ERR_UNSUPPORTED);
        assert_non_null(strstr(posenc_context_last_error(ctx), "posenc_vulkan_record_begin"));
        assert_int_equal(posenc_buffer_write(bz, 0, probe, sizeof probe),
                         POSENC_ERR_UNSUPPORTED);
        /* posenc_sincos_2d writes its coordinates from the host (posenc.h says so) */
        const posenc_tensor t2d = posenc_tensor_contiguous(bz, 0, POSENC_DTYPE_F32, 4, 1, 1, 1);
        assert_int_equal(posenc_sincos_2d(ctx, 1, 1, &t2d, NULL), POSENC_ERR_UNSUPPORTED);
        assert_int_equal(posenc_context_finish(ctx), POSENC_OK); /* posenc's own: none */
        assert_int_equal(posenc_context_flush(ctx), POSENC_OK);
        assert_int_equal(posenc_vulkan_record_end(ctx, &rec), POSENC_OK);
        assert_non_null(rec);
        /* the application's copy of an op's result, after posenc's end barrier */
        VkBufferCopy region = {.size = sizeof(g_x)};
        vkCmdCopyBuffer(h.cmd, y.buf, rb.buf, 1, &region);
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(h.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                             0, 1, &mb, 0, NULL, 0, NULL);
        vk_submit(&h, true); /* the application submits and waits */
        posenc_vulkan_recording_destroy(&rec);
        assert_null(rec);

        compare_rope_f32(rb.map, "vulkan recording: posenc_rope, then the application's copy");
        uint16_t *h16 = th_download(b16);
        compare_rope_f16(h16, "vulkan recording: posenc_copy to f16 + posenc_rope in place");
        free(h16);
        float *got = th_download(bz);
        for (int i = 0; i < N; i++)
            if (got[i] != v)
                fail_msg("vulkan recording: element %d after the application's fill + "
                         "posenc_copy = %g, want %g",
                         i, got[i], v);
        free(got);
        memset(rb.map, 0, sizeof(g_x));
        th_check_warnings();
    }

    /* A recording that is never submitted (the application resets its buffer) is
     * destroyed the same way. */
    vk_begin(&h);
    assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_OK);
    assert_int_equal(posenc_rope(ctx, &tx, &tp, &ty, &g_rope), POSENC_OK);
    assert_int_equal(posenc_vulkan_record_end(ctx, &rec), POSENC_OK);
    VK_OK(vkEndCommandBuffer(h.cmd));
    VK_OK(vkResetCommandBuffer(h.cmd, 0));
    posenc_vulkan_recording_destroy(&rec);

    posenc_buffer_destroy(&bx);
    posenc_buffer_destroy(&bp);
    posenc_buffer_destroy(&by);
    posenc_buffer_destroy(&b16);
    posenc_buffer_destroy(&bz);
    posenc_buffer_destroy(&bf);
    posenc_context_destroy(&ctx);

    vk_buf_free(&h, &fill);
    vk_buf_free(&h, &y);
    vk_buf_free(&h, &rb);
    vk_host_close_checked(&h);
}

/* Three recordings in one command buffer, one after the other, each an op reading what
 * the one before wrote (RoPE x -> y, a copy y -> z, a copy z -> w), all outstanding at
 * the submission, then destroyed in the middle, first, last order: the context keeps its
 * recordings in a list, and every place in it is unlinked once (ASan, valgrind). The
 * result is the reference's RoPE of x. */
static void test_vk_record_many(void **state)
{
    (void)state;
    ensure_reference();
    struct vk_host h;
    vk_host_open(&h);
    struct posenc_host_device host = vk_host_device(&h);
    posenc_context *ctx = create_host_ctx(&host);
    posenc_buffer *bx = th_upload(ctx, g_x, sizeof(g_x));
    posenc_buffer *bp = th_upload(ctx, g_pos, sizeof(g_pos));
    posenc_buffer *b[3] = {NULL, NULL, NULL};
    posenc_tensor t[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(posenc_buffer_create(ctx, sizeof(g_x), &b[i]), POSENC_OK);
        t[i] = posenc_tensor_contiguous(b[i], 0, POSENC_DTYPE_F32, D, H, T, B);
    }
    const posenc_tensor tx = posenc_tensor_contiguous(bx, 0, POSENC_DTYPE_F32, D, H, T, B);
    const posenc_tensor tp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_vulkan_recording *rec[3] = {NULL, NULL, NULL};
    vk_begin(&h);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_OK);
        if (i == 0)
            assert_int_equal(posenc_rope(ctx, &tx, &tp, &t[0], &g_rope), POSENC_OK);
        else
            assert_int_equal(posenc_copy(ctx, &t[i - 1], &t[i]), POSENC_OK);
        assert_int_equal(posenc_vulkan_record_end(ctx, &rec[i]), POSENC_OK);
        assert_non_null(rec[i]);
    }
    vk_submit(&h, true);
    static const int order[3] = {1, 0, 2};
    for (int i = 0; i < 3; i++) {
        posenc_vulkan_recording_destroy(&rec[order[i]]);
        assert_null(rec[order[i]]);
    }
    float *got = th_download(b[2]);
    compare_rope_f32(got, "vulkan: three recordings in one command buffer, rope then two copies");
    free(got);
    th_check_warnings();
    for (int i = 0; i < 3; i++)
        posenc_buffer_destroy(&b[i]);
    posenc_buffer_destroy(&bx);
    posenc_buffer_destroy(&bp);
    posenc_context_destroy(&ctx);
    vk_host_close_checked(&h);
}

/* Ops cut into several launches (POSENC_MAX_BINDING = 1024 for this context), recorded:
 * the prepare pass (src/split.c) runs inside the recording too, and what the application
 * submits must equal the same calls on posenc's own submissions, bit for bit (the same
 * shaders and launches). ALiBi [40, 6, 3 heads] f32: a launch per head; relative bias [64,
 * 6, 2 heads] f32: cut along heads and queries (test_faults' cut cases); RoPE [16, 4, 8]
 * f32 with explicit positions: cut along tokens and heads. */
static void test_vk_record_cut(void **state)
{
    (void)state;
    ensure_reference();
    struct vk_host h;
    vk_host_open(&h);
    struct posenc_host_device host = vk_host_device(&h);
    setenv("POSENC_MAX_BINDING", "1024", 1);
    posenc_context *ctx = create_host_ctx(&host);
    unsetenv("POSENC_MAX_BINDING");
    enum { NOPS = 3, AK = 40, AQ = 6, AH = 3, RK = 64, RQ = 6, RH = 2, RB = 32, XD = 16, XH = 4,
           XT = 8 };
    static const int64_t ne[NOPS][3] = {{AK, AQ, AH}, {RK, RQ, RH}, {XD, XH, XT}};
    static float in[NOPS][RK * RQ * RH], table[RB * RH];
    static int32_t pos[XT];
    uint64_t rng = 0x5eed2026u;
    for (int o = 0; o < NOPS; o++)
        for (int i = 0; i < RK * RQ * RH; i++)
            in[o][i] = (float)(2.0 * pc_rand_uniform(&rng) - 1.0);
    for (int i = 0; i < RB * RH; i++)
        table[i] = (float)(2.0 * pc_rand_uniform(&rng) - 1.0);
    for (int i = 0; i < XT; i++)
        pos[i] = 3 * i + 1;
    posenc_buffer *bt = th_upload(ctx, table, sizeof table), *bp = th_upload(ctx, pos, sizeof pos);
    posenc_buffer *bi[NOPS], *bo[NOPS][2];
    posenc_tensor ti[NOPS], to[NOPS][2];
    size_t bytes[NOPS];
    for (int o = 0; o < NOPS; o++) {
        bytes[o] = (size_t)(ne[o][0] * ne[o][1] * ne[o][2]) * sizeof(float);
        bi[o] = th_upload(ctx, in[o], bytes[o]);
        ti[o] = posenc_tensor_contiguous(bi[o], 0, POSENC_DTYPE_F32, ne[o][0], ne[o][1],
                                         ne[o][2], 1);
        for (int r = 0; r < 2; r++) {
            assert_int_equal(posenc_buffer_create(ctx, bytes[o], &bo[o][r]), POSENC_OK);
            to[o][r] = posenc_tensor_contiguous(bo[o][r], 0, POSENC_DTYPE_F32, ne[o][0],
                                                ne[o][1], ne[o][2], 1);
        }
    }
    posenc_tensor tt = posenc_tensor_contiguous(bt, 0, POSENC_DTYPE_F32, RB, RH, 1, 1);
    posenc_tensor tp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, XT, 1, 1, 1);
    const struct posenc_alibi_params ap = {.causal = 1, .q_offset = 2};
    const struct posenc_relbias_params rp = {.q_offset = 5, .k_offset = 1};
    posenc_vulkan_recording *rec = NULL;
    for (int r = 0; r < 2; r++) { /* 0: posenc's own submissions (they build the pipelines) */
        if (r == 1) {
            vk_begin(&h);
            assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_OK);
        }
        assert_int_equal(posenc_alibi(ctx, &ti[0], &to[0][r], &ap), POSENC_OK);
        assert_int_equal(posenc_relbias(ctx, &ti[1], &tt, &to[1][r], &rp), POSENC_OK);
        assert_int_equal(posenc_rope(ctx, &ti[2], &tp, &to[2][r], &g_rope), POSENC_OK);
        if (r == 1) {
            assert_int_equal(posenc_vulkan_record_end(ctx, &rec), POSENC_OK);
            vk_submit(&h, true);
            posenc_vulkan_recording_destroy(&rec);
        } else {
            assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
        }
    }
    for (int o = 0; o < NOPS; o++) {
        float *own = th_download(bo[o][0]), *recd = th_download(bo[o][1]);
        if (memcmp(own, in[o], bytes[o]) == 0) /* the op ran: every one changes its input */
            fail_msg("recorded cut op %d: posenc's own submission left its input as it was", o);
        if (memcmp(recd, own, bytes[o]) != 0)
            fail_msg("recorded cut op %d: the recording's result differs from the same call "
                     "on posenc's own submission", o);
        free(own);
        free(recd);
        posenc_buffer_destroy(&bi[o]);
        posenc_buffer_destroy(&bo[o][0]);
        posenc_buffer_destroy(&bo[o][1]);
    }
    posenc_buffer_destroy(&bt);
    posenc_buffer_destroy(&bp);
    posenc_context_destroy(&ctx);
    vk_host_close_checked(&h);
}

/* A recording left when its context is destroyed (a usage error): the context frees what
 * it holds and logs an error; the handle is then only freed. (On a device of its own: in
 * the ASan build a second posenc context on test_vk_record's VkDevice left lavapipe / LLVM
 * allocations that LeakSanitizer reported, not investigated further.) */
static void test_vk_record_orphan(void **state)
{
    (void)state;
    ensure_reference();
    struct vk_host h;
    vk_host_open(&h);
    struct posenc_host_device host = vk_host_device(&h);
    posenc_context *ctx = NULL;
    posenc_vulkan_recording *rec = NULL;
    struct posenc_context_params lp = g_params;
    lp.log_fn = count_errors;
    g_errors = 0;
    char err[512];
    assert_int_equal(posenc_context_create_from_host(&lp, &host, &ctx, err, sizeof(err)),
                     POSENC_OK);
    posenc_buffer *bx2 = th_upload(ctx, g_x, sizeof(g_x));
    posenc_buffer *bp2 = th_upload(ctx, g_pos, sizeof(g_pos));
    posenc_tensor tx2 = posenc_tensor_contiguous(bx2, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor tp2 = posenc_tensor_contiguous(bp2, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    vk_begin(&h);
    assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_OK);
    assert_int_equal(posenc_rope(ctx, &tx2, &tp2, &tx2, &g_rope), POSENC_OK);
    assert_int_equal(posenc_vulkan_record_end(ctx, &rec), POSENC_OK);
    VK_OK(vkEndCommandBuffer(h.cmd));
    VK_OK(vkResetCommandBuffer(h.cmd, 0)); /* never submitted */
    posenc_buffer_destroy(&bx2);
    posenc_buffer_destroy(&bp2);
    posenc_context_destroy(&ctx);
    assert_int_equal(g_errors, 1);
    assert_non_null(rec);
    posenc_vulkan_recording_destroy(&rec); /* only the handle is left */
    assert_null(rec);

    vk_host_close_checked(&h);
}

/* One-pass decode attention with key splits on a host-owned context, whose ops are each
 * submitted before the call returns (the split and its merge in two submissions), and
 * recorded into the application's buffer: the partials live in the backend's two buffers
 * in the first case (one of them grown for the longer rows) and in a buffer of the
 * recording in the second. The same inputs give the same bits every way (the kernels'
 * accuracy is test_attention_fused_vk's); the application's instance runs with
 * synchronization validation (vk_host_open), which reports a missing barrier. */
static void test_vk_attention(void **state)
{
    (void)state;
    enum { AD = 64, AHQ = 8, AHK = 2, TK0 = 1000, TK1 = 4000 };
    struct vk_host h;
    vk_host_open(&h);
    struct posenc_host_device host = vk_host_device(&h);
    posenc_context *ctx = create_host_ctx(&host);
    static float q[AD * AHQ];
    static uint16_t kv[2][AD * AHK * TK1];
    uint64_t s = 0xa77e;
    for (int i = 0; i < AD * AHQ; i++)
        q[i] = (float)(2.0 * pc_rand_uniform(&s) - 1.0);
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < AD * AHK * TK1; i++)
            kv[m][i] = posenc_f32_to_f16((float)(2.0 * pc_rand_uniform(&s) - 1.0));
    posenc_buffer *bq = th_upload(ctx, q, sizeof q), *bk = th_upload(ctx, kv[0], sizeof kv[0]);
    posenc_buffer *bv = th_upload(ctx, kv[1], sizeof kv[1]);
    posenc_buffer *bo[5];
    for (int i = 0; i < 5; i++)
        assert_int_equal(posenc_buffer_create(ctx, sizeof q, &bo[i]), POSENC_OK);
    posenc_tensor tq = posenc_tensor_contiguous(bq, 0, POSENC_DTYPE_F32, AD, AHQ, 1, 1);
    posenc_tensor to[5];
    for (int i = 0; i < 5; i++)
        to[i] = posenc_tensor_contiguous(bo[i], 0, POSENC_DTYPE_F32, AD, AHQ, 1, 1);
    posenc_tensor tk[2], tv[2];
    for (int n = 0; n < 2; n++) {
        const int64_t tkn = n ? TK1 : TK0;
        tk[n] = posenc_tensor_contiguous(bk, 0, POSENC_DTYPE_F16, AD, AHK, tkn, 1);
        tv[n] = posenc_tensor_contiguous(bv, 0, POSENC_DTYPE_F16, AD, AHK, tkn, 1);
    }
    struct posenc_attention_params ap = {.encoding = POSENC_ATTENTION_ALIBI};

    /* posenc's own submissions: two calls back to back, then one with longer rows */
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[0], NULL, &ap), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[1], NULL, &ap), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[1], &tv[1], &to[3], NULL, &ap), POSENC_OK);
    /* the same calls recorded into the application's buffer */
    posenc_vulkan_recording *rec = NULL;
    vk_begin(&h);
    assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[2], NULL, &ap), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[1], &tv[1], &to[4], NULL, &ap), POSENC_OK);
    assert_int_equal(posenc_vulkan_record_end(ctx, &rec), POSENC_OK);
    vk_submit(&h, true);
    posenc_vulkan_recording_destroy(&rec);
    float *o[5];
    for (int i = 0; i < 5; i++)
        o[i] = th_download(bo[i]);
    assert_memory_equal(o[1], o[0], sizeof q);
    assert_memory_equal(o[2], o[0], sizeof q);
    assert_memory_equal(o[4], o[3], sizeof q);

    /* RoPE (explicit positions): its encoded q and k are temporaries. Recorded, they are
     * made for the call and freed with the recording: the context's scratch (src/scratch.c)
     * keeps nothing more and makes nothing to keep. */
    static int32_t pos[TK0];
    for (int i = 0; i < TK0; i++)
        pos[i] = i;
    posenc_buffer *bp = th_upload(ctx, pos, sizeof pos);
    posenc_tensor tqp = posenc_tensor_contiguous(bp, (TK0 - 1) * 4, POSENC_DTYPE_I32, 1, 1, 1, 1);
    posenc_tensor tkp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, TK0, 1, 1, 1);
    struct posenc_attention_params rp = {.encoding = POSENC_ATTENTION_ROPE, .causal = 1,
                                         .q_pos = &tqp, .k_pos = &tkp};
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[0], NULL, &rp), POSENC_OK);
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    uint64_t made0, made1;
    int kept0, kept1;
    size_t bytes0, bytes1;
    pe_scratch_stats(ctx, &made0, &kept0, &bytes0);
    vk_begin(&h);
    assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[1], NULL, &rp), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[2], NULL, &rp), POSENC_OK);
    assert_int_equal(posenc_vulkan_record_end(ctx, &rec), POSENC_OK);
    pe_scratch_stats(ctx, &made1, &kept1, &bytes1);
    assert_int_equal(made1, made0);
    assert_int_equal(kept1, kept0);
    assert_int_equal(bytes1, bytes0);
    vk_submit(&h, true);
    posenc_vulkan_recording_destroy(&rec);
    for (int i = 0; i < 3; i++) {
        free(o[i]);
        o[i] = th_download(bo[i]);
    }
    assert_memory_equal(o[1], o[0], sizeof q);
    assert_memory_equal(o[2], o[0], sizeof q);

    /* RoPE with implicit positions (q_pos and k_pos NULL: the query at q_offset, key k at
     * k): the positions are made on the device (no posenc_buffer_write, which recording
     * refuses), on posenc's own submissions and recorded, the same bits as the explicit
     * positions (with the causal mask's q_offset as well) give. Before 2026-12-04 the
     * recorded call returned UNSUPPORTED. */
    struct posenc_attention_params ip = {.encoding = POSENC_ATTENTION_ROPE, .causal = 1,
                                         .q_offset = TK0 - 1};
    rp.q_offset = TK0 - 1;
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[0], NULL, &rp), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[3], NULL, &ip), POSENC_OK);
    vk_begin(&h);
    assert_int_equal(posenc_vulkan_record_begin(ctx, h.cmd), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[1], NULL, &ip), POSENC_OK);
    assert_int_equal(posenc_attention(ctx, &tq, &tk[0], &tv[0], &to[2], NULL, &ip), POSENC_OK);
    assert_int_equal(posenc_vulkan_record_end(ctx, &rec), POSENC_OK);
    vk_submit(&h, true);
    posenc_vulkan_recording_destroy(&rec);
    for (int i = 0; i < 4; i++) {
        free(o[i]);
        o[i] = th_download(bo[i]);
    }
    assert_memory_equal(o[3], o[0], sizeof q);
    assert_memory_equal(o[1], o[0], sizeof q);
    assert_memory_equal(o[2], o[0], sizeof q);
    posenc_buffer_destroy(&bp);
    for (int i = 0; i < 5; i++) {
        free(o[i]);
        posenc_buffer_destroy(&bo[i]);
    }
    posenc_buffer_destroy(&bq);
    posenc_buffer_destroy(&bk);
    posenc_buffer_destroy(&bv);
    posenc_context_destroy(&ctx);
    vk_host_close_checked(&h);
}

#endif

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "vk_record");
    if (rc >= 0)
        return rc;
    struct CMUnitTest tests[5];
    size_t n = 0;
    if (th.kind != POSENC_BACKEND_VULKAN) {
        fprintf(stderr, "vk_record: Vulkan only\n");
        th_fini();
        return 77;
    }
#if TH_HAVE_VULKAN
    make_inputs();
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_vk_record);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_vk_record_orphan);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_vk_record_many);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_vk_record_cut);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_vk_attention);
#else
    fprintf(stderr, "vk_record: posenc has Vulkan but this test was built without it\n");
    th_fini();
    return 1;
#endif
    rc = th_run("vk_record", tests, n);
    th_fini();
    return rc;
}
