/*
 * test_check_only.c - posenc_context_set_check_only on one backend (--backend NAME): a
 * call in check-only mode returns the status the same call returns when it runs, and
 * writes nothing; views without a buffer are checked like views with one; the device's
 * binding limit is judged as when the op runs (ggml's supports_op asks exactly this).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 4096 };
static const uint8_t SENTINEL = 0x5A;

static posenc_buffer *sentinel_buffer(posenc_context *ctx, size_t bytes)
{
    unsigned char *h = malloc(bytes);
    assert_non_null(h);
    memset(h, SENTINEL, bytes);
    posenc_buffer *b = th_upload(ctx, h, bytes);
    free(h);
    return b;
}

static void assert_untouched(posenc_buffer *b)
{
    unsigned char *h = th_download(b);
    for (size_t i = 0; i < posenc_buffer_size(b); i++)
        if (h[i] != SENTINEL)
            fail_msg("byte %zu was written in check-only mode", i);
    free(h);
}

static void set_check(posenc_context *ctx, int on)
{
    assert_int_equal(posenc_context_set_check_only(ctx, on), POSENC_OK);
}

/* Valid calls of every op family: OK and not a byte written; the same calls then run. */
static void test_valid_calls_write_nothing(void **state)
{
    (void)state;
    posenc_context *c = th.dut;
    posenc_buffer *b = sentinel_buffer(c, N * 4);
    int32_t pos_h[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    posenc_buffer *pb = th_upload(c, pos_h, sizeof(pos_h));
    posenc_tensor pos = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 4, 1, 1, 1);
    posenc_tensor x = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 64, 2, 4, 1);
    posenc_tensor y = posenc_tensor_contiguous(b, 8192, POSENC_DTYPE_F32, 64, 2, 4, 1);
    posenc_tensor y16 = posenc_tensor_contiguous(b, 8192, POSENC_DTYPE_F16, 64, 2, 4, 1);
    posenc_tensor logits = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 16, 8, 4, 1);
    posenc_tensor rows = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 2, 1, 1, 1);
    posenc_tensor src = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 64, 2, 1, 1);
    posenc_tensor cache = posenc_tensor_contiguous(b, 8192, POSENC_DTYPE_F16, 64, 16, 1, 1);
    struct posenc_alibi_params ap;
    memset(&ap, 0, sizeof(ap));
    for (int run = 0; run < 2; run++) {
        set_check(c, run == 0);
        if (posenc_copy(c, &x, &y16) != POSENC_OK)
            fail_msg("copy: %s", posenc_context_last_error(c));
        posenc_tensor table = posenc_tensor_contiguous(b, 8192, POSENC_DTYPE_F32, 64, 4, 1, 1);
        assert_int_equal(posenc_sinusoidal(c, NULL, &pos, &table, NULL), POSENC_OK);
        assert_int_equal(posenc_rope(c, &x, &pos, &y, NULL), POSENC_OK);
        assert_int_equal(posenc_rope(c, &x, &pos, &x, NULL), POSENC_OK); /* in place */
        assert_int_equal(posenc_softmax(c, &logits, NULL, NULL, &logits, NULL), POSENC_OK);
        assert_int_equal(posenc_alibi(c, NULL, &logits, &ap), POSENC_OK);
        assert_int_equal(posenc_fill(c, &y, 1.5), POSENC_OK);
        assert_int_equal(posenc_set_rows(c, &src, &rows, &cache, NULL), POSENC_OK);
        if (run == 0)
            assert_untouched(b);
    }
    unsigned char *h = th_download(b);
    size_t changed = 0;
    for (size_t i = 0; i < N * 4; i++)
        changed += h[i] != SENTINEL;
    assert_true(changed > 0); /* the second pass ran */
    free(h);
    posenc_buffer_destroy(&b);
    posenc_buffer_destroy(&pb);
    th_check_warnings();
}

