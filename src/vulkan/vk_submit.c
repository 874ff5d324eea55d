/*
 * vk_submit.c - how the Vulkan backend gets work to the device without waiting for it
 * (the model is described in vk_internal.h): the ring of command buffers and fences,
 * batching, the barriers between dependent commands, the resources each batch owns until
 * its fence signals, deferred frees, and recording into the application's command buffer
 * (posenc_vulkan_record_begin / _end).
 *
 * Why batches and a ring: with one command buffer and one fence every op first waited for
 * the previous one (four decode-size RoPE calls returned at 0.1 / 61.5 / 125.4 / 185.4 ms
 * on lavapipe). Now an op only records; a batch is submitted when full or on a flush, and
 * the host waits for a fence only when it needs results, or when all PE_VK_SLOTS batches
 * are still running and another one must be opened.
 */
#include "vk_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* First arena chunk of a batch, bytes (decode-size tables are a few hundred bytes). */
#define PE_VK_ARENA_MIN ((VkDeviceSize)64 << 10)
/* Largest arena chunk a batch keeps for its next use (larger ones: big write stagings). */
#define PE_VK_ARENA_KEEP ((VkDeviceSize)1 << 20)

/* ------------------------------------------------------------------------------------ */
/* Per-batch resources                                                                  */
/* ------------------------------------------------------------------------------------ */

static posenc_status grow(struct pe_vk_backend *be, void **arr, uint32_t *cap, size_t elem)
{
    uint32_t ncap = *cap ? 2 * *cap : 4;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    *arr = p;
    *cap = ncap;
    return POSENC_OK;
}

/* Free the buffers waiting for `r` (the device is done with it). */
static void garbage_free(struct pe_vk_backend *be, const struct pe_vk_res *r)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < be->n_garbage; i++) {
        if (be->garbage[i].owner == r)
            pe_vk_buffer_free(be, &be->garbage[i].b);
        else
            be->garbage[k++] = be->garbage[i];
    }
    be->n_garbage = k;
}

/* The device is done with everything `r` holds: free its garbage, keep one arena chunk
 * (the largest of at most PE_VK_ARENA_KEEP bytes) and the pools, reset. */
static void res_reset(struct pe_vk_backend *be, struct pe_vk_res *r)
{
    garbage_free(be, r);
    uint32_t keep = UINT32_MAX;
    for (uint32_t i = 0; i < r->n_chunks; i++)
        if (r->chunks[i].size <= PE_VK_ARENA_KEEP &&
            (keep == UINT32_MAX || r->chunks[i].size > r->chunks[keep].size))
            keep = i;
    for (uint32_t i = 0; i < r->n_chunks; i++)
        if (i != keep)
            pe_vk_buffer_free(be, &r->chunks[i]);
    if (keep != UINT32_MAX)
        r->chunks[0] = r->chunks[keep];
    r->n_chunks = keep != UINT32_MAX ? 1 : 0;
    r->chunk_used = 0;
    for (uint32_t i = 0; i < r->n_pools; i++)
        vkResetDescriptorPool(be->dev, r->pools[i], 0);
    r->n_pools = 0; /* the pools stay in pools[0..cap) for the next use */
    r->pool_used = 0;
}

/* Everything of `r`, freed (the device is done with it). */
static void res_free(struct pe_vk_backend *be, struct pe_vk_res *r)
{
    garbage_free(be, r);
    for (uint32_t i = 0; i < r->n_chunks; i++)
        pe_vk_buffer_free(be, &r->chunks[i]);
    for (uint32_t i = 0; i < r->cap_pools; i++)
        if (r->pools[i])
            vkDestroyDescriptorPool(be->dev, r->pools[i], NULL);
    free(r->chunks);
    free(r->pools);
    memset(r, 0, sizeof *r);
}

