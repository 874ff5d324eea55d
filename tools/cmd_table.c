/*
 * cmd_table.c - `posenc table`: print the vectors / matrices of an encoding.
 *
 *   posenc table --kind sinusoidal --dim 6 --pos 2
 *   -> the seed's vector [0.909, -0.416, 0.092, 0.995, 0.004, 0.999], to 6 decimals
 */
#include "tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const cmd = "table";

static void table_help(void)
{
    printf("usage: posenc table --kind sinusoidal|rope|alibi|t5 [options]\n\n"
           "Prints the encoding as numbers, computed through the library on a backend:\n"
           "  sinusoidal  one row per position, one column per dimension (posenc_sinusoidal)\n"
           "  rope        one row per position, one column per pair j: the angle pos*w_j\n"
           "  alibi       the bias of one head: one row per query, one column per key\n"
           "  t5          the T5 bucket of k - q: one row per query, one column per key\n\n"
           "Example: posenc table --kind sinusoidal --dim 6 --pos 2\n\n"
           "options:\n"
           "%s"
           "output:\n"
           "  --csv                             comma-separated, full f32 precision\n"
           "  --precision N                     decimals (default 6; alibi 4; t5 0)\n",
           enc_options_help);
}

static void print_aligned(const struct enc_grid *g, int prec)
{
    char buf[64];
    int w = 1;
    for (int64_t i = 0; i < g->rows * g->cols; i++) {
        int n = snprintf(buf, sizeof(buf), "%.*f", prec, g->v[i] + 0.0);
        if (n > w)
            w = n;
    }
    int cw = snprintf(buf, sizeof(buf), "%lld", (long long)(g->cols - 1));
    if (cw > w)
        w = cw;
    int rw = (int)strlen(g->row_name);
    for (int64_t r = 0; r < g->rows; r++) {
        int n = snprintf(buf, sizeof(buf), "%g", g->row_pos[r]);
        if (n > rw)
            rw = n;
    }
    printf("%*s", rw, g->row_name);
    for (int64_t c = 0; c < g->cols; c++)
        printf(" %*lld", w, (long long)c);
    printf("   <- %s\n", g->col_name);
    for (int64_t r = 0; r < g->rows; r++) {
        if (g->rows * g->cols >= ((int64_t)1 << 20) && r % 256 == 0)
            tool_progress(cmd, r, g->rows, "rows written");
        printf("%*g", rw, g->row_pos[r]);
        for (int64_t c = 0; c < g->cols; c++)
            printf(" %*.*f", w, prec, g->v[r * g->cols + c] + 0.0); /* no -0 */
        printf("\n");
    }
}

static void print_csv(const struct enc_grid *g)
{
    printf("%s", g->row_name);
    for (int64_t c = 0; c < g->cols; c++)
        printf(",%lld", (long long)c);
    printf("\n");
    for (int64_t r = 0; r < g->rows; r++) {
        if (g->rows * g->cols >= ((int64_t)1 << 20) && r % 256 == 0)
            tool_progress(cmd, r, g->rows, "rows written");
        printf("%.9g", g->row_pos[r]);
        for (int64_t c = 0; c < g->cols; c++)
            printf(",%.9g", g->v[r * g->cols + c] + 0.0);
        printf("\n");
    }
}

int cmd_table(int argc, char **argv)
{
    struct enc_opts o;
    enc_opts_init(&o, 8, 8);
    int csv = 0;
    int64_t prec = -1;
    for (int i = 1; i < argc; i++) {
        if (tool_is_help(argv[i])) {
            table_help();
            return TOOL_OK;
        }
        int r = enc_parse_opt(cmd, &o, argc, argv, &i);
        if (r < 0)
            return TOOL_USAGE;
        if (r > 0)
            continue;
        if (!strcmp(argv[i], "--csv")) {
            csv = 1;
        } else if (!strcmp(argv[i], "--precision")) {
            const char *v = tool_value(cmd, argc, argv, &i);
            if (!v)
                return TOOL_USAGE;
            if (!tool_parse_i64(v, &prec) || prec < 0 || prec > 17) {
                tool_error(cmd, "--precision must be an integer in [0, 17], got '%s'", v);
                return TOOL_USAGE;
            }
        } else {
            tool_error(cmd, "unknown argument '%s' (try --help)", argv[i]);
            return TOOL_USAGE;
        }
    }
    if (!enc_check(cmd, &o))
        return TOOL_USAGE;
    if (prec < 0)
        prec = o.kind == ENC_T5 ? 0 : o.kind == ENC_ALIBI ? 4 : 6;
    posenc_context *ctx = tool_open(cmd, o.backend);
    if (!ctx)
        return TOOL_FAILED;
    struct enc_grid g;
    int ok = enc_compute(cmd, ctx, &o, &g);
    posenc_context_destroy(&ctx);
    if (!ok)
        return tool_fail_code();
    if (csv) {
        print_csv(&g);
    } else {
        printf("%s; computed on %s%s%s\n", g.title, g.device, g.note[0] ? "; " : "", g.note);
        print_aligned(&g, (int)prec);
    }
    tool_progress_clear();
    enc_grid_free(&g);
    return TOOL_OK;
}
