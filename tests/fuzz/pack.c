// SPDX-License-Identifier: MIT
// pack.c - records made a trace: the inverse of unpack.c. Tests write hostile traces as their
// records (tests/integration/hostile.sh) and frame them with this, checksums and all, so that
// the damage reaches the decoder and the model instead of failing a chunk's checksum.
//   pack RECORDS OUT     (RECORDS: per chunk, a varint length and its raw record bytes)
#include <fcntl.h>
#include <stdio.h>

#include "frame.h"

#define PACK_CHUNKS_MAX 4096

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: pack RECORDS OUT\n");
        return 2;
    }
    FILE* in = fopen(argv[1], "rb");
    size_t cap = 1 << 20, len = 0, got;
    uint8_t* data = malloc(cap);
    while (in && data && (got = fread(data + len, 1, cap - len, in)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t* fresh = realloc(data, cap *= 2);
            if (!fresh)
                break;
            data = fresh;
        }
    }
    static fr_span_t c[PACK_CHUNKS_MAX];
    size_t n = data ? fr_split(data, len, c, PACK_CHUNKS_MAX) : 0;
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    fr_writer_t w = {0};
    if (!in || n == 0 || fd < 0 || fr_trace(&w, fd, c, n) != 0 || close(fd) != 0) {
        fprintf(stderr, "pack: %s -> %s: no trace written\n", argv[1], argv[2]);
        return 1;
    }
    fclose(in);
    ZSTD_freeCCtx(w.z);
    free(w.stored);
    free(data);
    return 0;
}
