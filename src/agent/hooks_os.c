// SPDX-License-Identifier: MIT
// hooks_os.c - mappings (mmap, munmap, mremap), the module list (dlopen, dlclose), the ways
// an image ends without running destructors (_exit, _Exit, exec*) and children made by clone.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "agent.h"
#include "dlsearch.h"
#include "log.h"
#include "os.h"
#include "real.h"
#include "record.h"
#include "thread.h"
#include "unwind.h"
#include "writer.h"

#define TRACING()                                                                                  \
    (atomic_load_explicit(&hl_phase, memory_order_relaxed) == HL_ON && !thread_self()->busy)

static HL_COLD void resolve_now(void) {
    if (atomic_load(&hl_real_ready) != 2 && !thread_self()->busy) {
        thread_self()->busy = 1;
        real_resolve();
        thread_self()->busy = 0;
    }
}

// Before the real functions are known: the system call itself (on 32-bit systems mmap2, whose
// offset is in pages; SYS_mmap there takes a pointer to its arguments).
static void* map_early(void* addr, size_t len, int prot, int flags, int fd, off64_t off) {
#ifdef SYS_mmap2
    return (void*)syscall(SYS_mmap2, addr, len, prot, flags, fd, (long)(off >> 12));
#else
    return (void*)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
#endif
}

static void* after_map(void* p, size_t len, int prot, int flags) {
    if (p != MAP_FAILED && atomic_load_explicit(&hl_phase, memory_order_relaxed) == HL_ON) {
        hl_thread_t* t = thread_self();
        if (t->busy) {
            os_note_allocator_map((uintptr_t)p, (uintptr_t)p + len);
        } else {
            t->busy = 1;
            record_mmap(t, p, len, prot, flags);
            t->busy = 0;
        }
    }
    return p;
}

HL_EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (hl_unlikely(atomic_load(&hl_real_ready) != 2)) {
        resolve_now();
        if (atomic_load(&hl_real_ready) != 2)
            return map_early(addr, len, prot, flags, fd, off);
    }
    return after_map(hl_real.mmap(addr, len, prot, flags, fd, off), len, prot, flags);
}

HL_EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off64_t off) {
    if (hl_unlikely(atomic_load(&hl_real_ready) != 2)) {
        resolve_now();
        if (atomic_load(&hl_real_ready) != 2)
            return map_early(addr, len, prot, flags, fd, off);
    }
    return after_map(hl_real.mmap64(addr, len, prot, flags, fd, off), len, prot, flags);
}

HL_EXPORT int munmap(void* addr, size_t len) {
    if (hl_unlikely(atomic_load(&hl_real_ready) != 2)) {
        resolve_now();
        if (atomic_load(&hl_real_ready) != 2)
            return (int)syscall(SYS_munmap, addr, len);
    }
    if (atomic_load_explicit(&hl_phase, memory_order_relaxed) == HL_ON) {
        // Recorded first: once unmapped, the range may be handed out again at once.
        hl_thread_t* t = thread_self();
        if (t->busy) {
            os_note_allocator_unmap((uintptr_t)addr, (uintptr_t)addr + len);
        } else {
            t->busy = 1;
            record_munmap(t, addr, len);
            t->busy = 0;
        }
    }
    return hl_real.munmap(addr, len);
}

HL_EXPORT void* mremap(void* old, size_t old_len, size_t new_len, int flags, ...) {
    void* want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void*);
        va_end(ap);
    }
    resolve_now();
    void* p = hl_real.mremap ? hl_real.mremap(old, old_len, new_len, flags, want)
                             : (void*)syscall(SYS_mremap, old, old_len, new_len, flags, want);
    if (p != MAP_FAILED && atomic_load_explicit(&hl_phase, memory_order_relaxed) == HL_ON) {
        hl_thread_t* t = thread_self();
        if (t->busy) {
            os_note_allocator_unmap((uintptr_t)old, (uintptr_t)old + old_len);
            os_note_allocator_map((uintptr_t)p, (uintptr_t)p + new_len);
        } else {
            t->busy = 1;
            record_munmap(t, old, old_len);
            record_mmap(t, p, new_len, PROT_READ | PROT_WRITE, MAP_PRIVATE);
            t->busy = 0;
        }
    }
    return p;
}

