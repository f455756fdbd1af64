/*
 * Counts the native heap traffic of a process: LD_PRELOAD this library and set MALLOC_COUNT_FILE;
 * every 100 ms a thread rewrites that file with the totals since start (one "name value" per line).
 * Read it before and after a window of requests and divide the difference by the requests. A "%p"
 * in the path becomes the process id, so that children (npx, node's own re-exec) keep apart.
 *
 * Why a preload and not valgrind: these counts are exact whatever else the machine is doing, at
 * native speed, so the same window can be compared between two builds on a shared, noisy machine.
 * Node resets signal handlers at start, so the file is written by a thread, not on a signal.
 *
 * Build: cc -O2 -shared -fPIC -o malloc-count.so malloc-count.c -lpthread (bench/native/build.sh)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

/* Size classes by requested bytes: <=64, <=512, <=4 KiB, <=64 KiB, larger. */
#define CLASSES 5
static _Atomic uint64_t allocs, alloc_bytes, frees, reallocs, realloc_bytes;
static _Atomic uint64_t by_class[CLASSES], bytes_by_class[CLASSES];

static inline void count(size_t n) {
  int c = n <= 64 ? 0 : n <= 512 ? 1 : n <= 4096 ? 2 : n <= 65536 ? 3 : 4;
  atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&alloc_bytes, n, memory_order_relaxed);
  atomic_fetch_add_explicit(&by_class[c], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&bytes_by_class[c], n, memory_order_relaxed);
}

void *malloc(size_t n) {
  count(n);
  return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
  count(a * b);
  return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
  atomic_fetch_add_explicit(&reallocs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&realloc_bytes, n, memory_order_relaxed);
  return __libc_realloc(p, n);
}
void free(void *p) {
  if (p != NULL) atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
  __libc_free(p);
}
void *memalign(size_t a, size_t n) {
  count(n);
  return __libc_memalign(a, n);
}
void *aligned_alloc(size_t a, size_t n) {
  count(n);
  return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
  count(n);
  void *p = __libc_memalign(a, n);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}

static void *writer(void *arg) {
  const char *path = arg;
  char buf[1024];
  for (;;) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    struct mallinfo2 mi = mallinfo2();
    int len = snprintf(buf, sizeof buf,
                       "allocs %lu\nalloc_bytes %lu\nfrees %lu\nreallocs %lu\nrealloc_bytes %lu\n"
                       "le64 %lu\nle512 %lu\nle4k %lu\nle64k %lu\ngt64k %lu\n"
                       "bytes_le64 %lu\nbytes_le512 %lu\nbytes_le4k %lu\nbytes_le64k %lu\nbytes_gt64k %lu\n"
                       "arena %zu\nin_use %zu\nfree_in_arena %zu\nmmapped %zu\nend 1\n",
                       allocs, alloc_bytes, frees, reallocs, realloc_bytes, by_class[0], by_class[1],
                       by_class[2], by_class[3], by_class[4], bytes_by_class[0], bytes_by_class[1],
                       bytes_by_class[2], bytes_by_class[3], bytes_by_class[4], mi.arena, mi.uordblks,
                       mi.fordblks, mi.hblkhd);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) continue;
    ssize_t w = write(fd, buf, (size_t)len);
    close(fd);
    if (w == len) rename(tmp, path);
  }
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  const char *path = getenv("MALLOC_COUNT_FILE");
  if (path == NULL || *path == '\0') return;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  char *own = malloc(strlen(path) + 32);
  const char *mark = strstr(path, "%p");
  if (mark == NULL) strcpy(own, path);
  else sprintf(own, "%.*s%d%s", (int)(mark - path), path, (int)getpid(), mark + 2);
  pthread_create(&t, &attr, writer, own);
}
