/*
 * test_reliability.c - issue #16 on one backend (--backend NAME): inputs at the edges of
 * what posenc accepts, each once a crash, a hang, a wrong status or a clobbered output.
 * A failing call must return its documented status, leave a message and write nothing.
 * Also POSENC_CL_KERNEL_DIR's sources read from a folder (test_cl_kernel_dir).
 */
#include "harness.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------ */

static float *random_floats(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof(float));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

static void assert_close(const float *got, const float *want, size_t n, float tol,
                         const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= tol) && !(isinf(got[i]) && got[i] == want[i]))
            fail_msg("%s: element %zu is %.9g, want %.9g", what, i, got[i], want[i]);
}

/* ---- 1. buffer sizes whose round-up wraps ------------------------------------------ */

static void test_buffer_create_huge(void **state)
{
    (void)state;
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 2, SIZE_MAX - 3, SIZE_MAX - 63,
                            SIZE_MAX - 64, (size_t)PTRDIFF_MAX + 1};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        posenc_buffer *b = (posenc_buffer *)1;
        posenc_status st = posenc_buffer_create(th.dut, sizes[i], &b);
        if (st != POSENC_ERR_UNSUPPORTED)
            fail_msg("posenc_buffer_create(%zu) = %s (%s), want UNSUPPORTED", sizes[i],
                     posenc_status_string(st), posenc_context_last_error(th.dut));
        assert_null(b);
        assert_true(strlen(posenc_context_last_error(th.dut)) > 0);
    }
    struct posenc_device_info info;
    assert_int_equal(posenc_context_get_info(th.dut, &info), POSENC_OK);
    /* the reported largest buffer is one the backend would at least try */
    assert_true(info.max_buffer_size < (uint64_t)SIZE_MAX - 2);
    th_check_warnings();
}

/* ---- 3. relbias cut along keys or queries ------------------------------------------- */

/* dst = logits + bias on ctx, returned as a malloc'd array. */
static float *run_relbias(posenc_context *ctx, int64_t K, int64_t Q, int64_t H, int64_t B,
                          const float *logits, const float *table, int n_buckets,
                          const struct posenc_relbias_params *p)
{
    const size_t n = (size_t)(K * Q * H * B);
    posenc_buffer *bl = logits ? th_upload(ctx, logits, n * sizeof(float)) : NULL;
    posenc_buffer *bt = th_upload(ctx, table, (size_t)n_buckets * (size_t)H * sizeof(float));
    posenc_buffer *bd = NULL;
    assert_int_equal(posenc_buffer_create(ctx, n * sizeof(float), &bd), POSENC_OK);
    posenc_tensor tl = posenc_tensor_contiguous(bl, 0, POSENC_DTYPE_F32, K, Q, H, B);
    posenc_tensor tt = posenc_tensor_contiguous(bt, 0, POSENC_DTYPE_F32, n_buckets, H, 1, 1);
    posenc_tensor td = posenc_tensor_contiguous(bd, 0, POSENC_DTYPE_F32, K, Q, H, B);
    posenc_status st = posenc_relbias(ctx, logits ? &tl : NULL, &tt, &td, p);
    if (st != POSENC_OK)
        fail_msg("posenc_relbias K=%lld Q=%lld: %s: %s", (long long)K, (long long)Q,
                 posenc_status_string(st), posenc_context_last_error(ctx));
    float *out = th_download(bd);
    posenc_buffer_destroy(&bl);
    posenc_buffer_destroy(&bt);
    posenc_buffer_destroy(&bd);
    return out;
}

static void test_relbias_cut_keys_queries(void **state)
{
    (void)state;
    /* 1 KiB bindings: [64 keys x 8 queries] rows are cut along queries, [512 x 2] along
     * keys; offsets make the windows of relative positions start away from 0 */
    posenc_context *ctx = th_limited_ctx(1024);
    const int64_t shapes[][2] = {{64, 8}, {512, 2}, {300, 5}};
    const int n_buckets = 32;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int64_t K = shapes[s][0], Q = shapes[s][1], H = 3, B = 2;
        float *logits = random_floats((size_t)(K * Q * H * B), 7u + (unsigned)s);
        float *table = random_floats((size_t)n_buckets * H, 99u);
        for (int causal = 0; causal < 2; causal++) {
            struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5, .num_buckets = n_buckets,
                                              .max_distance = 40, .causal = causal,
                                              .q_offset = 17, .k_offset = 3};
            for (int with_x = 0; with_x < 2; with_x++) {
                const float *x = with_x ? logits : NULL;
                float *want = run_relbias(th.ref, K, Q, H, B, x, table, n_buckets, &p);
                float *got = run_relbias(ctx, K, Q, H, B, x, table, n_buckets, &p);
                assert_close(got, want, (size_t)(K * Q * H * B), 1e-6f, "relbias, cut");
                free(want);
                free(got);
            }
        }
        free(logits);
        free(table);
    }
    posenc_context_destroy(&ctx);
    th_check_warnings();
}

