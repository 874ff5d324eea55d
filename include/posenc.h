/*
 * posenc.h - transformer positional encodings on OpenCL, Vulkan and the CPU.
 *
 * This is the whole public API of posenc. Every name starts with posenc_ / POSENC_.
 *
 * Objects and ownership
 * ---------------------
 *   posenc_context  one backend (CPU, OpenCL or Vulkan) on one device. Created with
 *                   posenc_context_create(), or on the application's own OpenCL queue /
 *                   Vulkan device with posenc_context_create_from_host(); destroyed with
 *                   posenc_context_destroy().
 *   posenc_buffer   a block of device memory owned by one context. Created with
 *                   posenc_buffer_create(), or wrapping the application's cl_mem /
 *                   VkBuffer with posenc_buffer_wrap_opencl() / _vulkan(), or its host
 *                   memory with posenc_buffer_wrap_host(); destroyed with
 *                   posenc_buffer_destroy(). Every buffer must be destroyed before its
 *                   context.
 *   posenc_tensor   a plain struct (not a handle): a typed, strided view into a buffer,
 *                   laid out like ggml's tensors (ne[4] element counts, nb[4] byte strides,
 *                   innermost dimension first). It owns nothing.
 *
 * Every destroy function takes the address of the handle, sets the handle to NULL, and
 * accepts a pointer to NULL (it then does nothing).
 *
 * Errors
 * ------
 * Every fallible call returns a posenc_status (POSENC_OK == 0). After a failure,
 * posenc_context_last_error() returns a message naming the argument and the value that
 * was wrong (or the native OpenCL / Vulkan error and the call that failed).
 *
 * Calls without a context (posenc_rope_freqs, posenc_rope_params_from_ggml,
 * posenc_sinusoidal_freqs, posenc_alibi_slopes, posenc_relbias_bucket,
 * posenc_context_create, posenc_context_create_from_host, posenc_backend_device_count,
 * and any call given a NULL context or buffer) report theirs through posenc_last_error():
 * one message per thread, set by every failing posenc call on the calling thread (calls
 * with a context set it too, to the same text as posenc_context_last_error), left as it
 * is by calls that succeed -- so read it right after the call that failed, on the same
 * thread. It is the only state those functions write besides their outputs. (A call
 * refused because another thread is inside the same context sets it too.)
 *
 * On an argument error (INVALID_ARGUMENT, OUT_OF_RANGE, UNSUPPORTED) the destination tensor,
 * buffer or host array is left untouched: all arguments are checked before anything is
 * written. After OUT_OF_MEMORY or BACKEND, posenc_sincos_2d may have written one half of
 * its destination; every other op writes nothing: an op cut into several launches by the
 * binding limit and posenc_attention (its query blocks included) check every launch and
 * make every host table and temporary -- the backends' own device temporaries, uploaded
 * tables and scratch included -- before the first launch writes; they also build the
 * programs / pipelines of all their launches and passes first (these are built on first
 * use and kept by the context). After any
 * error nothing leaks and the context stays usable. posenc never aborts
 * the process on bad input, failed allocations or device errors. A tensor with a zero in
 * ne is empty: the op checks its arguments and params, then does nothing.
 *
 * Besides the statuses each function lists, every call that takes a context may also
 * return POSENC_ERR_UNSUPPORTED (the backend lacks the op, dtype or size on this device),
 * POSENC_ERR_BACKEND (a native OpenCL / Vulkan call failed, or queued work failed) and
 * POSENC_ERR_OUT_OF_MEMORY (a host or device allocation failed, temporaries included).
 *
 * Execution
 * ---------
 * Ops are queued on the context's device in call order and may finish after the call
 * returns (CPU backend: they finish before it returns). An op does not wait for earlier
 * ops. posenc_buffer_read() and posenc_context_finish() wait for all queued work;
 * posenc_context_flush() starts it without waiting. posenc_buffer_write() is ordered with
 * the ops queued before it, and the host memory it reads may be freed or reused as soon
 * as it returns (OpenCL: a blocking write; Vulkan: a copy into posenc's mapped memory or
 * staging memory before it returns; it waits for queued work only for a write over 4 MiB
 * while work is queued). Vulkan queues ops in batches of up to 32 per command buffer and
 * keeps up to 8 batches in flight; an op waits only when all 8 are still running.
 *
 * A failure of queued device work (a lost device, a kernel fault) cannot be reported by
 * the op that queued it: the next call that waits for the device reports it as
 * POSENC_ERR_BACKEND -- posenc_context_finish(), posenc_buffer_read(), and on Vulkan also
 * the next call that waits for a batch; ops whose arguments need a read-back
 * (posenc_learned's positions, RoPE's seq_len = 0) wait too. Call posenc_context_finish()
 * to learn where a sequence of ops stands.
 *
 * Units
 * -----
 * Angles are in radians; positions (pos tensors, offsets, seq_len, original_ctx) count
 * tokens (fractional with f32 positions); frequencies are radians per position; sizes,
 * offsets and strides are in bytes (posenc_tensor) or elements (ne).
 *
 * Accuracy of angles (RoPE, sinusoidal, sincos_2d, attention's encodings)
 * ------------------------------------------------------------------------------
 * One answer on every backend: for |pos * w| <= 2^24 -- every integer position below 2^24
 * (int32 positions, or f32 ones, exact in f32 there) with frequencies w <= 1 (RoPE's and
 * the sinusoid's defaults, every RoPE scaling), and f32 positions taken exactly as the f32
 * value given -- sin(pos * w) and cos(pos * w) are within 4 * 2^-24 of their exact values
 * (of the double frequency table posenc_rope_freqs / posenc_sinusoidal_freqs return),
 * before any further arithmetic, on the CPU, OpenCL and Vulkan backends alike; measured at
 * most 1.6 * 2^-24 up to |pos * w| = 1e6 and 2.5 * 2^-24 up to 2^24. The bound does not
 * grow with the position. No device f64 is needed, nor a fused fma (OpenCL uses fma where
 * the device has it in hardware): the host passes each frequency in quarter turns (w*2/pi)
 * as two f32 words (hi + lo), and the kernels form pos * w exactly as an unevaluated sum,
 * take the whole quarter turns out exactly, turn the rest into radians with a two-word
 * pi/2, then evaluate sin/cos polynomials on the reduced angle, once per (token, pair),
 * shared by every head.
 *   f32 storage: a RoPE output element y = m (xa cos - xb sin) is then within
 *       m (|xa| + |xb|) * 10 * 2^-24 of exact (the sin/cos error plus the rotation's
 *       roundings); a sinusoidal value within 5 * 2^-24 (plus 2^-24 |x*scale| + 1.5 ulp
 *       when fused into x).
 *   f16 storage: the same f32 values, rounded once to f16 (round to nearest even): within
 *       one f16 ulp of exact.
 *   Past |pos * w| = 2^24 an f32 angle has no phase left to reduce (its spacing nears pi):
 *       the CPU backend still evaluates the double angle with libm, the GPU kernels return
 *       values in [-1, 1] (sin 0, cos 1 past ~2^25) that may differ from it.
 * A frequency table entry that does not fit in f32 (a RoPE freq factor of 1e-44, a
 * sinusoidal base below 1 with a large freq_shift) is POSENC_ERR_INVALID_ARGUMENT on every
 * backend, before anything runs; one below FLT_MIN is kept (sin 0, cos 1 within rounding
 * everywhere). Details and measurements: docs/accuracy.md, "Angles".
 *
 * Thread safety
 * -------------
 *   posenc_context, posenc_buffer: one thread at a time per context. Calls on a context
 *       and on its buffers must be serialised by the caller (a context may move between
 *       threads). posenc_context_last_error() is per context: read it on the thread that
 *       made the failing call, before the next call on that context.
 *       Enforced: a call made while another thread is inside a call on the same context
 *       (or on one of its buffers) is refused at once with POSENC_ERR_INVALID_ARGUMENT and
 *       does nothing; its message ("... in use by another thread") is read with
 *       posenc_context_last_error() on the refused thread and is not logged. The check is
 *       one atomic operation per call (GCC / Clang builds). posenc_buffer_destroy() and
 *       posenc_context_destroy() cannot refuse: they wait for the other thread's call to
 *       return (using a context after another thread destroyed it is still an error).
 *   different contexts: independent; they may be created, used and destroyed on
 *       different threads at the same time (tests/test_threads.c, also under
 *       ThreadSanitizer). A buffer is used only with the context that owns it.
 *   posenc_context_create, posenc_backend_device_count: thread-safe.
 *   functions without a context -- posenc_status_string, posenc_version, posenc_dtype_*,
 *       posenc_backend_name, posenc_tensor_contiguous / _nelements, the f16 conversions,
 *       posenc_sinusoidal_freqs, posenc_rope_freqs, posenc_rope_params_from_ggml,
 *       posenc_relbias_bucket, posenc_alibi_slopes: thread-safe and pure (their result
 *       depends only on their arguments; they read no environment variable and no global
 *       state, and write only their output arguments and, on failure, the calling
 *       thread's posenc_last_error()), callable at any time from any thread, with or
 *       without contexts alive.
 *   host-owned devices: see "Sharing a device with the host application" for the rule
 *       on the application's Vulkan queue.
 *   log callback: called on the thread that made the posenc call (a driver may call it
 *       from its own thread for validation messages); it must not call back into posenc
 *       with the same context.
 *   The CPU backend's worker threads are internal to its context.
 */
#ifndef POSENC_H
#define POSENC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(POSENC_BUILDING_SHARED)
#define POSENC_API __declspec(dllexport)
#elif defined(__GNUC__) && defined(POSENC_BUILDING)
#define POSENC_API __attribute__((visibility("default")))
#else
#define POSENC_API
#endif

/* ------------------------------------------------------------------------------------ */
/* Version                                                                              */
/* ------------------------------------------------------------------------------------ */

#define POSENC_VERSION_MAJOR 0
#define POSENC_VERSION_MINOR 1
#define POSENC_VERSION_PATCH 0

/* Returns the library's version as "MAJOR.MINOR.PATCH" (a static string, never NULL). */
POSENC_API const char *posenc_version(void);

/* ------------------------------------------------------------------------------------ */
/* Status codes                                                                         */
/* ------------------------------------------------------------------------------------ */

typedef enum posenc_status {
    POSENC_OK = 0,
    /* An argument is NULL, out of its domain, or inconsistent with another argument
     * (shapes, strides, dtypes, parameters). The message names the argument. */
    POSENC_ERR_INVALID_ARGUMENT = 1,
    /* A data-dependent index is outside its table (for example a position >= the rows
     * of a learned table). The message names the element and its value. */
    POSENC_ERR_OUT_OF_RANGE = 2,
    /* The backend cannot run this op / dtype / size on this device. */
    POSENC_ERR_UNSUPPORTED = 3,
    /* The backend is not compiled in, or no usable device / driver was found. Tests
     * skip on this status. The message carries the driver's own reason. */
    POSENC_ERR_UNAVAILABLE = 4,
    /* A host or device allocation failed. */
    POSENC_ERR_OUT_OF_MEMORY = 5,
    /* An OpenCL or Vulkan call failed; the message has the native code and the call. */
    POSENC_ERR_BACKEND = 6,
    /* A bug in posenc. Please report it with the message. */
    POSENC_ERR_INTERNAL = 7
} posenc_status;

/* Returns a short static description of a status ("invalid argument", ...); never NULL
 * (an unknown value gives "unknown status"). */
POSENC_API const char *posenc_status_string(posenc_status status);

/* ------------------------------------------------------------------------------------ */
/* Element types and tensor views                                                       */
/* ------------------------------------------------------------------------------------ */

typedef enum posenc_dtype {
    POSENC_DTYPE_F32 = 0, /* IEEE binary32 */
    POSENC_DTYPE_F16 = 1, /* IEEE binary16, storage only: posenc computes in f32 or wider */
    POSENC_DTYPE_I32 = 2, /* int32 (positions) */
    /* int64: row indices of posenc_set_rows / posenc_rope_set_rows only (ggml's I64);
     * every other op refuses it with INVALID_ARGUMENT naming the tensor's dtype */
    POSENC_DTYPE_I64 = 3
} posenc_dtype;

/* Returns the size in bytes of one element of `dtype`, or 0 for an unknown value. */
POSENC_API size_t posenc_dtype_size(posenc_dtype dtype);

/* Returns a short static name ("f32", "f16", "i32", "i64"), or "?" for an unknown value. */
POSENC_API const char *posenc_dtype_name(posenc_dtype dtype);

typedef struct posenc_context posenc_context;
typedef struct posenc_buffer posenc_buffer;

