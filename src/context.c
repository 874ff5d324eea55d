/* context.c - public entry points for contexts and buffers: argument checks, backend
 * selection, dispatch through the vtable. */
#include "backend.h"
#include "split.h"
#include "preset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *posenc_backend_name(posenc_backend_kind kind)
{
    switch (kind) {
    case POSENC_BACKEND_AUTO: return "auto";
    case POSENC_BACKEND_CPU: return "cpu";
    case POSENC_BACKEND_OPENCL: return "opencl";
    case POSENC_BACKEND_VULKAN: return "vulkan";
    }
    return "?";
}

static bool parse_backend(const char *s, posenc_backend_kind *out)
{
    for (int k = 0; k < POSENC_BACKEND_COUNT; k++)
        if (strcasecmp(s, posenc_backend_name((posenc_backend_kind)k)) == 0) {
            *out = (posenc_backend_kind)k;
            return true;
        }
    return false;
}

static const char *unavailable_reason(posenc_backend_kind kind)
{
    (void)kind;
    return "posenc was built without it (its development packages or glslc were missing "
           "at configure time)";
}

/* Try to open `kind` on ctx. Leaves the error in ctx->last_error on failure. */
static posenc_status open_backend(posenc_context *ctx, posenc_backend_kind kind, int32_t device,
                                  bool gpu_only)
{
    const struct pe_backend_vtable *vt = pe_backend_lookup(kind);
    if (!vt)
        return pe_error(ctx, POSENC_ERR_UNAVAILABLE, "backend %s is unavailable: %s",
                        posenc_backend_name(kind), unavailable_reason(kind));
    struct pe_backend *be = NULL;
    posenc_status st = vt->create(ctx, device, gpu_only, &be);
    if (st != POSENC_OK)
        return st;
    if (!be || be->vt != vt || be->ctx != ctx) {
        if (be)
            vt->destroy(be);
        return pe_error(ctx, POSENC_ERR_INTERNAL, "backend %s returned a malformed object",
                        vt->name);
    }
    ctx->backend = be;
    ctx->kind = kind;
    ctx->device = device;
    return POSENC_OK;
}

/* Allocate a context and check the params fields both creation paths share. On failure
 * the message is in out_error and *out is NULL. */
static posenc_status context_begin(const struct posenc_context_params *params,
                                   posenc_context **out_ctx, char *out_error, size_t error_size,
                                   struct posenc_context_params *p, posenc_context **out)
{
    *out = NULL;
    memset(p, 0, sizeof(*p));
    if (params)
        *p = *params;
    if (out_error && error_size)
        out_error[0] = '\0';
    if (!out_ctx) {
        pe_strlcpy(out_error, "out_ctx is NULL", error_size);
        pe_set_thread_error("out_ctx is NULL");
        return POSENC_ERR_INVALID_ARGUMENT;
    }
    *out_ctx = NULL;

