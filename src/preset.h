/*
 * preset.h - POSENC_DEVICE_PRESET (test only): the limits and features of a small device,
 * applied on top of what the real device reports (issue #18, docs/limits.md).
 *
 * A preset is read once per context (pe_preset_from_env, at context creation) and applied
 * once per device at discovery by the OpenCL and Vulkan backends, which write the lowered
 * values over the ones they store (be->info, be->max_item_size, be->props.limits, ...):
 * everything that reads a limit later -- launch sizes, the binding limit src/split.c cuts
 * ops by, posenc_context_get_info -- sees the preset. Every value is min(preset, device):
 * a preset never raises a limit or adds a feature. The CPU backend ignores it.
 */
#ifndef POSENC_PRESET_H
#define POSENC_PRESET_H

#include "internal.h"

#define PE_PRESET_ENV "POSENC_DEVICE_PRESET"

struct pe_preset {
    const char *name;   /* the value of POSENC_DEVICE_PRESET */
    const char *what;   /* the devices it stands for, for the log and messages */
    posenc_device_type type; /* reported (and chosen kernels by) in place of the real type */
    struct pe_preset_vk {
        uint32_t wg_invocations;    /* maxComputeWorkGroupInvocations */
        uint32_t wg_size[3];        /* maxComputeWorkGroupSize */
        uint32_t wg_count[3];       /* maxComputeWorkGroupCount */
        uint32_t shared_bytes;      /* maxComputeSharedMemorySize */
        uint32_t push_bytes;        /* maxPushConstantsSize */
        uint32_t storage_range;     /* maxStorageBufferRange */
        uint64_t max_alloc;         /* maxMemoryAllocationSize */
        bool storage16;             /* storageBuffer16BitAccess */
        bool storage8;              /* storageBuffer8BitAccess */
        bool int64;                 /* shaderInt64 */
        bool float16;               /* shaderFloat16 */
    } vk;
    struct pe_preset_cl {
        uint64_t max_wg;            /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
        uint64_t item_size[3];      /* CL_DEVICE_MAX_WORK_ITEM_SIZES */
        uint64_t local_mem;         /* CL_DEVICE_LOCAL_MEM_SIZE */
        uint64_t max_alloc;         /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
        uint64_t const_buf;         /* CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE */
        bool fp16;                  /* cl_khr_fp16 */
        bool fp64;                  /* cl_khr_fp64 */
    } cl;
};

/* The preset POSENC_DEVICE_PRESET names (NULL when unset or empty). An unknown name is
 * POSENC_ERR_INVALID_ARGUMENT whose message names the variable and lists the presets. */
posenc_status pe_preset_from_env(posenc_context *ctx, const struct pe_preset **out);

/* The preset called `name`, or NULL. */
const struct pe_preset *pe_preset_find(const char *name);

/* Lower *v to `limit` (never raise it); returns whether it changed. */
static inline bool pe_lower_u64(uint64_t *v, uint64_t limit)
{
    if (*v <= limit)
        return false;
    *v = limit;
    return true;
}

static inline bool pe_lower_u32(uint32_t *v, uint32_t limit)
{
    if (*v <= limit)
        return false;
    *v = limit;
    return true;
}

static inline bool pe_lower_size(size_t *v, uint64_t limit)
{
    if ((uint64_t)*v <= limit)
        return false;
    *v = (size_t)limit;
    return true;
}

#endif
