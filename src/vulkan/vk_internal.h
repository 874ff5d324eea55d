/*
 * vk_internal.h - what the files of the Vulkan backend share (src/vulkan only).
 *
 * backend_vulkan.c: instance, device, memory, buffers, get_info; vk_submit.c: the ring of
 * command buffers, batching, barriers, per-batch resources and recording into the
 * application's command buffer; ops_vulkan.c: the launch infrastructure every op file
 * uses (one descriptor set layout and pipeline layout for all shaders, pipelines created
 * lazily and cached by SPIR-V, table uploads, push-constant helpers, pe_vk_dispatch_rw) and
 * the sinusoidal op; ops_rope_vk.c: RoPE and copy; ops_encodings_vk.c: the others.
 *
 * Execution model (vk_submit.c). Dispatches are recorded back to back into an open batch:
 * one command buffer of a ring of PE_VK_SLOTS, each with its fence, its descriptor pools
 * and its host-visible arena (tables, staging of small writes). A batch is submitted
 * without waiting when it holds PE_VK_BATCH_MAX dispatches, on posenc_context_flush, and
 * before every host wait; on a host-owned context after every dispatch (so the
 * application's later submissions see the op's results, posenc.h). The host waits only
 * in pe_vk_wait (finish, buffer read, context destroy, destroy of a wrapped buffer, a
 * large write that needs it) and when the ring is full (pe_vk_begin waits for the oldest
 * batch); every such synchronisation is counted in be->n_host_waits. A slot's resources
 * are reset when its fence has signalled, so every descriptor set, table and staging
 * range lives until the device is done with it. Inside a batch, a compute/transfer barrier is recorded only before a
 * command that reads or writes a range an earlier command of the batch wrote, or writes
 * a range one read (pe_vk_access); each batch ends with a barrier that makes its writes
 * visible to later batches and to the host.
 */
#ifndef POSENC_VK_INTERNAL_H
#define POSENC_VK_INTERNAL_H

#include "backend.h"

/* <vulkan/vulkan.h> without prototypes: every Vulkan call goes through a table (be->vk or
 * the global one) filled at run time, see vk_loader.h */
#include "vk_loader.h"

/* Every shader sees set 0 with PE_VK_MAX_BINDINGS storage buffers (bindings 0..7; a
 * shader declares the ones it uses) and one push-constant block of at most
 * PE_VK_PUSH_MAX bytes (src/kernel_abi.h asserts each struct fits). */
enum { PE_VK_MAX_BINDINGS = 8 };
enum { PE_VK_PUSH_MAX = 128 };
enum { PE_VK_MAX_SPEC = 8 };    /* specialization constants per pipeline (ids 0..7) */
enum { PE_VK_TABLES = 4 };      /* table slots an op may use at once (pe_vk_table) */
enum { PE_VK_SLOTS = 8 };       /* command buffers (batches) in the ring */
enum { PE_VK_BATCH_MAX = 32 };  /* dispatches per batch before it is submitted */
enum { PE_VK_HAZARDS = 128 };   /* ranges tracked since the last barrier */

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

/* What a batch (or a recording) owns until the device is done with it: descriptor pools
 * (PE_VK_BATCH_MAX sets each, more pools as needed) and host-visible arena chunks
 * (tables, write staging; on reset one chunk of at most 1 MiB is kept). A batch slot's
 * arrays, first pool and first chunk are made with the context (pe_vk_submit_init), so
 * that an op never allocates host memory for them once the context exists. Buffers
 * destroyed while a batch may use them wait in be->garbage, tagged with its pe_vk_res. */
struct pe_vk_res {
    VkDescriptorPool *pools;
    uint32_t n_pools, cap_pools, pool_used; /* pools[n_pools-1] has pool_used sets out */
    struct pe_vk_buffer *chunks;
    uint32_t n_chunks, cap_chunks;
    VkDeviceSize chunk_used;                /* bytes used in chunks[n_chunks-1] */
};

