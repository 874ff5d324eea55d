/*
 * vk_internal.h - what the files of the Vulkan backend share (src/vulkan only).
 *
 * backend_vulkan.c: instance, device, memory, buffers, the one command buffer and its
 * fence, get_info; ops_vulkan.c: the launch infrastructure every op file uses (one
 * descriptor set layout and pipeline layout for all shaders, pipelines created lazily and
 * cached by SPIR-V, host-visible table buffers, push-constant helpers, pe_vk_dispatch)
 * and the sinusoidal op; ops_rope_vk.c: RoPE and copy; ops_encodings_vk.c: the others.
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

/* Every shader sees set 0 with PE_VK_MAX_BINDINGS storage buffers (bindings 0..7; a
 * shader declares the ones it uses) and one push-constant block of at most
 * PE_VK_PUSH_MAX bytes (src/kernel_abi.h asserts each struct fits). */
enum { PE_VK_MAX_BINDINGS = 8 };
enum { PE_VK_PUSH_MAX = 128 };
enum { PE_VK_MAX_SPEC = 8 };    /* specialization constants per pipeline (ids 0..7) */
enum { PE_VK_TABLES = 4 };      /* host-visible table buffers (be->tables) */

/* What one binding sees: a whole buffer (off 0, range VK_WHOLE_SIZE) or, for a buffer
 * larger than the binding limit, the window of one view (pe_vk_put_view). */
struct pe_vk_bind {
    VkBuffer buf;
    VkDeviceSize off;
    VkDeviceSize range;
};

/* A VkBuffer with its own memory. */
struct pe_vk_buffer {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size; /* bytes allocated (the request rounded up to 4) */
    void *map;         /* persistent mapping (host-visible and coherent), or NULL */
    bool borrowed;     /* the application's VkBuffer (posenc_buffer_wrap_vulkan): posenc
                        * frees neither it nor its memory (mem is VK_NULL_HANDLE) */
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

    /* With host_owned (posenc_context_create_from_host) instance, phys, dev and queue are
     * the application's: destroy frees only posenc's objects on them, and the submission
     * barriers widen to every command of the queue (pe_vk_begin, pe_vk_submit). */
    bool host_owned;
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

