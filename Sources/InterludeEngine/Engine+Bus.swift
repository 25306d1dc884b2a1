import InterludePolicy
import InterludeWire

/// Where the engine sends what bus clients must hear: the spec's signals (Desktop Notifications
/// 1.3). Implemented by the D-Bus adapter (`InterludeBus`); calls must not block.
public protocol NotificationBusPort: Sendable {
    /// `NotificationClosed(id, reason)`: reason 1 expired, 2 dismissed by the user, 3 closed by
    /// `CloseNotification`, 4 undefined. `destination` is the unique name of the app that sent it
    /// (nil after a restart: broadcast).
    func notificationClosed(id: UInt32, reason: UInt32, destination: String?)
    /// `ActionInvoked(id, action_key)`: the user's response (N14) reaches the app.
    func actionInvoked(id: UInt32, action: String, destination: String?)
    /// The `Inhibited` property changed (a focus is on, N7): `PropertiesChanged` on the bus.
    func inhibitedChanged(_ inhibited: Bool)
}

/// One bus notification, translated by the adapter: the app id it counts as, its content (level,
/// sound, category already mapped), and what the bus adds.
public struct BusNotificationInput: Sendable, Equatable {
    /// The app id (desktop-entry hint, else app_name, else the sender's executable).
    public var app: String
    /// What it says and how it asks for attention.
    public var content: NotificationContent
    /// `replaces_id` (0 = new).
    public var replacesID: UInt32
    /// Its actions (N14), the spec's `default` action left out (it is always allowed).
    public var actions: [NotificationAction]
    /// `transient` hint: not kept in the center after delivery.
    public var transient: Bool
    /// The sender's executable (from its pid), for N3.
    public var executable: String?
    /// The sender's unique name, for the signals.
    public var sender: String?

    /// Makes an input.
    public init(app: String, content: NotificationContent, replacesID: UInt32 = 0, actions: [NotificationAction] = [],
                transient: Bool = false, executable: String? = nil, sender: String? = nil) {
        self.app = app; self.content = content; self.replacesID = replacesID; self.actions = actions
        self.transient = transient; self.executable = executable; self.sender = sender
    }
}

/// The bus side's state in the engine: the port, the mode shown by `status`, and the id map.
struct BusBridgeState {
    var port: (any NotificationBusPort)?
    var status: BusStatus?
    /// The next id to give; ids are never 0 and never reused while the daemon runs.
    var nextID: UInt32 = 1
    /// The sender of each bus notification of this run (for unicast signals).
    var senders: [UInt32: String] = [:]
    /// The `NotificationClosed` reason of removals asked for by the bus side, until the removal
    /// is seen: 3 for `CloseNotification`, 1 (expired) for a transient one leaving the center after
    /// delivery. The removal's events come once it is durable (N15), after the request that asked
    /// for it has returned, so the reason is kept until then and taken by ``Engine/busObserve(_:)``.
    var closeReasons: [UInt32: UInt32] = [:]
    /// Ids whose removal came from an answered action: closed (reason 2) after `ActionInvoked`.
    var answered: Set<UInt32> = []
    /// Do-not-disturb inhibitions held by bus clients (KDE's `Inhibit`), by cookie.
    var inhibitions: [UInt32: (owner: String, app: String, reason: String)] = [:]
    var nextCookie: UInt32 = 1
    /// The focus the inhibitions turned on (nil when they did not: it was on already).
    var inhibitFocus: String?
}

extension Engine {
    /// The identifier of the bus notification with `id` (`dbus-ID`): stable across a restart for
    /// the notifications that persist (N15).
    public static func busIdentifier(_ id: UInt32) -> String { "dbus-\(id)" }

    /// The bus id of an identifier, if it is one.
    static func busID(_ identifier: String) -> UInt32? {
        guard identifier.hasPrefix("dbus-"), let n = UInt32(identifier.dropFirst(5)), n != 0 else { return nil }
        return n
    }

    /// Connects the bus adapter: its port for signals, and the mode `status` shows. The first id
    /// given is above every bus id in the saved state (ids are never reused).
    public func attachBus(_ port: (any NotificationBusPort)?, status: BusStatus) {
        bus.port = port
        bus.status = status
        let saved = (notifState.delivered.map(\.request.identifier) + notifState.pending.map(\.request.identifier)
                     + notifState.decisionLog.map(\.identifier)).compactMap(Engine.busID)
        bus.nextID = max(bus.nextID, (saved.max() ?? 0) &+ 1)
        if bus.nextID == 0 { bus.nextID = 1 }
    }

