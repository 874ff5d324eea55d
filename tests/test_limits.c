/*
 * test_limits.c - ops over a device's binding limit (issue #8), on one backend
 * (--backend NAME).
 *
 *  - Forced limit: a second context on the backend under test, created with
 *    POSENC_MAX_BINDING=8192, runs every shared case of the ops posenc cuts into several
 *    launches (sinusoidal, RoPE, learned, ALiBi, relative bias, copy) against the CPU
 *    reference, which has no limit. A case passes with the usual per-element bounds, or
 *    is refused with POSENC_ERR_UNSUPPORTED whose message names the limit and says that
 *    single rows are over it (a learned table, or one token of 32 heads, of more than
 *    8 KiB). Enough cases must really have been cut (counted from the DEBUG log), and
 *    on Vulkan the buffers are larger than the limit, so every launch binds windows.
 *  - Refusals leave the output untouched: learned with a table over the limit, the
 *    2-D resize and learned_backward (never cut) -> UNSUPPORTED naming the limit, with
 *    every dst byte as before; attention with such a table -> OUT_OF_RANGE for a key
 *    position past it (positions come before the limit), UNSUPPORTED otherwise.
 *  - posenc_context_get_info reports the limit; a malformed POSENC_MAX_BINDING is
 *    refused at context creation.
 *  - A real tensor above 128 MiB (RoPE f32 [128, 32, 8200, 1] = 134,348,800 bytes, over
 *    lavapipe's maxStorageBufferRange of 134,217,728) on the GPU backends, compared with
 *    the CPU reference element by element. On the CPU backend there is no limit and the
 *    same code runs for every size, so the case is not repeated there.
 */
#include "check.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORCED_LIMIT 8192

static posenc_context *limited; /* th.kind with POSENC_MAX_BINDING=FORCED_LIMIT */
static int n_cut;               /* "N launches" DEBUG messages of `limited` */

static void limited_log(posenc_log_level level, const char *msg, void *user)
{
    if (level == POSENC_LOG_DEBUG && strstr(msg, " launches (binding limit "))
        n_cut++;
    th_log(level, msg, user);
}

static posenc_context *create_with_env(const char *value, posenc_log_fn fn,
                                       posenc_status *out_st, char *err, size_t err_size)
{
    setenv("POSENC_MAX_BINDING", value, 1);
    struct posenc_context_params p;
    memset(&p, 0, sizeof p);
    p.backend = th.kind;
    p.flags = POSENC_CONTEXT_DEBUG;
    p.log_fn = fn;
    p.log_level = POSENC_LOG_DEBUG;
    posenc_context *ctx = NULL;
    *out_st = posenc_context_create(&p, &ctx, err, err_size);
    unsetenv("POSENC_MAX_BINDING");
    return ctx;
}

static int setup_limited(void **state)
{
    (void)state;
    char err[256];
    posenc_status st;
    char v[32];
    snprintf(v, sizeof v, "%d", FORCED_LIMIT);
    limited = create_with_env(v, limited_log, &st, err, sizeof err);
    if (st != POSENC_OK) {
        fprintf(stderr, "context with POSENC_MAX_BINDING=%s: %s\n", v, err);
        return -1;
    }
    return 0;
}

static int teardown_limited(void **state)
{
    (void)state;
    posenc_context_destroy(&limited);
    return 0;
}

/* Every case on the GPU backends; every third on the CPU backend, where the cut is the
 * same front-end code (src/split.c) and the suite also runs under valgrind in CI.
 * POSENC_TEST_SAMPLE=N (scripts/test's sanitizer passes) takes every N-th case at most. */
static size_t case_stride(void)
{
    size_t stride = th.kind == POSENC_BACKEND_CPU ? 3 : 1;
    const char *env = getenv("POSENC_TEST_SAMPLE");
    if (env && atoi(env) > (int)stride)
        stride = (size_t)atoi(env);
    return stride;
}

static bool refused_for_rows(const struct pc_result *r)
{
    return r->status == POSENC_ERR_UNSUPPORTED && strstr(r->msg, "POSENC_MAX_BINDING") &&
           strstr(r->msg, "single rows");
}

