import CSystemdBus

/// The service manager's readiness protocol (`sd_notify(3)`, libsystemd): the daemon says when it
/// serves and when it stops, so that systemd (the unit's `Type=notify`) holds the units ordered
/// after it, and a `systemctl reload` issued during the start, until the socket is open. With
/// `Type=simple` the daemon counted as started when it was forked, and a reload in its first
/// milliseconds (before it watched SIGHUP) ended it by the signal (a stranger's find). Does
/// nothing where no manager asks for it (`$NOTIFY_SOCKET` unset: a daemon started by hand or by
/// a test).
public enum ServiceManager {
    /// Tells the manager the daemon is ready (`READY=1`), with `status` shown by `systemctl status`.
    /// - Returns: whether a manager was told (false: none asked, or the message could not be sent).
    @discardableResult
    public static func ready(status: String) -> Bool { notify("READY=1\nSTATUS=\(status)") }

    /// Tells the manager the daemon is stopping (`STOPPING=1`).
    @discardableResult
    public static func stopping() -> Bool { notify("STOPPING=1") }

    private static func notify(_ state: String) -> Bool {
        // Control characters other than the newlines between assignments are left out.
        let clean = String(state.unicodeScalars.filter { $0 == "\n" || $0.value >= 0x20 })
        return sd_notify(0, clean) > 0
    }
}
