/*
 * backend_vulkan.c - the Vulkan backend: instance (+ validation messages forwarded to the
 * log), physical and logical device, device memory and buffers,
 * device info. Submission (ring of command buffers, batches, barriers) is in vk_submit.c,
 * op launches and pipelines in ops_vulkan.c; the execution model is described in
 * vk_internal.h.
 *
 * Portability floor: a Vulkan 1.1 instance and device and no optional feature. Device
 * buffers prefer DEVICE_LOCAL memory; when that memory is also HOST_VISIBLE|HOST_COHERENT
 * (integrated GPUs, lavapipe) it is mapped once and read/written by memcpy, otherwise
 * through a host-visible staging buffer and vkCmdCopyBuffer. POSENC_VK_FORCE_STAGING=1
 * forces the staging path (to test it on unified-memory devices).
 */
#include "vk_internal.h"
#include "preset.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PE_VK_VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"
#define PE_VK_PORTABILITY_ENUMERATION "VK_KHR_portability_enumeration"
#define PE_VK_PORTABILITY_SUBSET "VK_KHR_portability_subset"
#define PE_VK_STAGING_CHUNK ((VkDeviceSize)16 << 20) /* largest staging buffer, bytes */
/* Writes up to this size are queued through the open batch's arena without a wait; larger
 * ones wait for queued work when it may use the buffer (posenc.h). */
#define PE_VK_WRITE_RING_MAX ((size_t)4 << 20)

/* ------------------------------------------------------------------------------------ */
/* Results and errors                                                                   */
/* ------------------------------------------------------------------------------------ */

const char *pe_vk_result_name(VkResult r)
{
    switch (r) {
#define PE_VK_CASE(x) \
    case x:           \
        return #x;
        PE_VK_CASE(VK_SUCCESS)
        PE_VK_CASE(VK_NOT_READY)
        PE_VK_CASE(VK_TIMEOUT)
        PE_VK_CASE(VK_EVENT_SET)
        PE_VK_CASE(VK_EVENT_RESET)
        PE_VK_CASE(VK_INCOMPLETE)
        PE_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
        PE_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        PE_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
        PE_VK_CASE(VK_ERROR_DEVICE_LOST)
        PE_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
        PE_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
        PE_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
        PE_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
        PE_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
        PE_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
        PE_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
        PE_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
        PE_VK_CASE(VK_ERROR_UNKNOWN)
        PE_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
        PE_VK_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
#ifdef VK_VERSION_1_2
        PE_VK_CASE(VK_ERROR_FRAGMENTATION)
        PE_VK_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#endif
#ifdef VK_VERSION_1_3
        PE_VK_CASE(VK_PIPELINE_COMPILE_REQUIRED)
#endif
#ifdef VK_KHR_surface
        PE_VK_CASE(VK_ERROR_SURFACE_LOST_KHR)
        PE_VK_CASE(VK_ERROR_NATIVE_WINDOW_IN_USE_KHR)
#endif
#ifdef VK_KHR_swapchain
        PE_VK_CASE(VK_SUBOPTIMAL_KHR)
        PE_VK_CASE(VK_ERROR_OUT_OF_DATE_KHR)
#endif
#ifdef VK_EXT_debug_report
        PE_VK_CASE(VK_ERROR_VALIDATION_FAILED_EXT)
#endif
#ifdef VK_NV_glsl_shader
        PE_VK_CASE(VK_ERROR_INVALID_SHADER_NV)
#endif
#undef PE_VK_CASE
    default:
        break;
    }
    return "VK_RESULT_UNKNOWN";
}

posenc_status pe_vk_fail(struct pe_vk_backend *be, const char *call, VkResult r)
{
    posenc_status st = POSENC_ERR_BACKEND;
    if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
        st = POSENC_ERR_OUT_OF_MEMORY;
    return pe_error(be->base.ctx, st, "%s failed: %s (%d)", call, pe_vk_result_name(r), (int)r);
}

static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

/* ------------------------------------------------------------------------------------ */
/* Instance                                                                             */
/* ------------------------------------------------------------------------------------ */

static VKAPI_ATTR VkBool32 VKAPI_CALL
vk_debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                  VkDebugUtilsMessageTypeFlagsEXT types,
                  const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)severity;
    (void)types;
    posenc_context *ctx = user;
    if (ctx)
        pe_log(ctx, POSENC_LOG_WARN, "vulkan validation: %s",
               data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE; /* never abort the call */
}

static void fill_messenger_info(VkDebugUtilsMessengerCreateInfoEXT *mi, posenc_context *ctx)
{
    memset(mi, 0, sizeof *mi);
    mi->sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    mi->messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi->messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi->pfnUserCallback = vk_debug_callback;
    mi->pUserData = ctx;
}

static bool has_extension(const VkExtensionProperties *ext, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(ext[i].extensionName, name) == 0)
            return true;
    return false;
}

/* Instance extensions (of the implementation, or of `layer`); NULL when there are none
 * or on failure. */
static VkExtensionProperties *instance_extensions(const char *layer, uint32_t *out_n)
{
    *out_n = 0;
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0)
        return NULL;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    if (!ext)
        return NULL;
    VkResult r = vkEnumerateInstanceExtensionProperties(layer, &n, ext);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(ext);
        return NULL;
    }
    *out_n = n;
    return ext;
}

static bool layer_present(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkLayerProperties *layers = calloc(n, sizeof *layers);
    if (!layers)
        return false;
    bool found = false;
    VkResult r = vkEnumerateInstanceLayerProperties(&n, layers);
    if (r == VK_SUCCESS || r == VK_INCOMPLETE)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(layers[i].layerName, name) == 0;
    free(layers);
    return found;
}

/*
 * Create a Vulkan 1.1 instance. With `debug` (ctx != NULL), enable the validation layer
 * and VK_EXT_debug_utils if present; *out_debug_utils says whether the extension is on.
 * A 1.0-only loader answers VK_ERROR_INCOMPATIBLE_DRIVER.
 */
