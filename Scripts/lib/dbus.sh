# shellcheck shell=bash
# A private D-Bus session bus for the tests (sourced). Its config has no <servicedir>: a bus started
# with the default session config would start dunst (or any installed notification daemon) by
# D-Bus activation whenever org.freedesktop.Notifications is free (DESIGN.md's D-Bus facts).

# Starts a private `dbus-daemon --session` listening in $1; exports DBUS_SESSION_BUS_ADDRESS and
# sets INTERLUDE_BUS_PID.
interlude_start_bus() {
    local dir=$1 out
    mkdir -p "$dir"
    cat >"$dir/session.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$dir/bus.sock</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
    out=$(dbus-daemon --config-file="$dir/session.conf" --fork --print-address=1 --print-pid=1) || return 1
    DBUS_SESSION_BUS_ADDRESS=$(printf '%s\n' "$out" | sed -n 1p)
    INTERLUDE_BUS_PID=$(printf '%s\n' "$out" | sed -n 2p)
    export DBUS_SESSION_BUS_ADDRESS
    echo "$INTERLUDE_BUS_PID" >"$dir/bus.pid"
}

# Stops the private bus started in $1.
interlude_stop_bus() {
    local dir=$1
    [ -f "$dir/bus.pid" ] && kill "$(cat "$dir/bus.pid")" 2>/dev/null
    rm -f "$dir/bus.pid"
}