/*
 * A strided view of a buffer, like a ggml tensor.
 *
 *   element (i0, i1, i2, i3) lives at byte  offset + i0*nb[0] + i1*nb[1] + i2*nb[2] + i3*nb[3]
 *   of `buffer`, for 0 <= ik < ne[k].
 *
 * ne[k] >= 0 (a tensor with any ne[k] == 0 is empty and every op on it is a no-op that
 * returns POSENC_OK). nb[k] are in bytes and must be multiples of the element size, as
 * must `offset`; the whole view must lie inside the buffer. Output tensors must not
 * overlap themselves (two elements at one address); ops say when an output may alias
 * an input.
 */
typedef struct posenc_tensor {
    posenc_buffer *buffer;
    size_t offset;      /* bytes from the start of the buffer to element (0,0,0,0) */
    posenc_dtype dtype;
    int64_t ne[4];      /* number of elements per dimension, innermost first */
    int64_t nb[4];      /* stride in bytes per dimension */
} posenc_tensor;

/*
 * A contiguous tensor of shape ne0 x ne1 x ne2 x ne3 at `offset` in `buffer`
 * (nb[0] = element size, nb[k] = nb[k-1]*ne[k-1]). Pass 1 for unused dimensions.
 * Returns the tensor by value; it checks nothing (the op that uses it does).
 */
POSENC_API posenc_tensor posenc_tensor_contiguous(posenc_buffer *buffer, size_t offset,
                                                  posenc_dtype dtype, int64_t ne0, int64_t ne1,
                                                  int64_t ne2, int64_t ne3);

/* Returns the number of elements of a tensor (product of ne), or -1 if it overflows
 * int64, t is NULL or an ne is negative. */
POSENC_API int64_t posenc_tensor_nelements(const posenc_tensor *t);

/* ------------------------------------------------------------------------------------ */
/* f16 helpers (round to nearest even; NaN and infinities kept)                          */
/* ------------------------------------------------------------------------------------ */

/* Returns the f16 bits nearest to `value` (ties to even; overflow gives infinity). */
POSENC_API uint16_t posenc_f32_to_f16(float value);
/* Returns the f32 value of the f16 `bits` (exact). */
POSENC_API float posenc_f16_to_f32(uint16_t bits);

/* ------------------------------------------------------------------------------------ */
/* Contexts                                                                             */
/* ------------------------------------------------------------------------------------ */

typedef enum posenc_backend_kind {
    /* A real GPU if there is one (Vulkan first, then OpenCL), else the CPU backend.
     * CPU-emulated devices (lavapipe, PoCL) are never chosen by AUTO: the CPU backend is
     * faster than they are. */
    POSENC_BACKEND_AUTO = 0,
    /* The host CPU; always available. Threaded, vectorisable loops (see n_threads in
     * posenc_context_params); POSENC_CONTEXT_CPU_REFERENCE selects the plain reference
     * loops every backend is verified against. */
    POSENC_BACKEND_CPU = 1,
    POSENC_BACKEND_OPENCL = 2, /* OpenCL 1.2 or later through the ICD loader */
    POSENC_BACKEND_VULKAN = 3  /* Vulkan 1.1 or later through the loader */
} posenc_backend_kind;

#define POSENC_BACKEND_COUNT 4

/* Returns "auto", "cpu", "opencl", "vulkan", or "?" for an unknown value (static). */
POSENC_API const char *posenc_backend_name(posenc_backend_kind kind);

typedef enum posenc_log_level {
    POSENC_LOG_ERROR = 0, /* a call failed; the same text as posenc_context_last_error() */
    POSENC_LOG_WARN = 1,  /* something the user should know: a fallback, a driver or
                           * validation-layer message */
    POSENC_LOG_INFO = 2,  /* backend and device chosen, programs built */
    POSENC_LOG_DEBUG = 3
} posenc_log_level;

/* Receives log messages. Called on the thread that made the posenc call (driver
 * callbacks such as Vulkan validation may call it from the driver's thread). `message`
 * is only valid during the call. */
typedef void (*posenc_log_fn)(posenc_log_level level, const char *message, void *user_data);

/* Context flags (bitwise OR). */
enum {
    /* Enable the backend's debug checking: on Vulkan, VK_LAYER_KHRONOS_validation with
     * every message forwarded to the log callback as POSENC_LOG_WARN, prefixed
     * "vulkan validation: ". If the layer is not installed, a WARN message says so. */
    POSENC_CONTEXT_DEBUG = 1u << 0,
    /* CPU backend only: run the reference loops (one thread; angles, sin/cos and sums in
     * double, one rounding at the end) instead of the fast threaded path. The test
     * suites and `posenc verify` compare every backend, the fast CPU path included,
     * against a context created with this flag. Ignored by the other backends. */
    POSENC_CONTEXT_CPU_REFERENCE = 1u << 1
};

/*
 * Context creation parameters. The all-zero value (or NULL) means defaults.
 *
 * Environment overrides, read at creation: POSENC_BACKEND=auto|cpu|opencl|vulkan replaces
 * `backend` when `backend` is AUTO; POSENC_DEVICE=N replaces `device` when `device` is 0.
 * POSENC_DEBUG=1 adds POSENC_CONTEXT_DEBUG.
 */
struct posenc_context_params {
    posenc_backend_kind backend; /* AUTO (0): see posenc_backend_kind */
    /* Device index within the backend: for OpenCL, devices counted over all platforms in
     * platform order; for Vulkan, the physical device index. 0 = first. With AUTO, the
     * index among that backend's GPU devices. */
    int32_t device;
    uint32_t flags;              /* POSENC_CONTEXT_* */
    posenc_log_fn log_fn;        /* NULL: no logging */
    posenc_log_level log_level;  /* messages up to this level are sent (0 = errors only) */
    void *log_user_data;
    /* CPU: worker threads of the fast path, 0 = all online cores (at most 1024; the
     * calling thread is one of them). After a threaded op the workers, and the calling
     * thread while it waits for them, spin up to 100 us before they sleep, so that the
     * next op starts without a wake-up: on cores shared with other busy threads, ask for
     * fewer. Ignored by the reference loops and the other backends. */
    int32_t n_threads;
    uint32_t reserved[7];        /* must be zero */
};

/*
 * Create a context. `params` may be NULL (all defaults). On failure *out_ctx is set to
 * NULL; the reason is logged through params->log_fn (as POSENC_LOG_ERROR) and, when
 * `out_error` is not NULL, copied into out_error[0 .. error_size-1] (NUL-terminated).
 *
 * Returns POSENC_ERR_UNAVAILABLE when the requested backend is not compiled in, its
 * library cannot be loaded (the OpenCL ICD loader or the Vulkan loader, opened on first
 * use: the message names the files tried and the environment variable that points at
 * another one, see docs/loading.md) or has no usable device (forced backends never fall
 * back), POSENC_ERR_INVALID_ARGUMENT for a bad
 * params field (device index past the last device, unknown backend, reserved not zero),
 * POSENC_ERR_OUT_OF_MEMORY or POSENC_ERR_BACKEND.
 */
POSENC_API posenc_status posenc_context_create(const struct posenc_context_params *params,
                                               posenc_context **out_ctx, char *out_error,
                                               size_t error_size);

/* Wait for queued work, free everything the context owns and set *ctx to NULL.
 * All buffers of the context should have been destroyed first. Buffers still alive are
 * a usage error (logged as POSENC_LOG_ERROR): their device memory is released with the
 * context, and their handles then accept only posenc_buffer_destroy (every other call
 * returns POSENC_ERR_INVALID_ARGUMENT). On a host-owned device only posenc's own objects
 * and references go (see posenc_context_create_from_host). Returns nothing; errors of
 * the final wait are dropped (the device is going away). */
POSENC_API void posenc_context_destroy(posenc_context **ctx);

/*
 * Check-only mode: ask whether calls would be accepted without running them (what a
 * runtime's "supports this op?" query needs, e.g. ggml's supports_op). While `enable` is
 * nonzero, every op on ctx checks its arguments, views, dtypes, params and the device's
 * limits (posenc_device_info.max_binding_size: how it would cut the op into launches)
 * exactly as it does when it runs, and returns the status it would return -- then stops:
 * it reads nothing back, allocates no device memory, queues nothing and writes nothing.
 * Tensors may have buffer = NULL in this mode: the view is then checked without a buffer
 * to bound it (offsets and strides still count for the overlap rules, all NULL-buffer
 * views being in one address space). What depends on data is not checked: positions of
 * posenc_learned (OUT_OF_RANGE), row indices of posenc_set_rows, the sequence length
 * DYNAMIC_NTK / LONGROPE read from the positions, the values of freq_factors_tensor; nor
 * the device limits of posenc_attention past its argument checks, posenc_sincos_2d past
 * its own. Buffer calls (create, write, read) and posenc_context_finish are not affected.
 * Returns POSENC_OK, or POSENC_ERR_INVALID_ARGUMENT for a NULL ctx.
 */
POSENC_API posenc_status posenc_context_set_check_only(posenc_context *ctx, int enable);

/* Wait until every op queued on the context has finished. Returns POSENC_OK,
 * POSENC_ERR_INVALID_ARGUMENT for a NULL ctx, or POSENC_ERR_BACKEND when queued work
 * failed (see "Execution"). On an OpenCL CPU device (PoCL) the calling thread first asks
 * the last command's status in a loop that yields the core, for up to 2 ms, then blocks:
 * a thread asleep in clFinish is woken tens of microseconds after the work ends. */
POSENC_API posenc_status posenc_context_finish(posenc_context *ctx);

/* Start the work queued on the context without waiting for it: on Vulkan, submit the ops
 * recorded since the last submission (posenc otherwise submits them when 32 have
 * accumulated, or when a call must wait); on OpenCL, clFlush; on the CPU backend nothing
 * is ever queued. Call it before the host does something else for a while, so the device
 * is not idle meanwhile. Returns POSENC_OK, POSENC_ERR_INVALID_ARGUMENT for a NULL ctx,
 * or POSENC_ERR_BACKEND when the submission failed. */
POSENC_API posenc_status posenc_context_flush(posenc_context *ctx);

/* The message of the last failed call on `ctx` (or on one of its buffers): the argument
 * or native call and the value. Returns "" when the last call succeeded, "ctx is NULL"
 * for a NULL ctx; never NULL. Valid until the next call on the context. */
POSENC_API const char *posenc_context_last_error(const posenc_context *ctx);

/* The message of the last failed posenc call on the calling thread, with or without a
 * context (see "Errors"): e.g. after posenc_rope_freqs returned INVALID_ARGUMENT,
 * "params->scaling.factor = -2 must be finite and > 0 (0 = 1)". Thread-local; not cleared by
 * calls that succeed; "" before any failure on this thread; never NULL. Valid until the
 * next posenc call on this thread. */
POSENC_API const char *posenc_last_error(void);

typedef enum posenc_device_type {
    POSENC_DEVICE_OTHER = 0,
    POSENC_DEVICE_DISCRETE_GPU = 1,
    POSENC_DEVICE_INTEGRATED_GPU = 2,
    POSENC_DEVICE_CPU = 3 /* the host, or a CPU-emulated device (PoCL, lavapipe) */
} posenc_device_type;

/* What a context runs on. Strings are NUL-terminated and truncated to fit. */
struct posenc_device_info {
    posenc_backend_kind backend;
    posenc_device_type type;
    int32_t device_index;
    char device_name[128];      /* "llvmpipe (LLVM 15.0.6, 256 bits)", "pthread-haswell-..." */
    char vendor[64];
    char driver_version[64];
    char api_version[64];       /* "OpenCL 3.0 PoCL ...", "Vulkan 1.3.230", "C11" */
    int f16_storage;            /* 1 if f16 tensors are supported (always 1 in posenc) */
    int f16_native;             /* 1 if the device loads/stores 16-bit values natively
                                 * (cl_khr_fp16, storageBuffer16BitAccess); posenc
                                 * converts in its kernels when 0 */
    uint64_t max_buffer_size;   /* largest single buffer, bytes */
    /* The most bytes one tensor view may span in one launch, 0 = no limit below
     * max_buffer_size (Vulkan: maxStorageBufferRange less the offset alignment; OpenCL:
     * CL_DEVICE_MAX_MEM_ALLOC_SIZE; lowered by POSENC_MAX_BINDING). posenc cuts copy,
     * sinusoidal, RoPE, learned, ALiBi and relative-bias ops over larger views into
     * several launches along their outer dimensions and runs attention's queries in
     * blocks; what cannot be cut that way (one row over the limit; learned and
     * relative-bias backward, resize_2d) returns POSENC_ERR_UNSUPPORTED naming the
     * limit. */
    uint64_t max_binding_size;
    uint32_t max_workgroup_size;
    uint32_t compute_units;     /* compute units / host threads */
};

/* Fill *out_info with what `ctx` runs on. Returns POSENC_OK, or
 * POSENC_ERR_INVALID_ARGUMENT for a NULL ctx or out_info. */
POSENC_API posenc_status posenc_context_get_info(const posenc_context *ctx,
                                                 struct posenc_device_info *out_info);