static VkResult vk_instance_create(posenc_context *ctx, bool debug, VkInstance *out,
                                   bool *out_debug_utils)
{
    *out = VK_NULL_HANDLE;
    if (out_debug_utils)
        *out_debug_utils = false;
    /* vkEnumerateInstanceVersion exists from loader 1.1 on; a 1.0 loader would reject
     * apiVersion 1.1 anyway. */
    if (!vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"))
        return VK_ERROR_INCOMPATIBLE_DRIVER;

    uint32_t n_ext = 0;
    VkExtensionProperties *ext = instance_extensions(NULL, &n_ext);
    const char *enabled_ext[2];
    uint32_t n_enabled_ext = 0;
    const char *enabled_layers[1];
    uint32_t n_layers = 0;
    VkInstanceCreateFlags flags = 0;

#ifdef VK_KHR_portability_enumeration
    /* MoltenVK and other non-conformant implementations are listed only with this. */
    if (has_extension(ext, n_ext, PE_VK_PORTABILITY_ENUMERATION)) {
        enabled_ext[n_enabled_ext++] = PE_VK_PORTABILITY_ENUMERATION;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
#endif

    bool debug_utils = false;
    if (debug) {
        if (layer_present(PE_VK_VALIDATION_LAYER)) {
            enabled_layers[n_layers++] = PE_VK_VALIDATION_LAYER;
            uint32_t n_lext = 0;
            VkExtensionProperties *lext = instance_extensions(PE_VK_VALIDATION_LAYER, &n_lext);
            debug_utils = has_extension(lext, n_lext, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
            free(lext);
        } else if (ctx) {
            pe_log(ctx, POSENC_LOG_WARN,
                   "vulkan: validation layer not installed (" PE_VK_VALIDATION_LAYER ")");
        }
        if (!debug_utils)
            debug_utils = has_extension(ext, n_ext, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        if (debug_utils)
            enabled_ext[n_enabled_ext++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        else if (ctx && n_layers)
            pe_log(ctx, POSENC_LOG_WARN,
                   "vulkan: " VK_EXT_DEBUG_UTILS_EXTENSION_NAME
                   " not available, validation messages are not forwarded");
    }
    free(ext);

    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "posenc",
        .applicationVersion = VK_MAKE_VERSION(POSENC_VERSION_MAJOR, POSENC_VERSION_MINOR,
                                              POSENC_VERSION_PATCH),
        .pEngineName = "posenc",
        .engineVersion = VK_MAKE_VERSION(POSENC_VERSION_MAJOR, POSENC_VERSION_MINOR,
                                         POSENC_VERSION_PATCH),
        .apiVersion = VK_API_VERSION_1_1,
    };
    /* Chained so that messages from vkCreateInstance / vkDestroyInstance arrive too. */
    VkDebugUtilsMessengerCreateInfoEXT mi;
    fill_messenger_info(&mi, ctx);
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = debug_utils ? &mi : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = n_layers,
        .ppEnabledLayerNames = n_layers ? enabled_layers : NULL,
        .enabledExtensionCount = n_enabled_ext,
        .ppEnabledExtensionNames = n_enabled_ext ? enabled_ext : NULL,
    };
    VkResult r = vkCreateInstance(&ci, NULL, out);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return r;
    }
    if (out_debug_utils)
        *out_debug_utils = debug_utils;
    return VK_SUCCESS;
}

/* All physical devices (through be's table); *out_list is NULL when there are none. */
static VkResult vk_physical_devices(const struct pe_vk_backend *be, VkInstance inst,
                                    VkPhysicalDevice **out_list, uint32_t *out_n)
{
    *out_list = NULL;
    *out_n = 0;
    for (;;) {
        uint32_t n = 0;
        VkResult r = vkEnumeratePhysicalDevices(inst, &n, NULL);
        if (r != VK_SUCCESS)
            return r;
        if (n == 0)
            return VK_SUCCESS;
        VkPhysicalDevice *list = calloc(n, sizeof *list);
        if (!list)
            return VK_ERROR_OUT_OF_HOST_MEMORY;
        r = vkEnumeratePhysicalDevices(inst, &n, list);
        if (r == VK_INCOMPLETE) { /* a device appeared in between: try again */
            free(list);
            continue;
        }
        if (r != VK_SUCCESS) {
            free(list);
            return r;
        }
        *out_list = list;
        *out_n = n;
        return VK_SUCCESS;
    }
}

static bool is_gpu_type(VkPhysicalDeviceType t)
{
    return t == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ||
           t == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
           t == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU;
}

static const char *device_type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return "CPU";
    default:
        return "other";
    }
}

static void format_version(char *dst, size_t size, const char *prefix, uint32_t v)
{
    snprintf(dst, size, "%s%u.%u.%u", prefix, (v >> 22) & 0x7fu, (v >> 12) & 0x3ffu,
             v & 0xfffu);
}

/* ------------------------------------------------------------------------------------ */
/* device_count                                                                         */
/* ------------------------------------------------------------------------------------ */

static void set_reason(char *reason, size_t size, const char *call, VkResult r)
{
    if (reason && size)
        snprintf(reason, size, "%s failed: %s (%d)", call, pe_vk_result_name(r), (int)r);
}

static posenc_status vk_device_count(int32_t *out_count, char *reason, size_t reason_size)
{
    *out_count = 0;
    PE_RETURN_IF_ERROR(pe_vk_load(reason, reason_size));
    VkInstance inst;
    VkResult r = vk_instance_create(NULL, false, &inst, NULL);
    if (r != VK_SUCCESS) {
        set_reason(reason, reason_size, "vkCreateInstance (Vulkan 1.1)", r);
        return POSENC_ERR_UNAVAILABLE;
    }
    /* a backend only for its function table (the vkXxx names resolve through be->vk) */
    struct pe_vk_backend probe;
    struct pe_vk_backend *be = &probe;
    const char *missing = pe_vk_load_instance(&be->vk, vkGetInstanceProcAddr, inst);
    if (missing) {
        if (vkDestroyInstance) /* the table entry (vk_loader.h) */
            vkDestroyInstance(inst, NULL);
        if (reason && reason_size)
            snprintf(reason, reason_size,
                     "the Vulkan loader's vkGetInstanceProcAddr returned NULL for %s", missing);
        return POSENC_ERR_UNAVAILABLE;
    }
    VkPhysicalDevice *list;
    uint32_t n;
    r = vk_physical_devices(be, inst, &list, &n);
    free(list);
    vkDestroyInstance(inst, NULL);
    if (r != VK_SUCCESS) {
        set_reason(reason, reason_size, "vkEnumeratePhysicalDevices", r);
        return POSENC_ERR_UNAVAILABLE;
    }
    *out_count = n > INT32_MAX ? INT32_MAX : (int32_t)n;
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* create / destroy                                                                     */
/* ------------------------------------------------------------------------------------ */

static void vk_destroy(struct pe_backend *b);

/* Pick the physical device (index among all, or among GPUs with gpu_only). */
static posenc_status vk_pick_device(struct pe_vk_backend *be, int32_t device, bool gpu_only)
{
    posenc_context *ctx = be->base.ctx;
    VkPhysicalDevice *list;
    uint32_t n;
    VkResult r = vk_physical_devices(be, be->instance, &list, &n);
    if (r != VK_SUCCESS) {
        if (r == VK_ERROR_INITIALIZATION_FAILED)
            return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                            "vkEnumeratePhysicalDevices failed: %s (%d)",
                            pe_vk_result_name(r), (int)r);
        return pe_vk_fail(be, "vkEnumeratePhysicalDevices", r);
    }
    uint32_t count = 0;
    VkPhysicalDevice chosen = VK_NULL_HANDLE;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(list[i], &p);
        if (gpu_only && !is_gpu_type(p.deviceType))
            continue;
        if (device >= 0 && count == (uint32_t)device)
            chosen = list[i];
        count++;
    }
    free(list);
    if (gpu_only && count == 0)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "no Vulkan GPU device (%u Vulkan device%s, none a GPU)", n,
                        n == 1 ? "" : "s");
    if (n == 0)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, "no Vulkan device found");
    if (!chosen)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "device %" PRId32 " is out of range: there %s %u Vulkan %sdevice%s",
                        device, count == 1 ? "is" : "are", count, gpu_only ? "GPU " : "",
                        count == 1 ? "" : "s");
    be->phys = chosen;
    return POSENC_OK;
}