    posenc_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        pe_strlcpy(out_error, "out of host memory allocating the context", error_size);
        pe_set_thread_error("out of host memory allocating the context");
        return POSENC_ERR_OUT_OF_MEMORY;
    }
    atomic_init(&ctx->owner, 0);
    ctx->log_fn = p->log_fn;
    ctx->log_level = p->log_level;
    ctx->log_user_data = p->log_user_data;
    ctx->flags = p->flags;

    posenc_status st = POSENC_OK;
    for (size_t i = 0; i < PE_ARRAY_SIZE(p->reserved) && st == POSENC_OK; i++)
        if (p->reserved[i] != 0)
            st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->reserved[%zu] = %u, must be 0",
                          i, p->reserved[i]);
    if (st != POSENC_OK) {
    } else if ((int)p->backend < 0 || (int)p->backend >= POSENC_BACKEND_COUNT) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "params->backend = %d is not a posenc_backend_kind", (int)p->backend);
    } else if (p->flags & ~(uint32_t)(POSENC_CONTEXT_DEBUG | POSENC_CONTEXT_CPU_REFERENCE)) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->flags = 0x%x has unknown bits",
                      p->flags);
    } else if (p->n_threads < 0 || p->n_threads > PE_MAX_THREADS) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "params->n_threads = %d must be in [0, %d] (0 = all online cores)",
                      (int)p->n_threads, PE_MAX_THREADS);
    } else if ((int)p->log_level < 0 || p->log_level > POSENC_LOG_DEBUG) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "params->log_level = %d is not a posenc_log_level", (int)p->log_level);
    }
    if (st != POSENC_OK) {
        pe_strlcpy(out_error, ctx->last_error, error_size);
        free(ctx);
        return st;
    }
    ctx->n_threads = p->n_threads;
    const char *env = getenv("POSENC_DEBUG");
    if (env && *env && strcmp(env, "0") != 0)
        ctx->flags |= POSENC_CONTEXT_DEBUG;
    env = getenv("POSENC_MAX_BINDING");
    if (env && *env) {
        /* Bytes; at least 1 KiB so that one row of most ops still fits. */
        char *end;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        /* ERANGE: more than 2^64 - 1 (strtoull would give ULLONG_MAX, no limit at all) */
        if (*end != '\0' || env[0] < '0' || env[0] > '9' || errno == ERANGE || v < 1024) {
            st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                          "POSENC_MAX_BINDING = \"%s\" is not a byte count in [1024, 2^64 - 1]",
                          env);
            pe_strlcpy(out_error, ctx->last_error, error_size);
            free(ctx);
            return st;
        }
        ctx->max_binding_env = (uint64_t)v;
    }
    /* POSENC_DEVICE_PRESET (test only): a small device's limits, applied by the GPU
     * backends when they open their device (src/preset.h) */
    st = pe_preset_from_env(ctx, &ctx->preset);
    if (st != POSENC_OK) {
        pe_strlcpy(out_error, ctx->last_error, error_size);
        free(ctx);
        return st;
    }
    *out = ctx;
    return POSENC_OK;
}

posenc_status posenc_context_create(const struct posenc_context_params *params,
                                    posenc_context **out_ctx, char *out_error, size_t error_size)
{
    struct posenc_context_params p;
    posenc_context *ctx;
    posenc_status st = context_begin(params, out_ctx, out_error, error_size, &p, &ctx);
    if (st != POSENC_OK)
        return st;

    /* Environment overrides. */
    const char *env = getenv("POSENC_BACKEND");
    if (p.backend == POSENC_BACKEND_AUTO && env && *env) {
        if (!parse_backend(env, &p.backend)) {
            st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                          "POSENC_BACKEND = \"%s\" is not auto|cpu|opencl|vulkan", env);
            goto fail;
        }
    }
    env = getenv("POSENC_DEVICE");
    if (p.device == 0 && env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end != '\0' || v < 0 || v > INT32_MAX) {
            st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                          "POSENC_DEVICE = \"%s\" is not a device index", env);
            goto fail;
        }
        p.device = (int32_t)v;
    }
    if (p.device < 0) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "params->device = %d is negative",
                      (int)p.device);
        goto fail;
    }

    if (p.backend == POSENC_BACKEND_AUTO) {
        static const posenc_backend_kind gpu_order[] = {POSENC_BACKEND_VULKAN,
                                                        POSENC_BACKEND_OPENCL};
        st = POSENC_ERR_UNAVAILABLE;
        for (size_t i = 0; i < PE_ARRAY_SIZE(gpu_order) && st != POSENC_OK; i++) {
            /* A probe that fails is not an error of the call: its reason is logged
             * below, once, at INFO or WARN. */
            ctx->quiet_errors = true;
            st = open_backend(ctx, gpu_order[i], p.device, true);
            ctx->quiet_errors = false;
            /* No driver or no GPU is the normal case on many machines; a driver that
             * is there and fails is worth a warning. */
            if (st != POSENC_OK)
                pe_log(ctx, st == POSENC_ERR_UNAVAILABLE ? POSENC_LOG_INFO : POSENC_LOG_WARN,
                       "auto: %s skipped: %s", posenc_backend_name(gpu_order[i]),
                       ctx->last_error);
        }
        if (st != POSENC_OK)
            st = open_backend(ctx, POSENC_BACKEND_CPU, 0, false);
    } else {
        st = open_backend(ctx, p.backend, p.device, false);
    }
    if (st != POSENC_OK)
        goto fail;
    pe_log(ctx, POSENC_LOG_INFO, "using backend %s, device %d", posenc_backend_name(ctx->kind),
           (int)ctx->device);
    pe_clear_error(ctx);
    *out_ctx = ctx;
    return POSENC_OK;

