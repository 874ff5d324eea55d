/* plot.c - the raster, lines, text and tick choice of the tool's images (see plot.h). */
#include "plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int canvas_init(struct canvas *c, int w, int h)
{
    c->w = w;
    c->h = h;
    c->rgb = malloc((size_t)w * (size_t)h * 3);
    if (!c->rgb)
        return 0;
    memset(c->rgb, 255, (size_t)w * (size_t)h * 3);
    return 1;
}

void canvas_free(struct canvas *c)
{
    free(c->rgb);
    c->rgb = NULL;
}

static void put(struct canvas *c, int x, int y, const uint8_t rgb[3])
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h)
        return;
    uint8_t *p = c->rgb + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
    p[0] = rgb[0];
    p[1] = rgb[1];
    p[2] = rgb[2];
}

void canvas_rect(struct canvas *c, int x, int y, int w, int h, const uint8_t rgb[3])
{
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++)
            put(c, i, j, rgb);
}

void canvas_line(struct canvas *c, int x0, int y0, int x1, int y1, const uint8_t rgb[3],
                 int thick)
{
    /* Bresenham; a thick line adds the pixel below / right of each step */
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        put(c, x0, y0, rgb);
        if (thick > 1) {
            put(c, x0 + 1, y0, rgb);
            put(c, x0, y0 + 1, rgb);
        }
        if (x0 == x1 && y0 == y1)
            break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

int text_width(const char *s)
{
    int n = (int)strlen(s);
    return n ? n * FONT_ADVANCE - FONT_SCALE : 0;
}

void canvas_text(struct canvas *c, int x, int y, const char *s, const uint8_t rgb[3])
{
    for (; *s; s++, x += FONT_ADVANCE) {
        const uint8_t *g = font_glyph(*s);
        for (int r = 0; r < 7; r++)
            for (int b = 0; b < 5; b++)
                if (g[r] & (0x10 >> b))
                    canvas_rect(c, x + b * FONT_SCALE, y + r * FONT_SCALE, FONT_SCALE,
                                FONT_SCALE, rgb);
    }
}

void canvas_text_up(struct canvas *c, int x, int y, const char *s, const uint8_t rgb[3])
{
    /* glyph column b goes up (y decreasing), glyph row r goes right */
    for (; *s; s++, y -= FONT_ADVANCE) {
        const uint8_t *g = font_glyph(*s);
        for (int r = 0; r < 7; r++)
            for (int b = 0; b < 5; b++)
                if (g[r] & (0x10 >> b))
                    canvas_rect(c, x + r * FONT_SCALE, y - (b + 1) * FONT_SCALE, FONT_SCALE,
                                FONT_SCALE, rgb);
    }
}

int nice_ticks(double lo, double hi, int max_ticks, double *out, int cap, int *out_decimals)
{
    *out_decimals = 0;
    if (!(hi > lo) || max_ticks < 2) {
        if (cap > 0 && isfinite(lo)) {
            out[0] = lo;
            *out_decimals = fabs(lo - round(lo)) > 1e-9 ? 3 : 0;
            return 1;
        }
        return 0;
    }
    double raw = (hi - lo) / (max_ticks - 1);
    double mag = pow(10.0, floor(log10(raw)));
    double step = mag;
    static const double mult[] = {1, 2, 2.5, 5, 10};
    for (size_t i = 0; i < sizeof(mult) / sizeof(mult[0]); i++)
        if (mult[i] * mag >= raw) {
            step = mult[i] * mag;
            break;
        }
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(step / pow(10.0, -dec) - round(step / pow(10.0, -dec))) > 1e-6)
        dec++; /* 2.5 x 10^-k needs one more */
    *out_decimals = dec < 0 ? 0 : dec;
    int n = 0;
    for (double t = ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9 && n < cap; t += step)
        out[n++] = fabs(t) < step * 1e-9 ? 0.0 : t;
    return n;
}
