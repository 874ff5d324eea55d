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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
    static const char *const not_index[] = {"x1", "-1", "2147483648", "1x"};
    for (size_t i = 0; i < sizeof(not_index) / sizeof(not_index[0]); i++) {
        setenv("POSENC_DEVICE", not_index[i], 1);
        assert_int_equal(posenc_context_create(NULL, &ctx, err, sizeof(err)),
                         POSENC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err, "POSENC_DEVICE"));
        assert_non_null(strstr(err, not_index[i]));
        assert_null(ctx);
    }
    /* an index: taken as params->device (the CPU backend has device 0 only) */
    setenv("POSENC_BACKEND", "cpu", 1);
    setenv("POSENC_DEVICE", "0", 1);
    assert_int_equal(posenc_context_create(NULL, &ctx, err, sizeof(err)), POSENC_OK);
    posenc_context_destroy(&ctx);
    setenv("POSENC_DEVICE", "1", 1);
    assert_int_equal(posenc_context_create(NULL, &ctx, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "device = 1"));
    assert_null(ctx);
    unsetenv("POSENC_BACKEND");
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

/* ---- backend failure: broken or missing drivers ------------------------------------------ */

/* In a child process (the loaders read their configuration once): the OpenCL ICD loader
 * sees only a vendor file naming a library that does not exist, the Vulkan loader only an
 * ICD manifest naming one. AUTO must fall back to the CPU backend and say why through the
 * log callback; a forced backend must answer UNAVAILABLE with the loader's own error. */

static const char *self_path = "/proc/self/exe"; /* argv[0] when it is a path (valgrind
                                                   * makes /proc/self/exe its own binary) */

struct log_capture {
    char text[4096];
};

static void capture_log(posenc_log_level level, const char *msg, void *user)
{
    struct log_capture *c = user;
    size_t n = strlen(c->text);
    snprintf(c->text + n, sizeof(c->text) - n, "[%d] %s\n", (int)level, msg);
}

/* On PoCL (a CPU device whose api_version names PoCL) a context logs, at INFO, the hint
 * to pin PoCL's workers while POCL_AFFINITY is unset, and not once it is set (to any
 * value: the user chose); other devices never log it. */
static void test_pocl_affinity_hint(void **state)
{
    (void)state;
    struct posenc_device_info info;
    assert_int_equal(posenc_context_get_info(th.dut, &info), POSENC_OK);
    const int pocl = th.kind == POSENC_BACKEND_OPENCL && info.type == POSENC_DEVICE_CPU &&
                     strstr(info.api_version, "PoCL") != NULL;
    char *saved = th_env_save("POCL_AFFINITY");
    for (int set = 0; set < 2; set++) {
        if (set)
            setenv("POCL_AFFINITY", "0", 1);
        else
            unsetenv("POCL_AFFINITY");
        struct log_capture cap = {""};
        struct posenc_context_params p = {.backend = th.kind, .device = info.device_index,
                                          .log_fn = capture_log,
                                          .log_level = POSENC_LOG_INFO, .log_user_data = &cap};
        posenc_context *ctx = NULL;
        char err[256];
        assert_int_equal(posenc_context_create(&p, &ctx, err, sizeof(err)), POSENC_OK);
        const int logged = strstr(cap.text, "POCL_AFFINITY=1") != NULL;
        if (logged != (pocl && !set))
            fail_msg("POCL_AFFINITY %s, PoCL %d: the hint %s logged in:\n%s",
                     set ? "=0" : "unset", pocl, logged ? "was" : "was not", cap.text);
        posenc_context_destroy(&ctx);
    }
    th_env_restore("POCL_AFFINITY", saved);
}

#define CHILD_CHECK(cond, ...)                                                                \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "broken drivers: " __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                                           \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

