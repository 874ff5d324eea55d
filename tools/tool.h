/*
 * tool.h - what the sub-commands of the posenc tool share: argument helpers, opening a
 * context, and the encoding grids that `table` and `heatmap` compute through the library.
 *
 * Error convention: a sub-command prints one line "posenc CMD: what went wrong" to stderr
 * and returns 2 for a bad command line, 1 for a failure while running.
 */
#ifndef POSENC_TOOL_H
#define POSENC_TOOL_H

#include "posenc.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TOOL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TOOL_PRINTF(a, b)
#endif

/* Exit codes of the sub-commands. */
enum { TOOL_OK = 0, TOOL_FAILED = 1, TOOL_USAGE = 2 };

/* Print "posenc CMD: message" to stderr as one line. */
void tool_error(const char *cmd, const char *fmt, ...) TOOL_PRINTF(2, 3);

/* Strict number parsing (the whole string, finite). Return 1 on success. */
int tool_parse_i64(const char *s, int64_t *out);
int tool_parse_double(const char *s, double *out);
/* "auto", "cpu", "opencl", "vulkan". */
int tool_parse_backend(const char *s, posenc_backend_kind *out);
int tool_is_help(const char *arg);

/* The value of option argv[*i] (advancing *i), or NULL after printing "OPT needs a
 * value". */
const char *tool_value(const char *cmd, int argc, char **argv, int *i);

/* Open a context on `kind` (warnings from the driver go to stderr). Prints the reason
 * and returns NULL on failure. */
posenc_context *tool_open(const char *cmd, posenc_backend_kind kind);

struct canvas; /* plot.h */
/* Write c to path as a PNG with the text comment (png_write), then free c. Prints "wrote
 * PATH (WxH): COMMENT" unless quiet, or the error through tool_error(cmd). Returns 1 on
 * success, else 0. */
int tool_save_png(const char *cmd, struct canvas *c, const char *path, const char *comment,
                  int quiet);

/* Print "CMD: CALL: status: reason" for a failed library call (the reason from the
 * context, or posenc_last_error() for calls without one: ctx NULL). Returns 0. */
int tool_lib_failed(const char *cmd, posenc_context *ctx, const char *call, posenc_status st);
/* The exit code after a failure: TOOL_USAGE when the library refused an argument the
 * command line gave (INVALID_ARGUMENT, OUT_OF_RANGE), else TOOL_FAILED. */
int tool_fail_code(void);

/* Progress on stderr: only when stderr is a terminal and not --quiet. Result lines go
 * to stdout; call tool_progress_clear() before printing anything to stderr. */
void tool_progress_init(int quiet);
int tool_progress_on(void);
/* "WHAT [####    ] done/total NAME" (total <= 0: "WHAT NAME"), redrawn in place. */
void tool_progress(const char *what, int64_t done, int64_t total, const char *name);
void tool_progress_clear(void);

/* ---- RoPE scaling choices, the same in table, heatmap, decay and freqs ---------------- */

/* One default per option, in every sub-command. */
#define TOOL_DEFAULT_FACTOR 4.0
#define TOOL_DEFAULT_ORIG_CTX 4096

extern const char tool_scaling_list[]; /* "none, linear, ..." */
int tool_parse_scaling(const char *s, posenc_rope_scaling_kind *out);
const char *tool_scaling_name(posenc_rope_scaling_kind kind);  /* "ggml-yarn" */
const char *tool_scaling_label(posenc_rope_scaling_kind kind); /* "ggml YaRN" */
/* Whether the kind reads original_ctx (every kind but none, linear and ntk). */
int tool_scaling_uses_orig(posenc_rope_scaling_kind kind);
/* A scaling factor: a number > 0 that stays > 0 as a float (never reinterpreted: the
 * library reads 0 as 1). Prints the error and returns 0 otherwise. */
int tool_parse_factor(const char *cmd, const char *opt, const char *s, double *out);
/* Fill *s for `kind` with factor, original context (kinds that use it), seq_len (dynamic
 * NTK, LongRoPE), ggml's ext_factor 1, and LongRoPE's factor arrays (short 1, long a
 * geometric ramp from 1 to factor over the pairs; malloc'd into *factors, free it). */