/* The next descriptor pool of `r`: pools[n_pools], created if it does not exist yet. */
static posenc_status res_next_pool(struct pe_vk_backend *be, struct pe_vk_res *r)
{
    if (r->n_pools == r->cap_pools) {
        uint32_t old = r->cap_pools;
        PE_RETURN_IF_ERROR(grow(be, (void **)&r->pools, &r->cap_pools, sizeof *r->pools));
        for (uint32_t i = old; i < r->cap_pools; i++)
            r->pools[i] = VK_NULL_HANDLE;
    }
    if (!r->pools[r->n_pools]) {
        VkDescriptorPoolSize ps = {
            .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = PE_VK_BATCH_MAX * PE_VK_MAX_BINDINGS,
        };
        VkDescriptorPoolCreateInfo dpci = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            .maxSets = PE_VK_BATCH_MAX,
            .poolSizeCount = 1,
            .pPoolSizes = &ps,
        };
        VkResult vr = vkCreateDescriptorPool(be->dev, &dpci, NULL, &r->pools[r->n_pools]);
        if (vr != VK_SUCCESS) {
            r->pools[r->n_pools] = VK_NULL_HANDLE;
            return pe_vk_fail(be, "vkCreateDescriptorPool", vr);
        }
    }
    r->n_pools++;
    r->pool_used = 0;
    return POSENC_OK;
}

/* A new arena chunk of at least `size` bytes at the end of r->chunks. */
static posenc_status res_next_chunk(struct pe_vk_backend *be, struct pe_vk_res *r,
                                    VkDeviceSize size)
{
    if (r->n_chunks == r->cap_chunks)
        PE_RETURN_IF_ERROR(grow(be, (void **)&r->chunks, &r->cap_chunks, sizeof *r->chunks));
    VkDeviceSize want = r->n_chunks ? 2 * r->chunks[r->n_chunks - 1].size : PE_VK_ARENA_MIN;
    while (want < size)
        want *= 2;
    struct pe_vk_buffer *c = &r->chunks[r->n_chunks];
    memset(c, 0, sizeof *c);
    PE_RETURN_IF_ERROR(pe_vk_buffer_reserve(be, c, want,
                                            VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                                VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                            true));
    r->n_chunks++;
    r->chunk_used = 0;
    return POSENC_OK;
}

posenc_status pe_vk_descriptor_set(struct pe_vk_backend *be, VkDescriptorSet *out)
{
    struct pe_vk_res *r = be->res;
    *out = VK_NULL_HANDLE;
    if (!r)
        return pe_error(be->base.ctx, POSENC_ERR_INTERNAL, "vulkan: no batch open");
    if (r->n_pools == 0 || r->pool_used == PE_VK_BATCH_MAX)
        PE_RETURN_IF_ERROR(res_next_pool(be, r));
    VkDescriptorSetAllocateInfo dsai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = r->pools[r->n_pools - 1],
        .descriptorSetCount = 1,
        .pSetLayouts = &be->set_layout,
    };
    VkResult vr = vkAllocateDescriptorSets(be->dev, &dsai, out);
    if (vr != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        return pe_vk_fail(be, "vkAllocateDescriptorSets", vr);
    }
    r->pool_used++;
    return POSENC_OK;
}

