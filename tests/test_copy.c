/*
 * test_copy.c - posenc_copy on one backend (--backend NAME), and the CPU fast path's
 * thread split.
 *
 *  - every shared copy case (src/check/check_copy.c: all dtype pairs, layouts, awkward
 *    values; exact, bit for bit) against the values computed on the host;
 *  - known conversions: f32 -> f16 -> f32 of ties, the overflow threshold, subnormals;
 *  - bad input: exact statuses, a message naming the argument, dst untouched; an
 *    identical view and empty tensors are no-ops;
 *  - CPU only: contexts with 1, 3 and 4 threads and POSENC_CPU_MIN_SPLIT=1 (so that even
 *    small ops are split over every thread, in uneven ranges) run shared cases of every
 *    op with a fast path against the reference; n_threads out of range is rejected.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_known_conversions(void **state)
{
    (void)state;
    const float in[] = {1.0f, 65504.0f, 65519.0f, 65520.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                        0x1p-24f, 0x1p-25f, 0x1.8p-25f, -0.0f, -INFINITY, 0.1f};
    const float want[] = {1.0f, 65504.0f, 65504.0f, INFINITY, 1.0f, 1.0f + 0x1p-9f,
                          0x1p-24f, 0.0f, 0x1p-24f, -0.0f, -INFINITY, 0.0999755859375f};
    const int n = (int)(sizeof(in) / sizeof(in[0]));
    posenc_buffer *a = th_upload(th.dut, in, sizeof(in));
    posenc_buffer *h = NULL, *b = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, (size_t)n * 2, &h), POSENC_OK);
    assert_int_equal(posenc_buffer_create(th.dut, sizeof(in), &b), POSENC_OK);
    posenc_tensor ta = posenc_tensor_contiguous(a, 0, POSENC_DTYPE_F32, n, 1, 1, 1);
    posenc_tensor th16 = posenc_tensor_contiguous(h, 0, POSENC_DTYPE_F16, n, 1, 1, 1);
    posenc_tensor tb = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, n, 1, 1, 1);
    assert_int_equal(posenc_copy(th.dut, &ta, &th16), POSENC_OK);
    assert_int_equal(posenc_copy(th.dut, &th16, &tb), POSENC_OK);
    float *out = th_download(b);
    for (int i = 0; i < n; i++)
        if (memcmp(&out[i], &want[i], 4) != 0)
            fail_msg("element %d: %.9g -> %.9g, want %.9g", i, (double)in[i], (double)out[i],
                     (double)want[i]);
    free(out);
    posenc_buffer_destroy(&a);
    posenc_buffer_destroy(&h);
    posenc_buffer_destroy(&b);
    th_check_warnings();
}

static void test_bad_input(void **state)
{
    (void)state;
    const float vals[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    posenc_buffer *a = th_upload(th.dut, vals, sizeof(vals));
    posenc_buffer *b = th_upload(th.dut, vals, sizeof(vals));
    const posenc_tensor src = posenc_tensor_contiguous(a, 0, POSENC_DTYPE_F32, 4, 2, 1, 1);
    posenc_tensor dst = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 4, 2, 1, 1);
    posenc_tensor t;

    th_expect(posenc_copy(NULL, &src, &dst), POSENC_ERR_INVALID_ARGUMENT, NULL, "NULL ctx");
    th_expect(posenc_copy(th.dut, NULL, &dst), POSENC_ERR_INVALID_ARGUMENT, "src", "NULL src");
    th_expect(posenc_copy(th.dut, &src, NULL), POSENC_ERR_INVALID_ARGUMENT, "dst", "NULL dst");
    t = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_I32, 4, 2, 1, 1);
    th_expect(posenc_copy(th.dut, &src, &t), POSENC_ERR_INVALID_ARGUMENT, "dtype", "f32 -> i32");
    t = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 2, 4, 1, 1);
    th_expect(posenc_copy(th.dut, &src, &t), POSENC_ERR_INVALID_ARGUMENT, "ne", "shape");
    t = posenc_tensor_contiguous(a, 8, POSENC_DTYPE_F32, 4, 2, 1, 1);
    th_expect(posenc_copy(th.dut, &src, &t), POSENC_ERR_INVALID_ARGUMENT, "overlap", "overlap");
    t = dst;
    t.nb[1] = 4; /* rows on top of each other: not a valid output */
    th_expect(posenc_copy(th.dut, &src, &t), POSENC_ERR_INVALID_ARGUMENT, "nb", "self-overlap");
    t = posenc_tensor_contiguous(b, 40, POSENC_DTYPE_F32, 4, 2, 1, 1);
    th_expect(posenc_copy(th.dut, &src, &t), POSENC_ERR_INVALID_ARGUMENT, "past", "out of buffer");
    float *out = th_download(b);
    assert_memory_equal(out, vals, sizeof(vals)); /* untouched by every failed call */
    free(out);

    /* the same view: a no-op; empty tensors: a no-op */
    th_expect(posenc_copy(th.dut, &src, &src), POSENC_OK, NULL, "identical");
    t = src;
    t.ne[2] = 0;
    posenc_tensor e = dst;
    e.ne[2] = 0;
    th_expect(posenc_copy(th.dut, &t, &e), POSENC_OK, NULL, "empty");
    assert_string_equal(posenc_context_last_error(th.dut), "");
    out = th_download(a);
    assert_memory_equal(out, vals, sizeof(vals));
    free(out);
    posenc_buffer_destroy(&a);
    posenc_buffer_destroy(&b);
    th_check_warnings();
}