    /// N1 for bus clients: they never ask. The first time an app is seen, the answer is the
    /// config's `bus.authorization` (`grant`, the desktop default; `deny`; or `prompt`, which
    /// leaves it undetermined for the user); an answer the user gave stays. A record the bus
    /// makes is a bus app's (``NotificationAppRecord/viaBus``).
    /// - Throws: `limitReached` for a new app when no record may be forgotten.
    func authorizeBusApp(_ app: String) throws(WireError) {
        let record = notifState.apps[app]
        if record == nil || record?.settings.authorization == .notDetermined {
            let answer: NotificationAuthorizationStatus? = switch config.string("bus.authorization") ?? "grant" {
            case "grant": .authorized
            case "deny": .denied
            default: nil
            }
            _ = try expect(notify(.busAppSeen(app: app, answer: answer)))
        }
        if notifState.apps[app]?.requestedOptions == nil {
            _ = try expect(notify(.requestAuthorization(app: app, options: [.alert, .sound, .badge])))
        }
        // No `appConnected`: a D-Bus app is not connected to the socket, and hears the user's
        // responses on the bus (its record is ``NotificationAppRecord/viaBus``).
    }

    /// `Notify` from the bus: the same `add` event of the notification core as a socket app's
    /// request. `replaces_id` of a notification of the same app keeps its id and replaces it
    /// (N10); an unknown one gets a new id. Actions become the notification's own category (N14).
    /// Returns the id (never 0) and the decision.
    /// - Throws: the policy's refusal (`notAuthorized`, …) or `storageFailed` (N15).
    ///
    /// - Parameter assignedID: companion mode: the id the display daemon gave (seen in its reply);
    ///   the same id again replaces (N10). Actions stay the display daemon's.
    public func busNotify(_ input: BusNotificationInput, assignedID: UInt32? = nil) async throws(WireError) -> (id: UInt32, decision: NotificationDecision) {
        try Engine.checkAppID(input.app)
        try authorizeBusApp(input.app)
        var id: UInt32
        if let assignedID {
            id = assignedID
        } else if input.replacesID != 0, owns(input.app, Engine.busIdentifier(input.replacesID)) {
            id = input.replacesID
        } else {
            id = bus.nextID
            bus.nextID = bus.nextID == UInt32.max ? 1 : bus.nextID + 1
        }
        let identifier = Engine.busIdentifier(id)
        var content = input.content
        if !input.actions.isEmpty, assignedID == nil {
            // N14: the notification's actions as a category of its own; categories of bus
            // notifications no longer in the center are dropped.
            let limit = notifConfig.maxActionsPerCategory
            var categories = notifState.apps[input.app]?.categories ?? [:]
            for key in categories.keys where Engine.busID(key) != nil && !owns(input.app, key) && key != identifier {
                categories[key] = nil
            }
            categories[identifier] = NotificationCategory(identifier: identifier, actions: Array(input.actions.prefix(limit)))
            if input.actions.count > limit { log("notification \(input.app)/\(identifier): \(input.actions.count) actions, the first \(limit) kept [N14]") }
            _ = try expect(notify(.registerCategories(app: input.app, categories.values.sorted { $0.identifier < $1.identifier })))
            content.categoryIdentifier = identifier
        }
        if let sender = input.sender { bus.senders[id] = sender }
        let request = NotificationRequest(identifier: identifier, content: content)
        // The Notify reply is the bus client's acknowledgement: it goes once the state is durable (N15).
        guard case let .accepted(_, decision) = try expect(await notifyDurably(.add(request, app: input.app, peerExecutablePath: input.executable))) else {
            throw WireError(.internalError, "unexpected reply")
        }
        if input.transient, owns(input.app, identifier) {
            // `transient`: delivered (and heard) but not kept in the center; closed as expired.
            bus.closeReasons[id] = 1
            if (try? notify(.removeDelivered(app: input.app, identifiers: [identifier]))) == nil { bus.closeReasons[id] = nil }
        }
        return (id, decision)
    }

    /// `CloseNotification(id)`: removes it from the center; `NotificationClosed` with reason 3
    /// follows. Only the connection that sent it (while it is known, i.e. in this run) or the
    /// named `app` may close it; another client's id is `notFound` and changes nothing.
    /// - Throws: `notFound` when no notification has that id (for this caller).
    public func busClose(id: UInt32, app: String? = nil, sender: String? = nil) throws(WireError) {
        let identifier = Engine.busIdentifier(id)
        guard let owner = notifState.delivered.first(where: { $0.request.identifier == identifier })?.app
              ?? notifState.pending.first(where: { $0.request.identifier == identifier })?.app else {
            throw WireError(.notFound, "no notification \(id)")
        }
        if let app, app != owner { throw WireError(.notFound, "no notification \(id) of \(app)") }
        if let sender, let from = bus.senders[id], from != sender { throw WireError(.notFound, "no notification \(id) of this client") }
        // A delivered one's removal is seen (busObserve) once durable; a pending one has no signal.
        if owns(owner, identifier, delivered: true) { bus.closeReasons[id] = 3 }
        do {
            _ = try expect(notify(.removePending(app: owner, identifiers: [identifier])))
            _ = try expect(notify(.removeDelivered(app: owner, identifiers: [identifier])))
        } catch {
            bus.closeReasons[id] = nil
            throw error
        }
    }

    /// The bus mode and name owner, for `status`.
    public func busStatus() -> BusStatus? { bus.status }