fail:
    pe_strlcpy(out_error, ctx->last_error, error_size);
    pe_set_thread_error("%s", ctx->last_error);
    free(ctx);
    return st;
}

/* The host fields of the backend `kind` does not use must be NULL: a mix-up (a Vulkan
 * handle passed for OpenCL) is then an error instead of silently ignored. */
static posenc_status check_host_fields(posenc_context *ctx, const struct posenc_host_device *h)
{
    for (size_t i = 0; i < PE_ARRAY_SIZE(h->reserved); i++)
        if (h->reserved[i] != 0)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "host->reserved[%zu] = %u, must be 0", i, h->reserved[i]);
    const struct {
        const char *name;
        bool set;
        posenc_backend_kind user;
        bool required; /* a handle (vk_queue_family 0 is a valid family) */
    } fields[] = {
        {"cl_context", h->cl_context != NULL, POSENC_BACKEND_OPENCL, true},
        {"cl_queue", h->cl_queue != NULL, POSENC_BACKEND_OPENCL, true},
        {"vk_instance", h->vk_instance != NULL, POSENC_BACKEND_VULKAN, true},
        {"vk_physical_device", h->vk_physical_device != NULL, POSENC_BACKEND_VULKAN, true},
        {"vk_device", h->vk_device != NULL, POSENC_BACKEND_VULKAN, true},
        {"vk_queue", h->vk_queue != NULL, POSENC_BACKEND_VULKAN, true},
        {"vk_queue_family", h->vk_queue_family != 0, POSENC_BACKEND_VULKAN, false},
        {"vk_get_instance_proc_addr", h->vk_get_instance_proc_addr != NULL,
         POSENC_BACKEND_VULKAN, false},
    };
    for (size_t i = 0; i < PE_ARRAY_SIZE(fields); i++) {
        if (fields[i].user == h->backend && fields[i].required && !fields[i].set)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "host->%s is NULL", fields[i].name);
        if (fields[i].user != h->backend && fields[i].set)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "host->%s is set, but host->backend is %s: only %s's fields may be",
                            fields[i].name, posenc_backend_name(h->backend),
                            posenc_backend_name(h->backend));
    }
    return POSENC_OK;
}

