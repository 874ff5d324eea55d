/*
 * test_cli.c - the posenc command-line tool, run as a program: every sub-command on one
 * backend (meson runs this once per backend: test_cli POSENC_EXE --backend B).
 *
 *  - --help exits 0 on every sub-command; bad arguments exit non-zero with exactly one
 *    line on stderr; successful runs write nothing to stderr (POSENC_DEBUG=1 is set, so
 *    a Vulkan validation message would show up there).
 *  - table: the seed's vector for d_model = 6, pos = 2, and every kind's numbers against
 *    double math written here (ALiBi slopes, RoPE angles, sin/cos) or the library's host
 *    helper (T5 buckets, through the backend's posenc_relbias).
 *  - heatmap: the PNG is read back with libpng; its size follows images.h and the colour
 *    at the centre of every cell is the colour map of the value computed here.
 *  - decay: the CSV against the RoFormer bound computed here; the PNG's size and curve.
 *  - info (no sentinel values), verify (no progress bar unless stderr is a terminal;
 *    with a pseudo-terminal the bar is drawn on stderr and stdout stays the same; none
 *    with --quiet), verify --quick and --filter, bench --quick (no verdicts).
 *  - usage errors: exit 2, one line naming the valid values, nothing on stdout; values
 *    the tool cannot honour (--factor 0, --max-bias 0, ...) refused, not reinterpreted;
 *    one default per option across sub-commands; LongRoPE and ggml-YaRN scalings.
 *  - freqs: the CSV against posenc_rope_freqs, the PNG's size and a curve.
 * A sub-test whose op the backend does not support yet is skipped, not failed.
 */
#define _XOPEN_SOURCE 700 /* posix_openpt, ptsname */

#include "harness.h"
#include "images.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if POSENC_TOOL_HAVE_PNG
#include <png.h>
#endif

static const char *posenc_exe;
static char tmpdir[256];
/* > 0: the runs' files may not grow past this many bytes (RLIMIT_FSIZE, SIGXFSZ ignored),
 * so that writing the output fails part-way */
static long fsize_limit;

/* ---- running the tool ------------------------------------------------------------ */

