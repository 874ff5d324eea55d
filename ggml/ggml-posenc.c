/*
 * ggml-posenc.c - posenc as a dynamically loadable ggml backend: the registry, one ggml
 * device per posenc device, the buffer type and buffers, and the backend (stream). The
 * ops are in gp_ops.c. See ggml-posenc.h and docs/ggml.md.
 */
#include "ggml-posenc.h"
#include "gp_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GP_MAX_DEVICES 16

/* ---- logging ---------------------------------------------------------------------------- */

/* posenc's WARN messages (driver and validation-layer messages, fallbacks) go to ggml's
 * log, so a ggml program sees them where it sees ggml's own. */
static void gp_log(posenc_log_level level, const char *msg, void *user)
{
    const struct gp_device *dev = user;
    const char *name = dev ? dev->name : "posenc";
    if (level == POSENC_LOG_ERROR)
        GGML_LOG_ERROR("%s: %s\n", name, msg);
    else if (level == POSENC_LOG_WARN)
        GGML_LOG_WARN("%s: %s\n", name, msg);
    else
        GGML_LOG_DEBUG("%s: %s\n", name, msg);
}

/* ---- buffers ---------------------------------------------------------------------------- */

void gp_fill_bytes(struct gp_device *dev, posenc_buffer *b, size_t offset, size_t size,
                   uint8_t value)
{
    if (size == 0)
        return;
    /* the 4-aligned middle as int32 words holding the byte four times, on the device */
    size_t head = (4 - offset % 4) % 4;
    if (head > size)
        head = size;
    size_t words = (size - head) / 4;
    size_t tail = size - head - 4 * words;
    uint8_t edge[4];
    memset(edge, value, sizeof(edge));
    if (head)
        GP_CHECK(dev, posenc_buffer_write(b, offset, edge, head), "posenc_buffer_write");
    if (words) {
        uint32_t u = 0x01010101u * value;
        int32_t w;
        memcpy(&w, &u, sizeof(w));
        posenc_tensor t = posenc_tensor_contiguous(b, offset + head, POSENC_DTYPE_I32,
                                                   (int64_t)words, 1, 1, 1);
        GP_CHECK(dev, posenc_fill(dev->ctx, &t, (double)w), "posenc_fill");
    }
    if (tail)
        GP_CHECK(dev, posenc_buffer_write(b, offset + head + 4 * words, edge, tail),
                 "posenc_buffer_write");
}

static void gp_buffer_free(ggml_backend_buffer_t buffer)
{
    struct gp_buffer *gb = buffer->context;
    pthread_mutex_lock(&gb->dev->lock);
    posenc_buffer_destroy(&gb->pb);
    pthread_mutex_unlock(&gb->dev->lock);
    free(gb);
}

static void *gp_buffer_get_base(ggml_backend_buffer_t buffer)
{
    (void)buffer;
    return GP_BASE;
}

static void gp_buffer_memset_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor *tensor,
                                    uint8_t value, size_t offset, size_t size)
{
    struct gp_buffer *gb = buffer->context;
    pthread_mutex_lock(&gb->dev->lock);
    gp_fill_bytes(gb->dev, gb->pb, gp_tensor_offset(tensor) + offset, size, value);
    pthread_mutex_unlock(&gb->dev->lock);
}

static void gp_buffer_set_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor *tensor,
                                 const void *data, size_t offset, size_t size)
{
    struct gp_buffer *gb = buffer->context;
    pthread_mutex_lock(&gb->dev->lock);
    GP_CHECK(gb->dev, posenc_buffer_write(gb->pb, gp_tensor_offset(tensor) + offset, data, size),
             "posenc_buffer_write");
    pthread_mutex_unlock(&gb->dev->lock);
}

static void gp_buffer_get_tensor(ggml_backend_buffer_t buffer, const struct ggml_tensor *tensor,
                                 void *data, size_t offset, size_t size)
{
    struct gp_buffer *gb = buffer->context;
    pthread_mutex_lock(&gb->dev->lock);
    GP_CHECK(gb->dev, posenc_buffer_read(gb->pb, gp_tensor_offset(tensor) + offset, data, size),
             "posenc_buffer_read");
    pthread_mutex_unlock(&gb->dev->lock);
}

