// SPDX-License-Identifier: MIT
// inject.c - calls into a running process with ptrace, as a debugger's "call" does, without one.
// One thread is stopped (PTRACE_SEIZE, then PTRACE_INTERRUPT: nothing else of the process stops
// and nothing is killed if heaplens dies), at a moment where it holds no lock of the C library:
// blocked in a system call that waits (sleep, poll, read, accept...), never in a futex wait or a
// memory mapping call, which allocator and loader locks surround. A call is made by giving it a
// frame below the thread's own (past the red zone), a return address of 0 (the return faults,
// which stops the thread again, the result in its return register) and orig_rax -1 so that the
// kernel does not restart the interrupted system call into the function. The saved registers
// go back after; the interrupted system call then restarts as after any signal.
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"

#define INJECT_FIND_MS 5000   // how long a thread blocked in a waiting system call is looked for
#define INJECT_CALL_MS 30000  // a call that has not returned by then is given up (said)
#define INJECT_RED_ZONE 128   // below the stack pointer, the SysV ABI's red zone is the thread's
#define INJECT_FRAME_GAP 256  // and a little more, for good measure

#if defined(__x86_64__)
typedef struct user_regs_struct regs_t;

// Waiting system calls: a thread blocked in one holds none of the C library's locks.
static int is_waiting_call(long nr) {
    switch (nr) {
    case SYS_read: case SYS_poll: case SYS_select: case SYS_nanosleep: case SYS_pause:
    case SYS_accept: case SYS_recvfrom: case SYS_recvmsg: case SYS_wait4: case SYS_msgrcv:
    case SYS_rt_sigsuspend: case SYS_rt_sigtimedwait: case SYS_epoll_wait:
    case SYS_clock_nanosleep: case SYS_waitid: case SYS_pselect6: case SYS_ppoll:
    case SYS_epoll_pwait: case SYS_accept4:
        return 1;
    default:
        return 0;
    }
}

static int get_regs(pid_t tid, regs_t* r) {
    return ptrace(PTRACE_GETREGS, tid, NULL, r) == 0 ? 0 : -1;
}
static int set_regs(pid_t tid, const regs_t* r) {
    return ptrace(PTRACE_SETREGS, tid, NULL, r) == 0 ? 0 : -1;
}
#endif

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// The system call tid is blocked in (from /proc), or -1 (running, or not in one).
static long blocked_in(pid_t pid, pid_t tid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    FILE* f = fopen(path, "r");
    if (!f)
        return -1;
    long nr = -1;
    if (!fgets(buf, sizeof buf, f) || sscanf(buf, "%ld", &nr) != 1)
        nr = -1;
    fclose(f);
    return nr;
}

// Waits for tid's next stop: its wait status, or -1 when it ended (status in *st).
static int wait_stop(pid_t tid, int* st, int64_t deadline) {
    for (;;) {
        pid_t w = waitpid(tid, st, __WALL | WNOHANG);
        if (w == tid)
            return WIFSTOPPED(*st) ? 0 : -1;
        if (w < 0 && errno != EINTR)
            return -1;
        if (now_ms() > deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        sleep_ms(1);
    }
}

// Seizes tid and stops it: 0 when it stopped in a waiting system call.
static int try_thread(inject_t* in, pid_t tid) {
#if defined(__x86_64__)
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0) {
        int e = errno;
        if (e == EPERM)
            snprintf(in->err, sizeof in->err,
                     "process %d: ptrace is not allowed (another tracer, another user, or "
                     "/proc/sys/kernel/yama/ptrace_scope; run as root or with CAP_SYS_PTRACE)",
                     (int)in->pid);
        else if (e == ESRCH)
            snprintf(in->err, sizeof in->err, "no process %d", (int)in->pid);
        else
            snprintf(in->err, sizeof in->err, "process %d: ptrace: %s", (int)in->pid,
                     strerror(e));
        return e == EPERM || e == ESRCH ? -2 : -1;
    }
    in->tid = tid;
    in->is_seized = 1;
    in->pending_signal = 0;
    int st;
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0 ||
        wait_stop(tid, &st, now_ms() + 2000) != 0) {
        snprintf(in->err, sizeof in->err, "process %d: thread %d did not stop", (int)in->pid,
                 (int)tid);
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        in->is_seized = 0;
        return -1;
    }
    if (st >> 16 != PTRACE_EVENT_STOP)
        in->pending_signal = WSTOPSIG(st); // stopped delivering a signal: delivered at the end
    regs_t r;
    if (get_regs(tid, &r) != 0 || !is_waiting_call((long)r.orig_rax)) {
        ptrace(PTRACE_DETACH, tid, NULL, (void*)(long)in->pending_signal);
        in->is_seized = 0;
        return -1;
    }
    memcpy(in->saved_regs, &r, sizeof r);
    return 0;
