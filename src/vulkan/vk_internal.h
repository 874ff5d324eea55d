/*
 * vk_internal.h - what the files of the Vulkan backend share (src/vulkan only).
 *
 * backend_vulkan.c: instance, device, memory, buffers, the one command buffer and its
 * fence, get_info; ops_vulkan.c: descriptor layouts, pipelines (one per shader variant,
 * created lazily) and the op launches.
 *
 * Execution model: one command buffer and one fence, at most one submission in flight.
 * Every call that records new work, writes host-visible memory the device may read (the
 * frequency table), rewrites the descriptor set or touches a buffer from the host first
 * waits for that submission (pe_vk_wait). That keeps reuse of the command buffer, the
 * descriptor set and the frequency buffer safe without per-call allocations, and ops can
 * still return before the device is done with them.
 */
#ifndef POSENC_VK_INTERNAL_H
#define POSENC_VK_INTERNAL_H

#include "backend.h"

#include <vulkan/vulkan.h>

enum { PE_VK_SIN_VARIANTS = 4 }; /* dst f32/f16 x x f32/f16 */

/* A VkBuffer with its own memory. */
struct pe_vk_buffer {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size; /* bytes allocated (the request rounded up to 4) */
    void *map;         /* persistent mapping (host-visible and coherent), or NULL */
};

struct pe_vk_backend {
    struct pe_backend base;

    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;

    VkPhysicalDevice phys;
    int32_t device_index;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem_props;
    VkDeviceSize max_alloc; /* maxMemoryAllocationSize (Vulkan 1.1) */
    bool f16_native;        /* storageBuffer16BitAccess (not used, reported only) */
    bool has_driver_props;
    char driver_name[VK_MAX_DRIVER_NAME_SIZE];
    char driver_info[VK_MAX_DRIVER_INFO_SIZE];

    VkDevice dev;
    uint32_t queue_family;
    VkQueue queue;
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    bool in_flight;     /* cmd submitted, fence not waited on yet */
    bool recording;     /* between pe_vk_begin and pe_vk_submit */
    bool force_staging; /* POSENC_VK_FORCE_STAGING=1: never map device buffers */

    struct pe_vk_buffer staging; /* host-visible bounce buffer, grown on demand */
    struct pe_vk_buffer freq;    /* host-visible frequency table, grown on demand */

    /* ops_vulkan.c */
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout sin_layout;
    VkDescriptorPool desc_pool;
    VkDescriptorSet set;
    VkPipelineCache pipe_cache;
    VkPipeline sin_pipes[PE_VK_SIN_VARIANTS];
};

_Static_assert(offsetof(struct pe_vk_backend, base) == 0, "pe_backend must come first");

extern const struct pe_backend_vtable pe_vulkan_vtable;

/* "VK_ERROR_OUT_OF_DEVICE_MEMORY", ... ("VK_RESULT_<n>" for an unknown value). */
const char *pe_vk_result_name(VkResult r);

/* Report a failed Vulkan call: out-of-memory results -> POSENC_ERR_OUT_OF_MEMORY, the
 * rest -> POSENC_ERR_BACKEND; the message is "<call> failed: <name> (<value>)". */
posenc_status pe_vk_fail(struct pe_vk_backend *be, const char *call, VkResult r);

/* Wait for the submission in flight, if any. */
posenc_status pe_vk_wait(struct pe_vk_backend *be);

/* Wait, then start recording be->cmd (with a barrier against earlier submissions). */
posenc_status pe_vk_begin(struct pe_vk_backend *be);

/* End recording (with a barrier that makes device writes visible to the host), submit;
 * if `wait`, also wait for it. */
posenc_status pe_vk_submit(struct pe_vk_backend *be, bool wait);

/* Make `b` a host-visible, coherent, mapped buffer of at least `size` bytes with
 * `usage` (reallocated when too small; the old contents are lost). Call after
 * pe_vk_wait. */
posenc_status pe_vk_host_buffer_reserve(struct pe_vk_backend *be, struct pe_vk_buffer *b,
                                        VkDeviceSize size, VkBufferUsageFlags usage);
void pe_vk_buffer_free(struct pe_vk_backend *be, struct pe_vk_buffer *b);

/* ops_vulkan.c */
posenc_status pe_vk_ops_init(struct pe_vk_backend *be);
void pe_vk_ops_destroy(struct pe_vk_backend *be);
posenc_status pe_vk_sinusoidal(struct pe_backend *b, const struct pe_sinusoidal_op *op);

#endif
