/// Who receives an event (issue 7, hole 8): an app learns only about itself. Events about one app
/// (its notifications, decisions, badge, settings, sounds, sessions and the user's action
/// responses, N14) reach that app's connections and the user's subscribed tools
/// (`server.userTools`), never another app's subscription. Notification views in events already
/// carry N13's placeholder for hidden previews, for the user's tools and the app alike. Only the
/// user's global switches (the ringer, A12, and focus, N7) reach every subscriber.
struct EventAudience: Sendable, Equatable {
    /// The user's subscribed tools.
    var user = true
    /// The app the event is about: its subscribed connections receive it…
    var app: String?
    /// …or all its connections, subscribed or not.
    var appAlways = false
    /// Every subscribed connection, whatever its app (global state only).
    var everySubscriber = false
    /// One connection that receives it in any case (a session's owner).
    var client: Int?

    /// Every subscriber: for the user's global switches (ringer, focus), no app's data.
    static let subscribers = EventAudience(everySubscriber: true)
    /// The user's subscribed tools only.
    static let userTools = EventAudience()

    /// About `app`: its connections (all of them with `always`, else the subscribed ones) and the
    /// user's subscribed tools.
    static func app(_ app: String, always: Bool = false) -> EventAudience {
        EventAudience(app: app, appAlways: always)
    }

    /// Only `app`'s connections (all with `always`), not the user's tools: for a copy of an event
    /// cut down to that app's part.
    static func appOnly(_ app: String, always: Bool = false) -> EventAudience {
        EventAudience(user: false, app: app, appAlways: always)
    }
}
