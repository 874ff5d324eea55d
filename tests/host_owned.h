/*
 * host_owned.h - what the host-owned device suites share (tests/host_owned.c):
 * test_host_owned.c (wrapping, ownership, bad input) and test_vk_record.c (recording into
 * the application's Vulkan command buffer). Each plays the application: its own OpenCL
 * context + queue or Vulkan instance + device, made here.
 */
#ifndef POSENC_TESTS_HOST_OWNED_H
#define POSENC_TESTS_HOST_OWNED_H

#include "check.h"
#include "harness.h"

#include <stdbool.h>
#include <stdint.h>

#if TH_HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif
#if TH_HAVE_VULKAN
#include <vulkan/vulkan.h>
#endif

/* A status, and a message (of ctx, or `err` when ctx is NULL) that contains `needle`. */
void expect(posenc_status got, posenc_status want, posenc_context *ctx, const char *err,
            const char *needle, const char *what);
/* posenc_context_create_from_host that must fail: status, message, *out_ctx NULL. */
void expect_create_fails(const struct posenc_context_params *p,
                         const struct posenc_host_device *host, posenc_status want,
                         const char *needle, const char *what);

#if TH_HAVE_OPENCL || TH_HAVE_VULKAN /* what only the host-owned device tests use */
/* The tensors every backend's test uses: x [D, H, T, B] with positions [T]. */
enum { D = 64, H = 4, T = 16, B = 2, N = D * H * T * B };

extern float g_x[N];
extern int32_t g_pos[T];
extern const struct posenc_rope_params g_rope;
extern float g_ref_rope[N], g_ref_rope16[N], g_ref_sin[D * T];

/* g_x (uniform in [-1, 1), seeded) and g_pos (3 t + 1). */
void make_inputs(void);
/* The reference results on th.ref (g_ref_*), made once. */
void ensure_reference(void);
/* got against g_ref_rope / g_ref_rope16 / g_ref_sin within the bounds of src/check. */
void compare_rope_f32(const float *got, const char *what);
void compare_rope_f16(const uint16_t *got, const char *what);
void compare_sin(const float *got, const char *what);
/* The debug flag and th_log at WARN: the params every host-owned context is made with. */
extern const struct posenc_context_params g_params;
/* posenc_context_create_from_host with g_params (fails the test on error). */
posenc_context *create_host_ctx(const struct posenc_host_device *host);
#endif

#if TH_HAVE_VULKAN
struct vk_host {
    VkInstance inst;
    VkDebugUtilsMessengerEXT messenger;
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;
    VkPhysicalDevice phys;
    VkPhysicalDeviceMemoryProperties mp;
    VkDevice dev;
    VkQueue q;
    uint32_t family;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    bool pending; /* cmd submitted, fence not waited for */
};

struct vk_buf {
    VkBuffer buf;
    VkDeviceMemory mem;
    void *map;
};

#define VK_OK(call) assert_int_equal((call), VK_SUCCESS)

/* The application's validation messages (and the loader's): every one fails the test. */
extern int g_vk_messages;

/* The application's instance (validation layer and messenger when installed), device,
 * compute queue, command pool, buffer and fence. */
void vk_host_open(struct vk_host *h);
/* Wait for the last vk_submit(h, false). */
void vk_wait(struct vk_host *h);
struct posenc_host_device vk_host_device(const struct vk_host *h);
void vk_host_close(struct vk_host *h);
/* vk_host_close, then fail if the messenger saw any message. */
void vk_host_close_checked(struct vk_host *h);
/* A VkBuffer with its own memory (host-visible and mapped, or device-local). */
void vk_buf_make(struct vk_host *h, VkDeviceSize size, bool host_visible, struct vk_buf *b);
void vk_buf_free(struct vk_host *h, struct vk_buf *b);
/* The VkBuffer as posenc_buffer_wrap_vulkan takes it. */
uint64_t vk_handle(VkBuffer b);
posenc_buffer *vk_wrap(posenc_context *ctx, const struct vk_buf *b, uint64_t size);
/* Begin h's command buffer; submit it (and wait, or leave it to vk_wait). */
void vk_begin(struct vk_host *h);
void vk_submit(struct vk_host *h, bool wait);
/* A copy on the application's queue, waited for. */
void vk_copy_and_wait(struct vk_host *h, VkBuffer src, VkBuffer dst, VkDeviceSize size);
#endif

#endif
