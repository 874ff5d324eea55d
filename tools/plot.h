/*
 * plot.h - a small RGB raster for the tool's images: rectangles, lines, text in a built-in
 * 5x7 bitmap font (drawn at 2x), axis ticks, and writing the result as PNG (libpng).
 */
#ifndef POSENC_TOOL_PLOT_H
#define POSENC_TOOL_PLOT_H

#include <stddef.h>
#include <stdint.h>

struct canvas {
    int w, h;
    uint8_t *rgb; /* w*h*3, row-major, top row first */
};

/* A white canvas; 0 when out of memory. */
int canvas_init(struct canvas *c, int w, int h);
void canvas_free(struct canvas *c);
void canvas_rect(struct canvas *c, int x, int y, int w, int h, const uint8_t rgb[3]);
/* A line of `thick` pixels (1 or 2) from (x0, y0) to (x1, y1), clipped to the canvas. */
void canvas_line(struct canvas *c, int x0, int y0, int x1, int y1, const uint8_t rgb[3],
                 int thick);

/* ---- text: 5x7 glyphs drawn at FONT_SCALE, ASCII 32..126 -------------------------------- */
#define FONT_SCALE 2
#define FONT_W (5 * FONT_SCALE)
#define FONT_H (7 * FONT_SCALE)
#define FONT_ADVANCE (6 * FONT_SCALE)

/* The 7 rows of a glyph, bit 4 = leftmost column (font.c). */
const uint8_t *font_glyph(char ch);
int text_width(const char *s);
/* Top-left corner at (x, y). */
void canvas_text(struct canvas *c, int x, int y, const char *s, const uint8_t rgb[3]);
/* Rotated 90 degrees counter-clockwise (reads bottom to top); (x, y) is the bottom-left
 * corner of the first glyph. */
void canvas_text_up(struct canvas *c, int x, int y, const char *s, const uint8_t rgb[3]);

/* ---- ticks --------------------------------------------------------------------------- */

/* "Nice" tick values (1, 2, 5 x 10^k steps) covering [lo, hi], at most max_ticks of them.
 * Returns the count; *out_decimals is how many decimals the labels need. */
int nice_ticks(double lo, double hi, int max_ticks, double *out, int cap, int *out_decimals);

/* ---- PNG ------------------------------------------------------------------------------ */

/* Write the canvas as an 8-bit RGB PNG with tEXt chunks "Software" and, if comment is
 * not NULL, "Comment". Returns 1, or 0 with a message in err. Without libpng the build
 * has png_available() == 0 and png_write always fails. */
int png_available(void);
int png_write(const char *path, const struct canvas *c, const char *comment, char *err,
              size_t err_size);

#endif
