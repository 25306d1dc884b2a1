/// A wall-clock instant for the notification policy: seconds since the Unix epoch
/// (1970-01-01T00:00:00Z), as a `Double`.
///
/// The policy never reads a clock: the engine passes `now` into every call (DESIGN "Shape").
/// Encodes as a bare JSON number.
public struct NotificationTime: Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Seconds since 1970-01-01T00:00:00Z.
    public var secondsSince1970: Double

    /// Makes an instant from seconds since the Unix epoch.
    public init(_ secondsSince1970: Double) { self.secondsSince1970 = secondsSince1970 }

    /// Decodes from a bare JSON number (seconds since the epoch).
    public init(from decoder: any Decoder) throws {
        secondsSince1970 = try decoder.singleValueContainer().decode(Double.self)
    }

    /// Encodes as a bare JSON number (seconds since the epoch).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(secondsSince1970)
    }

    /// Earlier in time.
    public static func < (a: Self, b: Self) -> Bool { a.secondsSince1970 < b.secondsSince1970 }
    /// The instant `seconds` later (or earlier, if negative).
    public static func + (a: Self, seconds: Double) -> Self { Self(a.secondsSince1970 + seconds) }
    /// The instant `seconds` earlier.
    public static func - (a: Self, seconds: Double) -> Self { Self(a.secondsSince1970 - seconds) }
    /// The signed distance `a − b` in seconds.
    public static func - (a: Self, b: Self) -> Double { a.secondsSince1970 - b.secondsSince1970 }

    /// `t=<seconds>`, for test output.
    public var description: String { "t=\(secondsSince1970)" }

    /// The instant in UTC as ISO 8601, to the second: `2026-12-02T15:00:00Z` (the proleptic
    /// Gregorian calendar, leap seconds not counted, as Unix time). Computed, not read from a
    /// clock or a time zone: the policy stays pure.
    public var iso8601: String {
        let seconds = Int(secondsSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let date = NotificationWallClock.civil(days: days)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let year = date.year >= 0 && date.year < 1000 ? String(repeating: "0", count: 4 - "\(date.year)".count) + "\(date.year)" : "\(date.year)"
        return "\(year)-\(two(date.month))-\(two(date.day))T\(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60))Z"
    }
}

/// How urgently a notification asks for attention (POLICY.md "N. Notification delivery").
///
/// Raw values 0–3 as the rules number them. Decodes from the name (`"timeSensitive"`) or the raw
/// number; encodes as the name.
public enum InterruptionLevel: Int, Codable, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    /// Center only, never a sound or banner (N5).
    case passive = 0
    /// The default level: banner and sound, subject to focus, ringer and rate rules.
    case active = 1
    /// Breaks through focus and the scheduled summary when allowed; not through ringer-silent (N4).
    case timeSensitive = 2
    /// Plays through everything, for entitled apps only (N3).
    case critical = 3

    /// The level's name as used in JSON (`"passive"`, `"active"`, `"timeSensitive"`, `"critical"`).
    public var description: String {
        switch self {
        case .passive: "passive"
        case .active: "active"
        case .timeSensitive: "timeSensitive"
        case .critical: "critical"
        }
    }

    /// Decodes from the level's name or its raw value 0–3.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let raw = try? c.decode(Int.self) {
            guard let level = InterruptionLevel(rawValue: raw) else {
                throw DecodingError.policyValue(in: c, "interruption level \(raw) is not 0…3")
            }
            self = level
            return
        }
        // Any other number (1.5, 7) or type is named as what it is not: a level.
        guard let name = try? c.decode(String.self) else {
            throw DecodingError.policyValue(
                in: c, "an interruption level is a name (passive, active, timeSensitive, critical) or 0…3")
        }
        guard let level = Self.allCases.first(where: { $0.description == name }) else {
            throw DecodingError.policyValue(
                in: c, "unknown interruption level \"\(name)\" (passive, active, timeSensitive, critical)")
        }
        self = level
    }

    /// Encodes as the level's name.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    /// Less urgent.
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}