/* ---- 8. messages, statuses and element-level overlap ------------------------------- */

struct log_capture {
    int errors;
    char text[8192];
};

static void capture_log(posenc_log_level level, const char *msg, void *user)
{
    struct log_capture *c = user;
    if (level == POSENC_LOG_ERROR)
        c->errors++;
    size_t n = strlen(c->text);
    snprintf(c->text + n, sizeof(c->text) - n, "[%d] %s\n", (int)level, msg);
}

/* AUTO that succeeds logs no POSENC_LOG_ERROR line: a skipped backend is INFO (no driver
 * or no GPU) or WARN (a driver that fails), once, with its reason. */
static void test_auto_logs_no_error(void **state)
{
    (void)state;
    struct log_capture cap = {0, ""};
    struct posenc_context_params p = {.backend = POSENC_BACKEND_AUTO, .log_fn = capture_log,
                                      .log_level = POSENC_LOG_DEBUG, .log_user_data = &cap};
    posenc_context *ctx = NULL;
    char err[512];
    char *saved = getenv("POSENC_BACKEND") ? strdup(getenv("POSENC_BACKEND")) : NULL;
    unsetenv("POSENC_BACKEND");
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    if (saved) {
        setenv("POSENC_BACKEND", saved, 1);
        free(saved);
    }
    assert_int_equal(st, POSENC_OK);
    if (cap.errors)
        fail_msg("AUTO succeeded but logged %d ERROR lines:\n%s", cap.errors, cap.text);
    assert_non_null(strstr(cap.text, "using backend"));
    posenc_context_destroy(&ctx);
}

/* A buffer whose context was destroyed is named as such, not "of another context". */
static void test_orphan_buffer_message(void **state)
{
    (void)state;
    struct posenc_context_params p = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                      .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    assert_int_equal(posenc_context_create(&p, &ctx, NULL, 0), POSENC_OK);
    posenc_buffer *orphan = NULL, *good = NULL;
    assert_int_equal(posenc_buffer_create(ctx, 256, &orphan), POSENC_OK);
    posenc_context_destroy(&ctx);
    assert_int_equal(posenc_buffer_create(th.dut, 256, &good), POSENC_OK);
    posenc_tensor src = posenc_tensor_contiguous(orphan, 0, POSENC_DTYPE_F32, 64, 1, 1, 1);
    posenc_tensor dst = posenc_tensor_contiguous(good, 0, POSENC_DTYPE_F32, 64, 1, 1, 1);
    assert_int_equal(posenc_copy(th.dut, &src, &dst), POSENC_ERR_INVALID_ARGUMENT);
    const char *m = posenc_context_last_error(th.dut);
    if (!strstr(m, "src->buffer") || !strstr(m, "destroyed"))
        fail_msg("message \"%s\" does not say src's context was destroyed", m);
    posenc_buffer_destroy(&orphan);
    posenc_buffer_destroy(&good);
    th_check_warnings();
}

/* POSENC_MAX_BINDING past 2^64 - 1 (or not a plain decimal) is refused, not saturated. */
static void test_max_binding_overflow(void **state)
{
    (void)state;
    const char *bad[] = {"99999999999999999999999", "18446744073709551616", " 4096", "+4096",
                         " -4096"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("POSENC_MAX_BINDING", bad[i], 1);
        struct posenc_context_params p = {.backend = th.kind};
        posenc_context *ctx = NULL;
        char err[512] = "";
        posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
        unsetenv("POSENC_MAX_BINDING");
        if (st != POSENC_ERR_INVALID_ARGUMENT || ctx || !strstr(err, "POSENC_MAX_BINDING"))
            fail_msg("POSENC_MAX_BINDING=\"%s\": %s, \"%s\"", bad[i], posenc_status_string(st),
                     err);
        posenc_context_destroy(&ctx);
    }
    setenv("POSENC_MAX_BINDING", "18446744073709551615", 1);
    struct posenc_context_params p = {.backend = th.kind};
    posenc_context *ctx = NULL;
    posenc_status st = posenc_context_create(&p, &ctx, NULL, 0);
    unsetenv("POSENC_MAX_BINDING");
    assert_int_equal(st, POSENC_OK);
    posenc_context_destroy(&ctx);
}