posenc_status posenc_context_create_from_host(const struct posenc_context_params *params,
                                              const struct posenc_host_device *host,
                                              posenc_context **out_ctx, char *out_error,
                                              size_t error_size)
{
    struct posenc_context_params p;
    posenc_context *ctx;
    posenc_status st = context_begin(params, out_ctx, out_error, error_size, &p, &ctx);
    if (st != POSENC_OK)
        return st;
    const struct pe_backend_vtable *vt = NULL;
    struct pe_backend *be = NULL;
    if (!host) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "host is NULL");
        goto fail;
    }
    if (host->backend == POSENC_BACKEND_CPU) {
        st = pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                      "host->backend = cpu: the CPU backend has no host-owned device (use "
                      "posenc_context_create)");
        goto fail;
    }
    if (host->backend != POSENC_BACKEND_OPENCL && host->backend != POSENC_BACKEND_VULKAN) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "host->backend = %d (%s) is not POSENC_BACKEND_OPENCL or "
                      "POSENC_BACKEND_VULKAN",
                      (int)host->backend, posenc_backend_name(host->backend));
        goto fail;
    }
    if (p.backend != POSENC_BACKEND_AUTO && p.backend != host->backend) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "params->backend = %s, but host->backend = %s (pass AUTO or the same)",
                      posenc_backend_name(p.backend), posenc_backend_name(host->backend));
        goto fail;
    }
    if (p.device != 0) {
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                      "params->device = %d: must be 0 with a host-owned device (the host "
                      "handles pick it)",
                      (int)p.device);
        goto fail;
    }
    if ((st = check_host_fields(ctx, host)) != POSENC_OK)
        goto fail;
    vt = pe_backend_lookup(host->backend);
    if (!vt) {
        st = pe_error(ctx, POSENC_ERR_UNAVAILABLE, "backend %s is unavailable: %s",
                      posenc_backend_name(host->backend), unavailable_reason(host->backend));
        goto fail;
    }
    if (!vt->create_from_host) {
        st = pe_error(ctx, POSENC_ERR_UNSUPPORTED, "backend %s has no host-owned devices",
                      vt->name);
        goto fail;
    }
    if ((st = vt->create_from_host(ctx, host, &be)) != POSENC_OK)
        goto fail;
    if (!be || be->vt != vt || be->ctx != ctx) {
        if (be)
            vt->destroy(be);
        st = pe_error(ctx, POSENC_ERR_INTERNAL, "backend %s returned a malformed object",
                      vt->name);
        goto fail;
    }
    ctx->backend = be;
    ctx->kind = host->backend;
    ctx->device = -1;
    ctx->host_owned = true;
    pe_log(ctx, POSENC_LOG_INFO, "using backend %s on the application's device",
           posenc_backend_name(ctx->kind));
    pe_clear_error(ctx);
    *out_ctx = ctx;
    return POSENC_OK;

fail:
    pe_strlcpy(out_error, ctx->last_error, error_size);
    pe_set_thread_error("%s", ctx->last_error);
    free(ctx);
    return st;
}

void posenc_context_destroy(posenc_context **pctx)
{
    if (!pctx || !*pctx)
        return;
    posenc_context *ctx = *pctx;
    /* A call still running on another thread finishes first (this one cannot refuse). */
    pe_enter_wait(ctx);
    if (ctx->backend)
        ctx->backend->vt->finish(ctx->backend);
    pe_scratch_release(ctx); /* the context's own buffers first: not the user's to free */
    if (ctx->live_buffers != 0) {
        /* A usage error, but the device objects must not outlive the device: release
         * their memory now and leave the handles as orphans that posenc_buffer_destroy
         * still accepts (it then frees only the handle). */
        pe_log(ctx, POSENC_LOG_ERROR,
               "posenc_context_destroy: %lld buffers of this context were not destroyed first",
               (long long)ctx->live_buffers);
        for (posenc_buffer *b = ctx->buffers; b; b = b->next) {
            if (b->host_memory)
                ctx->backend->vt->buffer_unwrap_host(ctx->backend, b->mem);
            else
                ctx->backend->vt->buffer_destroy(ctx->backend, b->mem);
            b->mem = NULL;
            b->ctx = NULL;
        }
    }
    if (ctx->backend)
        ctx->backend->vt->destroy(ctx->backend);
    pe_rope_cache_free(ctx);
    free(ctx);
    *pctx = NULL;
}

posenc_status posenc_context_set_check_only(posenc_context *ctx, int enable)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    ctx->check_only = enable != 0;
    return POSENC_OK;
}

posenc_status posenc_context_finish(posenc_context *ctx)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    return ctx->backend->vt->finish(ctx->backend);
}