struct pe_vk_garbage {
    struct pe_vk_buffer b;
    const struct pe_vk_res *owner; /* freed when this batch / recording is reset */
};

struct pe_vk_slot {
    VkCommandBuffer cmd;
    VkFence fence;
    bool submitted; /* fence not seen signalled since the submission */
    struct pe_vk_res res;
};

/* A range of a buffer that a command of the open batch read or wrote since the last
 * barrier. */
struct pe_vk_hazard {
    VkBuffer buf;
    VkDeviceSize lo, hi;
    bool written;
};

/* posenc_vulkan_recording (backend.h's public part first). */
struct pe_vk_recording {
    struct posenc_vulkan_recording base;
    struct pe_vk_res res;
    struct pe_vk_recording *prev, *next; /* be->recordings: freed by vk_destroy if left */
};

struct pe_vk_backend {
    struct pe_backend base;
    /* This backend's Vulkan functions (vk_loader.h): every vkXxx(...) call of src/vulkan on
     * an instance, physical device, device, queue or command buffer goes through it. */
    struct pe_vk_funcs vk;

    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;

    VkPhysicalDevice phys;
    int32_t device_index;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem_props;
    VkDeviceSize max_alloc; /* maxMemoryAllocationSize (Vulkan 1.1) */
    bool f16_native;        /* storageBuffer16BitAccess (not used, reported only) */
    /* storageBuffer8BitAccess, shaderInt64, shaderFloat16 (not used by any shader; never
     * enabled on the VkDevice). A shader that needs one must check it and enable it. Like
     * props.limits and max_alloc, lowered by POSENC_DEVICE_PRESET (vk_apply_preset). */
    bool storage8;
    bool int64;
    bool float16;
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
    /* vk_submit.c. cmd: where commands go now -- the open batch's command buffer, the
     * application's (between posenc_vulkan_record_begin and _end), or VK_NULL_HANDLE. */
    VkCommandBuffer cmd;
    struct pe_vk_slot slots[PE_VK_SLOTS];
    uint32_t cur;          /* the open batch's slot, or the next one to open */
    bool recording;        /* slots[cur] is open (begun, not submitted) */
    uint32_t n_dispatch;   /* dispatches in the open batch */
    struct pe_vk_res *res; /* the open batch's or the recording's resources */
    struct pe_vk_hazard hazards[PE_VK_HAZARDS];
    uint32_t n_hazards;
    struct pe_vk_recording *rec;        /* recording into the application's buffer */
    struct pe_vk_recording *recordings; /* ended, not destroyed yet */
    struct pe_vk_garbage *garbage;
    uint32_t n_garbage, cap_garbage;
    /* Counters (tests, bench): batches the host synchronised with (fence waited on or
     * seen signalled, slot_retire), submissions, barriers recorded between commands. */
    uint64_t n_host_waits, n_submits, n_barriers;
    bool force_staging; /* POSENC_VK_FORCE_STAGING=1: never map device buffers */

    struct pe_vk_buffer staging; /* host-visible bounce buffer, grown on demand */
    /* ops_flash_vk.c: the key splits' partials of the one-pass attention in posenc's own
     * batches, two device buffers taken in turn (pe_vk_buffer_reserve), so that a
     * call's partials do not wait for the previous call's merge to have read its own. A
     * recording into the application's buffer makes its own per call instead. */
    struct pe_vk_buffer fa_part[2];
    uint32_t fa_next;
    /* ops_flash_vk.c: the pass's shape, decided at its first call (device type, or
     * POSENC_VK_FLASH): 0 not yet, 1 CPU shape, 2 GPU shape */
    uint8_t fa_shape;
    uint64_t n_allocs; /* device memory allocations made (pe_vk_counters) */