struct run {
    pid_t pid;
    int status; /* exit code, or -1 if it did not exit normally */
    char *out;  /* stdout, NUL-terminated */
    char *err;  /* stderr */
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    for (;;) {
        n += fread(s + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        cap *= 2;
        s = realloc(s, cap);
        assert_non_null(s);
    }
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Start posenc with args (NULL-terminated, without argv[0]); stdout goes to a file, stderr
 * to a file or, when pty_name is given, to that pseudo-terminal. run_wait() collects it. */
static struct run run_argv(const char *const *args, const char *pty_name)
{
    char out_path[320], err_path[320];
    snprintf(out_path, sizeof(out_path), "%s/stdout", tmpdir);
    snprintf(err_path, sizeof(err_path), "%s/stderr", tmpdir);
    const char *argv[64];
    int n = 0;
    argv[n++] = posenc_exe;
    while (args[n - 1] && n < 63) {
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    FILE *f = fopen(err_path, "wb"); /* empty when stderr goes to the terminal */
    assert_non_null(f);
    fclose(f);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = pty_name ? open(pty_name, O_RDWR)
                         : open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        close(o);
        close(e);
        if (fsize_limit > 0) {
            struct rlimit rl = {(rlim_t)fsize_limit, (rlim_t)fsize_limit};
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(125);
        }
        execv(posenc_exe, (char *const *)argv);
        _exit(127);
    }
    struct run r = {pid, -1, NULL, NULL};
    return r;
}

static struct run run_wait(struct run r)
{
    int st;
    while (waitpid(r.pid, &st, 0) < 0)
        assert_int_equal(errno, EINTR);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    char path[320];
    snprintf(path, sizeof(path), "%s/stdout", tmpdir);
    r.out = slurp(path);
    snprintf(path, sizeof(path), "%s/stderr", tmpdir);
    r.err = slurp(path);
    return r;
}

#define RUN(...) run_wait(run_argv((const char *const[]){__VA_ARGS__, NULL}, NULL))

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

static const char *backend(void)
{
    return posenc_backend_name(th.kind);
}

/* A successful run: exit 0 and nothing on stderr. A run that failed because the backend
 * lacks the op skips the test. */
static void expect_ok(struct run *r)
{
    if (r->status == 1 && strstr(r->err, ": unsupported: ")) {
        print_message("skipped on %s: %s", backend(), r->err);
        run_free(r);
        skip();
    }
    if (r->status != 0 || r->err[0])
        fail_msg("exit %d, stderr: %s", r->status, r->err);
}

/* ---- parsing the output ------------------------------------------------------------ */

/* The CSV of `table --csv`: rows x cols numbers (row label in column 0, header skipped). */
static double *parse_csv(const char *s, int rows, int cols, double *row_label)
{
    double *v = malloc((size_t)rows * (size_t)cols * sizeof(*v));
    assert_non_null(v);
    const char *p = strchr(s, '\n');
    assert_non_null(p);
    for (int r = 0; r < rows; r++) {
        char *end;
        double lab = strtod(p + 1, &end);
        if (row_label)
            row_label[r] = lab;
        p = end;
        for (int c = 0; c < cols; c++) {
            assert_true(*p == ',');
            v[r * cols + c] = strtod(p + 1, &end);
            assert_true(end != p + 1);
            p = end;
        }
        assert_true(*p == '\n');
    }
    assert_true(p[1] == '\0');
    return v;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- --help and bad arguments -------------------------------------------------------- */

static void test_help(void **state)
{
    (void)state;
    static const char *const cmds[] = {"info", "verify", "table", "heatmap", "decay", "freqs",
                                       "bench"};
    struct run r = RUN("--help");
    expect_ok(&r);
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        assert_non_null(strstr(r.out, cmds[i]));
    run_free(&r);
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        r = RUN(cmds[i], "--help");
        expect_ok(&r);
        assert_non_null(strstr(r.out, "usage: posenc "));
        assert_non_null(strstr(r.out, cmds[i]));
        run_free(&r);
    }
}

static void test_bad_arguments(void **state)
{
    (void)state;
    char bad_path[400];
    snprintf(bad_path, sizeof(bad_path), "%s/no/such/dir/x.png", tmpdir);
    const char *b = backend();
    const char *const cases[][12] = {
        {NULL},
        {"frobnicate"},
        {"info", "--bogus"},
        {"verify", "--op", "nope"},
        {"verify", "--backend", "nope"},
        {"table"},
        {"table", "--kind", "nope"},
        {"table", "--kind", "sinusoidal", "--dim", "7"},
        {"table", "--kind", "sinusoidal", "--dim"},
        {"table", "--kind", "sinusoidal", "--heads", "4"},
        {"table", "--kind", "sinusoidal", "--pos", "5:2"},
        {"table", "--kind", "alibi", "--heads", "4", "--head", "4"},
        {"table", "--kind", "rope", "--factor", "2"},
        {"table", "--kind", "t5", "--precision", "x"},
        {"table", "--kind", "sinusoidal", "--backend", "nope"},
        {"heatmap", "--kind", "sinusoidal"},
        {"heatmap", "--kind", "sinusoidal", "--range", "1:0", "-o", "x.png"},
        {"heatmap", "--kind", "sinusoidal", "--backend", b, "-o", bad_path},
        {"decay"},
        {"decay", "--csv", "--dim", "0"},
        {"decay", "--csv", "--scalings", "none,bogus"},
        {"freqs"},
        {"freqs", "--csv", "--dim", "7"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct run r = run_wait(run_argv(cases[i], NULL));
        char line[256] = "";
        for (int k = 0; cases[i][k]; k++)
            snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s", cases[i][k]);
        if (r.status == 0 || r.status == -1 || count_lines(r.err) != 1 ||
            strncmp(r.err, "posenc", 6) != 0 || r.err[strlen(r.err) - 1] != '\n')
            fail_msg("posenc%s: exit %d, stderr '%s'", line, r.status, r.err);
        run_free(&r);
    }
}

/* Usage errors: exit 2, one line on stderr that says what is valid, nothing on stdout.
 * Values the tool cannot honour are refused, never reinterpreted (the library reads a
 * factor or max_bias of 0 as its default). */
static void test_usage_errors(void **state)
{
    (void)state;
    const char *b = backend();
    const struct {
        const char *want; /* in the message */
        const char *args[14];
    } cases[] = {
        {"needs a value", {"verify", "--filter"}},
        {"no case of rope matches --filter 'zzz-nothing'",
         {"verify", "--op", "rope", "--filter", "zzz-nothing"}},
        {"(sinusoidal, rope, learned,", {"verify", "--op", "nope"}},
        {"(cpu, opencl, vulkan)", {"verify", "--backend", "nope"}},
        {"--factor must be a scaling factor > 0",
         {"table", "--kind", "rope", "--scaling", "linear", "--factor", "0"}},
        {"--factor must be a scaling factor > 0",
         {"table", "--kind", "rope", "--scaling", "linear", "--factor", "-2"}},
        {"--factor must be a scaling factor > 0", {"decay", "--csv", "--factor", "1e-300"}},
        {"--factor must be a scaling factor > 0",
         {"freqs", "--csv", "--factor", "0", "--scalings", "linear"}},
        {"ggml's max_bias 0 means no ALiBi", {"table", "--kind", "alibi", "--max-bias", "0"}},
        {"--base must be a number > 1", {"table", "--kind", "rope", "--base", "0"}},
        {"--orig-ctx does not apply to --scaling linear",
         {"table", "--kind", "rope", "--scaling", "linear", "--orig-ctx", "100"}},
        {"longrope, ggml-yarn)", {"table", "--kind", "rope", "--scaling", "bogus"}},
        {"longrope, ggml-yarn)", {"decay", "--csv", "--scalings", "none,bogus"}},
        {"(diverging, sequential, cyclic)",
         {"heatmap", "--kind", "rope", "--colormap", "x", "-o", "x.png"}},
        /* a value only the library refuses: its reason, and still a usage error */
        {"posenc_relbias: invalid argument: params->num_buckets = 3",
         {"table", "--kind", "t5", "--buckets", "3", "--backend", b}},
        {"--reps must be an integer in [1, 100000]", {"bench", "--reps", "0"}},
        {"needs a value", {"bench", "--backend"}},
        {"(cpu, opencl, vulkan)", {"bench", "--backend", "nope"}},
        {"no op matches --op 'zzz'", {"bench", "--op", "zzz"}},
        {"(info, verify, table, heatmap, decay, freqs, bench", {"frobnicate"}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct run r = run_wait(run_argv(cases[i].args, NULL));
        char line[256] = "";
        for (int k = 0; cases[i].args[k]; k++)
            snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s", cases[i].args[k]);
        if (r.status != 2 || count_lines(r.err) != 1 || !strstr(r.err, cases[i].want) ||
            r.out[0])
            fail_msg("posenc%s: exit %d (want 2), stdout '%s', stderr '%s' (want '%s' in it)",
                     line, r.status, r.out, r.err, cases[i].want);
        run_free(&r);
    }
}

/* One default per option: --orig-ctx is 4096 in table, decay and freqs alike. */
static void test_defaults(void **state)
{
    (void)state;
    struct run r = RUN("table", "--kind", "rope", "--dim", "8", "--len", "2", "--scaling", "yarn",
                       "--backend", backend());
    expect_ok(&r);
    assert_non_null(strstr(r.out, "YaRN x4 (orig 4096)"));
    run_free(&r);
    r = RUN("decay", "--csv", "--dim", "8", "--max-dist", "10", "--scalings", "yarn");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "YaRN x4 (orig 4096)"));
    run_free(&r);
    /* freqs: the same as posenc_rope_freqs with factor 4, original context 4096 */
    r = RUN("freqs", "--csv", "--dim", "16", "--scalings", "yarn,llama3");
    expect_ok(&r);
    double *v = parse_csv(r.out, 8, 2, NULL);
    static const posenc_rope_scaling_kind kinds[2] = {POSENC_ROPE_SCALING_YARN,
                                                      POSENC_ROPE_SCALING_LLAMA3};
    for (int k = 0; k < 2; k++) {
        struct posenc_rope_params p = {
            .scaling = {.kind = kinds[k], .factor = 4.0f, .original_ctx = 4096}};
        double w[8];
        assert_int_equal(posenc_rope_freqs(16, &p, w, NULL, NULL), POSENC_OK);
        for (int j = 0; j < 8; j++)
            assert_true(fabs(v[j * 2 + k] - w[j]) <= 1e-15 * w[j]);
    }
    free(v);
    run_free(&r);
}

/* LongRoPE and ggml's YaRN in the tool: the angles are pos * posenc_rope_freqs' w_j with
 * the tool's documented parameters (LongRoPE: short factors 1, long factors
 * factor^(j/(J-1)), used above the original context; ggml YaRN: ext_factor 1). */
static void test_scaling_kinds(void **state)
{
    (void)state;
    enum { D = 8, J = 4, T = 10 };
    float shortf[J], longf[J];
    for (int j = 0; j < J; j++) {
        shortf[j] = 1.0f;
        longf[j] = (float)pow(4.0, j / 3.0);
    }
    struct posenc_rope_params lp = {
        .scaling = {.kind = POSENC_ROPE_SCALING_LONGROPE, .factor = 4.0f, .original_ctx = 4,
                    .seq_len = T, .short_factor = shortf, .long_factor = longf}};
    struct posenc_rope_params gp = {
        .scaling = {.kind = POSENC_ROPE_SCALING_GGML_YARN, .factor = 4.0f, .original_ctx = 4,
                    .ext_factor = 1.0f}};
    const struct posenc_rope_params *ps[2] = {&lp, &gp};
    static const char *const names[2] = {"longrope", "ggml-yarn"};
    for (int k = 0; k < 2; k++) {
        double w[J];
        assert_int_equal(posenc_rope_freqs(D, ps[k], w, NULL, NULL), POSENC_OK);
        char len[8];
        snprintf(len, sizeof(len), "%d", T);
        struct run r = RUN("table", "--kind", "rope", "--dim", "8", "--len", len, "--scaling",
                           names[k], "--orig-ctx", "4", "--csv", "--backend", backend());
        expect_ok(&r);
        double *v = parse_csv(r.out, T, J, NULL);
        for (int t = 0; t < T; t++)
            for (int j = 0; j < J; j++)
                if (!(fabs(v[t * J + j] - t * w[j]) <= 1e-8 * (1 + t * w[j])))
                    fail_msg("%s: pos %d pair %d: %.17g, want %.17g", names[k], t, j,
                             v[t * J + j], t * w[j]);
        free(v);
        run_free(&r);
    }
}

/* ---- table --------------------------------------------------------------------------- */

/* The seed's worked example: d_model = 6, pos = 2 prints [0.909, -0.416, 0.092, 0.995,
 * 0.004, 0.999] (3 decimals, truncated), and each number is sin/cos in double to f32. */
static void test_table_seed(void **state)
{
    (void)state;
    struct run r = RUN("table", "--kind", "sinusoidal", "--dim", "6", "--pos", "2", "--backend",
                       backend());
    expect_ok(&r);
    static const double seed[6] = {0.909, -0.416, 0.092, 0.995, 0.004, 0.999};
    const char *last = r.out + strlen(r.out) - 1;
    while (last > r.out && last[-1] != '\n')
        last--;
    char *p;
    assert_true(strtod(last, &p) == 2.0); /* the position */
    for (int i = 0; i < 6; i++) {
        double v = strtod(p, &p);
        double exact = i % 2 ? cos(2.0 / pow(10000.0, (i - 1) / 6.0))
                             : sin(2.0 / pow(10000.0, i / 6.0));
        assert_true(fabs(v - exact) <= 0.5e-6 + 1e-6);
        assert_true(trunc(v * 1000.0) / 1000.0 == seed[i]);
    }
    run_free(&r);

    r = RUN("table", "--kind", "sinusoidal", "--dim", "6", "--pos", "2", "--csv", "--backend",
            backend());
    expect_ok(&r);
    assert_non_null(strstr(r.out, "position,0,1,2,3,4,5\n"));
    double *v = parse_csv(r.out, 1, 6, NULL);
    for (int i = 0; i < 3; i++) {
        double a = 2.0 / pow(10000.0, 2.0 * i / 6.0);
        assert_true(fabs(v[2 * i] - sin(a)) < 1e-6);
        assert_true(fabs(v[2 * i + 1] - cos(a)) < 1e-6);
    }
    free(v);
    run_free(&r);
}

static void test_table_sinusoidal(void **state)
{
    (void)state;
    static const char *const dtypes[] = {"f32", "f16"};
    for (int d = 0; d < 2; d++) {
        struct run r = RUN("table", "--kind", "sinusoidal", "--dim", "16", "--pos",
                           "0:40:3,7.25", "--dtype", dtypes[d], "--csv", "--backend", backend());
        expect_ok(&r);
        double pos[15];
        double *v = parse_csv(r.out, 15, 16, pos);
        assert_true(pos[14] == 7.25); /* fractional: a time stamp */
        for (int t = 0; t < 15; t++) {
            if (t < 14)
                assert_true(pos[t] == 3.0 * t);
            for (int i = 0; i < 8; i++) {
                double a = pos[t] * pow(10000.0, -2.0 * i / 16.0);
                double tol = d ? 2e-3 : 4e-6 * (1 + pos[t]);
                assert_true(fabs(v[t * 16 + 2 * i] - sin(a)) <= tol);
                assert_true(fabs(v[t * 16 + 2 * i + 1] - cos(a)) <= tol);
            }
        }
        free(v);
        run_free(&r);
    }
}

static void test_table_rope(void **state)
{
    (void)state;
    /* angles: host doubles from posenc_rope_freqs, w_j = base^(-2j/d), linear: / factor */
    struct run r = RUN("table", "--kind", "rope", "--dim", "12", "--len", "9", "--base", "500",
                       "--scaling", "linear", "--factor", "2", "--csv", "--backend", backend());
    expect_ok(&r);
    double *v = parse_csv(r.out, 9, 6, NULL);
    for (int t = 0; t < 9; t++)
        for (int j = 0; j < 6; j++) {
            double a = t * pow(500.0, -2.0 * j / 12.0) / 2.0;
            assert_true(fabs(v[t * 6 + j] - a) <= 1e-8 * (1 + a));
        }
    free(v);
    run_free(&r);
    /* cos / sin: posenc_rope on the backend rotating (1, 0) */
    static const char *const what[] = {"cos", "sin"};
    for (int k = 0; k < 2; k++) {
        r = RUN("table", "--kind", "rope", "--dim", "12", "--len", "9", "--value", what[k],
                "--csv", "--backend", backend());
        expect_ok(&r);
        v = parse_csv(r.out, 9, 6, NULL);
        for (int t = 0; t < 9; t++)
            for (int j = 0; j < 6; j++) {
                double a = t * pow(10000.0, -2.0 * j / 12.0);
                assert_true(fabs(v[t * 6 + j] - (k ? sin(a) : cos(a))) <= 4e-6);
            }
        free(v);
        run_free(&r);
    }
}

static void test_table_alibi(void **state)
{
    (void)state;
    /* 12 heads: 2^-1 ... 2^-8, then 2^-0.5, 2^-1.5, ...; head 9 has slope 2^-1.5 */
    struct run r = RUN("table", "--kind", "alibi", "--len", "7", "--heads", "12", "--head", "9",
                       "--causal", "--csv", "--backend", backend());
    expect_ok(&r);
    double *v = parse_csv(r.out, 7, 7, NULL);
    for (int q = 0; q < 7; q++)
        for (int k = 0; k < 7; k++) {
            double b = v[q * 7 + k];
            if (k > q)
                assert_true(isinf(b) && b < 0);
            else
                assert_true(fabs(b - (-pow(2.0, -1.5) * (q - k))) <= 1e-6);
        }
    free(v);
    run_free(&r);
    r = RUN("table", "--kind", "alibi", "--len", "5", "--symmetric", "--backend", backend());
    expect_ok(&r);
    assert_non_null(strstr(r.out, "slope 0.5"));
    assert_non_null(strstr(r.out, "-2.0000")); /* -0.5 * |0 - 4| */
    assert_null(strstr(r.out, "-0.0000"));
    run_free(&r);
}

static void test_table_t5(void **state)
{
    (void)state;
    static const char *const causal[] = {NULL, "--causal"};
    for (int c = 0; c < 2; c++) {
        struct run r = RUN("table", "--kind", "t5", "--len", "150", "--csv", "--backend",
                           backend(), causal[c]);
        expect_ok(&r);
        double *v = parse_csv(r.out, 150, 150, NULL);
        struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5, .causal = c};
        for (int q = 0; q < 150; q++)
            for (int k = 0; k < 150; k++) {
                int32_t bucket;
                assert_int_equal(posenc_relbias_bucket(&p, k - q, &bucket), POSENC_OK);
                assert_true(v[q * 150 + k] == bucket);
            }
        if (!c) { /* the header's documented values: -5 -> 5, 0 -> 0, 7 -> 23 */
            assert_true(v[5 * 150 + 0] == 5 && v[0] == 0 && v[0 * 150 + 7] == 23);
            assert_true(v[0 * 150 + 149] == 31); /* beyond max_distance 128 */
        }
        free(v);
        run_free(&r);
    }
}

/* ---- heatmap ------------------------------------------------------------------------- */

#if POSENC_TOOL_HAVE_PNG
struct image {
    int w, h;
    uint8_t *rgb;
};

static struct image read_png(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char sig[8];
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_int_equal(png_sig_cmp(sig, 0, 8), 0);
    png_image img;
    memset(&img, 0, sizeof(img));
    img.version = PNG_IMAGE_VERSION;
    assert_true(png_image_begin_read_from_file(&img, path));
    assert_true(img.format == PNG_FORMAT_RGB); /* 8-bit RGB as written */
    struct image out = {(int)img.width, (int)img.height, malloc(PNG_IMAGE_SIZE(img))};
    assert_non_null(out.rgb);
    assert_true(png_image_finish_read(&img, NULL, out.rgb, 0, NULL));
    return out;
}

static const uint8_t *px(const struct image *im, int x, int y)
{
    assert_true(x >= 0 && y >= 0 && x < im->w && y < im->h);
    return im->rgb + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
}

static void expect_colour(const struct image *im, int x, int y, const uint8_t want[3], int tol,
                          const char *what)
{
    const uint8_t *p = px(im, x, y);
    for (int c = 0; c < 3; c++)
        if (abs(p[c] - want[c]) > tol)
            fail_msg("%s: pixel (%d, %d) is (%d, %d, %d), expected (%d, %d, %d)", what, x, y,
                     p[0], p[1], p[2], want[0], want[1], want[2]);
}

/* Heat map of `rows` x `cols` cells of `cell` px: size, every cell's colour vs value(),
 * mapped over [lo, hi] with `map`, and the colour bar's ends. */
static void check_heatmap(const char *path, int cols, int rows, int cell, enum pe_colormap map,
                          double lo, double hi, double (*value)(int row, int col), int tol)
{
    struct image im = read_png(path);
    int bar_h = rows * cell > HM_MIN_PLOT_H ? rows * cell : HM_MIN_PLOT_H;
    assert_int_equal(im.w, hm_image_w(cols, cell));
    assert_int_equal(im.h, HM_TOP + bar_h + HM_BOTTOM);
    static const uint8_t white[3] = {255, 255, 255};
    expect_colour(&im, 0, 0, white, 0, "background");
    uint8_t want[3];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double v = value(r, c);
            if (isinf(v))
                memcpy(want, pe_cmap_masked, 3);
            else
                pe_colormap(map, (v - lo) / (hi - lo), want);
            char what[64];
            snprintf(what, sizeof(what), "cell (row %d, col %d) = %g", r, c, v);
            expect_colour(&im, HM_LEFT + c * cell + cell / 2, HM_TOP + r * cell + cell / 2, want,
                          tol, what);
        }
    int bx = HM_LEFT + cols * cell + 20 + 10;
    pe_colormap(map, 1.0, want);
    expect_colour(&im, bx, HM_TOP, want, 0, "colour bar top");
    pe_colormap(map, 0.0, want);
    expect_colour(&im, bx, HM_TOP + bar_h - 1, want, 0, "colour bar bottom");
    free(im.rgb);
}