    /* ops_vulkan.c */
    VkDescriptorSetLayout set_layout; /* PE_VK_MAX_BINDINGS storage buffers */
    VkPipelineLayout pipe_layout;     /* set_layout + PE_VK_PUSH_MAX bytes of push constants */
    VkDescriptorPool desc_pool;
    VkDescriptorSet set;              /* rewritten by every dispatch (pe_vk_dispatch) */
    VkPipelineCache pipe_cache;
    struct pe_vk_pipe {
        const uint32_t *code;         /* the SPIR-V array and the specialization */
        uint32_t n_spec;              /* constants: the key */
        uint32_t spec[PE_VK_MAX_SPEC];
        VkPipeline pipe;
    } *pipes;                         /* grown on demand */
    uint32_t n_pipes, cap_pipes;
    /* Small per-call tables (frequencies, taps, buckets, ...): host-visible, coherent,
     * mapped, grown on demand and reused by every call (pe_vk_table). */
    struct pe_vk_buffer tables[PE_VK_TABLES];
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

/* Wait, then start recording be->cmd; on a host-owned queue with a barrier against every
 * earlier command of the queue (on posenc's own queue the end barrier of the previous
 * submission already covers this one). */
posenc_status pe_vk_begin(struct pe_vk_backend *be);

/* End recording (with a barrier that makes this submission's device writes visible to
 * the host and to posenc's later submissions, and on a host-owned queue to every later
 * command), submit; if `wait`, also wait for it. */
posenc_status pe_vk_submit(struct pe_vk_backend *be, bool wait);

/* Make `b` a host-visible, coherent, mapped buffer of at least `size` bytes with
 * `usage` (reallocated when too small; the old contents are lost). Call after
 * pe_vk_wait. */
posenc_status pe_vk_host_buffer_reserve(struct pe_vk_backend *be, struct pe_vk_buffer *b,
                                        VkDeviceSize size, VkBufferUsageFlags usage);
void pe_vk_buffer_free(struct pe_vk_backend *be, struct pe_vk_buffer *b);

/* ---- ops_vulkan.c: the launch infrastructure ----------------------------------------- */

posenc_status pe_vk_ops_init(struct pe_vk_backend *be);
void pe_vk_ops_destroy(struct pe_vk_backend *be);

/* The compute pipeline of a shader variant: `code` / `size` is its SPIR-V array (built by
 * shaders/meson.build), `name` is for messages. Created on first use with the common
 * pipeline layout and cached by `code` for the life of the device. */
posenc_status pe_vk_pipeline(struct pe_vk_backend *be, const char *name, const uint32_t *code,
                             size_t size, VkPipeline *out);
/* The same with specialization constants: constant_id i = spec[i] (32-bit each) for
 * i < n_spec (<= PE_VK_MAX_SPEC); cached by (code, spec). Branches on specialization
 * constants are removed when the driver compiles the pipeline: CPU implementations such
 * as lavapipe (Mesa 22) otherwise execute both sides of every branch, masked. */
posenc_status pe_vk_pipeline_spec(struct pe_vk_backend *be, const char *name,
                                  const uint32_t *code, size_t size, const uint32_t *spec,
                                  uint32_t n_spec, VkPipeline *out);

/* Wait for the submission in flight, then copy `size` bytes into host table `slot`
 * (< PE_VK_TABLES; grown as needed, at least 4 bytes) and return its binding (the whole
 * table). Valid until the next call with the same slot; every op may use every slot. */
posenc_status pe_vk_table(struct pe_vk_backend *be, int slot, const void *data, size_t size,
                          struct pe_vk_bind *out);

/* Wait, bind binds[0..n_bufs) to bindings 0..n_bufs-1 (the remaining bindings get
 * binds[0]; a buffer may appear several times, e.g. dst == x), push `push_size` bytes
 * (<= PE_VK_PUSH_MAX), dispatch gx*gy*gz workgroups and submit without waiting. */
posenc_status pe_vk_dispatch(struct pe_vk_backend *be, VkPipeline pipe, uint32_t n_bufs,
                             const struct pe_vk_bind *binds, const void *push,
                             uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz);

/* Workgroups along x for a grid-stride loop over n_items with workgroups of `wg`
 * invocations: ceil(n_items / wg), capped by the device limit and 65535, and by `cpu_cap`
 * on CPU implementations (lavapipe pays per workgroup; fewer, longer-running invocations
 * are faster there). Callers keep n_items + gx*wg within uint32 (pe_vk_grid_fits). */
uint32_t pe_vk_groups(const struct pe_vk_backend *be, uint64_t n_items, uint32_t wg,
                      uint32_t cpu_cap);
/* Whether a flat grid of n_items fits: n_items + (largest gx) * wg <= UINT32_MAX. */
bool pe_vk_grid_fits(const struct pe_vk_backend *be, uint64_t n_items, uint32_t wg);

/* Magic number and shift for pe_udiv (shaders/common.glsl): n / d for any uint32 n. */
void pe_vk_magic(uint32_t d, uint32_t *out_magic, uint32_t *out_l);

/* Store a non-negative int64 into a uint32 push constant, or fail with
 * POSENC_ERR_UNSUPPORTED naming `op` and `what`. */
posenc_status pe_vk_put_u32(struct pe_vk_backend *be, const char *op, uint32_t *dst, int64_t v,
                            const char *what);

/* A view's offset and the strides of dims 0..n-1 (extents ne[0..n-1]) as uint32 push
 * constants, and its binding in *bind; a stride of a dimension with one element is sent
 * as 0. A buffer within the binding limit is bound whole and the offset is the view's;
 * a larger one is bound from the view's first element (rounded down to the device's
 * offset alignment, at least 16 bytes, so vec4 / word alignment is kept) to its last
 * (rounded up to 16 bytes within the buffer), and the offset is relative to that window.
 * Also checks that the largest element index fits in uint32 (shaders index with uint)
 * and that the window fits maxStorageBufferRange (src/split.c cuts ops so that it
 * does). */
posenc_status pe_vk_put_view(struct pe_vk_backend *be, const char *op, const struct pe_view *v,
                             int n, const int64_t *ne, uint32_t *off, uint32_t *const st[],
                             const char *name, struct pe_vk_bind *bind);

/* A whole-buffer binding of a view's buffer (for a binding the shader does not read). */
struct pe_vk_bind pe_vk_whole(const struct pe_view *v);

/* Whether two views are the same elements in the same order (an in-place op). */
bool pe_vk_same_view(const struct pe_view *a, const struct pe_view *b);

/* ---- the ops ------------------------------------------------------------------------- */

posenc_status pe_vk_sinusoidal(struct pe_backend *b, const struct pe_sinusoidal_op *op);
/* ops_rope_vk.c */
posenc_status pe_vk_rope(struct pe_backend *b, const struct pe_rope_op *op);
posenc_status pe_vk_copy(struct pe_backend *b, const struct pe_copy_op *op);
/* ops_encodings_vk.c */
posenc_status pe_vk_learned(struct pe_backend *b, const struct pe_learned_op *op);
posenc_status pe_vk_learned_backward(struct pe_backend *b, const struct pe_learned_bwd_op *op);
posenc_status pe_vk_resize_2d(struct pe_backend *b, const struct pe_resize_op *op);
posenc_status pe_vk_relbias(struct pe_backend *b, const struct pe_relbias_op *op);
posenc_status pe_vk_relbias_backward(struct pe_backend *b, const struct pe_relbias_bwd_op *op);
posenc_status pe_vk_alibi(struct pe_backend *b, const struct pe_alibi_op *op);
/* ops_rows_vk.c */
posenc_status pe_vk_fill(struct pe_backend *b, const struct pe_fill_op *op);
posenc_status pe_vk_set_rows(struct pe_backend *b, const struct pe_set_rows_op *op);
/* ops_attention_vk.c */
posenc_status pe_vk_attn_scores(struct pe_backend *b, const struct pe_attn_scores_op *op);
posenc_status pe_vk_attn_softmax(struct pe_backend *b, const struct pe_attn_softmax_op *op);
posenc_status pe_vk_attn_output(struct pe_backend *b, const struct pe_attn_output_op *op);
posenc_status pe_vk_attn_prepare(struct pe_backend *b, const struct pe_attn_scores_op *so,
                                 const struct pe_attn_softmax_op *sm,
                                 const struct pe_attn_output_op *oo);
/* ops_softmax_vk.c */
posenc_status pe_vk_softmax(struct pe_backend *b, const struct pe_softmax_op *op);
/* ops_flash_vk.c: posenc_attention in one pass (vtable attn_fused) */
posenc_status pe_vk_attn_fused(struct pe_backend *b, const struct pe_attn_fused_op *op);

#endif