/* Every shared case of the ops that are cut, on the limited context. */
static void test_forced_limit(void **state)
{
    (void)state;
    static const enum pc_op ops[] = {PC_OP_SINUSOIDAL, PC_OP_ROPE, PC_OP_LEARNED,
                                     PC_OP_ALIBI, PC_OP_RELBIAS, PC_OP_COPY};
    int n_pass = 0, n_refused = 0, n_fail = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        size_t n = 0;
        struct pc_case *cases = pc_cases(ops[k], &n);
        assert_non_null(cases);
        if (ops[k] == PC_OP_LEARNED) {
            /* The shared cases have either few tokens or tables of 1024+ rows (refused
             * here): add each with a 16-row table and 97 tokens, so that it is cut. */
            struct pc_case *more = realloc(cases, 2 * n * sizeof *more);
            assert_non_null(more);
            cases = more;
            for (size_t i = 0; i < n; i++) {
                struct pc_case *c = &cases[n + i];
                *c = cases[i];
                c->rows = 16;
                if (c->pos_max > 16)
                    c->pos_max = 16;
                c->ne[1] = 97;
                char base[sizeof c->name];
                memcpy(base, cases[i].name, sizeof base);
                snprintf(c->name, sizeof c->name, "%.150s [rows=16, T=97]", base);
            }
            n *= 2;
        }
        int cut_before = n_cut, pass_before = n_pass, refused_before = n_refused;
        for (size_t i = 0; i < n; i += case_stride()) {
            struct pc_result r;
            pc_run_case(th.ref, limited, &cases[i], &r);
            if (r.pass)
                n_pass++;
            else if (refused_for_rows(&r))
                n_refused++;
            else {
                n_fail++;
                print_error("%s: %s (%lld bad of %lld, %lld guard bytes)\n", cases[i].name,
                            r.msg, (long long)r.n_bad, (long long)r.n_checked,
                            (long long)r.guard_bad);
            }
        }
        printf("%-10s %3zu cases run: %3d pass (%d of them cut into several launches), "
               "%d refused\n",
               pc_op_name(ops[k]), (n + case_stride() - 1) / case_stride(),
               n_pass - pass_before, n_cut - cut_before,
               n_refused - refused_before);
        /* Each op must have been cut somewhere, or the limit tested nothing. */
        if (n_cut == cut_before)
            fail_msg("%s: no case was cut into several launches", pc_op_name(ops[k]));
        free(cases);
    }
    printf("forced limit %d bytes: %d pass, %d refused (single rows over the limit), "
           "%d fail; %d ops cut\n",
           FORCED_LIMIT, n_pass, n_refused, n_fail, n_cut);
    th_check_warnings();
    assert_int_equal(n_fail, 0);
    /* Most cases fit after cutting; refusals are the few with rows over 8 KiB. */
    assert_true(n_pass > 4 * n_refused);
}

/* posenc_attention runs blocks of queries whose logits fit the limit. The shared cases
 * plus, for those without a learned or relative-bias table, weights or a mask, a variant
 * with 96 queries and 96 keys; each case gets a limit just large enough for its q, k, v,
 * dst, weights and mask in f32 (+50 % for padded views) and two query rows of logits,
 * so that wherever the logits are larger than that, the queries run in blocks. */
