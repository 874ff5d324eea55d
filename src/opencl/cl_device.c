/*
 * cl_device.c - the OpenCL backend's errors (an OpenCL error code's name, a failed cl*
 * call as a posenc status) and its devices: the platforms and devices the ICD loader
 * offers (posenc_device_count, the device a context asks for), what get_info reports
 * about a device, POSENC_DEVICE_PRESET's lower limits, and the check that posenc can run
 * on it (OpenCL 1.2, 64-bit integers, a compiler).
 */
#include "backend_opencl.h"
#include "preset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* ------------------------------------------------------------------------------------ */
/* Errors                                                                               */
/* ------------------------------------------------------------------------------------ */

static const char *cl_err_name(cl_int err)
{
    switch (err) {
#define PE_CL_ERR(e) case e: return #e;
    PE_CL_ERR(CL_SUCCESS)
    PE_CL_ERR(CL_DEVICE_NOT_FOUND)
    PE_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    PE_CL_ERR(CL_COMPILER_NOT_AVAILABLE)
    PE_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    PE_CL_ERR(CL_OUT_OF_RESOURCES)
    PE_CL_ERR(CL_OUT_OF_HOST_MEMORY)
    PE_CL_ERR(CL_PROFILING_INFO_NOT_AVAILABLE)
    PE_CL_ERR(CL_MEM_COPY_OVERLAP)
    PE_CL_ERR(CL_IMAGE_FORMAT_MISMATCH)
    PE_CL_ERR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    PE_CL_ERR(CL_BUILD_PROGRAM_FAILURE)
    PE_CL_ERR(CL_MAP_FAILURE)
    PE_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    PE_CL_ERR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    PE_CL_ERR(CL_COMPILE_PROGRAM_FAILURE)
    PE_CL_ERR(CL_LINKER_NOT_AVAILABLE)
    PE_CL_ERR(CL_LINK_PROGRAM_FAILURE)
    PE_CL_ERR(CL_DEVICE_PARTITION_FAILED)
    PE_CL_ERR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    PE_CL_ERR(CL_INVALID_VALUE)
    PE_CL_ERR(CL_INVALID_DEVICE_TYPE)
    PE_CL_ERR(CL_INVALID_PLATFORM)
    PE_CL_ERR(CL_INVALID_DEVICE)
    PE_CL_ERR(CL_INVALID_CONTEXT)
    PE_CL_ERR(CL_INVALID_QUEUE_PROPERTIES)
    PE_CL_ERR(CL_INVALID_COMMAND_QUEUE)
    PE_CL_ERR(CL_INVALID_HOST_PTR)
    PE_CL_ERR(CL_INVALID_MEM_OBJECT)
    PE_CL_ERR(CL_INVALID_BINARY)
    PE_CL_ERR(CL_INVALID_BUILD_OPTIONS)
    PE_CL_ERR(CL_INVALID_PROGRAM)
    PE_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE)
    PE_CL_ERR(CL_INVALID_KERNEL_NAME)
    PE_CL_ERR(CL_INVALID_KERNEL_DEFINITION)
    PE_CL_ERR(CL_INVALID_KERNEL)
    PE_CL_ERR(CL_INVALID_ARG_INDEX)
    PE_CL_ERR(CL_INVALID_ARG_VALUE)
    PE_CL_ERR(CL_INVALID_ARG_SIZE)
    PE_CL_ERR(CL_INVALID_KERNEL_ARGS)
    PE_CL_ERR(CL_INVALID_WORK_DIMENSION)
    PE_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
    PE_CL_ERR(CL_INVALID_WORK_ITEM_SIZE)
    PE_CL_ERR(CL_INVALID_GLOBAL_OFFSET)
    PE_CL_ERR(CL_INVALID_EVENT_WAIT_LIST)
    PE_CL_ERR(CL_INVALID_EVENT)
    PE_CL_ERR(CL_INVALID_OPERATION)
    PE_CL_ERR(CL_INVALID_BUFFER_SIZE)
    PE_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
    PE_CL_ERR(CL_INVALID_PROPERTY)
    PE_CL_ERR(CL_INVALID_COMPILER_OPTIONS)
    PE_CL_ERR(CL_INVALID_LINKER_OPTIONS)
    PE_CL_ERR(CL_PLATFORM_NOT_FOUND_KHR)
#undef PE_CL_ERR
    default:
        return "unknown OpenCL error";
    }
}

