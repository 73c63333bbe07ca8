// SPDX-License-Identifier: MIT
// symcache.h - what the symbolizer answered for a module, kept on disk (symcache.c), so that a
// later report of a trace through the same module answers without opening its debug
// information: inflating a distribution's compressed DWARF (libc's: 40 ms) or reading a large
// program's is most of what a report of a short run costs, and it is the same every time.
//
// A module's file is named by what its answers depend on: its build-id, the file the trace names
// (device, inode, size, modification and change times: a stripped copy has the same build-id),
// the separate debug files its build-id names in each debug directory (present or not, and
// which) and the code that answered (symcache_producer); the file holds its name, so a file
// copied or renamed is not taken for another. Only the answers of a module whose DWARF was read
// are kept (symbols.c), and DWARF is what its build-id says it is, wherever it was found: a
// module without debug information, or whose DWARF could not be read then (no memory, no
// descriptors), is looked up again next time, and so sees debug files installed since. (A dwz
// file that a debug file refers to, installed after the answers were kept, is not seen.)
//
// The directory: HEAPLENS_SYMBOL_CACHE (an absolute path, or "off"), else
// $XDG_CACHE_HOME/heaplens/symbols, else $HOME/.cache/heaplens/symbols (made below a
// $XDG_CACHE_HOME or $HOME that exists, 0700). It is opened once, without following a link, and
// used through that descriptor only while it is the user's own and private (private_dir.h); its
// files are 0600, read and replaced without following links, and a file that is not exactly what
// symcache.c writes is passed over (its answers are looked up again and the file written anew).
#ifndef HL_SYMCACHE_H
#define HL_SYMCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "symbols.h"

#define SYMCACHE_FILE_MAX ((size_t)64 << 20) // bytes: a larger one is neither read nor written
#define SYMCACHE_STRING_MAX 4096             // a function or file name longer is not kept
#define SYMCACHE_FRAMES_MAX 64               // frames of one address (symbols.c's MAX_CHAIN)

// The directory as the environment says, made if missing, opened: a descriptor (close-on-exec),
// or -1 when caching is off or the directory is not private to this user.
int symcache_open_default(void);
// The directory at path (absolute), opened and checked as above: a descriptor, or -1.
int symcache_open(const char* path);

// The file name (no directory) for a module: file is the module's file as opened (with any
// sysroot), debug_dirs the absolute directories searched for DIR/.build-id/xx/rest.debug, in
// order. 0, or -1 when the module cannot be cached (no build-id, file not a regular file, name
// too long for out).
// producer is symcache_producer's: the code that answered is part of the name too.
int symcache_name(const char* file, const uint8_t* build_id, size_t build_id_len,
                  const char* const* debug_dirs, int ndebug_dirs, uint64_t producer, char* out,
                  size_t outlen);

// The identity of code, from an address in each of its objects (the analyzer and libdw, for a
// file's name; the C++ demangler, for its names): device, inode, size and times of each
// object's file, so an upgrade of any of them answers afresh.
uint64_t symcache_producer(const void* const* code, int n);

// Is there a file name in the directory (not following a link)? 1 or 0.
int symcache_exists(int dir, const char* name);

// One answer: an address and its frames, innermost first.
typedef struct symcache_entry_s {
    uint64_t addr;
    const sym_frame_t* frames;
    int nframes;
} symcache_entry_t;

// Calls each(arg, entry) for every answer in the directory's file name. 0 when the file was read
// whole and none of its names was demangled, 1 when some were, by the demangler demangler_now()
// names (each was called for every entry); -1 when there is none, it is not valid, or its names
// were demangled by another (NULL: none at hand) (each was not called). demangler_now is called
// only for a file with demangled names.
int symcache_load(int dir, const char* name, uint64_t (*demangler_now)(void),
                  int (*each)(void* arg, const symcache_entry_t* e), void* arg);

// Writes the file name anew from next(arg, &entry) (1: an entry, 0: no more), replacing the old
// one at once (a reader sees the old file or the new one); demangler names what demangled its
// names (0: none was demangled). 0, or -1 (nothing is left behind).
int symcache_store(int dir, const char* name, uint64_t demangler,
                   int (*next)(void* arg, symcache_entry_t* e), void* arg);

#endif