static void test_attention_blocks(void **state)
{
    (void)state;
    size_t n = 0;
    struct pc_case *cases = pc_cases(PC_OP_ATTENTION, &n);
    assert_non_null(cases);
    struct pc_case *more = realloc(cases, 2 * n * sizeof *more);
    assert_non_null(more);
    cases = more;
    size_t m = n;
    for (size_t i = 0; i < n; i++) {
        const struct pc_case *c = &cases[i];
        if (c->attn.encoding == POSENC_ATTENTION_LEARNED ||
            c->attn.encoding == POSENC_ATTENTION_RELBIAS || c->attn.weights || c->attn.mask ||
            c->attn.big || c->ne[2] > 96 || c->attn.tk > 96)
            continue;
        struct pc_case *v = &cases[m++];
        *v = *c;
        v->ne[2] = 96;
        v->attn.tk = 96;
        char base[sizeof v->name];
        memcpy(base, c->name, sizeof base);
        snprintf(v->name, sizeof v->name, "%.160s [Tq=Tk=96]", base);
    }
    int n_pass = 0, n_blocked = 0, n_fail = 0;
    for (size_t i = 0; i < m; i += case_stride()) {
        const struct pc_case *c = &cases[i];
        /* The 2048 x 2048 cases take seconds on the CPU reference and add nothing here
         * (test_attention runs them). */
        if (c->ne[2] * c->attn.tk > 96 * 96)
            continue;
        const int64_t D = c->ne[0], Hq = c->ne[1], Tq = c->ne[2], B = c->ne[3];
        const int64_t Hk = c->attn.hk, Tk = c->attn.tk, Dv = c->attn.dv;
        const int64_t sizes[6] = {D * Hq * Tq * B,
                                  D * Hk * Tk * B,
                                  Dv * Hk * Tk * B,
                                  Dv * Hq * Tq * B,
                                  (c->attn.weights || c->attn.mask) ? Tk * Tq * Hq * B : 0,
                                  Tk * Hq * B * 2 * 2 / 3};
        int64_t lim = 1024;
        for (int k = 0; k < 6; k++)
            if (6 * sizes[k] > lim) /* 4 bytes + 50 % */
                lim = 6 * sizes[k];
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)lim);
        char err[256];
        posenc_status st;
        posenc_context *ctx = create_with_env(v, th_log, &st, err, sizeof err);
        if (st != POSENC_OK)
            fail_msg("context with POSENC_MAX_BINDING=%s: %s", v, err);
        struct pc_result r;
        pc_run_case(th.ref, ctx, c, &r);
        posenc_context_destroy(&ctx);
        if (r.pass) {
            n_pass++;
            n_blocked += 4 * Tk * Tq * Hq * B > lim;
        } else {
            n_fail++;
            print_error("%s (limit %s bytes): %s (%lld bad of %lld)\n", c->name, v, r.msg,
                        (long long)r.n_bad, (long long)r.n_checked);
        }
    }
    free(cases);
    printf("attention: %d cases pass, %d of them with the queries in several blocks, %d fail\n",
           n_pass, n_blocked, n_fail);
    th_check_warnings();
    assert_int_equal(n_fail, 0);
    assert_true(n_blocked >= (case_stride() > 1 ? 1 : 5));
}

/* Refused ops leave every byte of their output as it was. */
static void expect_refused(posenc_status got, const char *what, const unsigned char *before,
                           posenc_buffer *dst_buf, size_t bytes)
{
    if (got != POSENC_ERR_UNSUPPORTED)
        fail_msg("%s: status %s, want unsupported (%s)", what, posenc_status_string(got),
                 posenc_context_last_error(limited));
    const char *m = posenc_context_last_error(limited);
    if (!strstr(m, "POSENC_MAX_BINDING") || !strstr(m, "8192"))
        fail_msg("%s: message \"%s\" does not name the limit", what, m);
    unsigned char *after = malloc(bytes);
    assert_non_null(after);
    assert_int_equal(posenc_buffer_read(dst_buf, 0, after, bytes), POSENC_OK);
    if (memcmp(before, after, bytes) != 0)
        fail_msg("%s: the output changed although the op was refused", what);
    free(after);
}

