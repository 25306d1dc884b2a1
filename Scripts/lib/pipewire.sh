# shellcheck shell=bash
# Private PipeWire server (pipewire + pipewire-pulse + wireplumber) for tests (sourced, not run).
#
# DESIGN.md "Facts measured on Debian 12": PipeWire works as the server only inside a D-Bus session;
# without one, streams never link and clients hang. So the three daemons run under their own
# `dbus-run-session` (a private session bus; no system bus is needed, root is fine). Everything they
# read or write is private: XDG_RUNTIME_DIR (the pipewire-0 socket and pulse/native), HOME,
# XDG_CONFIG_HOME (the fragments below) and XDG_STATE_HOME (WirePlumber's state).
#
# The private configuration, written into DIR/config:
# - pipewire.conf.d: a 48 kHz clock and the null sink `interlude_out` (support.null-audio-sink, stereo,
#   48 kHz, monitor follows the sink's volume and mute, as pipewire-pulse's module-null-sink makes it).
#   It belongs to the pipewire daemon, so it outlives a restart of pipewire-pulse. Being the only
#   sink, it is the default; pipewire-pulse's module-always-sink then adds no auto_null.
# - wireplumber main.lua.d: no restore-stream (WirePlumber would otherwise remember each app's stream
#   volume and put it on the next stream of that app, as PulseAudio's module-stream-restore would; our
#   private PulseAudio loads no such module either, and tests must not inherit each other's volumes);
#   no ALSA/V4L2/libcamera monitors and no Bluetooth (there are no devices; Bluetooth needs the system
#   bus).
# Quantum and latency are PipeWire's own defaults (in a VM: 1024/48000 = 21 ms minimum), so the tests
# see what a user of this machine gets.
#
# No monitor reader: PulseAudio's null-sink trap (latency floating up to 2 s with no low-latency
# client, DESIGN.md) does not happen here. PipeWire drives the null sink at the graph's quantum
# whoever listens. Measured without a reader: levels within 0.001 dB, a played sample in the
# recording 14 ms (median) after the request (InterludePulseTests), every scenario holding.
#
#   interlude_start_pipewire DIR   start the session; exports PULSE_SERVER, INTERLUDE_TEST_SINK,
#                                  INTERLUDE_AUDIO_SERVER=pipewire
#   interlude_stop_pipewire DIR    stop everything (pids in DIR/*.pid); leaves no process behind

# shellcheck source=pulse.sh
source "$(dirname "${BASH_SOURCE[0]}")/pulse.sh"   # _interlude_alive

# Debian packages of the PipeWire pass (Scripts/test installs them with the others).
INTERLUDE_PIPEWIRE_PACKAGES=(pipewire pipewire-pulse wireplumber dbus)

