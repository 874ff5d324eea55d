/*
 * gp_impl.h - what the two files of the ggml backend share.
 *
 *   ggml-posenc.c  registry, devices, buffer type, buffers, backend (stream)
 *   gp_ops.c       supports_op and graph_compute: ggml nodes -> posenc calls
 *
 * One posenc context per ggml device, shared by every buffer and backend instance of the
 * device: posenc buffers belong to a context and its ops run on it. posenc allows one
 * thread per context at a time, ggml may use a device from several threads, so every call
 * into posenc on a device holds dev->lock.
 */
#ifndef GP_IMPL_H
#define GP_IMPL_H

#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "posenc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* posenc buffers are not host memory: ggml gets this fake base address and every
 * tensor's data pointer is base + its byte offset in the buffer (ggml's Vulkan backend
 * does the same). Aligned to every alignment ggml may ask of it. */
#define GP_BASE ((char *)(uintptr_t)0x1000)
#define GP_ALIGNMENT 256

struct gp_device {
    char name[32];         /* "PosencCPU", "PosencOpenCL0", "PosencVulkan0" */
    char description[192]; /* "posenc cpu: <device name>" */
    posenc_backend_kind kind;
    int32_t index;         /* device index within the posenc backend */
    posenc_context *ctx;
    struct posenc_device_info info;
    pthread_mutex_t lock;
    struct ggml_backend_buffer_type buft;
    struct ggml_backend_device dev;
};

struct gp_buffer {
    struct gp_device *dev;
    posenc_buffer *pb;
};

/* Abort with posenc's message: ggml's buffer and compute interfaces return void or a bare
 * status, and a silently wrong tensor is worse than a stop (ggml's own backends abort on
 * device errors too). Only for failures of calls that supports_op said would work. */
#define GP_CHECK(dev, expr, what)                                                            \
    do {                                                                                     \
        posenc_status gp_st_ = (expr);                                                       \
        if (gp_st_ != POSENC_OK)                                                             \
            GGML_ABORT("posenc (%s): %s failed: %s: %s", (dev)->name, (what),                \
                       posenc_status_string(gp_st_), posenc_context_last_error((dev)->ctx)); \
    } while (0)

/* The posenc buffer behind a tensor allocated in one of our buffers (views included). */
static inline posenc_buffer *gp_tensor_buffer(const struct ggml_tensor *t)
{
    return ((struct gp_buffer *)t->buffer->context)->pb;
}

static inline size_t gp_tensor_offset(const struct ggml_tensor *t)
{
    return (size_t)((const char *)t->data - GP_BASE);
}

/* Fill bytes [offset, offset + size) of b with `value` (dev->lock held). */
void gp_fill_bytes(struct gp_device *dev, posenc_buffer *b, size_t offset, size_t size,
                   uint8_t value);

/* gp_ops.c */
bool gp_supports_op(const struct gp_device *dev, const struct ggml_tensor *op);
enum ggml_status gp_graph_compute(struct gp_device *dev, struct ggml_cgraph *cgraph);

#endif