/* POSENC_DEVICE_PRESET (src/preset.h): lower the limits and features vk_query_device
 * stored, in place (be->props.limits, be->max_alloc, the feature flags, the device type),
 * so that every later reader -- the shader limit checks of pe_vk_pipeline_spec, dispatch
 * splitting, the binding limit, get_info -- sees the preset's device. Never raises one. */
static void vk_apply_preset(struct pe_vk_backend *be)
{
    const struct pe_preset *pr = be->base.ctx->preset;
    if (!pr)
        return;
    const struct pe_preset_vk *v = &pr->vk;
    VkPhysicalDeviceLimits *l = &be->props.limits;
    char was[200];
    snprintf(was, sizeof was,
             "%" PRIu32 " invocations, shared %" PRIu32 ", push %" PRIu32 ", storage range %" PRIu32
             ", allocation %" PRIu64 ", 16-bit storage %d, 8-bit storage %d, int64 %d, "
             "float16 %d",
             l->maxComputeWorkGroupInvocations, l->maxComputeSharedMemorySize,
             l->maxPushConstantsSize, l->maxStorageBufferRange, (uint64_t)be->max_alloc,
             be->f16_native, be->storage8, be->int64, be->float16);
    pe_lower_u32(&l->maxComputeWorkGroupInvocations, v->wg_invocations);
    for (int k = 0; k < 3; k++) {
        pe_lower_u32(&l->maxComputeWorkGroupSize[k], v->wg_size[k]);
        pe_lower_u32(&l->maxComputeWorkGroupCount[k], v->wg_count[k]);
    }
    pe_lower_u32(&l->maxComputeSharedMemorySize, v->shared_bytes);
    pe_lower_u32(&l->maxPushConstantsSize, v->push_bytes);
    pe_lower_u32(&l->maxStorageBufferRange, v->storage_range);
    uint64_t alloc = be->max_alloc ? (uint64_t)be->max_alloc : UINT64_MAX;
    pe_lower_u64(&alloc, v->max_alloc);
    be->max_alloc = alloc;
    be->f16_native = be->f16_native && v->storage16;
    be->storage8 = be->storage8 && v->storage8;
    be->int64 = be->int64 && v->int64;
    be->float16 = be->float16 && v->float16;
    be->props.deviceType = pr->type == POSENC_DEVICE_DISCRETE_GPU
                               ? VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
                               : VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
    pe_log(be->base.ctx, POSENC_LOG_INFO,
           "vulkan: " PE_PRESET_ENV "=%s (%s): %" PRIu32 " invocations (%" PRIu32 " x %" PRIu32
           " x %" PRIu32 "), shared %" PRIu32 ", push %" PRIu32 ", storage range %" PRIu32
           ", allocation %" PRIu64 " bytes, 16-bit storage %d, 8-bit storage %d, int64 %d, "
           "float16 %d (the device: %s)",
           pr->name, pr->what, l->maxComputeWorkGroupInvocations, l->maxComputeWorkGroupSize[0],
           l->maxComputeWorkGroupSize[1], l->maxComputeWorkGroupSize[2],
           l->maxComputeSharedMemorySize, l->maxPushConstantsSize, l->maxStorageBufferRange,
           (uint64_t)be->max_alloc, be->f16_native, be->storage8, be->int64, be->float16, was);
}

/* Properties, limits and features of be->phys; fails if it is older than Vulkan 1.1. */
static posenc_status vk_query_device(struct pe_vk_backend *be, const VkExtensionProperties *ext,
                                     uint32_t n_ext)
{
    vkGetPhysicalDeviceProperties(be->phys, &be->props);
    vkGetPhysicalDeviceMemoryProperties(be->phys, &be->mem_props);
    uint32_t v = be->props.apiVersion;
    if (VK_VERSION_MAJOR(v) == 1 && VK_VERSION_MINOR(v) < 1)
        return pe_error(be->base.ctx, POSENC_ERR_UNAVAILABLE,
                        "Vulkan device %" PRId32 " (%s) supports only Vulkan %u.%u; posenc "
                        "needs 1.1",
                        be->device_index, be->props.deviceName, VK_VERSION_MAJOR(v),
                        VK_VERSION_MINOR(v));

    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
    };
    VkPhysicalDeviceProperties2 p2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
        .pNext = &m3,
    };
#ifdef VK_KHR_driver_properties
    VkPhysicalDeviceDriverPropertiesKHR drv = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES_KHR,
    };
    /* The instance is 1.1, so use the struct through the (1.2-promoted) device extension,
     * which 1.2+ drivers keep listing. */
    if (has_extension(ext, n_ext, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME)) {
        m3.pNext = &drv;
        be->has_driver_props = true;
    }
#else
    (void)ext;
    (void)n_ext;
#endif
    vkGetPhysicalDeviceProperties2(be->phys, &p2);
    be->max_alloc = m3.maxMemoryAllocationSize;
#ifdef VK_KHR_driver_properties
    if (be->has_driver_props) {
        pe_strlcpy(be->driver_name, drv.driverName, sizeof be->driver_name);
        pe_strlcpy(be->driver_info, drv.driverInfo, sizeof be->driver_info);
    }