    /* ops_vulkan.c */
    VkDescriptorSetLayout set_layout; /* PE_VK_MAX_BINDINGS storage buffers */
    VkPipelineLayout pipe_layout;     /* set_layout + PE_VK_PUSH_MAX bytes of push constants */
    VkPipelineCache pipe_cache;
    struct pe_vk_pipe {
        const uint32_t *code;         /* the SPIR-V array and the specialization */
        uint32_t n_spec;              /* constants: the key */
        uint32_t spec[PE_VK_MAX_SPEC];
        VkPipeline pipe;
    } *pipes;                         /* grown on demand */
    uint32_t n_pipes, cap_pipes;
};

_Static_assert(offsetof(struct pe_vk_backend, base) == 0, "pe_backend must come first");

extern const struct pe_backend_vtable pe_vulkan_vtable;

/* "VK_ERROR_OUT_OF_DEVICE_MEMORY", ... ("VK_RESULT_<n>" for an unknown value). */
const char *pe_vk_result_name(VkResult r);

/* Report a failed Vulkan call: out-of-memory results -> POSENC_ERR_OUT_OF_MEMORY, the
 * rest -> POSENC_ERR_BACKEND; the message is "<call> failed: <name> (<value>)". */
posenc_status pe_vk_fail(struct pe_vk_backend *be, const char *call, VkResult r);

/* ---- vk_submit.c: batches, barriers, per-batch resources ------------------------------ */

/* The ring of command buffers and fences (after cmd_pool); pe_vk_submit_destroy waits for
 * what is in flight and frees them and every batch's and recording's resources. */
posenc_status pe_vk_submit_init(struct pe_vk_backend *be);
void pe_vk_submit_destroy(struct pe_vk_backend *be);

/* Submit the open batch, then wait for every submitted batch and reset their resources.
 * While recording into the application's command buffer it does not touch that buffer. */
posenc_status pe_vk_wait(struct pe_vk_backend *be);

/* Submit the open batch, if any, without waiting (posenc_context_flush). */
posenc_status pe_vk_flush(struct pe_vk_backend *be);

/* Make be->cmd a command buffer to record into: the application's while recording, else
 * the open batch, opening the next slot of the ring when none is open (waiting for that
 * slot's previous batch only if it has not finished: the ring is full). A new batch on a
 * host-owned queue starts with a barrier against every earlier command of the queue. */
posenc_status pe_vk_begin(struct pe_vk_backend *be);

/* End the open batch (with a barrier that makes its device writes visible to the host
 * and to posenc's later batches, and on a host-owned queue to every later command) and
 * submit it; if `wait`, also wait for everything (pe_vk_wait). Nothing open: only the
 * wait. Refused while recording into the application's buffer. */
posenc_status pe_vk_submit(struct pe_vk_backend *be, bool wait);

/* Before a command that accesses binds[0..n) (bit i of write_mask: binds[i] is written):
 * record a barrier if it reads or writes a range an earlier command since the last
 * barrier wrote, or writes one that was read; then remember its ranges. */
void pe_vk_access(struct pe_vk_backend *be, uint32_t n, const struct pe_vk_bind *binds,
                  uint32_t write_mask);

/* `size` bytes of host-visible, coherent, mapped memory from the current batch's (or
 * recording's) arena, at an offset aligned for a storage-buffer binding; alive until that
 * batch completes (or the recording is destroyed). Call after pe_vk_begin. */
posenc_status pe_vk_arena(struct pe_vk_backend *be, VkDeviceSize size, VkBuffer *out_buf,
                          VkDeviceSize *out_off, void **out_map);

/* A descriptor set (the common layout) from the current batch's or recording's pools.
 * Call after pe_vk_begin. */
posenc_status pe_vk_descriptor_set(struct pe_vk_backend *be, VkDescriptorSet *out);

/* After a command was recorded into the open batch: count it and submit the batch when
 * it is full or the context is host-owned (no-op while recording). */
posenc_status pe_vk_recorded(struct pe_vk_backend *be);

/* Whether a batch may still use device memory: one is open, recording into the
 * application's buffer is in progress, or a submitted one has not finished (no wait). */
bool pe_vk_busy(struct pe_vk_backend *be);

