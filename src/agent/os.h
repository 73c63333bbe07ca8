// SPDX-License-Identifier: MIT
// os.h - raw system calls for the agent's own needs (os.c): memory that the program's
// allocator never sees, I/O that never re-enters the agent's hooks, futexes.
#ifndef HL_OS_H
#define HL_OS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/syscall.h>
// mmap as a system call: on 32-bit systems mmap2 (SYS_mmap there takes a pointer to its
// arguments); the same with an offset of 0.
#ifdef SYS_mmap2
#define HL_SYS_MMAP SYS_mmap2
#else
#define HL_SYS_MMAP SYS_mmap
#endif

void* os_map(size_t size);       // zeroed anonymous memory, or NULL
void* os_map_dense(size_t size); // the same, populated at once (for tables used whole)
void* os_map_dense_huge(size_t size); // the same in huge pages, for tables probed at random
void os_unmap(void* p, size_t size);
void* os_reserve(size_t size);         // large and lazily backed: pages cost only once touched
void os_discard(void* p, size_t size); // gives the pages back; they read as zeros after
int os_populate(void* p, size_t size); // 0 once every page of it is present and written, else -1
void os_wipe_on_fork(void* p, size_t size); // a fork child finds it zeroed, none of it copied
void os_yield(void);
void os_sleep_ns(long ns);
long os_write_all(int fd, const void* buf, size_t len); // 0 or -errno
int os_gettid(void);
void os_futex_wait(_Atomic int* addr, int expected, long timeout_ns); // timeout < 0: none
void os_futex_wake(_Atomic int* addr, int count);
int os_tgkill(int pid, int tid, int sig);
struct stat;
// fstat without libc on 64-bit systems; on 32-bit ones libc's (the kernel's old fstat there
// fills another layout than libc's struct stat). 0 or -1 (errno).
int os_fstat(int fd, struct stat* st);
// Calls fn(tid, arg) for every task (thread) of this process, from /proc/self/task, without
// allocating. How many there were, or -1 when the list cannot be read.
int os_for_each_task(void (*fn)(int tid, void* arg), void* arg);
size_t os_agent_ranges(uintptr_t (*out)[2], size_t max); // the memory os_map handed out
// Mappings the allocator underneath made for itself (mmap while inside a real malloc).
void os_note_allocator_map(uintptr_t lo, uintptr_t hi);
void os_note_allocator_unmap(uintptr_t lo, uintptr_t hi);
size_t os_allocator_ranges(uintptr_t (*out)[2], size_t max);

#endif
