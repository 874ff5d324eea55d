/*
 * test_host_memory.c - posenc_buffer_wrap_host / posenc_buffer_host_alignment (issue #17)
 * on one backend (--backend NAME).
 *
 * CPU and OpenCL (PoCL, a CPU device): one block of the test's own host memory holds the
 * inputs and outputs of a small model step -- RoPE f32 out of place from a padded
 * (non-contiguous) x with positions and device freq_factors in the same block, an f32 ->
 * f16 copy, RoPE f16 in place, sinusoidal -- with seeded random inputs and odd sizes
 * (head_dim 18: 9 pairs, 3 heads, 7 tokens, 2 batches). The same step runs on the device
 * under test with posenc buffers and on the CPU reference context; the results read
 * straight from the host memory after posenc_context_finish must equal the dut's own
 * posenc-buffer results bit for bit (same kernels, same inputs: the kernels choose their
 * path from element offsets and strides relative to the buffer, which are the same) and
 * be within the rounding bounds of src/check/check.c of the reference. Then the host
 * rewrites inputs and freq_factors in place (the memory is the host's after finish) and
 * the step must follow them (no stale mapping, no cached freq_factors), posenc_buffer_
 * write / _read on the wrapped buffer must agree with the memory, and destroy must leave
 * the final results in the memory and never free it (ASan: the test frees it).
 * Bad input: NULL / size 0 / misaligned pointers / wrap-around / too large, and tensor
 * offsets that are not a multiple of the element size, with the exact status and a
 * message naming the argument. Vulkan: UNSUPPORTED, saying why.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 18, H = 3, T = 7, B = 2, DP = D + 2 /* padded x row */ };

#define RUP(v) (((v) + 255) / 256 * 256)
enum {
    X_OFF = 0,
    POS_OFF = RUP(X_OFF + DP * H * T * B * 4),
    FF_OFF = RUP(POS_OFF + T * 4),
    ROPE_OFF = RUP(FF_OFF + (D / 2) * 4),
    X16_OFF = RUP(ROPE_OFF + D * H * T * B * 4),
    SIN_OFF = RUP(X16_OFF + D * H * T * B * 2),
    IMG = RUP(SIN_OFF + D * T * 4),
};

/* The block's inputs: x (padding included), positions < 64, freq_factors in [1, 4]. */
static void make_image(unsigned char *img, uint64_t seed)
{
    uint64_t s = seed;
    memset(img, 0, IMG);
    float *x = (float *)(void *)(img + X_OFF);
    for (int i = 0; i < DP * H * T * B; i++)
        x[i] = (float)(2.0 * pc_rand_uniform(&s) - 1.0);
    int32_t *pos = (int32_t *)(void *)(img + POS_OFF);
    for (int t = 0; t < T; t++)
        pos[t] = (int32_t)(pc_rand_u64(&s) % 64);
    float *ff = (float *)(void *)(img + FF_OFF);
    for (int j = 0; j < D / 2; j++)
        ff[j] = (float)(1.0 + 3.0 * pc_rand_uniform(&s));
}

static posenc_tensor view_x(posenc_buffer *b)
{
    posenc_tensor t = {.buffer = b, .offset = X_OFF, .dtype = POSENC_DTYPE_F32,
                       .ne = {D, H, T, B}, .nb = {4, DP * 4, DP * 4 * H, DP * 4 * H * T}};
    return t;
}

/* The step, on any buffer of ctx laid out as above. The freq_factors are read from `bff`
 * at FF_OFF: a buffer of their own that no op writes, so that a cache of them keyed on
 * posenc's own writes would go stale when the host rewrites them (b's outputs bump b's
 * write count on every step). */