/* Free `b` (a posenc-owned buffer) once no submitted or open batch and no recording uses
 * it: now when the device is idle, else with the resources of the latest batch (or of
 * the recording in progress). */
void pe_vk_release(struct pe_vk_backend *be, struct pe_vk_buffer *b);

/* posenc_vulkan_record_begin / _end / posenc_vulkan_recording_destroy (vtable slots). */
posenc_status pe_vk_record_begin(struct pe_backend *b, void *vk_command_buffer);
posenc_status pe_vk_record_end(struct pe_backend *b, struct posenc_vulkan_recording **out);
void pe_vk_recording_destroy(struct pe_backend *b, struct posenc_vulkan_recording *rec);

/* Test and bench hook: the counters above, and the device memory allocations made, for
 * a Vulkan context (0s for another). */
void pe_vk_counters(posenc_context *ctx, uint64_t *out_host_waits, uint64_t *out_submits,
                    uint64_t *out_barriers, uint64_t *out_allocs);

/* Make `b` a buffer of at least `size` bytes with `usage`: `host`, host-visible, coherent
 * and mapped (a power of two from 256 bytes: staging, arena chunks); else device-local
 * memory where there is some. One that is too small goes to pe_vk_release (freed at once
 * when the device is idle, else when the newest batch has completed, which is after every
 * batch that used it) and a new one is made; contents undefined. For buffers of posenc's
 * own batches, not of a recording into the application's buffer (which may run later
 * than any of posenc's batches). */
posenc_status pe_vk_buffer_reserve(struct pe_vk_backend *be, struct pe_vk_buffer *b,
                                   VkDeviceSize size, VkBufferUsageFlags usage, bool host);
void pe_vk_buffer_free(struct pe_vk_backend *be, struct pe_vk_buffer *b);

/* ---- vk_limits.c ------------------------------------------------------------------- */

/* Whether the shader `code` (SPIR-V, `size` bytes, specialized with spec[0..n_spec)) fits
 * the device's limits in be->props.limits (lowered by POSENC_DEVICE_PRESET): its
 * work-group size and invocations, shared-memory and push-constant bytes. POSENC_OK, or
 * POSENC_ERR_UNSUPPORTED naming the shader and the limit. */
posenc_status pe_vk_check_shader(struct pe_vk_backend *be, const char *name,
                                 const uint32_t *code, size_t size, const uint32_t *spec,
                                 uint32_t n_spec);

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

/* Copy `size` bytes into a host-visible table for the next dispatch and return its
 * binding (a range of the current batch's arena, at least 4 bytes; `slot` < PE_VK_TABLES
 * is kept for the callers' sake and checked only). Does not wait. Valid for the next
 * pe_vk_dispatch_rw only (a later one may be in another batch). */
posenc_status pe_vk_table(struct pe_vk_backend *be, int slot, const void *data, size_t size,
                          struct pe_vk_bind *out);

/* Record into the open batch (or the application's buffer): bind binds[0..n_bufs) to
 * bindings 0..n_bufs-1 (the remaining bindings get binds[0]; a buffer may appear several
 * times, e.g. dst == x) through a fresh descriptor set, push `push_size` bytes
 * (<= PE_VK_PUSH_MAX), dispatch gx*gy*gz workgroups. Does not wait; the batch is
 * submitted when full (pe_vk_recorded). Bit i of write_mask: the shader writes binding i;
 * the others are only read (declared readonly in the shader), so a later op that only
 * reads them needs no barrier after this one (pe_vk_access). */
posenc_status pe_vk_dispatch_rw(struct pe_vk_backend *be, VkPipeline pipe, uint32_t n_bufs,
                                const struct pe_vk_bind *binds, uint32_t write_mask,
                                const void *push, uint32_t push_size, uint32_t gx, uint32_t gy,
                                uint32_t gz);

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
bool pe_vk_attn_krot(struct pe_backend *b, int64_t D, int64_t Dv, int64_t rows);

#endif