#else
    (void)tid;
    snprintf(in->err, sizeof in->err, "attach is not implemented on this architecture");
    return -2;
#endif
}

// Is the process of this system's word size? A 32-bit process has other registers and calling
// conventions than the frame inject_call builds: it is refused before it is stopped.
static int is_other_class(pid_t pid) {
    char path[64];
    unsigned char ident[EI_NIDENT];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; // not ours to read: ptrace says why next
    int n = (int)read(fd, ident, sizeof ident);
    close(fd);
    return n == EI_NIDENT && !memcmp(ident, ELFMAG, SELFMAG) &&
           ident[EI_CLASS] != (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32);
}

int inject_begin(inject_t* in, pid_t pid) {
    memset(in, 0, sizeof *in);
    in->pid = pid;
    if (is_other_class(pid)) {
        snprintf(in->err, sizeof in->err,
                 "process %d is a %d-bit program: attach works on %d-bit processes only (trace it "
                 "from its start with heaplens run)",
                 (int)pid, sizeof(void*) == 8 ? 32 : 64, (int)sizeof(void*) * 8);
        return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    int64_t deadline = now_ms() + INJECT_FIND_MS;
    do {
        DIR* d = opendir(path);
        if (!d) {
            snprintf(in->err, sizeof in->err, "no process %d", (int)pid);
            return -1;
        }
        struct dirent* e;
        while ((e = readdir(d)) != NULL) {
            pid_t tid = (pid_t)atoi(e->d_name);
            if (tid <= 0 || !is_waiting_call(blocked_in(pid, tid)))
                continue;
            int rc = try_thread(in, tid);
            if (rc == 0 || rc == -2) {
                closedir(d);
                return rc == 0 ? 0 : -1;
            }
        }
        closedir(d);
        sleep_ms(10);
    } while (now_ms() < deadline);
    snprintf(in->err, sizeof in->err,
             "process %d: no thread of it waited in a system call (sleep, poll, read...) within "
             "%d s; attach stops a thread only there, where it holds no lock",
             (int)pid, INJECT_FIND_MS / 1000);
    return -1;
}

// ---------------------------------------------------------------------------------------------
// Symbols: the module's load address from /proc/PID/maps, the symbol from its file's .dynsym
// ---------------------------------------------------------------------------------------------
static int module_of(pid_t pid, const char* module, char* file, size_t cap, uintptr_t* base) {
    char path[64], line[4096];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE* f = fopen(path, "r");
    if (!f)
        return -1;
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off;
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &off, &name_at) < 3 || !name_at)
            continue;
        char* name = line + name_at;
        name[strcspn(name, "\n")] = 0;
        const char* slash = strrchr(name, '/');
        const char* basename = slash ? slash + 1 : name;
        if (name[0] != '/' || (strcmp(name, module) != 0 && strcmp(basename, module) != 0))
            continue;
        if (off == 0) {
            snprintf(file, cap, "%s", name);
            *base = lo;
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

static int elf_symbol(const char* file, const char* name, uintptr_t* value) {
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    Elf64_Ehdr eh;
    int rc = -1;
    if (fstat(fd, &st) != 0 || pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
        eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > (uint64_t)st.st_size) {
        close(fd);
        return -1;
    }
    Elf64_Shdr* sh = malloc((size_t)eh.e_shnum * sizeof *sh);
    if (!sh || pread(fd, sh, (size_t)eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff) !=
                   (ssize_t)((size_t)eh.e_shnum * sizeof *sh)) {
        free(sh);
        close(fd);
        return -1;
    }
    for (int i = 0; i < eh.e_shnum && rc != 0; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh.e_shnum)
            continue;
        const Elf64_Shdr* ss = &sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > (uint64_t)st.st_size ||
            ss->sh_offset + ss->sh_size > (uint64_t)st.st_size)
            continue;
        Elf64_Sym* syms = malloc(sh[i].sh_size);
        char* strs = malloc(ss->sh_size + 1);
        if (syms && strs &&
            pread(fd, syms, sh[i].sh_size, (off_t)sh[i].sh_offset) == (ssize_t)sh[i].sh_size &&
            pread(fd, strs, ss->sh_size, (off_t)ss->sh_offset) == (ssize_t)ss->sh_size) {
            strs[ss->sh_size] = 0;
            size_t n = sh[i].sh_size / sizeof *syms;
            for (size_t k = 0; k < n; k++) {
                if (syms[k].st_name >= ss->sh_size || syms[k].st_shndx == SHN_UNDEF ||
                    ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC)
                    continue;
                if (!strcmp(strs + syms[k].st_name, name)) {
                    *value = syms[k].st_value;
                    rc = 0;
                    break;
                }
            }
        }
        free(syms);
        free(strs);
    }
    free(sh);
    close(fd);
    return rc;
}