// A bare name the loader did not find: it searched the agent's run path, the agent being the
// caller it sees, not the program's (dlsearch.c). Out of line: its path buffer stays off the
// stack of every other dlopen.
static HL_NOINLINE HL_COLD void* dlopen_as_caller(const void* caller, const char* file, int mode) {
    char path[4096];
    if (dlsearch_caller_path(caller, file, path, sizeof path) != 0)
        return NULL;
    void* h = hl_real.dlopen(path, mode);
    if (!h)
        hl_real.dlopen(file, mode); // dlerror() says what the program's own call would
    return h;
}

HL_EXPORT void* dlopen(const char* file, int mode) {
    resolve_now();
    void* h = hl_real.dlopen(file, mode);
    if (hl_unlikely(!h) && file && !strchr(file, '/'))
        h = dlopen_as_caller(__builtin_return_address(0), file, mode);
    if (h)
        real_route_new_modules(); // a foreign allocator's calls from the new modules too
    unwind_code_unloaded(); // the loader unloads objects of its own too (a failed load's)
    if (h && TRACING()) {
        thread_self()->busy = 1;
        writer_modules_changed();
        thread_self()->busy = 0;
    }
    return h;
}

HL_EXPORT int dlclose(void* h) {
    resolve_now();
    if (TRACING()) {
        // Events already in the ring may name code in this object: let the writer read the
        // module list while it is still there, then again after.
        writer_flush_sync();
    }
    int rc = hl_real.dlclose(h);
    if (rc == 0)
        unwind_code_unloaded(); // before the next capture on this thread (others see it then)
    if (TRACING()) {
        thread_self()->busy = 1;
        writer_modules_changed();
        thread_self()->busy = 0;
    }
    return rc;
}

HL_EXPORT void _exit(int status) {
    agent_finish(HL_END_EXIT, status & 0xff);
    resolve_now();
    if (hl_real.exit_)
        hl_real.exit_(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

HL_EXPORT void _Exit(int status) {
    agent_finish(HL_END_EXIT, status & 0xff);
    resolve_now();
    if (hl_real.Exit)
        hl_real.Exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

// syscall(SYS_exit_group, status) ends the process with no handler and no destructor, as
// _exit does, but never calls it: the C library's syscall() is taken here, so that the trace
// ends and the scan runs. Every other call goes straight to the kernel, as glibc's does
// (errno from a result in [-4095, -1]). A raw system call instruction (Go's runtime) passes
// nothing the agent can see.
#if defined(__x86_64__) || defined(__aarch64__)
#define HL_SYSCALL_ERR_MAX 4095 // the kernel returns -errno, and errno values stay below this
static long raw_syscall6(long nr, long a, long b, long c, long d, long e, long f) {
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return rc;
#else
    register long x8 __asm__("x8") = nr, x0 __asm__("x0") = a, x1 __asm__("x1") = b,
                                      x2 __asm__("x2") = c, x3 __asm__("x3") = d,
                                      x4 __asm__("x4") = e, x5 __asm__("x5") = f;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
#endif
}

HL_EXPORT long syscall(long nr, ...) {
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_exit_group)
        agent_finish(HL_END_EXIT, (int)a[0] & 0xff);
    long rc = raw_syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (rc < 0 && rc >= -HL_SYSCALL_ERR_MAX) {
        errno = (int)-rc;
        return -1;
    }
    return rc;
}
#endif

// quick_exit runs the at_quick_exit handlers, then glibc's own _exit by an internal call the
// interposed _exit never sees. The agent's handler, registered as the agent loads (before the
// program can register any), runs after every handler of the program's (they run last in,
// first out), so their frees count; quick_exit itself only notes the status for it.
static void (*real_quick_exit)(int);
static _Atomic int quick_exit_status;

static void finish_at_quick_exit(void) {
    agent_finish(HL_END_EXIT, atomic_load(&quick_exit_status) & 0xff);
}

__attribute__((constructor)) static void register_quick_exit(void) {
    at_quick_exit(finish_at_quick_exit);
}

HL_EXPORT void quick_exit(int status) {
    atomic_store(&quick_exit_status, status);
    if (!real_quick_exit) {
        int was_busy = thread_self()->busy;
        thread_self()->busy = 1;
        *(void**)&real_quick_exit = dlsym(RTLD_NEXT, "quick_exit");
        thread_self()->busy = was_busy;
    }
    if (real_quick_exit)
        real_quick_exit(status);
    finish_at_quick_exit(); // no libc quick_exit: end as _exit would
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

// exec replaces the image without destructors: everything recorded so far is written first.
// If exec fails the program goes on, and so does its trace. The execl family calls these
// directly, not by their exported names: attached (the agent loaded after the C library), those
// names would bind to the C library's and the trace would not end.
static int exec_v(const char* path, char* const argv[]) {
    resolve_now();
    agent_before_exec(path);
    return hl_real.execv(path, argv);
}

static int exec_vp(const char* file, char* const argv[]) {
    resolve_now();
    agent_before_exec(file);
    return hl_real.execvp(file, argv);
}

static int exec_ve(const char* path, char* const argv[], char* const envp[]) {
    resolve_now();
    agent_before_exec(path);
    return hl_real.execve(path, argv, envp);
}

HL_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
    return exec_ve(path, argv, envp);
}

HL_EXPORT int execv(const char* path, char* const argv[]) {
    return exec_v(path, argv);
}

HL_EXPORT int execvp(const char* file, char* const argv[]) {
    return exec_vp(file, argv);
}

HL_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
    resolve_now();
    agent_before_exec(file);
    return hl_real.execvpe(file, argv, envp);
}

HL_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
    resolve_now();
    agent_before_exec("(fexecve)");
    return hl_real.fexecve(fd, argv, envp);
}