posenc_status pe_vk_arena(struct pe_vk_backend *be, VkDeviceSize size, VkBuffer *out_buf,
                          VkDeviceSize *out_off, void **out_map)
{
    struct pe_vk_res *r = be->res;
    if (!r)
        return pe_error(be->base.ctx, POSENC_ERR_INTERNAL, "vulkan: no batch open");
    VkDeviceSize align = be->props.limits.minStorageBufferOffsetAlignment;
    if (align < 16)
        align = 16;
    size = (size + 15u) & ~(VkDeviceSize)15u;
    VkDeviceSize off = (r->chunk_used + align - 1) / align * align;
    if (r->n_chunks == 0 || off + size > r->chunks[r->n_chunks - 1].size) {
        /* A new chunk: the earlier ones are still referenced by this batch's commands. */
        PE_RETURN_IF_ERROR(res_next_chunk(be, r, size));
        off = 0;
    }
    struct pe_vk_buffer *c = &r->chunks[r->n_chunks - 1];
    r->chunk_used = off + size;
    *out_buf = c->buf;
    *out_off = off;
    *out_map = (unsigned char *)c->map + off;
    return POSENC_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Barriers                                                                             */
/* ------------------------------------------------------------------------------------ */

static void record_barrier(struct pe_vk_backend *be)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    /* One global memory barrier rather than one per buffer: the same dependency for the
     * ranges that need it, and on CPU implementations any barrier is a full flush. */
    vkCmdPipelineBarrier(be->cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
    be->n_hazards = 0;
    be->n_barriers++;
}

/* Whether buf is one of the current batch's (or recording's) arena chunks. */
static bool is_arena(const struct pe_vk_backend *be, VkBuffer buf)
{
    const struct pe_vk_res *r = be->res;
    for (uint32_t i = 0; r && i < r->n_chunks; i++)
        if (r->chunks[i].buf == buf)
            return true;
    return false;
}

void pe_vk_access(struct pe_vk_backend *be, uint32_t n, const struct pe_vk_bind *binds,
                  uint32_t write_mask)
{
    /* no room to track the new ranges: a barrier (then the list starts empty) */
    bool need = be->n_hazards + n > PE_VK_HAZARDS;
    for (uint32_t i = 0; i < n && !need; i++) {
        const struct pe_vk_bind *b = &binds[i];
        VkDeviceSize lo = b->off, hi = b->range == VK_WHOLE_SIZE ? UINT64_MAX : b->off + b->range;
        bool w = (write_mask >> i) & 1u;
        for (uint32_t k = 0; k < be->n_hazards && !need; k++) {
            const struct pe_vk_hazard *h = &be->hazards[k];
            need = h->buf == b->buf && lo < h->hi && h->lo < hi && (w || h->written);
        }
    }
    if (need)
        record_barrier(be);
    for (uint32_t i = 0; i < n; i++) {
        const struct pe_vk_bind *b = &binds[i];
        VkDeviceSize lo = b->off, hi = b->range == VK_WHOLE_SIZE ? UINT64_MAX : b->off + b->range;
        bool w = (write_mask >> i) & 1u, merged = false;
        if (!w && is_arena(be, b->buf))
            continue; /* a table: a fresh range, never written by the device */
        for (uint32_t k = 0; k < be->n_hazards && !merged; k++) {
            struct pe_vk_hazard *h = &be->hazards[k];
            if (h->buf == b->buf && h->lo == lo && h->hi == hi) {
                h->written = h->written || w;
                merged = true;
            }
        }
        if (!merged && be->n_hazards < PE_VK_HAZARDS)
            be->hazards[be->n_hazards++] = (struct pe_vk_hazard){b->buf, lo, hi, w};
    }
}

/* ------------------------------------------------------------------------------------ */
/* The ring                                                                             */
/* ------------------------------------------------------------------------------------ */

posenc_status pe_vk_submit_init(struct pe_vk_backend *be)
{
    for (int i = 0; i < PE_VK_SLOTS; i++) {
        struct pe_vk_slot *s = &be->slots[i];
        VkCommandBufferAllocateInfo cai = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            .commandPool = be->cmd_pool,
            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            .commandBufferCount = 1,
        };
        VkResult r = vkAllocateCommandBuffers(be->dev, &cai, &s->cmd);
        if (r != VK_SUCCESS) {
            s->cmd = VK_NULL_HANDLE;
            return pe_vk_fail(be, "vkAllocateCommandBuffers", r);
        }
        VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = vkCreateFence(be->dev, &fci, NULL, &s->fence);
        if (r != VK_SUCCESS) {
            s->fence = VK_NULL_HANDLE;
            return pe_vk_fail(be, "vkCreateFence", r);
        }
        /* The arrays, first pool and first chunk now, not in the first ops (vk_internal.h). */
        PE_RETURN_IF_ERROR(res_next_pool(be, &s->res));
        PE_RETURN_IF_ERROR(res_next_chunk(be, &s->res, PE_VK_ARENA_MIN));
        res_reset(be, &s->res);
    }
    return grow(be, (void **)&be->garbage, &be->cap_garbage, sizeof *be->garbage);
}

/* Wait for slot s's batch if it was submitted, then reset its fence and resources.
 * Counted in n_host_waits whether or not the fence had signalled already: the count says
 * how often the host synchronised with a batch, which does not depend on the device's
 * speed (a test can require 0). */
