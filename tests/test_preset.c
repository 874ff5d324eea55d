/*
 * test_preset.c - POSENC_DEVICE_PRESET (issue #18), on one backend (--backend NAME).
 *
 *  - Each preset lowers what posenc_context_get_info reports to min(preset, device): the
 *    work-group size, the largest buffer, the binding limit, f16_native; the type becomes
 *    the preset's (a GPU); the INFO log names the preset. The expected figures come from
 *    the preset table itself (src/preset.c, through pe_preset_find) and from a context
 *    without the preset on the same device: nothing is written down twice.
 *  - The lowered buffer limit is enforced: one byte over it is POSENC_ERR_UNSUPPORTED
 *    (nothing allocated), and a buffer of exactly the limit's size is not refused by posenc
 *    on that ground (not created here: it may be gigabytes).
 *  - An unknown name fails context creation with POSENC_ERR_INVALID_ARGUMENT naming the
 *    variable and listing every preset.
 *  - below-spec (limits under the specifications' minimums): OpenCL's softmax shrinks its
 *    reduction to fit and stays right; Vulkan's softmax shader does not fit and is
 *    refused, naming the limit, the output untouched.
 *  - The CPU backend ignores presets: the same info with and without.
 * The op suites themselves run under each preset through tests/meson.build (suite
 * 'preset').
 */
#include "check.h"
#include "harness.h"
#include "preset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"adreno", "mali", "intel-igpu", "minimum", "below-spec"};

static char log_seen[8192];

static void capture_log(posenc_log_level level, const char *msg, void *user)
{
    if ((level == POSENC_LOG_INFO && strstr(msg, "POSENC_DEVICE_PRESET=")) ||
        strstr(msg, "pe_softmax: reductions")) {
        size_t len = strlen(log_seen);
        snprintf(log_seen + len, sizeof log_seen - len, "%s\n", msg);
    }
    th_log(level, msg, user);
}

