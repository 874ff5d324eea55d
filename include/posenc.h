/*
 * posenc.h - transformer positional encodings on OpenCL, Vulkan and the CPU.
 *
 * This is the whole public API of posenc. Every name starts with posenc_ / POSENC_.
 *
 * Objects and ownership
 * ---------------------
 *   posenc_context  one backend (CPU, OpenCL or Vulkan) on one device. Created with
 *                   posenc_context_create(), destroyed with posenc_context_destroy().
 *   posenc_buffer   a block of device memory owned by one context. Created with
 *                   posenc_buffer_create(), destroyed with posenc_buffer_destroy().
 *                   Every buffer must be destroyed before its context.
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
 * was wrong (or the native OpenCL / Vulkan error and the call that failed). On any error
 * the destination tensor or buffer is left untouched: all arguments are checked before
 * anything is written. posenc never aborts the process on bad input or device errors.
 *
 * Execution
 * ---------
 * Ops are queued on the context's device in call order and may finish after the call
 * returns. posenc_buffer_read() and posenc_context_finish() wait for all queued work.
 * posenc_buffer_write() is ordered with the ops queued before it.
 *
 * Thread safety
 * -------------
 * A context and its buffers may be used by one thread at a time (calls on one context
 * must be serialised by the caller). Different contexts are independent and may be used
 * from different threads at the same time. posenc_status_string(), posenc_version() and
 * the f16 conversion helpers are thread-safe.
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

/* The library's version as "MAJOR.MINOR.PATCH" (a static string). */
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

/* A short static description of a status ("invalid argument", ...). Never NULL. */
POSENC_API const char *posenc_status_string(posenc_status status);

/* ------------------------------------------------------------------------------------ */
/* Element types and tensor views                                                       */
/* ------------------------------------------------------------------------------------ */

typedef enum posenc_dtype {
    POSENC_DTYPE_F32 = 0, /* IEEE binary32 */
    POSENC_DTYPE_F16 = 1, /* IEEE binary16, storage only: posenc computes in f32 or wider */
    POSENC_DTYPE_I32 = 2  /* int32 (positions) */
} posenc_dtype;

/* Size in bytes of one element of `dtype`, or 0 for an unknown value. */
POSENC_API size_t posenc_dtype_size(posenc_dtype dtype);

/* A short name ("f32", "f16", "i32"), or "?" for an unknown value. */
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
 */
POSENC_API posenc_tensor posenc_tensor_contiguous(posenc_buffer *buffer, size_t offset,
                                                  posenc_dtype dtype, int64_t ne0, int64_t ne1,
                                                  int64_t ne2, int64_t ne3);

/* Number of elements of a tensor (product of ne), or -1 if it overflows int64. */
POSENC_API int64_t posenc_tensor_nelements(const posenc_tensor *t);

/* ------------------------------------------------------------------------------------ */
/* f16 helpers (round to nearest even; NaN and infinities kept)                          */
/* ------------------------------------------------------------------------------------ */

POSENC_API uint16_t posenc_f32_to_f16(float value);
POSENC_API float posenc_f16_to_f32(uint16_t bits);

/* ------------------------------------------------------------------------------------ */
/* Contexts                                                                             */
/* ------------------------------------------------------------------------------------ */

typedef enum posenc_backend_kind {
    /* A real GPU if there is one (Vulkan first, then OpenCL), else the CPU backend.
     * CPU-emulated devices (lavapipe, PoCL) are never chosen by AUTO: the CPU backend is
     * faster than they are. */
    POSENC_BACKEND_AUTO = 0,
    POSENC_BACKEND_CPU = 1,    /* the reference backend; always available */
    POSENC_BACKEND_OPENCL = 2, /* OpenCL 1.2 or later through the ICD loader */
    POSENC_BACKEND_VULKAN = 3  /* Vulkan 1.1 or later through the loader */
} posenc_backend_kind;

#define POSENC_BACKEND_COUNT 4

/* "auto", "cpu", "opencl", "vulkan", or "?" for an unknown value. */
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
    POSENC_CONTEXT_DEBUG = 1u << 0
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
    uint32_t reserved[8];        /* must be zero */
};