posenc_status posenc_context_flush(posenc_context *ctx)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    return ctx->backend->vt->flush(ctx->backend);
}

posenc_status posenc_context_get_info(const posenc_context *ctx,
                                      struct posenc_device_info *out_info)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER((posenc_context *)ctx);
    if (!out_info)
        return pe_error((posenc_context *)ctx, POSENC_ERR_INVALID_ARGUMENT, "out_info is NULL");
    memset(out_info, 0, sizeof(*out_info));
    ctx->backend->vt->get_info(ctx->backend, out_info);
    out_info->max_binding_size = pe_binding_limit(ctx, NULL);
    out_info->backend = ctx->kind;
    out_info->device_index = ctx->device;
    return POSENC_OK;
}

posenc_status posenc_backend_device_count(posenc_backend_kind backend, int32_t *out_count,
                                          char *out_reason, size_t reason_size)
{
    if (out_reason && reason_size)
        out_reason[0] = '\0';
    if (!out_count) {
        pe_strlcpy(out_reason, "out_count is NULL", reason_size);
        pe_set_thread_error("out_count is NULL");
        return POSENC_ERR_INVALID_ARGUMENT;
    }
    *out_count = 0;
    if ((int)backend <= (int)POSENC_BACKEND_AUTO || (int)backend >= POSENC_BACKEND_COUNT) {
        char msg[96];
        snprintf(msg, sizeof(msg), "backend = %d is not CPU, OPENCL or VULKAN", (int)backend);
        pe_strlcpy(out_reason, msg, reason_size);
        pe_set_thread_error("%s", msg);
        return POSENC_ERR_INVALID_ARGUMENT;
    }
    const struct pe_backend_vtable *vt = pe_backend_lookup(backend);
    if (!vt) {
        char msg[256];
        snprintf(msg, sizeof(msg), "backend %s is unavailable: %s", posenc_backend_name(backend),
                 unavailable_reason(backend));
        pe_strlcpy(out_reason, msg, reason_size);
        pe_set_thread_error("%s", msg);
        return POSENC_ERR_UNAVAILABLE;
    }
    char why[PE_ERR_MAX] = "";
    posenc_status st = vt->device_count(out_count, why, sizeof(why));
    if (st == POSENC_OK && *out_count == 0) {
        snprintf(why, sizeof(why), "the %s driver reports no device",
                 posenc_backend_name(backend));
        st = POSENC_ERR_UNAVAILABLE;
    }
    pe_strlcpy(out_reason, why, reason_size);
    if (st != POSENC_OK)
        pe_set_thread_error("%s", why);
    return st;
}

/* ---- buffers ------------------------------------------------------------------------ */

/* Test-only fault injection (tests/test_faults.c): while > 0, every posenc_buffer_create
 * and every device allocation a backend makes for itself (pe_fault_device_alloc: OpenCL
 * attention staging and uploaded tables, Vulkan table / staging buffers) counts it down,
 * and the one that brings it to 0 fails as the device would when out of memory. Not public
 * API (hidden, in no header); 0 in normal use, where it costs one compare per allocation.
 * Only a single-threaded test may set it. */
int64_t pe_fault_countdown;

bool pe_fault_device_alloc(void)
{
    return pe_fault_countdown > 0 && --pe_fault_countdown == 0;
}

/* Test-only, likewise: while > 0, every program build / pipeline creation a backend makes
 * on first use (pe_fault_build: OpenCL programs, Vulkan pipelines) counts it down, and the
 * one that brings it to 0 fails as a driver's compiler would (BACKEND). */
int64_t pe_fault_build_countdown;

bool pe_fault_build(void)
{
    return pe_fault_build_countdown > 0 && --pe_fault_build_countdown == 0;
}

