# shellcheck shell=bash
# Shared set-up for Scripts/demo, Scripts/test and Scripts/bench (sourced, not run).

INTERLUDE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=pulse.sh
source "$INTERLUDE_ROOT/Scripts/lib/pulse.sh"

# Debian packages the build, the daemon and the tests need.
INTERLUDE_PACKAGES=(pulseaudio pulseaudio-utils libpulse-dev libsndfile1-dev libsqlite3-dev sox)

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
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
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
