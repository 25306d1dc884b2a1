import InterludePolicy
import Testing

// N7 focus (manual and scheduled) and "ringer silent and a call in progress silence everything but critical".

private let chat = "org.example.Chat"
private let phone = "org.example.Phone"
private let boss = "org.example.Boss"

@Suite struct NotificationFocusTests {
    static func harness(_ mode: FocusModeConfig = .init(allowedApps: [boss], allowedSenders: ["+4930123"]),
                        entitled: [NotificationCriticalEntitlement] = [.init(app: "org.example.Alarm")]) -> NotificationHarness {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), entitledCriticalApps: entitled,
                                                  focusModes: ["sleep": mode], timeZone: "UTC"))
        for app in [chat, phone, boss, "org.example.Alarm"] { h.authorize(app) }
        h.send(.setFocus(name: "sleep", until: nil))
        return h
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var app: String
        var content: NotificationContent
        var breaksThrough: Bool
        var rule: String
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "ordinary app", app: chat, content: .test(), breaksThrough: false, rule: "N7"),
        Case(name: "allowed app", app: boss, content: .test(), breaksThrough: true, rule: "N7"),
        Case(name: "allowed sender", app: chat, content: .test(sender: "+4930123"), breaksThrough: true, rule: "N7"),
        Case(name: "other sender", app: chat, content: .test(sender: "+4930999"), breaksThrough: false, rule: "N7"),
        Case(name: "time-sensitive", app: chat, content: .test(.timeSensitive), breaksThrough: true, rule: "N4"),
        Case(name: "critical", app: "org.example.Alarm", content: .test(.critical), breaksThrough: true, rule: "N3"),
        Case(name: "first call", app: phone, content: .test(sender: "+4930555", isCall: true), breaksThrough: false, rule: "N7"),
    ]

    @Test(arguments: cases)
    func N7_whatBreaksThroughFocus(c: Case) {
        var h = Self.harness()
        let d = h.post("n", from: c.app, c.content)
        #expect(d?.outcome == (c.breaksThrough ? .delivered : .silenced))
        #expect(d?.rules == [c.rule])
        #expect(h.sounds().count == (c.breaksThrough ? 1 : 0))
        #expect(d?.banner == c.breaksThrough)
        #expect(h.center(c.app) == ["n"])  // silenced ones still reach the center
    }

    @Test(arguments: [(60.0, true), (180.0, true), (181.0, false)])
    func N7_secondCallFromSameSenderWithinThreeMinutesBreaksThrough(gap: Double, breaks: Bool) {
        var h = Self.harness()
        #expect(h.post("call1", from: phone, .test(sender: "+4930555", isCall: true))?.outcome == .silenced)
        h.advance(gap)
        let d = h.post("call2", from: phone, .test(sender: "+4930555", isCall: true))
        #expect(d?.outcome == (breaks ? .delivered : .silenced))
        #expect(d?.rules == ["N7"])
        #expect(h.sounds().count == (breaks ? 1 : 0))
    }

    @Test func N7_repeatedCallNeedsSameSenderAndTheFocusAllowingIt() {
        var h = Self.harness()
        h.post("c1", from: phone, .test(sender: "+4930555", isCall: true))
        h.advance(30)
        #expect(h.post("c2", from: phone, .test(sender: "+4930777", isCall: true))?.outcome == .silenced)
        h.advance(30)
        #expect(h.post("m", from: phone, .test(sender: "+4930555", isCall: false))?.outcome == .silenced)

        var off = Self.harness(.init(allowRepeatedCalls: false))
        off.post("c1", from: phone, .test(sender: "+4930555", isCall: true))
        off.advance(30)
        #expect(off.post("c2", from: phone, .test(sender: "+4930555", isCall: true))?.outcome == .silenced)
    }

    @Test func N7_silencedAreNotReplayedAndOneMissedSummaryIsSentAtTheEnd() {
        var h = Self.harness()
        h.post("a", from: chat, .test(title: "A"))
        h.advance(5)
        h.post("b", from: chat, .test(title: "B"))
        h.post("ok", from: boss)  // broke through: not missed
        h.advance(5)
        let end = h.send(.setFocus(name: nil, until: nil))
        #expect(h.sounds(in: end).isEmpty)
        #expect(h.deliveries(in: end).isEmpty)
        let missed = h.events(in: end).compactMap { e -> [NotificationMissedEntry]? in
            if case .missedDuringFocus("sleep", let m) = e { m } else { nil }
        }
        #expect(missed.count == 1)
        #expect(missed.first?.map(\.identifier) == ["a", "b"])
        #expect(h.events(in: end).contains(.focusChanged(focus: nil, previous: "sleep", manual: false)))
        // Nothing more later: the summary was sent once.
        let later = h.advance(3600)
        #expect(h.events(in: later).isEmpty)
        #expect(h.state.focus.missed.isEmpty)
    }

    @Test func N7_missedSummaryIsSentEvenWhenNothingWasMissed() {
        var h = Self.harness()
        let end = h.send(.setFocus(name: nil, until: nil))
        #expect(h.events(in: end).filter { if case .missedDuringFocus = $0 { true } else { false } }.count == 1)
    }

    @Test func N7_oneFocusAtATimeSwitchingEndsThePrevious() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant),
                                                  focusModes: ["sleep": .init(), "work": .init()], timeZone: "UTC"))
        h.authorize(chat)
        h.send(.setFocus(name: "sleep", until: nil))
        h.post("a", from: chat)
        let e = h.send(.setFocus(name: "work", until: nil))
        #expect(h.events(in: e) == [.focusChanged(focus: "work", previous: "sleep", manual: true),
                                    .missedDuringFocus(focus: "sleep", missed: [.init(app: chat, identifier: "a", title: "t", time: h.now)])])
        #expect(h.state.focus.active?.name == "work")
    }

    @Test func N7_unknownFocusIsBadRequest() {
        var h = Self.harness()
        h.send(.setFocus(name: "gaming", until: nil))
        #expect(h.errorCode == .badRequest)
        #expect(h.state.focus.active?.name == "sleep")
    }

    @Test func N7_manualFocusWithEndTimeEndsByTick() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), focusModes: ["sleep": .init()], timeZone: "UTC"))
        let until = h.now + 600
        h.send(.setFocus(name: "sleep", until: until))
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == until)
        h.advance(599)
        #expect(h.state.focus.active?.name == "sleep")
        let e = h.tick(at: until)
        #expect(h.state.focus.active == nil)
        #expect(h.events(in: e).count == 2)  // focusChanged + missedDuringFocus
    }

    @Test func N7_scheduledFocusTurnsOnAndOffAndManualOffHoldsUntilWindowEnd() {
        let window = FocusScheduleWindow(weekdays: [], start: .init(hour: 22, minute: 0), end: .init(hour: 7, minute: 0))
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant),
                                                  focusModes: ["sleep": .init(schedule: [window])], timeZone: "UTC"),
                                    start: NotificationHarness.utc("2025-06-02T21:00:00Z"))
        #expect(h.state.focus.active == nil)
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == NotificationHarness.utc("2025-06-02T22:00:00Z"))
        h.tick(at: NotificationHarness.utc("2025-06-02T22:00:00Z"))
        #expect(h.state.focus.active == .init(name: "sleep", since: NotificationHarness.utc("2025-06-02T22:00:00Z"), manual: false))
        h.send(.setFocus(name: nil, until: nil), at: NotificationHarness.utc("2025-06-02T23:00:00Z"))
        #expect(h.state.focus.active == nil)
        h.tick(at: NotificationHarness.utc("2025-06-03T06:59:00Z"))
        #expect(h.state.focus.active == nil)  // stays off for the rest of this window
        h.tick(at: NotificationHarness.utc("2025-06-03T22:00:00Z"))
        #expect(h.state.focus.active?.name == "sleep")  // the next window applies again
        h.tick(at: NotificationHarness.utc("2025-06-04T07:00:00Z"))
        #expect(h.state.focus.active == nil)
    }
}

