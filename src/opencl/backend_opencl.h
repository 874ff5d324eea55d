/*
 * backend_opencl.h - what the files of the OpenCL backend share (private to src/opencl):
 * the backend struct, the program cache, and the launch helpers that
 * src/opencl/ops_encodings.c uses. backend_opencl.c lists every kernel's argument order.
 */
#ifndef POSENC_BACKEND_OPENCL_H
#define POSENC_BACKEND_OPENCL_H

#define CL_TARGET_OPENCL_VERSION 120
/* <CL/cl.h>, with every OpenCL function called through the table the ICD loader was
 * opened into at run time (cl_loader.h) */
#include "cl_loader.h"

#include "backend.h"

#define PE_CL_MAX_PROGRAMS 64
/* Kernel arguments whose values a program remembers (pe_cl_set_args): at most this many,
 * each at most this many bytes (a long4). */
#define PE_CL_MAX_ARGS 32
#define PE_CL_ARG_MAX_BYTES 32
#define PE_CL_OPTS_MAX 256
#define PE_CL_BUILD_LOG_SHOWN 300
#define PE_CL_PATH_MAX 1024 /* the program-binary cache folder and files */
#define PE_CL_ID_MAX 1024   /* a cache entry's identity text */

/* One built program and its kernel, keyed by (op source, kernel, option string). */
struct pe_cl_program {
    const char *file;        /* "sinusoidal.cl" */
    const char *kernel_name; /* "pe_sinusoidal" (a string literal) */
    char options[PE_CL_OPTS_MAX];
    cl_program program;
    cl_kernel kernel;
    size_t kernel_wg_size; /* CL_KERNEL_WORK_GROUP_SIZE */
    uint64_t serial;       /* a new number each time the slot gets a program (pe_cl_memo) */
    uint64_t pin_gen;      /* the backend's pin_gen when a pinning call last asked for it */
    /* The argument values last set on `kernel` (pe_cl_set_args): a launch with the same
     * bytes skips clSetKernelArg (PoCL allocates per call). Valid while arg_gen equals
     * the backend's mem_gen; n_args_set = 0: nothing known. */
    int n_args_set;
    uint64_t arg_gen;
    unsigned char arg_size[PE_CL_MAX_ARGS];
    unsigned char arg_val[PE_CL_MAX_ARGS][PE_CL_ARG_MAX_BYTES];
};

/* A kernel source: the embedded bytes, or a copy read from POSENC_CL_KERNEL_DIR. */
struct pe_cl_source {
    const char *name;
    const char *data;
    size_t size;
    bool owned;
};

