/*
 * posenc - the command-line tool: what the library finds, and whether it computes right.
 *
 *   posenc info                      backends, devices, capabilities, what AUTO picks
 *   posenc verify [--backend B] [--op OP] [--filter TEXT] [--quiet]
 *                                    every op case on each backend vs the CPU reference
 *   posenc table --kind K ...        an encoding's vectors / matrices as numbers
 *   posenc heatmap --kind K -o F     the same as a PNG heat map       (cmd_heatmap.c)
 *   posenc decay -o F | --csv        RoPE's long-term decay per scaling (cmd_decay.c)
 *
 * table, heatmap: cmd_table.c, cmd_heatmap.c, encodings.c; images: plot.c, font.c, png.c.
 */
#include "bench_core.h"
#include "check.h"
#include "posenc.h"
#include "tool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const posenc_backend_kind all_backends[] = {POSENC_BACKEND_CPU, POSENC_BACKEND_OPENCL,
                                                   POSENC_BACKEND_VULKAN};

static const char *device_type_name(posenc_device_type t)
{
    switch (t) {
    case POSENC_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case POSENC_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case POSENC_DEVICE_CPU: return "CPU";
    default: return "other";
    }
}

static int parse_backend(const char *s, posenc_backend_kind *out)
{
    for (int k = 0; k < POSENC_BACKEND_COUNT; k++)
        if (strcmp(s, posenc_backend_name((posenc_backend_kind)k)) == 0) {
            *out = (posenc_backend_kind)k;
            return 1;
        }
    return 0;
}

static void print_info(const struct posenc_device_info *in)
{
    printf("    device %d: %s\n", (int)in->device_index, in->device_name);
    printf("      type            %s\n", device_type_name(in->type));
    printf("      vendor          %s\n", in->vendor);
    printf("      api             %s\n", in->api_version);
    printf("      driver          %s\n", in->driver_version);
    printf("      f16 storage     %s\n", in->f16_native ? "native" : "converted in kernels");
    printf("      max buffer      %llu MiB\n", (unsigned long long)(in->max_buffer_size >> 20));
    if (in->max_binding_size)
        printf("      max binding     %llu bytes (larger ops are cut into several launches)\n",
               (unsigned long long)in->max_binding_size);
    printf("      max work-group  %u\n", in->max_workgroup_size);
    printf("      compute units   %u\n", in->compute_units);
}

static int cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: posenc info\n\nLists every backend and device posenc can use, their "
                   "capabilities,\nwhy a backend is unavailable, and what AUTO selects.\n");
            return 0;
        }
        fprintf(stderr, "posenc info: unknown argument '%s' (try --help)\n", argv[i]);
        return 2;
    }
    printf("posenc %s\n\n", posenc_version());
    for (size_t b = 0; b < sizeof(all_backends) / sizeof(all_backends[0]); b++) {
        posenc_backend_kind kind = all_backends[b];
        int32_t count = 0;
        char why[512];
        posenc_status st = posenc_backend_device_count(kind, &count, why, sizeof(why));
        printf("%s:\n", posenc_backend_name(kind));
        if (st != POSENC_OK) {
            printf("    unavailable: %s\n\n", why);
            continue;
        }
        for (int32_t d = 0; d < count; d++) {
            struct posenc_context_params p = {.backend = kind, .device = d};
            posenc_context *ctx = NULL;
            char err[512];
            st = posenc_context_create(&p, &ctx, err, sizeof(err));
            if (st != POSENC_OK) {
                printf("    device %d: cannot open: %s\n", (int)d, err);
                continue;
            }
            struct posenc_device_info info;
            posenc_context_get_info(ctx, &info);
            print_info(&info);
            posenc_context_destroy(&ctx);
        }
        printf("\n");
    }
    posenc_context *ctx = NULL;
    char err[512];
    struct posenc_context_params p = {.backend = POSENC_BACKEND_AUTO};
    if (posenc_context_create(&p, &ctx, err, sizeof(err)) == POSENC_OK) {
        struct posenc_device_info info;
        posenc_context_get_info(ctx, &info);
        printf("auto selects: %s device %d (%s)%s\n", posenc_backend_name(info.backend),
               (int)info.device_index, info.device_name,
               info.backend == POSENC_BACKEND_CPU
                   ? " - no real GPU found; CPU-emulated devices are used only when asked for"
                   : "");
        posenc_context_destroy(&ctx);
    } else {
        printf("auto: %s\n", err);
    }
    return 0;
}