static double sin_value(int row, int col)
{
    double a = row * pow(10000.0, -2.0 * (col / 2) / 16.0);
    return col % 2 ? cos(a) : sin(a);
}

static double alibi_value(int q, int k)
{
    return k > q ? -INFINITY : -0.5 * (q - k);
}

static double rope_cos_value(int t, int j)
{
    return cos(t * pow(10000.0, -2.0 * j / 20.0));
}

static double t5_value(int q, int k)
{
    struct posenc_relbias_params p = {.kind = POSENC_RELBIAS_T5};
    int32_t b;
    assert_int_equal(posenc_relbias_bucket(&p, k - q, &b), POSENC_OK);
    return b;
}

static void heat_path(char *path, size_t n)
{
    snprintf(path, n, "%s/heat.png", tmpdir);
}

static void test_heatmap_sinusoidal(void **state)
{
    (void)state;
    char path[320];
    heat_path(path, sizeof(path));
    /* x = dimension, y = position, [-1, 1] diverging; 1 unit of rounding */
    struct run r = RUN("heatmap", "--kind", "sinusoidal", "--dim", "16", "--len", "12", "--cell",
                       "5", "-o", path, "--backend", backend());
    expect_ok(&r);
    assert_non_null(strstr(r.out, "wrote "));
    check_heatmap(path, 16, 12, 5, PE_CMAP_DIVERGING, -1, 1, sin_value, 1);
    run_free(&r);
    /* default cell size: 512 / 16 = 32 px */
    r = RUN("heatmap", "--kind", "sinusoidal", "--dim", "16", "--len", "3", "-o", path,
            "--backend", backend());
    expect_ok(&r);
    check_heatmap(path, 16, 3, hm_default_cell(16, 3), PE_CMAP_DIVERGING, -1, 1, sin_value, 1);
    run_free(&r);
}