static void test_refusals_untouched(void **state)
{
    (void)state;
    const int64_t d = 64, rows = 64, T = 40; /* table 16 KiB > 8 KiB */
    const size_t tab_bytes = (size_t)(d * rows) * 4, dst_bytes = (size_t)(d * T) * 4;
    float *tab = malloc(tab_bytes);
    unsigned char *poison = malloc(dst_bytes);
    int32_t pos[40];
    assert_non_null(tab);
    assert_non_null(poison);
    for (int64_t i = 0; i < d * rows; i++)
        tab[i] = (float)i * 0.25f;
    for (size_t i = 0; i < dst_bytes; i++)
        poison[i] = (unsigned char)(0xA5 ^ i);
    for (int i = 0; i < T; i++)
        pos[i] = (i * 7) % (int)rows;
    posenc_buffer *tb = th_upload(limited, tab, tab_bytes);
    posenc_buffer *db = th_upload(limited, poison, dst_bytes);
    posenc_buffer *pb = th_upload(limited, pos, sizeof pos);
    posenc_tensor tt = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, d, rows, 1, 1);
    posenc_tensor dt = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, d, T, 1, 1);
    posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, T, 1, 1, 1);

    expect_refused(posenc_learned(limited, NULL, &pt, &tt, &dt), "learned (table 16 KiB)",
                   poison, db, dst_bytes);
    /* learned_backward is never cut: dtable [d, T] = 10 KiB is over the limit. */
    posenc_tensor dy = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, d, T, 1, 1);
    posenc_tensor dtab = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, d, T, 1, 1);
    posenc_tensor pos_small = pt;
    for (int i = 0; i < T; i++)
        pos[i] = i % (int)T;
    assert_int_equal(posenc_buffer_write(pb, 0, pos, sizeof pos), POSENC_OK);
    expect_refused(posenc_learned_backward(limited, &dy, &pos_small, &dtab),
                   "learned_backward (dtable 10 KiB)", poison, db, dst_bytes);
    /* resize_2d: [64, 6x6] -> [64, 40 = 5x8] rows; 10 KiB out. */
    posenc_tensor src = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, d, 36, 1, 1);
    posenc_tensor rdst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, d, T, 1, 1);
    expect_refused(posenc_resize_2d(limited, &src, 6, 6, &rdst, 5, 8, NULL), "resize_2d",
                   poison, db, dst_bytes);

    /* attention with LEARNED: the table is over the limit, so encoding q is refused; a key
     * position past the table must still be OUT_OF_RANGE (the positions are checked before
     * either encoding runs, whatever the limit would refuse), and with every position valid
     * the refusal names the limit. Both leave dst as it was. q, dst [64, 1 head, 4, 1] and
     * k, v [64, 1 head, 8, 1] are views of the table's buffer (read only) and of db. */
    posenc_tensor aq = posenc_tensor_contiguous(tb, 0, POSENC_DTYPE_F32, d, 1, 4, 1);
    posenc_tensor ak = posenc_tensor_contiguous(tb, 4096, POSENC_DTYPE_F32, d, 1, 8, 1);
    posenc_tensor av = posenc_tensor_contiguous(tb, 8192, POSENC_DTYPE_F32, d, 1, 8, 1);
    posenc_tensor adst = posenc_tensor_contiguous(db, 0, POSENC_DTYPE_F32, d, 1, 4, 1);
    int32_t apos[12] = {0, 1, 2, 3, 0, 1, 2, 3, 4, (int32_t)rows, 6, 7}; /* k_pos[5] = rows */
    assert_int_equal(posenc_buffer_write(pb, 0, apos, sizeof apos), POSENC_OK);
    posenc_tensor aqp = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 4, 1, 1, 1);
    posenc_tensor akp = posenc_tensor_contiguous(pb, 16, POSENC_DTYPE_I32, 8, 1, 1, 1);
    struct posenc_attention_params ap;
    memset(&ap, 0, sizeof ap);
    ap.encoding = POSENC_ATTENTION_LEARNED;
    ap.learned_table = &tt;
    ap.q_pos = &aqp;
    ap.k_pos = &akp;
    posenc_status ast = posenc_attention(limited, &aq, &ak, &av, &adst, NULL, &ap);
    if (ast != POSENC_ERR_OUT_OF_RANGE ||
        !strstr(posenc_context_last_error(limited), "params->k_pos[5, 0, 0] = 64"))
        fail_msg("attention, learned, a key position past the table under the limit: status "
                 "%s (%s), want out of range naming params->k_pos[5, 0, 0] = 64",
                 posenc_status_string(ast), posenc_context_last_error(limited));
    unsigned char *after = malloc(dst_bytes);
    assert_non_null(after);
    assert_int_equal(posenc_buffer_read(db, 0, after, dst_bytes), POSENC_OK);
    assert_memory_equal(after, poison, dst_bytes);
    free(after);
    apos[9] = 5;
    assert_int_equal(posenc_buffer_write(pb, 0, apos, sizeof apos), POSENC_OK);
    expect_refused(posenc_attention(limited, &aq, &ak, &av, &adst, NULL, &ap),
                   "attention, learned (table 16 KiB)", poison, db, dst_bytes);

    posenc_buffer_destroy(&tb);
    posenc_buffer_destroy(&db);
    posenc_buffer_destroy(&pb);
    free(tab);
    free(poison);
    th_check_warnings();
}