/*
 * Count the devices `backend` (CPU, OPENCL or VULKAN, not AUTO) can open, without
 * creating a context. On POSENC_ERR_UNAVAILABLE, `out_reason` (if not NULL) receives the
 * driver's reason. The CPU backend has exactly one device.
 * Returns POSENC_OK (*out_count >= 1), POSENC_ERR_UNAVAILABLE (not compiled in, its
 * library cannot be loaded -- the reason names it, as for posenc_context_create() --, no
 * driver or no device; *out_count = 0), POSENC_ERR_INVALID_ARGUMENT for a NULL out_count
 * or a backend that is not CPU, OPENCL or VULKAN, or POSENC_ERR_OUT_OF_MEMORY.
 */
POSENC_API posenc_status posenc_backend_device_count(posenc_backend_kind backend,
                                                     int32_t *out_count, char *out_reason,
                                                     size_t reason_size);

/* ------------------------------------------------------------------------------------ */
/* Buffers                                                                              */
/* ------------------------------------------------------------------------------------ */

/* Allocate `size` bytes (> 0) of device memory. Contents are undefined until written.
 * A buffer may be larger than one launch can address (max_binding_size in
 * posenc_device_info); ops cut their work to fit. In host memory (the CPU backend, and
 * OpenCL CPU devices such as PoCL) a buffer of 2 MiB or more starts on a 2 MiB boundary,
 * takes its size rounded up to a multiple of 2 MiB, and on Linux is asked for transparent
 * huge pages (madvise): fewer TLB misses for ops that read many pages at once.
 * Returns POSENC_OK, POSENC_ERR_INVALID_ARGUMENT (NULL ctx / out_buffer, size 0),
 * POSENC_ERR_UNSUPPORTED (larger than the device's largest buffer), POSENC_ERR_OUT_OF_MEMORY
 * or POSENC_ERR_BACKEND; on failure *out_buffer is NULL. */
POSENC_API posenc_status posenc_buffer_create(posenc_context *ctx, size_t size,
                                              posenc_buffer **out_buffer);

/* Free a buffer (after queued work that uses it has finished) and set *buffer to NULL.
 * A wrapped buffer (posenc_buffer_wrap_*) releases only posenc's handle and reference.
 * Returns nothing. */
POSENC_API void posenc_buffer_destroy(posenc_buffer **buffer);

/* Returns the size in bytes given at creation (wrapped: the size wrapped; 0 for NULL). */
POSENC_API size_t posenc_buffer_size(const posenc_buffer *buffer);

/* Returns the context that owns `buffer` (NULL for NULL, and for a buffer whose context
 * was destroyed first). */
POSENC_API posenc_context *posenc_buffer_context(const posenc_buffer *buffer);

/* Copy `size` bytes from host memory `src` into the buffer at byte `offset`. Ordered
 * after the ops queued before it. [offset, offset+size) must lie inside the buffer.
 * `src` may be freed or reused as soon as the call returns. Returns POSENC_OK,
 * POSENC_ERR_INVALID_ARGUMENT (NULL buffer or src, a range past the end, a buffer whose
 * context was destroyed), POSENC_ERR_OUT_OF_MEMORY or POSENC_ERR_BACKEND. */
POSENC_API posenc_status posenc_buffer_write(posenc_buffer *buffer, size_t offset,
                                             const void *src, size_t size);

/* Wait for queued work, then copy `size` bytes at byte `offset` into host memory `dst`.
 * Returns as posenc_buffer_write (with `dst`); POSENC_ERR_BACKEND also reports a failure
 * of earlier queued work. */
POSENC_API posenc_status posenc_buffer_read(posenc_buffer *buffer, size_t offset, void *dst,
                                            size_t size);

/* ------------------------------------------------------------------------------------ */
/* Sharing a device with the host application (host-owned devices and buffers)          */
/* ------------------------------------------------------------------------------------ */

/*
 * A device the application created and keeps owning: an OpenCL context and command
 * queue, or a Vulkan instance, physical device, device and queue. posenc_context_create_
 * from_host() runs posenc on it, and posenc_buffer_wrap_opencl() / _vulkan() turn the
 * application's own cl_mem / VkBuffer into posenc buffers without a copy.
 *
 * Handles are passed without the OpenCL / Vulkan headers: dispatchable handles
 * (cl_context, cl_command_queue, cl_mem, VkInstance, VkPhysicalDevice, VkDevice, VkQueue)
 * as void *, Vulkan's non-dispatchable VkBuffer as uint64_t (64 bits on every platform).
 * The handles must come from the OpenCL ICD loader / Vulkan loader posenc is linked
 * against (libOpenCL, libvulkan), not from a driver loaded privately.
 *
 * Ownership. posenc never destroys a host object. OpenCL: posenc retains the cl_context
 * and the queue while its context lives (clRetain* at creation, clRelease* in
 * posenc_context_destroy), and a wrapped cl_mem while its posenc buffer lives, so the
 * application's own references are never consumed and it may release them whenever it
 * likes. Vulkan has no reference counts: the application must keep the instance, device
 * and queue alive until posenc_context_destroy() has returned, and a wrapped VkBuffer (and
 * its memory) until posenc_buffer_destroy() has returned. On the host's VkDevice posenc
 * creates, and destroys in posenc_context_destroy, only its own objects: a command pool
 * and 8 command buffers, 8 fences, descriptor set layout and pools, pipeline layout,
 * pipeline cache, pipelines, and its own buffers and memory (staging, small tables, every
 * posenc_buffer_create buffer).
 *
 * Synchronisation (what posenc waits for, what the application must do):
 *   - posenc enqueues all its work on the given queue, in call order. It never uses
 *     another queue, and returns before the work has finished, as on its own devices.
 *   - OpenCL: the queue must be in order (posenc refuses an out-of-order queue). Commands
 *     the application enqueues on the same queue are therefore ordered with posenc's, in
 *     enqueue order, in both directions: nothing else is needed. Work on other queues
 *     needs the application's own clFinish / events before (or after) the posenc call.
 *     posenc_context_finish() and posenc_buffer_read() wait for the whole queue (clFinish
 *     / a blocking read), the application's commands included.
 *   - Vulkan: every posenc submission starts with a pipeline barrier whose first scope is
 *     all commands and all memory writes submitted earlier on the queue, and ends with one
 *     whose second scope is all commands and memory accesses submitted later on the
 *     queue, and host reads. So work the application submits on the same queue before a
 *     posenc call is complete and visible to posenc, and work it submits after sees
 *     posenc's results, with no barrier or semaphore of its own. Work on other queues
 *     needs the application's own semaphores or fences. Memory the application writes
 *     from the host (a mapped buffer) is seen by posenc calls made after the write.
 *     posenc_context_finish() waits for posenc's last submission and, through it, for
 *     everything submitted on the queue before it (not for later submissions). On such a
 *     context every op is submitted before its call returns (posenc's own contexts batch
 *     up to 32), without waiting for earlier ones, so the rule above holds per call.
 *   - Vulkan's external-synchronisation rule: vkQueueSubmit needs exclusive access to the
 *     queue, so no other thread may use the queue (submit, wait idle, present) while a
 *     posenc call on this context runs. posenc never calls vkDeviceWaitIdle on a host
 *     device.
 *   - Device errors of queued work (a lost device) are reported by a later call on the
 *     context, as for every context (see "Execution").
 */
struct posenc_host_device {
    /* POSENC_BACKEND_OPENCL or POSENC_BACKEND_VULKAN. AUTO (0, the zero value) and CPU are
     * refused: the zero struct is invalid. */
    posenc_backend_kind backend;
    /* OPENCL: a cl_context and an in-order cl_command_queue of that context (any device
     * of it, OpenCL 1.2 or later with an online compiler). posenc takes the device from
     * CL_QUEUE_DEVICE. Profiling may be enabled. Must be NULL for VULKAN. */
    void *cl_context;
    void *cl_queue;
    /* VULKAN: an instance created with apiVersion >= 1.1, one of its physical devices
     * (Vulkan 1.1 or later), a VkDevice created on it, and a VkQueue of that device from
     * queue family vk_queue_family, which must support compute. posenc needs no optional
     * feature or extension on the device (the application must have enabled
     * VK_KHR_portability_subset if the device lists it, as the spec requires). Must be
     * NULL for OPENCL. */
    void *vk_instance;
    void *vk_physical_device;
    void *vk_device;
    void *vk_queue;
    uint32_t vk_queue_family;
    /* Must be zero. (Seven words before vk_get_instance_proc_addr took its share: the
     * struct keeps its size and every other offset on 32- and 64-bit targets.) */
    uint32_t reserved[7 - sizeof(void (*)(void)) / sizeof(uint32_t)];
    /* VULKAN, optional: the application's vkGetInstanceProcAddr, cast to this type
     * (`(void (*)(void))vkGetInstanceProcAddr`, or what the application's own loader
     * returned). posenc then takes every Vulkan function of this context from it (device
     * functions through the vkGetDeviceProcAddr it returns), so it calls the loader and
     * layers the application uses and needs no Vulkan loader of its own. NULL: posenc
     * opens the Vulkan loader itself on first use (docs/loading.md). Must be NULL for
     * OPENCL. */
    void (*vk_get_instance_proc_addr)(void);
};

/*
 * Create a context on a device the application owns (see struct posenc_host_device).
 * `params` works as for posenc_context_create(), except: params->backend must be AUTO or
 * host->backend, params->device must be 0, and the POSENC_BACKEND / POSENC_DEVICE
 * environment variables are ignored (POSENC_DEBUG still applies). The context's device_index
 * (posenc_context_get_info) is -1. POSENC_CONTEXT_DEBUG on Vulkan adds no layer and no
 * messenger: posenc cannot change the application's instance, and creating a debug
 * messenger on it would need VK_EXT_debug_utils, which posenc cannot know is enabled;
 * enable validation on your own instance instead (posenc logs an INFO line saying so).
 * On failure *out_ctx is NULL, nothing of the host's was changed, and the message goes to
 * params->log_fn and out_error as in posenc_context_create().
 *
 * Returns POSENC_ERR_INVALID_ARGUMENT for a NULL host / out_ctx, a NULL or mismatched
 * handle (a queue of another cl_context, a physical device not of vk_instance, a queue
 * family out of range or without compute), an out-of-order OpenCL queue, a field of the
 * other backend set, reserved not zero, or a bad params field; POSENC_ERR_UNSUPPORTED for
 * host->backend CPU; POSENC_ERR_UNAVAILABLE when the backend is not compiled in, its
 * library cannot be loaded (OpenCL; Vulkan without vk_get_instance_proc_addr), a Vulkan
 * 1.1 function cannot be had through the instance or device, or the device is too old
 * (OpenCL < 1.2, no compiler, Vulkan < 1.1); POSENC_ERR_OUT_OF_MEMORY
 * or POSENC_ERR_BACKEND.
 */
POSENC_API posenc_status posenc_context_create_from_host(
    const struct posenc_context_params *params, const struct posenc_host_device *host,
    posenc_context **out_ctx, char *out_error, size_t error_size);

/*
 * Wrap the application's cl_mem as a posenc buffer of CL_MEM_SIZE bytes, without copying.
 * ctx must come from posenc_context_create_from_host() on OpenCL, and cl_mem must be a
 * buffer (or sub-buffer) of ctx's cl_context (CL_MEM_CONTEXT), created without
 * CL_MEM_READ_ONLY / CL_MEM_WRITE_ONLY / CL_MEM_HOST_* access restrictions (posenc's
 * kernels read and write it, posenc_buffer_read / _write and some ops access it from the
 * host). posenc retains it (clRetainMemObject); posenc_buffer_destroy() releases that one
 * reference and nothing else. The application may keep using the cl_mem meanwhile, with
 * the ordering rules above. On failure *out_buffer is NULL.
 *
 * Returns POSENC_ERR_INVALID_ARGUMENT for a NULL argument, a context that is not a
 * host-owned OpenCL context, a handle that is not a cl_mem buffer, a cl_mem of another
 * cl_context or with restricted access flags; POSENC_ERR_OUT_OF_MEMORY or
 * POSENC_ERR_BACKEND.
 */
POSENC_API posenc_status posenc_buffer_wrap_opencl(posenc_context *ctx, void *cl_mem,
                                                   posenc_buffer **out_buffer);

