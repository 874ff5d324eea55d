/*
 * test_vk_reflect.c - the SPIR-V reader behind the Vulkan shader limit checks
 * (src/vulkan/vk_limits.c, issue #18), without a device: tests/vk_reflect_test.comp,
 * compiled by glslc at build time, against limits set one byte or one invocation around
 * what that shader needs. What it needs is worked out from its source (see the comment
 * there), for the default specialization and for two others:
 *   spec (x = 100, N = 50): 200 invocations; 50 * 4 + 8 * 100 * 16 = 13000 bytes shared
 *   defaults (x = 1, N = 16): 2 invocations; 16 * 4 + 8 * 1 * 16 = 192 bytes shared
 *   push constants: 36 bytes either way
 * Each limit is checked at the figure (accepted) and one below (refused with
 * POSENC_ERR_UNSUPPORTED naming the limit and the figure).
 */
#include "internal.h"
#include "vk_internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static const uint32_t code[] =
#include "vk_reflect_test.spv.h"
    ;

static struct posenc_context ctx;
static struct pe_vk_backend be;

/* Limits no shader reaches, then the caller lowers one. */
static void roomy(void)
{
    memset(&ctx, 0, sizeof ctx);
    memset(&be, 0, sizeof be);
    be.base.ctx = &ctx;
    VkPhysicalDeviceLimits *l = &be.props.limits;
    l->maxComputeWorkGroupInvocations = 1u << 20;
    for (int k = 0; k < 3; k++)
        l->maxComputeWorkGroupSize[k] = 1u << 20;
    l->maxComputeSharedMemorySize = 1u << 30;
    l->maxPushConstantsSize = 1u << 10;
}

static posenc_status check(const uint32_t *spec, uint32_t n_spec)
{
    return pe_vk_check_shader(&be, "vk_reflect_test", code, sizeof code, spec, n_spec);
}

static void expect_refused(const uint32_t *spec, uint32_t n_spec, const char *limit,
                           const char *figure)
{
    assert_int_equal(check(spec, n_spec), POSENC_ERR_UNSUPPORTED);
    printf("refused: %s\n", ctx.last_error);
    assert_non_null(strstr(ctx.last_error, limit));
    assert_non_null(strstr(ctx.last_error, figure));
}

static void test_specialized(void **state)
{
    (void)state;
    static const uint32_t spec[2] = {100, 50};
    VkPhysicalDeviceLimits *l = &be.props.limits;
    roomy();
    assert_int_equal(check(spec, 2), POSENC_OK);

    roomy();
    l->maxComputeWorkGroupInvocations = 200;
    assert_int_equal(check(spec, 2), POSENC_OK);
    l->maxComputeWorkGroupInvocations = 199;
    expect_refused(spec, 2, "maxComputeWorkGroupInvocations", "200 invocations");

    roomy();
    l->maxComputeWorkGroupSize[0] = 100;
    assert_int_equal(check(spec, 2), POSENC_OK);
    l->maxComputeWorkGroupSize[0] = 99;
    expect_refused(spec, 2, "maxComputeWorkGroupSize[0]", "work-group of 100");
    roomy();
    l->maxComputeWorkGroupSize[1] = 1;
    expect_refused(spec, 2, "maxComputeWorkGroupSize[1]", "work-group of 2");

    roomy();
    l->maxComputeSharedMemorySize = 13000;
    assert_int_equal(check(spec, 2), POSENC_OK);
    l->maxComputeSharedMemorySize = 12999;
    expect_refused(spec, 2, "maxComputeSharedMemorySize", "13000 bytes");

    roomy();
    l->maxPushConstantsSize = 36;
    assert_int_equal(check(spec, 2), POSENC_OK);
    l->maxPushConstantsSize = 35;
    expect_refused(spec, 2, "maxPushConstantsSize", "36 bytes");
}

static void test_defaults(void **state)
{
    (void)state;
    VkPhysicalDeviceLimits *l = &be.props.limits;
    roomy();
    l->maxComputeWorkGroupInvocations = 2;
    l->maxComputeSharedMemorySize = 192;
    assert_int_equal(check(NULL, 0), POSENC_OK);
    l->maxComputeSharedMemorySize = 191;
    expect_refused(NULL, 0, "maxComputeSharedMemorySize", "192 bytes");
    roomy();
    l->maxComputeWorkGroupInvocations = 1;
    expect_refused(NULL, 0, "maxComputeWorkGroupInvocations", "2 invocations");
}

static void test_not_spirv(void **state)
{
    (void)state;
    roomy();
    static const uint32_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(pe_vk_check_shader(&be, "junk", junk, sizeof junk, NULL, 0),
                     POSENC_ERR_INTERNAL);
    /* a truncated shader (the header and half its words) is read without going past the end */
    assert_int_equal(pe_vk_check_shader(&be, "half", code, sizeof code / 2 & ~(size_t)3, NULL,
                                        0),
                     POSENC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_specialized),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_not_spirv),
    };
    return cmocka_run_group_tests_name("vk_reflect", tests, NULL, NULL);
}
