// All calendar and time-zone math of the notification policy lives in this file (N8, N9, N7
// schedules). It is the only file of the policy that imports Foundation, and only for the
// time-zone database (`TimeZone.secondsFromGMT(for:)`): civil dates, weekdays, wall-clock
// matching and daylight-saving resolution are computed here by hand so that the rules about
// times that do not exist or occur twice are ours, spelled out, and tested.
#if canImport(FoundationEssentials)
import FoundationEssentials
import FoundationInternationalization
#else
import Foundation
#endif

/// A day of the week. Raw values follow the Gregorian calendar convention 1 = Sunday … 7 = Saturday.
///
/// Decodes from a full English name (`"monday"`), a three-letter abbreviation (`"mon"`), either in
/// any case, or the raw number; encodes as the full lower-case name.
public enum NotificationWeekday: Int, Codable, Sendable, Hashable, CaseIterable {
    case sunday = 1, monday, tuesday, wednesday, thursday, friday, saturday

    /// The lower-case English name, as encoded in JSON.
    public var name: String {
        ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"][rawValue - 1]
    }

    /// Decodes from a name, an abbreviation or the number 1…7 (1 = Sunday).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let raw = try? c.decode(Int.self), let day = NotificationWeekday(rawValue: raw) {
            self = day
            return
        }
        guard let typed = try? c.decode(String.self) else {
            throw DecodingError.policyValue(in: c, "a weekday is a name (sunday…saturday, or sun…sat) or 1…7 (1 = Sunday)")
        }
        let text = typed.lowercased()
        guard let day = Self.allCases.first(where: { $0.name == text || $0.name.prefix(3) == text }) else {
            // Quoted as typed (it was quoted lowercased: "Mondy" read "mondy").
            throw DecodingError.policyValue(in: c, "unknown weekday \"\(typed)\" (sunday…saturday, or sun…sat, in any case)")
        }
        self = day
    }

    /// Encodes as the lower-case English name.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(name)
    }
}

/// A local time of day with minute precision, written `"HH:MM"` (24-hour clock) in JSON.
/// Used for summary times (N9) and focus schedule windows (N7, N8).
public struct NotificationClockTime: Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Hour 0…23.
    public var hour: Int
    /// Minute 0…59.
    public var minute: Int

    /// Makes a time of day; values are not clamped (use `isValid`).
    public init(hour: Int, minute: Int) {
        self.hour = hour
        self.minute = minute
    }

    /// Parses `"HH:MM"` (one or two hour digits, two minute digits); nil if malformed or out of range.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].count == 2, (1...2).contains(parts[0].count),
              let h = Int(parts[0]), let m = Int(parts[1]), (0...23).contains(h), (0...59).contains(m)
        else { return nil }
        hour = h
        minute = m
    }

    /// Seconds after local midnight.
    public var secondOfDay: Int { hour * 3600 + minute * 60 }

    /// Whether hour is 0…23 and minute 0…59 (always true for parsed values).
    public var isValid: Bool { (0...23).contains(hour) && (0...59).contains(minute) }

    /// `"HH:MM"`.
    public var description: String {
        (hour < 10 ? "0" : "") + String(hour) + ":" + (minute < 10 ? "0" : "") + String(minute)
    }

    /// Decodes from `"HH:MM"`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let text = try c.decode(String.self)
        guard let t = NotificationClockTime(text) else {
            throw DecodingError.policyValue(in: c, "\"\(text)\" is not a time HH:MM (00:00…23:59)")
        }
        self = t
    }

    /// Encodes as `"HH:MM"`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    /// Earlier in the day.
    public static func < (a: Self, b: Self) -> Bool { a.secondOfDay < b.secondOfDay }
}

/// The wall-clock components a calendar trigger matches (N8), like `DateComponents` on Apple systems.
///
/// Unset date fields (`year`, `month`, `day`, `weekday`) match any value. Among the time fields
/// (`hour`, `minute`, `second`), those finer than the finest one set are 0 and those coarser and
/// unset match any value: `{hour: 9}` is daily at 09:00:00, `{minute: 30}` is hourly at :30:00.
/// With no time field set, the match is at local midnight.
public struct NotificationCalendarMatch: Codable, Sendable, Hashable {
    /// Year, e.g. 2025.
    public var year: Int?
    /// Month 1…12.
    public var month: Int?
    /// Day of the month 1…31.
    public var day: Int?
    /// Day of the week.
    public var weekday: NotificationWeekday?
    /// Hour 0…23 (local).
    public var hour: Int?
    /// Minute 0…59.
    public var minute: Int?
    /// Second 0…59.
    public var second: Int?

