/* common.c - argument helpers and context opening for the posenc tool (see tool.h). */
#include "tool.h"
#include "plot.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tool_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tool_progress_clear();
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
        tool_error(cmd, "%s needs a value (try posenc %s --help)", argv[*i], cmd);
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
                   posenc_status_string(st), err[0] ? err : posenc_last_error());
        return NULL;
    }
    return ctx;
}

/* ---- progress on stderr ------------------------------------------------------------- */

static int progress_enabled = -1; /* -1: not decided yet */
static int progress_drawn;

void tool_progress_init(int quiet)
{
    progress_enabled = !quiet && isatty(STDERR_FILENO);
}

int tool_progress_on(void)
{
    if (progress_enabled < 0)
        tool_progress_init(0);
    return progress_enabled;
}

void tool_progress(const char *what, int64_t done, int64_t total, const char *name)
{
    enum { BAR = 30 };
    if (!tool_progress_on())
        return;
    static const char hashes[] = "##############################";
    int fill = total > 0 ? (int)(done * BAR / total) : 0;
    if (fill > BAR)
        fill = BAR;
    if (total > 0)
        fprintf(stderr, "\r\033[K%s [%.*s%*s] %lld/%lld %.40s", what, fill, hashes, BAR - fill,
                "", (long long)done, (long long)total, name ? name : "");
    else
        fprintf(stderr, "\r\033[K%s %.60s", what, name ? name : "");
    fflush(stderr);
    progress_drawn = 1;
}

void tool_progress_clear(void)
{
    if (progress_drawn && tool_progress_on()) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    progress_drawn = 0;
}

/* ---- library errors ------------------------------------------------------------------ */

static int failure_is_usage;

int tool_fail_code(void)
{
    return failure_is_usage ? TOOL_USAGE : TOOL_FAILED;
}

int tool_lib_failed(const char *cmd, posenc_context *ctx, const char *call, posenc_status st)
{
    /* the library refused a value the command line gave: a usage error */
    failure_is_usage = st == POSENC_ERR_INVALID_ARGUMENT || st == POSENC_ERR_OUT_OF_RANGE;
    tool_progress_clear();
    const char *why = ctx ? posenc_context_last_error(ctx) : posenc_last_error();
    tool_error(cmd, "%s: %s%s%s", call, posenc_status_string(st), why[0] ? ": " : "", why);
    return 0;
}

/* ---- RoPE scaling choices ------------------------------------------------------------- */

static const struct {
    const char *name, *label;
    posenc_rope_scaling_kind kind;
} scalings[] = {
    {"none", "no scaling", POSENC_ROPE_SCALING_NONE},
    {"linear", "linear", POSENC_ROPE_SCALING_LINEAR},
    {"ntk", "NTK", POSENC_ROPE_SCALING_NTK},
    {"dynamic", "dynamic NTK", POSENC_ROPE_SCALING_DYNAMIC_NTK},
    {"yarn", "YaRN", POSENC_ROPE_SCALING_YARN},
    {"llama3", "Llama 3", POSENC_ROPE_SCALING_LLAMA3},
    {"longrope", "LongRoPE", POSENC_ROPE_SCALING_LONGROPE},
    {"ggml-yarn", "ggml YaRN", POSENC_ROPE_SCALING_GGML_YARN},
};

const char tool_scaling_list[] = "none, linear, ntk, dynamic, yarn, llama3, longrope, ggml-yarn";

int tool_parse_scaling(const char *s, posenc_rope_scaling_kind *out)
{
    for (size_t k = 0; k < sizeof(scalings) / sizeof(scalings[0]); k++)
        if (!strcmp(s, scalings[k].name)) {
            *out = scalings[k].kind;
            return 1;
        }
    return 0;
}

const char *tool_scaling_name(posenc_rope_scaling_kind kind)
{
    for (size_t k = 0; k < sizeof(scalings) / sizeof(scalings[0]); k++)
        if (scalings[k].kind == kind)
            return scalings[k].name;
    return "?";
}

const char *tool_scaling_label(posenc_rope_scaling_kind kind)
{
    for (size_t k = 0; k < sizeof(scalings) / sizeof(scalings[0]); k++)
        if (scalings[k].kind == kind)
            return scalings[k].label;
    return "?";
}

int tool_scaling_uses_orig(posenc_rope_scaling_kind kind)
{
    return kind != POSENC_ROPE_SCALING_NONE && kind != POSENC_ROPE_SCALING_LINEAR &&
           kind != POSENC_ROPE_SCALING_NTK;
}

int tool_parse_factor(const char *cmd, const char *opt, const char *s, double *out)
{
    double v;
    if (!tool_parse_double(s, &v) || !(v > 0.0) || v > 1e30 || !((float)v >= FLT_MIN)) {
        tool_error(cmd, "%s must be a scaling factor > 0 (1 = no scaling; a 32-bit float, "
                        "so between 1.2e-38 and 1e30), got '%s'",
                   opt, s);
        return 0;
    }
    *out = v;
    return 1;
}

int tool_scaling_setup(const char *cmd, struct posenc_rope_scaling *s,
                       posenc_rope_scaling_kind kind, double factor, int64_t orig,
                       int64_t n_pairs, int64_t seq_len, float **factors)
{
    memset(s, 0, sizeof(*s));
    *factors = NULL;
    s->kind = kind;
    if (kind == POSENC_ROPE_SCALING_NONE)
        return 1;
    s->factor = (float)factor;
    if (tool_scaling_uses_orig(kind))
        s->original_ctx = (int32_t)orig;
    if (kind == POSENC_ROPE_SCALING_DYNAMIC_NTK || kind == POSENC_ROPE_SCALING_LONGROPE)
        s->seq_len = (int32_t)(seq_len > INT32_MAX ? INT32_MAX : seq_len);
    if (kind == POSENC_ROPE_SCALING_GGML_YARN)
        s->ext_factor = 1.0f; /* llama.cpp's value when YaRN is on */
    if (kind == POSENC_ROPE_SCALING_LONGROPE) {
        /* short factors 1 (the original frequencies up to original_ctx), long factors a
         * geometric ramp from 1 (pair 0) to the factor (the last pair), the shape of
         * Phi-3's: the fast pairs stay, the slow ones are interpolated. */
        float *f = malloc((size_t)(2 * n_pairs) * sizeof(*f));
        if (!f) {
            tool_error(cmd, "out of memory");
            return 0;
        }
        for (int64_t j = 0; j < n_pairs; j++) {
            f[j] = 1.0f;
            f[n_pairs + j] =
                (float)pow(factor, n_pairs > 1 ? (double)j / (double)(n_pairs - 1) : 1.0);
        }
        s->short_factor = f;
        s->long_factor = f + n_pairs;
        *factors = f;
    }
    return 1;
}

int tool_save_png(const char *cmd, struct canvas *c, const char *path, const char *comment,
                  int quiet)
{
    char err[512];
    const int w = c->w, h = c->h;
    const int ok = png_write(path, c, comment, err, sizeof(err));
    canvas_free(c);
    if (!ok)
        tool_error(cmd, "%s", err);
    else if (!quiet)
        printf("wrote %s (%dx%d): %s\n", path, w, h, comment);
    return ok;
}
