/*
 * cmd_freqs.c - `posenc freqs`: the RoPE frequency of every pair, for several scalings in
 * one picture (geometry: images.h).
 *
 * Context extension works by slowing some pairs down: which ones, and by how much, is the
 * whole difference between the scalings. The top panel shows w_j (radians per token, log
 * scale) against the pair j, with the line where a pair turns once in the original
 * context (wavelength 2*pi/w_j = orig-ctx tokens): pairs below it never completed a turn
 * in training. The bottom panel shows w_j(unscaled) / w_j(scaled), how many times slower
 * each pair turns: linear slows every pair by s; NTK changes the base, a smooth curve from
 * 1 to about s; YaRN keeps the fast pairs, interpolates the slow ones by s, with a ramp
 * between; Llama 3 the same with bands set by wavelength; LongRoPE by its per-pair factors.
 */
#include "images.h"
#include "plot.h"
#include "tool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const cmd = "freqs";

static const uint8_t ink[3] = {32, 32, 32};
static const uint8_t frame[3] = {96, 96, 96};
static const uint8_t grid_rgb[3] = {232, 232, 232};
static const uint8_t marker[3] = {120, 120, 120};

struct fcurve {
    char label[64];
    struct posenc_rope_params rp;
    float *factors;
    double *w; /* [J] */
};

static void freqs_help(void)
{
    printf("usage: posenc freqs (-o FILE.png | --csv) [options]\n\n"
           "RoPE's frequency w_j (radians per token) of every pair j, for several scalings:\n"
           "which pairs each scaling slows down, and by how much. Top: w_j on a log scale,\n"
           "with the line where a pair turns once in --orig-ctx tokens. Bottom: how many\n"
           "times slower than unscaled each pair turns. The w_j come from posenc_rope_freqs\n"
           "(host, double).\n\n"
           "Examples: posenc freqs -o freqs.png\n"
           "          posenc freqs --scalings none,yarn,llama3 --factor 8 --orig-ctx 8192 \\\n"
           "                       --base 500000 -o llama31.png\n\n"
           "options:\n"
           "  -o, --output FILE     the PNG to write\n"
           "  --csv                 print pair,<w_j of each scaling> to stdout\n"
           "  --dim D               head dimension (default 128)\n"
           "  --base F              frequency base > 1 (default 10000)\n"
           "  --scalings LIST       comma-separated, of %s\n"
           "                        (default none,linear,ntk,yarn,llama3)\n"
           "  --factor F            scaling factor s > 0 (default 4)\n"
           "  --orig-ctx N          original context (default 4096)\n"
           "  --seq-len N           the sequence length dynamic NTK and LongRoPE see\n"
           "                        (default 4 x orig-ctx: past the original context)\n",
           tool_scaling_list);
}

static int px_x(int64_t j, int64_t J)
{
    return FQ_LEFT + (int)lround(((double)j + 0.5) * FQ_PLOT_W / (double)J);
}

static void frame_rect(struct canvas *c, int x, int y, int w, int h)
{
    canvas_rect(c, x - 1, y - 1, w + 2, 1, frame);
    canvas_rect(c, x - 1, y + h, w + 2, 1, frame);
    canvas_rect(c, x - 1, y - 1, 1, h + 2, frame);
    canvas_rect(c, x + w, y - 1, 1, h + 2, frame);
}

static void dashed_hline(struct canvas *c, int x0, int x1, int y, const uint8_t rgb[3])
{
    for (int x = x0; x < x1; x += 10)
        canvas_rect(c, x, y, x + 6 < x1 ? 6 : x1 - x, 1, rgb);
}

static int draw(const char *out, const struct fcurve *cv, int n, const double *w0, int64_t d,
                double base, int64_t orig, int quiet)
{
    int64_t J = d / 2;
    int W = FQ_LEFT + FQ_PLOT_W + FQ_RIGHT;
    int H = FQ_TOP + FQ_PLOT_H + FQ_GAP + FQ_PLOT2_H + FQ_BOTTOM;
    struct canvas c;
    if (!canvas_init(&c, W, H)) {
        tool_error(cmd, "out of memory");
        return 0;
    }
    char buf[128];
    double t[64];
    int dec;
    /* ---- top: log10 w_j ---- */
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < n; k++)
        for (int64_t j = 0; j < J; j++) {
            lo = fmin(lo, log10(cv[k].w[j]));
            hi = fmax(hi, log10(cv[k].w[j]));
        }
    double turn = log10(2.0 * 3.14159265358979323846 / (double)orig);
    lo = floor(fmin(lo, turn));
    hi = ceil(fmax(hi, turn));
    if (hi - lo < 1)
        hi = lo + 1;
    int py0 = FQ_TOP, ph = FQ_PLOT_H;