/*
 * Wrap the application's VkBuffer (already bound to memory) as a posenc buffer of `size`
 * bytes, without copying. ctx must come from posenc_context_create_from_host() on Vulkan
 * and vk_buffer must belong to its VkDevice, created with at least the usage
 * STORAGE_BUFFER | TRANSFER_SRC | TRANSFER_DST (posenc binds it to its shaders and copies
 * to and from it) and sharing mode EXCLUSIVE owned by vk_queue_family (or CONCURRENT
 * including it). size > 0, a multiple of 4 (posenc's shaders access f16 data as 32-bit
 * words), at most the VkBuffer's own size (it may be larger than one binding: ops cut
 * their work to fit max_binding_size, as for posenc's own buffers).
 * posenc never maps it: posenc_buffer_write / _read go through posenc's host-visible
 * staging buffer and vkCmdCopyBuffer on the queue, whatever memory backs it.
 * posenc_buffer_destroy() waits for posenc's work that may use it and frees only posenc's
 * handle; the application then destroys the VkBuffer and its memory itself. On failure
 * *out_buffer is NULL.
 *
 * Returns POSENC_ERR_INVALID_ARGUMENT for a NULL argument or VK_NULL_HANDLE, a context
 * that is not a host-owned Vulkan context, a size of 0, not a multiple of 4, larger than
 * the buffer's memory requirements or than size_t; POSENC_ERR_OUT_OF_MEMORY.
 */
POSENC_API posenc_status posenc_buffer_wrap_vulkan(posenc_context *ctx, uint64_t vk_buffer,
                                                   uint64_t size, posenc_buffer **out_buffer);

/*
 * Recording posenc ops into the application's own VkCommandBuffer (host-owned Vulkan
 * contexts). Between posenc_vulkan_record_begin(ctx, cmd) and posenc_vulkan_record_end()
 * every op on ctx records its dispatches, and the barriers they need, into `cmd` instead
 * of posenc's own command buffers; posenc never submits `cmd` and never waits for it. The
 * application began `cmd` (primary, of a pool of ctx's queue family, or of any family
 * with compute when it knows what it does), ends it, submits it on a queue of that
 * device and waits for it.
 *
 *   posenc_vulkan_record_begin(ctx, cmd);
 *   posenc_rope(ctx, ...);  posenc_attention(ctx, ...);      // recorded, not run
 *   posenc_vulkan_record_end(ctx, &rec);
 *   vkEndCommandBuffer(cmd); vkQueueSubmit(queue, ..., fence); vkWaitForFences(...fence);
 *   posenc_vulkan_recording_destroy(&rec);                   // after the fence
 *
 * Barriers: record_begin records one pipeline barrier from every earlier command and
 * memory write (ALL_COMMANDS, MEMORY_WRITE) to posenc's compute and transfer reads and
 * writes, so the application's earlier commands in `cmd`, and its earlier submissions on
 * the queue, are complete and visible to the ops. Between two recorded ops posenc records
 * a compute barrier only where the later one reads or writes a buffer range an earlier
 * one wrote, or writes one it read. record_end records one barrier from posenc's shader
 * and transfer writes to every later command (ALL_COMMANDS, MEMORY_READ | MEMORY_WRITE)
 * and to host reads, so later commands in `cmd` and later submissions see the results,
 * and a mapped buffer can be read once the application's fence has signalled.
 *
 * Lifetimes: the descriptor sets and host-visible tables posenc allocates for the
 * recorded ops belong to the posenc_vulkan_recording that record_end returns; destroy it
 * only after the application's submission of `cmd` has completed (or `cmd` was reset or
 * freed without being submitted), and before posenc_context_destroy (which otherwise
 * frees what it holds, logs an error and leaves the handle for _destroy to free). posenc
 * buffers used by recorded ops, and wrapped VkBuffers, must stay alive until then too.
 * The recorded commands may be submitted once: the tables hold the arguments of the calls
 * that recorded them.
 *
 * While recording, posenc_buffer_write, posenc_buffer_read and every op that needs a
 * read-back of a tensor's values (posenc_learned's positions, RoPE's seq_len = 0 with
 * DYNAMIC_NTK / LONGROPE, ops that check index tensors on the host) return
 * POSENC_ERR_UNSUPPORTED and record nothing; write inputs before record_begin.
 * (posenc_attention's implicit positions, q_pos / k_pos NULL, are made on the device and
 * record like any op.) posenc_context_finish and posenc_context_flush still work on
 * posenc's own earlier submissions. Only one thread may use ctx at a time, as always;
 * `cmd` is externally synchronised by the application (no other thread may record into it
 * meanwhile). Several recordings may be outstanding at once (in one command buffer or
 * several); each is destroyed on its own, in any order.
 */
typedef struct posenc_vulkan_recording posenc_vulkan_recording;

/* Start recording ctx's ops into `vk_command_buffer` (a VkCommandBuffer in the recording
 * state). posenc's own earlier work is submitted first (without waiting), so it comes
 * before the application's submission on the queue. Returns POSENC_OK, or
 * POSENC_ERR_INVALID_ARGUMENT for a NULL ctx or vk_command_buffer, a context that is not a
 * host-owned Vulkan context, or one already recording; POSENC_ERR_OUT_OF_MEMORY or
 * POSENC_ERR_BACKEND. */
POSENC_API posenc_status posenc_vulkan_record_begin(posenc_context *ctx, void *vk_command_buffer);

/* Stop recording (records the end barrier described above) and hand back what the
 * recorded ops hold in *out_recording, to be destroyed after the application's submission
 * completed. Returns POSENC_OK, or POSENC_ERR_INVALID_ARGUMENT for a NULL ctx or
 * out_recording, or a context that is not recording; on failure *out_recording is NULL
 * (when out_recording is not NULL). */
POSENC_API posenc_status posenc_vulkan_record_end(posenc_context *ctx,
                                                  posenc_vulkan_recording **out_recording);

/* Free what a recording holds (see the lifetime rules above) and set *recording to NULL.
 * Accepts NULL and &NULL. Returns nothing. */
POSENC_API void posenc_vulkan_recording_destroy(posenc_vulkan_recording **recording);

/* ------------------------------------------------------------------------------------ */
/* The application's host memory as a buffer (zero copy)                                */
/* ------------------------------------------------------------------------------------ */

/*
 * Wrap `size` bytes of the caller's host memory at `ptr` as a posenc buffer, without
 * copying: ops on its tensors read and write that memory itself (what a CPU runtime such
 * as ggml's needs to run posenc ops on its own tensors). Works on any context (posenc's
 * own or host-owned) of:
 *   - the CPU backend: the buffer's memory is `ptr` itself;
 *   - OpenCL on a device that shares the host's memory: a CPU device (PoCL) or one with
 *     CL_DEVICE_HOST_UNIFIED_MEMORY. posenc creates a CL_MEM_USE_HOST_PTR buffer on it.
 *     On other OpenCL devices (a discrete GPU) it returns POSENC_ERR_UNSUPPORTED: every
 *     kernel access would cross the bus or the driver would keep a copy; use
 *     posenc_buffer_create and posenc_buffer_write / _read there.
 *   - Vulkan: not available (POSENC_ERR_UNSUPPORTED); use posenc_buffer_wrap_vulkan.
 * `ptr` must be a multiple of posenc_buffer_host_alignment() bytes (CPU: 8, the largest
 * element, so that every element of every dtype is naturally aligned; OpenCL: the
 * device's CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes, 128 on PoCL), and [ptr, ptr + size)
 * must not wrap around the address space. Tensor offsets and strides are then checked as
 * on any buffer (multiples of the element size, inside `size`).
 *
 * When the host may touch the memory. posenc never frees it, and the caller must keep it
 * allocated until posenc_buffer_destroy() has returned. The host may read and write it
 * directly (not through posenc):
 *   - CPU backend: between posenc calls (every op finishes before it returns);
 *   - OpenCL: from the wrap until the next posenc call on the context that uses the
 *     device's memory (any op, posenc_buffer_write / _read on any buffer of the context),
 *     and again after each posenc_context_finish() that returns POSENC_OK, until the next
 *     such call. The OpenCL spec defines host access to a CL_MEM_USE_HOST_PTR buffer
 *     only while it is mapped: posenc maps every wrapped host buffer of the context
 *     (clEnqueueMapBuffer, read + write, the whole buffer, complete before the call
 *     returns) when it is wrapped and in posenc_context_finish(), and unmaps it before it
 *     queues its next command. On a CPU device neither copies anything. (The map at the
 *     wrap waits for the commands already on the queue: the application's too, on a
 *     host-owned queue.) Waiting for an op's event (posenc_opencl_last_event) does not
 *     give the memory back to the host: call posenc_context_finish().
 * posenc_buffer_write / _read work on it as on any buffer. posenc_buffer_destroy() waits
 * for posenc's queued work (OpenCL: the whole queue, and the memory then holds the
 * buffer's final contents) and releases only posenc's handle; the memory is the caller's
 * again, never touched by posenc afterwards. posenc never caches what it reads from a
 * wrapped buffer (e.g. RoPE freq_factors): it may change behind posenc's back.
 * On failure *out_buffer is NULL.
 *
 * Returns POSENC_OK, POSENC_ERR_INVALID_ARGUMENT (NULL ctx / ptr / out_buffer, size 0, ptr
 * not a multiple of the alignment, a range that wraps around), POSENC_ERR_UNSUPPORTED
 * (Vulkan, an OpenCL device that does not share the host's memory, larger than the
 * device's largest buffer), POSENC_ERR_OUT_OF_MEMORY or POSENC_ERR_BACKEND.
 */
POSENC_API posenc_status posenc_buffer_wrap_host(posenc_context *ctx, void *ptr, size_t size,
                                                 posenc_buffer **out_buffer);

/* The alignment in bytes posenc_buffer_wrap_host() needs of `ptr` on ctx's device (a power
 * of two). Returns POSENC_OK, POSENC_ERR_INVALID_ARGUMENT (NULL ctx / out_alignment) or
 * POSENC_ERR_UNSUPPORTED (the device cannot wrap host memory; *out_alignment = 0 and the
 * message says why). */
POSENC_API posenc_status posenc_buffer_host_alignment(posenc_context *ctx,
                                                      size_t *out_alignment);

/* ------------------------------------------------------------------------------------ */
/* OpenCL events                                                                        */
/* ------------------------------------------------------------------------------------ */

/*
 * For an OpenCL context (posenc's own or host-owned): an event that completes when every
 * command posenc has enqueued on the context so far has completed -- the cl_event of
 * posenc's last command (the queue is in order, so that command completes after every
 * earlier one; the application's commands enqueued after it on a host-owned queue are
 * not waited for). After an op, it is the op's last kernel (or CLBlast GEMM), so a
 * runtime waits for one op (clWaitForEvents) or makes work on another queue of the same
 * cl_context depend on it, without finishing the queue. An op that enqueued nothing (an
 * empty tensor, check-only mode) leaves it at the previous command; before posenc's first
 * command it is a marker (clEnqueueMarkerWithWaitList) enqueued now. The call flushes the
 * queue (clFlush), as OpenCL requires for an event another queue waits on.
 * *out_cl_event is a cl_event (as void *) that posenc retained for the caller: release it
 * with clReleaseEvent. It belongs to ctx's cl_context (for a context posenc created, read
 * it with clGetEventInfo(CL_EVENT_CONTEXT)). It says when posenc's device work is done; it
 * does not give wrapped host memory back to the host (see posenc_buffer_wrap_host).
 * Returns POSENC_OK, POSENC_ERR_INVALID_ARGUMENT (NULL ctx / out_cl_event),
 * POSENC_ERR_UNSUPPORTED (a CPU or Vulkan context) or POSENC_ERR_BACKEND; on failure
 * *out_cl_event is NULL.
 */
POSENC_API posenc_status posenc_opencl_last_event(posenc_context *ctx, void **out_cl_event);

/*
 * For an OpenCL context: make every command enqueued on ctx's queue after this call --
 * posenc's next ops, and on a host-owned queue the application's commands too -- wait
 * until the n_events events in cl_events (cl_event values as void *) have completed. It
 * enqueues one barrier now (clEnqueueBarrierWithWaitList; it becomes the last event, see
 * posenc_opencl_last_event), so the queue keeps its in-order semantics; posenc does not
 * keep the events (release yours whenever you like). Events must belong to ctx's
 * cl_context (any queue of it, or user events). n_events 0 does nothing.
 * A posenc call that waits for the device (posenc_context_finish, posenc_buffer_read /
 * _write, an op that reads back its arguments, posenc_buffer_wrap_host and the destroy of
 * such a buffer, posenc_context_destroy) blocks until the
 * events complete: set a user event complete from another thread or before such a call.
 * Returns POSENC_OK, POSENC_ERR_INVALID_ARGUMENT (NULL ctx, n_events < 0, cl_events NULL
 * with n_events > 0, a NULL element or one that is not an event of ctx's cl_context; the
 * message names cl_events[i]), POSENC_ERR_UNSUPPORTED (a CPU or Vulkan context) or
 * POSENC_ERR_BACKEND.
 */
POSENC_API posenc_status posenc_opencl_wait_events(posenc_context *ctx, int32_t n_events,
                                                   void *const *cl_events);

/* ------------------------------------------------------------------------------------ */
/* Copy and convert                                                                     */
/* ------------------------------------------------------------------------------------ */

