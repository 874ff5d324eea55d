/*
 * cmd_heatmap.c - `posenc heatmap`: an encoding as a PNG heat map with axes and a colour
 * bar (geometry and colours: images.h).
 *
 *   posenc heatmap --kind sinusoidal --dim 128 --len 50 -o pe.png
 */
#include "images.h"
#include "plot.h"
#include "tool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const cmd = "heatmap";

static const uint8_t ink[3] = {32, 32, 32};
static const uint8_t frame[3] = {96, 96, 96};

static void heatmap_help(void)
{
    printf("usage: posenc heatmap --kind sinusoidal|rope|alibi|t5 -o FILE.png [options]\n\n"
           "Draws the encoding as a heat map, computed through the library on a backend:\n"
           "  sinusoidal  x = dimension, y = position (the seed's figure)\n"
           "  rope        x = pair j, y = position: the angle pos*w_j (or --value cos|sin)\n"
           "  alibi       x = key, y = query: the bias of one head (grey: masked)\n"
           "  t5          x = key, y = query: the T5 bucket of k - q\n"
           "Position / query 0 is the top row. Defaults: --dim 128, --len 64.\n\n"
           "Example: posenc heatmap --kind sinusoidal --dim 128 --len 50 -o pe.png\n\n"
           "options:\n"
           "%s"
           "image:\n"
           "  -o, --output FILE                 the PNG to write (required)\n"
           "  --cell N                          pixels per cell (default: ~512 px plots)\n"
           "  --range LO:HI                     values mapped to the ends of the colour bar\n"
           "                                    (default [-1, 1] for sin/cos, else min:max)\n"
           "  --colormap diverging|sequential   (default diverging for sin/cos data, else\n"
           "                                    sequential)\n",
           enc_options_help);
}

static void grid_range(const struct enc_grid *g, double *lo, double *hi)
{
    if (g->symmetric) {
        *lo = -1.0;
        *hi = 1.0;
        return;
    }
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < g->rows * g->cols; i++)
        if (isfinite(g->v[i])) {
            *lo = fmin(*lo, g->v[i]);
            *hi = fmax(*hi, g->v[i]);
        }
    if (!isfinite(*lo)) {
        *lo = 0.0;
        *hi = 1.0;
    }
}

static void fmt_tick(char *buf, size_t n, double v, int decimals)
{
    snprintf(buf, n, "%.*f", decimals, v);
    if (!strcmp(buf, "-0"))
        snprintf(buf, n, "0");
}

static void draw_axes(struct canvas *c, const struct enc_grid *g, int cell)
{
    int x0 = HM_LEFT, y0 = HM_TOP, pw = (int)g->cols * cell, ph = (int)g->rows * cell;
    double t[64];
    int dec;
    char buf[64];
    /* x: column indices */
    int n = nice_ticks(0, (double)(g->cols - 1), pw / 56 + 1, t, 64, &dec);
    for (int i = 0; i < n; i++) {
        if (t[i] != floor(t[i]))
            continue;
        int x = x0 + (int)t[i] * cell + cell / 2;
        canvas_rect(c, x, y0 + ph, 1, 5, frame);
        snprintf(buf, sizeof(buf), "%lld", (long long)t[i]);
        canvas_text(c, x - text_width(buf) / 2, y0 + ph + 8, buf, ink);
    }
    canvas_text(c, x0 + pw / 2 - text_width(g->col_name) / 2, y0 + ph + 8 + FONT_H + 10,
                g->col_name, ink);
    /* y: row indices, labelled with the row's position */
    n = nice_ticks(0, (double)(g->rows - 1), ph / 36 + 1, t, 64, &dec);
    for (int i = 0; i < n; i++) {
        if (t[i] != floor(t[i]))
            continue;
        int y = y0 + (int)t[i] * cell + cell / 2;
        canvas_rect(c, x0 - 6, y, 5, 1, frame);
        snprintf(buf, sizeof(buf), "%g", g->row_pos[(int64_t)t[i]]);
        canvas_text(c, x0 - 9 - text_width(buf), y - FONT_H / 2, buf, ink);
    }
    int tw = text_width(g->row_name), span = ph > tw ? ph : tw;
    canvas_text_up(c, 10, y0 + span / 2 + tw / 2, g->row_name, ink);
    /* frame, just outside the cells */
    canvas_rect(c, x0 - 1, y0 - 1, pw + 2, 1, frame);
    canvas_rect(c, x0 - 1, y0 + ph, pw + 2, 1, frame);
    canvas_rect(c, x0 - 1, y0 - 1, 1, ph + 2, frame);
    canvas_rect(c, x0 + pw, y0 - 1, 1, ph + 2, frame);
}