static void test_heatmap_alibi(void **state)
{
    (void)state;
    char path[320];
    heat_path(path, sizeof(path));
    /* causal: min..max of the finite values, sequential; masked cells grey */
    struct run r = RUN("heatmap", "--kind", "alibi", "--len", "10", "--causal", "--cell", "6",
                       "-o", path, "--backend", backend());
    expect_ok(&r);
    check_heatmap(path, 10, 10, 6, PE_CMAP_SEQUENTIAL, -4.5, 0, alibi_value, 1);
    run_free(&r);
}

static void test_heatmap_rope(void **state)
{
    (void)state;
    char path[320];
    heat_path(path, sizeof(path));
    /* cos from posenc_rope on the backend, with a given range and colour map */
    struct run r = RUN("heatmap", "--kind", "rope", "--value", "cos", "--dim", "20", "--len", "7",
                       "--range", "-2:2", "--colormap", "sequential", "-o", path, "--backend",
                       backend());
    expect_ok(&r);
    check_heatmap(path, 10, 7, hm_default_cell(10, 7), PE_CMAP_SEQUENTIAL, -2, 2,
                  rope_cos_value, 1);
    run_free(&r);
}

static void test_heatmap_t5(void **state)
{
    (void)state;
    char path[320];
    heat_path(path, sizeof(path));
    /* buckets for 20 x 20: 0 .. 16 + 12 */
    struct run r = RUN("heatmap", "--kind", "t5", "--len", "20", "--cell", "3", "-o", path,
                       "--backend", backend());
    expect_ok(&r);
    double hi = 0;
    for (int q = 0; q < 20; q++)
        for (int k = 0; k < 20; k++)
            hi = fmax(hi, t5_value(q, k));
    check_heatmap(path, 20, 20, 3, PE_CMAP_SEQUENTIAL, 0, hi, t5_value, 1);
    run_free(&r);
}
/* RoPE angles: wrapped to [-pi, pi) in the cyclic map, with the scaling's note. */
static double wrapped_angle(int t, int j)
{
    const double pi = 3.14159265358979323846;
    double a = t * pow(10000.0, -2.0 * j / 20.0);
    return a - 2 * pi * floor((a + pi) / (2 * pi));
}