static void test_info_and_env(void **state)
{
    (void)state;
    struct posenc_device_info in;
    assert_int_equal(posenc_context_get_info(limited, &in), POSENC_OK);
    assert_int_equal(in.max_binding_size, FORCED_LIMIT);
    assert_int_equal(posenc_context_get_info(th.dut, &in), POSENC_OK);
    if (th.kind == POSENC_BACKEND_CPU)
        assert_int_equal(in.max_binding_size, 0);
    printf("%s: max_binding_size %llu bytes, max_buffer_size %llu bytes\n",
           posenc_backend_name(th.kind), (unsigned long long)in.max_binding_size,
           (unsigned long long)in.max_buffer_size);

    static const char *bad[] = {"12k", "-5", "1023", "", "0x1000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256];
        posenc_status st;
        posenc_context *ctx = create_with_env(bad[i], th_log, &st, err, sizeof err);
        if (bad[i][0] == '\0') { /* empty = not set */
            assert_int_equal(st, POSENC_OK);
            posenc_context_destroy(&ctx);
            continue;
        }
        if (st != POSENC_ERR_INVALID_ARGUMENT || ctx != NULL || !strstr(err, "POSENC_MAX_BINDING"))
            fail_msg("POSENC_MAX_BINDING=\"%s\": status %s, message \"%s\"", bad[i],
                     posenc_status_string(st), err);
    }
}

/* RoPE on a tensor above 128 MiB. */
static void test_above_128_mib(void **state)
{
    (void)state;
    if (th.kind == POSENC_BACKEND_CPU) {
        printf("cpu: no binding limit; the > 128 MiB case runs on the GPU backends\n");
        return;
    }
    size_t n = 0;
    struct pc_case *cases = pc_cases(PC_OP_ROPE, &n);
    assert_non_null(cases);
    struct pc_case c;
    bool found = false;
    for (size_t i = 0; i < n && !found; i++)
        if (strncmp(cases[i].name, "rope/f32/ne=128x32x7x1/normal/", 30) == 0 &&
            strstr(cases[i].name, "/out/contig")) {
            c = cases[i];
            found = true;
        }
    free(cases);
    assert_true(found);
    c.ne[2] = 8200;
    snprintf(c.name, sizeof c.name, "rope/f32/ne=128x32x8200x1/normal/out/contig (134,348,800 "
             "bytes)");
    assert_true(c.ne[0] * c.ne[1] * c.ne[2] * 4 > ((int64_t)1 << 27));
    struct posenc_device_info in;
    assert_int_equal(posenc_context_get_info(th.dut, &in), POSENC_OK);
    struct pc_result r;
    pc_run_case(th.ref, th.dut, &c, &r);
    th_check_warnings();
    printf("%s on %s (binding limit %llu bytes): max err %.3g, worst err/bound %.3g, %lld "
           "elements\n",
           c.name, in.device_name, (unsigned long long)in.max_binding_size, r.max_err,
           r.worst_ratio, (long long)r.n_checked);
    if (!r.pass)
        fail_msg("%s: %s (%lld bad of %lld, %lld guard bytes)", c.name, r.msg,
                 (long long)r.n_bad, (long long)r.n_checked, (long long)r.guard_bad);
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "limits");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_forced_limit, setup_limited, teardown_limited),
        cmocka_unit_test_setup_teardown(test_refusals_untouched, setup_limited,
                                        teardown_limited),
        cmocka_unit_test_setup_teardown(test_info_and_env, setup_limited, teardown_limited),
        cmocka_unit_test(test_attention_blocks),
        cmocka_unit_test(test_above_128_mib),
    };
    rc = th_run("limits", tests, sizeof tests / sizeof tests[0]);
    th_fini();
    return rc;
}
