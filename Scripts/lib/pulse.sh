# shellcheck shell=bash
# Private PulseAudio server for tests and humans (sourced, not run).
#
# DESIGN.md "Facts measured on Debian 12": a headless server runs as root with no D-Bus from a
# .pa script; PULSE_RUNTIME_PATH, PULSE_STATE_PATH and HOME point into a private folder so it never
# writes the user's cookie; default-sample-rate = 48000 comes from a daemon.conf named by
# PULSE_CONFIG (set for the server process only); and a low-latency reader stays on the null sink's
# monitor for the server's whole life, or the sink's latency floats up to 2 s ("null-sink trap").
#
#   interlude_start_pulse DIR   start server + monitor reader; exports PULSE_SERVER, INTERLUDE_TEST_SINK
#   interlude_stop_pulse DIR    stop both (pids recorded in DIR/pulse.pid and DIR/reader.pid)
#   interlude_pulse_reachable   0 if `pactl info` answers with the current environment

# True while process $1 runs. A zombie (an exited child nobody reaped, e.g. after the starting shell
# has gone and init does not reap) counts as gone, which `kill -0` alone would not.
_interlude_alive() {
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    case "$state" in Z*|"") return 1 ;; *) return 0 ;; esac
}

interlude_start_pulse() {
    local dir=${1:?usage: interlude_start_pulse DIR}
    mkdir -p "$dir/runtime" "$dir/state" "$dir/home" || return 1
    dir=$(cd "$dir" && pwd) || return 1
    chmod 700 "$dir/runtime"
    local sock="$dir/pa.sock" sink=interlude_out

    if [ -f "$dir/pulse.pid" ] && _interlude_alive "$(cat "$dir/pulse.pid")"; then
        echo "interlude_start_pulse: a server from $dir is already running (pid $(cat "$dir/pulse.pid"))" >&2
        return 1
    fi
    rm -f "$sock"

    cat >"$dir/script.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$sock
load-module module-null-sink sink_name=$sink rate=48000 channels=2
set-default-sink $sink
PA
    printf 'default-sample-rate = 48000\n' >"$dir/daemon.conf"

    # Environment for the server only: the caller's shell keeps its own PULSE_CONFIG (or none).
    PULSE_CONFIG="$dir/daemon.conf" PULSE_RUNTIME_PATH="$dir/runtime" PULSE_STATE_PATH="$dir/state" \
        HOME="$dir/home" XDG_RUNTIME_DIR="$dir/runtime" XDG_CONFIG_HOME="$dir/home/.config" \
        pulseaudio -n --daemonize=no --exit-idle-time=-1 --log-target=stderr -F "$dir/script.pa" \
        >"$dir/pulse.log" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$dir/pulse.pid"

    local i
    for ((i = 0; i < 200; i++)); do   # 200 × 50 ms = 10 s
        if pactl -s "unix:$sock" info >/dev/null 2>&1; then break; fi
        if ! _interlude_alive "$pid"; then
            echo "interlude_start_pulse: pulseaudio exited at start; log $dir/pulse.log:" >&2
            tail -n 20 "$dir/pulse.log" >&2
            rm -f "$dir/pulse.pid"
            return 1
        fi
        sleep 0.05
    done
    if ! pactl -s "unix:$sock" info >/dev/null 2>&1; then
        echo "interlude_start_pulse: server at unix:$sock did not answer within 10 s; log $dir/pulse.log" >&2
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null || true
        rm -f "$dir/pulse.pid"
        return 1
    fi

    # The null-sink trap: keep a 10 ms reader on the monitor for the server's whole life.
    parec -s "unix:$sock" --latency-msec=10 --rate=48000 --channels=2 -d "$sink.monitor" --raw \
        >/dev/null 2>"$dir/reader.log" </dev/null &
    echo "$!" >"$dir/reader.pid"
    sleep 2

    export PULSE_SERVER="unix:$sock"
    export INTERLUDE_TEST_SINK="$sink"
    echo "interlude_start_pulse: server pid $pid at $PULSE_SERVER (sink $sink, 48 kHz)" >&2
}

interlude_stop_pulse() {
    local dir=${1:?usage: interlude_stop_pulse DIR}
    local pid i
    # The reader only discards audio: SIGKILL it. (SIGTERM may be blocked in it: a process spawned
    # from a Swift test inherits that thread's blocked signals.)
    if [ -f "$dir/reader.pid" ]; then
        pid=$(cat "$dir/reader.pid")
        _interlude_alive "$pid" && kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null || true
        rm -f "$dir/reader.pid"
    fi
    if [ -f "$dir/pulse.pid" ]; then
        pid=$(cat "$dir/pulse.pid")
        if _interlude_alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null
            for ((i = 0; i < 50; i++)); do _interlude_alive "$pid" || break; sleep 0.1; done
            if _interlude_alive "$pid"; then
                echo "interlude_stop_pulse: pulseaudio (pid $pid) ignored SIGTERM for 5 s; sending SIGKILL" >&2
                kill -KILL "$pid" 2>/dev/null
            fi
        fi
        wait "$pid" 2>/dev/null || true
        rm -f "$dir/pulse.pid"
    fi
    rm -f "$dir/pa.sock"
}

interlude_pulse_reachable() {
    pactl info >/dev/null 2>&1
}
