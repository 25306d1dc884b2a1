#ifndef INTERLUDE_SYS_H
#define INTERLUDE_SYS_H
#include <sys/types.h>

/// Peer credentials of a connected Unix socket (SO_PEERCRED). Glibc's `struct ucred` does not
/// import into Swift, so this shim calls getsockopt(2) and copies the three fields out.
/// Returns 0 on success, -1 with errno set on failure.
int interlude_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid);

/// Gives the heap's free memory back to the system (glibc's malloc_trim(0), from <malloc.h>, which
/// Swift's Glibc module does not import). Returns 1 if memory was released, 0 if not; 0 where the
/// C library has no malloc_trim.
int interlude_malloc_trim(void);

#endif
