// SPDX-License-Identifier: MIT
// gsites.h - --guard-sites (gsites.c): only allocations whose stack passes through chosen
// functions are candidates for a guard page. The functions come resolved, as address ranges of
// each module (src/common/checkopts.h), made absolute when the module is loaded.
#ifndef HL_GSITES_H
#define HL_GSITES_H

#include <stddef.h>
#include <stdint.h>

extern int hl_gsites_on; // guard_sites was given (even if nothing matched)

// The setting's value (unescaped, len bytes): kept in the agent's memory. 0, or -1 (malformed:
// the caller says so and the setting is off).
int gsites_set(const char* value, size_t len);
// A module appeared (modules.c) or went away: its ranges in or out of the table.
void gsites_module_loaded(uintptr_t bias, uintptr_t first_vaddr, const uint8_t* build_id,
                          size_t build_id_len, const char* path);
void gsites_module_gone(uintptr_t bias, uintptr_t first_vaddr);
// Does the interned stack pass through one of the functions? No lock, no allocation.
int gsites_match(uint32_t stack);

#endif
