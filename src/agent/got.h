// SPDX-License-Identifier: MIT
// got.h - rerouting a process's calls through its relocation slots. A module calls a function
// of another module through a slot the loader filled in: a PLT jump slot (bound at load or on
// the first call), a GOT entry (calls compiled without a PLT, and taken addresses) or a pointer
// in data. Pointing the slots that name a symbol at another address reroutes every call that
// module makes through them, with no change to code. The agent routes an allocator defined
// ahead of it this way (real.c); attaching to a running program routes its calls the same way.
//
// The contract:
//  - got_routes_install: in every loaded module but the caller's own, each slot that binds one
//    of the routes' names and holds the route's `from` (what the name is bound to), or is a
//    jump slot not bound yet, is pointed at the route's `to`.
//  - got_routes_refresh: the same for the modules loaded since (call it after dlopen).
//  - got_routes_remove: every slot holding a route's `to` is pointed back at its `from`.
// A slot on a read-only page (RELRO, or a text relocation) is written with the page made
// writable for the write and given back its protection after it; PIE and fixed-address modules,
// modules with or without a PLT, REL and RELA tables are all handled. One set of routes at a
// time. The calls are serialised by the loader's own lock (they run inside dl_iterate_phdr), and
// may run while other threads call through the slots: each slot is one aligned word, written
// whole. Nothing here allocates or uses stdio; it depends on no other part of the agent.
#ifndef HL_GOT_H
#define HL_GOT_H

#include <stddef.h>

typedef struct got_route_s {
    const char* name; // the symbol, as dynamic symbol tables name it (without a version)
    void* from;       // where the slots point without the route (the definition in use)
    void* to;         // where they point with it
    size_t slots;     // slots holding `to` after the last install or refresh (out)
    size_t failed;    // slots left as they were: their page could not be made writable (out)
} got_route_t;

// Installs the routes (n of them, kept by reference until got_routes_remove); `self` is any
// address inside the caller's own module, whose slots are never changed. Returns the number of
// slots that now hold a route's `to`, or -1 when routes are installed already.
long got_routes_install(got_route_t* routes, size_t n, const void* self);

// Routes the slots of modules loaded since the last install or refresh. Cheap when no module
// was loaded; does nothing when no routes are installed.
void got_routes_refresh(void);

// Points every routed slot back at its `from`; the routes are forgotten.
void got_routes_remove(void);

// The address of `name` as defined by the module holding `in_module` (any address inside it),
// from that module's own dynamic symbol table; NULL when it defines no such symbol. Unlike
// dlsym, it finds the module's own definition where the name is bound to another module's, and
// it never allocates (so it may run inside an allocator's first call).
void* got_own_symbol(const void* in_module, const char* name);

#endif