/*
 * dst = src, element by element, on the device: src and dst have the same shape and
 * may differ in dtype and strides. f32 -> f16 rounds to nearest even (overflow gives
 * infinity, NaN stays NaN); f16 -> f32 and same-dtype copies are exact; I32 only to I32.
 * Use it to convert between f32 and f16, to make a strided view (a permuted or padded
 * tensor) contiguous, or to move a tensor inside / between buffers of one context.
 * dst must not overlap src unless it is exactly src (then nothing changes).
 * Returns POSENC_ERR_INVALID_ARGUMENT for different shapes, I32 with a float dtype, an
 * overlap or a bad view.
 */
POSENC_API posenc_status posenc_copy(posenc_context *ctx, const posenc_tensor *src,
                                     const posenc_tensor *dst);

/* ------------------------------------------------------------------------------------ */
/* Sinusoidal positional encoding (Vaswani et al. 2017)                                  */
/* ------------------------------------------------------------------------------------ */

typedef enum posenc_sin_layout {
    /* The paper: dst[2i] = sin(pos*w_i), dst[2i+1] = cos(pos*w_i). */
    POSENC_SIN_INTERLEAVED = 0,
    /* fairseq / tensor2tensor: dst[i] = sin(pos*w_i), dst[d/2+i] = cos(pos*w_i). */
    POSENC_SIN_HALF_SPLIT = 1,
    /* ggml timestep_embedding / diffusers flip_sin_to_cos: cos block, then sin block. */
    POSENC_SIN_HALF_SPLIT_COS_FIRST = 2
} posenc_sin_layout;

/*
 * Parameters of posenc_sinusoidal(). Zero means the default of each field.
 *
 * With d = dst->ne[0] and i in [0, d/2):  w_i = base ^ (-i / (d/2 - freq_shift)).
 * freq_shift = 0 is the paper's base^(-2i/d); freq_shift = 1 is fairseq / tensor2tensor /
 * diffusers' default (the last frequency is exactly 1/base).
 */
struct posenc_sinusoidal_params {
    float base;        /* 0 -> 10000. Must be finite and > 0 (1 gives w_i = 1). */
    float x_scale;     /* fused add only: y = x*x_scale + PE. 0 -> 1 (use e.g. sqrt(d) for
                        * the paper's embedding scaling). Must be finite. */
    float freq_shift;  /* 0 (paper) or any finite value < d/2 */
    posenc_sin_layout layout;
    uint32_t reserved[4]; /* must be zero */
};

/*
 * Sinusoidal encoding of the positions in `pos`, written to `dst`, or added to `x`.
 *
 *   dst  [d, T, B2, B3]   f32 or f16. d = dst->ne[0] must be even.
 *   pos  [T, P2, P3, 1]   I32 (token indices) or F32 (time stamps), with P2 in {1, B2}
 *                         and P3 in {1, B3} (broadcast over the batch dimensions).
 *   x    NULL: dst = PE(pos).  Otherwise the same shape as dst, f32 or f16:
 *        dst = x*x_scale + PE(pos). x may be exactly dst (in place).
 *
 * The frequencies are computed once on the host in double; every backend forms the
 * angle pos*w_i and its sin/cos within 4 * 2^-24 of exact for |pos*w_i| <= 2^24 (CPU: in
 * double; GPUs: from two f32 words per frequency, see "Accuracy of angles" above).
 * Returns POSENC_ERR_INVALID_ARGUMENT for bad shapes, dtypes, strides or params (a
 * frequency outside the f32 range included).
 */
POSENC_API posenc_status posenc_sinusoidal(posenc_context *ctx, const posenc_tensor *x,
                                           const posenc_tensor *pos, const posenc_tensor *dst,
                                           const struct posenc_sinusoidal_params *params);

/*
 * The frequency table w_i (i < d/2) that posenc_sinusoidal uses, in double, written to
 * out_freq[0 .. d/2-1]. d must be even and >= 2. Returns POSENC_OK, or
 * POSENC_ERR_INVALID_ARGUMENT (bad d or params, NULL out_freq; nothing written).
 */
POSENC_API posenc_status posenc_sinusoidal_freqs(int64_t d,
                                                 const struct posenc_sinusoidal_params *params,
                                                 double *out_freq);

/* ------------------------------------------------------------------------------------ */
/* RoPE: rotary position embedding (Su et al. 2021) and its context-extension scalings   */
/* ------------------------------------------------------------------------------------ */

/*
 * Every RoPE variant is: for rotated pair j (0 <= j < n_dims/2) of a head,
 *
 *     angle_j = pos[stream_j] * w_j
 *     (y_a, y_b) = mscale * (x_a cos(angle_j) - x_b sin(angle_j),
 *                            x_a sin(angle_j) + x_b cos(angle_j))
 *
 * where (a, b) are the two dims of the pair (set by the mode), w_j is the per-pair
 * frequency after scaling, stream_j selects one of the token's position streams
 * (M-RoPE, vision) and mscale is the magnitude (attention) factor. posenc computes w_j,
 * stream_j and mscale once per call, on the host, in double (posenc_rope_freqs());
 * kernels only rotate. Dims outside the rotated window [n_offs, n_offs + n_dims) are
 * copied unchanged.
 */
typedef enum posenc_rope_mode {
    /* GPT-J, ggml mode 0 (NORMAL): pair j = dims (2j, 2j+1); one position stream. */
    POSENC_ROPE_NORMAL = 0,
    /* GPT-NeoX, HF rotate_half, ggml mode 2: pair j = dims (j, j + n_dims/2). */
    POSENC_ROPE_NEOX = 1,
    /* Qwen2-VL / Qwen2.5-VL M-RoPE, ggml mode 8: NeoX pairs; pairs are assigned to
     * position streams (t, h, w, extra) in contiguous sections of sections[0..3] pairs,
     * repeating if the sections cover fewer than n_dims/2 pairs. w_j = base^(-2j/n_dims). */
    POSENC_ROPE_MROPE = 2,
    /* Qwen3-VL interleaved M-RoPE, ggml mode 40: NeoX pairs; with sector = j % (sum of
     * sections), pair j uses stream 1 (h) when sector%3 == 1 and sector < 3*sections[1],
     * 2 (w) when sector%3 == 2 and sector < 3*sections[2], 0 (t) when sector%3 == 0 and
     * sector < 3*sections[0], else stream 3 (ggml's rule). */
    POSENC_ROPE_IMROPE = 3,
    /* 2-D vision RoPE (Qwen2-VL ViT, ggml mode 24): NeoX pairs over the whole window;
     * the first sections[0] pairs use stream 0, the next sections[1] pairs stream 1, and
     * the frequency index restarts in each section: w_j = base^(-2k/(n_dims/2)) with k
     * the pair's index inside its section. */
    POSENC_ROPE_VISION = 4
} posenc_rope_mode;

typedef enum posenc_rope_scaling_kind {
    POSENC_ROPE_SCALING_NONE = 0,        /* w_j = base^(-2j/n_dims) */
    POSENC_ROPE_SCALING_LINEAR = 1,      /* position interpolation: w_j / factor */
    POSENC_ROPE_SCALING_NTK = 2,         /* static NTK-aware: base * factor^(n/(n-2)) */
    /* HF "dynamic": with L = seq_len, if L > original_ctx the base becomes
     * base * (factor*L/original_ctx - (factor-1))^(n/(n-2)); at or below original_ctx
     * the original base is used. */
    POSENC_ROPE_SCALING_DYNAMIC_NTK = 3,
    /* YaRN as in the paper and HF: per-pair blend of w_j (extrapolation) and w_j/factor
     * (interpolation) by a linear ramp between the correction dims of beta_fast and
     * beta_slow over original_ctx, truncated to integers unless
     * POSENC_ROPE_YARN_NO_TRUNCATE (GPT-OSS); mscale = attention_factor, default
     * 0.1*ln(factor)+1, or the DeepSeek form from mscale / mscale_all_dim. */
    POSENC_ROPE_SCALING_YARN = 4,
    /* Llama 3.1 / 3.2: pairs with wavelength < original_ctx/high_freq_factor kept, those
     * with wavelength > original_ctx/low_freq_factor divided by factor, smooth between. */
    POSENC_ROPE_SCALING_LLAMA3 = 5,
    /* LongRoPE (Phi-3, Phi-4-mini): w_j / short_factor[j] when seq_len <= original_ctx,
     * w_j / long_factor[j] above; mscale = attention_factor, default
     * sqrt(1 + ln(factor)/ln(original_ctx)) (1 when factor <= 1). */
    POSENC_ROPE_SCALING_LONGROPE = 6,
    /* ggml's YaRN (ggml_rope_ext with ext_factor): freq_scale = 1/factor; the ramp uses
     * ggml's floor/ceil correction dims, blended by ext_factor; when ext_factor != 0
     * mscale *= 1 + 0.1*ln(factor). Matches ggml's CPU backend. */
    POSENC_ROPE_SCALING_GGML_YARN = 7
} posenc_rope_scaling_kind;

/* posenc_rope_scaling.flags */
enum {
    POSENC_ROPE_YARN_NO_TRUNCATE = 1u << 0 /* YaRN: keep fractional correction dims */
};

/* Frequency scaling. All-zero = no scaling. Fields not used by `kind` must be 0. */
struct posenc_rope_scaling {
    posenc_rope_scaling_kind kind;
    float factor;            /* s > 0 (LINEAR, NTK, DYNAMIC_NTK, YARN, LLAMA3, LONGROPE,
                              * GGML_YARN); 0 -> 1 */
    int32_t original_ctx;    /* original_max_position_embeddings (DYNAMIC_NTK, YARN, LLAMA3,
                              * LONGROPE, GGML_YARN): required > 0 for those kinds */
    /* DYNAMIC_NTK and LONGROPE: the current sequence length (largest position + 1).
     * 0 -> posenc reads the positions back from the device to find it (a host sync). */
    int32_t seq_len;
    float beta_fast;         /* YARN, GGML_YARN: 0 -> 32 */
    float beta_slow;         /* YARN, GGML_YARN: 0 -> 1 */
    float attention_factor;  /* YARN, LONGROPE: 0 -> the default formula above */
    float mscale;            /* YARN (DeepSeek): 0 -> unused */
    float mscale_all_dim;    /* YARN (DeepSeek): 0 -> unused */
    float ext_factor;        /* GGML_YARN: ggml's ext_factor (0 = pure interpolation) */
    float low_freq_factor;   /* LLAMA3: 0 -> 1 */
    float high_freq_factor;  /* LLAMA3: 0 -> 4 */
    const float *short_factor; /* LONGROPE: [n_dims/2] */
    const float *long_factor;  /* LONGROPE: [n_dims/2] */
    uint32_t flags;          /* POSENC_ROPE_YARN_* */
};

/* posenc_rope_params.flags */
enum {
    /* The backward pass: rotate by -angle (the transpose of the forward rotation), times
     * mscale, as ggml_rope_back. Applying it to the forward output restores x * mscale^2. */
    POSENC_ROPE_BACKWARD = 1u << 0
};

/* Parameters of the RoPE ops. All-zero (or NULL) = NORMAL mode over the whole head,
 * base 10000, no scaling. Pointers are read during the call only. */
struct posenc_rope_params {
    posenc_rope_mode mode;
    int32_t n_dims;          /* rotated dims, even, > 0; 0 -> head_dim - n_offs */
    int32_t n_offs;          /* first rotated dim (ggml n_offs); >= 0 */
    float freq_base;         /* 0 -> 10000; finite and > 0 */
    float attn_factor;       /* magnitude multiplier on top of the scaling's; 0 -> 1 */
    int32_t sections[4];     /* MROPE, IMROPE, VISION: pairs per stream */
    /* Optional [n_dims/2]: position stream of each pair (0..3). Replaces the mode's own
     * assignment (Pixtral, Llama 4 and other 2-D layouts). */
    const uint8_t *pair_stream;
    /* Optional [n_dims/2]: divide the base frequencies w_j by these before the scaling
     * kind is applied (ggml freq_factors, rope_freqs.weight). */
    const float *freq_factors;
    /* Optional [n_dims/2]: the frequencies themselves, replacing base, mode-specific
     * exponents and scaling (mscale then = attn_factor). */
    const float *freqs;
    struct posenc_rope_scaling scaling;
    uint32_t flags;          /* POSENC_ROPE_* */
    uint32_t reserved[4];    /* must be zero */
    /* Optional: freq_factors that live on the device, as ggml keeps them (src[2] of a
     * ROPE node, rope_freqs.weight of every Llama-3 GGUF): an F32 tensor of this
     * context with ne = [>= n_dims/2, 1, 1, 1] (any stride); its first n_dims/2 values
     * are used as freq_factors. posenc reads them back to the host (a wait for queued
     * work) and keeps the values: later calls with the same view reuse them without a
     * read-back until posenc writes the buffer (posenc_buffer_write, or an op writing
     * any view of it). A wrapped buffer (posenc_buffer_wrap_*) is read on every call,
     * since the application may write it directly. Must be NULL when freq_factors or
     * freqs is set, and in calls without a context (posenc_rope_freqs). */
    const posenc_tensor *freq_factors_tensor;
};