/* The progress bar of verify: on stderr, only when stderr is a terminal. Result lines go
 * to stdout; the bar is erased before each and drawn again after it. */
static int progress_on;

static void progress_clear(void)
{
    if (progress_on)
        fputs("\r\033[K", stderr);
}

static void progress_draw(const char *backend, size_t done, size_t total, const char *name)
{
    enum { BAR = 30 };
    if (!progress_on)
        return;
    static const char hashes[] = "##############################";
    int fill = total ? (int)(done * BAR / total) : BAR;
    fprintf(stderr, "\r\033[K%s [%.*s%*s] %zu/%zu %.36s", backend, fill, hashes, BAR - fill, "",
            done, total, name);
    fflush(stderr);
}

/* Counts WARN messages (driver / validation-layer reports) of the context under test. */
static int warn_count;
static void verify_log(posenc_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == POSENC_LOG_WARN) {
        warn_count++;
        progress_clear();
        fprintf(stderr, "  warning: %s\n", msg);
    }
}

/* The seed document's worked example: d_model = 6, pos = 2, in double. */
static int verify_seed(posenc_context *ctx, double *out_err)
{
    posenc_buffer *b = NULL, *pb = NULL;
    int32_t pos = 2;
    float out[6];
    int ok = posenc_buffer_create(ctx, sizeof(out), &b) == POSENC_OK &&
             posenc_buffer_create(ctx, sizeof(pos), &pb) == POSENC_OK &&
             posenc_buffer_write(pb, 0, &pos, sizeof(pos)) == POSENC_OK;
    if (ok) {
        posenc_tensor dst = posenc_tensor_contiguous(b, 0, POSENC_DTYPE_F32, 6, 1, 1, 1);
        posenc_tensor pt = posenc_tensor_contiguous(pb, 0, POSENC_DTYPE_I32, 1, 1, 1, 1);
        ok = posenc_sinusoidal(ctx, NULL, &pt, &dst, NULL) == POSENC_OK &&
             posenc_buffer_read(b, 0, out, sizeof(out)) == POSENC_OK;
    }
    *out_err = INFINITY;
    if (ok) {
        *out_err = 0.0;
        for (int i = 0; i < 3; i++) {
            double a = 2.0 / pow(10000.0, 2.0 * i / 6.0);
            *out_err = fmax(*out_err, fabs(out[2 * i] - sin(a)));
            *out_err = fmax(*out_err, fabs(out[2 * i + 1] - cos(a)));
        }
    }
    posenc_buffer_destroy(&b);
    posenc_buffer_destroy(&pb);
    /* |angle| <= 2: two ulp of the angle + 4 ulp of sin/cos, see pc_bound_sincos_f32 */
    return ok && *out_err <= pc_bound_sincos_f32(2.0, 0.0);
}