static posenc_status slot_retire(struct pe_vk_backend *be, struct pe_vk_slot *s)
{
    if (!s->submitted)
        return POSENC_OK;
    be->n_host_waits++;
    VkResult r = vkGetFenceStatus(be->dev, s->fence);
    if (r == VK_NOT_READY)
        r = vkWaitForFences(be->dev, 1, &s->fence, VK_TRUE, UINT64_MAX);
    s->submitted = false;
    VkResult r2 = vkResetFences(be->dev, 1, &s->fence);
    res_reset(be, &s->res);
    if (r != VK_SUCCESS)
        return pe_vk_fail(be, "vkWaitForFences", r);
    if (r2 != VK_SUCCESS)
        return pe_vk_fail(be, "vkResetFences", r2);
    return POSENC_OK;
}

void pe_vk_submit_destroy(struct pe_vk_backend *be)
{
    /* Errors cannot be reported from here; the device is going away anyway. An open
     * batch is abandoned (ended, never submitted). */
    if (be->recording && be->cmd)
        vkEndCommandBuffer(be->slots[be->cur].cmd);
    be->recording = false;
    for (int i = 0; i < PE_VK_SLOTS; i++) {
        struct pe_vk_slot *s = &be->slots[i];
        if (s->submitted && s->fence)
            vkWaitForFences(be->dev, 1, &s->fence, VK_TRUE, UINT64_MAX);
        s->submitted = false;
        res_free(be, &s->res);
        if (s->fence)
            vkDestroyFence(be->dev, s->fence, NULL);
        s->fence = VK_NULL_HANDLE;
        s->cmd = VK_NULL_HANDLE; /* freed with the pool */
    }
    /* Recordings not destroyed first (a usage error): their commands may still be in the
     * application's submissions; the application was told to destroy them first. */
    struct pe_vk_recording *all[2] = {be->rec, be->recordings};
    for (int k = 0; k < 2; k++) {
        for (struct pe_vk_recording *rc = all[k], *next; rc; rc = next) {
            next = k ? rc->next : NULL;
            if (k == 1)
                pe_log(be->base.ctx, POSENC_LOG_ERROR,
                       "posenc_context_destroy: a posenc_vulkan_recording of this context was "
                       "not destroyed first");
            res_free(be, &rc->res);
            rc->base.be = NULL; /* posenc_vulkan_recording_destroy frees the handle */
            if (k == 0)
                free(rc); /* in progress: the application never got a handle */
        }
    }
    for (uint32_t i = 0; i < be->n_garbage; i++) /* none left; for safety */
        pe_vk_buffer_free(be, &be->garbage[i].b);
    free(be->garbage);
    be->garbage = NULL;
    be->n_garbage = be->cap_garbage = 0;
    be->rec = NULL;
    be->recordings = NULL;
    be->res = NULL;
    be->cmd = VK_NULL_HANDLE;
}

posenc_status pe_vk_begin(struct pe_vk_backend *be)
{
    if (be->rec || be->recording)
        return POSENC_OK;
    struct pe_vk_slot *s = &be->slots[be->cur];
    PE_RETURN_IF_ERROR(slot_retire(be, s)); /* waits only when the ring is full */
    VkResult r = vkResetCommandBuffer(s->cmd, 0);
    if (r != VK_SUCCESS)
        return pe_vk_fail(be, "vkResetCommandBuffer", r);
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    r = vkBeginCommandBuffer(s->cmd, &bi);
    if (r != VK_SUCCESS)
        return pe_vk_fail(be, "vkBeginCommandBuffer", r);
    be->recording = true;
    be->cmd = s->cmd;
    be->res = &s->res;
    be->n_dispatch = 0;
    be->n_hazards = 0;
    /* On posenc's own queue, earlier batches' shader and transfer writes are made visible
     * to this one by the barrier each of them ends with (pe_vk_submit: its second scope is
     * every later command in submission order, later submissions included), so no barrier
     * is needed here: on CPU implementations such as lavapipe every barrier is a full flush
     * of the device. Host writes before the submit are visible implicitly. */
    if (!be->host_owned)
        return POSENC_OK;
    /* Host-owned: the application's earlier commands on this queue may be anything
     * (graphics, its own compute, copies): wait for all of them and make all their writes
     * visible, so it needs no barrier or semaphore of its own (posenc.h). */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(be->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         0, 1, &mb, 0, NULL, 0, NULL);
    return POSENC_OK;
}

