/*
 * scratch.c - device temporaries the front end's composite ops take for one call and give
 * back at its end (internal.h, "Scratch"): posenc_attention's encoded q / k / v, implicit
 * positions and logits, posenc_sincos_2d's coordinates. The context keeps what is given
 * back, so that the next call of the same shape allocates no device memory.
 *
 * Policy:
 *  - up to PE_SCRATCH_SLOTS buffers are kept, PE_SCRATCH_KEEP bytes in all (pe_scratch_keep:
 *    a test can lower it); a buffer that would take the context past that is made for the
 *    call and destroyed when it is given back, as every temporary was before the cache;
 *  - sizes are rounded up (round_class: whole KiB up to 8 KiB, then eight classes per power
 *    of two, at most 1/8 more), so that a decode loop whose key count grows by one per call
 *    finds its buffers again for a while;
 *  - a request takes the smallest free buffer that fits and is not more than twice the
 *    rounded size (a small temporary does not pin a large buffer);
 *  - on Vulkan a request prefers a buffer not given back by the call just before: a batch
 *    records a barrier wherever a dispatch writes a buffer that an earlier one of the batch
 *    read, so reusing the previous call's buffers would order this call's first write after
 *    the previous call's last read. Two sets of buffers, taken in turn, need none (as the
 *    one-pass attention's two partials buffers, vk_internal.h). The CPU backend runs each
 *    op to the end and an OpenCL queue runs in order, so they take the most recent buffer,
 *    the one most likely still in the caches;
 *  - while a Vulkan context records into the application's command buffer, nothing is
 *    taken from or given back to the cache: the recording may run later, more than once,
 *    or beside posenc's own batches, so its temporaries are made per call and freed with
 *    the recording (posenc_buffer_destroy defers the release to it);
 *  - when making a buffer fails with POSENC_ERR_OUT_OF_MEMORY, the free kept buffers are
 *    destroyed and the allocation is tried once more: what the cache holds never makes a
 *    call fail that would have succeeded without it.
 *  - a caller may describe what it left in a buffer (pe_scratch_set_key: a key of its own
 *    and a count of valid rows) and take that buffer again in a later call with the same
 *    key (pe_scratch_find), content and all: posenc_attention's table of the keys' RoPE
 *    rotations for implicit positions, which a decode loop needs again every call. Such a
 *    buffer is taken for other temporaries only when no other fits, and whatever takes it
 *    that way clears the key.
 * Everything kept is destroyed by posenc_context_destroy (pe_scratch_release).
 */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

size_t pe_scratch_keep = PE_SCRATCH_KEEP;

/* bytes rounded up: to a whole KiB up to 8 KiB, then to one of eight classes per power of
 * two (a step of 1/8 of the power below: at most 1/8 more) */
static size_t round_class(size_t bytes)
{
    if (bytes <= 8192)
        return bytes <= 1024 ? 1024 : (bytes + 1023) / 1024 * 1024;
    size_t top = 1;
    while (top <= bytes / 2)
        top *= 2; /* top <= bytes < 2 top */
    const size_t step = top / 8;
    if (bytes > SIZE_MAX - step)
        return bytes;
    return (bytes + step - 1) / step * step;
}

/* The slot's content is no longer what its key said. */
static void unkey(struct pe_scratch_slot *s)
{
    free(s->key);
    s->key = NULL;
    s->key_len = 0;
    s->key_rows = 0;
}

static size_t kept_bytes(const posenc_context *ctx)
{
    size_t n = 0;
    for (int i = 0; i < PE_SCRATCH_SLOTS; i++)
        if (ctx->scratch[i].buf)
            n += ctx->scratch[i].buf->size;
    return n;
}

/* Destroy every kept buffer that no call holds. Returns how many. */
static int drop_free(posenc_context *ctx)
{
    int n = 0;
    for (int i = 0; i < PE_SCRATCH_SLOTS; i++) {
        struct pe_scratch_slot *s = &ctx->scratch[i];
        if (s->buf && !s->busy) {
            unkey(s);
            posenc_buffer_destroy(&s->buf);
            n++;
        }
    }
    return n;
}