static void run_step(posenc_context *ctx, posenc_buffer *b, posenc_buffer *bff)
{
    posenc_tensor x = view_x(b);
    posenc_tensor pos = posenc_tensor_contiguous(b, POS_OFF, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor ff = posenc_tensor_contiguous(bff, FF_OFF, POSENC_DTYPE_F32, D / 2, 1, 1, 1);
    posenc_tensor y = posenc_tensor_contiguous(b, ROPE_OFF, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor h = posenc_tensor_contiguous(b, X16_OFF, POSENC_DTYPE_F16, D, H, T, B);
    posenc_tensor s = posenc_tensor_contiguous(b, SIN_OFF, POSENC_DTYPE_F32, D, T, 1, 1);
    struct posenc_rope_params neox = {.mode = POSENC_ROPE_NEOX, .freq_factors_tensor = &ff};
    struct posenc_rope_params norm = {.mode = POSENC_ROPE_NORMAL};
    posenc_status st;
    if ((st = posenc_rope(ctx, &x, &pos, &y, &neox)) != POSENC_OK ||
        (st = posenc_copy(ctx, &x, &h)) != POSENC_OK ||
        (st = posenc_rope(ctx, &h, &pos, &h, &norm)) != POSENC_OK ||
        (st = posenc_sinusoidal(ctx, NULL, &pos, &s, NULL)) != POSENC_OK)
        fail_msg("step: %s: %s", posenc_status_string(st), posenc_context_last_error(ctx));
}

/* The step on a posenc buffer of ctx holding `img`; the whole block back into out. */
static void run_on_buffer(posenc_context *ctx, const unsigned char *img, unsigned char *out)
{
    posenc_buffer *b = th_upload(ctx, img, IMG);
    posenc_buffer *bff = th_upload(ctx, img, IMG);
    run_step(ctx, b, bff);
    assert_int_equal(posenc_buffer_read(b, 0, out, IMG), POSENC_OK);
    posenc_buffer_destroy(&b);
    posenc_buffer_destroy(&bff);
}

/* Outputs of `got` against the reference block, within the bounds of check.c: every
 * angle is pos * w with pos < 64 and w <= 1 (freq_factors >= 1 only lower w), so below
 * 64 rad; |x| <= 1. */
static void compare_ref(const unsigned char *got, const unsigned char *ref, const char *what)
{
    const double rope_b = pc_bound_rope_f32(2.0 * pc_ulp32(64.0), 1.0, 2.0);
    const float *gy = (const float *)(const void *)(got + ROPE_OFF);
    const float *ry = (const float *)(const void *)(ref + ROPE_OFF);
    for (int i = 0; i < D * H * T * B; i++)
        if (!(fabs((double)gy[i] - ry[i]) <= rope_b + pc_ulp32(ry[i])))
            fail_msg("%s: rope f32 element %d = %.9g, reference %.9g", what, i, gy[i], ry[i]);
    const uint16_t *gh = (const uint16_t *)(const void *)(got + X16_OFF);
    const uint16_t *rh = (const uint16_t *)(const void *)(ref + X16_OFF);
    for (int i = 0; i < D * H * T * B; i++) {
        double g = posenc_f16_to_f32(gh[i]), r = posenc_f16_to_f32(rh[i]);
        if (!(fabs(g - r) <= pc_bound_to_f16(rope_b, r)))
            fail_msg("%s: rope f16 element %d = %.9g, reference %.9g", what, i, g, r);
    }
    const float *gs = (const float *)(const void *)(got + SIN_OFF);
    const float *rs = (const float *)(const void *)(ref + SIN_OFF);
    for (int i = 0; i < D * T; i++)
        if (!(fabs((double)gs[i] - rs[i]) <= pc_bound_sincos_f32(64.0, 0.0) + pc_ulp32(rs[i])))
            fail_msg("%s: sinusoidal element %d = %.9g, reference %.9g", what, i, gs[i], rs[i]);
}

/* The output regions of two blocks, byte for byte. */
static void compare_exact(const unsigned char *got, const unsigned char *want, const char *what)
{
    static const struct {
        size_t off, size;
        const char *name;
    } r[] = {{ROPE_OFF, D * H * T * B * 4, "rope f32"},
             {X16_OFF, D * H * T * B * 2, "copy + rope f16"},
             {SIN_OFF, D * T * 4, "sinusoidal"}};
    for (size_t k = 0; k < sizeof(r) / sizeof(r[0]); k++)
        if (memcmp(got + r[k].off, want + r[k].off, r[k].size) != 0)
            fail_msg("%s: %s differs from the same step on posenc buffers", what, r[k].name);
}

static void expect(posenc_status got, posenc_status want, posenc_context *ctx,
                   const char *needle, const char *what)
{
    const char *msg = ctx ? posenc_context_last_error(ctx) : posenc_last_error();
    if (got != want)
        fail_msg("%s: status %s, want %s (message: %s)", what, posenc_status_string(got),
                 posenc_status_string(want), msg);
    if (needle && !strstr(msg, needle))
        fail_msg("%s: message \"%s\" does not mention \"%s\"", what, msg, needle);
}

static size_t alignment(void)
{
    size_t a = 0;
    posenc_status st = posenc_buffer_host_alignment(th.dut, &a);
    if (st != POSENC_OK)
        fail_msg("posenc_buffer_host_alignment: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(th.dut));
    assert_true(a >= 8 && (a & (a - 1)) == 0);
    return a;
}

static void test_ops(void **state)
{
    (void)state;
    const size_t a = alignment();
    unsigned char *img = malloc(IMG), *ref = malloc(IMG), *own = malloc(IMG);
    assert_non_null(img);
    assert_non_null(ref);
    assert_non_null(own);
    /* the block at an alignment exactly `a` (not more), as a runtime's may be */
    unsigned char *raw = aligned_alloc(4096, (IMG + 4096 + 4095) / 4096 * 4096);
    unsigned char *ffraw = aligned_alloc(4096, (IMG + 4096 + 4095) / 4096 * 4096); /* the freq_factors' block */
    assert_non_null(raw);
    assert_non_null(ffraw);
    unsigned char *mem = raw + (a < 4096 ? a : 0), *ffmem = ffraw + (a < 4096 ? a : 0);

    /* Round 1: inputs written by the host before the wrap. */
    make_image(img, 0x5eed);
    memcpy(mem, img, IMG);
    memcpy(ffmem, img, IMG);
    posenc_buffer *b = NULL, *bff = NULL;
    posenc_status st = posenc_buffer_wrap_host(th.dut, mem, IMG, &b);
    if (st == POSENC_OK)
        st = posenc_buffer_wrap_host(th.dut, ffmem, IMG, &bff);
    if (st != POSENC_OK)
        fail_msg("posenc_buffer_wrap_host: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(th.dut));
    assert_int_equal(posenc_buffer_size(b), IMG);
    assert_ptr_equal(posenc_buffer_context(b), th.dut);
    run_step(th.dut, b, bff);
    assert_int_equal(posenc_context_finish(th.dut), POSENC_OK);
    run_on_buffer(th.ref, img, ref);
    run_on_buffer(th.dut, img, own);
    compare_exact(mem, own, "round 1");
    compare_ref(mem, ref, "round 1");
    /* the inputs are untouched (x was read, not written) */
    assert_memory_equal(mem + X_OFF, img + X_OFF, POS_OFF - X_OFF);

    /* Round 2: the host rewrites x and the freq_factors in place (its turn after finish):
     * posenc must see both (a stale mapping or cached factors would not). */
    make_image(img, 0xbeef);
    memcpy(mem + X_OFF, img + X_OFF, ROPE_OFF - X_OFF);
    memcpy(ffmem + FF_OFF, img + FF_OFF, (D / 2) * 4);
    run_step(th.dut, b, bff);
    assert_int_equal(posenc_context_finish(th.dut), POSENC_OK);
    run_on_buffer(th.ref, img, ref);
    run_on_buffer(th.dut, img, own);
    compare_exact(mem, own, "round 2 (host wrote x and freq_factors)");
    compare_ref(mem, ref, "round 2 (host wrote x and freq_factors)");

    /* Round 3: posenc_buffer_write / _read on the wrapped buffer. */
    make_image(img, 0xcafe);
    assert_int_equal(posenc_buffer_write(b, X_OFF, img + X_OFF, ROPE_OFF - X_OFF), POSENC_OK);
    assert_int_equal(posenc_buffer_write(bff, FF_OFF, img + FF_OFF, (D / 2) * 4), POSENC_OK);
    run_step(th.dut, b, bff);
    unsigned char *back = th_download(b);
    assert_int_equal(posenc_context_finish(th.dut), POSENC_OK);
    assert_memory_equal(back, mem, IMG);
    run_on_buffer(th.ref, img, ref);
    compare_ref(mem, ref, "round 3 (posenc_buffer_write)");
    free(back);

    /* Destroy: the memory keeps the final results and stays the caller's. */
    unsigned char *last = malloc(IMG);
    assert_non_null(last);
    /* the host clears the outputs (its turn), then the step is queued and not finished:
     * destroy must wait for it and leave its results in the memory */
    memset(mem + ROPE_OFF, 0, IMG - ROPE_OFF);
    run_step(th.dut, b, bff);
    posenc_buffer_destroy(&b);
    posenc_buffer_destroy(&bff);
    assert_null(b);
    memcpy(last, mem, IMG);
    compare_ref(last, ref, "after destroy");
    memset(mem, 0x5a, IMG); /* still ours to write (ASan: still allocated) */
    free(last);
    free(raw);
    free(ffraw);
    free(img);
    free(ref);
    free(own);
    th_check_warnings();
}

static void test_views(void **state)
{
    (void)state;
    const size_t a = alignment();
    enum { N = 64 };
    float *raw = aligned_alloc(4096, 8192);
    assert_non_null(raw);
    posenc_buffer *b = NULL;
    assert_int_equal(posenc_buffer_wrap_host(th.dut, raw, 8192, &b), POSENC_OK);
    for (int i = 0; i < 2048; i++)
        raw[i] = (float)i * 0.25f;
    /* A copy between views at odd element offsets (4 bytes: element 1) of f32 is fine. */
    posenc_tensor src = posenc_tensor_contiguous(b, 4, POSENC_DTYPE_F32, N - 1, 1, 1, 1);
    posenc_tensor dst = posenc_tensor_contiguous(b, 4096 + 12, POSENC_DTYPE_F32, N - 1, 1, 1, 1);
    assert_int_equal(posenc_copy(th.dut, &src, &dst), POSENC_OK);
    assert_int_equal(posenc_context_finish(th.dut), POSENC_OK);
    for (int i = 0; i < N - 1; i++)
        assert_true(raw[1024 + 3 + i] == (float)(1 + i) * 0.25f); /* exact: same dtype */
    /* An offset that is not a multiple of the element size is refused, output untouched. */
    float before[N + 4];
    memcpy(before, raw + 1024, sizeof(before));
    posenc_tensor odd = posenc_tensor_contiguous(b, 2, POSENC_DTYPE_F32, N - 1, 1, 1, 1);
    expect(posenc_copy(th.dut, &odd, &dst), POSENC_ERR_INVALID_ARGUMENT, th.dut,
           "offset = 2 is not a multiple", "odd offset");
    assert_int_equal(posenc_context_finish(th.dut), POSENC_OK);
    assert_memory_equal(before, raw + 1024, sizeof(before));
    posenc_buffer_destroy(&b);

    /* Misaligned pointers are refused, the alignment itself accepted. */
    unsigned char *p = (unsigned char *)raw;
    b = (posenc_buffer *)(uintptr_t)1;
    expect(posenc_buffer_wrap_host(th.dut, p + a / 2, 1024, &b), POSENC_ERR_INVALID_ARGUMENT,
           th.dut, "is not a multiple of", "ptr + alignment/2");
    assert_null(b);
    expect(posenc_buffer_wrap_host(th.dut, p + 1, 1024, &b), POSENC_ERR_INVALID_ARGUMENT,
           th.dut, "is not a multiple of", "ptr + 1");
    char want[64];
    snprintf(want, sizeof(want), "multiple of %zu bytes", a);
    expect(posenc_buffer_wrap_host(th.dut, p + 4, 1024, &b), POSENC_ERR_INVALID_ARGUMENT,
           th.dut, want, "ptr + 4");
    assert_int_equal(posenc_buffer_wrap_host(th.dut, p + a, 8192 - a, &b), POSENC_OK);
    assert_int_equal(posenc_buffer_size(b), 8192 - a);
    posenc_buffer_destroy(&b);
    free(raw);
    th_check_warnings();
}

static void test_bad_input(void **state)
{
    (void)state;
    const size_t a = alignment();
    void *mem = aligned_alloc(4096, 4096);
    assert_non_null(mem);
    posenc_buffer *b = (posenc_buffer *)(uintptr_t)1;
    expect(posenc_buffer_wrap_host(NULL, mem, 64, &b), POSENC_ERR_INVALID_ARGUMENT, NULL,
           "ctx is NULL", "NULL ctx");
    assert_null(b);
    b = (posenc_buffer *)(uintptr_t)1;
    expect(posenc_buffer_wrap_host(th.dut, NULL, 64, &b), POSENC_ERR_INVALID_ARGUMENT, th.dut,
           "ptr is NULL", "NULL ptr");
    assert_null(b);
    expect(posenc_buffer_wrap_host(th.dut, mem, 0, &b), POSENC_ERR_INVALID_ARGUMENT, th.dut,
           "size = 0", "size 0");
    expect(posenc_buffer_wrap_host(th.dut, mem, 64, NULL), POSENC_ERR_INVALID_ARGUMENT, th.dut,
           "out_buffer is NULL", "NULL out_buffer");
    /* an aligned pointer whose range runs past the top of the address space (never
     * dereferenced: refused first) */
    void *top = (void *)((UINTPTR_MAX & ~(uintptr_t)4095) - 4096);
    expect(posenc_buffer_wrap_host(th.dut, top, 8192, &b), POSENC_ERR_INVALID_ARGUMENT, th.dut,
           "wraps around", "wrap-around");
    assert_null(b);
    /* larger than the device's largest buffer (not dereferenced either) */
    struct posenc_device_info info;
    assert_int_equal(posenc_context_get_info(th.dut, &info), POSENC_OK);
    if (info.max_buffer_size < UINTPTR_MAX - (uintptr_t)mem)
        expect(posenc_buffer_wrap_host(th.dut, mem, (size_t)info.max_buffer_size + 1, &b),
               POSENC_ERR_UNSUPPORTED, th.dut, "size = ", "too large");
    assert_null(b);
    size_t got = 1;
    expect(posenc_buffer_host_alignment(NULL, &got), POSENC_ERR_INVALID_ARGUMENT, NULL,
           "ctx is NULL", "alignment NULL ctx");
    assert_int_equal(got, 0);
    expect(posenc_buffer_host_alignment(th.dut, NULL), POSENC_ERR_INVALID_ARGUMENT, th.dut,
           "out_alignment is NULL", "alignment NULL out");
    /* a failed wrap leaves the memory alone and the context usable */
    memset(mem, 0x11, 4096);
    assert_int_equal(posenc_buffer_wrap_host(th.dut, mem, 4096, &b), POSENC_OK);
    posenc_buffer_destroy(&b);
    unsigned char *u = mem;
    for (int i = 0; i < 4096; i++)
        assert_int_equal(u[i], 0x11);
    (void)a;
    free(mem);
    th_check_warnings();
}

/* A context destroyed before its wrapped host buffer (a usage error posenc survives): the
 * queued op's results are in the memory, the handle is an orphan that destroy still
 * takes, and the memory is never freed by posenc (ASan: the test frees it). */
static void test_context_first(void **state)
{
    (void)state;
    const size_t a = alignment();
    posenc_context *ctx = NULL;
    char err[256];
    struct posenc_context_params p = {.backend = th.kind};
    assert_int_equal(posenc_context_create(&p, &ctx, err, sizeof(err)), POSENC_OK);
    unsigned char *raw = aligned_alloc(4096, 8192);
    assert_non_null(raw);
    memset(raw, 0, 8192);
    int32_t *pos = (int32_t *)(void *)(raw + a);
    for (int t = 0; t < T; t++)
        pos[t] = 5 * t;
    posenc_buffer *b = NULL;
    assert_int_equal(posenc_buffer_wrap_host(ctx, raw, 8192, &b), POSENC_OK);
    posenc_tensor tp = posenc_tensor_contiguous(b, a, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor ts = posenc_tensor_contiguous(b, 4096, POSENC_DTYPE_F32, D, T, 1, 1);
    assert_int_equal(posenc_sinusoidal(ctx, NULL, &tp, &ts, NULL), POSENC_OK);
    posenc_context_destroy(&ctx); /* logs an ERROR (a buffer left), no log_fn here */
    assert_ptr_equal(posenc_buffer_context(b), NULL);
    posenc_buffer_destroy(&b);
    assert_null(b);
    /* the reference on th.ref */
    posenc_buffer *rp = th_upload(th.ref, pos, T * 4), *rs = NULL;
    assert_int_equal(posenc_buffer_create(th.ref, D * T * 4, &rs), POSENC_OK);
    posenc_tensor rtp = posenc_tensor_contiguous(rp, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor rts = posenc_tensor_contiguous(rs, 0, POSENC_DTYPE_F32, D, T, 1, 1);
    assert_int_equal(posenc_sinusoidal(th.ref, NULL, &rtp, &rts, NULL), POSENC_OK);
    float *ref = th_download(rs);
    const float *got = (const float *)(const void *)(raw + 4096);
    /* positions < 64, default frequencies <= 1: angles below 64 rad (check.c's bound) */
    for (int i = 0; i < D * T; i++)
        if (!(fabs((double)got[i] - ref[i]) <= pc_bound_sincos_f32(64.0, 0.0) + pc_ulp32(ref[i])))
            fail_msg("element %d = %.9g, reference %.9g", i, got[i], ref[i]);
    free(ref);
    posenc_buffer_destroy(&rp);
    posenc_buffer_destroy(&rs);
    free(raw);
    th_check_warnings();
}

static void test_unsupported(void **state)
{
    (void)state;
    float mem[64];
    posenc_buffer *b = (posenc_buffer *)(uintptr_t)1;
    expect(posenc_buffer_wrap_host(th.dut, mem, sizeof(mem), &b), POSENC_ERR_UNSUPPORTED,
           th.dut, "VK_EXT_external_memory_host", "wrap on Vulkan");
    assert_null(b);
    size_t a = 1;
    expect(posenc_buffer_host_alignment(th.dut, &a), POSENC_ERR_UNSUPPORTED, th.dut,
           "cannot wrap host memory", "alignment on Vulkan");
    assert_int_equal(a, 0);
    th_check_warnings();
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "host_memory");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest wrap[] = {
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_context_first),
    };
    const struct CMUnitTest none[] = {cmocka_unit_test(test_unsupported)};
    if (th.kind == POSENC_BACKEND_VULKAN)
        rc = th_run("host_memory", none, sizeof(none) / sizeof(none[0]));
    else
        rc = th_run("host_memory", wrap, sizeof(wrap) / sizeof(wrap[0]));
    th_fini();
    return rc;
}