/* A fused QKV tensor [D, pad + Hq + Hk + Hv heads, T, B]: q and k are interleaved per token
 * in one buffer but share no element; rotating both in place is valid. */
static void rope_fused_qkv(posenc_dtype dt, int64_t pad)
{
    const int64_t D = 8, Hq = 4, Hk = 2, Hv = 2, T = 5, B = 2;
    const int64_t row = pad + (Hq + Hk + Hv) * D; /* elements per token */
    const size_t es = posenc_dtype_size(dt), n = (size_t)(row * T * B);
    float *vals = random_floats(n, 5u);
    void *host = malloc(n * es);
    assert_non_null(host);
    for (size_t i = 0; i < n; i++) {
        if (dt == POSENC_DTYPE_F16)
            ((uint16_t *)host)[i] = posenc_f32_to_f16(vals[i]);
        else
            ((float *)host)[i] = vals[i];
    }
    int32_t pos[5 * 2];
    for (int i = 0; i < T * B; i++)
        pos[i] = 3 + 7 * i;
    struct posenc_rope_params rp = {.mode = POSENC_ROPE_NEOX};
    void *out[2];
    for (int r = 0; r < 2; r++) {
        posenc_context *ctx = r ? th.dut : th.ref;
        posenc_buffer *b = th_upload(ctx, host, n * es);
        posenc_buffer *bp = th_upload(ctx, pos, sizeof(pos));
        posenc_tensor q = {.buffer = b, .offset = (size_t)pad * es, .dtype = dt,
                           .ne = {D, Hq, T, B},
                           .nb = {(int64_t)es, D * (int64_t)es, row * (int64_t)es,
                                  row * T * (int64_t)es}};
        posenc_tensor k = q;
        k.offset = (size_t)(pad + Hq * D) * es;
        k.ne[1] = Hk;
        posenc_tensor tp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, T, 1, B, 1);
        posenc_status st;
        if (r == 0) { /* the reference: q and k rotated one at a time */
            st = posenc_rope(ctx, &q, &tp, &q, &rp);
            if (st == POSENC_OK)
                st = posenc_rope(ctx, &k, &tp, &k, &rp);
        } else {
            st = posenc_rope_qk(ctx, &q, &k, &tp, &q, &k, &rp);
        }
        if (st != POSENC_OK)
            fail_msg("fused QKV (%s, pad %lld): %s: %s", posenc_dtype_name(dt), (long long)pad,
                     posenc_status_string(st), posenc_context_last_error(ctx));
        if (r == 1) {
            /* an output that does share elements with the other input is still refused */
            posenc_tensor k_bad = k;
            k_bad.offset -= (size_t)es;
            assert_int_equal(posenc_rope_qk(ctx, &q, &k_bad, &tp, &q, &k_bad, &rp),
                             POSENC_ERR_INVALID_ARGUMENT);
            assert_non_null(strstr(posenc_context_last_error(ctx), "overlaps"));
        }
        out[r] = th_download(b);
        posenc_buffer_destroy(&b);
        posenc_buffer_destroy(&bp);
    }
    for (size_t i = 0; i < n; i++) {
        float w = dt == POSENC_DTYPE_F16 ? posenc_f16_to_f32(((uint16_t *)out[0])[i])
                                         : ((float *)out[0])[i];
        float g = dt == POSENC_DTYPE_F16 ? posenc_f16_to_f32(((uint16_t *)out[1])[i])
                                         : ((float *)out[1])[i];
        float tol = dt == POSENC_DTYPE_F16 ? 2e-3f : 2e-6f;
        if (!(fabsf(g - w) <= tol))
            fail_msg("fused QKV (%s, pad %lld): element %zu is %g, want %g",
                     posenc_dtype_name(dt), (long long)pad, i, g, w);
    }
    free(out[0]);
    free(out[1]);
    free(vals);
    free(host);
}

static void test_rope_qk_fused_in_place(void **state)
{
    (void)state;
    rope_fused_qkv(POSENC_DTYPE_F32, 0);
    rope_fused_qkv(POSENC_DTYPE_F32, 1);
    rope_fused_qkv(POSENC_DTYPE_F16, 0);
    rope_fused_qkv(POSENC_DTYPE_F16, 1); /* q's and k's edges share 32-bit words */
    th_check_warnings();
}

/* ---- 2. posenc_attention over query blocks: a failing call writes nothing ------------- */

static char attn_msg[512]; /* the message of attention_poisoned's call */