/* Make b a live buffer of ctx (destroyed with the context if the user forgets it). */
static void buffer_link(posenc_context *ctx, posenc_buffer *b, size_t size)
{
    b->ctx = ctx;
    b->size = size;
    b->id = ++ctx->next_buffer_id;
    b->next = ctx->buffers;
    if (ctx->buffers)
        ctx->buffers->prev = b;
    ctx->buffers = b;
    ctx->live_buffers++;
}

posenc_status posenc_buffer_create(posenc_context *ctx, size_t size, posenc_buffer **out_buffer)
{
    if (out_buffer)
        *out_buffer = NULL;
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    if (!out_buffer)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "out_buffer is NULL");
    if (size == 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "size = 0: buffers must be non-empty");
    posenc_buffer *b = calloc(1, sizeof(*b));
    if (!b)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for a buffer handle");
    posenc_status st;
    if (pe_fault_device_alloc())
        st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                      "out of device memory for a %zu-byte buffer (injected fault)", size);
    else
        st = ctx->backend->vt->buffer_create(ctx->backend, size, &b->mem);
    if (st != POSENC_OK) {
        free(b);
        return st;
    }
    buffer_link(ctx, b, size);
    *out_buffer = b;
    return POSENC_OK;
}

/* Checks both wrap functions share; on success *out_b is a fresh handle to fill. */
static posenc_status wrap_begin(posenc_context *ctx, posenc_backend_kind kind, const char *fn,
                                bool handle_null, const char *handle_name,
                                posenc_buffer **out_buffer, posenc_buffer **out_b)
{
    *out_b = NULL;
    if (!out_buffer)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "out_buffer is NULL");
    if (ctx->kind != kind)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s: ctx is a %s context, not %s", fn, posenc_backend_name(ctx->kind),
                        posenc_backend_name(kind));
    if (!ctx->host_owned)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "%s: ctx was made by posenc_context_create, on a device posenc owns; "
                        "wrapping needs a context from posenc_context_create_from_host",
                        fn);
    if (handle_null)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "%s is NULL", handle_name);
    *out_b = calloc(1, sizeof(**out_b));
    if (!*out_b)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for a buffer handle");
    return POSENC_OK;
}

posenc_status posenc_buffer_wrap_opencl(posenc_context *ctx, void *cl_mem,
                                        posenc_buffer **out_buffer)
{
    if (out_buffer)
        *out_buffer = NULL;
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    posenc_buffer *b;
    PE_RETURN_IF_ERROR(wrap_begin(ctx, POSENC_BACKEND_OPENCL, "posenc_buffer_wrap_opencl",
                                  cl_mem == NULL, "cl_mem", out_buffer, &b));
    size_t size = 0;
    posenc_status st = ctx->backend->vt->buffer_wrap_opencl
                           ? ctx->backend->vt->buffer_wrap_opencl(ctx->backend, cl_mem, &size,
                                                                  &b->mem)
                           : pe_error(ctx, POSENC_ERR_INTERNAL, "no buffer_wrap_opencl slot");
    if (st != POSENC_OK) {
        free(b);
        return st;
    }
    b->wrapped = true;
    buffer_link(ctx, b, size);
    *out_buffer = b;
    return POSENC_OK;
}

posenc_status posenc_buffer_wrap_vulkan(posenc_context *ctx, uint64_t vk_buffer, uint64_t size,
                                        posenc_buffer **out_buffer)
{
    if (out_buffer)
        *out_buffer = NULL;
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    posenc_buffer *b;
    PE_RETURN_IF_ERROR(wrap_begin(ctx, POSENC_BACKEND_VULKAN, "posenc_buffer_wrap_vulkan",
                                  vk_buffer == 0, "vk_buffer (VK_NULL_HANDLE)", out_buffer, &b));
    posenc_status st;
    if (size == 0)
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "size = 0: buffers must be non-empty");
    else if ((uint64_t)(size_t)size != size)
        st = pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "size = %llu does not fit in size_t",
                      (unsigned long long)size);
    else if (!ctx->backend->vt->buffer_wrap_vulkan)
        st = pe_error(ctx, POSENC_ERR_INTERNAL, "no buffer_wrap_vulkan slot");
    else
        st = ctx->backend->vt->buffer_wrap_vulkan(ctx->backend, vk_buffer, size, &b->mem);
    if (st != POSENC_OK) {
        free(b);
        return st;
    }
    b->wrapped = true;
    buffer_link(ctx, b, (size_t)size);
    *out_buffer = b;
    return POSENC_OK;
}