#endif

    VkPhysicalDevice16BitStorageFeatures f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
    };
    VkPhysicalDeviceFeatures2 f2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
        .pNext = &f16,
    };
    /* 8-bit storage and float16 arithmetic: only through the extensions the device lists
     * (core in 1.2, but posenc's instance is 1.1). Queried so that a shader that would use
     * them can ask (and a preset can take them away); no shader does today. */
    VkPhysicalDevice8BitStorageFeaturesKHR f8 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR,
    };
    VkPhysicalDeviceShaderFloat16Int8FeaturesKHR fh = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR,
    };
    if (has_extension(ext, n_ext, VK_KHR_8BIT_STORAGE_EXTENSION_NAME)) {
        f8.pNext = f16.pNext;
        f16.pNext = &f8;
    }
    if (has_extension(ext, n_ext, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) {
        fh.pNext = f16.pNext;
        f16.pNext = &fh;
    }
    vkGetPhysicalDeviceFeatures2(be->phys, &f2);
    be->f16_native = f16.storageBuffer16BitAccess == VK_TRUE;
    be->storage8 = f8.storageBuffer8BitAccess == VK_TRUE;
    be->int64 = f2.features.shaderInt64 == VK_TRUE;
    be->float16 = fh.shaderFloat16 == VK_TRUE;
    vk_apply_preset(be);
    /* What one view may span so that its window (pe_vk_put_view: start rounded down to
     * the offset alignment, end rounded up to 16 bytes) stays within one binding; after
     * the preset, so that a lowered maxStorageBufferRange cuts ops as a real one would. */
    {
        VkDeviceSize align = be->props.limits.minStorageBufferOffsetAlignment;
        if (align < 16)
            align = 16;
        be->base.max_binding = be->props.limits.maxStorageBufferRange - align - 16;
        be->base.max_binding_name = be->base.ctx->preset
                                        ? "Vulkan maxStorageBufferRange (" PE_PRESET_ENV ")"
                                        : "Vulkan maxStorageBufferRange";
    }
    return POSENC_OK;
}

/* posenc's own objects on be->dev for be->queue_family: command pool, the ring of
 * command buffers and fences (vk_submit.c), the launch infrastructure. The same on posenc's device and on the application's. */
static posenc_status vk_open_queue(struct pe_vk_backend *be)
{
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = be->queue_family,
    };
    VkResult r = vkCreateCommandPool(be->dev, &pci, NULL, &be->cmd_pool);
    if (r != VK_SUCCESS) {
        be->cmd_pool = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreateCommandPool", r);
    }
    PE_RETURN_IF_ERROR(pe_vk_submit_init(be));
    PE_RETURN_IF_ERROR(pe_vk_ops_init(be));
    be->force_staging = env_flag("POSENC_VK_FORCE_STAGING");
    return POSENC_OK;
}

/* The device extensions, then vk_query_device; says whether the device lists
 * VK_KHR_portability_subset (which must then be enabled on the VkDevice). */
static posenc_status vk_probe(struct pe_vk_backend *be, bool *out_portability_subset)
{
    uint32_t n_ext = 0;
    VkExtensionProperties *ext = NULL;
    VkResult r = vkEnumerateDeviceExtensionProperties(be->phys, NULL, &n_ext, NULL);
    if (r == VK_SUCCESS && n_ext) {
        ext = calloc(n_ext, sizeof *ext);
        if (!ext)
            return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
        r = vkEnumerateDeviceExtensionProperties(be->phys, NULL, &n_ext, ext);
    }
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(ext);
        return pe_vk_fail(be, "vkEnumerateDeviceExtensionProperties", r);
    }
    posenc_status st = vk_query_device(be, ext, n_ext);
    *out_portability_subset = has_extension(ext, n_ext, PE_VK_PORTABILITY_SUBSET);
    free(ext);
    return st;
}

static posenc_status vk_open(struct pe_vk_backend *be, int32_t device, bool gpu_only)
{
    posenc_context *ctx = be->base.ctx;
    bool debug = (ctx->flags & POSENC_CONTEXT_DEBUG) != 0;
    bool debug_utils = false;
    char why[PE_ERR_MAX];
    if (pe_vk_load(why, sizeof(why)) != POSENC_OK)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, "%s", why);
    VkResult r = vk_instance_create(ctx, debug, &be->instance, &debug_utils);
    if (r != VK_SUCCESS)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, "vkCreateInstance (Vulkan 1.1) failed: %s (%d)",
                        pe_vk_result_name(r), (int)r);
    const char *missing = pe_vk_load_instance(&be->vk, vkGetInstanceProcAddr, be->instance);
    if (missing) {
        if (!vkDestroyInstance) /* the table entry */
            be->instance = VK_NULL_HANDLE; /* cannot be destroyed: left to the process exit */
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "the Vulkan loader's vkGetInstanceProcAddr returned NULL for %s",
                        missing);
    }
    if (debug_utils) {
        PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
            (PFN_vkCreateDebugUtilsMessengerEXT)be->vk.get_instance_proc_addr(
                be->instance, "vkCreateDebugUtilsMessengerEXT");
        be->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)be->vk.get_instance_proc_addr(
            be->instance, "vkDestroyDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT mi;
        fill_messenger_info(&mi, ctx);
        if (create_messenger && be->destroy_messenger) {
            r = create_messenger(be->instance, &mi, NULL, &be->messenger);
            if (r != VK_SUCCESS) {
                be->messenger = VK_NULL_HANDLE;
                pe_log(ctx, POSENC_LOG_WARN, "vulkan: vkCreateDebugUtilsMessengerEXT failed: %s",
                       pe_vk_result_name(r));
            }
        }
    }

    be->device_index = device;
    PE_RETURN_IF_ERROR(vk_pick_device(be, device, gpu_only));
    bool portability_subset = false;
    PE_RETURN_IF_ERROR(vk_probe(be, &portability_subset));

    /* A queue family with compute (every Vulkan device has one). */
    uint32_t n_fam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(be->phys, &n_fam, NULL);
    VkQueueFamilyProperties *fam = calloc(n_fam ? n_fam : 1, sizeof *fam);
    if (!fam)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    vkGetPhysicalDeviceQueueFamilyProperties(be->phys, &n_fam, fam);
    uint32_t family = UINT32_MAX;
    for (uint32_t i = 0; i < n_fam && family == UINT32_MAX; i++)
        if ((fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && fam[i].queueCount > 0)
            family = i;
    free(fam);
    if (family == UINT32_MAX)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "Vulkan device %" PRId32 " (%s) has no compute queue", device,
                        be->props.deviceName);
    be->queue_family = family;

    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    const char *dev_ext[1];
    uint32_t n_dev_ext = 0;
    if (portability_subset) /* required by the spec when the device lists it */
        dev_ext[n_dev_ext++] = PE_VK_PORTABILITY_SUBSET;
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_dev_ext,
        .ppEnabledExtensionNames = n_dev_ext ? dev_ext : NULL,
    };
    r = vkCreateDevice(be->phys, &dci, NULL, &be->dev);
    if (r != VK_SUCCESS) {
        be->dev = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreateDevice", r);
    }
    if ((missing = pe_vk_load_device(&be->vk, be->dev)) != NULL) {
        /* vk_destroy would call what is missing: destroy the bare device here */
        if (vkDestroyDevice) /* the table entry */
            vkDestroyDevice(be->dev, NULL);
        be->dev = VK_NULL_HANDLE;
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                        "vkGetDeviceProcAddr returned NULL for %s on %s", missing,
                        be->props.deviceName);
    }
    vkGetDeviceQueue(be->dev, family, 0, &be->queue);
    PE_RETURN_IF_ERROR(vk_open_queue(be));
    char api[32];
    format_version(api, sizeof api, "", be->props.apiVersion);
    pe_log(ctx, POSENC_LOG_INFO, "vulkan: device %" PRId32 ": %s (%s, Vulkan %s)%s", device,
           be->props.deviceName, device_type_name(be->props.deviceType), api,
           be->force_staging ? ", staging buffers forced" : "");
    return POSENC_OK;
}

