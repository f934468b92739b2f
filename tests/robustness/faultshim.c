// Fault injection for the kill-point tests (tests/robustness/test_kill_points.py): an
// LD_PRELOAD library that counts the file operations a process makes under one folder
// and kills the process with SIGKILL at the Nth, as a crash or `kill -9` would.
//
// Counted: opening a file for writing (open/openat/creat with O_WRONLY, O_RDWR, O_CREAT
// or O_TRUNC), every write to such a file (write/pwrite/writev: at the Nth the process
// writes half the bytes, then dies, a torn write), rename/renameat/renameat2,
// unlink/unlinkat, mkdir/mkdirat, rmdir, ftruncate, fsync. Paths are made absolute (the
// working directory, or the folder a dirfd names) and must start with
// $TBDTRACE_FAULT_DIR; a path containing $TBDTRACE_FAULT_SKIP (if set) is not counted.
//
// $TBDTRACE_FAULT_CTL names a 16-byte file, mapped shared: [target, count] as int64.
// Every counted operation adds one to count; when count reaches target (> 0) the process
// is killed before the operation happens (a write: after half of it). Processes that
// share the file (children, forks) share the count.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static volatile int64_t *ctl;  // [target, count]
static char dir[4096];
static size_t dir_len;
static const char *skip;
static unsigned char tracked[65536];  // fds opened for writing under dir

__attribute__((constructor)) static void init(void) {
    const char *d = getenv("TBDTRACE_FAULT_DIR"), *c = getenv("TBDTRACE_FAULT_CTL");
    skip = getenv("TBDTRACE_FAULT_SKIP");
    if (!d || !c) return;
    int fd = ((int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open"))(c, O_RDWR);
    if (fd < 0) return;
    void *m = mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return;
    snprintf(dir, sizeof dir, "%s", d);
    dir_len = strlen(dir);
    ctl = (volatile int64_t *)m;
}

static int under(int dirfd, const char *path) {
    if (!ctl || !path) return 0;
    char buf[8192];
    if (path[0] == '/') {
        snprintf(buf, sizeof buf, "%s", path);
    } else {
        char base[4096];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return 0;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n < 0) return 0;
            base[n] = 0;
        }
        snprintf(buf, sizeof buf, "%s/%s", base, path);
    }
    if (strncmp(buf, dir, dir_len) != 0 || (buf[dir_len] != '/' && buf[dir_len] != 0)) return 0;
    if (skip && *skip && strstr(buf, skip)) return 0;
    return 1;
}

// One more counted operation; nonzero when this one is the target.
static int hit(void) {
    int64_t n = __atomic_add_fetch(&ctl[1], 1, __ATOMIC_SEQ_CST);
    return ctl[0] > 0 && n == ctl[0];
}

static void die(void) {
    kill(getpid(), SIGKILL);
    for (;;) pause();
}

static void count_path(int dirfd, const char *path) {
    if (under(dirfd, path) && hit()) die();
}

#define REAL(ret, name, ...) \
    static ret (*real)(__VA_ARGS__); \
    if (!real) real = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, name)

static int writes(int flags) { return flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC); }

static int opened(int fd, int dirfd, const char *path, int flags) {
    if (fd >= 0 && fd < 65536) tracked[fd] = writes(flags) && under(dirfd, path);
    return fd;
}

#define OPEN_BODY(name, dirfd)                                  \
    mode_t mode = 0;                                            \
    if (flags & (O_CREAT | O_TMPFILE)) {                        \
        va_list ap;                                             \
        va_start(ap, flags);                                    \
        mode = va_arg(ap, mode_t);                              \
        va_end(ap);                                             \
    }                                                           \
    if (writes(flags)) count_path(dirfd, path);

