/*
 * backend.h - the one interface every backend implements.
 *
 * A backend lives in its own folder (src/cpu, src/opencl, src/vulkan), fills one
 * `static const struct pe_backend_vtable` and is listed once in src/backends.c. The core
 * never includes a backend's headers. The front end has validated every argument and
 * resolved every default before it calls a slot: backends do not re-check user input,
 * they only report device limits (POSENC_ERR_UNSUPPORTED) and native failures
 * (POSENC_ERR_BACKEND, with the native code and call in the message via pe_error).
 *
 * A NULL op slot means "this backend does not have the op": the front end answers
 * POSENC_ERR_UNSUPPORTED without calling it. Host arrays an op struct points at
 * (frequency tables, taps, buckets, slopes, segment lists) live only during the call: a
 * backend copies or uploads what it needs before it returns.
 */
#ifndef POSENC_BACKEND_H
#define POSENC_BACKEND_H

#include "internal.h"

/* Every backend's private struct starts with this (checked with _Static_assert). */
struct pe_backend {
    const struct pe_backend_vtable *vt;
    posenc_context *ctx;
    /* The most bytes one view may span in one launch (0 = no limit) and the name of the
     * device limit behind it, for messages. The front end slices larger ops into several
     * launches (src/split.c); a slot never sees a view that spans more. */
    uint64_t max_binding;
    const char *max_binding_name;
    /* Set by src/split.c around a prepare pass over a multi-launch op (vtable
     * prepare_pass): every slot runs as usual -- builds its program / pipeline, uploads its
     * tables, sets its arguments -- but enqueues / dispatches nothing and writes no user
     * buffer. The real pass then finds everything made. */
    bool prepare_only;
};

struct pe_backend_vtable {
    posenc_backend_kind kind;
    const char *name;
    /* The backend honours pe_backend.prepare_only (its launches go through one enqueue /
     * dispatch point that checks it): a multi-launch op is run once in that mode before it
     * runs, so that a program build or a table upload the later launches need cannot fail
     * after the first launch wrote. (The CPU backend computes in its slots: false.) */
    bool prepare_pass;

    /* Count usable devices without creating anything. On UNAVAILABLE, write the reason. */
    posenc_status (*device_count)(int32_t *out_count, char *reason, size_t reason_size);

    /*
     * Open device `device` for ctx. With `gpu_only` (AUTO selection), `device` counts only
     * real GPUs and CPU-emulated devices are skipped; no GPU -> POSENC_ERR_UNAVAILABLE.
     * Report failures with pe_error(ctx, ...). On success *out->ctx == ctx.
     */
    posenc_status (*create)(posenc_context *ctx, int32_t device, bool gpu_only,
                            struct pe_backend **out);
    /*
     * posenc_context_create_from_host: run on the application's device. The front end
     * checked host->backend, reserved and that the other backend's fields are NULL; the
     * backend checks the handles (INVALID_ARGUMENT naming the host-> field). It retains
     * (OpenCL) or borrows (Vulkan) the host objects and `destroy` then releases only
     * posenc's references and objects. NULL: the backend has no host-owned devices.
     */
    posenc_status (*create_from_host)(posenc_context *ctx, const struct posenc_host_device *host,
                                      struct pe_backend **out);
    void (*destroy)(struct pe_backend *be);
    void (*get_info)(const struct pe_backend *be, struct posenc_device_info *out);
    posenc_status (*finish)(struct pe_backend *be);

    /* Buffers: `mem` is the backend's own object; sizes and ranges are already checked. */
    posenc_status (*buffer_create)(struct pe_backend *be, size_t size, void **out_mem);
    void (*buffer_destroy)(struct pe_backend *be, void *mem);
    posenc_status (*buffer_write)(struct pe_backend *be, void *mem, size_t offset,
                                  const void *src, size_t size);
    posenc_status (*buffer_read)(struct pe_backend *be, void *mem, size_t offset, void *dst,
                                 size_t size);
    /* posenc_buffer_wrap_opencl / _vulkan on a host-owned context of this backend (the
     * front end checked the context kind, NULL pointers and, for Vulkan, size > 0): check
     * the handle, make a `mem` object that buffer_destroy releases without freeing the
     * application's memory, and give the size (OpenCL: CL_MEM_SIZE). */
    posenc_status (*buffer_wrap_opencl)(struct pe_backend *be, void *cl_mem, size_t *out_size,
                                        void **out_mem);
    posenc_status (*buffer_wrap_vulkan)(struct pe_backend *be, uint64_t vk_buffer,
                                        uint64_t size, void **out_mem);

