/*
 * test_reliability.c - issue #16 on one backend (--backend NAME): inputs at the edges of
 * what posenc accepts, each once a crash, a hang, a wrong status or a clobbered output.
 * A failing call must return its documented status, leave a message and write nothing.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------ */

/* A context of the backend under test whose bindings hold at most `limit` bytes
 * (POSENC_MAX_BINDING), logging through th_log so validation messages fail the test. */
static posenc_context *limited_context(unsigned long long limit)
{
    char v[32], err[512];
    snprintf(v, sizeof(v), "%llu", limit);
    setenv("POSENC_MAX_BINDING", v, 1);
    struct posenc_context_params p = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                      .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    unsetenv("POSENC_MAX_BINDING");
    if (st != POSENC_OK)
        fail_msg("context with POSENC_MAX_BINDING=%s: %s", v, err);
    return ctx;
}

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
    posenc_context *ctx = limited_context(1024);
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

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "reliability");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffer_create_huge),
        cmocka_unit_test(test_relbias_cut_keys_queries),
    };
    rc = th_run("reliability", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
