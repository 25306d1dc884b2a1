# shellcheck shell=bash
# Shared set-up for Scripts/demo, Scripts/test and Scripts/bench (sourced, not run).

INTERLUDE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=pulse.sh
source "$INTERLUDE_ROOT/Scripts/lib/pulse.sh"
# shellcheck source=dbus.sh
source "$INTERLUDE_ROOT/Scripts/lib/dbus.sh"

# Debian packages the build, the daemon and the tests need.
# libsystemd-dev: sd-bus (InterludeBus); dbus: the session bus; sound-theme-freedesktop: the
# sounds bus apps name (message-new-instant, bell, …; S2); libmosquitto-dev: MQTT (InterludeRemote).
INTERLUDE_PACKAGES=(pulseaudio pulseaudio-utils libpulse-dev libsndfile1-dev libsqlite3-dev sox
    libsystemd-dev dbus sound-theme-freedesktop libmosquitto-dev)
# gdb: Scripts/test prints the threads of a test run that hangs (interlude_run_with_deadline);
# systemd: systemd-analyze checks the user unit that Scripts/install writes.
# libnotify-bin (notify-send), libglib2.0-bin (gdbus), dunst + xvfb (a display daemon for
# companion mode): the D-Bus tests' real clients. mosquitto (+ clients): the private broker.
# rabbitmq-server: the three-node cluster the cluster test starts (Scripts/rabbitmq-cluster-private);
# openssl: the TLS broker test's certificates. strace: the descriptor test (a close that fails with
# EBADF is a descriptor closed twice; DescriptorEndToEndTests).
INTERLUDE_TEST_PACKAGES=(gdb strace systemd libnotify-bin libglib2.0-bin python3-dbus dunst xvfb mosquitto mosquitto-clients
    rabbitmq-server openssl)
# mpv + mpv-mpris (a real MPRIS player), playerctl (acts as the user), python3-gi (the GLib main
# loop of the tests' fake MPRIS player): the MPRIS tests (issue 10). Installed without recommends
# (~88 MB instead of a desktop's worth).
INTERLUDE_PLAYER_PACKAGES=(mpv mpv-mpris playerctl python3-gi)

say() { printf '==> %s\n' "$*" >&2; }

# Installs whatever of the given Debian packages is missing (apt-get update first, once).
interlude_install_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq ${INTERLUDE_APT_FLAGS:-} "${missing[@]}" >/dev/null
}

# The same, without recommended packages (for INTERLUDE_PLAYER_PACKAGES).
interlude_install_packages_lean() {
    INTERLUDE_APT_FLAGS=--no-install-recommends interlude_install_packages "$@"
}

# Makes sure `swift` is on PATH (the toolchain lives in /opt/swift on our machines).
interlude_find_swift() {
    command -v swift >/dev/null 2>&1 && return 0
    if [ -x /opt/swift/usr/bin/swift ]; then export PATH="/opt/swift/usr/bin:$PATH"; return 0; fi
    echo "swift not found: install the Swift 6 toolchain (swift.org) and put it on PATH" >&2
    return 1
}

# Starts a private PulseAudio server in $1 unless one is reachable (or $2 = always).
# Sets INTERLUDE_STARTED_PULSE=1 when it started one.
interlude_ensure_pulse() {
    local dir=$1 mode=${2:-when-needed}
    INTERLUDE_STARTED_PULSE=0
    if [ "$mode" != always ] && interlude_pulse_reachable; then
        say "using the running PulseAudio server ($(pactl info 2>/dev/null | sed -n 's/^Server Name: //p'))"
        return 0
    fi
    say "starting a private PulseAudio server with a null sink in $dir"
    interlude_start_pulse "$dir" || return 1
    INTERLUDE_STARTED_PULSE=1
}

