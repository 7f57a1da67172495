/*
** file.c — whole-file reads, atomic writes (temporary file + rename), path helpers.
**
** An output is written to a temporary file beside its target and renamed over it once complete,
** so that whatever stops the process (an error, a signal, a crash) leaves the old file or the new
** one, never a part. That is what compilers and PyTorch's torch.save give. Surviving a power
** failure as well needs the data on the disk before the rename and the rename after it:
** BPCC_WRITE_SYNC (fsync of the file, then of its directory). It is not the default, as it costs
** more than the rest of a save on this kind of machine (resnet18's 47 MB: ~45 ms of a ~100 ms
** save, docs/PERFORMANCE.md).
*/
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

enum bpcc_status bpcc_file_read(const char *path, char **data_out, size_t *len_out,
                                struct bpcc_diag *d)
{
    *data_out = NULL;
    *len_out = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "not a regular file");
    }
    /* One block of the file's size and its terminator, read into in place: a model of 137 MB
    ** read in 64 KiB appends to a doubling buffer took 256 MB and left 255 MB of earlier copies
    ** in the heap. A file that grows while read (the size is only what fstat saw) still reads
    ** whole: a full block is doubled when one more byte comes. */
    if ((uintmax_t)st.st_size >= SIZE_MAX / 2) {
        fclose(fp);
        return bpcc_diag_nomem(d);
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *data = bpcc_malloc(cap);
    for (;;) {
        if (!data) {
            fclose(fp);
            return bpcc_diag_nomem(d);
        }
        size_t n = fread(data + len, 1, cap - 1 - len, fp);
        len += n;
        if (len + 1 < cap) break; /* the end, or an error */
        int c = getc(fp);
        if (c == EOF) break;
        char *p = cap <= SIZE_MAX / 2 ? bpcc_realloc(data, cap * 2) : NULL;
        if (!p) bpcc_xfree(data);
        data = p;
        cap *= 2;
        if (data) data[len++] = (char)c;
    }
    bool err = ferror(fp);
    fclose(fp);
    if (err) {
        bpcc_xfree(data);
        return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "read error");
    }
    data[len] = 0;
    *len_out = len;
    *data_out = data;
    return BPCC_OK;
}

char *bpcc_path_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return bpcc_strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *r = bpcc_malloc(n + 1);
    if (!r) return NULL;
    memcpy(r, path, n);
    r[n] = 0;
    return r;
}

const char *bpcc_path_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *bpcc_path_join(const char *dir, const char *name)
{
    if (name[0] == '/' || !dir[0] || strcmp(dir, ".") == 0) return bpcc_strdup(name);
    size_t a = strlen(dir), b = strlen(name);
    char *r = bpcc_malloc(a + b + 2);
    if (!r) return NULL;
    memcpy(r, dir, a);
    r[a] = '/';
    memcpy(r + a + 1, name, b + 1);
    return r;
}

static atomic_ulong sync_count;

unsigned long bpcc_file_sync_count(void) { return atomic_load(&sync_count); }

static int sync_fd(int fd)
{
    atomic_fetch_add(&sync_count, 1);
    return fsync(fd);
}

/* The temporaries being written, for bpcc_remove_partial_outputs, which a signal handler calls:
** copies of their paths in fixed slots, so that the handler never reads memory being freed. A
** slot is 0 (free), 1 (being filled) or 2 (a path to remove). A temporary that finds no slot (a
** path longer than a slot, more than LIVE_SLOTS at once) is only left out of the clean-up. */
#define LIVE_SLOTS 8
static struct {
    atomic_int state;
    char path[4096];
} live[LIVE_SLOTS];

static unsigned live_add(const char *tmp)
{
    size_t n = strlen(tmp);
    if (n >= sizeof live[0].path) return 0;
    for (unsigned i = 0; i < LIVE_SLOTS; i++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&live[i].state, &expected, 1)) {
            memcpy(live[i].path, tmp, n + 1);
            atomic_store(&live[i].state, 2);
            return i + 1;
        }
    }
    return 0;
}

static void live_drop(struct bpcc_atomic_file *af)
{
    if (af->live) atomic_store(&live[af->live - 1].state, 0);
    af->live = 0;
}

void bpcc_remove_partial_outputs(void)
{
    for (unsigned i = 0; i < LIVE_SLOTS; i++)
        if (atomic_load(&live[i].state) == 2) (void)unlink(live[i].path); /* async-signal-safe */
}