#define Y1(lg) (py0 + (int)lround((1.0 - ((lg) - lo) / (hi - lo)) * (ph - 1)))
    int step = (int)ceil((hi - lo) / 8.0); /* at most ~8 decade labels */
    for (double e = lo; e <= hi + 1e-9; e += 1) {
        int y = Y1(e);
        canvas_rect(&c, FQ_LEFT, y, FQ_PLOT_W, 1, grid_rgb);
        canvas_rect(&c, FQ_LEFT - 6, y, 5, 1, frame);
        if (((long)(e - lo)) % step == 0) {
            snprintf(buf, sizeof(buf), "1e%d", (int)e);
            if (e == 0)
                snprintf(buf, sizeof(buf), "1");
            canvas_text(&c, FQ_LEFT - 9 - text_width(buf), y - FONT_H / 2, buf, ink);
        }
    }
    /* the line where a pair turns once in the original context */
    int yt = Y1(turn);
    dashed_hline(&c, FQ_LEFT, FQ_LEFT + FQ_PLOT_W, yt, marker);
    snprintf(buf, sizeof(buf), "one turn in %lld tokens", (long long)orig);
    canvas_text(&c, FQ_LEFT + 8, yt - FONT_H - 4, buf, marker);
    for (int k = 0; k < n; k++) {
        int px = -1, py = 0;
        for (int64_t j = 0; j < J; j++) {
            int x = px_x(j, J), y = Y1(log10(cv[k].w[j]));
            if (px >= 0)
                canvas_line(&c, px, py, x, y, dc_palette[k], 2);
            px = x;
            py = y;
        }
    }
    frame_rect(&c, FQ_LEFT, py0, FQ_PLOT_W, ph);
    const char *yl = "w_j (rad/token, log)";
    canvas_text_up(&c, 12, py0 + ph / 2 + text_width(yl) / 2, yl, ink);
#undef Y1
    /* ---- bottom: how many times slower, w0 / w ---- */
    int qy0 = FQ_TOP + FQ_PLOT_H + FQ_GAP, qh = FQ_PLOT2_H;
    double smax = 1.0;
    for (int k = 0; k < n; k++)
        for (int64_t j = 0; j < J; j++)
            smax = fmax(smax, w0[j] / cv[k].w[j]);
    int nt = nice_ticks(0, smax * 1.05, 6, t, 64, &dec);
    double top = fmax(smax * 1.05, t[nt - 1]);
#define Y2(v) (qy0 + (int)lround((1.0 - (v) / top) * (qh - 1)))
    for (int i = 0; i < nt; i++) {
        int y = Y2(t[i]);
        canvas_rect(&c, FQ_LEFT, y, FQ_PLOT_W, 1, grid_rgb);
        canvas_rect(&c, FQ_LEFT - 6, y, 5, 1, frame);
        snprintf(buf, sizeof(buf), "x%.*f", dec, t[i]);
        canvas_text(&c, FQ_LEFT - 9 - text_width(buf), y - FONT_H / 2, buf, ink);
    }
    for (int k = 0; k < n; k++) {
        int px = -1, py = 0;
        for (int64_t j = 0; j < J; j++) {
            int x = px_x(j, J), y = Y2(w0[j] / cv[k].w[j]);
            if (px >= 0)
                canvas_line(&c, px, py, x, y, dc_palette[k], 2);
            px = x;
            py = y;
        }
    }
    frame_rect(&c, FQ_LEFT, qy0, FQ_PLOT_W, qh);
    const char *yl2 = "slower by";
    canvas_text_up(&c, 12, qy0 + qh / 2 + text_width(yl2) / 2, yl2, ink);
    const char *sub = "how many times slower than unscaled each pair turns";
    canvas_text(&c, FQ_LEFT + FQ_PLOT_W / 2 - text_width(sub) / 2, qy0 - FONT_H - 8, sub, ink);