/* A context on the backend under test with POSENC_DEVICE_PRESET = value (NULL: unset). */
static posenc_status create_with(const char *value, posenc_context **out, char *err,
                                 size_t err_size)
{
    if (value)
        setenv(PE_PRESET_ENV, value, 1);
    else
        unsetenv(PE_PRESET_ENV);
    struct posenc_context_params p;
    memset(&p, 0, sizeof p);
    p.backend = th.kind;
    p.flags = POSENC_CONTEXT_DEBUG;
    p.log_fn = capture_log;
    p.log_level = POSENC_LOG_DEBUG;
    *out = NULL;
    posenc_status st = posenc_context_create(&p, out, err, err_size);
    unsetenv(PE_PRESET_ENV);
    return st;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static void test_lowered_info(void **state)
{
    (void)state;
    char err[512];
    posenc_context *plain;
    assert_int_equal(create_with(NULL, &plain, err, sizeof err), POSENC_OK);
    struct posenc_device_info dev;
    assert_int_equal(posenc_context_get_info(plain, &dev), POSENC_OK);
    posenc_context_destroy(&plain);

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const struct pe_preset *pr = pe_preset_find(names[i]);
        assert_non_null(pr);
        log_seen[0] = '\0';
        posenc_context *ctx;
        assert_int_equal(create_with(names[i], &ctx, err, sizeof err), POSENC_OK);
        struct posenc_device_info in;
        assert_int_equal(posenc_context_get_info(ctx, &in), POSENC_OK);
        printf("%s on %s: max work-group %u (device %u), max buffer %llu (device %llu), "
               "max binding %llu (device %llu), f16_native %d (device %d), type %d\n",
               names[i], posenc_backend_name(th.kind), (unsigned)in.max_workgroup_size,
               (unsigned)dev.max_workgroup_size, (unsigned long long)in.max_buffer_size,
               (unsigned long long)dev.max_buffer_size,
               (unsigned long long)in.max_binding_size,
               (unsigned long long)dev.max_binding_size, in.f16_native, dev.f16_native,
               (int)in.type);
        if (th.kind == POSENC_BACKEND_CPU) {
            /* ignored: the same device as without */
            assert_int_equal(in.max_workgroup_size, dev.max_workgroup_size);
            assert_int_equal(in.max_buffer_size, dev.max_buffer_size);
            assert_int_equal(in.max_binding_size, dev.max_binding_size);
            assert_int_equal(in.f16_native, dev.f16_native);
            assert_int_equal(in.type, dev.type);
            assert_string_equal(log_seen, "");
            posenc_context_destroy(&ctx);
            continue;
        }
        const bool cl = th.kind == POSENC_BACKEND_OPENCL;
        const uint64_t wg = cl ? pr->cl.max_wg : pr->vk.wg_invocations;
        const uint64_t alloc = cl ? pr->cl.max_alloc : pr->vk.max_alloc;
        const bool f16 = cl ? pr->cl.fp16 : pr->vk.storage16;
        assert_int_equal(in.max_workgroup_size, min_u64(dev.max_workgroup_size, wg));
        assert_int_equal(in.max_buffer_size, min_u64(dev.max_buffer_size, alloc));
        assert_int_equal(in.f16_native, dev.f16_native && f16);
        assert_int_equal(in.type, pr->type);
        if (cl) {
            /* a kernel sees a whole cl_mem: the binding limit is the allocation limit */
            assert_int_equal(in.max_binding_size, in.max_buffer_size);
        } else {
            /* maxStorageBufferRange less the offset alignment (at most 256 bytes in
             * Vulkan) and 16 bytes of rounding: within 272 bytes under the smaller of
             * the two ranges, and never above the device's own */
            const uint64_t range = pr->vk.storage_range;
            assert_true(in.max_binding_size <= dev.max_binding_size);
            assert_true(in.max_binding_size < range);
            assert_true(in.max_binding_size + 272 >= min_u64(range, dev.max_binding_size));
        }
        /* the INFO line names the preset */
        char want[64];
        snprintf(want, sizeof want, "POSENC_DEVICE_PRESET=%s ", names[i]);
        assert_non_null(strstr(log_seen, want));

        /* the lowered allocation limit is enforced before anything is allocated */
        if (in.max_buffer_size < (uint64_t)SIZE_MAX) {
            posenc_buffer *b = NULL;
            assert_int_equal(posenc_buffer_create(ctx, (size_t)in.max_buffer_size + 1, &b),
                             POSENC_ERR_UNSUPPORTED);
            assert_null(b);
            char lim[32]; /* the message gives the (lowered) limit */
            snprintf(lim, sizeof lim, "%llu bytes", (unsigned long long)in.max_buffer_size);
            assert_non_null(strstr(posenc_context_last_error(ctx), lim));
        }
        posenc_context_destroy(&ctx);
    }
}

/*
 * below-spec (not a device: limits under the specifications' minimums). OpenCL adapts:
 * softmax reduces over 32 work-items (the 32-item work-group; 512 bytes of local memory
 * would allow 128 floats), the DEBUG log says so, and its result matches softmax
 * computed here in double. Vulkan's softmax shader needs 64 floats of shared memory, over the preset's
 * 128 bytes: POSENC_ERR_UNSUPPORTED naming the limit and the preset, dst untouched.
 */
