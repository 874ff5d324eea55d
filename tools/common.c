/* common.c - argument helpers and context opening for the posenc tool (see tool.h). */
#include "tool.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tool_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* one line: driver messages may carry newlines */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "posenc %s: %s\n", cmd, msg);
}

int tool_parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return 0;
    *out = (int64_t)v;
    return 1;
}

int tool_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

int tool_parse_backend(const char *s, posenc_backend_kind *out)
{
    for (int k = 0; k < POSENC_BACKEND_COUNT; k++)
        if (strcmp(s, posenc_backend_name((posenc_backend_kind)k)) == 0) {
            *out = (posenc_backend_kind)k;
            return 1;
        }
    return 0;
}

int tool_is_help(const char *arg)
{
    return !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

const char *tool_value(const char *cmd, int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        tool_error(cmd, "%s needs a value (try --help)", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

static void tool_log(posenc_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == POSENC_LOG_WARN)
        fprintf(stderr, "posenc: warning: %s\n", msg);
}

posenc_context *tool_open(const char *cmd, posenc_backend_kind kind)
{
    struct posenc_context_params p = {.backend = kind, .log_fn = tool_log,
                                      .log_level = POSENC_LOG_WARN};
    posenc_context *ctx = NULL;
    char err[512];
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    if (st != POSENC_OK) {
        tool_error(cmd, "backend %s: %s: %s", posenc_backend_name(kind),
                   posenc_status_string(st), err);
        return NULL;
    }
    return ctx;
}