#undef Y2
    /* ---- x axis (pairs), on both panels ---- */
    nt = nice_ticks(0, (double)(J - 1), 9, t, 64, &dec);
    for (int i = 0; i < nt; i++) {
        if (t[i] != floor(t[i]))
            continue;
        int x = px_x((int64_t)t[i], J);
        canvas_rect(&c, x, py0, 1, ph, grid_rgb);
        canvas_rect(&c, x, qy0, 1, qh, grid_rgb);
        canvas_rect(&c, x, py0 + ph, 1, 5, frame);
        canvas_rect(&c, x, qy0 + qh, 1, 5, frame);
        snprintf(buf, sizeof(buf), "%lld", (long long)t[i]);
        canvas_text(&c, x - text_width(buf) / 2, qy0 + qh + 8, buf, ink);
    }
    const char *xl = "pair j (fast, high frequency -> slow, low frequency)";
    canvas_text(&c, FQ_LEFT + FQ_PLOT_W / 2 - text_width(xl) / 2, qy0 + qh + 8 + FONT_H + 12,
                xl, ink);
    snprintf(buf, sizeof(buf), "RoPE frequency per pair, d=%lld, base %g", (long long)d, base);
    canvas_text(&c, FQ_LEFT + FQ_PLOT_W / 2 - text_width(buf) / 2, 12, buf, ink);
    /* grid lines may have crossed the curves' frames: redraw the frames */
    frame_rect(&c, FQ_LEFT, py0, FQ_PLOT_W, ph);
    frame_rect(&c, FQ_LEFT, qy0, FQ_PLOT_W, qh);
    /* legend, top right of the top panel (the curves fall from the top left) */
    int lw = 0;
    for (int k = 0; k < n; k++)
        lw = lw > text_width(cv[k].label) ? lw : text_width(cv[k].label);
    int lh = n * (FONT_H + 8) + 8;
    int lx = FQ_LEFT + FQ_PLOT_W - lw - 58, ly = py0 + 10;
    static const uint8_t white[3] = {255, 255, 255};
    canvas_rect(&c, lx - 1, ly - 1, lw + 50, lh + 2, frame);
    canvas_rect(&c, lx, ly, lw + 48, lh, white);
    for (int k = 0; k < n; k++) {
        int y = ly + 8 + k * (FONT_H + 8);
        canvas_rect(&c, lx + 8, y + FONT_H / 2 - 1, 24, 3, dc_palette[k]);
        canvas_text(&c, lx + 40, y, cv[k].label, ink);
    }
    char comment[256];
    snprintf(comment, sizeof(comment), "posenc freqs: d=%lld base %g, %d scalings, orig %lld",
             (long long)d, base, n, (long long)orig);
    return tool_save_png(cmd, &c, out, comment, quiet);
}

