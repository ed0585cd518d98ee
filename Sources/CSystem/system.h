/*
 * CSystem/system.h: the few Linux calls Swift's Glibc module does not
 * expose, for VipsCore's SystemResources and MemoryPressureTrigger and the
 * server's HangupWatcher (its eventfd), and thread names for every named thread.
 *
 * sched_getaffinity and gettid are declared by glibc only under _GNU_SOURCE,
 * which Swift's Glibc module is not built with, so they are reached through
 * syscall(2) here; <sys/eventfd.h> is not part of that module at all. Each
 * wrapper makes one call and decides nothing.
 */
#ifndef CSYSTEM_SYSTEM_H
#define CSYSTEM_SYSTEM_H

#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The calling thread's CPU affinity mask into mask (size bytes). Returns the
   mask's size in bytes as the kernel wrote it, or -1 with errno (EINVAL when
   size is smaller than the kernel's mask). */
static inline long vl_sched_getaffinity(size_t size, unsigned char *mask) {
    return syscall(SYS_sched_getaffinity, 0, size, mask);
}

/* The calling thread's kernel thread id (its /proc/self/task entry). */
static inline int vl_gettid(void) { return (int)syscall(SYS_gettid); }

/* An eventfd (a counter a thread can poll), close-on-exec and non-blocking. */
static inline int vl_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

/* ---- threads ------------------------------------------------------------- */

/* pthread_setname_np is a GNU extension: <pthread.h> declares it only under
   _GNU_SOURCE, which Swift's Glibc module is not built with, so Swift cannot
   see it. Declared here (glibc has exported it since 2.12); remove once the
   Glibc module exposes it. The kernel keeps at most 15 bytes of a name. */
#include <pthread.h>
extern int pthread_setname_np(pthread_t thread, const char *name);
static inline int vl_set_current_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }

#endif