static void test_heatmap_rope_angle(void **state)
{
    (void)state;
    char path[320];
    heat_path(path, sizeof(path));
    struct run r = RUN("heatmap", "--kind", "rope", "--dim", "20", "--len", "40", "--cell", "4",
                       "-o", path, "--backend", backend());
    expect_ok(&r);
    assert_non_null(strstr(r.out, "(rad)"));
    assert_non_null(strstr(r.out, "cyclic"));
    check_heatmap(path, 10, 40, 4, PE_CMAP_CYCLIC, -3.14159265358979323846,
                  3.14159265358979323846, wrapped_angle, 1);
    run_free(&r);
    /* a scaling says which pairs it changed */
    r = RUN("heatmap", "--kind", "rope", "--dim", "128", "--len", "8", "--scaling", "llama3",
            "--factor", "8", "--orig-ctx", "8192", "--base", "500000", "-o", path, "--backend",
            backend());
    expect_ok(&r);
    run_free(&r);
    r = RUN("table", "--kind", "rope", "--dim", "128", "--len", "2", "--scaling", "llama3",
            "--factor", "8", "--orig-ctx", "8192", "--base", "500000", "--backend", backend());
    expect_ok(&r);
    if (!strstr(r.out, "pairs 29-63 of 64 slowed, up to x8"))
        fail_msg("no note of the changed pairs: %s", r.out);
    run_free(&r);
}

/* A grid over HM_MAX_PLOT along a side: each pixel the mean of hm_bin() cells, the axis
 * still labelled in positions. */
static int64_t big_rows = 1030;
static double sin_binned(int row, int col)
{
    int64_t by = hm_bin(big_rows);
    double sum = 0;
    int n = 0;
    for (int64_t t = row * by; t < (row + 1) * by && t < big_rows; t++, n++)
        sum += sin_value((int)t, col);
    return sum / n;
}

static void test_heatmap_downsampled(void **state)
{
    (void)state;
    char path[320];
    heat_path(path, sizeof(path));
    struct run r = RUN("heatmap", "--kind", "sinusoidal", "--dim", "16", "--len", "1030", "-o",
                       path, "--backend", backend());
    expect_ok(&r);
    int64_t rows = (big_rows + hm_bin(big_rows) - 1) / hm_bin(big_rows);
    assert_int_equal(hm_bin(big_rows), 3);
    struct image im = read_png(path);
    int cw = hm_default_cell(16, 16), ch = hm_default_cell(rows, rows);
    assert_int_equal(ch, 1);
    assert_int_equal(im.w, hm_image_w(16, cw));
    assert_int_equal(im.h, HM_TOP + rows * ch + HM_BOTTOM);
    assert_true(im.h < 700); /* not 1030 + margins */
    uint8_t want[3];
    for (int row = 0; row < rows; row += 37)
        for (int c = 0; c < 16; c += 3) {
            pe_colormap(PE_CMAP_DIVERGING, (sin_binned(row, c) + 1) / 2, want);
            expect_colour(&im, HM_LEFT + c * cw + cw / 2, HM_TOP + row * ch, want, 1, "bin");
        }
    free(im.rgb);
    run_free(&r);
}