/* What posenc_rope_freqs() derived, for inspection and for the attention op. */
struct posenc_rope_info {
    int32_t n_dims;          /* resolved rotated dims */
    int32_t n_streams;       /* position streams the pairs use (pos->ne[1] must be >= this) */
    double base;             /* base after NTK / dynamic NTK */
    double mscale;           /* magnitude applied to cos/sin (attn_factor included) */
    /* Factor for the softmax scale 1/sqrt(d) (DeepSeek YaRN: get_mscale(s, mscale_all_dim)^2;
     * 1 otherwise). posenc does not apply it; the attention op multiplies it in. */
    double softmax_scale;
    double corr_low;         /* YaRN: the correction dims (after truncation); 0 otherwise */
    double corr_high;
    int32_t seq_len;         /* DYNAMIC_NTK / LONGROPE: the length used */
    int32_t long_factors;    /* LONGROPE: 1 if long_factor was used */
};

/*
 * The per-pair table of posenc_rope(), in double, for a head of `head_dim` dims:
 * out_freq[j] = w_j and out_stream[j] = stream_j for j < n_dims/2 (either array may be
 * NULL; size them for head_dim/2 entries). `seq_len` of DYNAMIC_NTK / LONGROPE must be
 * given here (> 0). out_info may be NULL. Returns POSENC_OK, or
 * POSENC_ERR_INVALID_ARGUMENT for bad params or head_dim, or a w_j outside the f32 range
 * (see "Accuracy of angles" above; nothing written).
 */
POSENC_API posenc_status posenc_rope_freqs(int64_t head_dim, const struct posenc_rope_params *params,
                                           double *out_freq, uint8_t *out_stream,
                                           struct posenc_rope_info *out_info);

/*
 * Rotate x into dst.
 *
 *   x, dst  [head_dim, n_head, T, B]  f32 or f16 (independently); ggml's layout. Other
 *           layouts (HF's [B, H, T, D]) are strided views of the same memory.
 *           dst may be exactly x (in place); otherwise they must not overlap.
 *   pos     [T, S, 1 or B, 1]  I32 or F32 (fractional positions: time series); S >= the
 *           streams the pairs use (1 for NORMAL/NEOX; ggml passes 4 for M-RoPE).
 *
 * Returns POSENC_ERR_INVALID_ARGUMENT for bad shapes, dtypes, strides or params (n_dims
 * odd or > head_dim - n_offs, unknown mode, NaN factors, ...).
 */
POSENC_API posenc_status posenc_rope(posenc_context *ctx, const posenc_tensor *x,
                                     const posenc_tensor *pos, const posenc_tensor *dst,
                                     const struct posenc_rope_params *params);

/*
 * Rotate queries and keys in one launch (several only over the device's binding limit,
 * max_binding_size): q [head_dim, Hq, T, B] -> q_out and
 * k [head_dim, Hk, T, B] -> k_out with the same positions and params (GQA: Hq != Hk).
 * Each output may be its input (in place). q and k may be views of one buffer that
 * interleave (the heads of a fused QKV tensor) as long as they share no element: overlap
 * is decided on elements, not byte ranges. Same checks and statuses as posenc_rope.
 */
POSENC_API posenc_status posenc_rope_qk(posenc_context *ctx, const posenc_tensor *q,
                                        const posenc_tensor *k, const posenc_tensor *pos,
                                        const posenc_tensor *q_out, const posenc_tensor *k_out,
                                        const struct posenc_rope_params *params);

/*
 * Re-rotate keys that were rotated with (pos_from, from) so they become rotated with
 * (pos_to, to), in one pass: angle_j = pos_to*w_to_j - pos_from*w_from_j, magnitude
 * mscale_to/mscale_from. For context shift (pos_to = pos_from - n_discard) and for
 * switching dynamic-NTK / LongRoPE tables without recomputing K. Both params must
 * resolve to the same mode, n_dims and n_offs. Returns as posenc_rope, and
 * POSENC_ERR_INVALID_ARGUMENT when the two params do not match.
 */
POSENC_API posenc_status posenc_rope_rerotate(posenc_context *ctx, const posenc_tensor *k,
                                              const posenc_tensor *pos_from,
                                              const struct posenc_rope_params *from,
                                              const posenc_tensor *pos_to,
                                              const struct posenc_rope_params *to,
                                              const posenc_tensor *dst);

/*
 * ggml compatibility: turn a GGML_OP_ROPE / GGML_OP_ROPE_BACK node's op_params into posenc
 * params with ggml's semantics. `op_params` holds `n_params` int32 words, as ggml stores
 * them: n_past, n_dims, mode, n_ctx, n_ctx_orig, then freq_base, freq_scale, ext_factor,
 * attn_factor, beta_fast, beta_slow as float bits, then sections[4], then n_offs (word
 * 15, set by ggml_rope_set_offset). n_params is 16 (current ggml: pass node->op_params)
 * or 15 (ggml before n_offs existed; n_offs is then 0); anything else is refused, so a
 * word ggml adds later cannot be dropped silently. Words 0 and 3 (n_past, n_ctx) are not
 * used by ggml's RoPE and are not read. `freq_factors` is ggml's optional src[2] data
 * ([n_dims/2] floats, host memory) or NULL; it is stored in out->freq_factors, so it
 * must outlive the posenc_rope call (or pass NULL and set out->freq_factors_tensor to
 * the device tensor). `head_dim` is src[0]->ne[0] (VISION's n_dims is ggml's n_dims*2).
 * Mode 0/2/8/24/40 map to NORMAL / NEOX / MROPE / VISION / IMROPE.
 *
 * The scaling, exactly: freq_scale == 1 and ext_factor == 0 -> no scaling (n_ctx_orig,
 * beta_fast and beta_slow are not read). Otherwise scaling.factor = 1/freq_scale, and
 * n_ctx_orig == 0 with ext_factor == 0 -> SCALING_LINEAR (ggml then only multiplies the
 * angle by freq_scale); any other combination -> SCALING_GGML_YARN with original_ctx =
 * n_ctx_orig (0 included: ggml's correction dims are then [0, -inf], so only pair 0
 * keeps its unscaled frequency, and posenc does the same), ext_factor and beta_fast /
 * beta_slow as given.
 *
 * Refused, because posenc reads 0 as "default" where ggml reads it as a value, or has no
 * such value: attn_factor <= 0 or not finite (ggml's 0 zeroes the output), beta_fast or
 * beta_slow == 0 with GGML_YARN, an unknown mode, n_dims <= 0, n_offs < 0, n_offs +
 * n_dims (VISION: n_offs + 2*n_dims) > head_dim, freq_base not finite and > 0,
 * freq_scale not finite and > 0, nonzero sections in modes 0 and 2, or
 * params posenc_rope would refuse for head_dim.
 * ggml's ALiBi is not a RoPE node, but the same trap exists there: in ggml_soft_max_ext
 * max_bias = 0 means "no ALiBi", in posenc_alibi_params it means the default 8.
 *
 * Returns POSENC_OK, or POSENC_ERR_INVALID_ARGUMENT; *out is written only on success.
 */
POSENC_API posenc_status posenc_rope_params_from_ggml(const int32_t *op_params, size_t n_params,
                                                      int64_t head_dim,
                                                      const float *freq_factors,
                                                      struct posenc_rope_params *out);

/* ------------------------------------------------------------------------------------ */
/* Learned absolute positions (BERT, GPT-2, OPT, ViT)                                    */
/* ------------------------------------------------------------------------------------ */

/*
 * dst = x + table[pos] (or dst = table[pos] when x is NULL).
 *
 *   table  [d, rows]        f32 or f16: row r is the embedding of position r.
 *   pos    [T, 1 or B]      I32: the row of each token.
 *   x, dst [d, T, B]        f32 or f16; x may be exactly dst (in place).
 *
 * A position < 0 or >= rows is an error, never a clamp: POSENC_ERR_OUT_OF_RANGE with a
 * message naming the token index and its value (the seed's "2,049th token" of a
 * 2,048-row table), and dst untouched. To guarantee that, posenc reads the positions
 * back to the host before launching (this waits for queued work).
 * Returns POSENC_ERR_INVALID_ARGUMENT for bad shapes, dtypes or views, and
 * POSENC_ERR_OUT_OF_RANGE as above.
 */
POSENC_API posenc_status posenc_learned(posenc_context *ctx, const posenc_tensor *x,
                                        const posenc_tensor *pos, const posenc_tensor *table,
                                        const posenc_tensor *dst);

/*
 * The backward pass of posenc_learned: dtable[pos[t]] += dy[t] for every token, in
 * place on dtable ([d, rows], f32 or f16). Deterministic: every row sums its tokens in
 * token order (no float atomics), so results are the same bits on every run, and equal
 * across backends up to f32 rounding. Positions out of range: as posenc_learned.
 * Returns as posenc_learned.
 */
POSENC_API posenc_status posenc_learned_backward(posenc_context *ctx, const posenc_tensor *dy,
                                                 const posenc_tensor *pos,
                                                 const posenc_tensor *dtable);

/* ------------------------------------------------------------------------------------ */
/* 2-D positions for vision transformers (MAE, DiT, DINOv2)                              */
/* ------------------------------------------------------------------------------------ */

struct posenc_2d_params {
    float base;          /* 0 -> 10000 */
    /* Positions are (column, row) / grid_scale: DiT/PixArt's grid_size/base_size times
     * their interpolation scale. 0 -> 1. */
    float grid_scale;
    int32_t cls_token;   /* 1: row 0 of dst is a zero row for the class token (MAE) */
    uint32_t reserved[4];
};

/*
 * MAE's 2-D sin-cos table for an grid_h x grid_w patch grid: token t = r*grid_w + c (+1
 * with a class token) gets [sincos_1d(d/2, c), sincos_1d(d/2, r)], each 1-D half in the
 * half-split layout (sin block, cos block) with w_i = base^(-2i/(d/2)): the width
 * coordinate first, as MAE's get_2d_sincos_pos_embed. dst: [d, grid_h*grid_w (+1)],
 * f32 or f16; d must be a multiple of 4. A table made once, not a per-step op: its
 * coordinates are written from the host into temporaries, so the call waits for ctx's
 * queue before it returns (as posenc_context_finish), and on a Vulkan context that
 * records into the application's command buffer it returns POSENC_ERR_UNSUPPORTED (call
 * it before posenc_vulkan_record_begin). Returns POSENC_ERR_INVALID_ARGUMENT for a grid
 * that does not match dst, d not a multiple of 4, or bad params.
 */
POSENC_API posenc_status posenc_sincos_2d(posenc_context *ctx, int64_t grid_h, int64_t grid_w,
                                          const posenc_tensor *dst,
                                          const struct posenc_2d_params *params);

typedef enum posenc_resize_filter {
    POSENC_RESIZE_BICUBIC = 0,  /* torch bicubic, A = -0.75 (timm / DINOv2 default) */
    POSENC_RESIZE_BILINEAR = 1  /* torch bilinear */
} posenc_resize_filter;

struct posenc_resize_params {
    posenc_resize_filter filter;
    int32_t cls_token;   /* 1: row 0 of src is a class token, copied to row 0 of dst */
    uint32_t reserved[4];
};

/*
 * Resize a learned position grid, as torch.nn.functional.interpolate(size=...,
 * align_corners=False, antialias=False) does for ViT / DINOv2 at a new resolution:
 *   src [d, src_h*src_w (+1)] -> dst [d, dst_h*dst_w (+1)], rows in row-major grid order.
 * The interpolation weights are computed on the host in double.
 * Returns POSENC_ERR_INVALID_ARGUMENT for grids that do not match the tensors, bad
 * dtypes or views, or bad params.
 */
POSENC_API posenc_status posenc_resize_2d(posenc_context *ctx, const posenc_tensor *src,
                                          int64_t src_h, int64_t src_w, const posenc_tensor *dst,
                                          int64_t dst_h, int64_t dst_w,
                                          const struct posenc_resize_params *params);

/* ------------------------------------------------------------------------------------ */
/* Biases added to attention logits: relative (T5, Shaw) and ALiBi                       */
/* ------------------------------------------------------------------------------------ */

/*
 * Logits are [K, Q, H, B] (ggml order: keys innermost): element (k, q, h, b) is the score
 * of query q against key k in head h. Query q sits at position q + q_offset and key k at
 * position k + k_offset (KV-cache decoding: q_offset = number of cached tokens).
 */