static void draw_colour_bar(struct canvas *c, enum pe_colormap map, double lo, double hi,
                            int x, int y, int h, int masked)
{
    uint8_t rgb[3];
    for (int j = 0; j < h; j++) {
        pe_colormap(map, 1.0 - (double)j / (h - 1), rgb);
        canvas_rect(c, x, y + j, 20, 1, rgb);
    }
    canvas_rect(c, x - 1, y - 1, 22, 1, frame);
    canvas_rect(c, x - 1, y + h, 22, 1, frame);
    canvas_rect(c, x - 1, y - 1, 1, h + 2, frame);
    canvas_rect(c, x + 20, y - 1, 1, h + 2, frame);
    double t[64];
    int dec;
    char buf[64];
    int n = nice_ticks(lo, hi, h / 32 + 1, t, 64, &dec);
    for (int i = 0; i < n; i++) {
        int ty = y + (int)lround((1.0 - (t[i] - lo) / (hi - lo)) * (h - 1));
        canvas_rect(c, x + 21, ty, 4, 1, frame);
        fmt_tick(buf, sizeof(buf), t[i], dec);
        canvas_text(c, x + 28, ty - FONT_H / 2, buf, ink);
    }
    if (masked) {
        canvas_rect(c, x, y + h + 10, 20, FONT_H, pe_cmap_masked);
        canvas_text(c, x + 28, y + h + 10, "masked", ink);
    }
}

/* Centred on x_mid where it fits; on two lines (split at a ", ") when too wide. */
static void draw_title(struct canvas *c, const char *title, int x_mid)
{
    char line[2][160];
    snprintf(line[0], sizeof(line[0]), "%s", title);
    line[1][0] = '\0';
    if (text_width(title) > c->w - 16) {
        for (const char *p = title; (p = strstr(p, ", ")) != NULL; p++)
            if (text_width(title) - text_width(p) <= c->w - 16) {
                snprintf(line[0], sizeof(line[0]), "%.*s,", (int)(p - title), title);
                snprintf(line[1], sizeof(line[1]), "%s", p + 2);
            }
    }
    for (int i = 0; i < 2; i++) {
        int w = text_width(line[i]);
        int x = x_mid - w / 2;
        if (x + w > c->w - 8)
            x = c->w - 8 - w;
        if (x < 8)
            x = 8;
        canvas_text(c, x, line[1][0] ? 4 + i * (FONT_H + 3) : 12, line[i], ink);
    }
}