static void test_freqs_png(void **state)
{
    (void)state;
    if (th.kind != POSENC_BACKEND_CPU) {
        print_message("freqs runs on the host only: tested with the cpu variant\n");
        skip();
    }
    char path[320];
    snprintf(path, sizeof(path), "%s/freqs.png", tmpdir);
    struct run r = RUN("freqs", "--dim", "64", "--scalings", "none,linear", "-o", path);
    expect_ok(&r);
    struct image im = read_png(path);
    assert_int_equal(im.w, FQ_LEFT + FQ_PLOT_W + FQ_RIGHT);
    assert_int_equal(im.h, FQ_TOP + FQ_PLOT_H + FQ_GAP + FQ_PLOT2_H + FQ_BOTTOM);
    /* bottom panel: linear x4 is a flat line at 4 somewhere in the middle of the panel */
    int x = FQ_LEFT + FQ_PLOT_W / 2, found = 0;
    for (int y = FQ_TOP + FQ_PLOT_H + FQ_GAP; y < FQ_TOP + FQ_PLOT_H + FQ_GAP + FQ_PLOT2_H; y++)
        found |= !memcmp(px(&im, x, y), dc_palette[1], 3);
    assert_true(found);
    free(im.rgb);
    run_free(&r);
}
#else
static void test_heatmap_sinusoidal(void **state)
{
    (void)state;
    struct run r = RUN("heatmap", "--kind", "sinusoidal", "-o", "x.png");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "built without libpng"));
    run_free(&r);
    skip();
}
#define test_heatmap_alibi test_heatmap_sinusoidal
#define test_heatmap_rope test_heatmap_sinusoidal
#define test_heatmap_t5 test_heatmap_sinusoidal
#define test_heatmap_rope_angle test_heatmap_sinusoidal
#define test_heatmap_downsampled test_heatmap_sinusoidal
#define test_freqs_png test_heatmap_sinusoidal
#endif

/* ---- decay ---------------------------------------------------------------------------- */

static double roformer_bound(double r, int d, double scale)
{
    double re = 0, im = 0, sum = 0;
    for (int k = 0; k < d / 2; k++) {
        double a = r * pow(10000.0, -2.0 * k / d) / scale;
        re += cos(a);
        im += sin(a);
        sum += sqrt(re * re + im * im);
    }
    return sum / (d / 2);
}

static void test_decay(void **state)
{
    (void)state;
    if (th.kind != POSENC_BACKEND_CPU) {
        print_message("decay runs on the host only: tested with the cpu variant\n");
        skip();
    }
    struct run r = RUN("decay", "--csv", "--dim", "64", "--max-dist", "300", "--scalings",
                       "none,linear,ntk,yarn");
    expect_ok(&r);
    assert_true(!strncmp(r.out, "distance,no scaling,linear x4,NTK x4,YaRN x4", 44));
    double *v = parse_csv(r.out, 301, 4, NULL);
    for (int k = 0; k < 4; k++)
        assert_true(fabs(v[k] - 16.5) < 1e-12); /* r = 0: (d/2 + 1) / 2 */
    for (int d = 1; d <= 300; d += 37) {
        assert_true(fabs(v[d * 4 + 0] - roformer_bound(d, 64, 1.0)) < 1e-7 * v[d * 4 + 0]);
        assert_true(fabs(v[d * 4 + 1] - roformer_bound(d, 64, 4.0)) < 1e-7 * v[d * 4 + 1]);
    }
    for (int d = 1; d <= 300; d++) /* the bound stays below its value at r = 0 */
        for (int k = 0; k < 4; k++)
            assert_true(v[d * 4 + k] <= 16.5 + 1e-9);
    free(v);
    run_free(&r);
#if POSENC_TOOL_HAVE_PNG
    char path[320];
    snprintf(path, sizeof(path), "%s/decay.png", tmpdir);
    r = RUN("decay", "--dim", "64", "--max-dist", "300", "--linear-x", "--scalings",
            "none,linear", "-o", path);
    expect_ok(&r);
    struct image im = read_png(path);
    assert_int_equal(im.w, DC_LEFT + DC_PLOT_W + DC_RIGHT);
    assert_int_equal(im.h, DC_TOP + DC_PLOT_H + DC_BOTTOM);
    /* r = 0 is the top left corner of the plot (the largest value); linear, drawn last */
    expect_colour(&im, DC_LEFT, DC_TOP, dc_palette[1], 0, "decay at r = 0");
    /* r = 300, no scaling: at the right edge, at the height of its value (+-2 px) */
    double ymax = 16.5, b = roformer_bound(300, 64, 1.0);
    int x = DC_LEFT + DC_PLOT_W - 1, y = DC_TOP + (int)lround((1 - b / ymax) * (DC_PLOT_H - 1));
    int found = 0;
    for (int dy = -2; dy <= 2; dy++) {
        const uint8_t *p = px(&im, x, y + dy);
        found |= !memcmp(p, dc_palette[0], 3);
    }
    assert_true(found);
    free(im.rgb);
    run_free(&r);
#endif
}

/* ---- info and verify ------------------------------------------------------------------ */

static void test_info(void **state)
{
    (void)state;
    struct run r = RUN("info");
    expect_ok(&r);
    char want[64];
    snprintf(want, sizeof(want), "\n%s:\n    device 0: ", backend());
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "auto selects: "));
    /* no sentinel values: "none" / "unknown" instead */
    assert_null(strstr(r.out, "17592186044415"));
    assert_null(strstr(r.out, "compute units   0\n"));
    assert_null(strstr(r.out, "max buffer      0 MiB"));
    if (th.kind == POSENC_BACKEND_CPU)
        assert_non_null(strstr(r.out, "max buffer      none (host memory)"));
    run_free(&r);
}

