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
    struct posenc_rope_params rope;
    /* alibi */
    int64_t heads, head;
    struct posenc_alibi_params alibi;
    /* t5 */
    struct posenc_relbias_params t5;
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

#endif
