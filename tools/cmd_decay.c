/*
 * cmd_decay.c - `posenc decay`: RoPE's long-term decay (RoFormer, Su et al. 2021, 3.4.3).
 *
 * With the frequencies w_k of posenc_rope_freqs and relative distance r, RoFormer bounds
 * the attention score by max|h_{j+1} - h_j| * sum_j |S_j|, S_j = sum_{k<j} e^{i r w_k}.
 * The "relative upper bound" plotted is (1/(d/2)) sum_{j=1..d/2} |S_j|: (d/2 + 1)/2 at
 * r = 0, decaying with r. Scaling the frequencies (linear, NTK, YaRN, Llama 3) changes how
 * fast it decays; several scalings are drawn in one plot. mscale is not included: it
 * multiplies every score alike.
 */
#include "images.h"
#include "plot.h"
#include "tool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const cmd = "decay";

static const uint8_t ink[3] = {32, 32, 32};
static const uint8_t frame[3] = {96, 96, 96};
static const uint8_t grid_rgb[3] = {232, 232, 232};

struct curve {
    char label[64];
    struct posenc_rope_params rp;
    double *w;     /* [d/2] */
    double *bound; /* [n_dist] */
    float *factors; /* LongRoPE's arrays (tool_scaling_setup) */
};

static void decay_help(void)
{
    printf("usage: posenc decay (-o FILE.png | --csv) [options]\n\n"
           "RoPE's long-term decay (RoFormer 3.4.3): the relative upper bound of the\n"
           "attention score, (1/(d/2)) sum_j |S_j| with S_j = sum_{k<j} e^(i r w_k), against\n"
           "the relative distance r, for several frequency scalings in one plot. The w_k\n"
           "come from posenc_rope_freqs (host, double); mscale is not included.\n\n"
           "Examples: posenc decay -o decay.png\n"
           "          posenc decay --scalings none --linear-x --max-dist 250 -o roformer.png\n\n"
           "options:\n"
           "  -o, --output FILE     the PNG to write\n"
           "  --csv                 print distance,<one column per scaling> to stdout\n"
           "  --dim D               head dimension (default 128)\n"
           "  --base F              frequency base (default 10000)\n"
           "  --scalings LIST       comma-separated, of none, linear, ntk, dynamic, yarn,\n"
           "                        llama3, longrope, ggml-yarn (default none,linear,ntk,yarn)\n"
           "  --factor F            scaling factor s > 0 (default 4)\n"
           "  --orig-ctx N          original context of dynamic, yarn, llama3, longrope,\n"
           "                        ggml-yarn (default 4096)\n"
           "  --max-dist N          largest distance (default 32768)\n"
           "  --step N              distance step of --csv (default 1)\n"
           "  --linear-x            linear distance axis from r = 0 (default: log, from r = 1)\n"
           "  --raw                 plot every distance; by default each pixel column shows\n"
           "                        the mean over its distances (the bound oscillates fast)\n"
           "  --quiet               no progress on stderr (shown for long runs, only when\n"
           "                        stderr is a terminal)\n");
}

static int add_curve(struct curve *cv, int *n, const char *name, double factor, int64_t orig,
                     int64_t d, int64_t dist)
{
    posenc_rope_scaling_kind kind;
    if (!tool_parse_scaling(name, &kind)) {
        tool_error(cmd, "--scalings: unknown scaling '%s' (%s)", name, tool_scaling_list);
        return 0;
    }
    if (*n == 6) {
        tool_error(cmd, "--scalings: at most 6 curves");
        return 0;
    }
    struct curve *c = &cv[(*n)++];
    memset(c, 0, sizeof(*c));
    /* dynamic NTK and LongRoPE see a sequence as long as the largest distance */
    if (!tool_scaling_setup(cmd, &c->rp.scaling, kind, factor, orig, d / 2, dist + 1,
                            &c->factors))
        return 0;
    if (kind == POSENC_ROPE_SCALING_NONE)
        snprintf(c->label, sizeof(c->label), "%s", tool_scaling_label(kind));
    else
        snprintf(c->label, sizeof(c->label), "%s x%g", tool_scaling_label(kind),
                 (double)c->rp.scaling.factor);
    if (c->rp.scaling.original_ctx) {
        size_t len = strlen(c->label);
        snprintf(c->label + len, sizeof(c->label) - len, " (orig %lld)", (long long)orig);
    }
    return 1;
}