// execl* take their arguments as a list; they become execv* calls.
#define HL_MAX_EXEC_ARGS 4096
static int collect_args(const char* arg0, va_list ap, char** argv, char*** envp_out) {
    int n = 0;
    argv[n++] = (char*)arg0;
    while (n < HL_MAX_EXEC_ARGS - 1) {
        char* a = va_arg(ap, char*);
        argv[n++] = a;
        if (!a)
            break;
    }
    argv[HL_MAX_EXEC_ARGS - 1] = NULL;
    if (envp_out)
        *envp_out = va_arg(ap, char**);
    return n;
}

HL_EXPORT int execl(const char* path, const char* arg0, ...) {
    char* argv[HL_MAX_EXEC_ARGS];
    va_list ap;
    va_start(ap, arg0);
    collect_args(arg0, ap, argv, NULL);
    va_end(ap);
    return exec_v(path, argv);
}

HL_EXPORT int execlp(const char* file, const char* arg0, ...) {
    char* argv[HL_MAX_EXEC_ARGS];
    va_list ap;
    va_start(ap, arg0);
    collect_args(arg0, ap, argv, NULL);
    va_end(ap);
    return exec_vp(file, argv);
}

HL_EXPORT int execle(const char* path, const char* arg0, ...) {
    char* argv[HL_MAX_EXEC_ARGS];
    char** envp;
    va_list ap;
    va_start(ap, arg0);
    collect_args(arg0, ap, argv, &envp);
    va_end(ap);
    return exec_ve(path, argv, envp);
}

// ---------------------------------------------------------------------------------------------
// clone: a child made without fork or pthread_create. Without CLONE_VM it is a process of its
// own, as after fork: its own trace. With CLONE_VM it runs in this address space, as a thread:
// a state, a ring and a thread index of its own (thread.c), never its parent's. glibc's
// pthread_create and posix_spawn make theirs through an internal clone, not this name. vfork
// cannot be wrapped (its child returns into the wrapper's frame, which the parent then returns
// through); its child shares every state of its parent until exec or _exit, which is why those
// paths act only in the process the trace belongs to (agent_owns_process).
// ---------------------------------------------------------------------------------------------
typedef int (*clone_fn_t)(void*);
static int (*real_clone)(clone_fn_t, void*, int, void*, ...);

typedef struct fork_start_s {
    clone_fn_t fn;
    void* arg;
} fork_start_t;

