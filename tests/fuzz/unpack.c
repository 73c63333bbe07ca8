// SPDX-License-Identifier: MIT
// unpack.c - a trace's records as fuzz_trace.c's second kind of input: for each chunk, a varint
// length and the chunk's decompressed bytes. The seed corpus holds real traces both ways, so
// that mutations reach the records (the trace's own checksums would refuse nearly all of them).
//   unpack TRACE OUT
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "../../src/common/format.h"
#include "../../src/common/varint.h"

static uint32_t le32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: unpack TRACE OUT\n");
        return 2;
    }
    FILE* in = fopen(argv[1], "rb");
    FILE* out = in ? fopen(argv[2], "wb") : NULL;
    uint8_t* stored = malloc(HL_CHUNK_RAW_MAX * 2u);
    uint8_t* raw = malloc(HL_CHUNK_RAW_MAX);
    ZSTD_DCtx* z = ZSTD_createDCtx();
    uint8_t hdr[HL_FILE_HEADER_SIZE];
    if (!out || !stored || !raw || !z || fread(hdr, 1, sizeof hdr, in) != sizeof hdr ||
        memcmp(hdr, HL_TRACE_MAGIC, 8) != 0) {
        fprintf(stderr, "unpack: %s: cannot read it as a trace\n", argv[1]);
        return 1;
    }
    uint8_t ch[HL_CHUNK_HEADER_SIZE];
    int chunks = 0;
    while (fread(ch, 1, sizeof ch, in) == sizeof ch) {
        uint32_t slen = le32(ch + 4), rlen = le32(ch + 8);
        if (le32(ch) != HL_CHUNK_MAGIC || slen > HL_CHUNK_RAW_MAX * 2u ||
            rlen > HL_CHUNK_RAW_MAX || fread(stored, 1, slen, in) != slen)
            break;
        ZSTD_inBuffer ib = {stored, slen, 0};
        ZSTD_outBuffer ob = {raw, rlen, 0};
        while (ib.pos < ib.size && ob.pos < ob.size)
            if (ZSTD_isError(ZSTD_decompressStream(z, &ob, &ib)))
                break;
        if (ob.pos != rlen)
            break;
        uint8_t len[10];
        fwrite(len, 1, (size_t)(varint_put(len, rlen) - len), out);
        fwrite(raw, 1, rlen, out);
        chunks++;
    }
    ZSTD_freeDCtx(z);
    free(stored);
    free(raw);
    fclose(in);
    if (fclose(out) != 0 || chunks == 0) {
        fprintf(stderr, "unpack: %s: no chunk written\n", argv[2]);
        return 1;
    }
    return 0;
}
