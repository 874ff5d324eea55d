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

#define PI_D 3.14159265358979323846

static const char *const cmd = "heatmap";

static const uint8_t ink[3] = {32, 32, 32};
static const uint8_t frame[3] = {96, 96, 96};

static void heatmap_help(void)
{
    printf("usage: posenc heatmap --kind sinusoidal|rope|alibi|t5 -o FILE.png [options]\n\n"
           "Draws the encoding as a heat map, computed through the library on a backend:\n"
           "  sinusoidal  x = dimension, y = position (the figure of the Transformer paper)\n"
           "  rope        x = pair j, y = position: the angle pos*w_j wrapped to [-pi, pi)\n"
           "              in radians, cyclic colours (or --value cos|sin, in [-1, 1])\n"
           "  alibi       x = key, y = query: the bias of one head (grey: masked)\n"
           "  t5          x = key, y = query: the T5 bucket of k - q\n"
           "Position / query 0 is the top row. Defaults: --dim 128, --len 64. A grid over\n"
           "512 cells along a side is shown downsampled: each pixel the mean of its cells.\n\n"
           "Example: posenc heatmap --kind sinusoidal --dim 128 --len 50 -o pe.png\n\n"
           "options:\n"
           "%s"
           "image:\n"
           "  -o, --output FILE                 the PNG to write (required)\n"
           "  --cell N                          square cells of N px (default: about 512 px\n"
           "                                    along each side, cells of 1 to 32 px)\n"
           "  --range LO:HI                     values mapped to the ends of the colour bar\n"
           "                                    (default [-1, 1] for sin/cos, [-pi, pi] for\n"
           "                                    angles, else min:max)\n"
           "  --colormap diverging|sequential|cyclic   (default diverging for sin/cos data,\n"
           "                                    cyclic for angles, else sequential)\n",
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

/* The grid as drawn: g->cols x g->rows bins of bx x by cells of the computed grid (cols0 x
 * rows0 cells); ticks are labelled in the computed grid's indices / positions. */
struct shown {
    int64_t cols0, rows0, bx, by;
    const double *row_pos0; /* [rows0] */
};

static void draw_axes(struct canvas *c, const struct enc_grid *g, const struct shown *sh,
                      int cw, int ch)
{
    int x0 = HM_LEFT, y0 = HM_TOP, pw = (int)g->cols * cw, ph = (int)g->rows * ch;
    double t[64];
    int dec;
    char buf[96];
    /* x: column indices of the computed grid, about one label per 64 px, at most 11 */
    int want = pw / 64 + 1;
    want = want < 3 ? 3 : want > 11 ? 11 : want;
    int n = nice_ticks(0, (double)(sh->cols0 - 1), want, t, 64, &dec);
    for (int i = 0; i < n; i++) {
        if (t[i] != floor(t[i]))
            continue;
        int x = x0 + (int)(((double)t[i] / (double)sh->bx + 0.5) * cw);
        canvas_rect(c, x, y0 + ph, 1, 5, frame);
        snprintf(buf, sizeof(buf), "%lld", (long long)t[i]);
        canvas_text(c, x - text_width(buf) / 2, y0 + ph + 8, buf, ink);
    }
    char name[96];
    if (sh->bx > 1)
        snprintf(name, sizeof(name), "%s (mean of %lld per pixel)", g->col_name,
                 (long long)sh->bx);
    else
        snprintf(name, sizeof(name), "%s", g->col_name);
    canvas_text(c, x0 + pw / 2 - text_width(name) / 2, y0 + ph + 8 + FONT_H + 10, name, ink);
    /* y: row indices, labelled with the row's position, about one per 40 px, at most 11 */
    want = ph / 40 + 1;
    want = want < 3 ? 3 : want > 11 ? 11 : want;
    n = nice_ticks(0, (double)(sh->rows0 - 1), want, t, 64, &dec);
    for (int i = 0; i < n; i++) {
        if (t[i] != floor(t[i]))
            continue;
        int y = y0 + (int)(((double)t[i] / (double)sh->by + 0.5) * ch);
        canvas_rect(c, x0 - 6, y, 5, 1, frame);
        snprintf(buf, sizeof(buf), "%g", sh->row_pos0[(int64_t)t[i]]);
        canvas_text(c, x0 - 9 - text_width(buf), y - FONT_H / 2, buf, ink);
    }
    if (sh->by > 1)
        snprintf(name, sizeof(name), "%s (mean of %lld)", g->row_name, (long long)sh->by);
    else
        snprintf(name, sizeof(name), "%s", g->row_name);
    int tw = text_width(name), span = ph > tw ? ph : tw;
    canvas_text_up(c, 10, y0 + span / 2 + tw / 2, name, ink);
    /* frame, just outside the cells */
    canvas_rect(c, x0 - 1, y0 - 1, pw + 2, 1, frame);
    canvas_rect(c, x0 - 1, y0 + ph, pw + 2, 1, frame);
    canvas_rect(c, x0 - 1, y0 - 1, 1, ph + 2, frame);
    canvas_rect(c, x0 + pw, y0 - 1, 1, ph + 2, frame);
}

/* Wrap RoPE angles to [-pi, pi). */
static void wrap_angles(struct enc_grid *g)
{
    const double two_pi = 2.0 * PI_D;
    for (int64_t i = 0; i < g->rows * g->cols; i++)
        g->v[i] -= two_pi * floor((g->v[i] + PI_D) / two_pi);
}

/* Replace g's values by the means of bx x by bins (angles: circular means; -inf only
 * where a whole bin is -inf). Returns 0 when out of memory. */
static int downsample(struct enc_grid *g, int64_t bx, int64_t by)
{
    int64_t C = (g->cols + bx - 1) / bx, R = (g->rows + by - 1) / by;
    double *v = malloc((size_t)(C * R) * sizeof(*v));
    if (!v)
        return 0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            double sum = 0, s = 0, co = 0;
            int64_t n = 0;
            for (int64_t rr = r * by; rr < (r + 1) * by && rr < g->rows; rr++)
                for (int64_t cc = c * bx; cc < (c + 1) * bx && cc < g->cols; cc++) {
                    double x = g->v[rr * g->cols + cc];
                    if (!isfinite(x))
                        continue;
                    sum += x;
                    s += sin(x);
                    co += cos(x);
                    n++;
                }
            v[r * C + c] = n == 0 ? -INFINITY : g->angle ? atan2(s, co) : sum / (double)n;
        }
    free(g->v);
    g->v = v;
    g->cols = C;
    g->rows = R;
    return 1;
}

static void draw_colour_bar(struct canvas *c, enum pe_colormap map, double lo, double hi,
                            int x, int y, int h, int masked, const char *unit, int pi_ticks)
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
    static const char *const pi_names[] = {"-pi", "-pi/2", "0", "pi/2", "pi"};
    /* about one label per 40 px, at most 9 */
    int want = h / 40 + 1;
    int n = pi_ticks ? 5 : nice_ticks(lo, hi, want > 9 ? 9 : want, t, 64, &dec);
    for (int i = 0; i < n; i++) {
        double v = pi_ticks ? (i - 2) * PI_D / 2 : t[i];
        int ty = y + (int)lround((1.0 - (v - lo) / (hi - lo)) * (h - 1));
        if (ty < y || ty > y + h - 1)
            continue;
        canvas_rect(c, x + 21, ty, 4, 1, frame);
        if (pi_ticks)
            snprintf(buf, sizeof(buf), "%s", pi_names[i]);
        else
            fmt_tick(buf, sizeof(buf), v, dec);
        canvas_text(c, x + 28, ty - FONT_H / 2, buf, ink);
    }
    if (unit && unit[0])
        canvas_text(c, x, y + h + 10, unit, ink);
    if (masked) {
        canvas_rect(c, x, y + h + 10, 20, FONT_H, pe_cmap_masked);
        canvas_text(c, x + 28, y + h + 10, "masked", ink);
    }
}