# Runs its arguments with no signal blocked (see interlude_start_pipewire); plain when perl is missing.
if command -v perl >/dev/null 2>&1; then
    _interlude_unblock=(perl -MPOSIX -e 'sigprocmask(SIG_SETMASK, POSIX::SigSet->new) or die "sigprocmask: $!\n";
        exec { $ARGV[0] } @ARGV or die "exec $ARGV[0]: $!\n"' --)
else
    _interlude_unblock=()
fi

_interlude_pipewire_write_config() {
    local dir=$1 sink=$2
    mkdir -p "$dir/config/pipewire/pipewire.conf.d" "$dir/config/wireplumber/main.lua.d" \
        "$dir/config/wireplumber/bluetooth.lua.d" || return 1
    cat >"$dir/config/pipewire/pipewire.conf.d/50-interlude.conf" <<CONF
# Interlude's private test server (Scripts/lib/pipewire.sh).
context.properties = {
    default.clock.rate          = 48000
    default.clock.allowed-rates = [ 48000 ]
}
context.objects = [
    { factory = adapter
        args = {
            factory.name            = support.null-audio-sink
            node.name               = "$sink"
            node.description        = "Interlude null sink"
            media.class             = Audio/Sink
            audio.format            = F32
            audio.rate              = 48000
            audio.channels          = 2
            audio.position          = "FL,FR"
            monitor.channel-volumes = true
        }
    }
]
CONF
    cat >"$dir/config/wireplumber/main.lua.d/60-interlude.lua" <<'LUA'
-- Interlude's private test server (Scripts/lib/pipewire.sh): no stream volume memory, no devices.
stream_defaults.enabled = false
alsa_monitor.enabled = false
v4l2_monitor.enabled = false
libcamera_monitor.enabled = false
LUA
    cat >"$dir/config/wireplumber/bluetooth.lua.d/60-interlude.lua" <<'LUA'
-- Interlude's private test server: no Bluetooth (it needs the system bus).
bluez_monitor.enabled = false
LUA
}

# Runs inside dbus-run-session: starts the three daemons, records their pids, waits for them.
# The session ends (and dbus-run-session stops its bus) when all three have exited; a SIGTERM to
# this script stops them first.
_interlude_pipewire_session_script='
dir=$1
trap "kill \$(jobs -p) 2>/dev/null; wait; exit 0" TERM
pipewire >"$dir/pipewire.log" 2>&1 </dev/null &
echo $! >"$dir/pipewire.pid"
for ((i = 0; i < 200; i++)); do [ -S "$XDG_RUNTIME_DIR/pipewire-0" ] && break; sleep 0.05; done
wireplumber >"$dir/wireplumber.log" 2>&1 </dev/null &
echo $! >"$dir/wireplumber.pid"
pipewire-pulse >"$dir/pipewire-pulse.log" 2>&1 </dev/null &
echo $! >"$dir/pipewire-pulse.pid"
wait
'

interlude_start_pipewire() {
    local dir=${1:?usage: interlude_start_pipewire DIR}
    mkdir -p "$dir/runtime" "$dir/home" "$dir/state" || return 1
    dir=$(cd "$dir" && pwd) || return 1
    chmod 700 "$dir/runtime"
    local sink=interlude_out sock="$dir/runtime/pulse/native" p

    if [ -f "$dir/session.pid" ] && _interlude_alive "$(cat "$dir/session.pid")"; then
        echo "interlude_start_pipewire: a server from $dir is already running (pid $(cat "$dir/session.pid"))" >&2
        return 1
    fi
    for p in dbus-run-session pipewire pipewire-pulse wireplumber pactl; do
        command -v "$p" >/dev/null 2>&1 || { echo "interlude_start_pipewire: $p not found" >&2; return 1; }
    done
    rm -f "$dir"/{pipewire,wireplumber,pipewire-pulse,bus}.pid "$dir/runtime/pipewire-0" "$sock"
    _interlude_pipewire_write_config "$dir" "$sink" || return 1

    # The daemons' environment only: private folders, no inherited server or bus addresses. perl (from
    # perl-base, which Debian always has) clears the signal mask first: a process started from a Swift
    # test (Foundation's Process) inherits that thread's blocked signals, and a daemon with SIGTERM
    # blocked ignores interlude_stop_pipewire, as dbus-daemon then ignores dbus-run-session's SIGTERM
    # and outlives the session.
    "${_interlude_unblock[@]}" env -u PULSE_SERVER -u PULSE_RUNTIME_PATH -u PULSE_CONFIG -u PIPEWIRE_REMOTE -u PIPEWIRE_RUNTIME_DIR \
        -u PIPEWIRE_CONFIG_DIR -u DBUS_SESSION_BUS_ADDRESS -u DISPLAY -u WAYLAND_DISPLAY \
        XDG_RUNTIME_DIR="$dir/runtime" HOME="$dir/home" XDG_CONFIG_HOME="$dir/config" \
        XDG_STATE_HOME="$dir/state" XDG_DATA_HOME="$dir/home/.local/share" \
        dbus-run-session -- bash -c "$_interlude_pipewire_session_script" interlude-pipewire "$dir" \
        >"$dir/session.log" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$dir/session.pid"

    local i ok=0
    for ((i = 0; i < 200; i++)); do   # 200 × 50 ms = 10 s: pulse answers and the null sink is the default
        if [ "$(pactl -s "unix:$sock" get-default-sink 2>/dev/null)" = "$sink" ]; then ok=1; break; fi
        if ! _interlude_alive "$pid"; then break; fi
        sleep 0.05
    done
    if [ $ok != 1 ]; then
        echo "interlude_start_pipewire: no pipewire-pulse at unix:$sock with default sink $sink within 10 s" >&2
        for p in session pipewire wireplumber pipewire-pulse; do
            [ -s "$dir/$p.log" ] && { echo "--- $dir/$p.log" >&2; tail -n 10 "$dir/$p.log" >&2; }
        done
        interlude_stop_pipewire "$dir"
        return 1
    fi

    # The session's bus daemon, in case it has to be stopped by hand (see interlude_stop_pipewire).
    ps -o pid=,comm= --ppid "$pid" 2>/dev/null | awk '$2 == "dbus-daemon" { print $1 }' >"$dir/bus.pid"


    export PULSE_SERVER="unix:$sock"
    export INTERLUDE_TEST_SINK="$sink"
    export INTERLUDE_AUDIO_SERVER=pipewire
    echo "interlude_start_pipewire: $(pactl info 2>/dev/null | sed -n 's/^Server Name: //p') (session pid $pid) at $PULSE_SERVER (sink $sink, 48 kHz)" >&2
}

# SIGTERMs the processes in the given pid files together, waits up to 5 s for them, SIGKILLs what is
# left, and reaps those that are our children.
_interlude_pipewire_stop_pids() {
    local file pid pids=() i left
    for file in "$@"; do
        [ -f "$file" ] || continue
        pid=$(cat "$file")
        rm -f "$file"
        [ -n "$pid" ] || continue
        pids+=("$pid")
        _interlude_alive "$pid" && kill -TERM "$pid" 2>/dev/null
    done
    for ((i = 0; i < 50; i++)); do
        left=0
        for pid in "${pids[@]}"; do _interlude_alive "$pid" && left=1; done
        [ $left = 0 ] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        if _interlude_alive "$pid"; then
            echo "interlude_stop_pipewire: pid $pid ignored SIGTERM for 5 s; sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null
        fi
        wait "$pid" 2>/dev/null || true
    done
}

interlude_stop_pipewire() {
    local dir=${1:?usage: interlude_stop_pipewire DIR}
    local pid i child
    # The three daemons; then the session script has nothing left to wait for, and dbus-run-session
    # stops its bus and exits by itself. (A SIGTERM to dbus-run-session would end it but leave its bus
    # daemon and the session script running: only if it has not ended after 5 s do its children get
    # one.)
    _interlude_pipewire_stop_pids "$dir/pipewire-pulse.pid" "$dir/wireplumber.pid" "$dir/pipewire.pid"
    if [ -f "$dir/session.pid" ]; then
        pid=$(cat "$dir/session.pid")
        for ((i = 0; i < 50; i++)); do _interlude_alive "$pid" || break; sleep 0.1; done
        if _interlude_alive "$pid"; then
            echo "interlude_stop_pipewire: the D-Bus session (pid $pid) did not end by itself; stopping its children" >&2
            for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do kill -TERM "$child" 2>/dev/null; done
        fi
        _interlude_pipewire_stop_pids "$dir/session.pid"
    fi
    # dbus-run-session stops its bus with SIGTERM and does not wait: make sure it is gone.
    _interlude_pipewire_stop_pids "$dir/bus.pid"
    rm -f "$dir/runtime/pulse/native" "$dir/runtime/pipewire-0"
}
