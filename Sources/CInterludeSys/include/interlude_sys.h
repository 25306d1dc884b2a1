#ifndef INTERLUDE_SYS_H
#define INTERLUDE_SYS_H
#include <sys/types.h>
#include <spawn.h>

/// Peer credentials of a connected Unix socket (SO_PEERCRED). Glibc's `struct ucred` does not
/// import into Swift, so this shim calls getsockopt(2) and copies the three fields out.
/// Returns 0 on success, -1 with errno set on failure.
int interlude_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid);

/// Gives the heap's free memory back to the system (glibc's malloc_trim(0), from <malloc.h>, which
/// Swift's Glibc module does not import). Returns 1 if memory was released, 0 if not; 0 where the
/// C library has no malloc_trim.
int interlude_malloc_trim(void);

/// Adds "close every descriptor from `fd` up" to a posix_spawn file-action list (glibc 2.34's
/// posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module does not import): the child
/// inherits nothing another thread opened without O_CLOEXEC in the same instant. Returns 0, or an
/// error number (ENOSYS where the C library lacks it).
int interlude_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int fd);

/// pipe2(fds, O_CLOEXEC) (a GNU extension Swift's Glibc module does not import): both ends are
/// close-on-exec from the start, so no child spawned meanwhile by another thread inherits them.
/// Returns 0, or -1 with errno set.
int interlude_pipe_cloexec(int fds[2]);

/// Names the calling thread in the kernel (prctl PR_SET_NAME: at most 15 bytes, longer is cut),
/// as `ps`, `top` and /proc/thread-self/comm show it. Foundation's `Thread.current.name` setter
/// reaches the kernel only once the starting thread has stored the new thread's handle, which a
/// thread that names itself first thing may be too early for. Returns 0, or -1 with errno set.
int interlude_name_this_thread(const char *name);

#endif