int cmd_heatmap(int argc, char **argv)
{
    struct enc_opts o;
    enc_opts_init(&o, 128, 64);
    const char *out = NULL;
    int64_t cell = 0;
    int map = -1, have_range = 0;
    double lo = 0, hi = 0;
    for (int i = 1; i < argc; i++) {
        if (tool_is_help(argv[i])) {
            heatmap_help();
            return TOOL_OK;
        }
        int r = enc_parse_opt(cmd, &o, argc, argv, &i);
        if (r < 0)
            return TOOL_USAGE;
        if (r > 0)
            continue;
        const char *a = argv[i];
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(out = tool_value(cmd, argc, argv, &i)))
                return TOOL_USAGE;
        } else if (!strcmp(a, "--cell")) {
            const char *v = tool_value(cmd, argc, argv, &i);
            if (!v)
                return TOOL_USAGE;
            if (!tool_parse_i64(v, &cell) || cell < 1 || cell > 64) {
                tool_error(cmd, "--cell must be an integer in [1, 64], got '%s'", v);
                return TOOL_USAGE;
            }
        } else if (!strcmp(a, "--range")) {
            const char *v = tool_value(cmd, argc, argv, &i);
            if (!v)
                return TOOL_USAGE;
            char lo_s[64], *colon = strchr(v, ':');
            if (!colon || (size_t)(colon - v) >= sizeof(lo_s)) {
                tool_error(cmd, "--range must be LO:HI, got '%s'", v);
                return TOOL_USAGE;
            }
            memcpy(lo_s, v, (size_t)(colon - v));
            lo_s[colon - v] = '\0';
            if (!tool_parse_double(lo_s, &lo) || !tool_parse_double(colon + 1, &hi) ||
                !(hi > lo)) {
                tool_error(cmd, "--range must be LO:HI with LO < HI, got '%s'", v);
                return TOOL_USAGE;
            }
            have_range = 1;
        } else if (!strcmp(a, "--colormap")) {
            const char *v = tool_value(cmd, argc, argv, &i);
            if (!v)
                return TOOL_USAGE;
            if (!strcmp(v, "diverging"))
                map = PE_CMAP_DIVERGING;
            else if (!strcmp(v, "sequential"))
                map = PE_CMAP_SEQUENTIAL;
            else {
                tool_error(cmd, "unknown --colormap '%s' (diverging, sequential)", v);
                return TOOL_USAGE;
            }
        } else {
            tool_error(cmd, "unknown argument '%s' (try --help)", a);
            return TOOL_USAGE;
        }
    }
    if (!enc_check(cmd, &o))
        return TOOL_USAGE;
    if (!out) {
        tool_error(cmd, "-o FILE.png is required");
        return TOOL_USAGE;
    }
    if (!png_available()) {
        tool_error(cmd, "built without libpng: PNG output is not available "
                        "(install libpng-dev and rebuild)");
        return TOOL_FAILED;
    }
    posenc_context *ctx = tool_open(cmd, o.backend);
    if (!ctx)
        return TOOL_FAILED;
    struct enc_grid g;
    int ok = enc_compute(cmd, ctx, &o, &g);
    posenc_context_destroy(&ctx);
    if (!ok)
        return TOOL_FAILED;

    if (!cell)
        cell = hm_default_cell(g.cols, g.rows);
    int64_t pw = g.cols * cell, ph = g.rows * cell;
    int64_t bar_h = ph > HM_MIN_PLOT_H ? ph : HM_MIN_PLOT_H;
    int64_t W = HM_LEFT + pw + HM_RIGHT, H = HM_TOP + bar_h + HM_BOTTOM;
    if (W > 16384 || H > 16384) {
        tool_error(cmd, "the image would be %lld x %lld pixels (at most 16384): use a smaller "
                        "--cell, --dim or --len", (long long)W, (long long)H);
        enc_grid_free(&g);
        return TOOL_USAGE;
    }
    if (!have_range)
        grid_range(&g, &lo, &hi);
    if (!(hi > lo))
        hi = lo + 1.0;
    if (map < 0)
        map = g.symmetric ? PE_CMAP_DIVERGING : PE_CMAP_SEQUENTIAL;

    struct canvas c;
    if (!canvas_init(&c, (int)W, (int)H)) {
        tool_error(cmd, "out of memory");
        enc_grid_free(&g);
        return TOOL_FAILED;
    }
    int masked = 0;
    uint8_t rgb[3];
    for (int64_t r = 0; r < g.rows; r++)
        for (int64_t col = 0; col < g.cols; col++) {
            double v = g.v[r * g.cols + col];
            if (!isfinite(v)) {
                masked = 1;
                memcpy(rgb, pe_cmap_masked, 3);
            } else {
                pe_colormap((enum pe_colormap)map, (v - lo) / (hi - lo), rgb);
            }
            canvas_rect(&c, HM_LEFT + (int)(col * cell), HM_TOP + (int)(r * cell), (int)cell,
                        (int)cell, rgb);
        }
    draw_axes(&c, &g, (int)cell);
    draw_colour_bar(&c, (enum pe_colormap)map, lo, hi, HM_LEFT + (int)pw + 20, HM_TOP,
                    (int)bar_h, masked);
    draw_title(&c, g.title, HM_LEFT + (int)pw / 2);

    char comment[512], err[512];
    snprintf(comment, sizeof(comment),
             "%s; computed on %s; cells %lldx%lld of %lld px at (%d, %d); range [%g, %g] %s",
             g.title, g.device, (long long)g.cols, (long long)g.rows, (long long)cell, HM_LEFT,
             HM_TOP, lo, hi, map == PE_CMAP_DIVERGING ? "diverging" : "sequential");
    ok = png_write(out, &c, comment, err, sizeof(err));
    canvas_free(&c);
    enc_grid_free(&g);
    if (!ok) {
        tool_error(cmd, "%s", err);
        return TOOL_FAILED;
    }
    printf("wrote %s (%lldx%lld): %s\n", out, (long long)W, (long long)H, comment);
    return TOOL_OK;
}