int inject_symbol(inject_t* in, const char* module, const char* name, uintptr_t* addr) {
    char file[4096];
    uintptr_t base, value;
    if (module_of(in->pid, module, file, sizeof file, &base) != 0) {
        snprintf(in->err, sizeof in->err, "process %d has no %s loaded%s", (int)in->pid, module,
                 !strncmp(module, "libc.so", 7) ? " (statically linked? attach needs a "
                                                  "dynamically linked process)"
                                                : "");
        return -1;
    }
    if (elf_symbol(file, name, &value) != 0) {
        snprintf(in->err, sizeof in->err, "%.300s: no function %s", file, name);
        return -1;
    }
    *addr = base + value;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// The call
// ---------------------------------------------------------------------------------------------
static int poke(inject_t* in, uintptr_t at, const void* bytes, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)in->pid);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = pwrite(fd, bytes, len, (off_t)at);
    close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

int inject_call(inject_t* in, uintptr_t fn, const char* str, long arg, long* result) {
#if defined(__x86_64__)
    regs_t r;
    memcpy(&r, in->saved_regs, sizeof r);
    uintptr_t sp = (r.rsp - INJECT_RED_ZONE - INJECT_FRAME_GAP) & ~(uintptr_t)15;
    size_t len = strlen(str) + 1;
    sp = (sp - len) & ~(uintptr_t)15;
    uintptr_t str_at = sp;
    uint64_t ret = 0;
    sp -= 8; // the return address: at the call, rsp + 8 is 16-byte aligned
    if (poke(in, str_at, str, len) != 0 || poke(in, sp, &ret, sizeof ret) != 0) {
        snprintf(in->err, sizeof in->err, "process %d: cannot write to its memory: %s",
                 (int)in->pid, strerror(errno));
        return -1;
    }
    r.rsp = sp;
    r.rip = fn;
    r.rdi = str_at;
    r.rsi = (unsigned long)arg;
    r.rax = 0;
    r.orig_rax = (unsigned long)-1;
    if (set_regs(in->tid, &r) != 0 || ptrace(PTRACE_CONT, in->tid, NULL, NULL) != 0) {
        snprintf(in->err, sizeof in->err, "process %d: ptrace: %s", (int)in->pid,
                 strerror(errno));
        return -1;
    }
    int64_t deadline = now_ms() + INJECT_CALL_MS;
    for (;;) {
        int st;
        if (wait_stop(in->tid, &st, deadline) != 0) {
            snprintf(in->err, sizeof in->err, "process %d %s", (int)in->pid,
                     errno == ETIMEDOUT ? "did not return from the call within 30 s"
                                        : "ended during the call");
            in->is_seized = errno == ETIMEDOUT;
            return -1;
        }
        int sig = WSTOPSIG(st);
        if (st >> 16 == PTRACE_EVENT_STOP)
            sig = 0; // a stop of the whole process (SIGSTOP to it): the call goes on
        else if (sig == SIGSEGV && get_regs(in->tid, &r) == 0 && r.rip == 0) {
            *result = (long)r.rax;
            return 0;
        } else if (sig == SIGSEGV) {
            snprintf(in->err, sizeof in->err, "process %d: the call faulted at %#llx",
                     (int)in->pid, (unsigned long long)r.rip);
            return -1;
        }
        // The program's own signal, while in the call: its handler runs there, as it would.
        ptrace(PTRACE_CONT, in->tid, NULL, (void*)(long)sig);
    }
#else
    (void)fn, (void)str, (void)arg, (void)result;
    snprintf(in->err, sizeof in->err, "attach is not implemented on this architecture");
    return -1;
#endif
}

void inject_end(inject_t* in) {
    if (!in->is_seized)
        return;
#if defined(__x86_64__)
    set_regs(in->tid, (const regs_t*)(const void*)in->saved_regs);
#endif
    ptrace(PTRACE_DETACH, in->tid, NULL, (void*)(long)in->pending_signal);
    in->is_seized = 0;
}