static void test_below_spec(void **state)
{
    (void)state;
    if (th.kind == POSENC_BACKEND_CPU)
        skip();
    enum { N = 300, ROWS = 3, H = 2 };
    static float x[N * ROWS * H], out[N * ROWS * H];
    uint32_t seed = 12345;
    for (size_t i = 0; i < N * ROWS * H; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((double)(seed >> 8) / (1 << 24) * 16.0 - 8.0); /* [-8, 8) */
    }
    char err[512];
    posenc_context *ctx;
    log_seen[0] = '\0';
    assert_int_equal(create_with("below-spec", &ctx, err, sizeof err), POSENC_OK);
    posenc_buffer *bx = NULL, *bd = NULL;
    assert_int_equal(posenc_buffer_create(ctx, sizeof x, &bx), POSENC_OK);
    assert_int_equal(posenc_buffer_create(ctx, sizeof x, &bd), POSENC_OK);
    assert_int_equal(posenc_buffer_write(bx, 0, x, sizeof x), POSENC_OK);
    static float poison[N * ROWS * H];
    memset(poison, 0x5a, sizeof poison);
    assert_int_equal(posenc_buffer_write(bd, 0, poison, sizeof poison), POSENC_OK);
    const posenc_tensor tx = posenc_tensor_contiguous(bx, 0, POSENC_DTYPE_F32, N, ROWS, H, 1);
    const posenc_tensor td = posenc_tensor_contiguous(bd, 0, POSENC_DTYPE_F32, N, ROWS, H, 1);
    posenc_status st = posenc_softmax(ctx, &tx, NULL, NULL, &td, NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", posenc_context_last_error(ctx));
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    assert_int_equal(posenc_buffer_read(bd, 0, out, sizeof out), POSENC_OK);
    if (th.kind == POSENC_BACKEND_VULKAN) {
        assert_int_equal(st, POSENC_ERR_UNSUPPORTED);
        printf("vulkan, below-spec: %s\n", msg);
        assert_non_null(strstr(msg, "maxComputeSharedMemorySize"));
        assert_non_null(strstr(msg, "POSENC_DEVICE_PRESET"));
        assert_memory_equal(out, poison, sizeof out);
    } else {
        assert_int_equal(st, POSENC_OK);
        assert_non_null(strstr(log_seen, "reductions over at most 32 work-items"));
        /* f32 with Kahan-compensated sums on the device against double here: a few f32
         * ulp per step over a 300-long row; 1e-5 relative (about 80 ulp) leaves room
         * for exp's own error without letting a wrong reduction (off by whole terms,
         * >= 1e-4 relative for these inputs) through */
        double worst = 0;
        for (size_t r = 0; r < ROWS * H; r++) {
            const float *xr = x + r * N;
            double m = xr[0], sum = 0;
            for (int k = 1; k < N; k++)
                m = xr[k] > m ? xr[k] : m;
            for (int k = 0; k < N; k++)
                sum += exp((double)xr[k] - m);
            for (int k = 0; k < N; k++) {
                const double want = exp((double)xr[k] - m) / sum;
                const double e = fabs(out[r * N + k] - want) / want;
                worst = e > worst ? e : worst;
            }
        }
        printf("opencl, below-spec: softmax max relative error %.3g\n", worst);
        assert_true(worst <= 1e-5);
    }
    posenc_buffer_destroy(&bx);
    posenc_buffer_destroy(&bd);
    posenc_context_destroy(&ctx);
}

static void test_unknown_name(void **state)
{
    (void)state;
    static const char *const bad[] = {"adreno7", "MALI", "intel", " minimum"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[512] = "";
        posenc_context *ctx = (posenc_context *)1;
        assert_int_equal(create_with(bad[i], &ctx, err, sizeof err),
                         POSENC_ERR_INVALID_ARGUMENT);
        assert_null(ctx);
        assert_non_null(strstr(err, "POSENC_DEVICE_PRESET"));
        assert_non_null(strstr(err, bad[i]));
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            assert_non_null(strstr(err, names[k]));
        printf("%s: %s\n", bad[i], err);
    }
    /* empty = unset */
    char err[512];
    posenc_context *ctx;
    assert_int_equal(create_with("", &ctx, err, sizeof err), POSENC_OK);
    posenc_context_destroy(&ctx);
}

int main(int argc, char **argv)
{
    /* the suite sets the variable itself; a value from outside would change th.dut */
    unsetenv(PE_PRESET_ENV);
    int rc = th_init(argc, argv, "preset");
    if (rc >= 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lowered_info),
        cmocka_unit_test(test_below_spec),
        cmocka_unit_test(test_unknown_name),
    };
    rc = th_run("preset", tests, sizeof tests / sizeof tests[0]);
    th_fini();
    return rc;
}