/* The barrier that ends a batch or a recording: its shader and transfer writes -> host
 * reads after the fence wait, and -> the reads and writes of posenc's later batches on
 * this queue (pe_vk_begin records no barrier of its own on posenc's own queue); with
 * `all`, to every later command too (host-owned queue, the application's buffer). */
static void record_end_barrier(struct pe_vk_backend *be, bool all)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                         VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    VkPipelineStageFlags dst_stages = VK_PIPELINE_STAGE_HOST_BIT |
                                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                      VK_PIPELINE_STAGE_TRANSFER_BIT;
    if (all) {
        dst_stages |= VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
        mb.dstAccessMask |= VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
    }
    vkCmdPipelineBarrier(be->cmd,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         dst_stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

posenc_status pe_vk_flush(struct pe_vk_backend *be)
{
    if (!be->recording)
        return POSENC_OK;
    struct pe_vk_slot *s = &be->slots[be->cur];
    record_end_barrier(be, be->host_owned);
    be->recording = false;
    be->cmd = VK_NULL_HANDLE;
    be->res = NULL;
    be->n_hazards = 0;
    VkResult r = vkEndCommandBuffer(s->cmd);
    if (r != VK_SUCCESS) {
        res_reset(be, &s->res); /* never submitted: nothing uses it */
        return pe_vk_fail(be, "vkEndCommandBuffer", r);
    }
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &s->cmd,
    };
    r = vkQueueSubmit(be->queue, 1, &si, s->fence);
    if (r != VK_SUCCESS) {
        res_reset(be, &s->res);
        return pe_vk_fail(be, "vkQueueSubmit", r);
    }
    s->submitted = true;
    be->n_submits++;
    be->cur = (be->cur + 1) % PE_VK_SLOTS;
    return POSENC_OK;
}

posenc_status pe_vk_wait(struct pe_vk_backend *be)
{
    posenc_status st = pe_vk_flush(be);
    /* Oldest first (cur is the next slot to open, so the oldest submitted one). */
    for (int i = 0; i < PE_VK_SLOTS; i++) {
        posenc_status st2 = slot_retire(be, &be->slots[(be->cur + i) % PE_VK_SLOTS]);
        if (st == POSENC_OK)
            st = st2;
    }
    return st;
}

posenc_status pe_vk_submit(struct pe_vk_backend *be, bool wait)
{
    if (be->rec)
        return pe_error(be->base.ctx, POSENC_ERR_INTERNAL,
                        "vulkan: submit while recording into the application's command buffer");
    PE_RETURN_IF_ERROR(pe_vk_flush(be));
    return wait ? pe_vk_wait(be) : POSENC_OK;
}

posenc_status pe_vk_recorded(struct pe_vk_backend *be)
{
    if (be->rec)
        return POSENC_OK;
    be->n_dispatch++;
    /* Host-owned: submitted before the call returns, so that the application's later
     * submissions on the queue see the results (posenc.h's promise), still without a
     * wait. */
    if (be->n_dispatch >= PE_VK_BATCH_MAX || be->host_owned)
        return pe_vk_flush(be);
    return POSENC_OK;
}

bool pe_vk_busy(struct pe_vk_backend *be)
{
    if (be->recording || be->rec)
        return true;
    for (int i = 0; i < PE_VK_SLOTS; i++) {
        struct pe_vk_slot *s = &be->slots[i];
        if (s->submitted && vkGetFenceStatus(be->dev, s->fence) == VK_NOT_READY)
            return true;
    }
    return false;
}

