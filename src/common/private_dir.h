// SPDX-License-Identifier: MIT
// private_dir.h - what makes a directory private to a user: the rule heaplens run's own
// directory (src/cli/rundir.c) is made to, and that the agent checks before it uses anything in
// it (src/agent/session.c). A directory of the user's that nobody else may enter holds no name
// another user put there: no planted link, no file to append to.
#ifndef HL_PRIVATE_DIR_H
#define HL_PRIVATE_DIR_H

#include <sys/stat.h>
#include <sys/types.h>

// No group or other permission at all (0700 and less).
#define HL_PRIVATE_DIR_OTHERS_MASK 077

static inline int hl_is_private_dir(const struct stat* st, uid_t uid) {
    return S_ISDIR(st->st_mode) && st->st_uid == uid &&
           (st->st_mode & HL_PRIVATE_DIR_OTHERS_MASK) == 0;
}

#endif
