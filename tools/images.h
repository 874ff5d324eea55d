/*
 * images.h - what the tool's images look like: geometry, colour maps (anchor tables,
 * linear interpolation in sRGB) and curve colours. Header-only, shared with
 * tests/test_cli.c, which computes from it where a cell or a point is and its colour.
 *
 * `posenc heatmap`: cell (col, row) of the grid fills the cw x ch pixels at
 * (HM_LEFT + col*cw, HM_TOP + row*ch); row 0 (position 0, query 0) is at the top. The
 * image is hm_image_w(cols, cw) x (HM_TOP + max(rows*ch, HM_MIN_PLOT_H) + HM_BOTTOM)
 * pixels. With --cell N, cw = ch = N; without, cw = hm_default_cell(cols, cols) and
 * ch = hm_default_cell(rows, rows). Grids over HM_MAX_PLOT along
 * a side are first downsampled by hm_bin() (cols and rows then count the bins).
 *
 * Colours: a value v gets pe_colormap(map, (v - lo) / (hi - lo)); [lo, hi] is --range, else
 * [-1, 1] for sinusoidal and RoPE cos/sin (diverging map), else the data's min..max
 * (sequential map). -inf (masked) cells are pe_cmap_masked.
 *
 *   diverging   ColorBrewer RdBu reversed: -1 blue, 0 near-white, +1 red (signed data)
 *   sequential  viridis (matplotlib), sampled at 9 points: low dark purple, high yellow
 *   cyclic      for angles wrapped to [-pi, pi): -pi and pi the same light grey, -pi/2
 *               blue, 0 near-black, pi/2 red (in the manner of matplotlib's twilight)
 *
 * `posenc decay`: a plot area of DC_PLOT_W x DC_PLOT_H pixels at (DC_LEFT, DC_TOP) in an
 * image of (DC_LEFT + DC_PLOT_W + DC_RIGHT) x (DC_TOP + DC_PLOT_H + DC_BOTTOM); y = 0 at
 * the bottom edge; curve k is drawn in dc_palette[k].
 */
#ifndef POSENC_TOOL_IMAGES_H
#define POSENC_TOOL_IMAGES_H

#include <math.h>
#include <stdint.h>

enum { HM_LEFT = 112, HM_TOP = 60, HM_RIGHT = 140, HM_BOTTOM = 56, HM_MIN_PLOT_H = 160,
       HM_MIN_W = 560, HM_MAX_PLOT = 512 };

/* The heat map's width: at least HM_MIN_W, so that a title fits on two lines. */
static inline int64_t hm_image_w(int64_t cols, int64_t cell)
{
    int64_t w = HM_LEFT + cols * cell + HM_RIGHT;
    return w > HM_MIN_W ? w : HM_MIN_W;
}

/* A grid larger than HM_MAX_PLOT cells along a side is shown downsampled: each pixel is
 * the mean of hm_bin(n) consecutive cells (RoPE angles: their circular mean). */
static inline int64_t hm_bin(int64_t n)
{
    return n > HM_MAX_PLOT ? (n + HM_MAX_PLOT - 1) / HM_MAX_PLOT : 1;
}

enum { DC_LEFT = 100, DC_TOP = 40, DC_PLOT_W = 640, DC_PLOT_H = 400, DC_RIGHT = 30,
       DC_BOTTOM = 64 };

/* `posenc freqs`: two panels sharing the x axis (pair j; pair j's centre at
 * FQ_LEFT + (j + 0.5) * FQ_PLOT_W / J): on top, at (FQ_LEFT, FQ_TOP), FQ_PLOT_W x FQ_PLOT_H,
 * the frequency w_j on a log scale; below it, FQ_GAP pixels lower, FQ_PLOT_W x FQ_PLOT2_H,
 * how many times slower than the unscaled w_j each scaling makes pair j (linear scale,
 * from 0). Image (FQ_LEFT + FQ_PLOT_W + FQ_RIGHT) x (FQ_TOP + FQ_PLOT_H + FQ_GAP +
 * FQ_PLOT2_H + FQ_BOTTOM); curve k in dc_palette[k]. */
enum { FQ_LEFT = 100, FQ_TOP = 40, FQ_PLOT_W = 640, FQ_PLOT_H = 300, FQ_GAP = 76,
       FQ_PLOT2_H = 200, FQ_RIGHT = 30, FQ_BOTTOM = 64 };

static const uint8_t dc_palette[6][3] = {
    {31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}, {148, 103, 189}, {140, 86, 75},
};

/* About 512 pixels along the longer side of the grid, cells of 1 to 32 pixels. */
static inline int hm_default_cell(int64_t cols, int64_t rows)
{
    int64_t n = cols > rows ? cols : rows;
    int64_t c = n > 0 ? 512 / n : 32;
    return c < 1 ? 1 : c > 32 ? 32 : (int)c;
}

enum pe_colormap { PE_CMAP_DIVERGING = 0, PE_CMAP_SEQUENTIAL = 1, PE_CMAP_CYCLIC = 2 };

/* Cells that hold -inf (a causal mask) are drawn in this colour. */
static const uint8_t pe_cmap_masked[3] = {200, 200, 200};

static const uint8_t pe_cmap_diverging_anchors[11][3] = {
    {5, 48, 97},    {33, 102, 172}, {67, 147, 195}, {146, 197, 222}, {209, 229, 240},
    {247, 247, 247}, {253, 219, 199}, {244, 165, 130}, {214, 96, 77}, {178, 24, 43},
    {103, 0, 31},
};

static const uint8_t pe_cmap_sequential_anchors[9][3] = {
    {68, 1, 84},   {71, 44, 122},  {59, 82, 139},  {44, 113, 142}, {33, 145, 140},
    {39, 173, 129}, {92, 200, 99}, {170, 220, 50}, {253, 231, 37},
};

static const uint8_t pe_cmap_cyclic_anchors[9][3] = {
    {226, 217, 226}, {150, 172, 208}, {88, 110, 186}, {64, 52, 130}, {34, 18, 44},
    {118, 36, 72},   {176, 78, 70},   {212, 152, 132}, {226, 217, 226},
};

/* The colour of t in [0, 1] (clamped; NaN gives the masked colour). */
static inline void pe_colormap(enum pe_colormap map, double t, uint8_t out[3])
{
    const uint8_t(*a)[3] = map == PE_CMAP_DIVERGING    ? pe_cmap_diverging_anchors
                           : map == PE_CMAP_CYCLIC      ? pe_cmap_cyclic_anchors
                                                        : pe_cmap_sequential_anchors;
    int n = map == PE_CMAP_DIVERGING ? 11 : 9;
    if (isnan(t)) {
        out[0] = pe_cmap_masked[0];
        out[1] = pe_cmap_masked[1];
        out[2] = pe_cmap_masked[2];
        return;
    }
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double x = t * (n - 1);
    int i = (int)x;
    if (i >= n - 1)
        i = n - 2;
    double f = x - i;
    for (int c = 0; c < 3; c++)
        out[c] = (uint8_t)lround(a[i][c] + f * (a[i + 1][c] - a[i][c]));
}

#endif