struct pe_cl_backend {
    struct pe_backend base;
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    struct posenc_device_info info;
    size_t max_item_size[3];
    struct pe_cl_source sources[16];
    int n_sources;
    struct pe_cl_program programs[PE_CL_MAX_PROGRAMS];
    int n_programs;
    int evict_next; /* the slot a full program cache reuses next */
    char cache_dir[PE_CL_PATH_MAX]; /* program-binary cache folder; "" = off */
    unsigned cache_seq;             /* cache files written (temporary names) */
    bool cache_warned;              /* an untrusted cache folder was reported (once) */
    int fp64;                       /* cl_khr_fp64 (reported; no kernel needs it) */
    /* CL_DEVICE_LOCAL_MEM_SIZE and CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE (bytes), lowered by
     * POSENC_DEVICE_PRESET like info.max_workgroup_size, max_item_size,
     * info.max_buffer_size, info.f16_native (cl_khr_fp16), fp64 and info.type: a built
     * kernel whose CL_KERNEL_LOCAL_MEM_SIZE is over local_mem is refused (pe_cl_get_program).
     * No kernel uses __constant buffers. */
    uint64_t local_mem;
    uint64_t const_buf;
    int hw_fma;                     /* CL_FP_FMA in CL_DEVICE_SINGLE_FP_CONFIG (fma in
                                     * hardware): the angle code of rope.cl and
                                     * sinusoidal.cl uses fma (-DPE_FMA=1, common.cl);
                                     * POSENC_CL_FMA=0 in the environment turns it off */
    /* Bumped whenever posenc releases a cl_mem (pe_cl_release_mem): a remembered kernel
     * argument naming a released object is never reused, even if a new object gets the
     * same handle. */
    uint64_t mem_gen;
    char platform_id[256];          /* platform name and version (cache identity) */
    /* Persistent small tables (rope frequencies, sinusoidal frequencies, alibi slopes):
     * re-uploaded only when their contents change (pe_cl_table). */
    struct pe_cl_table {
        cl_mem mem;
        void *host;      /* what mem holds (host_cap bytes, grown only) */
        size_t size;
        size_t host_cap;
    } tab_rope, tab_sin, tab_alibi, tab_relbias;
    /* posenc_attention's device temporaries for the CLBlast path (f32 packs of q, k, v and
     * the output GEMM's result), made by pe_cl_attn_prepare before the call's first launch
     * and released by pe_cl_attn_end: no query block and no step allocates after a pass
     * has written an output. NULL: not needed by this call. */
    cl_mem attn_tmp[4];
    int64_t attn_tmp_n[4]; /* their sizes in floats */
    /* The one-pass attention's split-K temporaries (ops_flash.c), kept between calls and
     * grown only, so that a decode call allocates nothing: the partials (fa_part_bytes)
     * and, for pe_flash_cpu's merge by the last work-item, its counters (fa_counts_bytes,
     * ints), zero when made and put back to zero by the work-item that merges (on the
     * in-order queue the next call finds them zero). NULL until a call needs them. */
    cl_mem fa_part, fa_counts;
    size_t fa_part_bytes, fa_counts_bytes;
    /* posenc_relbias on CPU devices (ops_encodings.c): the bias of every relative position
     * per head, f32 [H][n_rel], made by pe_relbias_expand for each call that uses it; kept
     * between calls and grown only. NULL until a call needs it. */
    cl_mem relb;
    size_t relb_bytes;
    /* Decode's kernel (ops_flash.c, want_cpu_kernel), decided at the first attention call
     * from the device type and POSENC_CL_FLASH: 0 not yet, 1 pe_flash_cpu, 2 pe_flash. */
    uint8_t fa_kernel;
    /* While `pinning` (from pe_cl_attn_prepare to pe_cl_attn_end), every program asked for
     * gets pin_gen and a full program cache evicts none of those: a program prepared for
     * a later pass stays built. */
    uint64_t pin_gen;
    int pinning;
    /* CLBlast batch lists (ops_attention.c), grown only and reserved by attn_scores for
     * attn_output too: no query block and no output step allocates after the first. */
    void *gemm_scratch;
    size_t gemm_scratch_cap;
    float *rope_scratch; /* host staging of the rope table */
    size_t rope_scratch_size;
    int used_clblast;    /* a CLBlast routine ran on this context (cleared at destroy) */
    int clblast_logged;  /* the DEBUG line saying why CLBlast is not used was logged */
    /* The program each (op, variant key) resolved to last (pe_cl_memo_find): the hot ops
     * skip formatting their -D options and searching the program list. An entry is valid
     * while the slot's serial is the one recorded (a recycled slot gets a new serial). */
    uint64_t next_serial;
    struct pe_cl_memo {
        uint64_t key; /* 0: empty */
        struct pe_cl_program *p;
        uint64_t serial;
    } memo[16];
    int memo_next;
    /* The event of posenc's last command on the queue (cl_sync.c, pe_cl_track): NULL
     * before the first. posenc_opencl_last_event hands out a reference to it. */
    cl_event last_event;
    /* posenc_buffer_wrap_host buffers (cl_sync.c): the cl_mem (CL_MEM_USE_HOST_PTR), the
     * host memory, its size, and whether the host holds it mapped now; n_mapped counts
     * the mapped ones (pe_cl_before_enqueue unmaps them). */
    struct pe_cl_host {
        cl_mem mem;
        void *ptr;
        size_t size;
        bool mapped;
    } *hosts;
    int n_hosts, cap_hosts, n_mapped;
};

