/* The recorder for programs other than Python, loaded through LD_PRELOAD inside the sandbox.
 *
 * Records, as JSON lines like the Python recorder's (site_hook.py), the programs a program starts
 * (execve, execv, execvp, execvpe, posix_spawn, posix_spawnp: {"kind": "exec", "argv": [...]}) and the
 * files it opens outside the system folders ({"kind": "open", "path", "mode", "inside_workspace"}), then
 * calls the real function: nothing the program sees changes. Its settings are `preload.conf` beside
 * this library: the output folder, the workspace, the event cap and the value cap, one a line.
 * Python processes, and the sandbox's own bubblewrap and setpriv, record nothing here (Python's audit
 * hook records them). Measurement, not security: a static program, or one that clears its environment,
 * leaves no lines. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int state = 0; /* 0 unknown, 1 recording, -1 off */
static int out_fd = -1;
static pid_t out_pid = 0;
static char out_dir[PATH_MAX];
static char workspace[PATH_MAX];
static size_t workspace_len = 0;
static long max_events = 5000, events = 0, max_chars = 2000;
static __thread int busy = 0;

static const char *SYSTEM[] = {"/usr/", "/lib/", "/lib64/", "/lib32/", "/bin/", "/sbin/", "/etc/", "/proc/",
                               "/sys/", "/dev/", "/run/shell-server/", "/run/unscaffold-evidence/", "/var/lib/",
                               NULL};

static void marker(void) {}

static int read_line(FILE *f, char *buf, size_t size) {
    if (!fgets(buf, (int)size, f)) return 0;
    buf[strcspn(buf, "\n")] = 0;
    return 1;
}

static void setup(void) {
    Dl_info info;
    char conf[PATH_MAX], exe[PATH_MAX], number[64];
    state = -1;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = 0;
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    if (!strncmp(base, "python", 6) || !strcmp(base, "bwrap") || !strcmp(base, "setpriv")) return;
    if (!dladdr((void *)marker, &info) || !info.dli_fname) return;
    snprintf(conf, sizeof conf, "%s", info.dli_fname);
    char *slash = strrchr(conf, '/');
    if (!slash) return;
    snprintf(slash + 1, sizeof conf - (size_t)(slash + 1 - conf), "preload.conf");
    int fd = (int)syscall(SYS_openat, AT_FDCWD, conf, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "r");
    if (!f) { close(fd); return; }
    int ok = read_line(f, out_dir, sizeof out_dir) && read_line(f, workspace, sizeof workspace);
    if (ok && read_line(f, number, sizeof number)) max_events = atol(number);
    if (ok && read_line(f, number, sizeof number)) max_chars = atol(number);
    fclose(f);
    if (!ok || !out_dir[0] || !workspace[0]) return;
    workspace_len = strlen(workspace);
    while (workspace_len > 1 && workspace[workspace_len - 1] == '/') workspace[--workspace_len] = 0;
    state = 1;
}

/* ---- a growing line ---- */
typedef struct { char *data; size_t len, cap; } Buf;

static void put(Buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 1024);
        while (cap < b->len + n + 1) cap *= 2;
        char *data = realloc(b->data, cap);
        if (!data) return;
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

static void puts_(Buf *b, const char *s) { put(b, s, strlen(s)); }

static void put_string(Buf *b, const char *s) {
    char esc[8];
    put(b, "\"", 1);
    long count = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && count < max_chars; p++, count++) {
        if (*p == '"' || *p == '\\') { esc[0] = '\\'; esc[1] = (char)*p; put(b, esc, 2); }
        else if (*p < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", *p); put(b, esc, 6); }
        else put(b, (const char *)p, 1);
    }
    put(b, "\"", 1);
}

static void emit(Buf *b) {
    char tail[160];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const char *program = program_invocation_short_name ? program_invocation_short_name : "";
    snprintf(tail, sizeof tail, ", \"t\": %lld, \"pid\": %d, \"program\": ",
             (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, (int)getpid());
    puts_(b, tail);
    put_string(b, program);
    puts_(b, "}\n");
    if (out_fd < 0 || out_pid != getpid()) {
        char path[PATH_MAX + 64];
        struct timespec r;
        clock_gettime(CLOCK_REALTIME, &r);
        snprintf(path, sizeof path, "%s/%d-c%lx.jsonl", out_dir, (int)getpid(), (unsigned long)r.tv_nsec);
        out_fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        out_pid = getpid();
    }
    if (out_fd >= 0 && b->data) {
        ssize_t ignored = write(out_fd, b->data, b->len);
        (void)ignored;
    }
}

static int begin(void) {
    if (busy) return 0;
    if (state == 0) setup();
    if (state != 1 || events >= max_events) return 0;
    events++;
    return 1;
}

static void record_exec(char *const argv[]) {
    int saved = errno;
    if (!begin()) return;
    busy = 1;
    Buf b = {0};
    puts_(&b, "{\"kind\": \"exec\", \"argv\": [");
    for (int i = 0; argv && argv[i] && i < 1000; i++) {
        if (i) puts_(&b, ", ");
        put_string(&b, argv[i]);
    }
    puts_(&b, "]");
    emit(&b);
    free(b.data);
    busy = 0;
    errno = saved;
}

static int system_path(const char *full) {
    for (int i = 0; SYSTEM[i]; i++) {
        size_t n = strlen(SYSTEM[i]) - 1; /* the folder without its slash: itself or anything below */
        if (!strncmp(full, SYSTEM[i], n) && (full[n] == '/' || full[n] == 0)) return 1;
    }
    return 0;
}

/* `path` made absolute and normalised (., .., repeated slashes), against the folder of `dirfd`. */
static int absolute(int dirfd, const char *path, char *out, size_t size) {
    char joined[PATH_MAX * 2];
    if (path[0] == '/') snprintf(joined, sizeof joined, "%s", path);
    else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) { if (!getcwd(base, sizeof base)) return 0; }
        else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n <= 0) return 0;
            base[n] = 0;
        }
        snprintf(joined, sizeof joined, "%s/%s", base, path);
    }
    size_t len = 0;
    out[0] = 0;
    for (char *save = NULL, *part = strtok_r(joined, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, ".")) continue;
        if (!strcmp(part, "..")) {
            while (len > 0 && out[len - 1] != '/') len--;
            if (len > 0) len--;
            out[len] = 0;
            continue;
        }
        size_t n = strlen(part);
        if (len + n + 2 > size) return 0;
        out[len++] = '/';
        memcpy(out + len, part, n);
        len += n;
        out[len] = 0;
    }
    if (len == 0) { out[0] = '/'; out[1] = 0; }
    return 1;
}