@Suite struct NotificationRingerAndCallTests {
    @Test(arguments: [InterruptionLevel.active, .timeSensitive, .critical])
    func ringerSilentSilencesEverythingButCritical(level: InterruptionLevel) {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), entitledCriticalApps: [.init(app: chat)],
                                                  timeZone: "UTC"))
        h.authorize(chat)
        h.send(.setRinger(silent: true))
        let d = h.post("n", from: chat, .test(level))
        #expect(h.sounds().count == (level == .critical ? 1 : 0))
        #expect(d?.banner == true)
        if level != .critical { #expect(d?.rules.contains("A12") == true) }
        h.send(.setRinger(silent: false))
        h.advance(120)
        h.post("n2", from: chat, .test(.active))
        #expect(h.sounds().count == 1)
    }

    @Test(arguments: [InterruptionLevel.active, .timeSensitive, .critical])
    func callInProgressSilencesEverythingButCritical(level: InterruptionLevel) {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), entitledCriticalApps: [.init(app: chat)],
                                                  timeZone: "UTC"))
        h.authorize(chat)
        #expect(h.send(.setCallActive(true)).isEmpty)  // no reply: it comes from the engine
        let d = h.post("n", from: chat, .test(level))
        #expect(h.sounds().count == (level == .critical ? 1 : 0))
        if level != .critical { #expect(d?.rules.contains("A4") == true) }
        h.send(.setCallActive(false))
        h.advance(120)
        h.post("n2", from: chat, .test(.active))
        #expect(h.sounds().count == 1)
    }
}