// The child without CLONE_VM: its memory is a copy of the parent's, taken with the agent's locks
// held (agent_fork_prepare), so it starts from a consistent state, as a fork child does.
static int start_forked(void* p) {
    fork_start_t start = *(fork_start_t*)p; // in the parent's frame, as copied with the memory
    agent_fork_child();
    int rc = start.fn(start.arg);
    // glibc's clone ends the child with a bare exit system call, no exit handlers: its status
    // is fn's value, as it is for _exit. That ends the process only when this is its last task;
    // the agent's writer, parked once the trace is finished, would keep it alive for ever (and
    // its parent waiting), so when no other task of the program lives the process ends here.
    int writer = writer_thread_id();
    agent_finish(HL_END_EXIT, rc & 0xff);
    if (!thread_tasks_alive_besides(os_gettid(), writer))
        syscall(SYS_exit_group, rc);
    return rc;
}

// The child with CLONE_VM: known by its tid from its first instruction on.
static int start_shared(void* p) {
    hl_clone_child_t* c = p;
    atomic_store_explicit(&c->tid, os_gettid(), memory_order_release);
    int rc = c->fn(c->arg);
    if (c->release_by == HL_CLONE_RELEASED_BY_CHILD)
        thread_clone_release(c); // only its bare exit system call follows
    return rc;
}

static int clone_shared(clone_fn_t fn, void* stack, int flags, void* arg, pid_t* ptid, void* tls,
                        pid_t* ctid) {
    hl_clone_child_t* c = thread_clone_reserve();
    if (!c) {
        static _Atomic int told;
        if (!atomic_exchange(&told, 1))
            hl_log("too many clone(CLONE_VM) children at once: the rest count as their parent");
        return real_clone(fn, stack, flags, arg, ptid, tls, ctid);
    }
    c->fn = fn;
    c->arg = arg;
    if (flags & CLONE_VFORK) {
        c->release_by = HL_CLONE_RELEASED_BY_PARENT; // it has exec'd or exited when clone returns
    } else if (!(flags & (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID))) {
        // The kernel clears the word when the child exits or execs, whichever way it does.
        c->release_by = HL_CLONE_RELEASED_BY_KERNEL;
        flags |= CLONE_CHILD_CLEARTID;
        ctid = (pid_t*)&c->here;
    } else {
        c->release_by = HL_CLONE_RELEASED_BY_CHILD; // the program's own word is not the agent's
    }
    int rc = real_clone(start_shared, stack, flags, c, ptid, tls, ctid);
    int saved_errno = errno;
    if (rc < 0 || c->release_by == HL_CLONE_RELEASED_BY_PARENT)
        thread_clone_release(c);
    thread_clone_sweep();
    errno = saved_errno;
    return rc;
}

HL_EXPORT int clone(clone_fn_t fn, void* stack, int flags, void* arg, ...) {
    // What follows arg is read only as the flags say it was passed (clone(2)).
    pid_t *ptid = NULL, *ctid = NULL;
    void* tls = NULL;
    va_list ap;
    va_start(ap, arg);
    if (flags & (CLONE_PARENT_SETTID | CLONE_PIDFD | CLONE_SETTLS | CLONE_CHILD_SETTID |
                 CLONE_CHILD_CLEARTID))
        ptid = va_arg(ap, pid_t*);
    if (flags & (CLONE_SETTLS | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID))
        tls = va_arg(ap, void*);
    if (flags & (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID))
        ctid = va_arg(ap, pid_t*);
    va_end(ap);
    if (hl_unlikely(!real_clone)) {
        int was_busy = thread_self()->busy;
        thread_self()->busy = 1;
        *(void**)&real_clone = dlsym(RTLD_NEXT, "clone");
        thread_self()->busy = was_busy;
        if (!real_clone) {
            errno = ENOSYS;
            return -1;
        }
    }
    if (!fn || !TRACING())
        return real_clone(fn, stack, flags, arg, ptid, tls, ctid);
    if (flags & CLONE_VM)
        return clone_shared(fn, stack, flags, arg, ptid, tls, ctid);
    fork_start_t start = {fn, arg};
    agent_fork_prepare();
    int rc = real_clone(start_forked, stack, flags, &start, ptid, tls, ctid);
    int saved_errno = errno;
    agent_fork_parent();
    errno = saved_errno;
    return rc;
}