static int cmd_verify(int argc, char **argv)
{
    int only_backend = -1, quiet = 0;
    enum pc_op op = PC_OP_COUNT;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: posenc verify [--backend cpu|opencl|vulkan] [--op OP] [--filter TEXT] "
                   "[--quiet]\n\nRuns every verification case (the same cases as the test "
                   "suites) on each backend\nfound and compares with the CPU reference. Prints "
                   "each case with its max abs\nerror and the bound; exits 1 on any failure.\n"
                   "Ops: sinusoidal, rope, learned, learned_backward, sincos_2d, resize_2d,\n"
                   "     relbias, relbias_backward, alibi, copy, attention\n");
            return 0;
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            posenc_backend_kind k;
            if (!parse_backend(argv[++i], &k) || k == POSENC_BACKEND_AUTO) {
                fprintf(stderr, "posenc verify: unknown backend '%s'\n", argv[i]);
                return 2;
            }
            only_backend = (int)k;
        } else if (!strcmp(argv[i], "--op") && i + 1 < argc) {
            int found = 0;
            i++;
            for (int o = 0; o < PC_OP_COUNT; o++)
                if (!strcmp(argv[i], pc_op_name((enum pc_op)o))) {
                    op = (enum pc_op)o;
                    found = 1;
                }
            if (!found) {
                fprintf(stderr, "posenc verify: unknown op '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else {
            fprintf(stderr, "posenc verify: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    size_t ncases = 0;
    struct pc_case *cases = pc_cases(op, &ncases);
    posenc_context *ref = NULL;
    char err[512];
    struct posenc_context_params rp = {.backend = POSENC_BACKEND_CPU,
                                       .flags = POSENC_CONTEXT_CPU_REFERENCE};
    if (!cases || posenc_context_create(&rp, &ref, err, sizeof(err)) != POSENC_OK) {
        fprintf(stderr, "posenc verify: cannot create the CPU reference: %s\n", err);
        free(cases);
        return 1;
    }
    int failures = 0, backends_run = 0;
    progress_on = isatty(STDERR_FILENO);
    size_t total = 0;
    for (size_t i = 0; i < ncases; i++)
        if (!filter || strstr(cases[i].name, filter))
            total++;
    for (size_t b = 0; b < sizeof(all_backends) / sizeof(all_backends[0]); b++) {
        posenc_backend_kind kind = all_backends[b];
        if (only_backend >= 0 && (int)kind != only_backend)
            continue;
        struct posenc_context_params p = {.backend = kind, .flags = POSENC_CONTEXT_DEBUG,
                                          .log_fn = verify_log, .log_level = POSENC_LOG_WARN};
        posenc_context *dut = NULL;
        posenc_status st = posenc_context_create(&p, &dut, err, sizeof(err));
        if (st != POSENC_OK) {
            printf("== %s: %s: %s\n\n", posenc_backend_name(kind), posenc_status_string(st), err);
            if (only_backend >= 0 || st != POSENC_ERR_UNAVAILABLE)
                failures++;
            continue;
        }
        backends_run++;
        struct posenc_device_info info;
        posenc_context_get_info(dut, &info);
        printf("== %s: %s\n", posenc_backend_name(kind), info.device_name);
        printf("%-100s %10s %10s  %s\n", "case", "max|err|", "bound", "result");
        int pass = 0, fail = 0;
        warn_count = 0;
        if (op == PC_OP_COUNT || op == PC_OP_SINUSOIDAL) {
            double e;
            int ok = verify_seed(dut, &e);
            printf("%-100s %10.3g %10.3g  %s\n", "sinusoidal/seed d_model=6 pos=2 vs double", e,
                   pc_bound_sincos_f32(2.0, 0.0), ok ? "pass" : "FAIL");
            ok ? pass++ : fail++;
        }
        size_t done = 0;
        for (size_t i = 0; i < ncases; i++) {
            if (filter && !strstr(cases[i].name, filter))
                continue;
            progress_draw(posenc_backend_name(kind), done, total, cases[i].name);
            struct pc_result r;
            pc_run_case(ref, dut, &cases[i], &r);
            done++;
            if (!quiet || !r.pass) {
                progress_clear();
                printf("%-100s %10.3g %10.3g  %s%s%s\n", cases[i].name, r.max_err,
                       r.bound_at_max, r.pass ? "pass" : "FAIL", r.pass ? "" : ": ",
                       r.pass ? "" : r.msg);
                fflush(stdout);
            }
            r.pass ? pass++ : fail++;
        }
        progress_clear();
        if (warn_count) {
            printf("%d driver/validation warnings (counted as a failure)\n", warn_count);
            fail++;
        }
        printf("%s: %d passed, %d failed\n\n", posenc_backend_name(kind), pass, fail);
        failures += fail;
        posenc_context_destroy(&dut);
    }
    posenc_context_destroy(&ref);
    free(cases);
    if (backends_run == 0) {
        fprintf(stderr, "posenc verify: no backend could be run\n");
        return 1;
    }
    printf("verify: %s\n", failures ? "FAILED" : "all cases passed");
    return failures ? 1 : 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: posenc <command> [options]\n\n"
               "commands:\n"
               "  info     backends and devices found, and what AUTO picks\n"
               "  verify   every op case on every backend against the CPU reference\n"
               "  table    an encoding's vectors / matrices as numbers\n"
               "  heatmap  an encoding as a PNG heat map\n"
               "  decay    RoPE's long-term decay for several scalings (PNG or CSV)\n"
               "  bench    GB/s of every op against the backend's copy ceiling (bench/)\n\n"
               "posenc <command> --help for the options of a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "posenc: no command given (try posenc --help)\n");
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("posenc %s\n", posenc_version());
        return 0;
    }
    if (!strcmp(argv[1], "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "verify"))
        return cmd_verify(argc - 1, argv + 1);
    if (!strcmp(argv[1], "table"))
        return cmd_table(argc - 1, argv + 1);
    if (!strcmp(argv[1], "heatmap"))
        return cmd_heatmap(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench"))
        return bench_main(argc - 1, argv + 1, "bench");
    if (!strcmp(argv[1], "decay"))
        return cmd_decay(argc - 1, argv + 1);
    fprintf(stderr, "posenc: unknown command '%s' (try posenc --help)\n", argv[1]);
    return 2;
}