/* bound[i] for r = i (0 <= i < n). */
static void decay_bound(const double *w, int64_t J, int64_t n, double *bound)
{
    for (int64_t r = 0; r < n; r++) {
        double re = 0, im = 0, sum = 0;
        for (int64_t k = 0; k < J; k++) {
            double a = (double)r * w[k];
            re += cos(a);
            im += sin(a);
            sum += hypot(re, im);
        }
        bound[r] = sum / (double)J;
    }
}

static int px_x(double r, double rmax, int log_x)
{
    double t = log_x ? log10(fmax(r, 1.0)) / log10(rmax) : r / rmax;
    return DC_LEFT + (int)lround(t * (DC_PLOT_W - 1));
}

static int px_y(double v, double vmax)
{
    return DC_TOP + (int)lround((1.0 - v / vmax) * (DC_PLOT_H - 1));
}

static int draw_plot(const char *out, const struct curve *cv, int n, int64_t dist, int log_x,
                     int raw, int64_t d, double base, int quiet)
{
    int W = DC_LEFT + DC_PLOT_W + DC_RIGHT, H = DC_TOP + DC_PLOT_H + DC_BOTTOM;
    struct canvas c;
    if (!canvas_init(&c, W, H)) {
        tool_error(cmd, "out of memory");
        return 0;
    }
    double vmax = 0;
    for (int k = 0; k < n; k++)
        vmax = fmax(vmax, cv[k].bound[0]);
    double t[64];
    int dec;
    char buf[64];
    /* y grid, ticks and labels */
    int nt = nice_ticks(0, vmax, 8, t, 64, &dec);
    vmax = fmax(vmax, t[nt - 1]);
    for (int i = 0; i < nt; i++) {
        int y = px_y(t[i], vmax);
        canvas_rect(&c, DC_LEFT, y, DC_PLOT_W, 1, grid_rgb);
        canvas_rect(&c, DC_LEFT - 6, y, 5, 1, frame);
        snprintf(buf, sizeof(buf), "%.*f", dec, t[i]);
        canvas_text(&c, DC_LEFT - 9 - text_width(buf), y - FONT_H / 2, buf, ink);
    }
    /* x grid, ticks and labels */
    double rmax = (double)dist;
    if (log_x) {
        nt = 0;
        for (double p = 1; p <= rmax * (1 + 1e-9) && nt < 64; p *= 10)
            t[nt++] = p;
        dec = 0;
    } else {
        nt = nice_ticks(0, rmax, 9, t, 64, &dec);
    }
    for (int i = 0; i < nt; i++) {
        int x = px_x(t[i], rmax, log_x);
        canvas_rect(&c, x, DC_TOP, 1, DC_PLOT_H, grid_rgb);
        canvas_rect(&c, x, DC_TOP + DC_PLOT_H, 1, 5, frame);
        snprintf(buf, sizeof(buf), "%.*f", dec, t[i]);
        canvas_text(&c, x - text_width(buf) / 2, DC_TOP + DC_PLOT_H + 8, buf, ink);
    }
    const char *xl = log_x ? "relative distance r (log scale)" : "relative distance r";
    if (!raw && dist + 1 > DC_PLOT_W)
        xl = log_x ? "relative distance r (log scale; mean per pixel)"
                   : "relative distance r (mean per pixel)";
    canvas_text(&c, DC_LEFT + DC_PLOT_W / 2 - text_width(xl) / 2,
                DC_TOP + DC_PLOT_H + 8 + FONT_H + 12, xl, ink);
    const char *yl = "relative upper bound";
    canvas_text_up(&c, 12, DC_TOP + DC_PLOT_H / 2 + text_width(yl) / 2, yl, ink);
    snprintf(buf, sizeof(buf), "RoPE long-term decay, d=%lld, base %g", (long long)d, base);
    canvas_text(&c, DC_LEFT + DC_PLOT_W / 2 - text_width(buf) / 2, 12, buf, ink);
    /* curves: a polyline through each pixel column's mean over the distances that fall in
     * it (every distance when raw, or when there is at most one per column) */
    for (int k = 0; k < n; k++) {
        int64_t r0 = log_x ? 1 : 0;
        if (raw) {
            int px = px_x((double)r0, rmax, log_x), py = px_y(cv[k].bound[r0], vmax);
            for (int64_t r = r0 + 1; r <= dist; r++) {
                int x = px_x((double)r, rmax, log_x), y = px_y(cv[k].bound[r], vmax);
                canvas_line(&c, px, py, x, y, dc_palette[k], 2);
                px = x;
                py = y;
            }
            continue;
        }
        double sum[DC_PLOT_W] = {0};
        int64_t cnt[DC_PLOT_W] = {0};
        for (int64_t r = r0; r <= dist; r++) {
            int col = px_x((double)r, rmax, log_x) - DC_LEFT;
            sum[col] += cv[k].bound[r];
            cnt[col]++;
        }
        int px = -1, py = 0;
        for (int col = 0; col < DC_PLOT_W; col++) {
            if (!cnt[col])
                continue;
            int y = px_y(sum[col] / (double)cnt[col], vmax);
            if (px >= 0)
                canvas_line(&c, px, py, DC_LEFT + col, y, dc_palette[k], 2);
            px = DC_LEFT + col;
            py = y;
        }
    }
    /* frame */
    canvas_rect(&c, DC_LEFT - 1, DC_TOP - 1, DC_PLOT_W + 2, 1, frame);
    canvas_rect(&c, DC_LEFT - 1, DC_TOP + DC_PLOT_H, DC_PLOT_W + 2, 1, frame);
    canvas_rect(&c, DC_LEFT - 1, DC_TOP - 1, 1, DC_PLOT_H + 2, frame);
    canvas_rect(&c, DC_LEFT + DC_PLOT_W, DC_TOP - 1, 1, DC_PLOT_H + 2, frame);
    /* legend, top right inside the plot */
    int lw = 0;
    for (int k = 0; k < n; k++)
        lw = lw > text_width(cv[k].label) ? lw : text_width(cv[k].label);
    int lx = DC_LEFT + DC_PLOT_W - lw - 58, ly = DC_TOP + 10, lh = n * (FONT_H + 8) + 8;
    static const uint8_t white[3] = {255, 255, 255};
    canvas_rect(&c, lx - 1, ly - 1, lw + 50, lh + 2, frame);
    canvas_rect(&c, lx, ly, lw + 48, lh, white);
    for (int k = 0; k < n; k++) {
        int y = ly + 8 + k * (FONT_H + 8);
        canvas_rect(&c, lx + 8, y + FONT_H / 2 - 1, 24, 3, dc_palette[k]);
        canvas_text(&c, lx + 40, y, cv[k].label, ink);
    }
    char comment[256];
    snprintf(comment, sizeof(comment), "posenc decay: d=%lld base %g, r = 0..%lld%s",
             (long long)d, base, (long long)dist, log_x ? " (log x)" : "");
    return tool_save_png(cmd, &c, out, comment, quiet);
}