int tool_scaling_setup(const char *cmd, struct posenc_rope_scaling *s,
                       posenc_rope_scaling_kind kind, double factor, int64_t orig,
                       int64_t n_pairs, int64_t seq_len, float **factors);

/* ---- encodings: options shared by `table` and `heatmap` ----------------------------- */

enum enc_kind { ENC_SINUSOIDAL = 0, ENC_ROPE, ENC_ALIBI, ENC_T5, ENC_KIND_COUNT };
enum enc_value { ENC_VALUE_ANGLE = 0, ENC_VALUE_COS, ENC_VALUE_SIN };

struct enc_opts {
    int kind;                     /* enum enc_kind, -1 until --kind is given */
    posenc_backend_kind backend;  /* --backend (default cpu) */
    posenc_dtype dtype;           /* --dtype: output storage of the op */
    int64_t dim;                  /* --dim: sinusoidal/rope model or head dim */
    int64_t len;                  /* --len: positions 0..len-1 (queries = keys for biases) */
    const char *pos_spec;         /* --pos: positions of the rows (sinusoidal, rope) */
    /* sinusoidal */
    struct posenc_sinusoidal_params sin;
    /* rope */
    int value;                    /* enum enc_value */
    struct posenc_rope_params rope; /* scaling filled by enc_compute from the three below */
    posenc_rope_scaling_kind scaling; /* --scaling (default none) */
    double factor;                /* --factor (default TOOL_DEFAULT_FACTOR) */
    int64_t orig_ctx;             /* --orig-ctx (default TOOL_DEFAULT_ORIG_CTX) */
    /* alibi */
    int64_t heads, head;
    struct posenc_alibi_params alibi;
    /* t5 */
    struct posenc_relbias_params t5;
    int quiet;                    /* --quiet: no progress on stderr */
    unsigned seen;                /* which options were given (internal) */
};

/* Defaults; `len` is the default --len of the sub-command. */
void enc_opts_init(struct enc_opts *o, int64_t dim, int64_t len);

/* Try to consume argv[*i] as an encoding option. Returns 1 if consumed, 0 if it is not
 * one, -1 after printing an error. */
int enc_parse_opt(const char *cmd, struct enc_opts *o, int argc, char **argv, int *i);

/* Check the options against --kind after parsing (prints the error). Returns 1 if ok. */
int enc_check(const char *cmd, struct enc_opts *o);

/* The help lines of the encoding options (shared by table and heatmap). */
extern const char enc_options_help[];

/* A computed grid: rows x cols values, row-major; NaN never, -INFINITY for masked. */
struct enc_grid {
    int64_t rows, cols;
    double *v;                /* [rows * cols] */
    double *row_pos;          /* [rows]: position of each row (query position for biases) */
    const char *row_name;     /* "position", "query" */
    const char *col_name;     /* "dimension", "pair", "key" */
    char title[160];          /* what it is, for headers and image titles */
    char device[160];         /* "cpu (host CPU ...)" or "host (double)" */
    int symmetric;            /* values in [-1, 1] by construction (fixed colour range) */
    int angle;                /* RoPE angles in radians (heatmap: wrapped to [-pi, pi)) */
    char note[160];           /* a second line for titles ("" if none): what a scaling
                               * changed */
    int integer;              /* integer-valued (T5 buckets) */
};

/* Compute the grid the options describe, through the library on ctx. Prints the error
 * (with the library's message) and returns 0 on failure. */
int enc_compute(const char *cmd, posenc_context *ctx, const struct enc_opts *o,
                struct enc_grid *out);
void enc_grid_free(struct enc_grid *g);

/* ---- sub-commands -------------------------------------------------------------------- */

int cmd_table(int argc, char **argv);
int cmd_heatmap(int argc, char **argv);
int cmd_decay(int argc, char **argv);
int cmd_freqs(int argc, char **argv);

#endif