bool pe_cl_err_is_oom(cl_int err)
{
    return err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
           err == CL_OUT_OF_HOST_MEMORY;
}

/* A failed cl* call: POSENC_ERR_BACKEND with the call, code and name. */
static posenc_status cl_fail(posenc_context *ctx, const char *call, cl_int err)
{
    /* host memory is never a device problem (also what device_string reports when its own
     * malloc fails) */
    return pe_error(ctx, err == CL_OUT_OF_HOST_MEMORY ? POSENC_ERR_OUT_OF_MEMORY
                                                      : POSENC_ERR_BACKEND,
                    "%s failed: %d (%s)", call, (int)err,
                    cl_err_name(err));
}

/* The same, but allocation failures become POSENC_ERR_OUT_OF_MEMORY (buffers). */
posenc_status pe_cl_fail_mem(posenc_context *ctx, const char *call, cl_int err)
{
    if (pe_cl_err_is_oom(err))
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "%s failed: %d (%s)", call, (int)err,
                        cl_err_name(err));
    return cl_fail(ctx, call, err);
}

/* The two above for the other files of the backend (backend_opencl.h). */
const char *pe_cl_err_name(cl_int err)
{
    return cl_err_name(err);
}

posenc_status pe_cl_fail(posenc_context *ctx, const char *call, cl_int err)
{
    return cl_fail(ctx, call, err);
}

/* ------------------------------------------------------------------------------------ */
/* Platforms and devices                                                                */
/* ------------------------------------------------------------------------------------ */

/* All platforms (malloc'd into *out, count in *out_n). On failure writes a reason and
 * returns POSENC_ERR_UNAVAILABLE (no platform) or another status. */
static posenc_status list_platforms(cl_platform_id **out, cl_uint *out_n, char *reason,
                                    size_t reason_size)
{
    *out = NULL;
    *out_n = 0;
    cl_uint n = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &n);
    if (err == CL_PLATFORM_NOT_FOUND_KHR) {
        snprintf(reason, reason_size, "no OpenCL platform (ICD loader returned %d)", (int)err);
        return POSENC_ERR_UNAVAILABLE;
    }
    if (err == CL_SUCCESS && n == 0) {
        snprintf(reason, reason_size, "no OpenCL platform (the ICD loader found none)");
        return POSENC_ERR_UNAVAILABLE;
    }
    if (err != CL_SUCCESS) {
        snprintf(reason, reason_size, "clGetPlatformIDs failed: %d (%s)", (int)err,
                 cl_err_name(err));
        return POSENC_ERR_UNAVAILABLE;
    }
    cl_platform_id *p = malloc(n * sizeof(*p));
    if (!p) {
        snprintf(reason, reason_size, "out of host memory listing %u OpenCL platforms", n);
        return POSENC_ERR_OUT_OF_MEMORY;
    }
    err = clGetPlatformIDs(n, p, NULL);
    if (err != CL_SUCCESS) {
        free(p);
        snprintf(reason, reason_size, "clGetPlatformIDs failed: %d (%s)", (int)err,
                 cl_err_name(err));
        return POSENC_ERR_UNAVAILABLE;
    }
    *out = p;
    *out_n = n;
    return POSENC_OK;
}

/* Number of devices of `type` on platform p (0 when it has none or cannot say). */
static cl_uint platform_device_count(cl_platform_id p, cl_device_type type)
{
    cl_uint n = 0;
    if (clGetDeviceIDs(p, type, 0, NULL, &n) != CL_SUCCESS)
        return 0;
    return n;
}

posenc_status pe_cl_device_count(int32_t *out_count, char *reason, size_t reason_size)
{
    char scratch[8];
    if (!reason || reason_size == 0) {
        reason = scratch;
        reason_size = sizeof(scratch);
    }
    *out_count = 0;
    PE_RETURN_IF_ERROR(pe_cl_load(reason, reason_size));
    cl_platform_id *plats;
    cl_uint np;
    posenc_status st = list_platforms(&plats, &np, reason, reason_size);
    if (st != POSENC_OK)
        return st;
    int64_t total = 0;
    for (cl_uint k = 0; k < np; k++)
        total += platform_device_count(plats[k], CL_DEVICE_TYPE_ALL);
    free(plats);
    if (total == 0) {
        snprintf(reason, reason_size, "no OpenCL device on %u platform(s)", np);
        return POSENC_ERR_UNAVAILABLE;
    }
    *out_count = total > INT32_MAX ? INT32_MAX : (int32_t)total;
    return POSENC_OK;
}