    /// Makes a match; every field is optional.
    public init(year: Int? = nil, month: Int? = nil, day: Int? = nil, weekday: NotificationWeekday? = nil,
                hour: Int? = nil, minute: Int? = nil, second: Int? = nil) {
        self.year = year
        self.month = month
        self.day = day
        self.weekday = weekday
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// Whether at least one field is set and every set field is in range.
    public var isValid: Bool { problem == nil }

    /// What makes the match invalid, in words naming the field ("hour 25 is not 0…23", "no
    /// field is set"); nil when it is valid (N8: a request's refusal says it).
    public var problem: String? {
        let fields: [Int?] = [year, month, day, weekday?.rawValue, hour, minute, second]
        guard fields.contains(where: { $0 != nil }) else { return "no field is set (year, month, day, weekday, hour, minute, second)" }
        for (name, value, range) in [("month", month, 1...12), ("day", day, 1...31), ("hour", hour, 0...23),
                                     ("minute", minute, 0...59), ("second", second, 0...59)] {
            if let value, !range.contains(value) { return "\(name) \(value) is not \(range.lowerBound)…\(range.upperBound)" }
        }
        return nil
    }
}

/// A focus schedule window (N7, N8): on the given weekdays, from `start` to `end` local time.
///
/// A window belongs to the day it starts on. If `end` is not after `start` it ends on the next day
/// (Monday 22:00–07:00 covers Tuesday 02:00, not Monday 03:00); `start == end` lasts 24 hours.
/// An empty `weekdays` list means every day.
public struct FocusScheduleWindow: Codable, Sendable, Hashable {
    /// Days the window starts on; empty = every day.
    public var weekdays: [NotificationWeekday]
    /// Local start time.
    public var start: NotificationClockTime
    /// Local end time (on the next day if not after `start`).
    public var end: NotificationClockTime

    /// Makes a window.
    public init(weekdays: [NotificationWeekday], start: NotificationClockTime, end: NotificationClockTime) {
        self.weekdays = weekdays
        self.start = start
        self.end = end
    }

    private enum CodingKeys: String, CodingKey { case weekdays, start, end }

    /// Decodes `{"weekdays": [...], "start": "HH:MM", "end": "HH:MM"}`; `weekdays` may be missing.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        weekdays = try c.decodeIfPresent([NotificationWeekday].self, forKey: .weekdays) ?? []
        start = try c.decode(NotificationClockTime.self, forKey: .start)
        end = try c.decode(NotificationClockTime.self, forKey: .end)
    }
}

/// Local wall-clock time in one time zone: converts between instants and local civil time and
/// finds the next wall-clock occurrence of triggers, summary times and schedule boundaries (N8).
///
/// Daylight-saving policy (N8): a local time that does not exist (spring forward) resolves to the
/// first valid moment after it, i.e. the transition instant (02:30 on 2025-03-30 in Berlin is
/// 03:00 CEST); a local time that occurs twice (fall back) resolves to its first occurrence only,
/// so it fires once.
public struct NotificationWallClock: Sendable {
    private let zone: TimeZone

    /// The clock for an IANA time-zone identifier (`"Europe/Berlin"`), or the system's zone for nil.
    /// Nil if the identifier is unknown.
    public init?(timeZoneIdentifier: String?) {
        if let id = timeZoneIdentifier {
            guard let z = TimeZone(identifier: id) else { return nil }
            zone = z
        } else {
            zone = TimeZone.current
        }
    }

    /// The clock of a config: its `timeZone`, falling back to UTC if the identifier is unknown
    /// (`NotificationPolicyConfig.problems` reports that).
    init(config: NotificationPolicyConfig) {
        self = NotificationWallClock(timeZoneIdentifier: config.timeZone)
            ?? NotificationWallClock(timeZoneIdentifier: "UTC")!
    }

    /// The zone's identifier.
    public var timeZoneIdentifier: String { zone.identifier }

    // MARK: Civil calendar (proleptic Gregorian), after Howard Hinnant's days_from_civil.