/* A refused call says the same thing with and without check-only. */
static void test_same_refusals(void **state)
{
    (void)state;
    posenc_context *c = th.dut;
    posenc_buffer *b = sentinel_buffer(c, N * 4);
    int32_t pos_h[4] = {0, 1, 2, 3};
    posenc_buffer *pb = th_upload(c, pos_h, sizeof(pos_h));
    posenc_tensor pos = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 4, 1, 1, 1);
    posenc_tensor x = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 64, 2, 4, 1);
    posenc_tensor part = x; /* overlaps x without being x */
    part.offset = 4;
    struct posenc_rope_params odd;
    memset(&odd, 0, sizeof(odd));
    odd.n_dims = 7;
    char msg[2][512];
    posenc_status st[2][3];
    for (int run = 0; run < 2; run++) {
        set_check(c, run == 0);
        st[run][0] = posenc_rope(c, &x, &pos, &x, &odd);
        snprintf(msg[run], sizeof(msg[run]), "%s", posenc_context_last_error(c));
        st[run][1] = posenc_rope(c, &x, &pos, &part, NULL);
        posenc_tensor big = x;
        big.ne[3] = 1000; /* runs past its buffer */
        st[run][2] = posenc_copy(c, &x, &big);
    }
    set_check(c, 0);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(st[0][k], st[1][k]);
        assert_int_equal(st[0][k], POSENC_ERR_INVALID_ARGUMENT);
    }
    assert_string_equal(msg[0], msg[1]);
    assert_non_null(strstr(msg[0], "n_dims"));
    assert_untouched(b);
    posenc_buffer_destroy(&b);
    posenc_buffer_destroy(&pb);
    th_check_warnings();
}

/* Views without memory (what a runtime has before it allocates). */
static void test_views_without_buffers(void **state)
{
    (void)state;
    posenc_context *c = th.dut;
    posenc_tensor x = posenc_tensor_contiguous(NULL, 0, POSENC_DTYPE_F16, 128, 32, 7, 1);
    posenc_tensor d = posenc_tensor_contiguous(NULL, 1 << 20, POSENC_DTYPE_F32, 128, 32, 7, 1);
    posenc_tensor pos = posenc_tensor_contiguous(NULL, 4 << 20, POSENC_DTYPE_I32, 7, 4, 1, 1);
    struct posenc_rope_params p;
    memset(&p, 0, sizeof(p));
    p.mode = POSENC_ROPE_MROPE;
    p.sections[0] = 16;
    p.sections[1] = 24;
    p.sections[2] = 24;
    /* outside check-only mode a NULL buffer is refused */
    assert_int_equal(posenc_rope(c, &x, &pos, &d, &p), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(c), "buffer is NULL"));
    set_check(c, 1);
    assert_int_equal(posenc_rope(c, &x, &pos, &d, &p), POSENC_OK);
    assert_int_equal(posenc_rope(c, &x, &pos, &x, &p), POSENC_OK); /* in place */
    posenc_tensor part = x;
    part.offset = 2;
    if (posenc_rope(c, &x, &pos, &part, &p) != POSENC_ERR_INVALID_ARGUMENT)
        fail_msg("a partly overlapping dst was accepted: %s", posenc_context_last_error(c));
    p.n_dims = 130; /* more dims than the head has */
    assert_int_equal(posenc_rope(c, &x, &pos, &d, &p), POSENC_ERR_INVALID_ARGUMENT);
    /* DYNAMIC_NTK without seq_len reads the positions when it runs: not here */
    memset(&p, 0, sizeof(p));
    p.scaling.kind = POSENC_ROPE_SCALING_DYNAMIC_NTK;
    p.scaling.factor = 4.0f;
    p.scaling.original_ctx = 4096;
    assert_int_equal(posenc_rope(c, &x, &pos, &d, &p), POSENC_OK);
    /* freq_factors on the device: not read */
    posenc_tensor ff = posenc_tensor_contiguous(NULL, 8 << 20, POSENC_DTYPE_F32, 64, 1, 1, 1);
    memset(&p, 0, sizeof(p));
    p.freq_factors_tensor = &ff;
    assert_int_equal(posenc_rope(c, &x, &pos, &d, &p), POSENC_OK);
    ff.ne[0] = 63;
    assert_int_equal(posenc_rope(c, &x, &pos, &d, &p), POSENC_ERR_INVALID_ARGUMENT);
    /* softmax with a mask and sinks, set_rows with i64 indices */
    posenc_tensor lg = posenc_tensor_contiguous(NULL, 0, POSENC_DTYPE_F32, 333, 5, 6, 1);
    posenc_tensor mask = posenc_tensor_contiguous(NULL, 1 << 20, POSENC_DTYPE_F16, 333, 8, 3, 1);
    posenc_tensor sinks = posenc_tensor_contiguous(NULL, 2 << 20, POSENC_DTYPE_F32, 6, 1, 1, 1);
    struct posenc_softmax_params sp = {0.125f, 8.0f, 0, {0}};
    assert_int_equal(posenc_softmax(c, &lg, &mask, &sinks, &lg, &sp), POSENC_OK);
    mask.ne[2] = 4; /* does not divide 6 heads */
    assert_int_equal(posenc_softmax(c, &lg, &mask, &sinks, &lg, &sp), POSENC_ERR_INVALID_ARGUMENT);
    posenc_tensor src = posenc_tensor_contiguous(NULL, 0, POSENC_DTYPE_F32, 256, 3, 1, 1);
    posenc_tensor idx = posenc_tensor_contiguous(NULL, 1 << 20, POSENC_DTYPE_I64, 3, 1, 1, 1);
    posenc_tensor kv = posenc_tensor_contiguous(NULL, 2 << 20, POSENC_DTYPE_F16, 256, 100, 1, 1);
    assert_int_equal(posenc_set_rows(c, &src, &idx, &kv, NULL), POSENC_OK);
    set_check(c, 0);
    th_check_warnings();
}