/* One kernel argument (clSetKernelArg's size and value). */
struct pe_cl_arg {
    size_t size;
    const void *value;
};

/* The kernel `kernel_name` of common.cl + `file`, built with `defines` (cached per
 * context: each distinct (file, kernel, defines) is built once). */
posenc_status pe_cl_get_program(struct pe_cl_backend *be, const char *file,
                                const char *kernel_name, const char *defines,
                                struct pe_cl_program **out);

/* The program remembered for `key` (an op's variant bits, nonzero), or NULL (cl_program.c). */
struct pe_cl_program *pe_cl_memo_find(struct pe_cl_backend *be, uint64_t key);
/* Remember p as the program of `key` for pe_cl_memo_find (cl_program.c). */
void pe_cl_memo_put(struct pe_cl_backend *be, uint64_t key, struct pe_cl_program *p);
/* Resolve the program-binary cache folder, once per backend (be->cache_dir, "" = off). */
void pe_cl_cache_init(struct pe_cl_backend *be);

/* The vtable's device_count: all devices of all platforms (cl_device.c). */
posenc_status pe_cl_device_count(int32_t *out_count, char *reason, size_t reason_size);
/* Find device `index` among all (or only GPU) devices of all platforms, in order. */
posenc_status pe_cl_find_device(posenc_context *ctx, int32_t index, bool gpu_only,
                                cl_platform_id *out_plat, cl_device_id *out_dev);
/* Query be->device into be->info and check that posenc can run on it (-1: the app's). */
posenc_status pe_cl_check_device(struct pe_cl_backend *be, int32_t index);

/* A read-only device copy of `size` bytes of host memory (a per-call table); the caller
 * releases it right after enqueueing the kernel that reads it. `what` names it in
 * messages. */
posenc_status pe_cl_upload(struct pe_cl_backend *be, const char *what, const void *data,
                           size_t size, cl_mem *out);

/* Whether the vector kernels should use streaming stores (-DPE_NT_STORE=1) for an
 * out-of-place output of `bytes` (CPU devices, outputs much larger than the caches). */
bool pe_cl_use_nt(const struct pe_cl_backend *be, double bytes);
/* The same for an op writing dst from input x (NULL: none): dst's bytes, and not when x
 * is dst's memory at dst's offset (in place). */
bool pe_cl_stream_out(const struct pe_cl_backend *be, const struct pe_view *x,
                      const struct pe_view *dst);
/* Whether the platform is PoCL ("Portable Computing Language"). */
bool pe_cl_is_pocl(const struct pe_cl_backend *be);

/* Whether the device is a CPU (PoCL and the like: work-items of a group run one after
 * another, so per-work-item set-up is not hidden by other work-items). */
bool pe_cl_is_cpu(const struct pe_cl_backend *be);

/* Elements of a row per work-item of the row kernels on CPU devices (pe_alibi_vec,
 * pe_learned_vec, pe_relbias_row; a multiple of 16; GPUs take 16 per work-item), where a
 * work-item's set-up (64-bit divisions, a position or slope load) is not hidden by other
 * work-items. PoCL, ALiBi [2048, 2048, 32] in place, alternating runs: 16 keys 34-47 ms
 * per call (f16 and f32 alike), 64: 17 / 27 ms, 256: 18 / 27 ms, 2048: 16 / 30 ms (f16 /
 * f32). */
#define PE_CL_CPU_ROW_SPAN 256

/* Whether v's rows start on multiples of n elements with unit innermost stride (the
 * vector kernels' condition). */
bool pe_cl_rows_aligned(const struct pe_view *v, int64_t n);

/* A read-only device buffer equal to `size` bytes of `data`, kept in *t between calls: the
 * same contents as last time reuse it (no upload, no allocation), other contents replace
 * it. The buffer belongs to the table: callers do not release it. */
posenc_status pe_cl_table(struct pe_cl_backend *be, struct pe_cl_table *t, const char *what,
                          const void *data, size_t size, cl_mem *out);

/* *mem (of *have bytes), a device buffer kept between calls and grown only, made at least
 * `bytes` long: kept if it is, else released (OpenCL keeps it for the commands already
 * enqueued on it) and made anew, all zero if `zeroed`. `what` names it in errors. */