static void record_open(int dirfd, const char *path, int flags) {
    int saved = errno;
    if (!path || (flags & O_DIRECTORY) || busy) return;
    if (state == 0) setup();
    if (state != 1) return;
    char full[PATH_MAX];
    if (!absolute(dirfd, path, full, sizeof full) || system_path(full)) { errno = saved; return; }
    int inside = 0;
    const char *shown = full;
    if (!strncmp(full, workspace, workspace_len) && full[workspace_len] == '/') { inside = 1; shown = full + workspace_len + 1; }
    else if (!strcmp(full, workspace)) { errno = saved; return; }
    if (!begin()) { errno = saved; return; }
    busy = 1;
    const char *mode = "r";
    if ((flags & O_ACCMODE) != O_RDONLY) {
        if ((flags & O_CREAT) && (flags & O_EXCL)) mode = "x";
        else if (flags & O_APPEND) mode = "a";
        else if (flags & O_TRUNC) mode = "w";
        else mode = "rw";
    }
    Buf b = {0};
    puts_(&b, "{\"kind\": \"open\", \"path\": ");
    put_string(&b, shown);
    puts_(&b, ", \"mode\": \"");
    puts_(&b, mode);
    puts_(&b, inside ? "\", \"inside_workspace\": true" : "\", \"inside_workspace\": false");
    emit(&b);
    free(b.data);
    busy = 0;
    errno = saved;
}

static int fopen_flags(const char *mode) {
    int plus = strchr(mode, '+') != NULL, flags;
    switch (mode[0]) {
    case 'w': flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC; break;
    case 'a': flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND; break;
    default: flags = plus ? O_RDWR : O_RDONLY;
    }
    if (strchr(mode, 'x')) flags |= O_EXCL;
    return flags;
}

#define REAL(name)                                                                 \
    static __typeof__(&name) real_##name;                                          \
    if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

int execve(const char *path, char *const argv[], char *const envp[]) {
    REAL(execve);
    record_exec(argv);
    return real_execve(path, argv, envp);
}

int execv(const char *path, char *const argv[]) {
    REAL(execv);
    record_exec(argv);
    return real_execv(path, argv);
}

int execvp(const char *file, char *const argv[]) {
    REAL(execvp);
    record_exec(argv);
    return real_execvp(file, argv);
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
    REAL(execvpe);
    record_exec(argv);
    return real_execvpe(file, argv, envp);
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    REAL(posix_spawn);
    record_exec(argv);
    return real_posix_spawn(pid, path, actions, attr, argv, envp);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    REAL(posix_spawnp);
    record_exec(argv);
    return real_posix_spawnp(pid, file, actions, attr, argv, envp);
}

#define OPEN_LIKE(name)                                                                \
    int name(const char *path, int flags, ...) {                                       \
        REAL(name);                                   \
        mode_t mode = 0;                                                               \
        if (flags & (O_CREAT | __O_TMPFILE)) {                                         \
            va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap);    \
        }                                                                              \
        record_open(AT_FDCWD, path, flags);                                            \
        return real_##name(path, flags, mode);                                         \
    }
OPEN_LIKE(open)
OPEN_LIKE(open64)

#define OPENAT_LIKE(name)                                                              \
    int name(int dirfd, const char *path, int flags, ...) {                            \
        REAL(name);                              \
        mode_t mode = 0;                                                               \
        if (flags & (O_CREAT | __O_TMPFILE)) {                                         \
            va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap);    \
        }                                                                              \
        record_open(dirfd, path, flags);                                               \
        return real_##name(dirfd, path, flags, mode);                                  \
    }
OPENAT_LIKE(openat)
OPENAT_LIKE(openat64)

int __open_2(const char *path, int flags) {
    REAL(__open_2);
    record_open(AT_FDCWD, path, flags);
    return real___open_2(path, flags);
}

int __open64_2(const char *path, int flags) {
    REAL(__open64_2);
    record_open(AT_FDCWD, path, flags);
    return real___open64_2(path, flags);
}

int __openat_2(int dirfd, const char *path, int flags) {
    REAL(__openat_2);
    record_open(dirfd, path, flags);
    return real___openat_2(dirfd, path, flags);
}

int creat(const char *path, mode_t mode) {
    REAL(creat);
    record_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC);
    return real_creat(path, mode);
}

FILE *fopen(const char *path, const char *mode) {
    REAL(fopen);
    if (path && mode) record_open(AT_FDCWD, path, fopen_flags(mode));
    return real_fopen(path, mode);
}

FILE *fopen64(const char *path, const char *mode) {
    REAL(fopen64);
    if (path && mode) record_open(AT_FDCWD, path, fopen_flags(mode));
    return real_fopen64(path, mode);
}