int cmd_decay(int argc, char **argv)
{
    const char *out = NULL, *scalings = "none,linear,ntk,yarn";
    int csv = 0, log_x = 1, raw = 0, quiet = 0;
    int64_t d = 128, orig = TOOL_DEFAULT_ORIG_CTX, dist = 32768, step = 1;
    double base = 10000.0, factor = TOOL_DEFAULT_FACTOR;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (tool_is_help(a)) {
            decay_help();
            return TOOL_OK;
        }
        if (!strcmp(a, "--csv")) {
            csv = 1;
            continue;
        }
        if (!strcmp(a, "--linear-x")) {
            log_x = 0;
            continue;
        }
        if (!strcmp(a, "--raw")) {
            raw = 1;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        }
        int known = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--dim") ||
                    !strcmp(a, "--base") || !strcmp(a, "--scalings") ||
                    !strcmp(a, "--factor") || !strcmp(a, "--orig-ctx") ||
                    !strcmp(a, "--max-dist") || !strcmp(a, "--step");
        if (!known) {
            tool_error(cmd, "unknown argument '%s' (try --help)", a);
            return TOOL_USAGE;
        }
        if (!(v = tool_value(cmd, argc, argv, &i)))
            return TOOL_USAGE;
        int ok = 1;
        if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            out = v;
        else if (!strcmp(a, "--scalings"))
            scalings = v;
        else if (!strcmp(a, "--dim"))
            ok = tool_parse_i64(v, &d) && d >= 2 && d <= 65536 && d % 2 == 0;
        else if (!strcmp(a, "--base"))
            ok = tool_parse_double(v, &base) && base > 1.0 && base < 3e38;
        else if (!strcmp(a, "--factor")) {
            if (!tool_parse_factor(cmd, a, v, &factor))
                return TOOL_USAGE;
        }
        else if (!strcmp(a, "--orig-ctx"))
            ok = tool_parse_i64(v, &orig) && orig >= 1 && orig <= INT32_MAX;
        else if (!strcmp(a, "--max-dist"))
            ok = tool_parse_i64(v, &dist) && dist >= 10 && dist <= (1 << 20);
        else if (!strcmp(a, "--step"))
            ok = tool_parse_i64(v, &step) && step >= 1;
        if (!ok) {
            static const char *const want[][2] = {
                {"--dim", "an even integer in [2, 65536]"}, {"--base", "a number > 1"},
                {"--orig-ctx", "an integer in [1, 2^31-1]"},
                {"--max-dist", "an integer in [10, 2^20]"}, {"--step", "an integer >= 1"}};
            for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++)
                if (!strcmp(a, want[k][0]))
                    tool_error(cmd, "%s must be %s, got '%s'", a, want[k][1], v);
            return TOOL_USAGE;
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
    struct curve cv[6];
    int n = 0;
    char list[256];
    snprintf(list, sizeof(list), "%s", scalings);
    char *save = NULL;
    int bad = 0;
    for (char *s = strtok_r(list, ",", &save); s && !bad; s = strtok_r(NULL, ",", &save))
        bad = !add_curve(cv, &n, s, factor, orig, d, dist);
    if (bad) {
        for (int k = 0; k < n; k++)
            free(cv[k].factors);
        return TOOL_USAGE;
    }
    if (n == 0) {
        tool_error(cmd, "--scalings is empty");
        return TOOL_USAGE;
    }
    int64_t J = d / 2;
    int ok = 1;
    tool_progress_init(quiet);
    for (int k = 0; k < n; k++) {
        cv[k].rp.freq_base = (float)base;
        cv[k].w = malloc((size_t)J * sizeof(double));
        cv[k].bound = malloc((size_t)(dist + 1) * sizeof(double));
        if (!cv[k].w || !cv[k].bound) {
            tool_error(cmd, "out of memory");
            ok = 0;
            n = k + 1;
            break;
        }
        posenc_status st = posenc_rope_freqs(d, &cv[k].rp, cv[k].w, NULL, NULL);
        if (st != POSENC_OK) {
            char call[96];
            snprintf(call, sizeof(call), "posenc_rope_freqs (%.63s)", cv[k].label);
            ok = tool_lib_failed(cmd, NULL, call, st);
            n = k + 1;
            break;
        }
        if ((dist + 1) * J >= ((int64_t)1 << 24))
            tool_progress(cmd, k, n, cv[k].label);
        decay_bound(cv[k].w, J, dist + 1, cv[k].bound);
    }
    tool_progress_clear();
    if (ok && csv) {
        printf("distance");
        for (int k = 0; k < n; k++)
            printf(",%s", cv[k].label);
        printf("\n");
        for (int64_t r = 0; r <= dist; r += step) {
            printf("%lld", (long long)r);
            for (int k = 0; k < n; k++)
                printf(",%.9g", cv[k].bound[r]);
            printf("\n");
        }
    }
    if (ok && out)
        ok = draw_plot(out, cv, n, dist, log_x, raw, d, base, csv);
    for (int k = 0; k < n; k++) {
        free(cv[k].w);
        free(cv[k].bound);
        free(cv[k].factors);
    }
    return ok ? TOOL_OK : tool_fail_code();
}