/* Attention on `ctx`: q [8, 1, Tq], k [8, 1, 16], v [Dv, 1, 16], dst [Dv, 1, Tq], weights
 * [16, Tq, 1, 1], dst and weights poisoned first. Returns the status; *changed says
 * whether any byte of dst or weights differs from the poison afterwards. */
static posenc_status attention_poisoned(posenc_context *ctx, int64_t Tq, int64_t Dv,
                                        const struct posenc_attention_params *p, bool *changed)
{
    const int64_t D = 8, Tk = 16;
    float *q = random_floats((size_t)(D * Tq), 1u), *kv = random_floats((size_t)(Dv + D) * Tk, 2u);
    posenc_buffer *bq = th_upload(ctx, q, (size_t)(D * Tq) * 4);
    posenc_buffer *bkv = th_upload(ctx, kv, (size_t)(Dv + D) * (size_t)Tk * 4);
    const size_t nd = (size_t)(Dv * Tq) * 4, nw = (size_t)(Tk * Tq) * 4;
    unsigned char *poison = malloc(nd > nw ? nd : nw), *back = malloc(nd > nw ? nd : nw);
    assert_non_null(poison);
    assert_non_null(back);
    memset(poison, 0xA5, nd > nw ? nd : nw);
    posenc_buffer *bd = th_upload(ctx, poison, nd), *bw = th_upload(ctx, poison, nw);
    posenc_tensor tq = posenc_tensor_contiguous(bq, 0, POSENC_DTYPE_F32, D, 1, Tq, 1);
    posenc_tensor tk = posenc_tensor_contiguous(bkv, 0, POSENC_DTYPE_F32, D, 1, Tk, 1);
    posenc_tensor tv = posenc_tensor_contiguous(bkv, (size_t)(D * Tk) * 4, POSENC_DTYPE_F32, Dv,
                                                1, Tk, 1);
    posenc_tensor td = posenc_tensor_contiguous(bd, 0, POSENC_DTYPE_F32, Dv, 1, Tq, 1);
    posenc_tensor tw = posenc_tensor_contiguous(bw, 0, POSENC_DTYPE_F32, Tk, Tq, 1, 1);
    posenc_status st = posenc_attention(ctx, &tq, &tk, &tv, &td, &tw, p);
    snprintf(attn_msg, sizeof(attn_msg), "%s", posenc_context_last_error(ctx));
    *changed = false;
    assert_int_equal(posenc_buffer_read(bd, 0, back, nd), POSENC_OK);
    *changed |= memcmp(back, poison, nd) != 0;
    assert_int_equal(posenc_buffer_read(bw, 0, back, nw), POSENC_OK);
    *changed |= memcmp(back, poison, nw) != 0;
    posenc_buffer_destroy(&bq);
    posenc_buffer_destroy(&bkv);
    posenc_buffer_destroy(&bd);
    posenc_buffer_destroy(&bw);
    free(q);
    free(kv);
    free(poison);
    free(back);
    return st;
}

static void test_attention_blocks_write_nothing_on_failure(void **state)
{
    (void)state;
    /* 1 KiB bindings: 40 queries of 16 keys run as blocks of 16, 16 and 8 */
    posenc_context *ctx = th_limited_ctx(1024);
    bool changed;
    /* control: the blocks run and write */
    struct posenc_attention_params p = {.encoding = POSENC_ATTENTION_ALIBI, .causal = 1};
    assert_int_equal(attention_poisoned(ctx, 40, 8, &p, &changed), POSENC_OK);
    assert_true(changed);
    /* ALiBi: the queries of the third block pass 2^24 -- refused before the first block,
     * with the caller's range in the message */
    p.q_offset = (1 << 24) - 20;
    p.k_offset = (1 << 24) - 30;
    posenc_status st = attention_poisoned(ctx, 40, 8, &p, &changed);
    if (st != POSENC_ERR_INVALID_ARGUMENT)
        fail_msg("ALiBi past 2^24: %s (%s)", posenc_status_string(st),
                 attn_msg);
    if (changed)
        fail_msg("ALiBi past 2^24: dst or weights written before the refusal (%s)",
                 attn_msg);
    if (!strstr(attn_msg, "16777235"))
        fail_msg("ALiBi past 2^24: message \"%s\" does not give the last query position "
                 "16777235", attn_msg);
    /* v (64 x 16 floats, 4 KiB) over the binding limit: refused before the softmax writes
     * weights */
    struct posenc_attention_params p2 = {.encoding = POSENC_ATTENTION_NONE};
    st = attention_poisoned(ctx, 4, 64, &p2, &changed);
    if (st != POSENC_ERR_UNSUPPORTED)
        fail_msg("v over the binding limit: %s (%s)", posenc_status_string(st),
                 attn_msg);
    if (changed)
        fail_msg("v over the binding limit: weights written before the refusal");
    assert_non_null(strstr(attn_msg, "v spans"));
    posenc_context_destroy(&ctx);
    th_check_warnings();
}