/* A string device property, truncated to fit dst (always NUL-terminated). */
static cl_int device_string(cl_device_id dev, cl_device_info param, char *dst, size_t size)
{
    size_t n = 0;
    dst[0] = '\0';
    cl_int err = clGetDeviceInfo(dev, param, 0, NULL, &n);
    if (err != CL_SUCCESS)
        return err;
    char *tmp = malloc(n + 1);
    if (!tmp)
        return CL_OUT_OF_HOST_MEMORY;
    err = clGetDeviceInfo(dev, param, n, tmp, NULL);
    if (err == CL_SUCCESS) {
        tmp[n] = '\0';
        pe_strlcpy(dst, tmp, size);
    }
    free(tmp);
    return err;
}

/* Whether the space-separated extension list of dev contains `ext`. */
static bool device_has_extension(cl_device_id dev, const char *ext)
{
    size_t n = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS)
        return false;
    char *list = malloc(n + 1);
    if (!list)
        return false;
    bool found = false;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, n, list, NULL) == CL_SUCCESS) {
        list[n] = '\0';
        size_t len = strlen(ext);
        for (const char *s = list; (s = strstr(s, ext)) != NULL; s += len) {
            bool start = s == list || s[-1] == ' ';
            bool end = s[len] == '\0' || s[len] == ' ';
            if (start && end) {
                found = true;
                break;
            }
        }
    }
    free(list);
    return found;
}

/* POSENC_DEVICE_PRESET (src/preset.h): lower what query_device stored, in place, so that
 * every later reader (launch sizes, pe_cl_get_program's local-memory check, get_info) sees the
 * preset's device. Never raises a value. */
static void apply_preset(struct pe_cl_backend *be)
{
    const struct pe_preset *pr = be->base.ctx->preset;
    struct posenc_device_info *info = &be->info;
    if (!pr)
        return;
    const struct pe_preset_cl *c = &pr->cl;
    char was[160];
    snprintf(was, sizeof(was),
             "max work-group %u, work-item sizes %zu x %zu x %zu, local memory %llu, "
             "allocation %llu, fp16 %d, fp64 %d",
             (unsigned)info->max_workgroup_size, be->max_item_size[0], be->max_item_size[1],
             be->max_item_size[2], (unsigned long long)be->local_mem,
             (unsigned long long)info->max_buffer_size, info->f16_native, be->fp64);
    uint64_t wg = info->max_workgroup_size;
    pe_lower_u64(&wg, c->max_wg);
    info->max_workgroup_size = (uint32_t)wg;
    for (int k = 0; k < 3; k++)
        pe_lower_size(&be->max_item_size[k], c->item_size[k]);
    pe_lower_u64(&be->local_mem, c->local_mem);
    pe_lower_u64(&be->const_buf, c->const_buf);
    pe_lower_u64(&info->max_buffer_size, c->max_alloc);
    if (!c->fp16)
        info->f16_native = 0;
    if (!c->fp64)
        be->fp64 = 0;
    /* The kind of device decides among kernel variants (pe_cl_is_cpu): a preset's device
     * is a GPU, so its variants run even on a CPU implementation such as PoCL. */
    info->type = pr->type;
    pe_log(be->base.ctx, POSENC_LOG_INFO,
           "opencl: " PE_PRESET_ENV "=%s (%s): max work-group %u, work-item sizes %zu x %zu "
           "x %zu, local memory %llu, allocation %llu bytes, fp16 %d, fp64 %d (the device: "
           "%s)",
           pr->name, pr->what, (unsigned)info->max_workgroup_size, be->max_item_size[0],
           be->max_item_size[1], be->max_item_size[2], (unsigned long long)be->local_mem,
           (unsigned long long)info->max_buffer_size, info->f16_native, be->fp64, was);
}