    /* Ops. */
    posenc_status (*sinusoidal)(struct pe_backend *be, const struct pe_sinusoidal_op *op);
    /* posenc_rope, posenc_rope_qk (x2/dst2 set) and posenc_rope_rerotate (pos_from set).
     * sin/cos are computed once per (token, pair) and reused across heads. */
    posenc_status (*rope)(struct pe_backend *be, const struct pe_rope_op *op);
    posenc_status (*learned)(struct pe_backend *be, const struct pe_learned_op *op);
    posenc_status (*learned_backward)(struct pe_backend *be, const struct pe_learned_bwd_op *op);
    posenc_status (*resize_2d)(struct pe_backend *be, const struct pe_resize_op *op);
    posenc_status (*relbias)(struct pe_backend *be, const struct pe_relbias_op *op);
    posenc_status (*relbias_backward)(struct pe_backend *be, const struct pe_relbias_bwd_op *op);
    posenc_status (*alibi)(struct pe_backend *be, const struct pe_alibi_op *op);
    /* posenc_attention's steps (internal.h). A backend has all three or none. */
    posenc_status (*attn_scores)(struct pe_backend *be, const struct pe_attn_scores_op *op);
    posenc_status (*attn_softmax)(struct pe_backend *be, const struct pe_attn_softmax_op *op);
    posenc_status (*attn_output)(struct pe_backend *be, const struct pe_attn_output_op *op);
    /* Optional: called once per posenc_attention call, after every query block has been
     * checked and before the first launch, with the first block's ops (the largest: later
     * blocks are the same or fewer queries). It acquires everything the steps of every
     * block need that can fail (device temporaries, scratch, programs / pipelines), so that
     * no step fails for want of a resource after an earlier one wrote dst or weights.
     * attn_end, if set, is called at the end of every call that reached attn_prepare
     * (whatever happened) and releases what it made. */
    posenc_status (*attn_prepare)(struct pe_backend *be, const struct pe_attn_scores_op *so,
                                  const struct pe_attn_softmax_op *sm,
                                  const struct pe_attn_output_op *oo);
    void (*attn_end)(struct pe_backend *be);
    /* posenc_copy (also the benchmark's copy ceiling: it is this backend's own copy). */
    posenc_status (*copy)(struct pe_backend *be, const struct pe_copy_op *op);
    /* posenc_fill and posenc_set_rows (posenc_rope_set_rows goes through `rope` with
     * op->rows set). */
    posenc_status (*fill)(struct pe_backend *be, const struct pe_fill_op *op);
    posenc_status (*set_rows)(struct pe_backend *be, const struct pe_set_rows_op *op);
    /* posenc_softmax (ggml's GGML_OP_SOFT_MAX). */
    posenc_status (*softmax)(struct pe_backend *be, const struct pe_softmax_op *op);
    /* Optional: posenc_attention in one pass when no weights are asked for (internal.h,
     * pe_attn_fused_op). Without it (or with POSENC_ATTENTION_UNFUSED) the three steps
     * above run. */
    posenc_status (*attn_fused)(struct pe_backend *be, const struct pe_attn_fused_op *op);
    /* Optional: true when attn_fused rotates k itself (pe_attn_fused_op.has_krot) for a
     * call with head dims D (q, k) and Dv (v) and `rows` rows (query, head) per K/V head
     * (group * Tq); NULL or false: posenc_attention hands it k already rotated (an f32
     * temporary). */
    bool (*attn_krot)(struct pe_backend *be, int64_t D, int64_t Dv, int64_t rows);

    /* posenc_buffer_wrap_host (all three NULL: the backend cannot wrap host memory).
     * host_alignment gives the alignment `ptr` needs, or UNSUPPORTED with the reason when
     * this device cannot do it. buffer_wrap_host is called after the front end checked
     * ptr, size > 0, the alignment and the range; it checks the device's size limit and
     * makes a `mem` object over the memory itself (no copy). buffer_unwrap_host replaces
     * buffer_destroy for such a buffer: it waits until the device no longer uses the
     * memory, leaves the buffer's final contents in it and never frees it. */
    posenc_status (*host_alignment)(struct pe_backend *be, size_t *out_alignment);
    posenc_status (*buffer_wrap_host)(struct pe_backend *be, void *ptr, size_t size,
                                      void **out_mem);
    void (*buffer_unwrap_host)(struct pe_backend *be, void *mem);
    /* posenc_opencl_last_event / _wait_events (NULL: UNSUPPORTED). The front end checked
     * out_event, n >= 0 and, for n > 0, events != NULL. */
    posenc_status (*last_event)(struct pe_backend *be, void **out_event);
    posenc_status (*wait_events)(struct pe_backend *be, int32_t n, void *const *events);

    /* posenc_context_flush: start queued work without waiting for it (every backend). */
    posenc_status (*flush)(struct pe_backend *be);
    /* posenc_vulkan_record_begin / _end / posenc_vulkan_recording_destroy (Vulkan only;
     * NULL: the front end answers INVALID_ARGUMENT, not a Vulkan context). record_end
     * allocates the recording (its `be` set); recording_destroy frees it. */
    posenc_status (*vk_record_begin)(struct pe_backend *be, void *vk_command_buffer);
    posenc_status (*vk_record_end)(struct pe_backend *be, struct posenc_vulkan_recording **out);
    void (*vk_recording_destroy)(struct pe_backend *be, struct posenc_vulkan_recording *rec);
};

/* The public part of a posenc_vulkan_recording: the backend's own struct starts with it.
 * When the context is destroyed first, the backend frees what the recording held and
 * sets `be` to NULL; posenc_vulkan_recording_destroy then frees only the handle. */
struct posenc_vulkan_recording {
    struct pe_backend *be;
};

extern const struct pe_backend_vtable pe_cpu_vtable;
extern const struct pe_backend_vtable pe_opencl_vtable;
extern const struct pe_backend_vtable pe_vulkan_vtable;

/* The registry (src/backends.c): the vtable for `kind`, or NULL if not compiled in. */
const struct pe_backend_vtable *pe_backend_lookup(posenc_backend_kind kind);

/* Whether a backend takes the shape of its kernels meant for CPU devices: the environment
 * variable `name` set to "cpu" or "gpu" decides (tests run both shapes on one device),
 * otherwise `device_is_cpu` (src/backends.c). */
bool pe_cpu_shaped(const char *name, bool device_is_cpu);

#endif
