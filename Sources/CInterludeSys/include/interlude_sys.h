#ifndef INTERLUDE_SYS_H
#define INTERLUDE_SYS_H
#include <sys/types.h>

/// Peer credentials of a connected Unix socket (SO_PEERCRED). Glibc's `struct ucred` does not
/// import into Swift, so this shim calls getsockopt(2) and copies the three fields out.
/// Returns 0 on success, -1 with errno set on failure.
int interlude_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid);

#endif