/* The free kept buffer to take for `bytes` (`want` rounded up), or -1; *recent: it was
 * given back by the call just before this one. */
static int best_fit(const posenc_context *ctx, size_t bytes, size_t want, bool alternate,
                    bool keyed, bool *recent)
{
    int best = -1;
    *recent = false;
    for (int i = 0; i < PE_SCRATCH_SLOTS; i++) {
        const struct pe_scratch_slot *s = &ctx->scratch[i];
        if (!s->buf || s->busy || s->buf->size < bytes || s->buf->size / 2 > want ||
            (s->key != NULL) != keyed)
            continue;
        const bool r = s->gen + 1 >= ctx->scratch_gen;
        bool better = best < 0;
        if (!better) {
            const struct pe_scratch_slot *b = &ctx->scratch[best];
            if (alternate && r != *recent)
                better = !r;
            else if (s->buf->size != b->buf->size)
                better = s->buf->size < b->buf->size;
            else
                better = alternate ? s->gen < b->gen : s->gen > b->gen;
        }
        if (better) {
            best = i;
            *recent = r;
        }
    }
    return best;
}

static posenc_status use(posenc_context *ctx, int i, posenc_buffer **out)
{
    unkey(&ctx->scratch[i]); /* taken to be written: what it held is gone */
    ctx->scratch[i].busy = true;
    *out = ctx->scratch[i].buf;
    return POSENC_OK;
}

posenc_status pe_scratch_take(posenc_context *ctx, size_t bytes, posenc_buffer **out)
{
    *out = NULL;
    if (ctx->recording)
        return posenc_buffer_create(ctx, bytes, out);
    const bool alternate = ctx->kind == POSENC_BACKEND_VULKAN;
    if (!ctx->scratch_max) { /* the device's largest buffer, read once */
        struct posenc_device_info info;
        memset(&info, 0, sizeof(info));
        ctx->backend->vt->get_info(ctx->backend, &info);
        ctx->scratch_max = info.max_buffer_size ? info.max_buffer_size : UINT64_MAX;
    }
    size_t want = round_class(bytes);
    if (want > ctx->scratch_max)
        want = bytes; /* not rounded past it */
    bool recent;
    /* buffers whose content a later call may find again (pe_scratch_find) only when no
     * other fits */
    int best = best_fit(ctx, bytes, want, alternate, false, &recent);
    if (best < 0)
        best = best_fit(ctx, bytes, want, alternate, true, &recent);
    const size_t kept = kept_bytes(ctx);
    int slot = -1, n_free = 0;
    for (int i = 0; i < PE_SCRATCH_SLOTS; i++) {
        const struct pe_scratch_slot *s = &ctx->scratch[i];
        if (!s->buf && slot < 0)
            slot = i;
        n_free += s->buf && !s->busy;
    }
    if (best >= 0) {
        /* Vulkan, the previous call's buffer: a second one, if an empty slot may keep it */
        if (!(alternate && recent && slot >= 0 && kept + want <= pe_scratch_keep))
            return use(ctx, best, out);
    } else {
        /* nothing fits: into an empty slot, or in place of the smallest free buffer */
        for (int i = 0; i < PE_SCRATCH_SLOTS && slot < 0; i++)
            if (!ctx->scratch[i].busy)
                slot = i;
        for (int i = 0; slot >= 0 && i < PE_SCRATCH_SLOTS; i++) {
            const struct pe_scratch_slot *s = &ctx->scratch[i], *c = &ctx->scratch[slot];
            if (c->buf && s->buf && !s->busy && s->buf->size < c->buf->size)
                slot = i;
        }
        const size_t freed = slot >= 0 && ctx->scratch[slot].buf ? ctx->scratch[slot].buf->size : 0;
        if (slot < 0 || kept - freed + want > pe_scratch_keep)
            return posenc_buffer_create(ctx, bytes, out); /* for this call only */
        if (ctx->scratch[slot].buf) {
            unkey(&ctx->scratch[slot]);
            posenc_buffer_destroy(&ctx->scratch[slot].buf);
            n_free--;
        }
    }
    /* Out of memory with free buffers kept: they go and the allocation is tried again; a
     * failed second set (Vulkan) takes the fitting buffer instead. The first attempt's
     * error is not logged then; a failure that stands is. */
    const bool fallback = best >= 0 || n_free > 0;
    const bool quiet = ctx->quiet_errors;
    ctx->quiet_errors = quiet || fallback;
    posenc_buffer *b = NULL;
    posenc_status st = posenc_buffer_create(ctx, want, &b);
    ctx->quiet_errors = quiet;
    if (st != POSENC_OK && best >= 0) { /* Vulkan's second set: the first will do */
        pe_clear_error(ctx);
        return use(ctx, best, out);
    }
    if (st == POSENC_ERR_OUT_OF_MEMORY && n_free > 0) {
        drop_free(ctx);
        st = posenc_buffer_create(ctx, want, &b); /* logs its own failure */
    } else if (st != POSENC_OK && fallback) { /* the unlogged failure stands: log it */
        char msg[PE_ERR_MAX];
        pe_strlcpy(msg, posenc_context_last_error(ctx), sizeof(msg));
        return pe_error(ctx, st, "%s", msg);
    }
    if (st != POSENC_OK)
        return st;
    ctx->scratch_made++;
    ctx->scratch[slot] = (struct pe_scratch_slot){.buf = b, .busy = true, .gen = ctx->scratch_gen};
    *out = b;
    return POSENC_OK;
}

