import Foundation
import InterludePolicy
import Testing

// N8 schedules and wall-clock triggers across daylight-saving changes (Europe/Berlin, 2025), and
// N15's missed-trigger handling, with the clock injected.

private let app = "org.example.Calendar"
private let utc = NotificationHarness.utc

@Suite struct NotificationScheduleTests {
    static func berlin(start: String) -> NotificationHarness {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), focusModes: [:], timeZone: "Europe/Berlin"),
                                    start: utc(start))
        h.authorize(app)
        return h
    }

    /// Runs the clock like the engine does, waking only at `nextDeadline`, until `end`; returns delivery times.
    static func runByDeadlines(_ h: inout NotificationHarness, until end: NotificationTime) -> [NotificationTime] {
        var times: [NotificationTime] = []
        while let d = NotificationPolicy.nextDeadline(h.state, config: h.config), d <= end {
            h.tick(at: d)
            times += h.deliveries().map(\.deliveredAt)
        }
        return times
    }

    /// Runs the clock in fixed steps (a polling engine, or a late one) until `end`; returns delivery times.
    static func runByPolling(_ h: inout NotificationHarness, every step: Double, until end: NotificationTime) -> [NotificationTime] {
        var times: [NotificationTime] = []
        while h.now < end {
            h.advance(step)
            times += h.deliveries().map(\.deliveredAt)
        }
        return times
    }

    struct DSTCase: CustomTestStringConvertible, Sendable {
        var name: String
        var start: String
        var end: String
        var hour: Int
        var minute: Int
        var expected: [String]
        var testDescription: String { name }
    }

    static let dstCases: [DSTCase] = [
        DSTCase(name: "spring forward: 02:30 does not exist, fires once at 03:00 CEST",
                start: "2025-03-29T12:00:00Z", end: "2025-03-31T12:00:00Z", hour: 2, minute: 30,
                expected: ["2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"]),
        DSTCase(name: "fall back: 02:30 occurs twice, fires once (the first)",
                start: "2025-10-25T12:00:00Z", end: "2025-10-27T12:00:00Z", hour: 2, minute: 30,
                expected: ["2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"]),
        DSTCase(name: "daily 09:00 around spring forward",
                start: "2025-03-28T12:00:00Z", end: "2025-03-31T12:00:00Z", hour: 9, minute: 0,
                expected: ["2025-03-29T08:00:00Z", "2025-03-30T07:00:00Z", "2025-03-31T07:00:00Z"]),
        DSTCase(name: "daily 09:00 around fall back",
                start: "2025-10-24T12:00:00Z", end: "2025-10-27T12:00:00Z", hour: 9, minute: 0,
                expected: ["2025-10-25T07:00:00Z", "2025-10-26T08:00:00Z", "2025-10-27T08:00:00Z"]),
    ]

    @Test(arguments: dstCases)
    func N8_dailyWallClockTriggerAcrossDaylightSaving(c: DSTCase) {
        let trigger = NotificationTrigger.calendar(.init(hour: c.hour, minute: c.minute), repeats: true)
        var byDeadline = Self.berlin(start: c.start)
        byDeadline.post("daily", from: app, trigger: trigger)
        #expect(Self.runByDeadlines(&byDeadline, until: utc(c.end)) == c.expected.map(utc))

        var byPolling = Self.berlin(start: c.start)
        byPolling.post("daily", from: app, trigger: trigger)
        #expect(Self.runByPolling(&byPolling, every: 600, until: utc(c.end)) == c.expected.map(utc))
    }

    @Test func N8_nonexistentOneShotTimeFiresOnceAtFirstValidMoment() {
        var h = Self.berlin(start: "2025-03-29T12:00:00Z")
        let d = h.post("once", from: app, trigger: .calendar(.init(year: 2025, month: 3, day: 30, hour: 2, minute: 30), repeats: false))
        #expect(d?.outcome == .held(until: utc("2025-03-30T01:00:00Z")))  // 03:00 CEST
        #expect(d?.rules == ["N8"])
        #expect(Self.runByPolling(&h, every: 300, until: utc("2025-04-02T00:00:00Z")) == [utc("2025-03-30T01:00:00Z")])
    }

    @Test func N8_wallClockResolvesLocalTimesByThePolicy() {
        let berlin = NotificationWallClock(timeZoneIdentifier: "Europe/Berlin")!
        #expect(berlin.instant(year: 2025, month: 3, day: 30, hour: 2, minute: 30) == utc("2025-03-30T01:00:00Z"))
        #expect(berlin.instant(year: 2025, month: 3, day: 30, hour: 3, minute: 0) == utc("2025-03-30T01:00:00Z"))
        #expect(berlin.instant(year: 2025, month: 3, day: 30, hour: 1, minute: 59) == utc("2025-03-30T00:59:00Z"))
        #expect(berlin.instant(year: 2025, month: 10, day: 26, hour: 2, minute: 30) == utc("2025-10-26T00:30:00Z"))
        #expect(berlin.instant(year: 2025, month: 10, day: 26, hour: 3, minute: 0) == utc("2025-10-26T02:00:00Z"))
        #expect(berlin.components(at: utc("2025-10-26T01:30:00Z")).hour == 2)  // the second 02:30 reads as 02:30
        #expect(NotificationWallClock(timeZoneIdentifier: "Not/AZone") == nil)
    }

    @Test(arguments: [
        // (local time to test, covered by a Monday 22:00–07:00 window?)
        ("2025-06-03T00:00:00Z", true),   // Tuesday 02:00 CEST: Monday's window
        ("2025-06-02T01:00:00Z", false),  // Monday 03:00 CEST: would be Sunday's window, which is not scheduled
        ("2025-06-02T20:00:00Z", true),   // Monday 22:00 CEST: start is inside
        ("2025-06-03T05:00:00Z", false),  // Tuesday 07:00 CEST: end is outside
        ("2025-06-03T21:00:00Z", false),  // Tuesday 23:00 CEST: Tuesday is not scheduled
    ])
    func N8_windowCrossingMidnightBelongsToStartDay(time: String, covered: Bool) {
        let window = FocusScheduleWindow(weekdays: [.monday], start: .init(hour: 22, minute: 0), end: .init(hour: 7, minute: 0))
        let berlin = NotificationWallClock(timeZoneIdentifier: "Europe/Berlin")!
        #expect((berlin.coveringStart(of: window, at: utc(time)) != nil) == covered)

        // And through the policy: the scheduled focus is in effect exactly then.
        var h = NotificationHarness(config: .init(focusModes: ["sleep": .init(schedule: [window])], timeZone: "Europe/Berlin"),
                                    start: utc("2025-06-01T12:00:00Z"))
        h.tick(at: utc(time))
        #expect((h.state.focus.active?.name == "sleep") == covered)
    }

    @Test func N8_scheduleWindowFollowsLocalTimeAcrossSpringForward() {
        // Saturday 22:00 CET → Sunday 07:00 CEST is 8 hours long that night.
        let window = FocusScheduleWindow(weekdays: [.saturday], start: .init(hour: 22, minute: 0), end: .init(hour: 7, minute: 0))
        var h = NotificationHarness(config: .init(focusModes: ["sleep": .init(schedule: [window])], timeZone: "Europe/Berlin"),
                                    start: utc("2025-03-29T12:00:00Z"))
        var changes: [(NotificationTime, String?)] = []
        while let d = NotificationPolicy.nextDeadline(h.state, config: h.config), d <= utc("2025-03-31T00:00:00Z") {
            for case .focusChanged(let focus, _, _) in h.events(in: h.tick(at: d)) { changes.append((d, focus)) }
        }
        #expect(changes.map(\.0) == [utc("2025-03-29T21:00:00Z"), utc("2025-03-30T05:00:00Z")])
        #expect(changes.map(\.1) == ["sleep", nil])
    }

    @Test func N8_intervalTriggersAreAbsolute() {
        // 01:30 CET + 1 h is 03:30 CEST: exactly 3600 s, whatever the wall clock says.
        var h = Self.berlin(start: "2025-03-30T00:30:00Z")
        h.post("hourly", from: app, trigger: .interval(seconds: 3600, repeats: true))
        h.post("once", from: app, trigger: .interval(seconds: 5400, repeats: false))
        let times = Self.runByDeadlines(&h, until: utc("2025-03-30T03:30:00Z"))
        #expect(times == ["2025-03-30T01:30:00Z", "2025-03-30T02:00:00Z", "2025-03-30T02:30:00Z", "2025-03-30T03:30:00Z"].map(utc))
    }

    @Test(arguments: [
        (59.0, true, NotificationErrorCode?.some(.badRequest)),
        (60.0, true, nil),
        (5.0, false, nil),
        (0.0, false, .badRequest),
        (-1.0, false, .badRequest),
    ])
    func N8_repeatingIntervalNeedsSixtySeconds(seconds: Double, repeats: Bool, error: NotificationErrorCode?) {
        var h = Self.berlin(start: "2025-06-01T12:00:00Z")
        let d = h.post("r", from: app, trigger: .interval(seconds: seconds, repeats: repeats))
        #expect(h.errorCode == error)
        if error != nil {
            #expect(d?.rules == ["N8"])
            #expect(h.state.pending.isEmpty)
        } else {
            #expect(h.state.pending.count == 1)
        }
    }

    /// The refusal names the field that is out of range (a stranger's find: hour 25 said "invalid
    /// or never fires", naming nothing), or says that no date matches.
    @Test(arguments: [
        (NotificationCalendarMatch(year: 2020, month: 1, day: 1, hour: 9), "no date in the next 10 years matches"),
        (NotificationCalendarMatch(month: 2, day: 30, hour: 9), "no date in the next 10 years matches"),
        (NotificationCalendarMatch(year: 2025, month: 6, day: 1, hour: 8), "no date in the next 10 years matches"),  // this morning, past
        (NotificationCalendarMatch(year: 2036), "more than 10 years"),  // 10.6 years ahead: too far, not never
        (NotificationCalendarMatch(hour: 25), "trigger.calendar: hour 25 is not 0…23"),
        (NotificationCalendarMatch(hour: 24), "trigger.calendar: hour 24 is not 0…23"),
        (NotificationCalendarMatch(month: 13), "trigger.calendar: month 13 is not 1…12"),
        (NotificationCalendarMatch(minute: 60), "trigger.calendar: minute 60 is not 0…59"),
        (NotificationCalendarMatch(), "trigger.calendar: no field is set"),
    ])
    func N8_calendarTriggerThatNeverFiresIsBadRequest(match: NotificationCalendarMatch, says: String) {
        var h = Self.berlin(start: "2025-06-01T12:00:00Z")
        h.post("never", from: app, trigger: .calendar(match, repeats: false))
        #expect(h.errorCode == .badRequest)
        guard case .failed(_, let message, _)? = h.reply else { Issue.record("not refused"); return }
        #expect(message.contains(says), "\(message)")
    }

    /// An interval trigger out of bounds names `trigger.in`, its value and the bound as typed
    /// (it said "interval must be > 0 s" and "need ≥ 60.0 s": no param, and a number never typed).
    @Test(arguments: [
        (NotificationTrigger.interval(seconds: 0, repeats: false), "trigger.in must be > 0 s, not 0"),
        (.interval(seconds: -5, repeats: false), "trigger.in must be > 0 s, not -5"),
        (.interval(seconds: -0.5, repeats: true), "trigger.in must be > 0 s, not -0.5"),
        (.interval(seconds: 10, repeats: true), "a repeating trigger.in must be ≥ 60 s, not 10"),
        (.interval(seconds: 59.5, repeats: true), "a repeating trigger.in must be ≥ 60 s, not 59.5"),
    ])
    func N8_anIntervalTriggerOutOfBoundsNamesTriggerInAndItsValue(trigger: NotificationTrigger, says: String) {
        var h = Self.berlin(start: "2025-06-01T12:00:00Z")
        h.post("interval", from: app, trigger: trigger)
        #expect(h.errorCode == .badRequest)
        guard case .failed(_, let message, _)? = h.reply else { Issue.record("not refused"); return }
        #expect(message == says)
    }

    /// An unknown weekday is quoted as typed (it was quoted lowercased).
    @Test func N8_anUnknownWeekdayIsQuotedAsTyped() {
        #expect {
            _ = try JSONDecoder().decode(NotificationWeekday.self, from: Data(#""Mondy""#.utf8))
        } throws: { e in
            "\(e)".contains(#"unknown weekday "Mondy""#)
        }
        #expect((try? JSONDecoder().decode(NotificationWeekday.self, from: Data(#""MON""#.utf8))) == .monday)
    }

    @Test(arguments: [
        (NotificationCalendarMatch(minute: 30), "2025-06-01T12:30:00Z"),  // hourly at :30 (UTC+2 here, minutes agree)
        (NotificationCalendarMatch(weekday: .monday, hour: 8), "2025-06-02T06:00:00Z"),
        (NotificationCalendarMatch(day: 1, hour: 0), "2025-06-30T22:00:00Z"),  // 1 July 00:00 CEST
        (NotificationCalendarMatch(month: 2, day: 29, hour: 12), "2028-02-29T11:00:00Z"),
        // 9.6 years ahead: found (the search stopped at eight years, a stranger's find).
        (NotificationCalendarMatch(year: 2035), "2034-12-31T23:00:00Z"),
        (NotificationCalendarMatch(year: 2034, month: 12, day: 31, hour: 23), "2034-12-31T22:00:00Z"),
    ])
    func N8_calendarComponentsMatchLikeDateComponents(match: NotificationCalendarMatch, first: String) {
        let berlin = NotificationWallClock(timeZoneIdentifier: "Europe/Berlin")!
        #expect(berlin.nextOccurrence(of: match, after: utc("2025-06-01T12:10:00Z")) == utc(first))
    }

    @Test(arguments: [
        // (seconds down after the last event, deliveries, next fire after the restart) for a
        // 60 s repeating trigger added at 0, with the default 60 s tolerance.
        (335.0, 1, 360.0),  // 300 is 35 s back: within the tolerance, on time; 60…240 missed
        (390.0, 1, 420.0),  // 360 is 30 s back: on time
        (419.5, 1, 420.0),  // 360 is 59.5 s back: still on time
        (59.0, 0, 60.0),    // nothing due yet
    ])
    func N15_aRepeatingTriggerSkipsMissedOccurrencesButNotOneWithinTheTolerance(downUntil: Double, delivered: Int, next: Double) {
        var h = Self.berlin(start: "2025-06-01T12:00:00Z")
        let t0 = h.now
        h.post("every-minute", from: app, trigger: .interval(seconds: 60, repeats: true))
        h.tick(at: t0 + 10)
        let e = h.tick(at: t0 + downUntil)
        #expect(h.deliveries(in: e).count == delivered)
        #expect(h.deliveries(in: e).allSatisfy { !$0.late })
        #expect(h.state.pending.map(\.fireAt) == [t0 + next])
    }

    @Test func N15_missedOneShotIsDeliveredOnceLateAndRepeatingSkipsToNext() {
        var h = Self.berlin(start: "2025-06-01T12:00:00Z")
        h.post("once", from: app, trigger: .interval(seconds: 600, repeats: false))
        h.post("daily", from: app, trigger: .calendar(.init(hour: 15, minute: 0), repeats: true))
        // The daemon was down for two days.
        let e = h.tick(at: utc("2025-06-03T12:00:00Z"))
        #expect(h.deliveries(in: e).map(\.request.identifier) == ["once"])
        #expect(h.deliveries(in: e).first?.late == true)
        // Shown when the daemon came back, not when it was due (two days earlier).
        #expect(h.deliveries(in: e).first?.deliveredAt == utc("2025-06-03T12:00:00Z"))
        #expect(h.state.decisionLog.last?.identifier == "once")
        #expect(h.state.decisionLog.last?.time == utc("2025-06-03T12:00:00Z"))
        #expect(h.state.pending.map(\.fireAt) == [utc("2025-06-03T13:00:00Z")])
    }

    @Test func N15_aTriggerFiredOnTimeIsDeliveredAtItsDueTime() {
        var h = Self.berlin(start: "2025-06-01T12:00:00Z")
        h.post("soon", from: app, trigger: .interval(seconds: 600, repeats: false))
        // The engine's tick comes 30 s after the due time (within the 60 s tolerance): on time.
        let e = h.tick(at: utc("2025-06-01T12:10:30Z"))
        #expect(h.deliveries(in: e).map(\.late) == [false])
        #expect(h.deliveries(in: e).first?.deliveredAt == utc("2025-06-01T12:10:00Z"))
    }
}

/// Times in the daemon's log (`held until …`, N8) are ISO 8601 in UTC, computed by the pure policy.
@Suite struct NotificationTimeTextTests {
    @Test(arguments: [
        (0.0, "1970-01-01T00:00:00Z"),
        (951_782_400.0, "2000-02-29T00:00:00Z"),          // a leap day of a century leap year
        (1_796_220_000.9, "2026-12-02T14:00:00Z"),        // fractions cut, not rounded
        (4_107_542_399.0, "2100-02-28T23:59:59Z"),        // 2100 is not a leap year
        (-1.0, "1969-12-31T23:59:59Z"),
    ])
    func iso8601(seconds: Double, text: String) {
        #expect(NotificationTime(seconds).iso8601 == text)
    }

    @Test func aHeldOutcomeSaysWhenInUTC() {
        #expect(NotificationDecision.Outcome.held(until: NotificationTime(1_796_220_000)).description == "held until 2026-12-02T14:00:00Z")
    }
}

/// N8: how many notifications may wait for a trigger, per app (`maxPendingPerApp`) and over all
/// apps (`maxPendingTotal`). Without a bound one app could make every app's add slower (the
/// stranger's review of issue 9: 19 ms an add at 16,000 scheduled).
@Suite struct NotificationPendingLimitTests {
    static let calendar = "org.example.Calendar"
    static let chat = "org.example.Chat"

    static func harness(perApp: Int = 3, total: Int = 5) -> NotificationHarness {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), maxPendingPerApp: perApp,
                                                  maxPendingTotal: total, timeZone: "UTC"))
        h.authorize(calendar)
        h.authorize(chat)
        return h
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        /// Posts before the one checked: (app, identifier), each with a one-hour trigger.
        var before: [(String, String)]
        var app: String
        var identifier: String
        var trigger: Bool
        /// nil: accepted (held for its trigger or delivered); else the refusal's code.
        var refused: NotificationErrorCode?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "under the app's limit: held", before: [(calendar, "a"), (calendar, "b")],
             app: calendar, identifier: "c", trigger: true, refused: nil),
        Case(name: "at the app's limit: refused", before: [(calendar, "a"), (calendar, "b"), (calendar, "c")],
             app: calendar, identifier: "d", trigger: true, refused: .limitReached),
        Case(name: "at the app's limit, replacing a pending one (N10): held", before: [(calendar, "a"), (calendar, "b"), (calendar, "c")],
             app: calendar, identifier: "b", trigger: true, refused: nil),
        Case(name: "at the app's limit, without a trigger: delivered", before: [(calendar, "a"), (calendar, "b"), (calendar, "c")],
             app: calendar, identifier: "now", trigger: false, refused: nil),
        Case(name: "another app under its own limit, all apps at theirs: refused",
             before: [(calendar, "a"), (calendar, "b"), (calendar, "c"), (chat, "x"), (chat, "y")],
             app: chat, identifier: "z", trigger: true, refused: .limitReached),
        Case(name: "another app, all apps under theirs: held", before: [(calendar, "a"), (calendar, "b"), (calendar, "c"), (chat, "x")],
             app: chat, identifier: "y", trigger: true, refused: nil),
    ]

    @Test(arguments: cases)
    func N8_pendingLimits(c: Case) {
        var h = Self.harness()
        for (app, id) in c.before {
            #expect(h.post(id, from: app, trigger: .interval(seconds: 3600, repeats: false))?.outcome.isHeld == true)
        }
        let pendingBefore = h.state.pending
        let d = h.post(c.identifier, from: c.app, trigger: c.trigger ? .interval(seconds: 3600, repeats: false) : nil)
        if let code = c.refused {
            #expect(h.errorCode == code)
            #expect(d?.rules == ["N8"])
            #expect(h.state.pending == pendingBefore, "nothing changed")
        } else {
            #expect(h.errorCode == nil)
            #expect(d?.outcome == (c.trigger ? .held(until: h.now + 3600) : .delivered))
        }
    }

    @Test func N8_aFiredTriggerMakesRoomAgain() {
        var h = Self.harness(perApp: 2, total: 10)
        h.post("a", from: Self.calendar, trigger: .interval(seconds: 60, repeats: false))
        h.post("b", from: Self.calendar, trigger: .interval(seconds: 3600, repeats: false))
        h.post("c", from: Self.calendar, trigger: .interval(seconds: 3600, repeats: false))
        #expect(h.errorCode == .limitReached)
        h.advance(61)  // "a" fires and is delivered
        #expect(h.post("c", from: Self.calendar, trigger: .interval(seconds: 3600, repeats: false))?.outcome.isHeld == true)
        #expect(h.state.pending.map(\.request.identifier) == ["b", "c"])
    }

    @Test func N8_defaultsAre64PerAppAnd1000InAll() {
        let d = NotificationPolicyConfig()
        #expect(d.maxPendingPerApp == 64 && d.maxPendingTotal == 1000)
    }
}

extension NotificationDecision.Outcome {
    var isHeld: Bool { if case .held = self { true } else { false } }
}