# Starts interluded on socket $1 (logging to $2) and waits for the socket. Sets INTERLUDE_DAEMON_PID.
interlude_start_daemon() {
    local socket=$1 log=$2 i
    shift 2
    "$INTERLUDE_ROOT/.build/debug/interluded" --socket "$socket" "$@" 2>"$log" &
    INTERLUDE_DAEMON_PID=$!
    for ((i = 0; i < 100; i++)); do
        [ -S "$socket" ] && return 0
        kill -0 "$INTERLUDE_DAEMON_PID" 2>/dev/null || { echo "interluded exited; log:" >&2; cat "$log" >&2; return 1; }
        sleep 0.1
    done
    echo "interluded did not open $socket within 10 s; log:" >&2
    cat "$log" >&2
    return 1
}

interlude_stop_daemon() {
    [ -n "${INTERLUDE_DAEMON_PID:-}" ] || return 0
    kill -TERM "$INTERLUDE_DAEMON_PID" 2>/dev/null
    wait "$INTERLUDE_DAEMON_PID" 2>/dev/null
    INTERLUDE_DAEMON_PID=
}

# Runs a command with line-buffered output and a deadline of $1 seconds. A test run normally takes
# a few minutes; one still running at the deadline has hung: the threads of the test process are
# printed (gdb, when installed) so that the log says where, the run is stopped, and 124 returned.
interlude_run_with_deadline() {
    local limit=$1 pid waited=0 x
    shift
    if [ -n "${INTERLUDE_PASS_LOG:-}" ]; then
        # A copy of the pass's output (stderr folded in) for interlude_print_failures.
        ( set -o pipefail; stdbuf -oL -eL "$@" 2>&1 | tee -a "$INTERLUDE_PASS_LOG" ) &
    else
        stdbuf -oL -eL "$@" &
    fi
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$waited" -ge "$limit" ]; then
            echo "interlude: '$*' still running after $limit s: it hung; the test process's threads follow" >&2
            # Only this checkout's test process: another checkout's (a CI run beside it) is not ours.
            for x in $(pgrep -f "$INTERLUDE_ROOT/\.build/.*PackageTests\.xctest"); do
                echo "--- threads of pid $x: $(tr '\0' ' ' < "/proc/$x/cmdline" 2>/dev/null)" >&2
                command -v gdb >/dev/null && timeout 120 gdb -p "$x" -batch -ex 'thread apply all bt 30' 2>&1 \
                    | grep -E '^(Thread |#)' | cut -c1-240 >&2
            done
            pkill -KILL -f "$INTERLUDE_ROOT/\.build/.*PackageTests\.xctest"
            pkill -TERM -P "$pid" 2>/dev/null  # the pass under the log's tee runs in a subshell
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            return 124
        fi
        sleep 1
        waited=$((waited + 1))
    done
    wait "$pid"
}

# Prints the lines of a pass's log (INTERLUDE_PASS_LOG of interlude_run_with_deadline) that name a
# failure: Swift Testing's ✘ lines, XCTest's failed cases and their "error:" lines, fatal errors and
# crashes, and the lines that explain them (Swift Testing's `↳` comments, a test's `[failure detail]`
# lines). CI keeps only the tail of a run's output; this puts the reasons next to the verdict.
#   interlude_print_failures LOG TITLE
interlude_print_failures() {
    local log=$1 title=$2 lines
    [ -s "$log" ] || return 0
    grep -aqE '✘ |Test Case .* failed|: error: |error: -\[|Fatal error|crashed|Exited with unexpected signal|still running after|WARNING: ThreadSanitizer|ERROR: AddressSanitizer' "$log" || return 0
    lines=$(grep -aE '✘ |Test Case .* failed|: error: |error: -\[|Fatal error|crashed|Exited with unexpected signal|still running after|WARNING: ThreadSanitizer|ERROR: AddressSanitizer|^↳ |^\[failure detail\] ' "$log" \
        | grep -avE '✘ Test run with|passed after|^↳ Testing Library Version|^↳ Target Platform' | cut -c1-300 | head -n 200 || true)  # no match is not an error (set -e)
    [ -n "$lines" ] || return 0
    say "failures of the $title:"
    printf '%s\n' "$lines" >&2
}
