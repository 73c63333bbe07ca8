// SPDX-License-Identifier: MIT
// real.h - the functions underneath the hooks, and the bootstrap arena for the calls made
// while resolving them (real.c).
#ifndef HL_REAL_H
#define HL_REAL_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE // off64_t
#endif

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct hl_real_s {
    void* (*malloc)(size_t);
    void (*free)(void*);
    void* (*calloc)(size_t, size_t);
    void* (*realloc)(void*, size_t);
    int (*posix_memalign)(void**, size_t, size_t);
    void* (*aligned_alloc)(size_t, size_t);
    void* (*memalign)(size_t, size_t);
    void* (*valloc)(size_t);
    void* (*pvalloc)(size_t);
    size_t (*malloc_usable_size)(void*);
    void* (*mmap)(void*, size_t, int, int, int, off_t);
    void* (*mmap64)(void*, size_t, int, int, int, off64_t); // off_t's width on 64-bit only
    int (*munmap)(void*, size_t);
    void* (*mremap)(void*, size_t, size_t, int, ...);
    void* (*dlopen)(const char*, int);
    int (*dlclose)(void*);
    void (*exit_)(int);
    void (*Exit)(int);
    int (*execve)(const char*, char* const[], char* const[]);
    int (*execv)(const char*, char* const[]);
    int (*execvp)(const char*, char* const[]);
    int (*execvpe)(const char*, char* const[], char* const[]);
    int (*fexecve)(int, char* const[], char* const[]);
    pid_t (*fork)(void);
    int (*sigaction)(int, const struct sigaction*, struct sigaction*);
    void (*(*signal)(int, void (*)(int)))(int);
    // glibc's own single-threaded flag (the one its fast paths read). An executable that names
    // __libc_single_threaded has a copy of its own, which is what that name means in here.
    char* libc_single_threaded;
    // The allocator underneath is glibc's: it keeps a size_t before each chunk and hands out
    // chunks of multiples of 16 bytes, each 16-aligned (layout.h sizes header blocks to that).
    int is_glibc;
} hl_real_t;

extern hl_real_t hl_real;
extern _Atomic int hl_real_ready; // 0 none, 1 resolving, 2 resolved
void real_resolve(void);
void* bootstrap_alloc(size_t size, size_t align);
int bootstrap_owns(const void* p);
size_t bootstrap_room(const void* p); // bytes from p to the arena's end in use
// An allocator defined ahead of the agent (the executable's own malloc): real_resolve makes it
// the one underneath and routes the calls bound to it to the agent's hooks;
// real_route_new_modules routes those of modules loaded since (after dlopen);
// real_foreign_report says, once tracing starts, what is seen and what is not.
int real_is_foreign(void); // some calls to the allocator (inside its module) go unseen
void real_foreign_report(void);
void real_route_new_modules(void);
void real_routes_install(void); // the routes again, after real_routes_remove (attach again)
void real_routes_remove(void);  // every routed slot back as the loader bound it (detach)
int real_heap_coverage(void); // HL_INFO_HEAP_* flags of INFO: how much of the heap is seen

#endif