/* dst is in `buffer`; src may be anywhere. Same layout, ggml_nbytes(src) bytes. */
static bool gp_buffer_cpy_tensor(ggml_backend_buffer_t buffer, const struct ggml_tensor *src,
                                 struct ggml_tensor *dst)
{
    struct gp_buffer *gb = buffer->context;
    struct gp_device *dev = gb->dev;
    size_t n = ggml_nbytes(src), so, doff = gp_tensor_offset(dst);
    if (ggml_backend_buffer_is_host(src->buffer)) {
        pthread_mutex_lock(&dev->lock);
        GP_CHECK(dev, posenc_buffer_write(gb->pb, doff, src->data, n), "posenc_buffer_write");
        pthread_mutex_unlock(&dev->lock);
        return true;
    }
    if (src->buffer->buft != &dev->buft)
        return false; /* another device: ggml goes through host memory */
    so = gp_tensor_offset(src);
    /* raw bytes as int32 words (a same-dtype copy is exact on every backend); ggml falls
     * back to a read and a write for what is not word-aligned */
    if (n % 4 || so % 4 || doff % 4)
        return false;
    posenc_tensor s = posenc_tensor_contiguous(gp_tensor_buffer(src), so, POSENC_DTYPE_I32,
                                               (int64_t)(n / 4), 1, 1, 1);
    posenc_tensor d = posenc_tensor_contiguous(gb->pb, doff, POSENC_DTYPE_I32,
                                               (int64_t)(n / 4), 1, 1, 1);
    pthread_mutex_lock(&dev->lock);
    GP_CHECK(dev, posenc_copy(dev->ctx, &s, &d), "posenc_copy");
    pthread_mutex_unlock(&dev->lock);
    return true;
}

static void gp_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value)
{
    struct gp_buffer *gb = buffer->context;
    pthread_mutex_lock(&gb->dev->lock);
    gp_fill_bytes(gb->dev, gb->pb, 0, posenc_buffer_size(gb->pb), value);
    pthread_mutex_unlock(&gb->dev->lock);
}

static const struct ggml_backend_buffer_i gp_buffer_iface = {
    .free_buffer = gp_buffer_free,
    .get_base = gp_buffer_get_base,
    .init_tensor = NULL,
    .memset_tensor = gp_buffer_memset_tensor,
    .set_tensor = gp_buffer_set_tensor,
    .get_tensor = gp_buffer_get_tensor,
    .set_tensor_2d = NULL,
    .get_tensor_2d = NULL,
    .cpy_tensor = gp_buffer_cpy_tensor,
    .clear = gp_buffer_clear,
    .reset = NULL,
};

/* ---- buffer type ------------------------------------------------------------------------ */

static const char *gp_buft_get_name(ggml_backend_buffer_type_t buft)
{
    return ((struct gp_device *)buft->context)->name;
}

static ggml_backend_buffer_t gp_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
    struct gp_device *dev = buft->context;
    struct gp_buffer *gb = calloc(1, sizeof(*gb));
    if (!gb)
        return NULL;
    gb->dev = dev;
    pthread_mutex_lock(&dev->lock);
    /* posenc buffers are never empty; ggml asks for 0 bytes for graphs without tensors */
    posenc_status st = posenc_buffer_create(dev->ctx, size ? size : 4, &gb->pb);
    if (st != POSENC_OK)
        GGML_LOG_ERROR("%s: cannot allocate %zu bytes: %s: %s\n", dev->name, size,
                       posenc_status_string(st), posenc_context_last_error(dev->ctx));
    pthread_mutex_unlock(&dev->lock);
    if (st != POSENC_OK) {
        free(gb);
        return NULL; /* ggml reports the failed allocation to its caller */
    }
    return ggml_backend_buffer_init(buft, gp_buffer_iface, gb, size);
}

static size_t gp_buft_get_alignment(ggml_backend_buffer_type_t buft)
{
    (void)buft;
    return GP_ALIGNMENT;
}

static size_t gp_buft_get_max_size(ggml_backend_buffer_type_t buft)
{
    const struct gp_device *dev = buft->context;
    uint64_t m = dev->info.max_buffer_size;
    return m == 0 || m > SIZE_MAX ? SIZE_MAX : (size_t)m;
}

static const struct ggml_backend_buffer_type_i gp_buft_iface = {
    .get_name = gp_buft_get_name,
    .alloc_buffer = gp_buft_alloc_buffer,
    .get_alignment = gp_buft_get_alignment,
    .get_max_size = gp_buft_get_max_size,
    .get_alloc_size = NULL,
    .is_host = NULL,
};

/* ---- backend (stream) ------------------------------------------------------------------- */

static const char *gp_backend_get_name(ggml_backend_t backend)
{
    return ((struct gp_device *)backend->context)->name;
}

