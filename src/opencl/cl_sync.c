/*
 * cl_sync.c - the OpenCL backend's events (posenc_opencl_last_event / _wait_events) and
 * the caller's host memory as buffers (posenc_buffer_wrap_host).
 *
 * Events. Every command posenc enqueues asks for its event and keeps the last one
 * (pe_cl_track, backend_opencl.h): posenc's queues are in order, so that command completes
 * after every earlier one, and its event stands for all of posenc's work so far. Keeping
 * it costs a release of the previous one per command (no difference measured on PoCL:
 * docs/host-device.md).
 * A wait list becomes one barrier (clEnqueueBarrierWithWaitList): everything enqueued
 * after it waits, as an in-order queue's user expects, and no op needs a wait-list
 * argument of its own (CLBlast's GEMMs take none).
 *
 * Host memory. A CL_MEM_USE_HOST_PTR buffer over the caller's memory, only on devices
 * that use host memory in place (CPU devices, CL_DEVICE_HOST_UNIFIED_MEMORY). The spec
 * leaves host access to such memory undefined unless the buffer is mapped, and commands on
 * a mapped buffer undefined too, so posenc keeps the whole buffer mapped (read + write)
 * whenever it is the host's turn -- after the wrap and after each posenc_context_finish
 * -- and unmaps it before its next command (pe_cl_before_enqueue). On a CPU device the map
 * returns the caller's pointer and copies nothing; elsewhere it is what makes the memory
 * current.
 */
#include "backend_opencl.h"

#include <stdlib.h>

/* ---- events --------------------------------------------------------------------------- */

posenc_status pe_cl_last_event(struct pe_backend *base, void **out_event)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    *out_event = NULL;
    cl_int err;
    if (!be->last_event) {
        /* Nothing of posenc's yet: a marker completes after everything before it. */
        cl_event ev = NULL;
        if ((err = clEnqueueMarkerWithWaitList(be->queue, 0, NULL, &ev)) != CL_SUCCESS)
            return pe_cl_fail(base->ctx, "clEnqueueMarkerWithWaitList", err);
        pe_cl_track(be, ev);
    }
    /* A wait on this event from another queue needs the command submitted (spec: "the
     * application must call clFlush"); clWaitForEvents flushes by itself, other queues do
     * not. */
    if ((err = clFlush(be->queue)) != CL_SUCCESS)
        return pe_cl_fail(base->ctx, "clFlush", err);
    if ((err = clRetainEvent(be->last_event)) != CL_SUCCESS)
        return pe_cl_fail(base->ctx, "clRetainEvent", err);
    *out_event = be->last_event;
    return POSENC_OK;
}

posenc_status pe_cl_wait_events(struct pe_backend *base, int32_t n, void *const *events)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    posenc_context *ctx = base->ctx;
    /* Each event checked on its own, so that the message names the one that is wrong
     * (the barrier's CL_INVALID_EVENT_WAIT_LIST / CL_INVALID_CONTEXT would not). */
    for (int32_t i = 0; i < n; i++) {
        cl_context ectx = NULL;
        cl_int err = clGetEventInfo((cl_event)events[i], CL_EVENT_CONTEXT, sizeof(ectx), &ectx,
                                    NULL);
        if (err != CL_SUCCESS)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "cl_events[%d] = %p is not a valid cl_event (clGetEventInfo: %d, "
                            "%s)",
                            (int)i, events[i], (int)err, pe_cl_err_name(err));
        if (ectx != be->context)
            return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                            "cl_events[%d] = %p belongs to cl_context %p, not to this context's "
                            "%p",
                            (int)i, events[i], (void *)ectx, (void *)be->context);
    }
    cl_event ev = NULL;
    cl_int err = clEnqueueBarrierWithWaitList(be->queue, (cl_uint)n, (const cl_event *)events,
                                              &ev);
    if (err != CL_SUCCESS)
        return pe_cl_fail(ctx, "clEnqueueBarrierWithWaitList", err);
    pe_cl_track(be, ev);
    return POSENC_OK;
}

/* ---- host memory ---------------------------------------------------------------------- */