/* CPU: the fast path split over 1, 3 and 4 threads (every op, tiny ops too) still
 * matches the reference on shared cases of each fast op. */
static void test_cpu_threads(void **state)
{
    (void)state;
    if (th.kind != POSENC_BACKEND_CPU)
        skip();
    posenc_context *ctx = NULL;
    struct posenc_context_params p = {.backend = POSENC_BACKEND_CPU, .n_threads = -1};
    assert_int_equal(posenc_context_create(&p, &ctx, NULL, 0), POSENC_ERR_INVALID_ARGUMENT);
    p.n_threads = 100000;
    assert_int_equal(posenc_context_create(&p, &ctx, NULL, 0), POSENC_ERR_INVALID_ARGUMENT);

    static const enum pc_op ops[] = {PC_OP_ROPE, PC_OP_SINUSOIDAL, PC_OP_ALIBI, PC_OP_LEARNED,
                                     PC_OP_COPY};
    static const int threads[] = {1, 3, 4};
    setenv("POSENC_CPU_MIN_SPLIT", "1", 1);
    for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
        p.n_threads = threads[t];
        assert_int_equal(posenc_context_create(&p, &ctx, NULL, 0), POSENC_OK);
        struct posenc_device_info info;
        assert_int_equal(posenc_context_get_info(ctx, &info), POSENC_OK);
        assert_int_equal(info.compute_units, (uint32_t)threads[t]);
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            size_t n = 0;
            struct pc_case *cases = pc_cases(ops[o], &n);
            assert_non_null(cases);
            /* every third case keeps the run short; all of them run in the op's suite */
            for (size_t i = t % 3; i < n; i += 3) {
                struct pc_result r;
                pc_run_case(th.ref, ctx, &cases[i], &r);
                if (!r.pass)
                    fail_msg("%d threads: %s: %s", threads[t], cases[i].name, r.msg);
            }
            free(cases);
        }
        posenc_context_destroy(&ctx);
    }
    unsetenv("POSENC_CPU_MIN_SPLIT");
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "copy");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_known_conversions),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_cpu_threads),
    };
    static const enum pc_op ops[] = {PC_OP_COPY};
    rc = th_run_with_cases("copy", fixed, sizeof(fixed) / sizeof(fixed[0]), ops,
                           sizeof(ops) / sizeof(ops[0]));
    th_fini();
    return rc;
}
