import InterludeEngine
import InterludePolicy
import InterludeWire

/// The translation of a `Notify` call into the notification core's terms (README "D-Bus
/// notifications" has it as a table). Pure: no bus, no clock. Decisions stay in the core: this
/// only says what the app asked for.
public enum NotificationMapping {
    /// Categories (spec 1.3 and the desktop portal's) that ask for at least time-sensitive (N4).
    public static let timeSensitiveCategories: Set<String> = [
        "call.incoming", "call.ongoing", "alarm.ringing", "os.battery.low", "device.error",
    ]
    /// Categories that ask for critical (still subject to N3's entitlement).
    public static let criticalCategories: Set<String> = [
        "cellbroadcast.danger.extreme", "cellbroadcast.danger.severe", "cellbroadcast.amber-alert",
        "weather.warning.extreme",
    ]
    /// Categories that are incoming calls (N7: a second call from the same sender breaks through).
    public static let callCategories: Set<String> = ["call.incoming", "call"]

    /// The app id: the `desktop-entry` hint, else `app_name`, else the sender's executable's file
    /// name; each cleaned of spaces and control characters (`Mozilla Firefox` → `Mozilla-Firefox`).
    /// nil when none gives a valid id.
    public static func appID(desktopEntry: String?, appName: String, executable: String?) -> String? {
        let exeName = executable.map { String($0.split(separator: "/").last ?? Substring($0)) }
        for candidate in [desktopEntry, appName, exeName] {
            guard let c = candidate?.trimmingSuffix(".desktop"), !c.isEmpty else { continue }
            let cleaned = String(String.UnicodeScalarView(c.unicodeScalars.map { s in
                s.properties.isWhitespace || s.value < 0x20 || s.value == 0x7f ? "-" : s
            }).prefix(255))
            if AppIdentifier.problem(cleaned) == nil { return cleaned }
        }
        return nil
    }

    /// The interruption level asked for: urgency 0 (low) → passive (N5), 1 (normal) → active,
    /// 2 (critical) → critical (N3 decides if it stays); a category above raises it.
    public static func level(urgency: UInt8, category: String?) -> InterruptionLevel {
        var level: InterruptionLevel = urgency == 0 ? .passive : urgency == 1 ? .active : .critical
        if let category {
            if criticalCategories.contains(category) { level = .critical }
            else if timeSensitiveCategories.contains(category), level < .timeSensitive { level = .timeSensitive }
        }
        return level
    }

    /// Translates one call.
    /// - Parameters:
    ///   - executable: the sender's executable from its pid (`GetConnectionUnixProcessID`), never the
    ///     message's claim (N3; the `sender-pid` hint is ignored).
    ///   - defaultSound: what plays when the notification names no sound (`bus.defaultSound`).
    /// - Throws: ``BusCallError`` InvalidArgs for a known hint of the wrong type, an urgency above
    ///   2, or no usable app id.
    public static func input(_ call: BusNotifyCall, executable: String?, defaultSound: String) throws(BusCallError) -> BusNotificationInput {
        let h = call.hints
        func string(_ key: String) throws(BusCallError) -> String? {
            switch h[key] {
            case nil: return nil
            case let .string(s)?: return s
            case let v?: throw .invalidArgs("hint \(key) must be a string, not \(v.typeName)")
            }
        }
        // A boolean, or 0/1 as an integer: `notify-send -h int:transient:1` is how many scripts
        // send it (as urgency is taken as an integer too); anything else is refused.
        func bool(_ key: String) throws(BusCallError) -> Bool {
            switch h[key] {
            case nil: return false
            case let .bool(b)?: return b
            case let .byte(b)? where b <= 1: return b == 1
            case let .int(i)? where i == 0 || i == 1: return i == 1
            case let .uint(u)? where u <= 1: return u == 1
            case .byte(let n)?: throw .invalidArgs("hint \(key) must be a boolean (or 0 or 1), not \(n)")
            case .int(let n)?: throw .invalidArgs("hint \(key) must be a boolean (or 0 or 1), not \(n)")
            case .uint(let n)?: throw .invalidArgs("hint \(key) must be a boolean (or 0 or 1), not \(n)")
            case let v?: throw .invalidArgs("hint \(key) must be a boolean (or 0 or 1), not \(v.typeName)")
            }
        }
        var urgency: UInt8 = 1
        switch h["urgency"] {
        case nil: break
        case let .byte(b)?: urgency = b
        case let .int(i)? where (0...2).contains(i): urgency = UInt8(i)
        case let .uint(u)? where u <= 2: urgency = UInt8(u)
        case let v?: throw .invalidArgs("hint urgency must be a byte 0, 1 or 2, not \(v.typeName)")
        }
        guard urgency <= 2 else { throw .invalidArgs("hint urgency must be 0 (low), 1 (normal) or 2 (critical), not \(urgency)") }
        let category = try string("category")
        let desktopEntry = try string("desktop-entry")
        let soundFile = try string("sound-file")
        let soundName = try string("sound-name")
        let suppress = try bool("suppress-sound")
        let transient = try bool("transient")
        _ = try bool("resident")
        _ = try bool("action-icons")
        guard let app = appID(desktopEntry: desktopEntry, appName: call.appName, executable: executable) else {
            throw .invalidArgs("no app id: give app_name or the desktop-entry hint")
        }
        var content = NotificationContent(title: call.summary, body: call.body)
        content.interruptionLevel = level(urgency: urgency, category: category)
        // N3: critical stays critical only for an entitled executable; any other is at most
        // time-sensitive, and the decision says why.
        if content.interruptionLevel == .critical { content.criticalFallbackLevel = .timeSensitive }
        if suppress {
            content.sound = nil
        } else if let soundFile, !soundFile.isEmpty {
            content.sound = soundFile.hasPrefix("file://") ? String(soundFile.dropFirst(7)) : soundFile
        } else if let soundName, !soundName.isEmpty {
            content.sound = soundName
        } else {
            content.sound = defaultSound == "none" ? nil : defaultSound
        }
        if let category {
            content.userInfo["category"] = category
            content.categoryIdentifier = category
            if callCategories.contains(category) {
                content.isCall = true
                content.sender = call.summary.isEmpty ? nil : call.summary
            }
        }
        if !call.icon.isEmpty { content.userInfo["icon"] = call.icon }
        var actions: [NotificationAction] = []
        var i = 0
        while i + 1 < call.actions.count {
            let key = call.actions[i], label = call.actions[i + 1]
            i += 2
            // `default` (clicking the notification) is always allowed (N14); empty keys are not actions.
            guard !key.isEmpty, key != NotificationActionResponse.defaultAction, key != NotificationActionResponse.dismissAction,
                  !actions.contains(where: { $0.identifier == key }) else { continue }
            actions.append(NotificationAction(identifier: key, title: label))
        }
        return BusNotificationInput(app: app, content: content, replacesID: call.replacesID, actions: actions,
                                    transient: transient, executable: executable, sender: call.sender)
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