/* ---- 5. DYNAMIC_NTK / LONGROPE seq_len from positions: host work bounded by bytes ----- */

static posenc_status rope_empty_heads(posenc_buffer *bp, const int64_t pne[4],
                                      const int64_t pnb[4], posenc_rope_scaling_kind kind)
{
    static const float ones[4] = {1, 1, 1, 1};
    posenc_buffer *bx = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, 64, &bx), POSENC_OK);
    /* x and dst have no heads (empty): only the positions are scanned */
    posenc_tensor x = {.buffer = bx, .dtype = POSENC_DTYPE_F32,
                       .ne = {8, 0, pne[0], pne[2]}, .nb = {4, 32, 32, 32}};
    posenc_tensor pos = {.buffer = bp, .dtype = POSENC_DTYPE_I32};
    memcpy(pos.ne, pne, sizeof(pos.ne));
    memcpy(pos.nb, pnb, sizeof(pos.nb));
    const bool lr = kind == POSENC_ROPE_SCALING_LONGROPE;
    struct posenc_rope_params rp = {.scaling = {.kind = kind, .factor = 2.0f,
                                                .original_ctx = 16,
                                                .short_factor = lr ? ones : NULL,
                                                .long_factor = lr ? ones : NULL}};
    alarm(60); /* hours before the fix */
    posenc_status st = posenc_rope(th.dut, &x, &pos, &x, &rp);
    alarm(0);
    posenc_buffer_destroy(&bx);
    return st;
}

static void test_rope_seq_len_degenerate_positions(void **state)
{
    (void)state;
    const posenc_rope_scaling_kind kinds[2] = {POSENC_ROPE_SCALING_DYNAMIC_NTK,
                                               POSENC_ROPE_SCALING_LONGROPE};
    /* 2^20 x 2^20 positions over 8 MiB (t and b strides equal) */
    const size_t words = ((size_t)1 << 21) - 1;
    int32_t *pv = malloc(words * sizeof(int32_t));
    assert_non_null(pv);
    for (size_t i = 0; i < words; i++)
        pv[i] = (int32_t)(i % 1000);
    posenc_buffer *bp = th_upload(th.dut, pv, words * sizeof(int32_t));
    free(pv);
    for (int k = 0; k < 2; k++) {
        /* a stride-0 dimension of 2^40 tokens */
        const int64_t ne1[4] = {(int64_t)1 << 40, 1, 1, 1}, nb1[4] = {0, 4, 4, 4};
        posenc_status st = rope_empty_heads(bp, ne1, nb1, kinds[k]);
        if (st != POSENC_OK)
            fail_msg("stride-0 positions: %s", posenc_context_last_error(th.dut));
        const int64_t ne2[4] = {(int64_t)1 << 20, 1, (int64_t)1 << 20, 1}, nb2[4] = {4, 4, 4, 4};
        st = rope_empty_heads(bp, ne2, nb2, kinds[k]);
        if (st != POSENC_OK)
            fail_msg("self-overlapping positions: %s", posenc_context_last_error(th.dut));
    }
    posenc_buffer_destroy(&bp);

    /* the scan through reached words finds the same length: self-overlapping positions
     * [3 tokens, 1 stream, 2 batches] over 4 words give what seq_len = 41 gives */
    const int32_t pw[4] = {5, 40, 7, 9};
    float xv[8 * 2 * 3 * 2];
    for (int i = 0; i < 96; i++)
        xv[i] = (float)(i % 7) - 3.0f;
    posenc_buffer *bx = th_upload(th.dut, xv, sizeof(xv)), *bd = NULL;
    bp = th_upload(th.dut, pw, sizeof(pw));
    assert_int_equal(posenc_buffer_create(th.dut, sizeof(xv), &bd), POSENC_OK);
    posenc_tensor x = posenc_tensor_contiguous(bx, 0, POSENC_DTYPE_F32, 8, 2, 3, 2);
    posenc_tensor d = posenc_tensor_contiguous(bd, 0, POSENC_DTYPE_F32, 8, 2, 3, 2);
    posenc_tensor pos = {.buffer = bp, .dtype = POSENC_DTYPE_I32, .ne = {3, 1, 2, 1},
                         .nb = {4, 4, 4, 4}};
    float *res[3];
    const int32_t lens[3] = {0, 41, 40};
    for (int i = 0; i < 3; i++) {
        struct posenc_rope_params rp = {.scaling = {.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK,
                                                    .factor = 2.0f, .original_ctx = 16,
                                                    .seq_len = lens[i]}};
        assert_int_equal(posenc_rope(th.dut, &x, &pos, &d, &rp), POSENC_OK);
        res[i] = th_download(bd);
    }
    assert_memory_equal(res[0], res[1], sizeof(xv));
    assert_memory_not_equal(res[0], res[2], sizeof(xv));
    for (int i = 0; i < 3; i++)
        free(res[i]);
    posenc_buffer_destroy(&bx);
    posenc_buffer_destroy(&bd);
    posenc_buffer_destroy(&bp);
    th_check_warnings();
}