/* The binding limit is judged as when the op runs: cut into launches where it can be,
 * refused where one row is too big. POSENC_MAX_BINDING is read at context creation. */
static void test_binding_limit(void **state)
{
    (void)state;
    setenv("POSENC_MAX_BINDING", "4096", 1);
    struct posenc_context_params cp;
    memset(&cp, 0, sizeof(cp));
    cp.backend = th.kind;
    cp.log_fn = th_log;
    posenc_context *c = NULL;
    posenc_status st = posenc_context_create(&cp, &c, NULL, 0);
    unsetenv("POSENC_MAX_BINDING");
    assert_int_equal(st, POSENC_OK);
    set_check(c, 1);
    struct posenc_softmax_params sp;
    memset(&sp, 0, sizeof(sp));
    /* rows of 512 f32 (2 KiB) fit; 100 of them are cut into launches */
    posenc_tensor ok = posenc_tensor_contiguous(NULL, 0, POSENC_DTYPE_F32, 512, 100, 1, 1);
    assert_int_equal(posenc_softmax(c, &ok, NULL, NULL, &ok, &sp), POSENC_OK);
    /* one row of 2048 f32 (8 KiB) cannot be cut */
    posenc_tensor big = posenc_tensor_contiguous(NULL, 0, POSENC_DTYPE_F32, 2048, 2, 1, 1);
    assert_int_equal(posenc_softmax(c, &big, NULL, NULL, &big, &sp), POSENC_ERR_UNSUPPORTED);
    assert_non_null(strstr(posenc_context_last_error(c), "binding"));
    posenc_context_destroy(&c);
    th_check_warnings();
}

static void test_null_ctx(void **state)
{
    (void)state;
    assert_int_equal(posenc_context_set_check_only(NULL, 1), POSENC_ERR_INVALID_ARGUMENT);
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "check_only");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_calls_write_nothing),
        cmocka_unit_test(test_same_refusals),
        cmocka_unit_test(test_views_without_buffers),
        cmocka_unit_test(test_binding_limit),
        cmocka_unit_test(test_null_ctx),
    };
    rc = th_run("check_only", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