/* The title, wrapped at ", " into lines that fit the image, then `note` on a line of its
 * own; at most 3 lines in the HM_TOP band (centred on x_mid where they fit). */
static void draw_title(struct canvas *c, const char *title, const char *note, int x_mid)
{
    char line[3][176];
    int n = 0, max_w = c->w - 16;
    const char *p = title;
    while (*p && n < 3) {
        /* the longest prefix ending before a ", " that fits; else the whole rest */
        const char *cut = NULL;
        for (const char *q = p; (q = strstr(q, ", ")) != NULL; q++) {
            char tmp[160];
            snprintf(tmp, sizeof(tmp), "%.*s,", (int)(q - p), p);
            if (text_width(tmp) <= max_w)
                cut = q;
            else
                break;
        }
        char tmp[160];
        snprintf(tmp, sizeof(tmp), "%s", p);
        if (text_width(tmp) <= max_w || !cut || n == 2) {
            snprintf(line[n++], sizeof(line[0]), "%s", p);
            break;
        }
        snprintf(line[n++], sizeof(line[0]), "%.*s,", (int)(cut - p), p);
        p = cut + 2;
    }
    if (note && note[0] && n < 3)
        snprintf(line[n++], sizeof(line[0]), "(%s)", note);
    int top = (HM_TOP - 4 - n * (FONT_H + 3)) / 2;
    for (int i = 0; i < n; i++) {
        int w = text_width(line[i]);
        int x = x_mid - w / 2;
        if (x + w > c->w - 8)
            x = c->w - 8 - w;
        if (x < 8)
            x = 8;
        canvas_text(c, x, top + i * (FONT_H + 3), line[i], ink);
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
            else if (!strcmp(v, "cyclic"))
                map = PE_CMAP_CYCLIC;
            else {
                tool_error(cmd, "unknown --colormap '%s' (diverging, sequential, cyclic)", v);
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
        return tool_fail_code();

    if (g.angle)
        wrap_angles(&g);
    struct shown sh = {g.cols, g.rows, hm_bin(g.cols), hm_bin(g.rows), NULL};
    double *row_pos0 = g.row_pos; /* kept: the downsampled grid is labelled with these */
    if ((sh.bx > 1 || sh.by > 1) && !downsample(&g, sh.bx, sh.by)) {
        tool_error(cmd, "out of memory");
        enc_grid_free(&g);
        return TOOL_FAILED;
    }
    sh.row_pos0 = row_pos0;
    /* cells: --cell square, else about HM_MAX_PLOT px along each side */
    int64_t cw = cell ? cell : hm_default_cell(g.cols, g.cols);
    int64_t ch = cell ? cell : hm_default_cell(g.rows, g.rows);
    int64_t pw = g.cols * cw, ph = g.rows * ch;
    int64_t bar_h = ph > HM_MIN_PLOT_H ? ph : HM_MIN_PLOT_H;
    int64_t W = hm_image_w(g.cols, cw), H = HM_TOP + bar_h + HM_BOTTOM;
    if (W > 16384 || H > 16384) {
        tool_error(cmd, "the image would be %lld x %lld pixels (at most 16384): use a smaller "
                        "--cell, --dim or --len", (long long)W, (long long)H);
        enc_grid_free(&g);
        return TOOL_USAGE;
    }
    int pi_ticks = 0;
    if (!have_range && g.angle) {
        lo = -PI_D;
        hi = PI_D;
        pi_ticks = 1;
    } else if (!have_range) {
        grid_range(&g, &lo, &hi);
    }
    if (!(hi > lo))
        hi = lo + 1.0;
    if (map < 0)
        map = g.angle ? PE_CMAP_CYCLIC : g.symmetric ? PE_CMAP_DIVERGING : PE_CMAP_SEQUENTIAL;

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
            canvas_rect(&c, HM_LEFT + (int)(col * cw), HM_TOP + (int)(r * ch), (int)cw,
                        (int)ch, rgb);
        }
    draw_axes(&c, &g, &sh, (int)cw, (int)ch);
    draw_colour_bar(&c, (enum pe_colormap)map, lo, hi, HM_LEFT + (int)pw + 20, HM_TOP,
                    (int)bar_h, masked, g.angle ? "rad" : NULL, pi_ticks);
    draw_title(&c, g.title, g.note, (int)W / 2);

    char comment[512];
    snprintf(comment, sizeof(comment),
             "%s; computed on %s; cells %lldx%lld of %lldx%lld px at (%d, %d); range [%g, %g] %s",
             g.title, g.device, (long long)g.cols, (long long)g.rows, (long long)cw,
             (long long)ch, HM_LEFT, HM_TOP, lo + 0.0, hi + 0.0,
             map == PE_CMAP_DIVERGING ? "diverging"
             : map == PE_CMAP_CYCLIC  ? "cyclic"
                                      : "sequential");
    enc_grid_free(&g);
    return tool_save_png(cmd, &c, out, comment, 0) ? TOOL_OK : TOOL_FAILED;
}
