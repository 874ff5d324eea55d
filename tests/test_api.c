/*
 * test_api.c - contexts, buffers, tensors, statuses and f16 conversions on one backend
 * (--backend NAME): every documented error path with its exact status and message.
 */
#include "check.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_status_strings(void **state)
{
    (void)state;
    for (int s = 0; s <= POSENC_ERR_INTERNAL; s++) {
        const char *str = posenc_status_string((posenc_status)s);
        assert_non_null(str);
        assert_true(strlen(str) > 0);
        assert_string_not_equal(str, "unknown status");
    }
    assert_string_equal(posenc_status_string((posenc_status)99), "unknown status");
    assert_string_equal(posenc_backend_name(POSENC_BACKEND_VULKAN), "vulkan");
    assert_string_equal(posenc_backend_name((posenc_backend_kind)42), "?");
    assert_string_equal(posenc_dtype_name(POSENC_DTYPE_F16), "f16");
    assert_int_equal(posenc_dtype_size(POSENC_DTYPE_F16), 2);
    assert_int_equal(posenc_dtype_size((posenc_dtype)5), 0);
    char v[32];
    snprintf(v, sizeof(v), "%d.%d.%d", POSENC_VERSION_MAJOR, POSENC_VERSION_MINOR,
             POSENC_VERSION_PATCH);
    assert_string_equal(posenc_version(), v);
}

