#define _GNU_SOURCE
#include "interlude_sys.h"
#include <sys/socket.h>

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