/* argv: --broken-drivers HAVE_OPENCL HAVE_VULKAN (1 when the backend works normally) */
static int broken_drivers_child(int have_cl, int have_vk)
{
    struct log_capture cap = {""};
    struct posenc_context_params p = {.backend = POSENC_BACKEND_AUTO, .log_fn = capture_log,
                                      .log_level = POSENC_LOG_INFO, .log_user_data = &cap};
    posenc_context *ctx = NULL;
    char err[512];
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    CHILD_CHECK(st == POSENC_OK, "AUTO failed: %s: %s", posenc_status_string(st), err);
    struct posenc_device_info info;
    CHILD_CHECK(posenc_context_get_info(ctx, &info) == POSENC_OK, "get_info");
    CHILD_CHECK(info.backend == POSENC_BACKEND_CPU, "AUTO chose %s",
                posenc_backend_name(info.backend));
    /* the fallback is logged with each skipped backend's reason */
    CHILD_CHECK(strstr(cap.text, "auto: vulkan skipped: ") != NULL, "no vulkan line in: %s",
                cap.text);
    CHILD_CHECK(strstr(cap.text, "auto: opencl skipped: ") != NULL, "no opencl line in: %s",
                cap.text);
    CHILD_CHECK(strstr(cap.text, "using backend cpu") != NULL, "no choice line in: %s",
                cap.text);
    if (have_vk)
        CHILD_CHECK(strstr(cap.text, "VK_ERROR_INCOMPATIBLE_DRIVER") != NULL,
                    "the Vulkan loader's error is not in: %s", cap.text);
    if (have_cl)
        CHILD_CHECK(strstr(cap.text, "no OpenCL platform") != NULL,
                    "the OpenCL loader's error is not in: %s", cap.text);
    posenc_context_destroy(&ctx);

    /* forced backends: UNAVAILABLE with the driver's text, never a fallback */
    const posenc_backend_kind forced[2] = {POSENC_BACKEND_OPENCL, POSENC_BACKEND_VULKAN};
    for (int i = 0; i < 2; i++) {
        struct posenc_context_params fp = {.backend = forced[i]};
        st = posenc_context_create(&fp, &ctx, err, sizeof(err));
        CHILD_CHECK(st == POSENC_ERR_UNAVAILABLE && ctx == NULL, "forced %s: %s: %s",
                    posenc_backend_name(forced[i]), posenc_status_string(st), err);
        int have = forced[i] == POSENC_BACKEND_OPENCL ? have_cl : have_vk;
        const char *want = forced[i] == POSENC_BACKEND_OPENCL
                               ? "no OpenCL platform (ICD loader returned -1001)"
                               : "vkCreateInstance (Vulkan 1.1) failed: "
                                 "VK_ERROR_INCOMPATIBLE_DRIVER (-9)";
        if (have)
            CHILD_CHECK(strstr(err, want) != NULL, "forced %s: \"%s\" lacks \"%s\"",
                        posenc_backend_name(forced[i]), err, want);
        int32_t n = -1;
        char why[512];
        st = posenc_backend_device_count(forced[i], &n, why, sizeof(why));
        CHILD_CHECK(st == POSENC_ERR_UNAVAILABLE && n == 0 && why[0], "device_count %s: %s",
                    posenc_backend_name(forced[i]), posenc_status_string(st));
    }
    printf("broken drivers: AUTO fell back to cpu and logged why; forced backends unavailable\n");
    return 0;
}

static void test_broken_drivers(void **state)
{
    (void)state;
    int32_t n;
    int have_cl = posenc_backend_device_count(POSENC_BACKEND_OPENCL, &n, NULL, 0) == POSENC_OK;
    int have_vk = posenc_backend_device_count(POSENC_BACKEND_VULKAN, &n, NULL, 0) == POSENC_OK;
    char dir[] = "/tmp/posenc-broken-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char icd[700], vendors[600], manifest[600];
    snprintf(vendors, sizeof(vendors), "%s/vendors", dir);
    snprintf(icd, sizeof(icd), "%s/broken.icd", vendors);
    snprintf(manifest, sizeof(manifest), "%s/broken_icd.json", dir);
    assert_int_equal(mkdir(vendors, 0700), 0);
    FILE *f = fopen(icd, "w");
    assert_non_null(f);
    fprintf(f, "/nonexistent/libOpenCL-broken-driver.so\n");
    fclose(f);
    f = fopen(manifest, "w");
    assert_non_null(f);
    fprintf(f, "{\"file_format_version\": \"1.0.0\", \"ICD\": {\"library_path\": "
               "\"/nonexistent/libvulkan-broken-driver.so\", \"api_version\": \"1.3.0\"}}\n");
    fclose(f);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("OCL_ICD_VENDORS", vendors, 1);  /* ocl-icd */
        setenv("OPENCL_VENDOR_PATH", vendors, 1); /* the Khronos loader */
        setenv("VK_ICD_FILENAMES", manifest, 1);
        setenv("VK_DRIVER_FILES", manifest, 1);
        unsetenv("POSENC_BACKEND");
        unsetenv("POSENC_DEVICE");
        char a1[2] = {(char)('0' + have_cl), 0}, a2[2] = {(char)('0' + have_vk), 0};
        char *args[] = {"test_api", "--broken-drivers", a1, a2, NULL};
        execv(self_path, args);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    remove(icd);
    remove(manifest);
    rmdir(vendors);
    rmdir(dir);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--broken-drivers"))
        return broken_drivers_child(argv[2][0] == '1', argv[3][0] == '1');
    if (argc > 0 && strchr(argv[0], '/'))
        self_path = argv[0];
    int rc = th_init(argc, argv, "api");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_context_params),
        cmocka_unit_test(test_env_override),
        cmocka_unit_test(test_auto_never_picks_emulated),
        cmocka_unit_test(test_device_info),
        cmocka_unit_test(test_pocl_affinity_hint),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_orphan_buffer),
        cmocka_unit_test(test_tensor_helpers),
        cmocka_unit_test(test_f16),
        cmocka_unit_test(test_broken_drivers),
    };
    rc = th_run("api", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    return rc;
}
