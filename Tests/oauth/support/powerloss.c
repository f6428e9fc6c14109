// An LD_PRELOAD interposer for power-loss tests (Tests/oauth/test_broker_power_loss.py).
//
// A kill -9 keeps the page cache: every write() reaches the file whether or not it was synced.
// A power loss keeps only what fsync/fdatasync made durable. This library records, at each
// successful sync, the file's inode and length in POWERLOSS_LOG ("<inode> <length>\n"); the test
// then kills the process and truncates every file to its last recorded length (0 when never
// synced): the files as a power loss could leave them. Renames keep inodes, so a snapshot's
// temporary file keeps its record under its final name.
//
// POWERLOSS_DROP_SYNCS=1 makes every sync a no-op that records nothing: the broker as it would
// be without its syncs, the negative control that must lose acknowledged sessions.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int powerloss_log = -1;
static int powerloss_drop = 0;

__attribute__((constructor)) static void powerloss_init(void) {
    const char *path = getenv("POWERLOSS_LOG");
    if (path != NULL) powerloss_log = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    const char *drop = getenv("POWERLOSS_DROP_SYNCS");
    powerloss_drop = drop != NULL && strcmp(drop, "1") == 0;
}

static void powerloss_record(int fd) {
    struct stat status;
    if (powerloss_log < 0 || fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) return;
    char line[64];
    int length = snprintf(line, sizeof line, "%llu %lld\n", (unsigned long long)status.st_ino,
                          (long long)status.st_size);
    if (write(powerloss_log, line, (size_t)length) != length) abort();
}

static int powerloss_sync(int fd, const char *name) {
    if (powerloss_drop) return 0;
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    int result = real(fd);
    if (result == 0) powerloss_record(fd);
    return result;
}

int fdatasync(int fd) { return powerloss_sync(fd, "fdatasync"); }
int fsync(int fd) { return powerloss_sync(fd, "fsync"); }