/* ---- 5, 6. the OpenCL program-binary cache: no hang, and trusted only when private ---- */

struct cache_log {
    int loaded, built;
};

static void cache_log_fn(posenc_log_level level, const char *msg, void *user)
{
    struct cache_log *c = user;
    if (strstr(msg, "opencl: loaded from the binary cache copy.cl"))
        c->loaded++;
    else if (strstr(msg, "opencl: built copy.cl"))
        c->built++;
    if (level == POSENC_LOG_WARN && !strstr(msg, "program-binary cache"))
        th.warnings++; /* a driver message; the cache's own refusal is expected */
}

/* A fresh OpenCL context, with the environment variable `var` set to `val` while it lives,
 * copies the 64 floats of src from f32 to dst_dtype into dst (256 bytes, which start as
 * 0x7e), logging through log_fn (NULL: none) from INFO up. Returns the copy's status and
 * *msg its error text. */
static posenc_status fresh_cl_copy(const char *var, const char *val, posenc_dtype dst_dtype,
                                   posenc_log_fn log_fn, void *log_user, const float *src,
                                   unsigned char *dst, char *msg, size_t msg_size)
{
    setenv(var, val, 1);
    struct posenc_context_params p = {.backend = POSENC_BACKEND_OPENCL, .log_fn = log_fn,
                                      .log_level = POSENC_LOG_INFO, .log_user_data = log_user};
    posenc_context *ctx = NULL;
    char err[512];
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    if (st != POSENC_OK) {
        unsetenv(var);
        fail_msg("opencl context: %s", err);
    }
    memset(dst, 0x7e, 256);
    posenc_buffer *bs = th_upload(ctx, src, 256), *bd = th_upload(ctx, dst, 256);
    const posenc_tensor ts = posenc_tensor_contiguous(bs, 0, POSENC_DTYPE_F32, 64, 1, 1, 1);
    const posenc_tensor td = posenc_tensor_contiguous(bd, 0, dst_dtype, 64, 1, 1, 1);
    alarm(120); /* a hang (a FIFO read) fails the test instead of blocking it */
    st = posenc_copy(ctx, &ts, &td);
    snprintf(msg, msg_size, "%s", posenc_context_last_error(ctx));
    assert_int_equal(posenc_buffer_read(bd, 0, dst, 256), POSENC_OK);
    alarm(0);
    unsetenv(var);
    posenc_buffer_destroy(&bs);
    posenc_buffer_destroy(&bd);
    posenc_context_destroy(&ctx);
    return st;
}

/* A fresh OpenCL context on cache folder `dir` copies 64 floats from f32 to dst_dtype;
 * the result must be right. Returns how the copy.cl program came: 'L' loaded from the
 * cache, 'B' built from source. */
static char cache_copy(const char *dir, posenc_dtype dst_dtype)
{
    struct cache_log log = {0, 0};
    float src[64];
    for (int i = 0; i < 64; i++)
        src[i] = (float)i * 0.5f - 3.0f;
    unsigned char got[256];
    char msg[512];
    if (fresh_cl_copy("POSENC_CACHE_DIR", dir, dst_dtype, cache_log_fn, &log, src, got, msg,
                      sizeof(msg)) != POSENC_OK)
        fail_msg("posenc_copy: %s", msg);
    for (int i = 0; i < 64; i++) {
        float v = dst_dtype == POSENC_DTYPE_F16 ? posenc_f16_to_f32(((uint16_t *)got)[i])
                                                : ((float *)got)[i];
        if (v != src[i])
            fail_msg("copy to %s through the cache in %s: element %d is %g, want %g",
                     posenc_dtype_name(dst_dtype), dir, i, v, src[i]);
    }
    assert_true(log.loaded + log.built == 1);
    return log.loaded ? 'L' : 'B';
}