static posenc_status vk_create(posenc_context *ctx, int32_t device, bool gpu_only,
                               struct pe_backend **out)
{
    *out = NULL;
    struct pe_vk_backend *be = calloc(1, sizeof *be);
    if (!be)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory allocating the Vulkan backend");
    be->base.vt = &pe_vulkan_vtable;
    be->base.ctx = ctx;
    posenc_status st = vk_open(be, device, gpu_only);
    if (st != POSENC_OK) {
        vk_destroy(&be->base);
        return st;
    }
    *out = &be->base;
    return POSENC_OK;
}

/*
 * The application's instance, device and queue. posenc creates its own command pool,
 * fence, descriptor objects, pipeline cache and buffers on them (vk_open_queue) and
 * vk_destroy frees only those. Nothing is added to the instance: no layer, no messenger
 * (VK_EXT_debug_utils may not be enabled on it, and validation is the application's
 * choice).
 */
static posenc_status vk_create_from_host(posenc_context *ctx,
                                         const struct posenc_host_device *host,
                                         struct pe_backend **out)
{
    *out = NULL;
    struct pe_vk_backend *be = calloc(1, sizeof *be);
    if (!be)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of host memory allocating the Vulkan backend");
    be->base.vt = &pe_vulkan_vtable;
    be->base.ctx = ctx;
    be->host_owned = true;
    be->device_index = -1;
    posenc_status st = POSENC_OK;

    /* The whole table through the application's vkGetInstanceProcAddr when it gave one
     * (then no libvulkan of posenc's is needed), else through posenc's loader. */
    PFN_vkGetInstanceProcAddr gipa = NULL;
    if (host->vk_get_instance_proc_addr) {
        gipa = (PFN_vkGetInstanceProcAddr)host->vk_get_instance_proc_addr;
    } else {
        char why[PE_ERR_MAX];
        if (pe_vk_load(why, sizeof(why)) != POSENC_OK) {
            st = pe_error(ctx, POSENC_ERR_UNAVAILABLE, "%s", why);
            goto fail;
        }
        gipa = vkGetInstanceProcAddr;
    }
    const char *missing = pe_vk_load_instance(&be->vk, gipa, (VkInstance)host->vk_instance);
    if (missing) {
        st = pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                      "%s returned NULL for %s on host->vk_instance = %p (posenc needs an "
                      "instance created with apiVersion 1.1 or later)",
                      host->vk_get_instance_proc_addr ? "host->vk_get_instance_proc_addr"
                                                      : "the Vulkan loader's vkGetInstanceProcAddr",
                      missing, host->vk_instance);
        goto fail;
    }

    /* The physical device must be one of the instance's: a cheap check that the two
     * handles belong together (a stray handle would crash the calls below). */
    VkPhysicalDevice *list;
    uint32_t n;
    VkResult r = vk_physical_devices(be, (VkInstance)host->vk_instance, &list, &n);
    if (r != VK_SUCCESS) {
        st = pe_vk_fail(be, "vkEnumeratePhysicalDevices(host->vk_instance)", r);
        goto fail;
    }
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++)
        found = list[i] == (VkPhysicalDevice)host->vk_physical_device;
    free(list);
    if (!found) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "host->vk_physical_device = %p is not one of the %u physical devices of "
                      "host->vk_instance = %p",
                      host->vk_physical_device, n, host->vk_instance);
        goto fail;
    }
    be->phys = (VkPhysicalDevice)host->vk_physical_device;
    bool portability_subset = false;
    if ((st = vk_probe(be, &portability_subset)) != POSENC_OK)
        goto fail;

    uint32_t n_fam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(be->phys, &n_fam, NULL);
    VkQueueFamilyProperties *fam = calloc(n_fam ? n_fam : 1, sizeof *fam);
    if (!fam) {
        st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
        goto fail;
    }
    vkGetPhysicalDeviceQueueFamilyProperties(be->phys, &n_fam, fam);
    VkQueueFlags qflags = host->vk_queue_family < n_fam ? fam[host->vk_queue_family].queueFlags
                                                        : 0;
    free(fam);
    if (host->vk_queue_family >= n_fam) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "host->vk_queue_family = %" PRIu32 " is out of range: %s has %" PRIu32
                      " queue famil%s",
                      host->vk_queue_family, be->props.deviceName, n_fam, n_fam == 1 ? "y" : "ies");
        goto fail;
    }
    if (!(qflags & VK_QUEUE_COMPUTE_BIT)) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "host->vk_queue_family = %" PRIu32 " has no VK_QUEUE_COMPUTE_BIT "
                      "(queueFlags 0x%" PRIx32 ")",
                      host->vk_queue_family, (uint32_t)qflags);
        goto fail;
    }
    be->queue_family = host->vk_queue_family;
    if ((missing = pe_vk_load_device(&be->vk, (VkDevice)host->vk_device)) != NULL) {
        st = pe_error(ctx, POSENC_ERR_UNAVAILABLE,
                      "vkGetDeviceProcAddr returned NULL for %s on host->vk_device = %p (%s)",
                      missing, host->vk_device, be->props.deviceName);
        goto fail;
    }
    be->dev = (VkDevice)host->vk_device;
    be->queue = (VkQueue)host->vk_queue;
    if ((st = vk_open_queue(be)) != POSENC_OK)
        goto fail;
    if (ctx->flags & POSENC_CONTEXT_DEBUG)
        pe_log(ctx, POSENC_LOG_INFO,
               "vulkan: POSENC_CONTEXT_DEBUG adds no validation on the application's device: "
               "enable VK_LAYER_KHRONOS_validation on your own instance");
    char api[32];
    format_version(api, sizeof api, "", be->props.apiVersion);
    pe_log(ctx, POSENC_LOG_INFO, "vulkan: the application's device: %s (%s, Vulkan %s)%s",
           be->props.deviceName, device_type_name(be->props.deviceType), api,
           be->force_staging ? ", staging buffers forced" : "");
    (void)portability_subset; /* enabling it was the application's job */
    *out = &be->base;
    return POSENC_OK;