/* The alignment posenc_buffer_wrap_host needs on ctx, or UNSUPPORTED naming why (fn is
 * the public function, for the message). */
static posenc_status host_alignment(posenc_context *ctx, const char *fn, size_t *out)
{
    *out = 0;
    const struct pe_backend_vtable *vt = ctx->backend->vt;
    if (!vt->host_alignment || !vt->buffer_wrap_host || !vt->buffer_unwrap_host)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "%s: the %s backend cannot wrap host memory%s", fn, vt->name,
                        ctx->kind == POSENC_BACKEND_VULKAN
                            ? " (it would need VK_EXT_external_memory_host, which posenc does "
                              "not use); use posenc_buffer_create + posenc_buffer_write / "
                              "_read, or posenc_buffer_wrap_vulkan on a host-owned device"
                            : "");
    return vt->host_alignment(ctx->backend, out);
}

posenc_status posenc_buffer_host_alignment(posenc_context *ctx, size_t *out_alignment)
{
    if (out_alignment)
        *out_alignment = 0;
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    if (!out_alignment)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "out_alignment is NULL");
    return host_alignment(ctx, "posenc_buffer_host_alignment", out_alignment);
}

posenc_status posenc_buffer_wrap_host(posenc_context *ctx, void *ptr, size_t size,
                                      posenc_buffer **out_buffer)
{
    if (out_buffer)
        *out_buffer = NULL;
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    if (!out_buffer)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "out_buffer is NULL");
    if (!ptr)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "ptr is NULL");
    if (size == 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "size = 0: buffers must be non-empty");
    size_t align;
    PE_RETURN_IF_ERROR(host_alignment(ctx, "posenc_buffer_wrap_host", &align));
    if ((uintptr_t)ptr % align != 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "ptr = %p is not a multiple of %zu bytes, the alignment this %s device "
                        "needs for host memory (posenc_buffer_host_alignment)",
                        ptr, align, ctx->backend->vt->name);
    if (size > UINTPTR_MAX - (uintptr_t)ptr)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "ptr = %p + size = %zu wraps around the address space", ptr, size);
    posenc_buffer *b = calloc(1, sizeof(*b));
    if (!b)
        return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory for a buffer handle");
    posenc_status st;
    if (pe_fault_device_alloc()) /* test-only: a device object (OpenCL) or a handle */
        st = pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                      "out of device memory wrapping %zu bytes of host memory (injected fault)",
                      size);
    else
        st = ctx->backend->vt->buffer_wrap_host(ctx->backend, ptr, size, &b->mem);
    if (st != POSENC_OK) {
        free(b);
        return st;
    }
    /* The host writes it behind posenc's back: never cache what is read from it. */
    b->wrapped = true;
    b->host_memory = true;
    buffer_link(ctx, b, size);
    *out_buffer = b;
    return POSENC_OK;
}

/* The front end of posenc_opencl_last_event / _wait_events on a backend without them. */
static posenc_status no_events(posenc_context *ctx, const char *fn)
{
    return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                    "%s: ctx is a %s context; events are OpenCL cl_events (%s)", fn,
                    posenc_backend_name(ctx->kind),
                    ctx->kind == POSENC_BACKEND_CPU
                        ? "CPU ops have finished when they return"
                        : "wait with posenc_context_finish");
}