    /// Days since 1970-01-01 for a civil date.
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    /// The civil date of a day number (days since 1970-01-01).
    static func civil(days z0: Int) -> (year: Int, month: Int, day: Int) {
        let z = z0 + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? yoe + era * 400 + 1 : yoe + era * 400, m, d)
    }

    /// The weekday of a day number (1970-01-01 was a Thursday).
    static func weekday(days: Int) -> NotificationWeekday {
        NotificationWeekday(rawValue: ((days + 4) % 7 + 7) % 7 + 1)!
    }

    // MARK: Instants and local time

    /// The zone's offset from UTC in seconds at a whole-second instant.
    private func offset(_ t: Int) -> Int { zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(t))) }

    /// Local civil time at an instant: day number and second of the day.
    func local(_ t: NotificationTime) -> (day: Int, second: Int) {
        let whole = Int(t.secondsSince1970.rounded(.down))
        let l = whole + offset(whole)
        let day = l >= 0 ? l / 86400 : (l - 86399) / 86400
        return (day, l - day * 86400)
    }

    /// The instant of a local wall-clock time (`day` since 1970-01-01, `second` of that day, which
    /// may exceed 86 400 to mean a later day), resolved by the N8 daylight-saving policy above.
    func instant(day: Int, second: Int) -> NotificationTime {
        let l = day * 86400 + second
        let before = offset(l - 86400), after = offset(l + 86400)
        var firsts: [Int] = []
        for off in [before, after, offset(l)] where offset(l - off) == off { firsts.append(l - off) }
        if let first = firsts.min() { return NotificationTime(Double(first)) }
        // In a gap: the first valid moment after it is the transition, between l − after and l − before.
        var lo = l - max(before, after), hi = l - min(before, after)
        let offHi = offset(hi)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2
            if offset(mid) == offHi { hi = mid } else { lo = mid }
        }
        return NotificationTime(Double(hi))
    }

    /// The local calendar date and time at an instant, for display and tests.
    public func components(at t: NotificationTime) -> NotificationCalendarMatch {
        let (day, second) = local(t)
        let c = Self.civil(days: day)
        return NotificationCalendarMatch(year: c.year, month: c.month, day: c.day, weekday: Self.weekday(days: day),
                                         hour: second / 3600, minute: second % 3600 / 60, second: second % 60)
    }

    /// The instant of a local date and time, resolved by the N8 daylight-saving policy.
    public func instant(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int = 0) -> NotificationTime {
        instant(day: Self.days(year: year, month: month, day: day), second: hour * 3600 + minute * 60 + second)
    }

    // MARK: Matching

    /// The first instant strictly after `t` that matches `match` in local time, or nil if there is
    /// none within eleven years (e.g. a year in the past, or February 30): a little past N8's ten,
    /// so that a match 8 to 10 years ahead is found (it was eight, and such a trigger was refused
    /// as one that never fires) and one just past ten is refused as too far, not as never.
    public func nextOccurrence(of match: NotificationCalendarMatch, after t: NotificationTime) -> NotificationTime? {
        guard match.isValid else { return nil }
        let timeFields = [match.hour, match.minute, match.second]
        let finest = timeFields.lastIndex(where: { $0 != nil })
        func values(_ i: Int, _ range: Range<Int>) -> [Int] {
            if let v = timeFields[i] { return [v] }
            guard let finest else { return [0] }
            return i > finest ? [0] : Array(range)
        }
        let hours = values(0, 0..<24), minutes = values(1, 0..<60), seconds = values(2, 0..<60)
        let (startDay, startSecond) = local(t)
        for day in startDay..<(startDay + 366 * 11 + 7) {
            let c = Self.civil(days: day)
            if let y = match.year, c.year != y { if c.year > y { return nil } else { continue } }
            if let m = match.month, c.month != m { continue }
            if let d = match.day, c.day != d { continue }
            if let w = match.weekday, Self.weekday(days: day) != w { continue }
            for h in hours {
                // Two hours of slack before the local time of `t` covers any daylight-saving shift.
                if day == startDay, (h + 1) * 3600 <= startSecond - 7200 { continue }
                for m in minutes {
                    for s in seconds {
                        let candidate = instant(day: day, second: h * 3600 + m * 60 + s)
                        if candidate > t { return candidate }
                    }
                }
            }
        }
        return nil
    }

    /// The first instant strictly after `t` at the local time of day `time` (N9 summary times);
    /// nil only if `time` is out of range.
    public func nextOccurrence(of time: NotificationClockTime, after t: NotificationTime) -> NotificationTime? {
        nextOccurrence(of: NotificationCalendarMatch(hour: time.hour, minute: time.minute, second: 0), after: t)
    }

    /// The interval of `window` that starts on local day `day`, if the window runs on that weekday.
    private func interval(of window: FocusScheduleWindow, startingOn day: Int) -> (start: NotificationTime, end: NotificationTime)? {
        guard window.weekdays.isEmpty || window.weekdays.contains(Self.weekday(days: day)) else { return nil }
        let endDay = window.end > window.start ? day : day + 1
        return (instant(day: day, second: window.start.secondOfDay), instant(day: endDay, second: window.end.secondOfDay))
    }

    /// If `window` covers instant `t`, the start of the covering interval (N8: the interval belongs
    /// to the day it starts on), else nil.
    public func coveringStart(of window: FocusScheduleWindow, at t: NotificationTime) -> NotificationTime? {
        let today = local(t).day
        for day in [today, today - 1] {
            if let i = interval(of: window, startingOn: day), i.start <= t, t < i.end { return i.start }
        }
        return nil
    }

    /// The first start or end of `window` strictly after `t`, or nil if it has no weekday.
    public func nextBoundary(of window: FocusScheduleWindow, after t: NotificationTime) -> NotificationTime? {
        let today = local(t).day
        var best: NotificationTime?
        for day in (today - 1)...(today + 8) {
            guard let i = interval(of: window, startingOn: day) else { continue }
            for b in [i.start, i.end] where b > t && (best == nil || b < best!) { best = b }
        }
        return best
    }
}