posenc_status pe_cl_scratch(struct pe_cl_backend *be, const char *what, cl_mem *mem,
                            size_t *have, size_t bytes, bool zeroed);

/* Set the n_args arguments of p's kernel and enqueue it over global[3] work-items in
 * groups of local[3] (global sizes multiples of the local ones), tracking its event;
 * nothing is enqueued in check-only mode. */
posenc_status pe_cl_enqueue(struct pe_cl_backend *be, struct pe_cl_program *p,
                            const struct pe_cl_arg *args, size_t n_args, const size_t global[3],
                            const size_t local[3]);

/* Set the n_args arguments of p's kernel and enqueue it over n[0] x n[1] x n[2]
 * work-items (each rounded up to the local size; the kernel checks its bounds). */
posenc_status pe_cl_launch(struct pe_cl_backend *be, struct pe_cl_program *p,
                           const struct pe_cl_arg *args, size_t n_args, const uint64_t n[3]);

/* The work-group size of a reduction kernel (one group per row, `bytes_per_item` of
 * __local memory per work-item): the largest power of two <= cap that the device's
 * CL_DEVICE_MAX_WORK_GROUP_SIZE, CL_DEVICE_MAX_WORK_ITEM_SIZES[0] and
 * CL_DEVICE_LOCAL_MEM_SIZE (as lowered by POSENC_DEVICE_PRESET) allow. The kernel's
 * __local array gets that size (a -D define, or a __local argument set at launch); the
 * launch may lower it further to the built kernel's CL_KERNEL_WORK_GROUP_SIZE. */
size_t pe_cl_reduce_wg(const struct pe_cl_backend *be, size_t cap, size_t bytes_per_item);

/* The ops of src/opencl/ops_rope.c. */
posenc_status pe_cl_copy(struct pe_backend *be, const struct pe_copy_op *op);
posenc_status pe_cl_sinusoidal(struct pe_backend *be, const struct pe_sinusoidal_op *op);
posenc_status pe_cl_rope(struct pe_backend *be, const struct pe_rope_op *op);

/* The ops of src/opencl/ops_encodings.c. */
posenc_status pe_cl_learned(struct pe_backend *be, const struct pe_learned_op *op);
posenc_status pe_cl_learned_backward(struct pe_backend *be, const struct pe_learned_bwd_op *op);
posenc_status pe_cl_resize_2d(struct pe_backend *be, const struct pe_resize_op *op);
posenc_status pe_cl_relbias(struct pe_backend *be, const struct pe_relbias_op *op);
posenc_status pe_cl_relbias_backward(struct pe_backend *be, const struct pe_relbias_bwd_op *op);
posenc_status pe_cl_alibi(struct pe_backend *be, const struct pe_alibi_op *op);

/* The ops of src/opencl/ops_rows.c. */
posenc_status pe_cl_fill(struct pe_backend *be, const struct pe_fill_op *op);
posenc_status pe_cl_set_rows(struct pe_backend *be, const struct pe_set_rows_op *op);

/* The ops of src/opencl/ops_attention.c (posenc_attention's steps). */
posenc_status pe_cl_attn_scores(struct pe_backend *be, const struct pe_attn_scores_op *op);
posenc_status pe_cl_attn_softmax(struct pe_backend *be, const struct pe_attn_softmax_op *op);
posenc_status pe_cl_attn_output(struct pe_backend *be, const struct pe_attn_output_op *op);
posenc_status pe_cl_attn_prepare(struct pe_backend *be, const struct pe_attn_scores_op *so,
                                 const struct pe_attn_softmax_op *sm,
                                 const struct pe_attn_output_op *oo);
void pe_cl_attn_end(struct pe_backend *be);

/* posenc_softmax (src/opencl/ops_softmax.c). */
posenc_status pe_cl_softmax(struct pe_backend *be, const struct pe_softmax_op *op);

