/*
 * internal.h - what the core and every backend share: the context and buffer structs,
 * error reporting, and the resolved (validated, defaults applied) op descriptions that
 * the front end hands to a backend through its vtable (backend.h).
 */
#ifndef POSENC_INTERNAL_H
#define POSENC_INTERNAL_H

#include "posenc.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define PE_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PE_PRINTF(a, b)
#endif

#define PE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PE_ERR_MAX 512

#define PE_RETURN_IF_ERROR(expr)            \
    do {                                    \
        posenc_status pe_st_ = (expr);      \
        if (pe_st_ != POSENC_OK)            \
            return pe_st_;                  \
    } while (0)

struct pe_backend;

struct posenc_context {
    struct pe_backend *backend;
    posenc_backend_kind kind;
    int32_t device;
    uint32_t flags;
    posenc_log_fn log_fn;
    posenc_log_level log_level;
    void *log_user_data;
    int64_t live_buffers;
    char last_error[PE_ERR_MAX];
};

struct posenc_buffer {
    posenc_context *ctx;
    size_t size;
    void *mem; /* the backend's own buffer object */
};

/* Record an error on ctx (formatted message), log it, and return `status`. */
posenc_status pe_error(posenc_context *ctx, posenc_status status, const char *fmt, ...)
    PE_PRINTF(3, 4);
/* Log a message at `level` through the context's callback (if any). */
void pe_log(posenc_context *ctx, posenc_log_level level, const char *fmt, ...) PE_PRINTF(3, 4);
void pe_clear_error(posenc_context *ctx);

/* snprintf into a fixed buffer that is always NUL-terminated (size > 0). */
void pe_strlcpy(char *dst, const char *src, size_t size);

/* f16 <-> f32 / double conversions (round to nearest even). */
uint16_t pe_f16_from_double(double v);
double pe_f16_to_double(uint16_t h);

/*
 * A validated tensor as a backend sees it: the backend's memory object, and offset and
 * strides in ELEMENTS (the front end checked that the byte values are multiples of the
 * element size). Broadcast dimensions have stride 0.
 */
struct pe_view {
    void *mem;
    posenc_dtype dtype;
    int64_t offset;   /* elements */
    int64_t ne[4];
    int64_t st[4];    /* elements */
};

/* posenc_sinusoidal, resolved. */
struct pe_sinusoidal_op {
    struct pe_view dst;   /* [d, T, B2, B3] */
    struct pe_view x;     /* same shape as dst; x.mem == NULL when there is no input */
    struct pe_view pos;   /* indexed as pos[i1*st0 + i2*st1 + i3*st2] (ne/st [0..2]) */
    int64_t half;         /* d/2 */
    posenc_sin_layout layout;
    float x_scale;
    const double *freq;    /* [half], double (the CPU reference uses these) */
    const float *freq_f32; /* [half], the same rounded to f32 (GPU backends) */
};

#endif