    /// Changes the mode `status` shows (the name was lost to another daemon, or the bus went away).
    public func setBusStatus(_ status: BusStatus) { bus.status = status }

    func owns(_ app: String, _ identifier: String, delivered only: Bool = false) -> Bool {
        notifState.delivered.contains { $0.app == app && $0.request.identifier == identifier }
            || !only && notifState.pending.contains { $0.app == app && $0.request.identifier == identifier }
    }

    // MARK: Do not disturb over the bus (KDE's Inhibit / UnInhibit / Inhibited)

    /// `Inhibited`: whether a focus is in effect (N7), whoever turned it on.
    public func busInhibited() -> Bool { notifState.focus.active != nil }

    /// `Inhibit(desktop_entry, reason, hints)`: the configured focus (`bus.inhibitFocus`, default
    /// `doNotDisturb`) is on for as long as one inhibition is held; a focus already on stays as
    /// the user set it. Returns the cookie (never 0) once the focus it turned on is durable and
    /// `Inhibited` says so: a client that reads `Inhibited` after the reply reads the new value.
    /// - Throws: `badRequest` when `bus.inhibitFocus` names no focus mode; `storageFailed` (N15).
    public func busInhibit(owner: String, app: String, reason: String) async throws(WireError) -> UInt32 {
        let cookie = bus.nextCookie
        bus.nextCookie = bus.nextCookie == UInt32.max ? 1 : bus.nextCookie + 1
        let turnOn = bus.inhibitions.isEmpty && notifState.focus.active == nil
        bus.inhibitions[cookie] = (owner, app, reason)
        if turnOn {
            let name = config.string("bus.inhibitFocus") ?? "doNotDisturb"
            bus.inhibitFocus = name
            do { _ = try expect(await notifyDurably(.setFocus(name: name, until: nil))) } catch {
                bus.inhibitions[cookie] = nil
                if bus.inhibitFocus == name { bus.inhibitFocus = nil }
                throw error
            }
        }
        log("bus: \(app) (\(owner)) inhibits notifications: \(reason.isEmpty ? "no reason given" : reason) [N7]")
        return cookie
    }

    /// `UnInhibit(cookie)`: releases one inhibition (only its owner may); the last one turns the
    /// focus it turned on off again, unless the user changed the focus since. Returns once that
    /// is durable and `Inhibited` says so (a stranger read `True` right after the reply).
    public func busUnInhibit(cookie: UInt32, owner: String?) async {
        guard let i = bus.inhibitions[cookie], owner == nil || owner == i.owner else { return }
        bus.inhibitions[cookie] = nil
        await releaseInhibitFocusIfLast()
    }

    /// A client left the bus: its inhibitions are released (A9's spirit).
    public func busClientLeft(_ uniqueName: String) async {
        let mine = bus.inhibitions.filter { $0.value.owner == uniqueName }.map(\.key)
        guard !mine.isEmpty else { return }
        for c in mine { bus.inhibitions[c] = nil }
        log("bus: \(uniqueName) left the bus: \(mine.count) inhibition(s) released [N7]")
        await releaseInhibitFocusIfLast()
    }

    func releaseInhibitFocusIfLast() async {
        guard bus.inhibitions.isEmpty, let name = bus.inhibitFocus else { return }
        bus.inhibitFocus = nil
        if notifState.focus.active?.name == name, notifState.focus.active?.manual == true {
            _ = try? await notifyDurably(.setFocus(name: nil, until: nil))
        }
    }

    /// Watches the core's watcher events for bus notifications: removals become
    /// `NotificationClosed`, action responses `ActionInvoked` (then closed, reason 2, as the spec
    /// orders them).
    func busObserve(_ w: NotificationWatcherEvent) {
        guard let port = bus.port else { return }
        switch w {
        case let .removed(_, ids, reason):
            for identifier in ids {
                guard let id = Engine.busID(identifier) else { continue }
                if reason == "N14" { bus.answered.insert(id); continue }  // closed after ActionInvoked
                let code: UInt32 = bus.closeReasons.removeValue(forKey: id) ?? (reason == "request" || reason == "user" ? 2 : reason == "N11" ? 1 : 4)
                port.notificationClosed(id: id, reason: code, destination: bus.senders.removeValue(forKey: id))
            }
        case let .actionResponse(_, response):
            guard let id = Engine.busID(response.notificationIdentifier) else { return }
            let destination = bus.senders[id]
            if response.actionIdentifier != NotificationActionResponse.dismissAction {
                port.actionInvoked(id: id, action: response.actionIdentifier, destination: destination)
            }
            if bus.answered.remove(id) != nil {
                port.notificationClosed(id: id, reason: 2, destination: bus.senders.removeValue(forKey: id))
            }
        case let .focusChanged(focus, previous, _):
            if (focus == nil) != (previous == nil) { port.inhibitedChanged(focus != nil) }
            // The user turned the inhibitions' focus off or changed it: it is no longer theirs.
            if focus != bus.inhibitFocus { bus.inhibitFocus = nil }
        default: break
        }
    }
}
