/*
 * record_vulkan.c - the front end of posenc_vulkan_record_begin / _end and
 * posenc_vulkan_recording_destroy (recording ops into the application's VkCommandBuffer,
 * posenc.h). The Vulkan backend does the work (src/vulkan/vk_submit.c); a context of
 * another backend, or a build without Vulkan, has no vtable slots and is refused.
 */
#include "backend.h"

#include <stdlib.h>

static posenc_status no_recording(posenc_context *ctx)
{
    return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                    "ctx is a %s context: recording into a VkCommandBuffer needs a host-owned "
                    "Vulkan context (posenc_context_create_from_host)",
                    ctx->backend->vt->name);
}

posenc_status posenc_vulkan_record_begin(posenc_context *ctx, void *vk_command_buffer)
{
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    if (!ctx->backend->vt->vk_record_begin)
        return no_recording(ctx);
    if (!vk_command_buffer)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "vk_command_buffer is NULL (VK_NULL_HANDLE)");
    posenc_status st = ctx->backend->vt->vk_record_begin(ctx->backend, vk_command_buffer);
    if (st == POSENC_OK)
        ctx->recording = true; /* scratch.c keeps nothing until _end */
    return st;
}

posenc_status posenc_vulkan_record_end(posenc_context *ctx,
                                       posenc_vulkan_recording **out_recording)
{
    if (out_recording)
        *out_recording = NULL;
    if (!ctx)
        return pe_error(NULL, POSENC_ERR_INVALID_ARGUMENT, "ctx is NULL");
    PE_ENTER(ctx);
    if (!out_recording)
        return pe_error(ctx, POSENC_ERR_INVALID_ARGUMENT, "out_recording is NULL");
    if (!ctx->backend->vt->vk_record_end)
        return no_recording(ctx);
    posenc_status st = ctx->backend->vt->vk_record_end(ctx->backend, out_recording);
    if (st == POSENC_OK)
        ctx->recording = false;
    return st;
}

void posenc_vulkan_recording_destroy(posenc_vulkan_recording **recording)
{
    if (!recording || !*recording)
        return;
    posenc_vulkan_recording *rec = *recording;
    *recording = NULL;
    struct pe_backend *be = rec->be;
    if (!be) { /* its context was destroyed first: only the handle is left */
        free(rec);
        return;
    }
    pe_enter_wait(be->ctx); /* cannot refuse: waits for a call on another thread */
    be->vt->vk_recording_destroy(be, rec);
    pe_leave(be->ctx);
}
