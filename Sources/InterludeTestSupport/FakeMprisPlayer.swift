import Foundation

/// A minimal MPRIS player in python3-dbus (and python3-gi's GLib main loop) for the tests: a player
/// whose behaviour a test chooses, where mpv's cannot be (issue 10).
public enum FakeMprisPlayer {
    /// The interpreter with Debian's python3-dbus and python3-gi.
    public static let python = "/usr/bin/python3"
    /// Whether python3-dbus and python3-gi are installed.
    public static var available: Bool {
        FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/gi")
            && FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dbus")
    }

    /// Writes the script into `folder` and returns its path.
    public static func write(into folder: String) throws -> String {
        let path = folder + "/fake-mpris-player.py"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Arguments: `NAME CANPAUSE OBEYS TONE SOCKET [STATUS [SLOW]]`. It owns `org.mpris.MediaPlayer2.NAME`
    /// at `/org/mpris/MediaPlayer2` and starts in STATUS (default `Playing`). With SLOW (seconds,
    /// default 0) its first `GetAll(org.mpris.MediaPlayer2.Player)` answers only after that long,
    /// its main loop blocked meanwhile (as mpv's plugin while mpv's core is busy starting). With TONE other
    /// than `-` it plays TONE through paplay while Playing, with its own pid as
    /// `application.process.id` (so a daemon matches the stream to it) and `interlude.daemon=SOCKET`.
    /// `Pause` pauses it only when CANPAUSE is 1 and OBEYS is 1 or 2 (else it is a no-op, as some
    /// real players' is); with OBEYS 2 it plays again right after (two `PropertiesChanged` signals
    /// in a row, as when its user presses play at once). `Play` and `PlayPause` work. Each change
    /// is a `PropertiesChanged` signal carrying the new `PlaybackStatus`.
    public static let script = #"""
    import ctypes, os, signal, subprocess, sys, time
    import dbus, dbus.service, dbus.mainloop.glib
    from gi.repository import GLib
    name, can_pause, obeys, tone, socket = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4], sys.argv[5]
    ROOT, PLAYER, PROPS = "org.mpris.MediaPlayer2", "org.mpris.MediaPlayer2.Player", "org.freedesktop.DBus.Properties"
    state = {"status": sys.argv[6] if len(sys.argv) > 6 else "Playing", "child": None,
             "slow": float(sys.argv[7]) if len(sys.argv) > 7 else 0}
    def start():
        if tone == "-": return
        env = dict(os.environ, PULSE_PROP="application.process.id=%d interlude.daemon=%s" % (os.getpid(), socket))
        # PR_SET_PDEATHSIG(SIGKILL): paplay ends with this player, even when the test kills it.
        state["child"] = subprocess.Popen(["paplay", tone], env=env, preexec_fn=lambda: ctypes.CDLL("libc.so.6").prctl(1, 9))
    def stop():
        if state["child"]: state["child"].kill(); state["child"].wait(); state["child"] = None
    class Player(dbus.service.Object):
        def props(self):
            return {"PlaybackStatus": state["status"], "CanPause": dbus.Boolean(can_pause), "CanPlay": dbus.Boolean(True),
                    "CanControl": dbus.Boolean(True)}
        @dbus.service.method(PROPS, in_signature="ss", out_signature="v")
        def Get(self, iface, prop):
            return self.GetAll(iface)[prop]
        @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
        def GetAll(self, iface):
            if iface == ROOT: return {"Identity": "Fake " + name, "DesktopEntry": "fake-" + name, "CanQuit": dbus.Boolean(False)}
            if state["slow"] > 0: time.sleep(state["slow"]); state["slow"] = 0
            return self.props()
        @dbus.service.signal(PROPS, signature="sa{sv}as")
        def PropertiesChanged(self, iface, changed, invalidated): pass
        def set(self, status):
            if status == state["status"]: return
            state["status"] = status
            stop() if status != "Playing" else start()
            self.PropertiesChanged(PLAYER, {"PlaybackStatus": status}, [])
        @dbus.service.method(PLAYER)
        def Pause(self):
            if can_pause and obeys != "0": self.set("Paused")
            if can_pause and obeys == "2": self.set("Playing")  # and its user plays it again at once
        @dbus.service.method(PLAYER)
        def Play(self): self.set("Playing")
        @dbus.service.method(PLAYER)
        def PlayPause(self): self.set("Paused" if state["status"] == "Playing" else "Playing")
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    player = Player(bus, "/org/mpris/MediaPlayer2")
    if state["status"] == "Playing": start()
    bus_name = dbus.service.BusName("org.mpris.MediaPlayer2." + name, bus)
    loop = GLib.MainLoop()
    signal.signal(signal.SIGTERM, lambda *a: (stop(), loop.quit()))
    GLib.timeout_add(100, lambda: True)  # lets the SIGTERM handler run
    loop.run()
    """#
}
