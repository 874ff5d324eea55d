/*
 * preset.c - the device presets of POSENC_DEVICE_PRESET (see preset.h, docs/limits.md).
 *
 * Where the figures come from. Each preset is a set of values such a device reports; a
 * figure taken from a public source says so, the others are representative (chosen
 * from the range those devices report, not checked against one device report here).
 * Lowering never goes past what the real device reports (min of both), so on a machine
 * with smaller limits the machine's own apply.
 *
 *  adreno      Qualcomm Adreno 6xx/7xx. Vulkan: Mesa turnip (src/freedreno/vulkan/
 *              tu_device.cc) reports maxComputeSharedMemorySize = cs_shared_mem_size
 *              (32 KiB on a6xx), maxComputeWorkGroupCount 65535 in each dimension,
 *              maxComputeWorkGroupSize 1024 and maxMemoryAllocationSize 0xFFFFFFFF
 *              ("our buffer size fields allow only this much"). 1024 invocations, 128-byte
 *              push constants (Qualcomm's own driver; turnip has 256), a 128 MiB
 *              maxStorageBufferRange and no shaderInt64 are representative. OpenCL
 *              (Qualcomm's driver, OpenCL 2.0): 1024 work-items, 32 KiB of local memory,
 *              cl_khr_fp16 without cl_khr_fp64 -- representative; 1 GiB allocations
 *              (a quarter of a 4 GiB phone) representative.
 *  mali        Arm Mali-G5x/G7x (Bifrost, Valhall), Arm's driver. Vulkan: Mesa panvk
 *              (src/panfrost/vulkan) caps maxComputeSharedMemorySize at 32 KiB ("it's
 *              backed by global memory anyway") and reports maxComputeWorkGroupCount
 *              65535; 512 invocations, 128-byte push constants, 128 MiB bindings and 1 GiB
 *              allocations are representative. OpenCL: 384 work-items per group (Bifrost;
 *              not a power of two), 32 KiB local memory, cl_khr_fp16 without
 *              cl_khr_fp64 -- representative.
 *  intel-igpu  Intel UHD Graphics 6xx (Gen9 GT2): Mesa ANV and the compute-runtime (NEO)
 *              OpenCL driver. 256 work-items per OpenCL group, 64 KiB of shared / local
 *              memory, 128-byte push constants, 1 GiB bindings, 2 GiB allocations, fp16
 *              and fp64 -- representative.
 *  minimum     What every conformant device must offer, from the specifications. Vulkan
 *              1.1 "Required Limits" table: 128 invocations, maxComputeWorkGroupSize
 *              (128, 128, 64), maxComputeWorkGroupCount 65535, 16 KiB of shared memory,
 *              128 bytes of push constants, maxStorageBufferRange 2^27 (128 MiB),
 *              maxMemoryAllocationSize 2^30; no 8/16-bit storage, no shaderInt64, no
 *              shaderFloat16 (all optional). OpenCL 1.2 full profile: 32 KiB of local
 *              memory, 64 KiB constant buffers, CL_DEVICE_MAX_MEM_ALLOC_SIZE at least
 *              max(1/4 of the global memory, 128 MiB) -> 128 MiB, cl_khr_fp16 and
 *              cl_khr_fp64 optional (absent). The specification's smallest work-group (1)
 *              is not used: 128 work-items (64 in the third dimension) stands for the
 *              smallest groups real GPUs report.
 *  below-spec  Not a device (see its entry): limits under the specifications' minimums,
 *              for the tests of what posenc does when a kernel or shader does not fit.
 */
#include "preset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define GIB (1024ull * 1024ull * 1024ull)