void pe_vk_release(struct pe_vk_backend *be, struct pe_vk_buffer *b)
{
    if (!b->buf && !b->mem)
        return;
    if (pe_vk_busy(be)) {
        /* The newest batch completes last (one queue, in order): the open batch, the
         * recording in progress, or the last submitted one. */
        const struct pe_vk_res *r = be->res;
        if (!r) {
            struct pe_vk_slot *last = &be->slots[(be->cur + PE_VK_SLOTS - 1) % PE_VK_SLOTS];
            r = last->submitted ? &last->res : NULL;
        }
        if (r && (be->n_garbage < be->cap_garbage ||
                  grow(be, (void **)&be->garbage, &be->cap_garbage, sizeof *be->garbage) ==
                      POSENC_OK)) {
            be->garbage[be->n_garbage++] = (struct pe_vk_garbage){*b, r};
            memset(b, 0, sizeof *b);
            return;
        }
        /* No memory to defer it: wait instead (errors are reported by the next call). */
        (void)pe_vk_wait(be);
    }
    pe_vk_buffer_free(be, b);
}

void pe_vk_counters(posenc_context *ctx, uint64_t *out_host_waits, uint64_t *out_submits,
                    uint64_t *out_barriers, uint64_t *out_allocs)
{
    *out_host_waits = *out_submits = *out_barriers = *out_allocs = 0;
    if (!ctx || !ctx->backend || ctx->backend->vt != &pe_vulkan_vtable)
        return;
    const struct pe_vk_backend *be = (const struct pe_vk_backend *)ctx->backend;
    *out_host_waits = be->n_host_waits;
    *out_submits = be->n_submits;
    *out_barriers = be->n_barriers;
    *out_allocs = be->n_allocs;
}

/* ------------------------------------------------------------------------------------ */
/* Recording into the application's command buffer                                     */
/* ------------------------------------------------------------------------------------ */

posenc_status pe_vk_record_begin(struct pe_backend *b, void *vk_command_buffer)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    if (!be->host_owned)
        return pe_error(b->ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "ctx is not a host-owned Vulkan context (posenc_context_create_from_"
                        "host): its device is not the application's");
    if (be->rec)
        return pe_error(b->ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "ctx is already recording into a command buffer "
                        "(posenc_vulkan_record_end first)");
    /* posenc's own earlier ops go to the queue now, so they come before the application's
     * submission of its buffer (host-owned contexts submit after every op already). */
    PE_RETURN_IF_ERROR(pe_vk_flush(be));
    struct pe_vk_recording *rc = calloc(1, sizeof *rc);
    if (!rc)
        return pe_error(b->ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    rc->base.be = b;
    be->rec = rc;
    be->cmd = (VkCommandBuffer)vk_command_buffer;
    be->res = &rc->res;
    be->n_hazards = 0;
    /* The application's earlier commands in this buffer and its earlier submissions may
     * be anything (graphics, compute, copies): every earlier command and memory write ->
     * posenc's compute and transfer accesses. */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(be->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         0, 1, &mb, 0, NULL, 0, NULL);
    return POSENC_OK;
}

posenc_status pe_vk_record_end(struct pe_backend *b, struct posenc_vulkan_recording **out)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    *out = NULL;
    struct pe_vk_recording *rc = be->rec;
    if (!rc)
        return pe_error(b->ctx, POSENC_ERR_INVALID_ARGUMENT,
                        "ctx is not recording (posenc_vulkan_record_begin first)");
    /* posenc's writes -> every later command in the buffer and after it, and host reads
     * after the application's fence wait. */
    record_end_barrier(be, true);
    be->rec = NULL;
    be->cmd = VK_NULL_HANDLE;
    be->res = NULL;
    be->n_hazards = 0;
    rc->next = be->recordings;
    if (be->recordings)
        be->recordings->prev = rc;
    be->recordings = rc;
    *out = &rc->base;
    return POSENC_OK;
}

void pe_vk_recording_destroy(struct pe_backend *b, struct posenc_vulkan_recording *rec)
{
    struct pe_vk_backend *be = (struct pe_vk_backend *)b;
    struct pe_vk_recording *rc = (struct pe_vk_recording *)rec;
    if (rc->prev)
        rc->prev->next = rc->next;
    else
        be->recordings = rc->next;
    if (rc->next)
        rc->next->prev = rc->prev;
    res_free(be, &rc->res);
    free(rc);
}