static void gp_backend_free(ggml_backend_t backend)
{
    free(backend); /* the device (context, lock) outlives its backends */
}

static void gp_backend_synchronize(ggml_backend_t backend)
{
    struct gp_device *dev = backend->context;
    pthread_mutex_lock(&dev->lock);
    GP_CHECK(dev, posenc_context_finish(dev->ctx), "posenc_context_finish");
    pthread_mutex_unlock(&dev->lock);
}

static enum ggml_status gp_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph *g)
{
    struct gp_device *dev = backend->context;
    pthread_mutex_lock(&dev->lock);
    enum ggml_status st = gp_graph_compute(dev, g);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

static const struct ggml_backend_i gp_backend_iface = {
    .get_name = gp_backend_get_name,
    .free = gp_backend_free,
    .synchronize = gp_backend_synchronize,
    .graph_compute = gp_backend_graph_compute,
};

static ggml_guid_t gp_guid(void)
{
    static ggml_guid guid = {0x70, 0x6f, 0x73, 0x65, 0x6e, 0x63, 0x2d, 0x67,
                             0x67, 0x6d, 0x6c, 0x2d, 0x76, 0x30, 0x31, 0x00};
    return &guid;
}

/* ---- device ----------------------------------------------------------------------------- */

static const char *gp_dev_get_name(ggml_backend_dev_t d)
{
    return ((struct gp_device *)d->context)->name;
}

static const char *gp_dev_get_description(ggml_backend_dev_t d)
{
    return ((struct gp_device *)d->context)->description;
}

static size_t gp_host_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

/* posenc has no query for a GPU's free memory: devices in host memory (posenc's CPU
 * backend, PoCL, lavapipe, integrated GPUs) report the host's; a discrete GPU reports its
 * largest buffer as an estimate of both. */
static void gp_dev_get_memory(ggml_backend_dev_t d, size_t *free_mem, size_t *total)
{
    const struct gp_device *dev = d->context;
    size_t m;
    if (dev->info.type == POSENC_DEVICE_DISCRETE_GPU)
        m = dev->info.max_buffer_size > SIZE_MAX ? SIZE_MAX : (size_t)dev->info.max_buffer_size;
    else
        m = gp_host_memory();
    *free_mem = m;
    *total = m;
}

static enum ggml_backend_dev_type gp_dev_get_type(ggml_backend_dev_t d)
{
    const struct gp_device *dev = d->context;
    switch (dev->info.type) {
    case POSENC_DEVICE_DISCRETE_GPU: return GGML_BACKEND_DEVICE_TYPE_GPU;
    case POSENC_DEVICE_INTEGRATED_GPU: return GGML_BACKEND_DEVICE_TYPE_IGPU;
    default:
        /* posenc's CPU backend and CPU-emulated devices: an accelerator beside ggml's own
         * CPU backend (never GGML_BACKEND_DEVICE_TYPE_CPU, which would compete with it as
         * "the" CPU device in ggml_backend_dev_by_type) */
        return GGML_BACKEND_DEVICE_TYPE_ACCEL;
    }
}

static void gp_dev_get_props(ggml_backend_dev_t d, struct ggml_backend_dev_props *props)
{
    memset(props, 0, sizeof(*props));
    props->name = gp_dev_get_name(d);
    props->description = gp_dev_get_description(d);
    gp_dev_get_memory(d, &props->memory_free, &props->memory_total);
    props->type = gp_dev_get_type(d);
    props->device_id = NULL;
    props->caps.async = false;
    props->caps.host_buffer = false;
    props->caps.buffer_from_host_ptr = false;
    props->caps.events = false;
}

static ggml_backend_t gp_dev_init_backend(ggml_backend_dev_t d, const char *params)
{
    (void)params;
    ggml_backend_t b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->guid = gp_guid();
    b->iface = gp_backend_iface;
    b->device = d;
    b->context = d->context;
    return b;
}

static ggml_backend_buffer_type_t gp_dev_get_buffer_type(ggml_backend_dev_t d)
{
    return &((struct gp_device *)d->context)->buft;
}

static bool gp_dev_supports_op(ggml_backend_dev_t d, const struct ggml_tensor *op)
{
    return gp_supports_op(d->context, op);
}

static bool gp_dev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t buft)
{
    return buft == &((struct gp_device *)d->context)->buft;
}