/*
 * Create a context. `params` may be NULL (all defaults). On failure *out_ctx is set to
 * NULL; the reason is logged through params->log_fn (as POSENC_LOG_ERROR) and, when
 * `out_error` is not NULL, copied into out_error[0 .. error_size-1] (NUL-terminated).
 *
 * Returns POSENC_ERR_UNAVAILABLE when the requested backend is not compiled in or has no
 * usable device (forced backends never fall back), POSENC_ERR_INVALID_ARGUMENT for a bad
 * params field (device index past the last device, unknown backend, reserved not zero),
 * POSENC_ERR_OUT_OF_MEMORY or POSENC_ERR_BACKEND.
 */
POSENC_API posenc_status posenc_context_create(const struct posenc_context_params *params,
                                               posenc_context **out_ctx, char *out_error,
                                               size_t error_size);

/* Wait for queued work, free everything the context owns and set *ctx to NULL.
 * All buffers of the context must have been destroyed. */
POSENC_API void posenc_context_destroy(posenc_context **ctx);

/* Wait until every op queued on the context has finished. */
POSENC_API posenc_status posenc_context_finish(posenc_context *ctx);

/* The message of the last failed call on `ctx` (or on one of its buffers): the argument
 * or native call and the value. "" when the last call succeeded. Valid until the next
 * call on the context. */
POSENC_API const char *posenc_context_last_error(const posenc_context *ctx);

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
    uint32_t max_workgroup_size;
    uint32_t compute_units;     /* compute units / host threads */
};

/* Fill *out_info with what `ctx` runs on. */
POSENC_API posenc_status posenc_context_get_info(const posenc_context *ctx,
                                                 struct posenc_device_info *out_info);

/*
 * Count the devices `backend` (CPU, OPENCL or VULKAN, not AUTO) can open, without
 * creating a context. On POSENC_ERR_UNAVAILABLE, `out_reason` (if not NULL) receives the
 * driver's reason. The CPU backend has exactly one device.
 */
POSENC_API posenc_status posenc_backend_device_count(posenc_backend_kind backend,
                                                     int32_t *out_count, char *out_reason,
                                                     size_t reason_size);

/* ------------------------------------------------------------------------------------ */
/* Buffers                                                                              */
/* ------------------------------------------------------------------------------------ */

/* Allocate `size` bytes (> 0) of device memory. Contents are undefined until written. */
POSENC_API posenc_status posenc_buffer_create(posenc_context *ctx, size_t size,
                                              posenc_buffer **out_buffer);

/* Free a buffer (after queued work that uses it has finished) and set *buffer to NULL. */
POSENC_API void posenc_buffer_destroy(posenc_buffer **buffer);

/* Size in bytes given at creation (0 for NULL). */
POSENC_API size_t posenc_buffer_size(const posenc_buffer *buffer);

/* The context that owns `buffer` (NULL for NULL). */
POSENC_API posenc_context *posenc_buffer_context(const posenc_buffer *buffer);

/* Copy `size` bytes from host memory `src` into the buffer at byte `offset`. Ordered
 * after the ops queued before it. [offset, offset+size) must lie inside the buffer. */
POSENC_API posenc_status posenc_buffer_write(posenc_buffer *buffer, size_t offset,
                                             const void *src, size_t size);

/* Wait for queued work, then copy `size` bytes at byte `offset` into host memory `dst`. */
POSENC_API posenc_status posenc_buffer_read(posenc_buffer *buffer, size_t offset, void *dst,
                                            size_t size);

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
 * angle pos*w_i in f32 (CPU: in double) and evaluates sin/cos of it.
 * Returns POSENC_ERR_INVALID_ARGUMENT for bad shapes, dtypes, strides or params.
 */
POSENC_API posenc_status posenc_sinusoidal(posenc_context *ctx, const posenc_tensor *x,
                                           const posenc_tensor *pos, const posenc_tensor *dst,
                                           const struct posenc_sinusoidal_params *params);

/*
 * The frequency table w_i (i < d/2) that posenc_sinusoidal uses, in double, written to
 * out_freq[0 .. d/2-1]. d must be even and >= 2.
 */
POSENC_API posenc_status posenc_sinusoidal_freqs(int64_t d,
                                                 const struct posenc_sinusoidal_params *params,
                                                 double *out_freq);

#ifdef __cplusplus
}
#endif

#endif /* POSENC_H */