fail:
    vk_destroy(&be->base);
    return st;
}

static void vk_destroy(struct pe_backend *b)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    if (!be)
        return;
    if (be->dev) {
        /* Waits for posenc's submissions, frees every batch's resources and what
         * recordings the application did not destroy. On the application's device only
         * posenc's fences tell that posenc's work is done (waiting for the whole device
         * would need every queue, which posenc may not touch). */
        if (be->cmd_pool)
            pe_vk_submit_destroy(be);
        if (!be->host_owned)
            vkDeviceWaitIdle(be->dev);
        pe_vk_ops_destroy(be);
        pe_vk_buffer_free(be, &be->staging);
        for (int i = 0; i < 2; i++)
            pe_vk_buffer_free(be, &be->fa_part[i]);
        if (be->cmd_pool)
            vkDestroyCommandPool(be->dev, be->cmd_pool, NULL); /* frees the ring's buffers */
        if (!be->host_owned)
            vkDestroyDevice(be->dev, NULL);
    }
    if (be->instance && !be->host_owned) {
        if (be->messenger && be->destroy_messenger)
            be->destroy_messenger(be->instance, be->messenger, NULL);
        vkDestroyInstance(be->instance, NULL);
    }
    free(be);
}

/* ------------------------------------------------------------------------------------ */
/* get_info / finish                                                                    */
/* ------------------------------------------------------------------------------------ */

static const char *vendor_name(uint32_t id)
{
    switch (id) {
    case 0x1002: return "AMD";
    case 0x1010: return "Imagination";
    case 0x106B: return "Apple";
    case 0x10DE: return "NVIDIA";
    case 0x13B5: return "ARM";
    case 0x14E4: return "Broadcom";
    case 0x5143: return "Qualcomm";
    case 0x8086: return "Intel";
    case 0x10001: return "Vivante";
    case 0x10002: return "VeriSilicon";
    case 0x10003: return "Kazan";
    case 0x10004: return "Codeplay";
    case 0x10005: return "Mesa";
    case 0x10006: return "PoCL";
    case 0x10007: return "MoltenVK";
    default: return NULL;
    }
}

static void vk_get_info(const struct pe_backend *b, struct posenc_device_info *out)
{
    const struct pe_vk_backend *be = (const struct pe_vk_backend *)b;
    const VkPhysicalDeviceProperties *p = &be->props;
    out->backend = POSENC_BACKEND_VULKAN;
    switch (p->deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        out->type = POSENC_DEVICE_DISCRETE_GPU;
        break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        out->type = POSENC_DEVICE_INTEGRATED_GPU;
        break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        out->type = POSENC_DEVICE_CPU;
        break;
    default:
        out->type = POSENC_DEVICE_OTHER;
        break;
    }
    out->device_index = be->device_index;
    pe_strlcpy(out->device_name, p->deviceName, sizeof out->device_name);
    const char *vn = vendor_name(p->vendorID);
    if (vn)
        snprintf(out->vendor, sizeof out->vendor, "%s (0x%" PRIx32 ")", vn, p->vendorID);
    else
        snprintf(out->vendor, sizeof out->vendor, "0x%" PRIx32, p->vendorID);

    uint32_t dv = p->driverVersion;
    if (be->has_driver_props) {
        char tmp[sizeof be->driver_name + sizeof be->driver_info + 2];
        snprintf(tmp, sizeof tmp, "%s %s", be->driver_name, be->driver_info);
        pe_strlcpy(out->driver_version, tmp, sizeof out->driver_version);
    } else if (p->vendorID == 0x10DE) { /* NVIDIA: 10.8.8.6 bits */
        snprintf(out->driver_version, sizeof out->driver_version, "%u.%u.%u.%u",
                 (dv >> 22) & 0x3ffu, (dv >> 14) & 0xffu, (dv >> 6) & 0xffu, dv & 0x3fu);
    } else {
        format_version(out->driver_version, sizeof out->driver_version, "", dv);
    }
    format_version(out->api_version, sizeof out->api_version, "Vulkan ", p->apiVersion);
    out->f16_storage = 1;
    out->f16_native = be->f16_native ? 1 : 0;
    out->max_buffer_size = be->max_alloc ? (uint64_t)be->max_alloc : UINT64_MAX;
    out->max_workgroup_size = p->limits.maxComputeWorkGroupInvocations;
    out->compute_units = 0; /* Vulkan does not say */
}

static posenc_status vk_finish(struct pe_backend *b)
{
    return pe_vk_wait((struct pe_vk_backend *)b);
}

/* posenc_context_flush: submit the open batch; nothing waits. */
static posenc_status vk_flush(struct pe_backend *b)
{
    return pe_vk_flush((struct pe_vk_backend *)b);
}

/* ------------------------------------------------------------------------------------ */
/* Memory and buffers                                                                   */
/* ------------------------------------------------------------------------------------ */

#define PE_VK_HOST_FLAGS (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)

void pe_vk_buffer_free(struct pe_vk_backend *be, struct pe_vk_buffer *b)
{
    if (b->buf)
        vkDestroyBuffer(be->dev, b->buf, NULL);
    if (b->mem)
        vkFreeMemory(be->dev, b->mem, NULL); /* also unmaps */
    memset(b, 0, sizeof *b);
}

/*
 * Create a buffer of `size` bytes and give it memory. `host`: host-visible, coherent and
 * mapped (prefer HOST_CACHED: it is read back). Otherwise prefer DEVICE_LOCAL and map it
 * only when it is also host-visible and coherent and staging is not forced. Memory types
 * are tried in order of preference until one allocation succeeds.
 */
