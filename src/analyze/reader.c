// SPDX-License-Identifier: MIT
// reader.c - the file around the records (src/common/format.h): header, chunks, and the one
// zstd stream they are parts of. Reads one chunk at a time, so memory is bounded by the largest
// chunk and zstd's window, not by the trace. The records themselves are decode.c's.
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "../common/checksum.h"
#include "../common/format.h"
#include "decode.h"

// The writer's window is at most 8 MiB (windowLog 23); room to spare, so a writer that looks
// further back for repeats does not make old traces unreadable, while a damaged frame header
// cannot make the reader reserve gigabytes.
#define RD_WINDOW_LOG_MAX 27

static uint32_t le32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// One chunk's stored bytes through the stream's decoder, into out. Returns the bytes made, or
// -1 with *why set when zstd refuses them.
static long inflate_chunk(ZSTD_DCtx* z, const uint8_t* in, size_t n, uint8_t* out,
                          const char** why) {
    ZSTD_inBuffer ib = {in, n, 0};
    ZSTD_outBuffer ob = {out, HL_CHUNK_RAW_MAX, 0};
    while (ib.pos < ib.size && ob.pos < ob.size) {
        size_t was_in = ib.pos, was_out = ob.pos;
        size_t rc = ZSTD_decompressStream(z, &ob, &ib);
        if (ZSTD_isError(rc)) {
            *why = ZSTD_getErrorName(rc);
            return -1;
        }
        if (ib.pos == was_in && ob.pos == was_out) {
            *why = "no progress";
            return -1;
        }
    }
    if (ib.pos < ib.size) {
        *why = "more bytes than a chunk holds";
        return -1;
    }
    return (long)ob.pos;
}

typedef struct file_s {
    FILE* f;
    uint64_t size; // of the file: no chunk can claim more than is left of it
    uint8_t* stored;
    size_t stored_cap;
    uint8_t* raw;
    ZSTD_DCtx* z;
    rd_dec_t dec;
} file_t;

static int check_header(FILE* f, rd_result_t* res) {
    uint8_t hdr[HL_FILE_HEADER_SIZE];
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, HL_TRACE_MAGIC, 8) != 0) {
        snprintf(res->message, sizeof res->message, "not a heaplens trace (bad header)");
        return -EINVAL;
    }
    uint32_t version = le32(hdr + 8);
    if (version < HL_TRACE_VERSION_OLDEST || version > HL_TRACE_VERSION) {
        snprintf(res->message, sizeof res->message,
                 "trace format version %u, this heaplens reads version %u to %u", version,
                 HL_TRACE_VERSION_OLDEST, HL_TRACE_VERSION);
        return -EINVAL;
    }
    uint32_t flags = le32(hdr + 12);
    res->word_size = flags & HL_HDR_WORD_SIZE_MASK ? flags & HL_HDR_WORD_SIZE_MASK : 8;
    res->is_big_endian = (flags & HL_HDR_BIG_ENDIAN) != 0;
    if (res->word_size != 4 && res->word_size != 8) {
        snprintf(res->message, sizeof res->message,
                 "not a heaplens trace (a %u-byte pointer size in its header)", res->word_size);
        return -EINVAL;
    }
    return 0;
}

// Does the file hold n bytes from offset on? (Its size is looked at again before saying no: a
// trace may still be being written.)
static int has_bytes(file_t* t, uint64_t offset, uint64_t n) {
    struct stat st;
    if (t->size >= offset && t->size - offset >= n)
        return 1;
    if (fstat(fileno(t->f), &st) == 0)
        t->size = (uint64_t)st.st_size;
    return t->size >= offset && t->size - offset >= n;
}

// Following a file still being written: the chunk at `at` is not all there yet. The file is
// read from its start again next time (fseeko forgets the end of file it met).
static int wait_at(file_t* t, uint64_t at) {
    return fseeko(t->f, (off_t)at, SEEK_SET) == 0 ? RD_WAIT : -EIO;
}