/* Query everything get_info reports, once. */
static posenc_status query_device(struct pe_cl_backend *be, int32_t index)
{
    posenc_context *ctx = be->base.ctx;
    cl_device_id dev = be->device;
    struct posenc_device_info *info = &be->info;
    memset(info, 0, sizeof(*info));
    info->backend = POSENC_BACKEND_OPENCL;
    info->device_index = index;

    cl_device_type type = 0;
    cl_bool unified = CL_FALSE;
    cl_ulong max_alloc = 0;
    size_t max_wg = 0;
    cl_uint cus = 0;
    cl_int err;
    if ((err = clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(type), &type, NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc), &max_alloc,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(max_wg), &max_wg,
                               NULL)) != CL_SUCCESS ||
        (err = clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cus), &cus, NULL)) !=
            CL_SUCCESS ||
        (err = clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(be->max_item_size),
                               be->max_item_size, NULL)) != CL_SUCCESS ||
        (err = device_string(dev, CL_DEVICE_NAME, info->device_name,
                             sizeof(info->device_name))) != CL_SUCCESS ||
        (err = device_string(dev, CL_DEVICE_VENDOR, info->vendor, sizeof(info->vendor))) !=
            CL_SUCCESS ||
        (err = device_string(dev, CL_DRIVER_VERSION, info->driver_version,
                             sizeof(info->driver_version))) != CL_SUCCESS ||
        (err = device_string(dev, CL_DEVICE_VERSION, info->api_version,
                             sizeof(info->api_version))) != CL_SUCCESS)
        return cl_fail(ctx, "clGetDeviceInfo", err);
    /* Deprecated in 2.0 but still answered; only used to tell integrated GPUs apart. */
    if (clGetDeviceInfo(dev, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified), &unified, NULL) !=
        CL_SUCCESS)
        unified = CL_FALSE;

    if (type & CL_DEVICE_TYPE_GPU)
        info->type = unified ? POSENC_DEVICE_INTEGRATED_GPU : POSENC_DEVICE_DISCRETE_GPU;
    else if (type & CL_DEVICE_TYPE_CPU)
        info->type = POSENC_DEVICE_CPU;
    else
        info->type = POSENC_DEVICE_OTHER;
    info->f16_storage = 1;
    info->f16_native = device_has_extension(dev, "cl_khr_fp16") ? 1 : 0;
    be->fp64 = device_has_extension(dev, "cl_khr_fp64") ? 1 : 0;
    {
        /* fma in hardware: the angle kernels' fma form (common.cl); the fma-free form
         * (the same as Vulkan's) otherwise, or with POSENC_CL_FMA=0 */
        cl_device_fp_config fpc = 0;
        if (clGetDeviceInfo(dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(fpc), &fpc, NULL) !=
            CL_SUCCESS)
            fpc = 0;
        const char *env = getenv("POSENC_CL_FMA");
        be->hw_fma = (fpc & CL_FP_FMA) && !(env && strcmp(env, "0") == 0) ? 1 : 0;
    }
    info->max_buffer_size = max_alloc;
    info->max_workgroup_size = max_wg > UINT32_MAX ? UINT32_MAX : (uint32_t)max_wg;
    info->compute_units = cus;
    {
        cl_ulong lm = 0, cb = 0;
        if (clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(lm), &lm, NULL) != CL_SUCCESS)
            lm = 32 * 1024; /* OpenCL 1.2's minimum */
        if (clGetDeviceInfo(dev, CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE, sizeof(cb), &cb, NULL) !=
            CL_SUCCESS)
            cb = 64 * 1024;
        be->local_mem = lm;
        be->const_buf = cb;
    }
    apply_preset(be);
    char pname[128] = "", pversion[120] = "";
    clGetPlatformInfo(be->platform, CL_PLATFORM_NAME, sizeof(pname) - 1, pname, NULL);
    clGetPlatformInfo(be->platform, CL_PLATFORM_VERSION, sizeof(pversion) - 1, pversion, NULL);
    snprintf(be->platform_id, sizeof(be->platform_id), "%s %s", pname, pversion);
    return POSENC_OK;
}