posenc_status pe_cl_host_alignment(struct pe_backend *base, size_t *out_alignment)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    *out_alignment = 0;
    cl_bool unified = CL_FALSE;
    cl_int err = clGetDeviceInfo(be->device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified),
                                 &unified, NULL);
    if (err != CL_SUCCESS)
        unified = CL_FALSE; /* removed in some OpenCL 3.0 drivers: only CPU devices then */
    if (!pe_cl_is_cpu(be) && !unified)
        return pe_error(base->ctx, POSENC_ERR_UNSUPPORTED,
                        "posenc_buffer_wrap_host: %s is not a CPU device and does not share "
                        "the host's memory (CL_DEVICE_HOST_UNIFIED_MEMORY false): its kernels "
                        "would reach host memory across the bus, or the driver would keep a "
                        "copy; use posenc_buffer_create + posenc_buffer_write / _read",
                        be->info.device_name);
    cl_uint bits = 0;
    if ((err = clGetDeviceInfo(be->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof(bits), &bits,
                               NULL)) != CL_SUCCESS)
        return pe_cl_fail(base->ctx, "clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)", err);
    /* In bits. Also at least 8 bytes (every element naturally aligned, as on the CPU
     * backend), and a power of two (the spec's values are; a driver's odd one is rounded
     * up so that the check stays one modulo). */
    size_t a = 8;
    while (a < (size_t)bits / 8)
        a *= 2;
    *out_alignment = a;
    return POSENC_OK;
}

static struct pe_cl_host *find_host(struct pe_cl_backend *be, cl_mem mem)
{
    for (int i = 0; i < be->n_hosts; i++)
        if (be->hosts[i].mem == mem)
            return &be->hosts[i];
    return NULL;
}

/* Map h for the host. Blocking: its contents are then current in the caller's memory;
 * otherwise they are once the queue has reached the map (the caller waits). */
static posenc_status map_host(struct pe_cl_backend *be, struct pe_cl_host *h, bool blocking)
{
    cl_int err = CL_SUCCESS;
    cl_event ev = NULL;
    void *p = clEnqueueMapBuffer(be->queue, h->mem, blocking ? CL_TRUE : CL_FALSE,
                                 CL_MAP_READ | CL_MAP_WRITE, 0, h->size, 0, NULL, &ev, &err);
    if (err != CL_SUCCESS || !p)
        return pe_cl_fail(be->base.ctx, "clEnqueueMapBuffer",
                          err != CL_SUCCESS ? err : CL_MAP_FAILURE);
    pe_cl_track(be, ev);
    /* The spec: the pointer of a CL_MEM_USE_HOST_PTR map is derived from host_ptr (at
     * offset 0, host_ptr itself). Anything else would leave the caller's memory stale. */
    if (p != h->ptr) {
        ev = NULL;
        if (clEnqueueUnmapMemObject(be->queue, h->mem, p, 0, NULL, &ev) == CL_SUCCESS)
            pe_cl_track(be, ev);
        return pe_error(be->base.ctx, POSENC_ERR_BACKEND,
                        "clEnqueueMapBuffer of wrapped host memory %p returned %p, not the "
                        "wrapped pointer (the driver does not use the memory in place)",
                        h->ptr, p);
    }
    h->mapped = true;
    be->n_mapped++;
    return POSENC_OK;
}

static posenc_status unmap_host(struct pe_cl_backend *be, struct pe_cl_host *h)
{
    cl_event ev = NULL;
    cl_int err = clEnqueueUnmapMemObject(be->queue, h->mem, h->ptr, 0, NULL, &ev);
    if (err != CL_SUCCESS)
        return pe_cl_fail(be->base.ctx, "clEnqueueUnmapMemObject", err);
    pe_cl_track(be, ev);
    h->mapped = false;
    be->n_mapped--;
    return POSENC_OK;
}

posenc_status pe_cl_unmap_hosts(struct pe_cl_backend *be)
{
    for (int i = 0; i < be->n_hosts && be->n_mapped > 0; i++)
        if (be->hosts[i].mapped)
            PE_RETURN_IF_ERROR(unmap_host(be, &be->hosts[i]));
    return POSENC_OK;
}