// The chunks from *offset on, until the file ends, one is damaged, or cb stops: 0, or -ENOMEM.
// Following (max_chunks > 0): RD_WAIT where the file ends, even inside a chunk, and RD_MORE
// after max_chunks chunks; *offset is then where the next call goes on.
static int read_chunks(file_t* t, uint64_t* offset_io, rd_callback_t cb, void* arg,
                       rd_result_t* res, unsigned max_chunks) {
    uint64_t offset = *offset_io;
    int follow = max_chunks > 0;
    for (unsigned done = 0;; done++) {
        *offset_io = offset;
        if (follow && done == max_chunks)
            return RD_MORE;
        unsigned long long at = offset;
        uint8_t ch[HL_CHUNK_HEADER_SIZE];
        size_t got = fread(ch, 1, sizeof ch, t->f);
        if (follow && got < sizeof ch)
            return wait_at(t, at);
        if (got == 0)
            return 0;
        if (got < sizeof ch) {
            res->is_truncated = 1;
            snprintf(res->message, sizeof res->message,
                     "trace ends inside a chunk header at byte %llu", at);
            return 0;
        }
        uint32_t magic = le32(ch), slen = le32(ch + 4), rlen = le32(ch + 8), sum = le32(ch + 12);
        if (magic != HL_CHUNK_MAGIC || rlen > HL_CHUNK_RAW_MAX || slen > HL_CHUNK_RAW_MAX * 2u) {
            res->is_corrupt = 1;
            snprintf(res->message, sizeof res->message, "bad chunk header at byte %llu", at);
            return 0;
        }
        if (!has_bytes(t, offset + HL_CHUNK_HEADER_SIZE, slen)) { // nothing read or reserved
            if (follow)
                return wait_at(t, at);
            res->is_truncated = 1;
            snprintf(res->message, sizeof res->message, "trace ends inside the chunk at byte %llu",
                     at);
            return 0;
        }
        if (slen > t->stored_cap) {
            uint8_t* fresh = realloc(t->stored, slen);
            if (!fresh)
                return -ENOMEM;
            t->stored = fresh;
            t->stored_cap = slen;
        }
        if (fread(t->stored, 1, slen, t->f) != slen) {
            if (follow)
                return wait_at(t, at);
            res->is_truncated = 1;
            snprintf(res->message, sizeof res->message,
                     "trace ends inside the chunk at byte %llu", at);
            return 0;
        }
        // From here a failure ends the trace: the next chunk needs this one's history.
        const char* why = NULL;
        long n = inflate_chunk(t->z, t->stored, slen, t->raw, &why);
        if (n < 0 || (uint32_t)n != rlen) {
            res->is_corrupt = 1;
            if (n < 0)
                snprintf(res->message, sizeof res->message,
                         "chunk at byte %llu does not decode (%s)", at, why);
            else
                snprintf(res->message, sizeof res->message,
                         "chunk at byte %llu decodes to %ld bytes, its header says %u", at, n,
                         rlen);
            return 0;
        }
        if (hl_checksum32(t->raw, rlen) != sum) {
            res->is_corrupt = 1;
            snprintf(res->message, sizeof res->message,
                     "chunk at byte %llu fails its checksum", at);
            return 0;
        }
        res->chunks++;
        int rc = rd_dec_chunk(&t->dec, t->raw, rlen, offset, cb, arg, res);
        if (rc == -ENOMEM)
            return rc;
        if (rc != 0)
            return 0; // malformed (res says so), or the caller stopped
        offset += HL_CHUNK_HEADER_SIZE + slen;
    }
}

// The file at path for reading, when it is a regular file: a FIFO or a device could block the
// reader for ever or never end, and the analysis reads a trace more than once.
static int open_regular(const char* path, file_t* t, rd_result_t* res) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    int e = fd < 0 ? errno : fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? -1 : 0;
    if (e == 0 && fcntl(fd, F_SETFL, 0) != 0)
        e = errno;
    if (e == 0 && !(t->f = fdopen(fd, "rb")))
        e = errno;
    if (e == 0) {
        t->size = (uint64_t)st.st_size;
        return 0;
    }
    if (fd >= 0)
        close(fd);
    snprintf(res->message, sizeof res->message, "%s",
             e < 0 ? "not a heaplens trace (not a regular file)" : strerror(e));
    return e < 0 ? -EINVAL : -e;
}

struct rd_stream_s {
    file_t t;
    uint64_t offset; // of the next chunk
};

void rd_stream_close(rd_stream_t* s) {
    if (!s)
        return;
    ZSTD_freeDCtx(s->t.z);
    rd_dec_free(&s->t.dec);
    free(s->t.stored);
    free(s->t.raw);
    if (s->t.f)
        fclose(s->t.f);
    free(s);
}

int rd_stream_open(const char* path, rd_stream_t** out, rd_result_t* res) {
    memset(res, 0, sizeof *res);
    *out = NULL;
    rd_stream_t* s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(res->message, sizeof res->message, "out of memory");
        return -ENOMEM;
    }
    int rc = open_regular(path, &s->t, res);
    if (rc != 0) {
        free(s);
        return rc;
    }
    rc = check_header(s->t.f, res);
    if (rc != 0) {
        rd_stream_close(s);
        return rc;
    }
    rd_dec_init(&s->t.dec);
    s->t.raw = malloc(HL_CHUNK_RAW_MAX);
    s->t.z = ZSTD_createDCtx();
    if (!s->t.raw || !s->t.z ||
        ZSTD_isError(ZSTD_DCtx_setParameter(s->t.z, ZSTD_d_windowLogMax, RD_WINDOW_LOG_MAX))) {
        snprintf(res->message, sizeof res->message, "out of memory");
        rd_stream_close(s);
        return -ENOMEM;
    }
    s->offset = HL_FILE_HEADER_SIZE;
    *out = s;
    return 0;
}

int rd_stream_read(rd_stream_t* s, rd_callback_t cb, void* arg, rd_result_t* res,
                   unsigned max_chunks) {
    int rc = read_chunks(&s->t, &s->offset, cb, arg, res, max_chunks);
    if (rc == -ENOMEM && !res->message[0])
        snprintf(res->message, sizeof res->message, "out of memory");
    return rc;
}

int rd_read_file(const char* path, rd_callback_t cb, void* arg, rd_result_t* res) {
    rd_stream_t* s;
    int rc = rd_stream_open(path, &s, res);
    if (rc != 0)
        return rc;
    rc = rd_stream_read(s, cb, arg, res, 0);
    rd_stream_close(s);
    return rc;
}