typedef enum posenc_relbias_kind {
    /* T5: bucket of the relative position k - q (Raffel et al., HF _relative_position_bucket):
     * half the buckets exact for small distances, the rest logarithmic up to
     * max_distance. */
    POSENC_RELBIAS_T5 = 0,
    /* Shaw et al.: bucket = clip(k - q, -max_distance, max_distance) + max_distance,
     * 2*max_distance + 1 buckets. */
    POSENC_RELBIAS_CLIPPED = 1
} posenc_relbias_kind;

struct posenc_relbias_params {
    posenc_relbias_kind kind;
    /* T5: 0 -> 32; >= 4 bidirectional, >= 2 causal. CLIPPED: must be 0 (it is
     * 2*max_distance+1) */
    int32_t num_buckets;
    /* T5: 0 -> 128; > the exact buckets (num_buckets/4 bidirectional, /2 causal).
     * CLIPPED: > 0 */
    int32_t max_distance;
    int32_t causal;        /* T5: 1 = unidirectional (decoder self-attention). CLIPPED: 0 */
    int32_t q_offset;      /* position of query 0 (>= 0) */
    int32_t k_offset;      /* position of key 0 (>= 0) */
    uint32_t reserved[4];
};

/* The bucket of relative position rel = key_pos - query_pos (host helper, also what the
 * kernels use): T5 with 32 buckets, max distance 128, bidirectional maps -5 -> 5, 0 -> 0,
 * 7 -> 23, 200 -> 31. Returns POSENC_OK, or POSENC_ERR_INVALID_ARGUMENT for bad params
 * or a NULL out_bucket (nothing written). */
POSENC_API posenc_status posenc_relbias_bucket(const struct posenc_relbias_params *params,
                                               int64_t rel, int32_t *out_bucket);

/*
 * dst = logits + table[bucket(k - q), h]:  table [n_buckets, H] (f32 or f16; ne0 =
 * buckets), logits/dst [K, Q, H, B] (f32 or f16; dst may be exactly logits). logits NULL:
 * dst = the bias alone. Returns POSENC_ERR_INVALID_ARGUMENT for bad shapes, dtypes, views
 * or params (a table with fewer buckets than the params give, ...).
 */
POSENC_API posenc_status posenc_relbias(posenc_context *ctx, const posenc_tensor *logits,
                                        const posenc_tensor *table, const posenc_tensor *dst,
                                        const struct posenc_relbias_params *params);

/* Backward: dtable[bucket, h] += sum over (k, q, b) of dlogits with that bucket, in a
 * fixed order (deterministic). dtable [n_buckets, H], updated in place. Returns as
 * posenc_relbias. */
POSENC_API posenc_status posenc_relbias_backward(posenc_context *ctx,
                                                 const posenc_tensor *dlogits,
                                                 const posenc_tensor *dtable,
                                                 const struct posenc_relbias_params *params);

struct posenc_alibi_params {
    /* ggml's max_bias: slopes m_h = 2^(-max_bias*(h+1)/n) for h < n = 2^floor(log2 H), and
     * 2^(-max_bias/2*(2(h-n)+1)/n) beyond: the paper's rule for any head count.
     * 0 -> 8 (the paper). Beware when porting from ggml: there max_bias = 0 means "no
     * ALiBi" (ggml_soft_max_ext); here it means the default 8. To turn ALiBi off, do not
     * call posenc_alibi. */
    float max_bias;
    int32_t causal;      /* 1: keys after the query get -inf */
    int32_t symmetric;   /* 1: bias -m*|q - k| (encoder / bidirectional variant) */
    int32_t q_offset;    /* as above (>= 0); every position must be <= 2^24 */
    int32_t k_offset;
    const float *slopes; /* optional [H]: use these slopes instead */
    uint32_t reserved[4];
};

/* The slopes for `n_head` heads into out_slopes[0 .. n_head-1] (double). For 8 heads
 * 2^-1 ... 2^-8; for 12 heads those 8 then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5. With
 * params->slopes, those are copied. Returns POSENC_OK, or POSENC_ERR_INVALID_ARGUMENT
 * (n_head < 1, NULL out_slopes, bad params; nothing written). */
POSENC_API posenc_status posenc_alibi_slopes(int64_t n_head, const struct posenc_alibi_params *params,
                                             double *out_slopes);

/*
 * dst = logits + bias with bias(k, q, h) = -m_h * (qpos - kpos) (symmetric: -m_h*|qpos -
 * kpos|), and -inf where causal and kpos > qpos. The distance is formed in integers and
 * converted once, so it is exact in f32 even for f16 logits. logits/dst [K, Q, H, B],
 * f32 or f16; logits NULL: dst = the bias alone; dst may be exactly logits.
 * Returns POSENC_ERR_INVALID_ARGUMENT for bad shapes, dtypes, views or params (positions
 * past 2^24, non-finite slopes or max_bias, ...).
 */
POSENC_API posenc_status posenc_alibi(posenc_context *ctx, const posenc_tensor *logits,
                                      const posenc_tensor *dst,
                                      const struct posenc_alibi_params *params);

/* ------------------------------------------------------------------------------------ */
/* Softmax over rows, as ggml's GGML_OP_SOFT_MAX (ggml_soft_max_ext + add_sinks)          */
/* ------------------------------------------------------------------------------------ */

/*
 * Parameters of posenc_softmax(). The all-zero value (or NULL) means the defaults:
 * scale 1, no ALiBi slopes, no flags.
 */
struct posenc_softmax_params {
    /* Multiplies x. 0 -> 1 (ggml's default); any other finite value is used as given
     * (negative too). ggml's scale = 0 (every logit becomes 0) cannot be expressed: pass
     * x filled with zeros and scale 1 instead. Not finite: INVALID_ARGUMENT. */
    float scale;
    /* ALiBi max_bias with ggml_soft_max_ext's meaning: 0 = no slopes (the mask is added
     * with slope 1); > 0: the mask of head h = x->ne[2] index is multiplied by
     * slope_h = 2^(-max_bias*(h+1)/n) for h < n, 2^(-max_bias/2*(2(h-n)+1)/n) beyond,
     * n = 2^floor(log2 n_head), n_head = x->ne[2] (the rule of posenc_alibi_slopes, which
     * this op uses, computed on the host in double). Without a mask it has no effect
     * (ggml refuses that combination when it builds the graph). Negative or not finite:
     * INVALID_ARGUMENT. Note that posenc_alibi_params.max_bias = 0 means 8 instead. */
    float max_bias;
    uint32_t flags;       /* none yet: must be 0 */
    uint32_t reserved[4]; /* must be zero */
};

/*
 * dst = softmax over dim 0 of scale*x + slope*mask, with an optional sink logit per head;
 * ggml's GGML_OP_SOFT_MAX (ggml_soft_max_ext, ggml_soft_max_ext_inplace and
 * ggml_soft_max_add_sinks) with the same broadcasting and the same results up to f32
 * rounding. For every row (i1, h, b) of x, with n = x->ne[0]:
 *
 *     v_k   = scale * x[k, i1, h, b] + slope_h * mask[k, i1, h % mask->ne[2], b % mask->ne[3]]
 *             (no mask: v_k = scale * x[k, i1, h, b])
 *     m     = max(max_k v_k, sinks[h])           (no sinks: max_k v_k)
 *     dst_k = exp(v_k - m) / (sum_j exp(v_j - m) + exp(sinks[h] - m))
 *             (no sinks: the sum alone)
 *
 *   x      [n, rows, H, B]  f32 or f16, any strides (a permuted or padded view works).
 *   mask   NULL, or [n, >= rows, M2, M3], f32 or f16, any strides: row i1 of x uses mask
 *          row i1 (rows past x->ne[1] are not read, ggml's padded KQ masks); M2 must divide
 *          H and M3 must divide B (head h reads mask plane h % M2, batch b reads b % M3, as
 *          ggml). -inf masks a key (exp gives exactly 0).
 *   sinks  NULL, or [H, 1, 1, 1] f32 (ggml_soft_max_add_sinks): one extra logit per head
 *          that takes part in the max and the sum but is not written.
 *   dst    [n, rows, H, B] f32 or f16: may be exactly x (in place, same dtype, offset and
 *          strides), else it must not overlap x, mask or sinks.
 *
 * A row whose every v_k is -inf (every key masked) and that has no finite sink gives NaN
 * in every element, as ggml does (exp(-inf - -inf)); with a finite sink it gives zeros.
 * Any other NaN or +inf in x, mask or sinks propagates as in the formula (the row becomes
 * NaN). The GPU backends compute in f32 (ggml's precision: v_k is formed in f32, the sums
 * accumulate in f32 with Kahan compensation), the CPU fast path as ggml's CPU op (f32, the
 * sum in double), the CPU reference (POSENC_CONTEXT_CPU_REFERENCE) in double; results
 * agree within a few f32 ulp. Rows of any length run (on the GPUs one work-group per row
 * loops over it).
 *
 * Returns POSENC_OK (also for an empty x: nothing is written), or
 * POSENC_ERR_INVALID_ARGUMENT for a NULL ctx, x or dst, a bad view, x / dst / mask not f32
 * or f16, sinks not f32, dst not the shape of x, mask->ne[0] != n, mask->ne[1] < rows,
 * M2 not dividing H or M3 not dividing B, sinks not [H, 1, 1, 1], dst partly overlapping
 * x or overlapping mask / sinks, or bad params (scale or max_bias not finite, max_bias
 * < 0, flags or reserved not zero); the message names the argument and the value. Also
 * POSENC_ERR_UNSUPPORTED when one row of x, dst or mask is more than one binding of the
 * device may address (posenc_device_info.max_binding_size; larger tensors are cut into
 * launches over rows, heads and batches).
 */
POSENC_API posenc_status posenc_softmax(posenc_context *ctx, const posenc_tensor *x,
                                        const posenc_tensor *mask, const posenc_tensor *sinks,
                                        const posenc_tensor *dst,
                                        const struct posenc_softmax_params *params);

/* ------------------------------------------------------------------------------------ */
/* Attention with any of the encodings plugged in                                        */
/* ------------------------------------------------------------------------------------ */

/*
 * posenc_attention computes, for every batch b, query head h, query q and value dim d,
 *
 *     logits[k, q, h, b] = scale * sum_i Q'[i, h, q, b] * K'[i, h / r, k, b]   + bias + mask
 *     P[:, q, h, b]      = softmax over k (max-subtracted; a row whose every key is masked
 *                          gives P = 0 and a zero output row, never NaN)
 *     dst[d, h, q, b]    = sum_k P[k, q, h, b] * V'[d, h / r, k, b]
 *
 * with r = Hq / Hk (grouped-query attention: query head h reads K/V head h / r, as ggml
 * and llama.cpp). Query q sits at position q + q_offset, key k at k + k_offset
 * (KV-cache decoding: one query at q_offset = number of cached tokens). Q', K', V' are
 * the inputs with the encoding applied; bias and mask are what the encoding and the
 * causal flag / mask tensor add:
 *
 *   NONE        Q' = Q, K' = K (NoPE: attention cannot see positions at all)
 *   SINUSOIDAL  Q' = Q*x_scale + PE(pos), K' likewise, per head with d = head_dim
 *               (posenc_sinusoidal); V too with POSENC_ATTENTION_PE_ON_V
 *   LEARNED     Q' = Q + table[pos], K' likewise (posenc_learned); V too with PE_ON_V
 *   ROPE        Q', K' rotated by their positions (posenc_rope, any mode and scaling)
 *   ALIBI       bias = -slope_h * (qpos - kpos) (posenc_alibi)
 *   RELBIAS     bias = table[bucket(kpos - qpos), h] (posenc_relbias, T5 or clipped)
 *
 * Every backend computes in f32 or wider (f16 is storage only): the OpenCL backend runs the
 * two matrix products through CLBlast when posenc was built with it, the Vulkan backend
 * through posenc's own shaders, the CPU backend in plain double loops (the reference).
 */
typedef enum posenc_attention_encoding {
    POSENC_ATTENTION_NONE = 0,
    POSENC_ATTENTION_SINUSOIDAL = 1,
    POSENC_ATTENTION_LEARNED = 2,
    POSENC_ATTENTION_ROPE = 3,
    POSENC_ATTENTION_ALIBI = 4,
    POSENC_ATTENTION_RELBIAS = 5
} posenc_attention_encoding;

/* posenc_attention_params.flags */
enum {
    /* SINUSOIDAL / LEARNED: add the encoding to V as well (the identity-projection reading
     * of "x + PE feeds Q, K and V"); V's head dim must then equal Q's. */
    POSENC_ATTENTION_PE_ON_V = 1u << 0,
    /* Run the multi-pass path (scores, softmax, output, with the logits in a device
     * temporary) even when `weights` is NULL, instead of the one-pass fused kernel the
     * backend may have. For comparisons and tests; results agree within the bounds of
     * docs/accuracy.md, not bit for bit. */
    POSENC_ATTENTION_UNFUSED = 1u << 1
};