static posenc_status vk_buffer_alloc(struct pe_vk_backend *be, VkDeviceSize size,
                                     VkBufferUsageFlags usage, bool host,
                                     struct pe_vk_buffer *out)
{
    memset(out, 0, sizeof *out);
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = vkCreateBuffer(be->dev, &bci, NULL, &out->buf);
    if (r != VK_SUCCESS) {
        out->buf = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkCreateBuffer", r);
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(be->dev, out->buf, &req);

    /* Two passes over the memory types: preferred flags first, then acceptable. */
    const VkMemoryPropertyFlags want[2] = {
        host ? PE_VK_HOST_FLAGS | VK_MEMORY_PROPERTY_HOST_CACHED_BIT
             : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
        host ? PE_VK_HOST_FLAGS : 0,
    };
    const VkMemoryPropertyFlags unwanted = VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT |
                                           VK_MEMORY_PROPERTY_PROTECTED_BIT;
    bool tried[VK_MAX_MEMORY_TYPES] = {false};
    bool any = false;
    uint32_t type = UINT32_MAX;
    r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    for (int pass = 0; pass < 2 && type == UINT32_MAX; pass++) {
        for (uint32_t i = 0; i < be->mem_props.memoryTypeCount; i++) {
            VkMemoryPropertyFlags f = be->mem_props.memoryTypes[i].propertyFlags;
            if (tried[i] || !(req.memoryTypeBits & (1u << i)) || (f & want[pass]) != want[pass] ||
                (f & unwanted))
                continue;
            tried[i] = true;
            any = true;
            VkMemoryAllocateInfo mai = {
                .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                .allocationSize = req.size,
                .memoryTypeIndex = i,
            };
            r = vkAllocateMemory(be->dev, &mai, NULL, &out->mem);
            if (r == VK_SUCCESS) {
                type = i;
                be->n_allocs++;
                break;
            }
            out->mem = VK_NULL_HANDLE;
            if (r != VK_ERROR_OUT_OF_DEVICE_MEMORY && r != VK_ERROR_OUT_OF_HOST_MEMORY)
                break; /* a real failure: do not try the next type */
        }
        if (r != VK_SUCCESS && r != VK_ERROR_OUT_OF_DEVICE_MEMORY &&
            r != VK_ERROR_OUT_OF_HOST_MEMORY)
            break;
    }
    if (type == UINT32_MAX) {
        pe_vk_buffer_free(be, out);
        if (!any)
            return pe_error(be->base.ctx, POSENC_ERR_BACKEND,
                            "no suitable Vulkan memory type for a %s buffer (memoryTypeBits "
                            "0x%" PRIx32 ")",
                            host ? "host-visible" : "device", req.memoryTypeBits);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "vkAllocateMemory of %" PRIu64 " bytes failed: %s (%d)",
                            (uint64_t)req.size, pe_vk_result_name(r), (int)r);
        return pe_vk_fail(be, "vkAllocateMemory", r);
    }
    out->size = size;
    r = vkBindBufferMemory(be->dev, out->buf, out->mem, 0);
    if (r != VK_SUCCESS) {
        pe_vk_buffer_free(be, out);
        return pe_vk_fail(be, "vkBindBufferMemory", r);
    }
    VkMemoryPropertyFlags f = be->mem_props.memoryTypes[type].propertyFlags;
    if (host || (!be->force_staging && (f & PE_VK_HOST_FLAGS) == PE_VK_HOST_FLAGS)) {
        r = vkMapMemory(be->dev, out->mem, 0, VK_WHOLE_SIZE, 0, &out->map);
        if (r != VK_SUCCESS) {
            out->map = NULL;
            if (host) {
                pe_vk_buffer_free(be, out);
                return pe_vk_fail(be, "vkMapMemory", r);
            }
            /* a device buffer simply falls back to staging */
        }
    }
    return POSENC_OK;
}

posenc_status pe_vk_buffer_reserve(struct pe_vk_backend *be, struct pe_vk_buffer *b,
                                   VkDeviceSize size, VkBufferUsageFlags usage, bool host)
{
    if (b->buf && b->size >= size)
        return POSENC_OK;
    pe_vk_release(be, b); /* batches that used it may still be running */
    if (pe_fault_device_alloc())
        return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY,
                        "out of device memory for a %" PRIu64 "-byte%s buffer (injected fault)",
                        (uint64_t)size, host ? " host-visible" : "");
    VkDeviceSize alloc = size;
    if (host) /* staging and arena chunks: powers of two from 256 bytes */
        for (alloc = 256; alloc < size; alloc *= 2)
            ;
    return vk_buffer_alloc(be, alloc, usage, host, b);
}

static posenc_status vk_buffer_create(struct pe_backend *b, size_t size, void **out_mem)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    *out_mem = NULL;
    /* f16 tensors are accessed as 32-bit words: round up so the last word exists. */
    /* (size > SIZE_MAX - 3 would wrap to 0 here: no device has such a buffer.) */
    VkDeviceSize alloc = ((VkDeviceSize)size + 3u) & ~(VkDeviceSize)3u;
    /* A buffer may be larger than one binding (maxStorageBufferRange): ops bind windows
     * of it (pe_vk_put_view). */
    if (alloc < (VkDeviceSize)size || (be->max_alloc && alloc > be->max_alloc))
        return pe_error(b->ctx, POSENC_ERR_UNSUPPORTED,
                        "buffer size %zu bytes exceeds this Vulkan device's "
                        "maxMemoryAllocationSize (%" PRIu64 " bytes)",
                        size, (uint64_t)be->max_alloc);
    struct pe_vk_buffer *vb = calloc(1, sizeof *vb);
    if (!vb)
        return pe_error(b->ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    posenc_status st = vk_buffer_alloc(be,
                                       alloc,
                                       VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                           VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                           VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                       false, vb);
    if (st != POSENC_OK) {
        free(vb);
        return st;
    }
    *out_mem = vb;
    return POSENC_OK;
}

static void vk_buffer_destroy(struct pe_backend *b, void *mem)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    struct pe_vk_buffer *vb = mem;
    if (!vb)
        return;
    if (vb->borrowed) {
        /* The application destroys its VkBuffer after this returns: posenc's queued work
         * on it must be done. A failed wait is reported by the next call (the device is
         * lost). */
        (void)pe_vk_wait(be);
    } else {
        /* Freed now if the device is idle, else when the latest batch completes: no
         * wait. */
        pe_vk_release(be, vb);
    }
    free(vb);
}

static posenc_status vk_buffer_wrap_vulkan(struct pe_backend *b, uint64_t handle, uint64_t size,
                                           void **out_mem)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    *out_mem = NULL;
    if (size % 4 != 0)
        return pe_error(b->ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "size = %" PRIu64 " is not a multiple of 4 (posenc's shaders access f16 "
                        "data as 32-bit words)",
                        size);
    /* Larger than maxStorageBufferRange is fine: ops bind windows (pe_vk_put_view). */
#if VK_USE_64_BIT_PTR_DEFINES == 1
    VkBuffer buf = (VkBuffer)(uintptr_t)handle;
#else
    VkBuffer buf = (VkBuffer)handle;
#endif
    /* The only size Vulkan will tell about a VkBuffer: its memory requirement is at least
     * its size, so a larger `size` is certainly wrong. */
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(be->dev, buf, &req);
    if (size > req.size)
        return pe_error(b->ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "size = %" PRIu64 " is larger than vk_buffer 0x%" PRIx64 " (its memory "
                        "requirement is %" PRIu64 " bytes)",
                        size, handle, (uint64_t)req.size);
    struct pe_vk_buffer *vb = calloc(1, sizeof *vb);
    if (!vb)
        return pe_error(b->ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    vb->buf = buf;
    vb->size = size;
    vb->borrowed = true; /* never mapped: write / read use the staging path */
    *out_mem = vb;
    return POSENC_OK;
}

