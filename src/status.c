/* status.c - status strings, error recording and logging. */
#include "internal.h"
#include "posenc_config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#if !defined(_WIN32)
#include <unistd.h>
#endif

const char *posenc_version(void)
{
    return POSENC_VERSION_STRING;
}

const char *posenc_status_string(posenc_status status)
{
    switch (status) {
    case POSENC_OK: return "ok";
    case POSENC_ERR_INVALID_ARGUMENT: return "invalid argument";
    case POSENC_ERR_OUT_OF_RANGE: return "out of range";
    case POSENC_ERR_UNSUPPORTED: return "unsupported";
    case POSENC_ERR_UNAVAILABLE: return "unavailable";
    case POSENC_ERR_OUT_OF_MEMORY: return "out of memory";
    case POSENC_ERR_BACKEND: return "backend error";
    case POSENC_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

void pe_strlcpy(char *dst, const char *src, size_t size)
{
    if (!dst || size == 0)
        return;
    size_t n = src ? strlen(src) : 0;
    if (n >= size)
        n = size - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

static void pe_vlog(posenc_context *ctx, posenc_log_level level, const char *fmt, va_list ap)
    PE_PRINTF(3, 0);
static void pe_vlog(posenc_context *ctx, posenc_log_level level, const char *fmt, va_list ap)
{
    if (!ctx || !ctx->log_fn || level > ctx->log_level)
        return;
    char msg[PE_ERR_MAX];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    ctx->log_fn(level, msg, ctx->log_user_data);
}

void pe_log(posenc_context *ctx, posenc_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pe_vlog(ctx, level, fmt, ap);
    va_end(ap);
}

/* The message of the last failed call on this thread (posenc_last_error). */
static _Thread_local char pe_thread_error[PE_ERR_MAX];

void pe_set_thread_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pe_thread_error, sizeof(pe_thread_error), fmt, ap);
    va_end(ap);
}

const char *posenc_last_error(void)
{
    return pe_thread_error;
}

posenc_status pe_error(posenc_context *ctx, posenc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!ctx) {
        vsnprintf(pe_thread_error, sizeof(pe_thread_error), fmt, ap);
        va_end(ap);
        return status;
    }
    vsnprintf(ctx->last_error, sizeof(ctx->last_error), fmt, ap);
    va_end(ap);
    memcpy(pe_thread_error, ctx->last_error, sizeof(pe_thread_error));
    if (ctx->log_fn && ctx->log_level >= POSENC_LOG_ERROR && !ctx->quiet_errors)
        ctx->log_fn(POSENC_LOG_ERROR, ctx->last_error, ctx->log_user_data);
    return status;
}

void pe_clear_error(posenc_context *ctx)
{
    if (ctx)
        ctx->last_error[0] = '\0';
}

/* ---- one thread per context (internal.h, PE_ENTER) ----------------------------------- */

/* Its address tells the threads apart (unique among live threads). */
static _Thread_local char pe_thread_tag;
/* This thread's last call refused because another thread was inside ctx. */
static _Thread_local struct {
    const posenc_context *ctx;
    char msg[PE_ERR_MAX];
} pe_refused;

static bool pe_try_take(posenc_context *ctx)
{
    const uintptr_t me = (uintptr_t)&pe_thread_tag;
    uintptr_t cur = 0;
    if (atomic_compare_exchange_strong_explicit(&ctx->owner, &cur, me, memory_order_acquire,
                                                memory_order_relaxed)) {
        ctx->depth = 1;
        return true;
    }
    if (cur == me) { /* a call inside a call on this thread */
        ctx->depth++;
        return true;
    }
    return false;
}

posenc_status pe_enter(posenc_context *ctx, const char *fn)
{
    if (!pe_try_take(ctx)) {
        pe_refused.ctx = ctx;
        snprintf(pe_refused.msg, sizeof(pe_refused.msg),
                 "%s: ctx is in use by another thread; a context serves one thread at a time "
                 "(this call did nothing)",
                 fn);
        pe_set_thread_error("%s", pe_refused.msg);
        return POSENC_ERR_INVALID_ARGUMENT;
    }
    if (pe_refused.ctx == ctx)
        pe_refused.ctx = NULL;
    pe_clear_error(ctx);
    return POSENC_OK;
}

void pe_enter_wait(posenc_context *ctx)
{
    while (!pe_try_take(ctx))
        sched_yield();
    if (pe_refused.ctx == ctx)
        pe_refused.ctx = NULL;
}

void pe_leave(posenc_context *ctx)
{
    if (--ctx->depth == 0)
        atomic_store_explicit(&ctx->owner, 0, memory_order_release);
}

const char *posenc_context_last_error(const posenc_context *ctx)
{
    if (!ctx)
        return "ctx is NULL";
    if (pe_refused.ctx == ctx)
        return pe_refused.msg;
    return ctx->last_error;
}

int64_t pe_mono_ns(void)
{
    struct timespec t;
#if defined(_WIN32)
    timespec_get(&t, TIME_UTC); /* no CLOCK_MONOTONIC there */
#else
    clock_gettime(CLOCK_MONOTONIC, &t);
#endif
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int pe_host_cpus(void)
{
    static atomic_int cached; /* 0: not asked yet (a race asks twice, same answer) */
    int n = atomic_load_explicit(&cached, memory_order_relaxed);
    if (n > 0)
        return n;
    long c = 1;
#if defined(_SC_NPROCESSORS_ONLN)
    c = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    n = c < 1 ? 1 : c > 1024 ? 1024 : (int)c;
    atomic_store_explicit(&cached, n, memory_order_relaxed);
    return n;
}