static void test_context_params(void **state)
{
    (void)state;
    posenc_context *ctx = (posenc_context *)1;
    char err[256];
    struct posenc_context_params p = {.backend = th.kind};
    p.reserved[3] = 1;
    assert_int_equal(posenc_context_create(&p, &ctx, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(err, "reserved[3]"));

    memset(&p, 0, sizeof(p));
    p.backend = (posenc_backend_kind)17;
    assert_int_equal(posenc_context_create(&p, &ctx, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "params->backend = 17"));

    memset(&p, 0, sizeof(p));
    p.backend = th.kind;
    p.device = 1000;
    assert_int_equal(posenc_context_create(&p, &ctx, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "1000"));

    p.device = -3;
    assert_int_equal(posenc_context_create(&p, &ctx, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "device"));

    memset(&p, 0, sizeof(p));
    p.flags = 0x80;
    assert_int_equal(posenc_context_create(&p, &ctx, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "flags"));

    assert_int_equal(posenc_context_create(NULL, NULL, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    /* a tiny error buffer is still NUL-terminated */
    p.flags = 0x80;
    char tiny[4] = "xxx";
    assert_int_equal(posenc_context_create(&p, &ctx, tiny, sizeof(tiny)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(strlen(tiny), 3);

    /* destroy accepts NULL and &NULL */
    posenc_context_destroy(NULL);
    ctx = NULL;
    posenc_context_destroy(&ctx);
    posenc_buffer_destroy(NULL);
    posenc_buffer *b = NULL;
    posenc_buffer_destroy(&b);
}

static void test_env_override(void **state)
{
    (void)state;
    posenc_context *ctx = NULL;
    char err[256];
    setenv("POSENC_BACKEND", "bogus", 1);
    assert_int_equal(posenc_context_create(NULL, &ctx, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "POSENC_BACKEND"));
    setenv("POSENC_BACKEND", "cpu", 1);
    assert_int_equal(posenc_context_create(NULL, &ctx, err, sizeof(err)), POSENC_OK);
    struct posenc_device_info info;
    assert_int_equal(posenc_context_get_info(ctx, &info), POSENC_OK);
    assert_int_equal(info.backend, POSENC_BACKEND_CPU);
    posenc_context_destroy(&ctx);
    assert_null(ctx);
    unsetenv("POSENC_BACKEND");
    setenv("POSENC_DEVICE", "x1", 1);
    assert_int_equal(posenc_context_create(NULL, &ctx, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "POSENC_DEVICE"));
    unsetenv("POSENC_DEVICE");
}

static void test_auto_never_picks_emulated(void **state)
{
    (void)state;
    posenc_context *ctx = NULL;
    assert_int_equal(posenc_context_create(NULL, &ctx, NULL, 0), POSENC_OK);
    struct posenc_device_info info;
    assert_int_equal(posenc_context_get_info(ctx, &info), POSENC_OK);
    /* AUTO takes a GPU or the CPU backend, never a CPU-emulated OpenCL/Vulkan device */
    if (info.backend != POSENC_BACKEND_CPU)
        assert_int_not_equal(info.type, POSENC_DEVICE_CPU);
    posenc_context_destroy(&ctx);
}

static void test_device_info(void **state)
{
    (void)state;
    struct posenc_device_info info;
    assert_int_equal(posenc_context_get_info(th.dut, NULL), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_context_get_info(th.dut, &info), POSENC_OK);
    assert_int_equal(info.backend, th.kind);
    assert_true(strlen(info.device_name) > 0);
    assert_true(strlen(info.api_version) > 0);
    assert_int_equal(info.f16_storage, 1);
    assert_true(info.max_buffer_size >= (1u << 20));
    int32_t count = 0;
    char why[256];
    assert_int_equal(posenc_backend_device_count(th.kind, &count, why, sizeof(why)), POSENC_OK);
    assert_true(count >= 1);
    assert_int_equal(posenc_backend_device_count(POSENC_BACKEND_AUTO, &count, why, sizeof(why)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_backend_device_count(th.kind, NULL, why, sizeof(why)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_context_finish(th.dut), POSENC_OK);
    assert_int_equal(posenc_context_finish(NULL), POSENC_ERR_INVALID_ARGUMENT);
}

static void test_buffers(void **state)
{
    (void)state;
    posenc_buffer *b = NULL;
    assert_int_equal(posenc_buffer_create(th.dut, 0, &b), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "size = 0"));
    assert_null(b);
    assert_int_equal(posenc_buffer_create(th.dut, 16, NULL), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_buffer_create(NULL, 16, &b), POSENC_ERR_INVALID_ARGUMENT);

    /* round trip through odd offsets and sizes */
    enum { N = 1001 };
    unsigned char src[N], dst[N];
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    assert_int_equal(posenc_buffer_create(th.dut, N, &b), POSENC_OK);
    assert_int_equal(posenc_buffer_size(b), N);
    assert_ptr_equal(posenc_buffer_context(b), th.dut);
    assert_int_equal(posenc_buffer_write(b, 0, src, N), POSENC_OK);
    assert_int_equal(posenc_buffer_write(b, 13, src + 500, 77), POSENC_OK);
    assert_int_equal(posenc_buffer_read(b, 0, dst, N), POSENC_OK);
    for (int i = 0; i < N; i++) {
        unsigned char want = (i >= 13 && i < 90) ? src[500 + i - 13] : src[i];
        assert_int_equal(dst[i], want);
    }
    unsigned char part[5];
    assert_int_equal(posenc_buffer_read(b, N - 5, part, 5), POSENC_OK);
    assert_memory_equal(part, dst + N - 5, 5);

    /* out of range, NULL host pointers; nothing is changed */
    assert_int_equal(posenc_buffer_write(b, N - 4, src, 5), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "past the end"));
    assert_int_equal(posenc_buffer_write(b, SIZE_MAX, src, 2), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_buffer_read(b, 1, dst, SIZE_MAX), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_buffer_write(b, 0, NULL, 4), POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(posenc_context_last_error(th.dut), "src"));
    assert_int_equal(posenc_buffer_read(b, 0, NULL, 4), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_buffer_write(NULL, 0, src, 4), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_buffer_write(b, 0, src, 0), POSENC_OK);
    assert_string_equal(posenc_context_last_error(th.dut), "");
    unsigned char again[N];
    assert_int_equal(posenc_buffer_read(b, 0, again, N), POSENC_OK);
    assert_memory_equal(again, dst, N);
    posenc_buffer_destroy(&b);
    assert_null(b);
    th_check_warnings();
}

/* A buffer that outlives its context: the device memory goes with the context (no
 * validation message about leaked device memory), the handle can still be destroyed. */
static void test_orphan_buffer(void **state)
{
    (void)state;
    struct posenc_context_params p = {.backend = th.kind, .flags = POSENC_CONTEXT_DEBUG,
                                      .log_fn = th_log, .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    assert_int_equal(posenc_context_create(&p, &ctx, NULL, 0), POSENC_OK);
    posenc_buffer *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(posenc_buffer_create(ctx, 64, &a), POSENC_OK);
    assert_int_equal(posenc_buffer_create(ctx, 64, &b), POSENC_OK);
    assert_int_equal(posenc_buffer_create(ctx, 64, &c), POSENC_OK);
    posenc_buffer_destroy(&b); /* unlink from the middle of the list */
    posenc_context_destroy(&ctx);
    char tmp[4];
    assert_int_equal(posenc_buffer_write(a, 0, tmp, 4), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_buffer_read(c, 0, tmp, 4), POSENC_ERR_INVALID_ARGUMENT);
    assert_null(posenc_buffer_context(a));
    posenc_buffer_destroy(&a);
    posenc_buffer_destroy(&c);
    assert_null(a);
    th_check_warnings();
}

static void test_tensor_helpers(void **state)
{
    (void)state;
    posenc_tensor t = posenc_tensor_contiguous(NULL, 8, POSENC_DTYPE_F16, 3, 5, 7, 2);
    assert_int_equal(t.nb[0], 2);
    assert_int_equal(t.nb[1], 6);
    assert_int_equal(t.nb[2], 30);
    assert_int_equal(t.nb[3], 210);
    assert_int_equal(t.offset, 8);
    assert_int_equal(posenc_tensor_nelements(&t), 210);
    t.ne[2] = 0;
    assert_int_equal(posenc_tensor_nelements(&t), 0);
    t.ne[0] = INT64_MAX;
    t.ne[2] = 3;
    assert_int_equal(posenc_tensor_nelements(&t), -1);
    assert_int_equal(posenc_tensor_nelements(NULL), -1);
}

/* f16 conversions against an independent construction: every f16 value converts to the
 * float it encodes and back to itself; f32 -> f16 rounds to nearest, ties to even. */
static void test_f16(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = posenc_f16_to_f32((uint16_t)h);
        int exp = (h >> 10) & 31, man = h & 1023;
        if (exp == 31 && man) {
            assert_true(isnan(f));
            continue;
        }
        double want = exp == 0 ? man * 0x1p-24 : exp == 31 ? INFINITY
                                                           : (1024 + man) * pow(2.0, exp - 25);
        if (h & 0x8000)
            want = -want;
        assert_true((double)f == want);
        assert_int_equal(posenc_f32_to_f16(f), h);
    }
    /* ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> even (1.0) */
    assert_int_equal(posenc_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(posenc_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    assert_int_equal(posenc_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(posenc_f32_to_f16(65520.0f), 0x7c00); /* rounds to inf */
    assert_int_equal(posenc_f32_to_f16(65519.99f), 0x7bff);
    assert_int_equal(posenc_f32_to_f16(0x1p-25f), 0x0000);        /* tie to even: 0 */
    assert_int_equal(posenc_f32_to_f16(0x1.8p-24f), 0x0002);      /* 1.5 units: to 2 */
    assert_int_equal(posenc_f32_to_f16(-0.0f), 0x8000);
    assert_true(isnan(posenc_f16_to_f32(posenc_f32_to_f16(NAN))));
    /* random floats: the result is one of the two neighbours and the nearer one */
    uint64_t rng = 99;
    for (int i = 0; i < 100000; i++) {
        float f = (float)((pc_rand_uniform(&rng) * 2 - 1) * 70000.0);
        uint16_t h = posenc_f32_to_f16(f);
        double g = posenc_f16_to_f32(h);
        if (isinf(g))
            assert_true(fabs(f) >= 65520.0);
        else
            assert_true(fabs(g - f) <= 0.5 * pc_ulp16(fmax(fabs(f), fabs(g))) * 1.0000001);
    }
}

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "api");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_context_params),
        cmocka_unit_test(test_env_override),
        cmocka_unit_test(test_auto_never_picks_emulated),
        cmocka_unit_test(test_device_info),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_orphan_buffer),
        cmocka_unit_test(test_tensor_helpers),
        cmocka_unit_test(test_f16),
    };
    rc = th_run("api", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