int cmd_freqs(int argc, char **argv)
{
    const char *out = NULL, *scalings = "none,linear,ntk,yarn,llama3";
    int csv = 0;
    int64_t d = 128, orig = TOOL_DEFAULT_ORIG_CTX, seq_len = 0;
    double base = 10000.0, factor = TOOL_DEFAULT_FACTOR;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (tool_is_help(a)) {
            freqs_help();
            return TOOL_OK;
        }
        if (!strcmp(a, "--csv")) {
            csv = 1;
            continue;
        }
        int known = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--dim") ||
                    !strcmp(a, "--base") || !strcmp(a, "--scalings") ||
                    !strcmp(a, "--factor") || !strcmp(a, "--orig-ctx") ||
                    !strcmp(a, "--seq-len");
        if (!known) {
            tool_error(cmd, "unknown argument '%s' (try posenc freqs --help)", a);
            return TOOL_USAGE;
        }
        if (!(v = tool_value(cmd, argc, argv, &i)))
            return TOOL_USAGE;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
        } else if (!strcmp(a, "--scalings")) {
            scalings = v;
        } else if (!strcmp(a, "--factor")) {
            if (!tool_parse_factor(cmd, a, v, &factor))
                return TOOL_USAGE;
        } else if (!strcmp(a, "--dim")) {
            if (!tool_parse_i64(v, &d) || d < 4 || d > 65536 || d % 2) {
                tool_error(cmd, "--dim must be an even integer in [4, 65536], got '%s'", v);
                return TOOL_USAGE;
            }
        } else if (!strcmp(a, "--base")) {
            if (!tool_parse_double(v, &base) || !(base > 1.0) || base > 3e38) {
                tool_error(cmd, "--base must be a number > 1, got '%s'", v);
                return TOOL_USAGE;
            }
        } else {
            int64_t *dst = !strcmp(a, "--orig-ctx") ? &orig : &seq_len;
            if (!tool_parse_i64(v, dst) || *dst < 1 || *dst > INT32_MAX) {
                tool_error(cmd, "%s must be an integer in [1, 2^31-1], got '%s'", a, v);
                return TOOL_USAGE;
            }
        }
    }
    if (!out && !csv) {
        tool_error(cmd, "give -o FILE.png, --csv, or both");
        return TOOL_USAGE;
    }
    if (out && !png_available()) {
        tool_error(cmd, "built without libpng: PNG output is not available (--csv works)");
        return TOOL_FAILED;
    }
    if (!seq_len)
        seq_len = orig * 4 > INT32_MAX ? INT32_MAX : orig * 4;
    int64_t J = d / 2;
    struct fcurve cv[6];
    int n = 0, ok = 1;
    char list[256];
    snprintf(list, sizeof(list), "%s", scalings);
    char *save = NULL;
    for (char *s = strtok_r(list, ",", &save); s && ok; s = strtok_r(NULL, ",", &save)) {
        posenc_rope_scaling_kind kind;
        if (!tool_parse_scaling(s, &kind)) {
            tool_error(cmd, "--scalings: unknown scaling '%s' (%s)", s, tool_scaling_list);
            ok = 0;
            break;
        }
        if (n == 6) {
            tool_error(cmd, "--scalings: at most 6 curves");
            ok = 0;
            break;
        }
        struct fcurve *c = &cv[n++];
        memset(c, 0, sizeof(*c));
        c->rp.freq_base = (float)base;
        if (!tool_scaling_setup(cmd, &c->rp.scaling, kind, factor, orig, J, seq_len,
                                &c->factors)) {
            ok = 0;
            break;
        }
        if (kind == POSENC_ROPE_SCALING_NONE)
            snprintf(c->label, sizeof(c->label), "%s", tool_scaling_label(kind));
        else
            snprintf(c->label, sizeof(c->label), "%s x%g", tool_scaling_label(kind),
                     (double)c->rp.scaling.factor);
    }
    if (ok && n == 0) {
        tool_error(cmd, "--scalings is empty");
        ok = 0;
    }
    if (!ok) {
        for (int k = 0; k < n; k++)
            free(cv[k].factors);
        return TOOL_USAGE;
    }
    double *w0 = malloc((size_t)J * sizeof(double));
    struct posenc_rope_params p0 = {.freq_base = (float)base};
    posenc_status st = w0 ? posenc_rope_freqs(d, &p0, w0, NULL, NULL) : POSENC_ERR_OUT_OF_MEMORY;
    if (st != POSENC_OK)
        ok = tool_lib_failed(cmd, NULL, "posenc_rope_freqs", st);
    for (int k = 0; ok && k < n; k++) {
        cv[k].w = malloc((size_t)J * sizeof(double));
        st = cv[k].w ? posenc_rope_freqs(d, &cv[k].rp, cv[k].w, NULL, NULL)
                     : POSENC_ERR_OUT_OF_MEMORY;
        if (st != POSENC_OK) {
            char call[96];
            snprintf(call, sizeof(call), "posenc_rope_freqs (%.63s)", cv[k].label);
            ok = tool_lib_failed(cmd, NULL, call, st);
        }
    }
    if (ok && csv) {
        printf("pair");
        for (int k = 0; k < n; k++)
            printf(",%s", cv[k].label);
        printf("\n");
        for (int64_t j = 0; j < J; j++) {
            printf("%lld", (long long)j);
            for (int k = 0; k < n; k++)
                printf(",%.17g", cv[k].w[j]);
            printf("\n");
        }
    }
    if (ok && out)
        ok = draw(out, cv, n, w0, d, base, orig, csv);
    free(w0);
    for (int k = 0; k < n; k++) {
        free(cv[k].w);
        free(cv[k].factors);
    }
    return ok ? TOOL_OK : tool_fail_code();
}
