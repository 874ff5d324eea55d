/* status.c - status strings, error recording and logging. */
#include "internal.h"
#include "posenc_config.h"

#include <stdio.h>
#include <string.h>

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
    if (ctx->log_fn && ctx->log_level >= POSENC_LOG_ERROR)
        ctx->log_fn(POSENC_LOG_ERROR, ctx->last_error, ctx->log_user_data);
    return status;
}

void pe_clear_error(posenc_context *ctx)
{
    if (ctx)
        ctx->last_error[0] = '\0';
}

const char *posenc_context_last_error(const posenc_context *ctx)
{
    return ctx ? ctx->last_error : "ctx is NULL";
}