int open(const char *path, int flags, ...) {
    REAL(int, "open", const char *, int, ...);
    OPEN_BODY("open", AT_FDCWD)
    return opened(real(path, flags, mode), AT_FDCWD, path, flags);
}
int open64(const char *path, int flags, ...) {
    REAL(int, "open64", const char *, int, ...);
    OPEN_BODY("open64", AT_FDCWD)
    return opened(real(path, flags, mode), AT_FDCWD, path, flags);
}
int openat(int dirfd, const char *path, int flags, ...) {
    REAL(int, "openat", int, const char *, int, ...);
    OPEN_BODY("openat", dirfd)
    return opened(real(dirfd, path, flags, mode), dirfd, path, flags);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    REAL(int, "openat64", int, const char *, int, ...);
    OPEN_BODY("openat64", dirfd)
    return opened(real(dirfd, path, flags, mode), dirfd, path, flags);
}
int creat(const char *path, mode_t mode) {
    REAL(int, "creat", const char *, mode_t);
    count_path(AT_FDCWD, path);
    return opened(real(path, mode), AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC);
}
int close(int fd) {
    REAL(int, "close", int);
    if (fd >= 0 && fd < 65536) tracked[fd] = 0;
    return real(fd);
}

static int is_tracked(int fd) { return ctl && fd >= 0 && fd < 65536 && tracked[fd]; }

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(ssize_t, "write", int, const void *, size_t);
    if (is_tracked(fd) && hit()) {
        real(fd, buf, n / 2);
        die();
    }
    return real(fd, buf, n);
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(ssize_t, "pwrite", int, const void *, size_t, off_t);
    if (is_tracked(fd) && hit()) {
        real(fd, buf, n / 2, off);
        die();
    }
    return real(fd, buf, n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    REAL(ssize_t, "pwrite64", int, const void *, size_t, off_t);
    if (is_tracked(fd) && hit()) {
        real(fd, buf, n / 2, off);
        die();
    }
    return real(fd, buf, n, off);
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    REAL(ssize_t, "writev", int, const struct iovec *, int);
    if (is_tracked(fd) && hit()) {
        if (cnt > 0) real(fd, iov, cnt / 2 ? cnt / 2 : 1);
        die();
    }
    return real(fd, iov, cnt);
}
int ftruncate(int fd, off_t len) {
    REAL(int, "ftruncate", int, off_t);
    if (is_tracked(fd) && hit()) die();
    return real(fd, len);
}
int ftruncate64(int fd, off_t len) {
    REAL(int, "ftruncate64", int, off_t);
    if (is_tracked(fd) && hit()) die();
    return real(fd, len);
}
int fsync(int fd) {
    REAL(int, "fsync", int);
    if (is_tracked(fd) && hit()) die();
    return real(fd);
}
int rename(const char *a, const char *b) {
    REAL(int, "rename", const char *, const char *);
    if (under(AT_FDCWD, a) || under(AT_FDCWD, b)) count_path(AT_FDCWD, dir);
    return real(a, b);
}
int renameat(int da, const char *a, int db, const char *b) {
    REAL(int, "renameat", int, const char *, int, const char *);
    if (under(da, a) || under(db, b)) count_path(AT_FDCWD, dir);
    return real(da, a, db, b);
}
int renameat2(int da, const char *a, int db, const char *b, unsigned flags) {
    REAL(int, "renameat2", int, const char *, int, const char *, unsigned);
    if (under(da, a) || under(db, b)) count_path(AT_FDCWD, dir);
    return real(da, a, db, b, flags);
}
int unlink(const char *p) {
    REAL(int, "unlink", const char *);
    count_path(AT_FDCWD, p);
    return real(p);
}
int unlinkat(int d, const char *p, int flags) {
    REAL(int, "unlinkat", int, const char *, int);
    count_path(d, p);
    return real(d, p, flags);
}
int mkdir(const char *p, mode_t m) {
    REAL(int, "mkdir", const char *, mode_t);
    count_path(AT_FDCWD, p);
    return real(p, m);
}
int mkdirat(int d, const char *p, mode_t m) {
    REAL(int, "mkdirat", int, const char *, mode_t);
    count_path(d, p);
    return real(d, p, m);
}
int rmdir(const char *p) {
    REAL(int, "rmdir", const char *);
    count_path(AT_FDCWD, p);
    return real(p);
}