posenc_status posenc_opencl_last_event(posenc_context *ctx, void **out_cl_event)
{
    if (out_cl_event)
        *out_cl_event = NULL;
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    if (!out_cl_event)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "out_cl_event is NULL");
    if (!ctx->backend->vt->last_event)
        return no_events(ctx, "posenc_opencl_last_event");
    return ctx->backend->vt->last_event(ctx->backend, out_cl_event);
}

posenc_status posenc_opencl_wait_events(posenc_context *ctx, int32_t n_events,
                                        void *const *cl_events)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    if (!ctx->backend->vt->wait_events)
        return no_events(ctx, "posenc_opencl_wait_events");
    if (n_events < 0)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "n_events = %d is negative",
                        (int)n_events);
    if (n_events > 0 && !cl_events)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "cl_events is NULL with n_events = %d",
                        (int)n_events);
    for (int32_t i = 0; i < n_events; i++)
        if (!cl_events[i])
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "cl_events[%d] is NULL", (int)i);
    if (n_events == 0)
        return POSENC_OK;
    return ctx->backend->vt->wait_events(ctx->backend, n_events, cl_events);
}

void posenc_buffer_destroy(posenc_buffer **pbuf)
{
    if (!pbuf || !*pbuf)
        return;
    posenc_buffer *b = *pbuf;
    posenc_context *ctx = b->ctx;
    if (ctx) { /* else an orphan of a destroyed context: only the handle is left */
        pe_enter_wait(ctx); /* cannot refuse: waits for a call on another thread */
        if (b->host_memory)
            ctx->backend->vt->buffer_unwrap_host(ctx->backend, b->mem);
        else
            ctx->backend->vt->buffer_destroy(ctx->backend, b->mem);
        if (b->prev)
            b->prev->next = b->next;
        else
            ctx->buffers = b->next;
        if (b->next)
            b->next->prev = b->prev;
        ctx->live_buffers--;
        pe_leave(ctx);
    }
    free(b);
    *pbuf = NULL;
}

size_t posenc_buffer_size(const posenc_buffer *buffer)
{
    return buffer ? buffer->size : 0;
}

posenc_context *posenc_buffer_context(const posenc_buffer *buffer)
{
    return buffer ? buffer->ctx : NULL;
}

static posenc_status check_range(posenc_buffer *b, size_t offset, const void *host, size_t size,
                                 const char *host_name)
{
    if (!host && size)
        return pe_error(b->ctx, POSENC_ERR_INVALID_ARGUMENT, "%s is NULL", host_name);
    if (offset > b->size || size > b->size - offset)
        return pe_error(b->ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "offset + size = %zu + %zu is past the end of the %zu-byte buffer", offset,
                        size, b->size);
    return POSENC_OK;
}

posenc_status posenc_buffer_write(posenc_buffer *buffer, size_t offset, const void *src,
                                  size_t size)
{
    if (!buffer || !buffer->ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                        buffer ? "buffer's context was destroyed" : "buffer is NULL");
    posenc_context *ctx = buffer->ctx;
    PE_ENTER(ctx);
    PE_RETURN_IF_ERROR(check_range(buffer, offset, src, size, "src"));
    if (size == 0)
        return POSENC_OK;
    pe_buffer_touch(buffer);
    return ctx->backend->vt->buffer_write(ctx->backend, buffer->mem, offset, src, size);
}

posenc_status posenc_buffer_read(posenc_buffer *buffer, size_t offset, void *dst, size_t size)
{
    if (!buffer || !buffer->ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT,
                        buffer ? "buffer's context was destroyed" : "buffer is NULL");
    posenc_context *ctx = buffer->ctx;
    PE_ENTER(ctx);
    PE_RETURN_IF_ERROR(check_range(buffer, offset, dst, size, "dst"));
    if (size == 0)
        return POSENC_OK;
    return ctx->backend->vt->buffer_read(ctx->backend, buffer->mem, offset, dst, size);
}