/* The .clbin entries of dir, as a set of names (each up to 63 chars, at most 16). */
struct entries {
    int n;
    char name[16][64];
};

static void list_entries(const char *dir, struct entries *e)
{
    memset(e, 0, sizeof(*e));
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (strstr(de->d_name, ".clbin") && !strstr(de->d_name, ".tmp") && e->n < 16 &&
            strlen(de->d_name) < 64)
            strcpy(e->name[e->n++], de->d_name);
    closedir(d);
}

/* The one entry of `after` that `before` lacks, as dir/name. */
static void new_entry(const char *dir, const struct entries *before,
                      const struct entries *after, char *path, size_t size)
{
    for (int i = 0; i < after->n; i++) {
        int seen = 0;
        for (int j = 0; j < before->n; j++)
            seen |= !strcmp(after->name[i], before->name[j]);
        if (!seen) {
            snprintf(path, size, "%s/%s", dir, after->name[i]);
            return;
        }
    }
    fail_msg("no new cache entry in %s", dir);
}

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)n);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return p;
}

static void spit(const char *path, const void *data, size_t n, mode_t mode)
{
    remove(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_cl_program_cache(void **state)
{
    (void)state;
    if (th.kind != POSENC_BACKEND_OPENCL)
        skip();
    char dir[] = "/tmp/posenc-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[128], e32[256], e16[256], tmp[300];
    snprintf(sub, sizeof(sub), "%s/cache", dir);

    /* a folder posenc creates is private; the f32 -> f32 and f32 -> f16 copies store one
     * entry each (same kernel names, other build options) */
    struct entries before, after;
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F32), 'B');
    struct stat st;
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    list_entries(sub, &after);
    assert_int_equal(after.n, 1);
    snprintf(e32, sizeof(e32), "%s/%s", sub, after.name[0]);
    before = after;
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
    list_entries(sub, &after);
    new_entry(sub, &before, &after, e16, sizeof(e16));
    assert_int_equal(stat(e16, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'L'); /* the cache works */

    /* 6: an entry holding another program's binary under this one's identity (header
     * "PECLBIN?", u32 n, identity, u64 size, u64 hash, binary) is never loaded */
    size_t n32, n16;
    unsigned char *b32 = slurp(e32, &n32), *b16 = slurp(e16, &n16);
    uint32_t l32, l16;
    memcpy(&l32, b32 + 8, 4);
    memcpy(&l16, b16 + 8, 4);
    const size_t h32 = 12 + l32, h16 = 12 + l16; /* where size, hash, binary start */
    unsigned char *forged = malloc(h16 + (n32 - h32));
    assert_non_null(forged);
    memcpy(forged, b16, h16);
    memcpy(forged + h16, b32 + h32, n32 - h32);
    spit(e16, forged, h16 + (n32 - h32), 0600);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
    free(forged);

    /* 5: a FIFO at the entry's path neither blocks nor is used */
    assert_int_equal(remove(e16), 0);
    assert_int_equal(mkfifo(e16, 0600), 0);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
    /* the build replaced the FIFO with a good entry again */
    assert_int_equal(lstat(e16, &st), 0);
    assert_true(S_ISREG(st.st_mode));

    /* 6: entries that are symbolic links, or writable by others, are not read */
    snprintf(tmp, sizeof(tmp), "%s/elsewhere.clbin", dir);
    spit(tmp, b16, n16, 0600);
    assert_int_equal(remove(e16), 0);
    assert_int_equal(symlink(tmp, e16), 0);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
    spit(e16, b16, n16, 0666);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
    spit(e16, b16, n16, 0600);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'L');

    /* 6: a folder that others may write is neither read nor written */
    assert_int_equal(chmod(sub, 0777), 0);
    assert_int_equal(remove(e16), 0);
    spit(e16, b16, n16, 0600);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
    assert_int_equal(remove(e16), 0);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
    assert_int_equal(stat(e16, &st), -1); /* nothing stored */
    assert_int_equal(chmod(sub, 0700), 0);
    spit(e16, b16, n16, 0600);
    assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'L');
    if (geteuid() == 0) { /* owned by someone else (only root can arrange it) */
        assert_int_equal(chown(e16, 65534, 65534), 0);
        assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
        spit(e16, b16, n16, 0600);
        assert_int_equal(chown(sub, 65534, 65534), 0);
        assert_int_equal(cache_copy(sub, POSENC_DTYPE_F16), 'B');
        assert_int_equal(chown(sub, 0, 0), 0);
    }
    free(b32);
    free(b16);

    /* clean up */
    list_entries(sub, &after);
    for (int i = 0; i < after.n; i++) {
        snprintf(tmp, sizeof(tmp), "%s/%s", sub, after.name[i]);
        remove(tmp);
    }
    snprintf(tmp, sizeof(tmp), "%s/elsewhere.clbin", dir);
    remove(tmp);
    rmdir(sub);
    rmdir(dir);
    th_check_warnings();
}

