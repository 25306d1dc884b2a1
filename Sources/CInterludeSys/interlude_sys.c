#define _GNU_SOURCE
#include "interlude_sys.h"
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

int interlude_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

#if defined(__GLIBC__)
#include <malloc.h>
int interlude_malloc_trim(void) { return malloc_trim(0); }
#else
int interlude_malloc_trim(void) { return 0; }
#endif

#include <errno.h>
#include <spawn.h>
int interlude_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int fd) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    return posix_spawn_file_actions_addclosefrom_np(actions, fd);
#else
    (void)actions; (void)fd;
    return ENOSYS;
#endif
}

int interlude_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

#include <sys/prctl.h>
int interlude_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}