/* Read what a child writes to the pseudo-terminal master `m` until it closes it. */
static void read_tty(int m, char *tty, size_t cap)
{
    size_t n = 0;
    for (;;) { /* until the child closes the terminal (EIO) */
        ssize_t k = read(m, tty + n, cap - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
        if (n == cap - 1)
            n = 0; /* keep reading; the bar repeats */
    }
    tty[n] = '\0';
}

static int open_pty(char *name, size_t n)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) || unlockpt(m) || !ptsname(m)) {
        if (m >= 0)
            close(m);
        return -1;
    }
    snprintf(name, n, "%s", ptsname(m));
    return m;
}

static void test_verify(void **state)
{
    (void)state;
    struct run r = RUN("verify", "--backend", backend(), "--op", "sinusoidal");
    expect_ok(&r); /* no progress bar: stderr is a file */
    assert_non_null(strstr(r.out, "verify: all cases passed\n"));
    char *plain = r.out;
    free(r.err);

    /* stderr on a pseudo-terminal: the bar is drawn there, stdout is unchanged */
    char name[256];
    int m = open_pty(name, sizeof(name));
    if (m < 0) {
        free(plain);
        print_message("no pseudo-terminal: progress bar not tested\n");
        skip();
    }
    r = run_argv((const char *const[]){"verify", "--backend", backend(), "--op", "sinusoidal",
                                       NULL},
                 name);
    static char tty[65536];
    read_tty(m, tty, sizeof(tty));
    close(m);
    r = run_wait(r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, plain);
    if (!strstr(tty, "[#") || !strstr(tty, "\r\033[K"))
        fail_msg("no progress bar on the terminal: '%s'", tty);
    free(plain);
    run_free(&r);

    /* --quiet: failures and totals only, and no bar even on a terminal */
    m = open_pty(name, sizeof(name));
    assert_true(m >= 0);
    r = run_argv((const char *const[]){"verify", "--backend", backend(), "--op", "sinusoidal",
                                       "--quiet", NULL},
                 name);
    read_tty(m, tty, sizeof(tty));
    close(m);
    r = run_wait(r);
    assert_int_equal(r.status, 0);
    if (strstr(tty, "[#") || strstr(tty, "\033[K"))
        fail_msg("--quiet drew progress: '%s'", tty);
    assert_null(strstr(r.out, " pass\n"));
    assert_non_null(strstr(r.out, "verify: all cases passed\n"));
    run_free(&r);
}

/* verify --quick: a subset covering every op; --filter narrows it. */
static void test_verify_quick(void **state)
{
    (void)state;
    struct run full = RUN("verify", "--backend", backend(), "--op", "rope");
    expect_ok(&full);
    struct run r = RUN("verify", "--backend", backend(), "--quick");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "--quick"));
    assert_non_null(strstr(r.out, "verify: all cases passed\n"));
    static const char *const ops[] = {"sinusoidal/", "rope/", "learned/", "learned_backward/",
                                      "sincos_2d/", "resize_2d/", "relbias/",
                                      "relbias_backward/", "alibi/", "copy/", "attention/"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "\n%s", ops[i]);
        if (!strstr(r.out, want))
            fail_msg("verify --quick runs no %s case", ops[i]);
    }
    /* fewer rope cases than the full run */
    int n_quick = 0, n_full = 0;
    for (const char *p = r.out; (p = strstr(p, "\nrope/")) != NULL; p++)
        n_quick++;
    for (const char *p = full.out; (p = strstr(p, "\nrope/")) != NULL; p++)
        n_full++;
    assert_true(n_quick > 0 && n_quick * 3 < n_full);
    run_free(&r);
    run_free(&full);
    /* a filter that matches: only those cases */
    r = RUN("verify", "--backend", backend(), "--op", "alibi", "--filter", "f16");
    expect_ok(&r);
    assert_null(strstr(r.out, "/f32/"));
    assert_non_null(strstr(r.out, "alibi/"));
    run_free(&r);
}

/* bench --quick: a smoke run that judges nothing; no progress when stderr is a file. */
static void test_bench_quick(void **state)
{
    (void)state;
    struct run r = RUN("bench", "--quick", "--backend", backend(), "--no-cold", "--op",
                       "rope normal f32", "--reps", "2");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "no target is judged"));
    assert_non_null(strstr(r.out, "rope normal f32"));
    assert_null(strstr(r.out, " met"));
    assert_null(strstr(r.out, "MISSED"));
    run_free(&r);
    r = RUN("bench", "--quick", "--backend", backend(), "--no-cold", "--op", "rope normal f32",
            "--reps", "2", "--json");
    expect_ok(&r);
    assert_null(strstr(r.out, "target_met"));
    /* --quick: no cache sweep before the attention rows; the wake-up copy still runs */
    assert_non_null(strstr(r.out, "\"attn_evict_bytes\": 0,"));
    assert_non_null(strstr(r.out, "\"attn_wake_bytes\": 1048576,"));
    run_free(&r);
    /* an attention row with --quick: the wake-up copy before each timed call */
    r = RUN("bench", "--quick", "--backend", backend(), "--no-cold", "--op",
            "attn decode d64 alibi", "--reps", "2");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "attn decode d64 alibi"));
    run_free(&r);
}

/* PoCL's workers: the tool sets POCL_AFFINITY=1 when the environment has none, and keeps
 * the user's own value (bench prints the value in force, --json too). */
static void test_bench_pocl_affinity(void **state)
{
    (void)state;
    char *saved = th_env_save("POCL_AFFINITY");
    unsetenv("POCL_AFFINITY");
    struct run r = RUN("bench", "--quick", "--backend", backend(), "--no-cold", "--op",
                       "rope normal f32", "--reps", "1");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "PoCL worker threads: POCL_AFFINITY=1 (pinned"));
    run_free(&r);
    setenv("POCL_AFFINITY", "0", 1);
    r = RUN("bench", "--quick", "--backend", backend(), "--no-cold", "--op", "rope normal f32",
            "--reps", "1", "--json");
    expect_ok(&r);
    assert_non_null(strstr(r.out, "\"pocl_affinity\": \"0\""));
    run_free(&r);
    th_env_restore("POCL_AFFINITY", saved);
}

/* ---- -o PATH: a failed write leaves what was there (issue #16) ------------------------- */