/* posenc_attention in one pass (src/opencl/ops_flash.c). */
posenc_status pe_cl_attn_fused(struct pe_backend *be, const struct pe_attn_fused_op *op);
bool pe_cl_attn_krot(struct pe_backend *be, int64_t D, int64_t Dv, int64_t rows);

/* Small helpers shared by the op files: a view's element strides as a kernel argument,
 * whether a view is f16, and one kernel argument from a variable. */
static inline cl_long4 long4_of(int64_t a, int64_t b, int64_t c, int64_t d)
{
    cl_long4 v;
    v.s[0] = a;
    v.s[1] = b;
    v.s[2] = c;
    v.s[3] = d;
    return v;
}

static inline cl_long4 view_st(const struct pe_view *v)
{
    return long4_of(v->st[0], v->st[1], v->st[2], v->st[3]);
}

static inline int is_f16(const struct pe_view *v)
{
    return v->dtype == POSENC_DTYPE_F16;
}

#define ARG(v) {sizeof(v), &(v)}

/* Set the n_args arguments of p's kernel, skipping those whose bytes it already holds. */
posenc_status pe_cl_set_args(struct pe_cl_backend *be, struct pe_cl_program *p,
                             const struct pe_cl_arg *args, size_t n_args);

/* clReleaseMemObject, and forget every remembered kernel argument (see mem_gen). */
static inline void pe_cl_release_mem(struct pe_cl_backend *be, cl_mem mem)
{
    be->mem_gen++;
    clReleaseMemObject(mem);
}

/* CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY. */
bool pe_cl_err_is_oom(cl_int err);

/* An OpenCL error code's name ("CL_INVALID_VALUE"), and a failed cl* call reported as
 * POSENC_ERR_BACKEND (OUT_OF_MEMORY for CL_OUT_OF_HOST_MEMORY) with the call and code. */
const char *pe_cl_err_name(cl_int err);
posenc_status pe_cl_fail(posenc_context *ctx, const char *call, cl_int err);
/* pe_cl_fail, but allocation failures (pe_cl_err_is_oom) become POSENC_ERR_OUT_OF_MEMORY. */
posenc_status pe_cl_fail_mem(posenc_context *ctx, const char *call, cl_int err);

/* ---- events and wrapped host memory (src/opencl/cl_sync.c) ---- */

/* Give the wrapped host buffers the host holds mapped back to the device (unmap them). */
posenc_status pe_cl_unmap_hosts(struct pe_cl_backend *be);

/* Every command posenc enqueues goes between these two: before, wrapped host memory the
 * host holds mapped is unmapped (the spec's rule for CL_MEM_USE_HOST_PTR memory a command
 * uses; one compare when there is none); after a successful enqueue, its event `ev` (the
 * command's, asked for with a non-NULL event argument) becomes the last event. */
static inline posenc_status pe_cl_before_enqueue(struct pe_cl_backend *be)
{
    return be->n_mapped > 0 ? pe_cl_unmap_hosts(be) : POSENC_OK;
}

static inline void pe_cl_track(struct pe_cl_backend *be, cl_event ev)
{
    if (!ev)
        return;
    if (be->last_event)
        clReleaseEvent(be->last_event);
    be->last_event = ev;
}

/* cl_finish, before its clFinish: map every wrapped host buffer for the host again
 * (non-blocking maps; the clFinish makes their contents current). */
posenc_status pe_cl_map_hosts(struct pe_cl_backend *be);
/* cl_destroy: release the last event and the host-buffer list (the buffers themselves
 * were unwrapped by the front end first). */
void pe_cl_sync_free(struct pe_cl_backend *be);

/* The vtable slots of backend.h. */
posenc_status pe_cl_host_alignment(struct pe_backend *be, size_t *out_alignment);
posenc_status pe_cl_buffer_wrap_host(struct pe_backend *be, void *ptr, size_t size,
                                     void **out_mem);
void pe_cl_buffer_unwrap_host(struct pe_backend *be, void *mem);
posenc_status pe_cl_last_event(struct pe_backend *be, void **out_event);
posenc_status pe_cl_wait_events(struct pe_backend *be, int32_t n, void *const *events);

#endif
