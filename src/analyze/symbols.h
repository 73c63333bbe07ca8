// SPDX-License-Identifier: MIT
// symbols.h - turn module-relative code addresses into function, file:line and inline chains.
// One symbolizer serves a whole trace. Modules are registered as the trace names them (path +
// build-id); their ELF and DWARF are opened lazily on first lookup and cached, and every
// address lookup is memoised, so a report pays for each distinct address once.
#ifndef HL_SYMBOLS_H
#define HL_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sym_frame_s {
    const char* function; // demangled name, or NULL when unknown; owned by the symbolizer
    const char* file;     // source path, or NULL; owned by the symbolizer
    uint32_t line;        // 0 when unknown
    uint32_t is_inlined;  // 1: this frame was inlined into the next (outer) one
} sym_frame_t;

typedef struct symbolizer_s symbolizer_t;

// Create a symbolizer. sysroot (may be NULL) is prepended to module paths when opening them,
// for symbolizing a trace recorded on another host. Returns NULL on out-of-memory.
symbolizer_t* symbolizer_new(const char* sysroot);

// Also look for separate debug information under DIR (absolute): DIR/.build-id/xx/rest.debug by
// the build-id the trace recorded, then DIR/<the binary's directory>/<its debuglink name>, as
// gdb and debuginfod's caches lay it out. Call before the first lookup or prefetch; may be
// called again for more directories, searched in order before the system's. 0, or -ENOMEM /
// -EINVAL.
int symbolizer_add_debug_dir(symbolizer_t* sym, const char* dir);

// The identity of the code that answers (this program and libdw), part of every cache file's
// name (symcache.h); the C++ demangler is named in the file, when it demangled any of its names.
uint64_t symbolizer_cache_producer(void);

// symbolizer_new, keeping its answers in the user's cache (symcache_open_default) when there is
// one: what the reports use.
symbolizer_t* symbolizer_new_cached(const char* sysroot);

// Keep the answers on disk in DIR (absolute, private to the user; symcache.h): a module whose answers are there is answered from them without being opened, and
// what lookups add is written there when the symbolizer is freed. The answers are the same with
// or without it. Call before the first lookup or prefetch. 0, or -errno.
int symbolizer_use_cache(symbolizer_t* sym, const char* dir);

// Release everything, including every string handed out by symbolizer_lookup (and first write
// the answers a cache lacks).
void symbolizer_free(symbolizer_t* sym);

// Register a module as the trace names it. build_id may be NULL/0 length. Files are not opened
// here. Returns a module handle >= 0, or -errno (-ENOMEM).
int symbolizer_add_module(symbolizer_t* sym, const char* path, const uint8_t* build_id,
                          size_t build_id_len);

// Open the module (its ELF, debug file, DWARF and symbol table) on a thread of the symbolizer's
// own, while the caller goes on with other work (reading the rest of a trace); a lookup in it
// waits for that, or opens it itself when the thread has not come to it yet. Modules are opened
// in the order they are queued, one at a time; symbolizer_free stops the thread after the one
// it is opening. The lookups' answers are the same with or without it. Call after every
// symbolizer_add_debug_dir. 0, or -errno (no thread: lookups open modules as before).
int symbolizer_prefetch(symbolizer_t* sym, int module);
// That thread started now, idle until a module is queued: a thread takes its creator's
// priority, and a caller about to queue modules from a thread of lower priority (heaplens run's
// reader, niced) has it made at its own. 0, or -errno.
int symbolizer_start(symbolizer_t* sym);

// Symbolize rel_addr, an address relative to the module's load bias (ip - bias) that already
// points into the call instruction (return address - 1). Writes up to max frames, innermost
// first: inlined frames precede the function they were inlined into. Always writes at least one
// frame when max >= 1 (function NULL when nothing is known). Returns the number of frames.
// A module whose file is missing or whose build-id differs yields frames with function NULL
// (the caller prints module+offset).
int symbolizer_lookup(symbolizer_t* sym, int module, uint64_t rel_addr, sym_frame_t* frames,
                      int max);

// The module's path as registered (for "module+0xoff" fallbacks).
const char* symbolizer_module_path(const symbolizer_t* sym, int module);

#endif