static const struct ggml_backend_device_i gp_dev_iface = {
    .get_name = gp_dev_get_name,
    .get_description = gp_dev_get_description,
    .get_memory = gp_dev_get_memory,
    .get_type = gp_dev_get_type,
    .get_props = gp_dev_get_props,
    .init_backend = gp_dev_init_backend,
    .get_buffer_type = gp_dev_get_buffer_type,
    .get_host_buffer_type = NULL,
    .buffer_from_host_ptr = NULL,
    .supports_op = gp_dev_supports_op,
    .supports_buft = gp_dev_supports_buft,
    .offload_op = NULL,
    .event_new = NULL,
    .event_free = NULL,
    .event_synchronize = NULL,
};

/* ---- registry --------------------------------------------------------------------------- */

static struct gp_device gp_devices[GP_MAX_DEVICES];
static size_t gp_n_devices;
static struct ggml_backend_reg gp_reg;
static pthread_once_t gp_once = PTHREAD_ONCE_INIT;

static const char *gp_reg_get_name(ggml_backend_reg_t reg)
{
    (void)reg;
    return "Posenc";
}

static size_t gp_reg_get_device_count(ggml_backend_reg_t reg)
{
    (void)reg;
    return gp_n_devices;
}

static ggml_backend_dev_t gp_reg_get_device(ggml_backend_reg_t reg, size_t index)
{
    (void)reg;
    return index < gp_n_devices ? &gp_devices[index].dev : NULL;
}

static const struct ggml_backend_reg_i gp_reg_iface = {
    .get_name = gp_reg_get_name,
    .get_device_count = gp_reg_get_device_count,
    .get_device = gp_reg_get_device,
    .get_proc_address = NULL,
};

/* Open device `index` of posenc backend `kind` as the next ggml device. */
static void gp_add_device(posenc_backend_kind kind, int32_t index, const char *label)
{
    if (gp_n_devices == GP_MAX_DEVICES)
        return;
    struct gp_device *dev = &gp_devices[gp_n_devices];
    memset(dev, 0, sizeof(*dev));
    dev->kind = kind;
    dev->index = index;
    if (kind == POSENC_BACKEND_CPU)
        snprintf(dev->name, sizeof(dev->name), "Posenc%s", label);
    else
        snprintf(dev->name, sizeof(dev->name), "Posenc%s%d", label, (int)index);
    struct posenc_context_params p;
    memset(&p, 0, sizeof(p));
    p.backend = kind;
    p.device = index;
    p.log_fn = gp_log;
    p.log_level = POSENC_LOG_WARN;
    p.log_user_data = dev;
    char err[256] = "";
    posenc_status st = posenc_context_create(&p, &dev->ctx, err, sizeof(err));
    if (st != POSENC_OK) {
        GGML_LOG_WARN("%s: not available: %s: %s\n", dev->name, posenc_status_string(st), err);
        return;
    }
    struct posenc_device_info info;
    posenc_context_get_info(dev->ctx, &info);
    dev->info = info;
    snprintf(dev->description, sizeof(dev->description), "posenc %s: %s",
             posenc_backend_name(kind), info.device_name);
    pthread_mutex_init(&dev->lock, NULL);
    dev->buft = (struct ggml_backend_buffer_type){gp_buft_iface, &dev->dev, dev};
    dev->dev = (struct ggml_backend_device){gp_dev_iface, &gp_reg, dev};
    gp_n_devices++;
}

static void gp_init_once(void)
{
    gp_reg = (struct ggml_backend_reg){GGML_BACKEND_API_VERSION, gp_reg_iface, NULL};
    static const struct {
        posenc_backend_kind kind;
        const char *label;
    } kinds[] = {{POSENC_BACKEND_CPU, "CPU"},
                 {POSENC_BACKEND_OPENCL, "OpenCL"},
                 {POSENC_BACKEND_VULKAN, "Vulkan"}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        int32_t count = 0;
        char why[256] = "";
        if (posenc_backend_device_count(kinds[k].kind, &count, why, sizeof(why)) != POSENC_OK) {
            GGML_LOG_INFO("posenc %s: no devices: %s\n", posenc_backend_name(kinds[k].kind), why);
            continue;
        }
        for (int32_t i = 0; i < count; i++)
            gp_add_device(kinds[k].kind, i, kinds[k].label);
    }
}

ggml_backend_reg_t ggml_backend_posenc_reg(void)
{
    pthread_once(&gp_once, gp_init_once);
    return &gp_reg;
}

/* Any machine can run posenc's CPU backend. */
static int gp_score(void)
{
    return 1;
}

GGML_BACKEND_DL_IMPL(ggml_backend_posenc_reg)
GGML_BACKEND_DL_SCORE_IMPL(gp_score)
