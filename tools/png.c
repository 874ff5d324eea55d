/* png.c - write a canvas as PNG through libpng (see plot.h). */
#define _XOPEN_SOURCE 700 /* realpath */

#include "plot.h"

#include "posenc.h"

#include <stdio.h>
#include <string.h>

#if POSENC_TOOL_HAVE_PNG

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <png.h>

int png_available(void)
{
    return 1;
}

static void on_png_error(png_structp png, png_const_charp msg)
{
    char *err = png_get_error_ptr(png);
    snprintf(err, 256, "libpng: %s", msg);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* The libpng part, separate so that no local of it lives across setjmp/longjmp. */
static int write_stream(FILE *f, const struct canvas *c, const char *comment, char *err256)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, err256, on_png_error,
                                              on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, NULL);
        snprintf(err256, 256, "libpng: out of memory");
        return 0;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return 0;
    }
    png_init_io(png, f);
    png_set_compression_level(png, 9);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    char software[64];
    snprintf(software, sizeof(software), "posenc %s", posenc_version());
    png_text text[2];
    memset(text, 0, sizeof(text));
    text[0].compression = PNG_TEXT_COMPRESSION_NONE;
    text[0].key = (png_charp) "Software";
    text[0].text = software;
    text[1].compression = PNG_TEXT_COMPRESSION_NONE;
    text[1].key = (png_charp) "Comment";
    text[1].text = (png_charp)comment;
    png_set_text(png, info, text, comment ? 2 : 1);
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++)
        png_write_row(png, c->rgb + (size_t)y * (size_t)c->w * 3);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return 1;
}

/*
 * Where the PNG goes. A regular file (or a path not there yet) is replaced only once the
 * whole image is written: into a temporary file in the same folder, renamed over it on
 * success, removed on failure -- a failed run leaves the old file as it was. A symbolic
 * link is followed to the file it names (which is replaced the same way; the link stays).
 * Anything else there (a device such as /dev/stdout, a FIFO) is written in place and never
 * removed: posenc removes only the temporary file it created.
 */
int png_write(const char *path, const struct canvas *c, const char *comment, char *err,
              size_t err_size)
{
    char msg[256] = "";
    char target[PATH_MAX], tmp[PATH_MAX + 32] = "";
    struct stat st;
    int in_place = 0;
    if (realpath(path, target)) {
        in_place = stat(target, &st) == 0 && !S_ISREG(st.st_mode);
    } else if (lstat(path, &st) == 0) {
        in_place = 1; /* a dangling link or one that cannot be resolved: write through it */
    } else if (snprintf(target, sizeof(target), "%s", path) >= (int)sizeof(target)) {
        snprintf(err, err_size, "'%s': path too long", path);
        return 0;
    }
    FILE *f = NULL;
    if (in_place) {
        f = fopen(path, "wb");
    } else {
        const char *slash = strrchr(target, '/');
        if (slash)
            snprintf(tmp, sizeof(tmp), "%.*s/.posenc-XXXXXX", (int)(slash - target), target);
        else
            snprintf(tmp, sizeof(tmp), ".posenc-XXXXXX");
        int fd = mkstemp(tmp);
        if (fd >= 0) {
            /* the mode a plain fopen would give (mkstemp makes 0600) */
            mode_t mask = umask(0);
            umask(mask);
            if (fchmod(fd, 0666 & ~mask) != 0 || !(f = fdopen(fd, "wb"))) {
                close(fd);
                remove(tmp);
            }
        }
    }
    if (!f) {
        snprintf(err, err_size, "cannot open '%s' for writing: %s", path, strerror(errno));
        return 0;
    }
    int ok = write_stream(f, c, comment, msg);
    if (fclose(f) != 0 && ok) {
        ok = 0;
        snprintf(msg, sizeof(msg), "write error: %s", strerror(errno));
    }
    if (ok && !in_place && rename(tmp, target) != 0) {
        ok = 0;
        snprintf(msg, sizeof(msg), "cannot replace it: %s", strerror(errno));
    }
    if (!ok) {
        snprintf(err, err_size, "%s: %s", path, msg);
        if (!in_place)
            remove(tmp);
    }
    return ok;
}

#else /* !POSENC_TOOL_HAVE_PNG */

int png_available(void)
{
    return 0;
}

int png_write(const char *path, const struct canvas *c, const char *comment, char *err,
              size_t err_size)
{
    (void)path;
    (void)c;
    (void)comment;
    snprintf(err, err_size, "built without libpng: PNG output is not available "
                            "(install libpng-dev and rebuild)");
    return 0;
}

#endif
