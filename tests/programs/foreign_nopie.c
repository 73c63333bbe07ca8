// foreign_nopie: foreign_own_malloc built at a fixed address (-no-pie) and linked against
// libforeign_lazy.so, whose jump slots are bound on first call and lie outside RELRO.
#include "foreign_own_malloc.c"