/*
 * Parameters of posenc_attention. All-zero (or NULL) = NoPE, scale 1/sqrt(head_dim), not
 * causal, positions from 0. Only the fields of the chosen encoding are read (one struct
 * can hold every encoding's settings while `encoding` picks one). Pointers are read during
 * the call only.
 */
struct posenc_attention_params {
    posenc_attention_encoding encoding;
    /* Multiplies Q.K. 0 -> 1/sqrt(head_dim), times RoPE's softmax_scale (DeepSeek YaRN,
     * see posenc_rope_info); any other finite value is used as given. */
    float scale;
    int32_t causal;    /* 1: key k is masked for query q when kpos > qpos */
    int32_t q_offset;  /* position of query 0 (>= 0) */
    int32_t k_offset;  /* position of key 0 (>= 0) */
    /* Optional additive mask [Tk, Tq, 1 or Hq, 1 or B], f32 or f16 (-inf masks a key). */
    const posenc_tensor *mask;
    /* SINUSOIDAL, LEARNED, ROPE: optional explicit positions, as posenc_rope's `pos`:
     * q_pos [Tq, S, 1 or B, 1], k_pos [Tk, S, 1 or B, 1], i32 or f32 (LEARNED: i32;
     * SINUSOIDAL and LEARNED use stream 0). NULL: q + q_offset and k + k_offset. The causal
     * mask, ALiBi and relative bias always use q_offset / k_offset. */
    const posenc_tensor *q_pos;
    const posenc_tensor *k_pos;
    struct posenc_sinusoidal_params sinusoidal; /* SINUSOIDAL */
    const posenc_tensor *learned_table;         /* LEARNED: [head_dim, rows], f32 or f16 */
    struct posenc_rope_params rope;             /* ROPE (seq_len 0: the largest position
                                                 * of Q and K + 1) */
    /* ALIBI: causal, q_offset and k_offset must be 0 (the fields above rule); slopes for
     * Hq heads. */
    struct posenc_alibi_params alibi;
    /* RELBIAS: q_offset and k_offset must be 0; causal selects T5's unidirectional
     * buckets (it masks nothing). */
    struct posenc_relbias_params relbias;
    const posenc_tensor *relbias_table;         /* RELBIAS: [n_buckets, Hq], f32 or f16 */
    uint32_t flags;                             /* POSENC_ATTENTION_* */
    /* ggml's flash_attn_ext extras (GGML_OP_FLASH_ATTN_EXT). Zero / NULL: unused. They are
     * computed by the one-pass path only: with any of them set, a call with `weights`, with
     * POSENC_ATTENTION_UNFUSED or on a backend without a one-pass kernel returns
     * POSENC_ERR_UNSUPPORTED. */
    /* > 0: the scaled scores s become softcap * tanh(s / softcap) before the bias and the
     * mask are added (ggml's logit_softcap). */
    float softcap;
    /* NULL, or Hq host floats (read during the call): the mask is multiplied by
     * mask_slopes[h] before it is added (ggml's max_bias ALiBi, where the mask holds the
     * distances; posenc_alibi_slopes computes ggml's slopes). Needs `mask`. */
    const float *mask_slopes;
    /* NULL, or f32 [Hq]: one logit per query head that joins every softmax row's
     * denominator (attention sinks): p_k = exp(x_k - m) / (sum_j exp(x_j - m) +
     * exp(sink_h - m)) with m = max(max_j x_j, sink_h). */
    const posenc_tensor *sinks;
    uint32_t reserved[8];                       /* must be zero */
};

/*
 * Attention with one encoding (see above).
 *
 *   q        [D, Hq, Tq, B]   f32 or f16 (each tensor independently)
 *   k        [D, Hk, Tk, B]   Hq a multiple of Hk
 *   v        [Dv, Hk, Tk, B]
 *   dst      [Dv, Hq, Tq, B]  the output; must not overlap any other tensor
 *   weights  NULL, or [Tk, Tq, Hq, B] f32 or f16: receives P (heat maps, decay curves)
 *
 * Any view (padded, permuted, offset) works. Without `weights`, on a backend with a
 * one-pass kernel (and without POSENC_ATTENTION_UNFUSED), scores, bias, mask, softmax and
 * the sum over V run in one pass with no logits in memory; otherwise the call makes a
 * device temporary for the logits, Tk*Tq*Hq*B f32 values. SINUSOIDAL, LEARNED and ROPE
 * also make an f32 copy of Q and K; ROPE in the one pass (every backend but Vulkan on a
 * CPU device, such as lavapipe) makes, instead of K's copy, a table of the keys' rotations
 * (Tk*head_dim f32 values, times B with per-batch positions) that every K/V head shares
 * and the pass applies as it reads K; with implicit key positions (k_pos NULL) that table
 * is made for Tk rounded up to a multiple of 256 keys and kept, and later calls with the
 * same RoPE params and k_offset and at most that many keys (a decode loop) use it as it is,
 * with no angles computed (its rows are posenc_rope's for those positions). These device
 * temporaries are buffers the context keeps for later calls (up to 8 buffers and 256 MiB in all; what would go past that is
 * made and freed by the call), so that calls of the same or a slowly growing shape allocate no
 * device memory; posenc_context_destroy frees them, and a call that runs out of memory
 * frees the kept buffers it does not use and tries again. While a Vulkan context records
 * into the application's command buffer they are made per call and freed with the
 * recording. If q, k, v or dst is empty nothing is written.
 * Returns POSENC_ERR_INVALID_ARGUMENT for bad shapes, dtypes, overlaps or params (the
 * message names them; an error inside an encoding is reported with the encoding's own
 * message), POSENC_ERR_OUT_OF_RANGE for a LEARNED position past the table (q_pos and k_pos
 * are read back and checked before anything runs, so this comes before any UNSUPPORTED a
 * device limit would give), and POSENC_ERR_UNSUPPORTED when the backend lacks attention,
 * or for softcap / mask_slopes / sinks where the one-pass path cannot run (see those
 * fields).
 */
POSENC_API posenc_status posenc_attention(posenc_context *ctx, const posenc_tensor *q,
                                          const posenc_tensor *k, const posenc_tensor *v,
                                          const posenc_tensor *dst, const posenc_tensor *weights,
                                          const struct posenc_attention_params *params);

/*
 * The mean attention weight on a key as a function of its distance from the query: the
 * data behind RoFormer's "long-term decay" curve, for any encoding.
 *
 * One query at position k_offset + n_keys - 1 (params->q_offset is ignored) attends to
 * n_keys keys at positions k_offset .. k_offset + n_keys - 1, on ctx, with one head of
 * head_dim dims. Each of n_samples draws takes a query q and a key k with elements
 * uniform in [0, 1) (seeded splitmix64; positive, the setting of RoFormer's decay bound)
 * and puts the same k at every key position, so the weights differ only through the
 * encoding: NoPE gives 1/n_keys everywhere, ALiBi exp(-slope*r)/Z, RoPE its decaying,
 * oscillating curve. out_weight[r] (r = 0 .. n_keys-1) is the mean over the draws of the
 * weight on the key at distance r. The draws run as the batch of one posenc_attention
 * call (device memory at most ~ 4*n_samples*n_keys*(head_dim + 3) bytes). ALiBi and
 * RELBIAS use one head (params->alibi.slopes / relbias_table give its slope / column); a
 * LEARNED table needs k_offset + n_keys rows. n_keys, n_samples, head_dim >= 1.
 * Returns POSENC_ERR_INVALID_ARGUMENT for counts < 1, a NULL out_weight or bad params,
 * and any status of posenc_attention; out_weight is written only on success.
 */
POSENC_API posenc_status posenc_attention_decay(posenc_context *ctx, int64_t head_dim,
                                                int64_t n_keys, int64_t n_samples,
                                                uint64_t seed,
                                                const struct posenc_attention_params *params,
                                                double *out_weight);

/* ------------------------------------------------------------------------------------ */
/* Fill and row scatter (ggml buffer clears, GGML_OP_SET_ROWS, fused RoPE + KV-cache write) */
/* ------------------------------------------------------------------------------------ */

/*
 * Set every element of dst (any non-overlapping strided view) to `value`:
 *   F32  value rounded to the nearest f32 (ties to even); NaN and infinities are stored
 *        as such (a NaN stays a NaN);
 *   F16  value rounded to the nearest f16 (ties to even, one rounding from the double;
 *        overflow gives infinity); NaN and infinities as for F32;
 *   I32  value must be an integer in [INT32_MIN, INT32_MAX] (a byte pattern for a
 *        memset: 0x01010101 * byte, as int32); else INVALID_ARGUMENT naming `value`.
 * I64 is refused. Every backend writes the same bits (the host converts the value once).
 * Returns POSENC_ERR_INVALID_ARGUMENT for a bad view, dtype or value.
 */
POSENC_API posenc_status posenc_fill(posenc_context *ctx, const posenc_tensor *dst, double value);

/* posenc_set_rows_params.flags */
enum {
    /* Do not read the row indices back to the host to check them (no host wait): a row
     * whose index is outside [0, R) is skipped (nothing of it is written) by every
     * backend. */
    POSENC_ROWS_UNCHECKED = 1u << 0
};

/* Parameters of posenc_set_rows / posenc_rope_set_rows. All-zero (or NULL) = defaults. */
struct posenc_set_rows_params {
    uint32_t flags;       /* POSENC_ROWS_* */
    uint32_t reserved[3]; /* must be zero */
};

/*
 * ggml's GGML_OP_SET_ROWS: scatter the rows of src into the rows of dst named by `rows`.
 *
 *   src   [n, r, d2, d3]   f32 or f16
 *   rows  [r, e2, e3, 1]   i32 or i64; d2 % e2 == 0 and d3 % e3 == 0 (broadcast)
 *   dst   [n, R, d2, d3]   f32 or f16 (f32 <-> f16 rounds to nearest even; same dtype:
 *                          the bits are copied)
 *
 *   dst[:, rows[i1, i2 % e2, i3 % e3], i2, i3] = src[:, i1, i2, i3]
 *
 * (ggml's broadcast rule: the row index tensor repeats over dims 2 and 3.) Rows of dst
 * that no index names are left as they are. When two source rows of one (i2, i3) name the
 * same destination row, which of them lands is unspecified: each element of that row
 * holds the value of one of them, not necessarily the same one for every element. dst
 * must not overlap src or rows. Any view (padded, permuted, offset) works.
 *
 * By default the indices are read back to the host before anything is queued (this waits
 * for queued work, as posenc_learned's positions do); an index outside [0, R) gives
 * POSENC_ERR_OUT_OF_RANGE naming the element and its value, and dst is untouched. With
 * POSENC_ROWS_UNCHECKED nothing is read back and such a row is skipped instead. An i64
 * index is valid when 0 <= index < R; GPU kernels read it as two 32-bit words (valid when
 * the high word is 0 and the low word < R, the same set of values).
 * Returns POSENC_ERR_INVALID_ARGUMENT for bad shapes, dtypes, views, overlaps or params
 * (reserved != 0, unknown flags).
 */
POSENC_API posenc_status posenc_set_rows(posenc_context *ctx, const posenc_tensor *src,
                                         const posenc_tensor *rows, const posenc_tensor *dst,
                                         const struct posenc_set_rows_params *params);

/*
 * RoPE whose rotated tokens are written to rows of a cache tensor (ggml's fused
 * ROPE -> VIEW -> SET_ROWS KV-cache write), in one pass:
 *
 *   x     [head_dim, H, T, B]  f32 or f16, as posenc_rope
 *   pos   as posenc_rope ([T, streams, 1 or B, 1], i32 or f32)
 *   rows  [T, 1 or B, 1, 1]    i32 or i64: the destination token of each (t, b)
 *   dst   [head_dim, H, R, B]  f32 or f16
 *
 *   dst[:, :, rows[t, b], b] = rope(x)[:, :, t, b]
 *
 * Every RoPE mode, scaling, partial rotation (the dims outside the window are copied),
 * POSENC_ROPE_BACKWARD and params as posenc_rope. The result is bit-identical to
 * posenc_rope into a tensor of dst's dtype and layout followed by posenc_set_rows on the
 * same backend. (With an f32 intermediate and an f16 dst the two-step path rounds twice;
 * the GPU and fast CPU paths compute in f32 and give the same bits either way, the CPU
 * reference computes in double and may differ there by one f16 ulp.) Index checking,
 * POSENC_ROWS_UNCHECKED and duplicate rows as posenc_set_rows. dst must not overlap x,
 * pos or rows. Returns as posenc_rope and posenc_set_rows.
 */
POSENC_API posenc_status posenc_rope_set_rows(posenc_context *ctx, const posenc_tensor *x,
                                              const posenc_tensor *pos, const posenc_tensor *rows,
                                              const posenc_tensor *dst,
                                              const struct posenc_rope_params *params,
                                              const struct posenc_set_rows_params *rows_params);

#ifdef __cplusplus
}
#endif

#endif /* POSENC_H */
