/* SPDX-License-Identifier: MIT
 * heaplens.h - the program's own view of its heap while heaplens traces it.
 *
 * Link with libheaplens-api (pkg-config --cflags --libs heaplens). Every function is a cheap
 * no-op returning -1 ("not traced"; heaplens_is_traced returns 0) when the program runs without
 * heaplens, and the real thing under `heaplens run` or once the agent is loaded into the
 * process later: the library looks the agent up when it is called, not when it is loaded. The
 * functions may be called from static constructors and destructors, from any thread, and in a
 * forked child (which has its own trace). They return 0 on success, -1 otherwise (errno says
 * why: ENOSYS not traced, EINVAL a bad argument, ESTALE a mark too old, ENOENT no such block).
 */
#ifndef HEAPLENS_H
#define HEAPLENS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEAPLENS_API_VERSION 1

/* The block's address is all these functions take: its contents need not be initialised. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define HEAPLENS_ADDRESS_ONLY(i) __attribute__((access(none, i)))
#else
#define HEAPLENS_ADDRESS_ONLY(i)
#endif

/* Report formats: text as heaplens's own report, or JSON shaped like `heaplens report --json`. */
#define HEAPLENS_TEXT 0
#define HEAPLENS_JSON 1

/* Is this process traced by heaplens? 1 or 0. */
int heaplens_is_traced(void);

/* This thread's allocations are not recorded between pause and resume (nor reported: they are
 * the program's to account for); releases are. The trace says that a pause happened. Pauses
 * nest. */
int heaplens_pause(void);
int heaplens_resume(void);

/* A mark: from now on, report_since(mark) shows what is still live of what was allocated
 * after it. -1 when not traced. A mark stays valid for at least 16384 later marks (and leak
 * checks) of the process; older ones fail with ESTALE. */
typedef int64_t heaplens_mark_t;
heaplens_mark_t heaplens_mark(void);
/* What is still live of the blocks allocated since `mark`, by allocation stack, the most
 * bytes first, written to fd by the agent (no allocation in the program). */
int heaplens_report_since(heaplens_mark_t mark, int fd, int format);
/* Every live block, by allocation stack. */
int heaplens_report(int fd, int format);

/* The reachability scan of the exit, now: counts by memcheck's kinds. leak_check_new counts
 * only the blocks allocated since the last check. */
struct heaplens_amount {
    size_t bytes;
    size_t blocks;
};
struct heaplens_leak_counts {
    struct heaplens_amount definitely_lost;
    struct heaplens_amount indirectly_lost;
    struct heaplens_amount possibly_lost;
    struct heaplens_amount still_reachable;
};
int heaplens_leak_check(struct heaplens_leak_counts* counts);
int heaplens_leak_check_new(struct heaplens_leak_counts* counts);

/* The live block at ptr is never reported as a leak. ENOENT when no block starts there. */
int heaplens_ignore(const void* ptr) HEAPLENS_ADDRESS_ONLY(1);

/* callback(ptr, event, where, arg) runs on the releasing thread just before the block at ptr is
 * released (HEAPLENS_FREED) or resized (HEAPLENS_RESIZED), while its contents are still there;
 * `where` is the program's instruction that released it. The watch ends with the block. A
 * callback of NULL removes the watch. */
#define HEAPLENS_FREED 1
#define HEAPLENS_RESIZED 2
typedef void (*heaplens_watch_fn)(void* ptr, int event, const void* where, void* arg);
int heaplens_watch(const void* ptr, heaplens_watch_fn callback, void* arg)
    HEAPLENS_ADDRESS_ONLY(1);

/* This thread's next allocations carry (type, location) in the trace, until untag; reports
 * group them by tag. */
int heaplens_tag(unsigned type, unsigned location);
int heaplens_untag(void);

/* callback(which, bytes, arg) runs on the program's thread that crossed a threshold, outside
 * the agent: HEAPLENS_BLOCK when one allocation is block_bytes or more (bytes: its size),
 * HEAPLENS_DELTA when the heap grew by delta_bytes or more within delta_ns (bytes: the growth;
 * the window starts again then). 0 turns a threshold off; a NULL callback turns both off. */
#define HEAPLENS_BLOCK 1
#define HEAPLENS_DELTA 2
typedef void (*heaplens_threshold_fn)(int which, size_t bytes, void* arg);
int heaplens_set_thresholds(size_t block_bytes, size_t delta_bytes, uint64_t delta_ns,
                            heaplens_threshold_fn callback, void* arg);

/* The traced heap now (what the trace says so far): the whole process, and this thread. */
struct heaplens_stats {
    size_t live_bytes, live_blocks;
    size_t peak_bytes, peak_blocks;
    int64_t peak_time_ns; /* since the trace began, as `heaplens report` says it */
    uint64_t allocations, frees;
    uint64_t bytes_allocated;
    uint64_t thread_allocations, thread_frees; /* the calling thread's */
    uint64_t thread_bytes_allocated, thread_bytes_freed;
};
int heaplens_stats(struct heaplens_stats* stats);

#ifdef __cplusplus
}
#endif
#endif