bool pe_scratch_find(posenc_context *ctx, const void *key, size_t key_len, int64_t rows,
                     posenc_buffer **out, int64_t *out_rows)
{
    *out = NULL;
    if (ctx->recording)
        return false;
    for (int i = 0; i < PE_SCRATCH_SLOTS; i++) {
        struct pe_scratch_slot *s = &ctx->scratch[i];
        if (s->buf && !s->busy && s->key && s->key_len == key_len && s->key_rows >= rows &&
            memcmp(s->key, key, key_len) == 0) {
            s->busy = true;
            *out = s->buf;
            if (out_rows)
                *out_rows = s->key_rows;
            return true;
        }
    }
    return false;
}

void pe_scratch_set_key(posenc_context *ctx, const posenc_buffer *buf, const void *key,
                        size_t key_len, int64_t rows)
{
    for (int i = 0; i < PE_SCRATCH_SLOTS; i++) {
        struct pe_scratch_slot *s = &ctx->scratch[i];
        if (s->buf != buf || !s->busy)
            continue;
        unkey(s);
        void *copy = malloc(key_len ? key_len : 1);
        if (!copy)
            return; /* not found again: made anew next time */
        memcpy(copy, key, key_len);
        s->key = copy;
        s->key_len = key_len;
        s->key_rows = rows;
        return;
    }
}

void pe_scratch_give(posenc_context *ctx, posenc_buffer **bufs, int n)
{
    for (int k = 0; k < n; k++) {
        if (!bufs[k])
            continue;
        for (int i = 0; i < PE_SCRATCH_SLOTS && bufs[k]; i++) {
            struct pe_scratch_slot *s = &ctx->scratch[i];
            if (s->buf == bufs[k] && s->busy) {
                s->busy = false;
                s->gen = ctx->scratch_gen;
                bufs[k] = NULL;
            }
        }
        posenc_buffer_destroy(&bufs[k]); /* made for one call (or while recording); NULL: kept */
    }
    ctx->scratch_gen++; /* the call is over */
}

void pe_scratch_release(posenc_context *ctx)
{
    for (int i = 0; i < PE_SCRATCH_SLOTS; i++) {
        ctx->scratch[i].busy = false;
        unkey(&ctx->scratch[i]);
        if (ctx->scratch[i].buf)
            posenc_buffer_destroy(&ctx->scratch[i].buf);
    }
}

void pe_scratch_stats(const posenc_context *ctx, uint64_t *out_made, int *out_kept,
                      size_t *out_bytes)
{
    int n = 0;
    for (int i = 0; i < PE_SCRATCH_SLOTS; i++)
        n += ctx->scratch[i].buf != NULL;
    *out_made = ctx->scratch_made;
    *out_kept = n;
    *out_bytes = kept_bytes(ctx);
}