#if POSENC_TOOL_HAVE_PNG
static void put_file(const char *path, const char *text)
{
    remove(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_file(const char *path, const char *text)
{
    char *got = slurp(path);
    if (strcmp(got, text) != 0)
        fail_msg("%s was changed by a failed run (now %zu bytes)", path, strlen(got));
    free(got);
}

static void expect_link(const char *path, const char *to)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode))
        fail_msg("the symbolic link %s is gone", path);
    char buf[512];
    ssize_t n = readlink(path, buf, sizeof(buf) - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_string_equal(buf, to);
}

/* No temporary file of the tool is left in tmpdir. */
static void expect_no_temporary(void)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "ls -a %s | grep -q '^\\.posenc-'", tmpdir);
    if (system(cmd) == 0)
        fail_msg("a temporary .posenc-* file was left in %s", tmpdir);
}

static void test_output_never_clobbered(void **state)
{
    (void)state;
    char real[320], link[320], plain[320], dev[320];
    snprintf(real, sizeof(real), "%s/real.png", tmpdir);
    snprintf(link, sizeof(link), "%s/link.png", tmpdir);
    snprintf(plain, sizeof(plain), "%s/plain.png", tmpdir);
    snprintf(dev, sizeof(dev), "%s/full.png", tmpdir);
    remove(link);
    remove(dev);
    put_file(real, "precious");
    assert_int_equal(symlink("real.png", link), 0);
    assert_int_equal(symlink("/dev/full", dev), 0);
    const char *heat[] = {"heatmap", "--kind", "sinusoidal", "--dim", "64", "--len", "64"};
    const char *decay[] = {"decay", "--dim", "64", "--max-dist", "100"};
    /* Once without a file-size limit first: a driver that compiles kernels (PoCL) writes
     * its own files while it builds from source, even from its own cache, and under the
     * limit that build would fail before the tool reaches its own write. So the runs use
     * posenc's program-binary cache (off by default on PoCL), which the warm run fills:
     * the runs under the limit load the programs instead of building them. */
    char cache[340];
    snprintf(cache, sizeof(cache), "%s/program-cache", tmpdir);
    setenv("POSENC_CACHE_DIR", cache, 1);
    struct run warm = RUN(heat[0], heat[1], heat[2], heat[3], heat[4], heat[5], heat[6], "-o",
                          plain, "--backend", backend());
    expect_ok(&warm);
    run_free(&warm);
    for (int cmd = 0; cmd < 2; cmd++) {
        const char *const *a = cmd ? decay : heat;
        const char *path[3] = {link, plain, dev};
        for (int p = 0; p < 3; p++) {
            put_file(real, "precious");
            put_file(plain, "precious");
            /* the image needs more than 1 KiB: the write fails part-way (EFBIG); on
             * /dev/full at once (ENOSPC) */
            fsize_limit = p < 2 ? 1024 : 0;
            struct run r = cmd ? RUN(a[0], a[1], a[2], a[3], a[4], "-o", path[p])
                               : RUN(a[0], a[1], a[2], a[3], a[4], a[5], a[6], "-o", path[p],
                                     "--backend", backend());
            fsize_limit = 0;
            if (r.status == 0)
                fail_msg("%s -o %s: a write that cannot succeed succeeded", a[0], path[p]);
            if (r.status != 1 || count_lines(r.err) != 1 || !strstr(r.err, path[p]))
                fail_msg("%s -o %s: exit %d, stderr \"%s\"", a[0], path[p], r.status, r.err);
            run_free(&r);
            expect_link(link, "real.png");
            expect_link(dev, "/dev/full");
            expect_file(real, "precious");
            expect_file(plain, "precious");
            expect_no_temporary();
        }
        /* and when the write succeeds, the link's file is replaced and the link kept */
        struct run r = cmd ? RUN(a[0], a[1], a[2], a[3], a[4], "-o", link)
                           : RUN(a[0], a[1], a[2], a[3], a[4], a[5], a[6], "-o", link,
                                 "--backend", backend());
        expect_ok(&r);
        run_free(&r);
        expect_link(link, "real.png");
        char *png = slurp(real);
        assert_memory_equal(png, "\x89PNG", 4);
        free(png);
        struct stat st;
        assert_int_equal(stat(real, &st), 0);
        assert_true(st.st_size > 1024);
        expect_no_temporary();
    }
    remove(link);
    remove(dev);
    remove(real);
    remove(plain);
    unsetenv("POSENC_CACHE_DIR");
    char rm[400]; /* the cache's entries */
    snprintf(rm, sizeof(rm), "rm -rf '%s'", cache);
    assert_int_equal(system(rm), 0);
}
#else
static void test_output_never_clobbered(void **state)
{
    (void)state;
    skip();
}
#endif

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: test_cli PATH/TO/posenc [--backend B]\n");
        return 1;
    }
    posenc_exe = argv[1];
    int rc = th_init(argc, argv, "cli");
    if (rc >= 0)
        return rc;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/posenc-cli-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "test_cli: mkdtemp %s: %s\n", tmpdir, strerror(errno));
        th_fini();
        return 1;
    }
    setenv("POSENC_DEBUG", "1", 1); /* Vulkan validation in the tool: messages fail tests */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),          cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_table_seed),    cmocka_unit_test(test_table_sinusoidal),
        cmocka_unit_test(test_table_rope),    cmocka_unit_test(test_table_alibi),
        cmocka_unit_test(test_table_t5),      cmocka_unit_test(test_heatmap_sinusoidal),
        cmocka_unit_test(test_heatmap_alibi), cmocka_unit_test(test_heatmap_rope),
        cmocka_unit_test(test_heatmap_t5),    cmocka_unit_test(test_decay),
        cmocka_unit_test(test_info),          cmocka_unit_test(test_verify),
        cmocka_unit_test(test_usage_errors),  cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_scaling_kinds), cmocka_unit_test(test_heatmap_rope_angle),
        cmocka_unit_test(test_heatmap_downsampled), cmocka_unit_test(test_freqs_png),
        cmocka_unit_test(test_verify_quick),  cmocka_unit_test(test_bench_quick),
        cmocka_unit_test(test_bench_pocl_affinity),
        cmocka_unit_test(test_output_never_clobbered),
    };
    rc = th_run("cli", tests, sizeof(tests) / sizeof(tests[0]));
    th_fini();
    /* remove what the runs left */
    static const char *const files[] = {"stdout", "stderr", "heat.png", "decay.png",
                                        "freqs.png"};
    char path[320];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", tmpdir, files[i]);
        remove(path);
    }
    rmdir(tmpdir);
    return rc;
}
