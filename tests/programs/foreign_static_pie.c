// foreign_static_pie: foreign_static linked as a static PIE (-static-pie): a dynamic section
// but no program interpreter, so no agent can be preloaded into it either.
#include "foreign_static.c"