/* Non-blocking: the caller's clFinish waits for them all at once, one wait instead of one
 * per buffer. PoCL, three wrapped buffers, a decode-size RoPE ([128, 32, 1] f32) + finish
 * cycle: 197 us with a blocking map each after clFinish, 106 us this way (107-113 us for
 * writing and reading posenc buffers instead; medians of alternated rounds). */
posenc_status pe_cl_map_hosts(struct pe_cl_backend *be)
{
    for (int i = 0; i < be->n_hosts; i++)
        if (!be->hosts[i].mapped)
            PE_RETURN_IF_ERROR(map_host(be, &be->hosts[i], false));
    return POSENC_OK;
}

posenc_status pe_cl_buffer_wrap_host(struct pe_backend *base, void *ptr, size_t size,
                                     void **out_mem)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    posenc_context *ctx = base->ctx;
    *out_mem = NULL;
    if ((uint64_t)size > be->info.max_buffer_size)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "size = %zu bytes is larger than this OpenCL device allows "
                        "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu bytes)",
                        size, (unsigned long long)be->info.max_buffer_size);
    if (be->n_hosts == be->cap_hosts) {
        int cap = be->cap_hosts ? 2 * be->cap_hosts : 8;
        struct pe_cl_host *h = realloc(be->hosts, (size_t)cap * sizeof(*h));
        if (!h)
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "out of host memory for the list of wrapped host buffers");
        be->hosts = h;
        be->cap_hosts = cap;
    }
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(be->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, size, ptr,
                                &err);
    if (!mem || err != CL_SUCCESS) {
        err = err != CL_SUCCESS ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE;
        if (pe_cl_err_is_oom(err))
            return pe_error(ctx, POSENC_ERR_OUT_OF_MEMORY,
                            "clCreateBuffer(CL_MEM_USE_HOST_PTR) failed: %d (%s)", (int)err,
                            pe_cl_err_name(err));
        return pe_cl_fail(ctx, "clCreateBuffer(CL_MEM_USE_HOST_PTR)", err);
    }
    struct pe_cl_host *h = &be->hosts[be->n_hosts++];
    *h = (struct pe_cl_host){mem, ptr, size, false};
    /* The host's turn first: the caller typically fills the memory next. */
    posenc_status st = map_host(be, h, true);
    if (st != POSENC_OK) {
        clFinish(be->queue);
        pe_cl_release_mem(be, mem);
        be->n_hosts--;
        return st;
    }
    *out_mem = mem;
    return POSENC_OK;
}

void pe_cl_buffer_unwrap_host(struct pe_backend *base, void *mem)
{
    struct pe_cl_backend *be = (struct pe_cl_backend *)base;
    struct pe_cl_host *h = find_host(be, (cl_mem)mem);
    if (!h) { /* not one of ours: cannot happen (the front end knows host buffers) */
        pe_log(base->ctx, POSENC_LOG_ERROR, "posenc_buffer_destroy: unknown host buffer %p",
               mem);
        return;
    }
    /* Leave the final contents in the caller's memory (a map makes them current), give
     * the mapping back, and wait until no command of the queue uses the memory, so that
     * the caller may reuse or free it when posenc_buffer_destroy returns. Failures (a lost
     * device) cannot be returned from a destroy: logged. */
    posenc_status st = h->mapped ? POSENC_OK : map_host(be, h, true);
    if (h->mapped && unmap_host(be, h) != POSENC_OK)
        st = POSENC_ERR_BACKEND;
    pe_cl_release_mem(be, h->mem);
    cl_int err = clFinish(be->queue);
    if (st != POSENC_OK || err != CL_SUCCESS)
        pe_log(base->ctx, POSENC_LOG_ERROR,
               "posenc_buffer_destroy: wrapped host memory %p may not hold the buffer's final "
               "contents (%s; clFinish: %d)",
               h->ptr, base->ctx->last_error, (int)err);
    *h = be->hosts[--be->n_hosts];
}

void pe_cl_sync_free(struct pe_cl_backend *be)
{
    if (be->last_event)
        clReleaseEvent(be->last_event);
    be->last_event = NULL;
    free(be->hosts);
    be->hosts = NULL;
    be->n_hosts = be->cap_hosts = be->n_mapped = 0;
}
