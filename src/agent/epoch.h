// SPDX-License-Identifier: MIT
// epoch.h - block epochs (epoch.c): every live block records the epoch it was allocated in, and
// a mark (heaplens_mark, a leak check) advances the epoch, so "what is still live from after
// this mark" is a comparison, with no list of blocks kept per mark.
//
// A block keeps only the low HL_EPOCH_BITS of its epoch (the live table has no more room). An
// epoch is read back from them relative to the current one, which is exact while no live block
// is more than HL_EPOCH_WINDOW epochs old. Every HL_EPOCH_REBASE advances a rebase makes that
// so: each older live block is relabelled as allocated at the floor (the current epoch less
// HL_EPOCH_REBASE), and marks at or before the floor expire (epoch_is_valid says so; the API
// then returns -1 with errno ESTALE). A mark stays valid for at least HL_EPOCH_REBASE advances.
// A reader of labels that must not see a rebase half done holds epoch_lock (a slot of the
// direct map keeps its label in two words); never while the world is stopped.
#ifndef HL_EPOCH_H
#define HL_EPOCH_H

#include <stdatomic.h>
#include <stdint.h>

#include "../common/compiler.h"

#define HL_EPOCH_BITS 16 // what the live table's free bits hold (live.c: d0 52..61, d1 56..61)
#define HL_EPOCH_MASK ((1u << HL_EPOCH_BITS) - 1)
// Labels up to this old are the past; older ones are blocks recorded after the reader
// looked at the current epoch (a concurrent allocation), read as the current epoch.
#define HL_EPOCH_WINDOW (1u << (HL_EPOCH_BITS - 1))
#define HL_EPOCH_REBASE (HL_EPOCH_WINDOW / 2) // the oldest live block stays < HL_EPOCH_WINDOW old

extern _Atomic uint32_t hl_epoch; // the current epoch; one relaxed load per allocation

HL_INLINE uint32_t epoch_now(void) {
    return atomic_load_explicit(&hl_epoch, memory_order_relaxed);
}
// A new epoch (the mark: blocks allocated from now on carry it). Rebases when due; takes a
// spinlock, never from the hot path.
uint32_t epoch_advance(void);
uint32_t epoch_floor(void); // marks at or before it have expired
// Is `mark` an epoch still told apart from earlier ones (after the floor, not in the future)?
// In 32 bits, a mark 2^31 advances old reads as recent again: a mark that may be kept that
// long is kept as its 64-bit count (epoch_now64, epoch_is_valid64), which never wraps.
int epoch_is_valid(uint32_t mark);
uint64_t epoch_now64(void);      // the advances so far; its low 32 bits are epoch_now()
uint64_t epoch_advance64(void);  // epoch_advance, as its 64-bit count
int epoch_is_valid64(uint64_t mark);

// The epoch of a block whose stored label is `label`, with `now` the current epoch.
static inline uint32_t epoch_expand_at(uint32_t now, uint32_t label) {
    uint32_t age = (now - label) & HL_EPOCH_MASK;
    return age < HL_EPOCH_WINDOW ? now - age : now;
}
static inline uint32_t epoch_expand(uint32_t label) {
    return epoch_expand_at(epoch_now(), label);
}
// The label a rebase leaves on a block labelled `label`: its own, or the floor's when older.
static inline uint32_t epoch_clamp_at(uint32_t now, uint32_t floor, uint32_t label) {
    uint32_t e = epoch_expand_at(now, label);
    return (int32_t)(e - floor) < 0 ? (floor & HL_EPOCH_MASK) : (label & HL_EPOCH_MASK);
}
// Was a block of epoch e allocated at or after `since`? (modular: epochs wrap at 2^32)
static inline int epoch_is_since(uint32_t e, uint32_t since) {
    return (int32_t)(e - since) >= 0;
}

void epoch_lock(void); // the advance lock: no rebase runs while it is held
void epoch_unlock(void);
void epoch_reset_after_fork(void);

#endif