/* ---- POSENC_CL_KERNEL_DIR ----------------------------------------------------------- */

/* The embedded OpenCL sources (src/embed.py's table; weak: absent without OpenCL). */
struct embedded_cl {
    const char *name;
    const unsigned char *data;
    size_t size;
};
extern const struct embedded_cl pe_cl_files[] __attribute__((weak));
extern const size_t pe_cl_file_count __attribute__((weak));

/* fresh_cl_copy (f32 -> f32) with its sources from `dir` */
static posenc_status kernel_dir_copy(const char *dir, const float *src, unsigned char *dst,
                                     char *msg, size_t msg_size)
{
    return fresh_cl_copy("POSENC_CL_KERNEL_DIR", dir, POSENC_DTYPE_F32, NULL, NULL, src, dst,
                         msg, msg_size);
}

/* POSENC_CL_KERNEL_DIR (README): the OpenCL sources read from a folder instead of the
 * embedded copies. The embedded files written there give the copy's result; a copy.cl
 * that does not compile, a missing copy.cl and a FIFO in its place (which must not block)
 * each fail with POSENC_ERR_BACKEND and leave dst untouched, the last two naming the
 * variable and the path. */
static void test_cl_kernel_dir(void **state)
{
    (void)state;
    if (th.kind != POSENC_BACKEND_OPENCL || !&pe_cl_file_count)
        skip();
    char dir[] = "/tmp/posenc-cl-XXXXXX", path[300];
    assert_non_null(mkdtemp(dir));
    for (size_t i = 0; i < pe_cl_file_count; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, pe_cl_files[i].name);
        spit(path, pe_cl_files[i].data, pe_cl_files[i].size, 0600);
    }
    float src[64];
    for (int i = 0; i < 64; i++)
        src[i] = (float)i * 0.25f - 5.0f;
    unsigned char dst[256], poison[256];
    memset(poison, 0x7e, sizeof(poison));
    char msg[1024];
    assert_int_equal(kernel_dir_copy(dir, src, dst, msg, sizeof(msg)), POSENC_OK);
    assert_memory_equal(dst, src, sizeof(src));

    snprintf(path, sizeof(path), "%s/copy.cl", dir);
    static const char broken[] = "__kernel void pe_copy(__global float *x) { x[0] = ; }\n";
    spit(path, broken, sizeof(broken) - 1, 0600);
    assert_int_equal(kernel_dir_copy(dir, src, dst, msg, sizeof(msg)), POSENC_ERR_BACKEND);
    assert_memory_equal(dst, poison, sizeof(poison));

    assert_int_equal(remove(path), 0);
    assert_int_equal(kernel_dir_copy(dir, src, dst, msg, sizeof(msg)), POSENC_ERR_BACKEND);
    assert_memory_equal(dst, poison, sizeof(poison));
    assert_non_null(strstr(msg, "POSENC_CL_KERNEL_DIR"));
    assert_non_null(strstr(msg, path));

    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(kernel_dir_copy(dir, src, dst, msg, sizeof(msg)), POSENC_ERR_BACKEND);
    assert_memory_equal(dst, poison, sizeof(poison));
    assert_non_null(strstr(msg, "POSENC_CL_KERNEL_DIR"));
    assert_non_null(strstr(msg, path));

    assert_int_equal(remove(path), 0);
    for (size_t i = 0; i < pe_cl_file_count; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, pe_cl_files[i].name);
        remove(path);
    }
    assert_int_equal(rmdir(dir), 0);
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "reliability");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffer_create_huge),
        cmocka_unit_test(test_relbias_cut_keys_queries),
        cmocka_unit_test(test_auto_logs_no_error),
        cmocka_unit_test(test_orphan_buffer_message),
        cmocka_unit_test(test_max_binding_overflow),
        cmocka_unit_test(test_rope_qk_fused_in_place),
        cmocka_unit_test(test_cl_program_cache),
        cmocka_unit_test(test_cl_kernel_dir),
        cmocka_unit_test(test_rope_seq_len_degenerate_positions),
        cmocka_unit_test(test_attention_blocks_write_nothing_on_failure),
    };
    rc = th_run("reliability", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