/* Find device `index` among all (or only GPU) devices of all platforms, in order. */
posenc_status pe_cl_find_device(posenc_context *ctx, int32_t index, bool gpu_only,
                                cl_platform_id *out_plat, cl_device_id *out_dev)
{
    char reason[PE_ERR_MAX];
    if (pe_cl_load(reason, sizeof(reason)) != POSENC_OK)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, "%s", reason);
    cl_platform_id *plats;
    cl_uint np;
    posenc_status st = list_platforms(&plats, &np, reason, sizeof(reason));
    if (st != POSENC_OK)
        return pe_error(ctx, st, "%s", reason);

    const cl_device_type type = gpu_only ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_ALL;
    int64_t seen = 0;
    st = POSENC_ERR_INTERNAL;
    for (cl_uint k = 0; k < np; k++) {
        cl_uint n = platform_device_count(plats[k], type);
        if (n == 0 || index >= seen + n) {
            seen += n;
            continue;
        }
        cl_device_id *devs = malloc(n * sizeof(*devs));
        if (!devs) {
            free(plats);
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
        }
        cl_int err = clGetDeviceIDs(plats[k], type, n, devs, NULL);
        if (err == CL_SUCCESS) {
            *out_plat = plats[k];
            *out_dev = devs[index - seen];
            st = POSENC_OK;
        } else {
            st = cl_fail(ctx, "clGetDeviceIDs", err);
        }
        free(devs);
        free(plats);
        return st;
    }
    free(plats);
    if (seen == 0)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, gpu_only
                            ? "no OpenCL GPU device (%u platform(s); CPU devices such as PoCL "
                              "are used only when the opencl backend is asked for)"
                            : "no OpenCL device (%u platform(s))",
                        np);
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                    "device %d is past the last OpenCL %sdevice (there are %lld)", (int)index,
                    gpu_only ? "GPU " : "", (long long)seen);
}

/* Query the device and check that posenc can run on it (OpenCL 1.2, a compiler).
 * `index` is the posenc device index, -1 for the application's device. */
posenc_status pe_cl_check_device(struct pe_cl_backend *be, int32_t index)
{
    posenc_context *ctx = be->base.ctx;
    PE_RETURN_IF_ERROR(query_device(be, index));
    /* A kernel sees a whole cl_mem, which is at most CL_DEVICE_MAX_MEM_ALLOC_SIZE (or a
     * preset's lower figure): the binding limit src/split.c cuts ops by. */
    be->base.max_binding = be->info.max_buffer_size;
    be->base.max_binding_name =
        ctx->preset ? "OpenCL CL_DEVICE_MAX_MEM_ALLOC_SIZE (" PE_PRESET_ENV ")"
                    : "OpenCL CL_DEVICE_MAX_MEM_ALLOC_SIZE";
    int major = 0, minor = 0;
    if (sscanf(be->info.api_version, "OpenCL %d.%d", &major, &minor) != 2 ||
        major * 100 + minor < 102)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "OpenCL device %d (%s) reports \"%s\"; posenc needs OpenCL 1.2 or later",
                        (int)index, be->info.device_name, be->info.api_version);
    /* The kernels index with 64-bit `long`, which the full profile requires and the
     * embedded profile has only with cles_khr_int64. */
    char profile[64] = "";
    if (device_string(be->device, CL_DEVICE_PROFILE, profile, sizeof(profile)) == CL_SUCCESS &&
        strstr(profile, "EMBEDDED") && !device_has_extension(be->device, "cles_khr_int64"))
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "OpenCL device %d (%s) has the embedded profile without cles_khr_int64; "
                        "posenc's kernels need 64-bit integers",
                        (int)index, be->info.device_name);
    cl_bool compiler = CL_FALSE;
    cl_int err = clGetDeviceInfo(be->device, CL_DEVICE_COMPILER_AVAILABLE, sizeof(compiler),
                                 &compiler, NULL);
    if (err != CL_SUCCESS)
        return cl_fail(ctx, "clGetDeviceInfo(CL_DEVICE_COMPILER_AVAILABLE)", err);
    if (!compiler)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "OpenCL device %d (%s) has no compiler (CL_DEVICE_COMPILER_AVAILABLE)",
                        (int)index, be->info.device_name);
    return POSENC_OK;
}
