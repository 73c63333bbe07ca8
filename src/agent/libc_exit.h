// SPDX-License-Identifier: MIT
// libc_exit.h - what glibc releases at exit when asked to (__libc_freeres, which memcheck runs
// before its leak check). Where the program ends through exit() with nothing else of it left
// running, glibc and libstdc++ are asked, as memcheck asks them (libc_exit_release_own).
// Elsewhere the two parts every program meets are taken as released among the blocks the exit
// scan would otherwise judge (the stand-ins below). The TLS vector (DTV) of each thread whose
// stack glibc keeps cached for reuse, and the dynamic TLS blocks it holds: a program that joined
// a thread has one, which memcheck never reports and the scan would call possibly lost (the
// thread control block points inside it). And the buffers glibc allocated for stdio's streams
// still open: a program that printed to stdout has one, which memcheck reports freed and the
// scan would call still reachable. Found through the layout glibc publishes for debuggers (the
// _thread_db_* descriptors libthread_db reads), its list of cached stacks (libc_exit.c says
// where) and stdio's list of streams (_IO_list_all; FILE's fields are public).
#ifndef HL_LIBC_EXIT_H
#define HL_LIBC_EXIT_H

#include <stddef.h>
#include <stdint.h>

#include "live.h"

// At the end of exit(), after every handler and destructor of the program's, with no other
// thread or clone(CLONE_VM) child of it alive: libstdc++'s __gnu_cxx::__freeres (its exception
// pool: every C++ program has one) then glibc's __libc_freeres (locales, NSS, iconv, the
// loader's lists, stdio's buffers, the cached threads' TLS, ...), each where it is loaded and
// asked for; their frees reach the agent as the program's would. Nothing else: on the way out
// of _exit, _Exit, quick_exit or exit_group glibc flushes no stream, which __libc_freeres would
// (the program's output would change), and whatever else runs in this memory could still use
// what they free (the pool leaves its free list pointing into the block it frees).
void libc_exit_release_own(int cxx, int libc);

// Before the exit scan, where the loader's lock may be taken (dlsym): what glibc says of its
// layout, looked up once; that of its threads only when there were threads.
void libc_exit_init(int threads);

// May [lo, hi) be read? (The caller's mappings.)
typedef int (*libc_readable_fn)(uintptr_t lo, uintptr_t hi, void* arg);
// Takes the live block b (its record as the live table has it) as released; 1 when it did.
typedef int (*libc_release_fn)(const hl_block_t* b, void* arg);

// At the exit scan, every other thread stopped: for each stack glibc keeps cached, calls
// release(block, arg) for the live blocks __libc_freeres would free there (release says whether
// it took one). The cached stacks are read from glibc's list, or where that cannot be read,
// are those of tps (thread pointers of threads the agent saw end, in any order, repeated, or in
// use again since) that are not in use. Does nothing where glibc's layout is not known or its
// lists of stacks in use do not read whole. Returns the blocks given.
// The same, for the buffers glibc allocated for stdio's open streams: at exit it leaves them to
// __libc_freeres (a program that printed through stdout has one).
size_t libc_exit_stdio(libc_readable_fn readable, void* readable_arg, libc_release_fn release,
                       void* release_arg);

size_t libc_exit_cached_tls(const uintptr_t* tps, size_t ntps, libc_readable_fn readable,
                            void* readable_arg, libc_release_fn release, void* release_arg);

#endif