static const struct pe_preset presets[] = {
    {
        .name = "adreno",
        .what = "Qualcomm Adreno 6xx/7xx-like",
        .type = POSENC_DEVICE_INTEGRATED_GPU,
        .vk = {.wg_invocations = 1024,
               .wg_size = {1024, 1024, 1024},
               .wg_count = {65535, 65535, 65535},
               .shared_bytes = 32 * KIB,
               .push_bytes = 128,
               .storage_range = 128 * MIB,
               .max_alloc = 0xFFFFFFFFull,
               .storage16 = true,
               .storage8 = true,
               .int64 = false,
               .float16 = true},
        .cl = {.max_wg = 1024,
               .item_size = {1024, 1024, 1024},
               .local_mem = 32 * KIB,
               .max_alloc = 1 * GIB,
               .const_buf = 64 * KIB,
               .fp16 = true,
               .fp64 = false},
    },
    {
        .name = "mali",
        .what = "Arm Mali-G5x/G7x-like",
        .type = POSENC_DEVICE_INTEGRATED_GPU,
        .vk = {.wg_invocations = 512,
               .wg_size = {512, 512, 512},
               .wg_count = {65535, 65535, 65535},
               .shared_bytes = 32 * KIB,
               .push_bytes = 128,
               .storage_range = 128 * MIB,
               .max_alloc = 1 * GIB,
               .storage16 = true,
               .storage8 = true,
               .int64 = true,
               .float16 = true},
        .cl = {.max_wg = 384,
               .item_size = {384, 384, 384},
               .local_mem = 32 * KIB,
               .max_alloc = 1 * GIB,
               .const_buf = 64 * KIB,
               .fp16 = true,
               .fp64 = false},
    },
    {
        .name = "intel-igpu",
        .what = "Intel UHD Graphics 6xx-like",
        .type = POSENC_DEVICE_INTEGRATED_GPU,
        .vk = {.wg_invocations = 1024,
               .wg_size = {1024, 1024, 64},
               .wg_count = {65535, 65535, 65535},
               .shared_bytes = 64 * KIB,
               .push_bytes = 128,
               .storage_range = 1 * GIB,
               .max_alloc = 2 * GIB,
               .storage16 = true,
               .storage8 = true,
               .int64 = true,
               .float16 = true},
        .cl = {.max_wg = 256,
               .item_size = {256, 256, 256},
               .local_mem = 64 * KIB,
               .max_alloc = 2 * GIB,
               .const_buf = 64 * KIB,
               .fp16 = true,
               .fp64 = true},
    },
    {
        .name = "minimum",
        .what = "the specifications' required minimums",
        .type = POSENC_DEVICE_INTEGRATED_GPU,
        .vk = {.wg_invocations = 128,
               .wg_size = {128, 128, 64},
               .wg_count = {65535, 65535, 65535},
               .shared_bytes = 16 * KIB,
               .push_bytes = 128,
               .storage_range = 128 * MIB,
               .max_alloc = 1 * GIB,
               .storage16 = false,
               .storage8 = false,
               .int64 = false,
               .float16 = false},
        .cl = {.max_wg = 128,
               .item_size = {128, 128, 64},
               .local_mem = 32 * KIB,
               .max_alloc = 128 * MIB,
               .const_buf = 64 * KIB,
               .fp16 = false,
               .fp64 = false},
    },
    {
        /* Not a device: under what the specifications allow, to test that posenc adapts
         * where it can (OpenCL work-groups of 32, 512 bytes of local memory: the softmax
         * reductions shrink) and refuses what does not fit (128 bytes of Vulkan shared
         * memory: the softmax and attention shaders, which need 256 bytes and more, are
         * POSENC_ERR_UNSUPPORTED naming the limit). */
        .name = "below-spec",
        .what = "not a real device: limits under the specifications' minimums",
        .type = POSENC_DEVICE_INTEGRATED_GPU,
        .vk = {.wg_invocations = 64,
               .wg_size = {64, 64, 64},
               .wg_count = {65535, 65535, 65535},
               .shared_bytes = 128,
               .push_bytes = 128,
               .storage_range = 128 * MIB,
               .max_alloc = 1 * GIB,
               .storage16 = false,
               .storage8 = false,
               .int64 = false,
               .float16 = false},
        .cl = {.max_wg = 32,
               .item_size = {32, 32, 32},
               .local_mem = 512,
               .max_alloc = 128 * MIB,
               .const_buf = 1 * KIB,
               .fp16 = false,
               .fp64 = false},
    },
};

const struct pe_preset *pe_preset_find(const char *name)
{
    for (size_t i = 0; i < PE_ARRAY_SIZE(presets); i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

posenc_status pe_preset_from_env(posenc_context *ctx, const struct pe_preset **out)
{
    *out = NULL;
    const char *env = getenv(PE_PRESET_ENV);
    if (!env || !*env)
        return POSENC_OK;
    const struct pe_preset *p = pe_preset_find(env);
    if (!p) {
        char names[128] = "";
        size_t len = 0;
        for (size_t i = 0; i < PE_ARRAY_SIZE(presets); i++) {
            int n = snprintf(names + len, sizeof(names) - len, "%s%s", i ? "|" : "",
                             presets[i].name);
            if (n < 0 || (size_t)n >= sizeof(names) - len)
                break;
            len += (size_t)n;
        }
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        PE_PRESET_ENV " = \"%.64s\" is not a device preset (%s)", env, names);
    }
    *out = p;
    return POSENC_OK;
}