enum bpcc_status bpcc_atomic_open(struct bpcc_atomic_file *af, const char *path, unsigned flags,
                                  struct bpcc_diag *d)
{
    memset(af, 0, sizeof *af);
    if (flags & ~(unsigned)BPCC_WRITE_SYNC)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, path, 0, 0, "unknown write flags 0x%x", flags);
    af->sync = flags & BPCC_WRITE_SYNC;
    /* Only a regular file is replaced. A directory at the target would refuse only the rename at
    ** the end: a model's text file then failed after its weights file had taken its place (`-o DIR`
    ** left DIR.safetensors, over whatever was there); both are opened before either is renamed, so
    ** asking here stops the pair before anything is written. A device, FIFO or socket would be
    ** replaced by a regular file (`-o /dev/null` run as root replaced /dev/null). */
    if (!*path) return bpcc_diag_error(d, BPCC_ERR_IO, NULL, 0, 0, "cannot write output: its file name is empty");
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "cannot write output: %s (give a file name)",
                               S_ISDIR(st.st_mode) ? "it is a directory"
                                                   : "it is not a regular file (a device, a FIFO or a socket), which "
                                                     "an output would replace");
    af->path = bpcc_strdup(path);
    size_t n = strlen(path) + 32;
    af->tmp_path = bpcc_malloc(n);
    if (!af->path || !af->tmp_path) {
        bpcc_atomic_abort(af);
        return bpcc_diag_nomem(d);
    }
    /* Hidden temporary beside the target (same file system, so rename is atomic). */
    const char *base = bpcc_path_basename(path);
    int dir_len = (int)(base - path);
    snprintf(af->tmp_path, n, "%.*s.%s.tmpXXXXXX", dir_len, path, base);
    int fd = mkstemp(af->tmp_path);
    if (fd < 0) {
        int e = errno;
        bpcc_atomic_abort(af);
        return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "cannot create output: %s",
                               strerror(e));
    }
    af->created = true;
    af->live = live_add(af->tmp_path);
    /* mkstemp makes 0600; an output file should get the usual umask-governed mode. */
    mode_t um = umask(0);
    umask(um);
    (void)fchmod(fd, 0666 & ~um);
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        close(fd);
        bpcc_atomic_abort(af);
        return bpcc_diag_nomem(d);
    }
    return BPCC_OK;
}

enum bpcc_status bpcc_atomic_finish(struct bpcc_atomic_file *af, struct bpcc_diag *d)
{
    if (!af->fp) return BPCC_OK;
    bool ok = !ferror(af->fp);
    ok = fflush(af->fp) == 0 && ok;
    if (af->sync) ok = sync_fd(fileno(af->fp)) == 0 && ok;
    int e = errno;
    ok = fclose(af->fp) == 0 && ok;
    af->fp = NULL;
    if (!ok) {
        enum bpcc_status s = bpcc_diag_error(d, BPCC_ERR_IO, af->path ? af->path : "", 0, 0,
                                             "write error: %s", strerror(e ? e : EIO));
        bpcc_atomic_abort(af);
        return s;
    }
    return BPCC_OK;
}

enum bpcc_status bpcc_atomic_commit(struct bpcc_atomic_file *af, struct bpcc_diag *d)
{
    enum bpcc_status s = bpcc_atomic_finish(af, d);
    if (s) return s;
    if (rename(af->tmp_path, af->path) != 0) {
        s = bpcc_diag_error(d, BPCC_ERR_IO, af->path, 0, 0, "cannot rename output: %s",
                            strerror(errno));
        bpcc_atomic_abort(af);
        return s;
    }
    af->created = false; /* the temporary is the target now */
    live_drop(af);       /* after the rename: a signal between them finds no file to remove */
    if (af->sync) { /* the rename itself on the disk: the directory's entry */
        char *dir = bpcc_path_dirname(af->path);
        int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY) : -1;
        /* a file system that cannot sync a directory says EINVAL: the file's data is synced,
        ** and nothing more can be done there */
        bool ok = fd >= 0 && (sync_fd(fd) == 0 || errno == EINVAL);
        int e = errno;
        if (fd >= 0) close(fd);
        bpcc_xfree(dir);
        if (!ok) {
            s = bpcc_diag_error(d, BPCC_ERR_IO, af->path, 0, 0, "written, but its directory could not be synced: %s",
                                strerror(e ? e : EIO));
            bpcc_atomic_abort(af);
            return s;
        }
    }
    bpcc_xfree(af->tmp_path);
    bpcc_xfree(af->path);
    memset(af, 0, sizeof *af);
    return BPCC_OK;
}

void bpcc_atomic_abort(struct bpcc_atomic_file *af)
{
    if (af->fp) fclose(af->fp);
    if (af->created) unlink(af->tmp_path);
    live_drop(af);
    bpcc_xfree(af->tmp_path);
    bpcc_xfree(af->path);
    memset(af, 0, sizeof *af);
}

enum bpcc_status bpcc_write_file(const char *path, const void *data, size_t len, struct bpcc_diag *d)
{
    return bpcc_write_file_ex(path, data, len, 0, d);
}

enum bpcc_status bpcc_write_file_ex(const char *path, const void *data, size_t len, unsigned flags,
                                    struct bpcc_diag *d)
{
    struct bpcc_atomic_file af;
    enum bpcc_status s = bpcc_atomic_open(&af, path, flags, d);
    if (s) return s;
    if (len && fwrite(data, 1, len, af.fp) != len) {
        bpcc_atomic_abort(&af);
        return bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "cannot write: %s", strerror(errno));
    }
    return bpcc_atomic_commit(&af, d);
}
