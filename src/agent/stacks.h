// SPDX-License-Identifier: MIT
// stacks.h - backtraces interned once into a prefix tree of (return address, caller) nodes
// (stacks.c); a stack is named by the id of its innermost node.
#ifndef HL_STACKS_H
#define HL_STACKS_H

#include <stdint.h>

#define HL_MAX_DEPTH 256 // frames a stack may have, whatever HEAPLENS_DEPTH asks

// Intern ips (innermost first); 0 = no stack. node_of (may be NULL) receives, for each k, the
// node of the stack made of frames k..n-1 (the callers' stacks), so they can be reused; 0 where
// it is not known (a stack seen before: its callers' nodes are not looked up).
uint32_t stack_intern(const uintptr_t* ips, int n, uint32_t* node_of);
// The stack made of `inner` (k frames, innermost first) called from the stack `base`:
// interning only what changed. node_of as for stack_intern (entries 0..k-1).
uint32_t stack_extend(uint32_t base, const uintptr_t* inner, int k, uint32_t* node_of);
// A release stack says where a block was freed, in a report of a double free or a write after
// free: its innermost frames say it, as many as memcheck keeps (its --num-callers default). A
// release after a release is walked this deep; one right after an allocation is taken at full
// depth (so it shares the nodes of that allocation, one new node instead of a window of new
// ones) and cut to these frames when a report names it. Each frame more is a window more to
// intern when frees follow frees down a recursion: 16 frames cost a teardown of 2M distinct
// paths (bench tree --recursive) a third more time than 12.
#define HL_RELEASE_DEPTH 12
// The stack of id's innermost k frames (id itself when it has no more); 0 when none can be made.
uint32_t stack_innermost(uint32_t id, int k);
// A prefix-tree node: its return address and its caller's node (0 at the outermost frame).
int stack_node(uint32_t id, uintptr_t* ip, uint32_t* parent); // 0, or -1 for no such node
void stacks_init(void);
// At each writer pass (under the writer lock): makes present the nodes node making will need
// next, so the program's threads do not wait for the kernel to clear their pages.
void stacks_prepare(void);
void stacks_lock(void); // around fork: no node is being made
void stacks_unlock(void);

#endif