/* Host reads and writes need posenc's own submissions and waits, which recording into
 * the application's command buffer must not make. */
static posenc_status refuse_while_recording(struct pe_vk_backend *be, const char *call)
{
    return pe_error(be->base.ctx, POSENC_ERR_UNSUPPORTED,
                    "%s while ctx records into the application's command buffer (between "
                    "posenc_vulkan_record_begin and posenc_vulkan_record_end): it would need a "
                    "submission or a wait of posenc's own",
                    call);
}

static posenc_status vk_buffer_write(struct pe_backend *b, void *mem, size_t offset,
                                     const void *src, size_t size)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    struct pe_vk_buffer *vb = mem;
    if (be->rec)
        return refuse_while_recording(be, "posenc_buffer_write");
    if (size == 0)
        return POSENC_OK;
    if (vb->map && !pe_vk_busy(be)) { /* nothing queued may touch it: straight in */
        memcpy((unsigned char *)vb->map + offset, src, size);
        return POSENC_OK;
    }
    if (size <= PE_VK_WRITE_RING_MAX) {
        /* Queued after the earlier ops, through a staging range of the open batch: no
         * wait, and `src` is copied before the call returns. */
        PE_RETURN_IF_ERROR(pe_vk_begin(be));
        struct pe_vk_bind bd[2] = {{vb->buf, offset, size}, {VK_NULL_HANDLE, 0, size}};
        void *map;
        PE_RETURN_IF_ERROR(pe_vk_arena(be, size, &bd[1].buf, &bd[1].off, &map));
        memcpy(map, src, size);
        pe_vk_access(be, 2, bd, 1u);
        VkBufferCopy region = {.srcOffset = bd[1].off, .dstOffset = offset, .size = size};
        vkCmdCopyBuffer(be->cmd, bd[1].buf, vb->buf, 1, &region);
        return pe_vk_recorded(be);
    }
    /* Large writes wait for the queued work: a mapped buffer is then written directly,
     * others through the staging buffer, one chunk per submission. */
    if (vb->map) {
        PE_RETURN_IF_ERROR(pe_vk_wait(be));
        memcpy((unsigned char *)vb->map + offset, src, size);
        return POSENC_OK;
    }
    const unsigned char *s = src;
    while (size > 0) {
        VkDeviceSize n = size < PE_VK_STAGING_CHUNK ? size : PE_VK_STAGING_CHUNK;
        PE_RETURN_IF_ERROR(pe_vk_wait(be)); /* the staging buffer may still be read */
        PE_RETURN_IF_ERROR(pe_vk_buffer_reserve(
            be, &be->staging, n, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
            true));
        memcpy(be->staging.map, s, (size_t)n);
        PE_RETURN_IF_ERROR(pe_vk_begin(be));
        VkBufferCopy region = {.srcOffset = 0, .dstOffset = offset, .size = n};
        vkCmdCopyBuffer(be->cmd, be->staging.buf, vb->buf, 1, &region);
        /* The last chunk may finish after we return: the next large write or read waits
         * before it touches the staging buffer. */
        PE_RETURN_IF_ERROR(pe_vk_submit(be, false));
        s += n;
        offset += (size_t)n;
        size -= (size_t)n;
    }
    return POSENC_OK;
}

static posenc_status vk_buffer_read(struct pe_backend *b, void *mem, size_t offset, void *dst,
                                    size_t size)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    struct pe_vk_buffer *vb = mem;
    if (be->rec)
        return refuse_while_recording(be, "posenc_buffer_read");
    PE_RETURN_IF_ERROR(pe_vk_wait(be));
    if (size == 0)
        return POSENC_OK;
    if (vb->map) {
        memcpy(dst, (const unsigned char *)vb->map + offset, size);
        return POSENC_OK;
    }
    unsigned char *d = dst;
    while (size > 0) {
        VkDeviceSize n = size < PE_VK_STAGING_CHUNK ? size : PE_VK_STAGING_CHUNK;
        PE_RETURN_IF_ERROR(pe_vk_buffer_reserve(
            be, &be->staging, n, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
            true));
        PE_RETURN_IF_ERROR(pe_vk_begin(be));
        VkBufferCopy region = {.srcOffset = offset, .dstOffset = 0, .size = n};
        vkCmdCopyBuffer(be->cmd, vb->buf, be->staging.buf, 1, &region);
        PE_RETURN_IF_ERROR(pe_vk_submit(be, true));
        memcpy(d, be->staging.map, (size_t)n);
        d += n;
        offset += (size_t)n;
        size -= (size_t)n;
    }
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */

const struct pe_backend_vtable pe_vulkan_vtable = {
    .kind = POSENC_BACKEND_VULKAN,
    .name = "vulkan",
    .device_count = vk_device_count,
    .create = vk_create,
    .create_from_host = vk_create_from_host,
    .destroy = vk_destroy,
    .get_info = vk_get_info,
    .finish = vk_finish,
    .buffer_create = vk_buffer_create,
    .buffer_destroy = vk_buffer_destroy,
    .buffer_write = vk_buffer_write,
    .buffer_read = vk_buffer_read,
    .buffer_wrap_vulkan = vk_buffer_wrap_vulkan,
    .sinusoidal = pe_vk_sinusoidal,
    .rope = pe_vk_rope,
    .copy = pe_vk_copy,
    .fill = pe_vk_fill,
    .set_rows = pe_vk_set_rows,
    .learned = pe_vk_learned,
    .learned_backward = pe_vk_learned_backward,
    .resize_2d = pe_vk_resize_2d,
    .relbias = pe_vk_relbias,
    .relbias_backward = pe_vk_relbias_backward,
    .alibi = pe_vk_alibi,
    .attn_scores = pe_vk_attn_scores,
    .attn_softmax = pe_vk_attn_softmax,
    .attn_output = pe_vk_attn_output,
    .attn_prepare = pe_vk_attn_prepare,
    /* A cut op's launches may take different pipelines (alibi's and relbias' vector path
     * by each slice's alignment, learned's by its batch count): src/split.c runs them once
     * with prepare_only first (pe_vk_dispatch_rw records nothing then), so every pipeline
     * exists before the first launch writes (test_faults' build scenarios). */
    .prepare_pass = true,
    .softmax = pe_vk_softmax,
    .flush = vk_flush,
    .vk_record_begin = pe_vk_record_begin,
    .vk_record_end = pe_vk_record_end,
    .vk_recording_destroy = pe_vk_recording_destroy,
    .attn_fused = pe_vk_attn_fused,
    .attn_krot = pe_vk_attn_krot,
};
