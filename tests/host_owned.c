/*
 * host_owned.c - the inputs, references, checks and host-device set-up the host-owned
 * suites share (host_owned.h).
 */
#include "host_owned.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if TH_HAVE_OPENCL || TH_HAVE_VULKAN /* what only the host-owned device tests use */

float g_x[N];
int32_t g_pos[T];

void make_inputs(void)
{
    uint64_t s = 0x5eed;
    for (int i = 0; i < N; i++)
        g_x[i] = (float)(2.0 * pc_rand_uniform(&s) - 1.0);
    for (int t = 0; t < T; t++)
        g_pos[t] = 3 * t + 1; /* < 64 */
}

const struct posenc_rope_params g_rope = {.mode = POSENC_ROPE_NEOX};

/* Every position is < 64 and every frequency <= 1, so every angle is < 64 rad. */
static double rope_bound_f32(double ref)
{
    return pc_bound_rope_f32(2.0 * pc_ulp32(64.0), 1.0, 2.0) + pc_ulp32(ref);
}

/* The reference results, on th.ref: rope f32, copy to f16 + rope in place (as f32 values),
 * and sinusoidal [D, T] of g_pos. */
float g_ref_rope[N], g_ref_rope16[N], g_ref_sin[D * T];

static void make_reference(void)
{
    posenc_buffer *x = th_upload(th.ref, g_x, sizeof(g_x));
    posenc_buffer *pos = th_upload(th.ref, g_pos, sizeof(g_pos));
    posenc_buffer *y = NULL, *h16 = NULL, *s = NULL;
    assert_int_equal(posenc_buffer_create(th.ref, sizeof(g_x), &y), POSENC_OK);
    assert_int_equal(posenc_buffer_create(th.ref, sizeof(g_x) / 2, &h16), POSENC_OK);
    assert_int_equal(posenc_buffer_create(th.ref, sizeof(g_ref_sin), &s), POSENC_OK);
    posenc_tensor tx = posenc_tensor_contiguous(x, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor ty = posenc_tensor_contiguous(y, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor t16 = posenc_tensor_contiguous(h16, 0, POSENC_DTYPE_F16, D, H, T, B);
    posenc_tensor tp = posenc_tensor_contiguous(pos, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor ts = posenc_tensor_contiguous(s, 0, POSENC_DTYPE_F32, D, T, 1, 1);
    assert_int_equal(posenc_rope(th.ref, &tx, &tp, &ty, &g_rope), POSENC_OK);
    assert_int_equal(posenc_copy(th.ref, &tx, &t16), POSENC_OK);
    assert_int_equal(posenc_rope(th.ref, &t16, &tp, &t16, &g_rope), POSENC_OK);
    assert_int_equal(posenc_sinusoidal(th.ref, NULL, &tp, &ts, NULL), POSENC_OK);
    assert_int_equal(posenc_buffer_read(y, 0, g_ref_rope, sizeof(g_ref_rope)), POSENC_OK);
    assert_int_equal(posenc_buffer_read(s, 0, g_ref_sin, sizeof(g_ref_sin)), POSENC_OK);
    uint16_t *h = th_download(h16);
    for (int i = 0; i < N; i++)
        g_ref_rope16[i] = posenc_f16_to_f32(h[i]);
    free(h);
    posenc_buffer_destroy(&x);
    posenc_buffer_destroy(&pos);
    posenc_buffer_destroy(&y);
    posenc_buffer_destroy(&h16);
    posenc_buffer_destroy(&s);
}

void compare_rope_f32(const float *got, const char *what)
{
    for (int i = 0; i < N; i++) {
        double b = rope_bound_f32(g_ref_rope[i]);
        if (!(fabs((double)got[i] - g_ref_rope[i]) <= b))
            fail_msg("%s: element %d = %.9g, reference %.9g (bound %.3g)", what, i, got[i],
                     g_ref_rope[i], b);
    }
}

void compare_rope_f16(const uint16_t *got, const char *what)
{
    for (int i = 0; i < N; i++) {
        double v = posenc_f16_to_f32(got[i]);
        double b = pc_bound_to_f16(pc_bound_rope_f32(2.0 * pc_ulp32(64.0), 1.0, 2.0),
                                   g_ref_rope16[i]);
        if (!(fabs(v - g_ref_rope16[i]) <= b))
            fail_msg("%s: f16 element %d = %.9g, reference %.9g (bound %.3g)", what, i, v,
                     g_ref_rope16[i], b);
    }
}

void compare_sin(const float *got, const char *what)
{
    for (int i = 0; i < D * T; i++) {
        double b = pc_bound_sincos_f32(64.0, 0.0) + pc_ulp32(g_ref_sin[i]);
        if (!(fabs((double)got[i] - g_ref_sin[i]) <= b))
            fail_msg("%s: element %d = %.9g, reference %.9g (bound %.3g)", what, i, got[i],
                     g_ref_sin[i], b);
    }
}

#endif

/* A status, and a message (of ctx, or `err` when ctx is NULL) that contains `needle`. */
void expect(posenc_status got, posenc_status want, posenc_context *ctx, const char *err,
            const char *needle, const char *what)
{
    const char *msg = ctx ? posenc_context_last_error(ctx) : err;
    if (got != want)
        fail_msg("%s: status %s, want %s (message: %s)", what, posenc_status_string(got),
                 posenc_status_string(want), msg);
    if (needle && !strstr(msg, needle))
        fail_msg("%s: message \"%s\" does not mention \"%s\"", what, msg, needle);
}

/* posenc_context_create_from_host that must fail: status, message, *out_ctx NULL. */
void expect_create_fails(const struct posenc_context_params *p,
                         const struct posenc_host_device *host, posenc_status want,
                         const char *needle, const char *what)
{
    posenc_context *ctx = (posenc_context *)(uintptr_t)1; /* must become NULL */
    char err[512] = "untouched";
    posenc_status st = posenc_context_create_from_host(p, host, &ctx, err, sizeof(err));
    if (ctx)
        posenc_context_destroy(&ctx);
    expect(st, want, NULL, err, needle, what);
    assert_null(ctx);
}




#if TH_HAVE_OPENCL || TH_HAVE_VULKAN /* what only the host-owned device tests use */
void ensure_reference(void)
{
    static bool done;
    if (!done) {
        make_reference();
        done = true;
    }
}

const struct posenc_context_params g_params = {
    .flags = POSENC_CONTEXT_DEBUG, .log_fn = th_log, .log_level = POSENC_LOG_WARN};

posenc_context *create_host_ctx(const struct posenc_host_device *host)
{
    posenc_context *ctx = NULL;
    char err[512];
    posenc_status st = posenc_context_create_from_host(&g_params, host, &ctx, err, sizeof(err));
    if (st != POSENC_OK)
        fail_msg("posenc_context_create_from_host: %s: %s", posenc_status_string(st), err);
    struct posenc_device_info info;
    assert_int_equal(posenc_context_get_info(ctx, &info), POSENC_OK);
    assert_int_equal(info.backend, host->backend);
    assert_int_equal(info.device_index, -1);
    th_check_warnings();
    return ctx;
}

#endif

/* ---- Vulkan ------------------------------------------------------------------------- */

#if TH_HAVE_VULKAN

/* The application's validation messages (and the loader's): every one fails the test. */
int g_vk_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL vk_count(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                               VkDebugUtilsMessageTypeFlagsEXT types,
                                               const VkDebugUtilsMessengerCallbackDataEXT *data,
                                               void *user)
{
    (void)severity;
    (void)types;
    (void)user;
    g_vk_messages++;
    fprintf(stderr, "application's Vulkan messenger: %s\n",
            data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

static bool vk_has_ext(const char *layer, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *e = calloc(n, sizeof(*e));
    assert_non_null(e);
    bool found = false;
    if (vkEnumerateInstanceExtensionProperties(layer, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

static bool vk_has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkLayerProperties *l = calloc(n, sizeof(*l));
    assert_non_null(l);
    bool found = false;
    if (vkEnumerateInstanceLayerProperties(&n, l) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(l[i].layerName, name) == 0;
    free(l);
    return found;
}

/* An instance (validation layer when installed, a counting messenger when debug_utils is
 * there), the first physical device (posenc's device 0, th.dut's), a device with one
 * compute queue, a command pool, command buffer and fence. */
void vk_host_open(struct vk_host *h)
{
    memset(h, 0, sizeof(*h));
    g_vk_messages = 0;
    const char *layer = "VK_LAYER_KHRONOS_validation";
    bool has_layer = vk_has_layer(layer);
    bool du = (has_layer && vk_has_ext(layer, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) ||
              vk_has_ext(NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (!has_layer)
        printf("note: %s is not installed; the application's instance runs without it\n",
               layer);
    /* Synchronization validation too (issue #17: posenc's barriers, in its own batches
     * and recorded into the application's command buffer): through the layer's
     * VK_EXT_validation_features. */
    bool vf = has_layer && vk_has_ext(layer, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    const char *ext[2];
    uint32_t n_ext = 0;
    if (du)
        ext[n_ext++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    if (vf)
        ext[n_ext++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
    else if (has_layer)
        printf("note: %s has no %s: synchronization validation is off\n", layer,
               VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "test_host_owned",
                             .apiVersion = VK_API_VERSION_1_1};
    VkDebugUtilsMessengerCreateInfoEXT mi = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = vk_count,
    };
    const VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                        .enabledValidationFeatureCount = 1,
                                        .pEnabledValidationFeatures = enables};
    const void *chain = NULL;
    if (vf) {
        features.pNext = chain;
        chain = &features;
    }
    if (du) {
        mi.pNext = chain;
        chain = &mi;
    }
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pNext = chain,
                               .pApplicationInfo = &app,
                               .enabledLayerCount = has_layer ? 1 : 0,
                               .ppEnabledLayerNames = has_layer ? &layer : NULL,
                               .enabledExtensionCount = n_ext,
                               .ppEnabledExtensionNames = n_ext ? ext : NULL};
    VK_OK(vkCreateInstance(&ci, NULL, &h->inst));
    if (du) {
        PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(h->inst, "vkCreateDebugUtilsMessengerEXT");
        h->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            h->inst, "vkDestroyDebugUtilsMessengerEXT");
        assert_non_null(create);
        assert_non_null(h->destroy_messenger);
        mi.pNext = NULL; /* it was the head of the instance's chain */
        VK_OK(create(h->inst, &mi, NULL, &h->messenger));
    }
    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(h->inst, &n, &h->phys);
    assert_true((r == VK_SUCCESS || r == VK_INCOMPLETE) && n == 1);
    vkGetPhysicalDeviceMemoryProperties(h->phys, &h->mp);
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(h->phys, &nf, NULL);
    VkQueueFamilyProperties *fam = calloc(nf, sizeof(*fam));
    assert_non_null(fam);
    vkGetPhysicalDeviceQueueFamilyProperties(h->phys, &nf, fam);
    h->family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && h->family == UINT32_MAX; i++)
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            h->family = i;
    free(fam);
    assert_true(h->family != UINT32_MAX);

    uint32_t ne = 0;
    VK_OK(vkEnumerateDeviceExtensionProperties(h->phys, NULL, &ne, NULL));
    VkExtensionProperties *de = calloc(ne ? ne : 1, sizeof(*de));
    assert_non_null(de);
    VK_OK(vkEnumerateDeviceExtensionProperties(h->phys, NULL, &ne, de));
    const char *portability = "VK_KHR_portability_subset";
    bool need_portability = false;
    for (uint32_t i = 0; i < ne; i++)
        need_portability |= strcmp(de[i].extensionName, portability) == 0;
    free(de);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = h->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = need_portability ? 1 : 0,
                              .ppEnabledExtensionNames = need_portability ? &portability : NULL};
    VK_OK(vkCreateDevice(h->phys, &dci, NULL, &h->dev));
    vkGetDeviceQueue(h->dev, h->family, 0, &h->q);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = h->family};
    VK_OK(vkCreateCommandPool(h->dev, &pci, NULL, &h->pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = h->pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    VK_OK(vkAllocateCommandBuffers(h->dev, &cai, &h->cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_OK(vkCreateFence(h->dev, &fci, NULL, &h->fence));
}

void vk_wait(struct vk_host *h)
{
    if (!h->pending)
        return;
    VK_OK(vkWaitForFences(h->dev, 1, &h->fence, VK_TRUE, UINT64_MAX));
    VK_OK(vkResetFences(h->dev, 1, &h->fence));
    h->pending = false;
}

/* The posenc_host_device of h's instance, device and queue. */
struct posenc_host_device vk_host_device(const struct vk_host *h)
{
    return (struct posenc_host_device){.backend = POSENC_BACKEND_VULKAN,
                                       .vk_instance = h->inst,
                                       .vk_physical_device = h->phys,
                                       .vk_device = h->dev,
                                       .vk_queue = h->q,
                                       .vk_queue_family = h->family};
}

void vk_host_close(struct vk_host *h)
{
    vk_wait(h);
    vkDestroyFence(h->dev, h->fence, NULL);
    vkDestroyCommandPool(h->dev, h->pool, NULL);
    vkDestroyDevice(h->dev, NULL);
    if (h->messenger)
        h->destroy_messenger(h->inst, h->messenger, NULL);
    vkDestroyInstance(h->inst, NULL);
}

/* vk_host_close, then fail the test if the application's instance logged validation
 * messages or the posenc contexts under test logged warnings. */
void vk_host_close_checked(struct vk_host *h)
{
    vk_host_close(h);
    if (g_vk_messages)
        fail_msg("%d validation messages on the application's instance (see stderr)",
                 g_vk_messages);
    th_check_warnings();
}

/* A VkBuffer with the usage posenc documents, in host-visible (mapped) or device memory. */
void vk_buf_make(struct vk_host *h, VkDeviceSize size, bool host_visible,
                 struct vk_buf *b)
{
    memset(b, 0, sizeof(*b));
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = size,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK_OK(vkCreateBuffer(h->dev, &bci, NULL, &b->buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(h->dev, b->buf, &req);
    const VkMemoryPropertyFlags want =
        host_visible ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                     : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < h->mp.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) &&
            (h->mp.memoryTypes[i].propertyFlags & want) == want)
            type = i;
    assert_true(type != UINT32_MAX);
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req.size,
                                .memoryTypeIndex = type};
    VK_OK(vkAllocateMemory(h->dev, &mai, NULL, &b->mem));
    VK_OK(vkBindBufferMemory(h->dev, b->buf, b->mem, 0));
    if (host_visible)
        VK_OK(vkMapMemory(h->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map));
}

void vk_buf_free(struct vk_host *h, struct vk_buf *b)
{
    vkDestroyBuffer(h->dev, b->buf, NULL);
    vkFreeMemory(h->dev, b->mem, NULL);
}

uint64_t vk_handle(VkBuffer b)
{
#if VK_USE_64_BIT_PTR_DEFINES == 1
    return (uint64_t)(uintptr_t)b;
#else
    return (uint64_t)b;
#endif
}

posenc_buffer *vk_wrap(posenc_context *ctx, const struct vk_buf *b, uint64_t size)
{
    posenc_buffer *pb = NULL;
    posenc_status st = posenc_buffer_wrap_vulkan(ctx, vk_handle(b->buf), size, &pb);
    if (st != POSENC_OK)
        fail_msg("posenc_buffer_wrap_vulkan: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
    return pb;
}

/* The application's own command buffer on the shared queue. */
void vk_begin(struct vk_host *h)
{
    vk_wait(h);
    VK_OK(vkResetCommandBuffer(h->cmd, 0));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK_OK(vkBeginCommandBuffer(h->cmd, &bi));
}

void vk_submit(struct vk_host *h, bool wait)
{
    VK_OK(vkEndCommandBuffer(h->cmd));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &h->cmd};
    VK_OK(vkQueueSubmit(h->q, 1, &si, h->fence));
    h->pending = true;
    if (wait)
        vk_wait(h);
}

/* Copy src -> dst (host-visible) on the queue, wait, and make it visible to the host. */
void vk_copy_and_wait(struct vk_host *h, VkBuffer src, VkBuffer dst, VkDeviceSize size)
{
    vk_begin(h);
    VkBufferCopy region = {.size = size};
    vkCmdCopyBuffer(h->cmd, src, dst, 1, &region);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(h->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &mb, 0, NULL, 0, NULL);
    vk_submit(h, true);
}

#endif
