import Foundation
import InterludePolicy
import Testing

// N16 explain, N17 standalone sounds, scenario 05, config decoding, nextDeadline.

private let chat = "org.example.Chat"
private let alarm = "org.example.Alarm"

@Suite struct NotificationExplainTests {
    @Test func N16_everyDecisionRecordsTheRulesThatMadeIt() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), entitledCriticalApps: [.init(app: alarm)],
                                                  focusModes: ["sleep": .init()], timeZone: "UTC"))
        h.post("unauthorized", from: chat)
        h.authorize(chat)
        h.authorize(alarm)
        h.post("plain", from: chat)
        h.post("downgraded", from: chat, .test(.critical))
        h.post("promo", from: chat, .test(promotional: true))
        h.post("scheduled", from: chat, trigger: .interval(seconds: 600, repeats: false))
        h.send(.setFocus(name: "sleep", until: nil))
        h.post("silenced", from: chat)
        h.post("critical", from: alarm, .test(.critical))
        h.send(.setSettings(app: chat, .init(scheduledSummary: true)))
        h.post("held", from: chat)
        h.send(.play(.init(sound: "ping"), app: chat, peerExecutablePath: nil))

        let expected: [(String, String, [String])] = [
            (chat, "unauthorized", ["N1"]),
            (chat, "plain", ["N1"]),
            (chat, "downgraded", ["N3", "N11"]),
            (chat, "promo", ["N6"]),
            (chat, "scheduled", ["N8"]),
            (chat, "silenced", ["N7"]),
            (alarm, "critical", ["N3"]),
            (chat, "held", ["N9"]),
            (chat, "", ["N17", "N7"]),
        ]
        for (app, id, rules) in expected {
            #expect(NotificationPolicy.explain(app: app, identifier: id, in: h.state)?.rules == rules, "\(id)")
        }
        #expect(h.state.decisionLog.allSatisfy { !$0.decision.rules.isEmpty })
        #expect(h.state.delivered.allSatisfy { !$0.decision.rules.isEmpty })
        #expect(NotificationPolicy.explain(app: chat, identifier: "downgraded", in: h.state)?.outcome == .downgraded(from: .critical, to: .active))
    }

    @Test func N16_decisionLogIsBounded() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), timeZone: "UTC", decisionLogLimit: 3))
        h.authorize(chat)
        for i in 0..<5 { h.post("n\(i)", from: chat, .test(sound: nil)) }
        #expect(h.state.decisionLog.map(\.identifier) == ["n2", "n3", "n4"])
        #expect(NotificationPolicy.explain(app: chat, identifier: "n0", in: h.state)?.rules == ["N1"])  // from the center
    }
}

@Suite struct NotificationPlayTests {
    static func harness() -> NotificationHarness {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), entitledCriticalApps: [.init(app: alarm)],
                                                  focusModes: ["work": .init(allowedApps: ["org.example.Boss"])], timeZone: "UTC"))
        for app in [chat, alarm, "org.example.Boss"] { h.authorize(app) }
        return h
    }

    @Test func N17_standalonePlayIsPlayedWhenNothingStopsIt() {
        var h = Self.harness()
        h.send(.play(.init(sound: "ping", volume: 0.5), app: chat, peerExecutablePath: nil))
        #expect(h.replyDecision?.outcome == .delivered)
        #expect(h.replyDecision?.rules == ["N17"])
        #expect(h.sounds() == [.init(app: chat, notificationIdentifier: nil, name: "ping", volume: 0.5,
                                     bypassRingerAndFocus: false, unmuteOutput: false, duckOthers: true, decidedAt: h.now)])
        // The playback is in the reply only (the handler plays it), not also an effect.
        #expect(!h.last.contains { if case .playSound = $0 { true } else { false } })
    }

    /// N11 counts audible alerts: a sound the engine could not play (the audio server away) does
    /// not hold the app's next sound back; a report about an older sound changes nothing.
    @Test func N11_aSoundThatCouldNotPlayIsNoAudibleAlert() {
        // No cooldown steps: only the one-per-interval limit is at work here.
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), bursts: .init(cooldown: []), timeZone: "UTC"))
        h.authorize(chat)
        h.send(.play(.init(sound: "ping"), app: chat, peerExecutablePath: nil))
        let first = h.sounds().first
        #expect(first?.decidedAt == h.now)
        h.advance(0.3)
        h.send(.play(.init(sound: "ping"), app: chat, peerExecutablePath: nil))
        #expect(h.errorCode == .rateLimited)
        h.send(.soundNotPlayed(first!))
        #expect(h.reply == nil)
        h.send(.play(.init(sound: "ping"), app: chat, peerExecutablePath: nil))
        #expect(h.replyDecision?.outcome != nil && h.errorCode == nil && h.sounds().count == 1)
        // A notification's sound that could not play: the same, through its playSound effect.
        h.advance(5)
        h.post("n1", from: chat)
        let played = h.sounds()
        #expect(played.count == 1 && played.first?.decidedAt == h.now)
        h.advance(0.2)
        var older = played.first!
        older.decidedAt = h.now - 60
        h.send(.soundNotPlayed(older))   // another, older sound: no change
        h.post("n2", from: chat)
        #expect(h.sounds().isEmpty && h.replyDecision?.rules.contains("N11") == true)
        h.send(.soundNotPlayed(played.first!))
        h.advance(0.1)
        h.post("n3", from: chat)
        #expect(h.sounds().count == 1, "\(String(describing: h.replyDecision))")
    }

    /// N11's cooldown counts from what the user heard: a thread's sound that could not play does
    /// not silence the thread's next alert 5 s later (0 % within 10 s) nor lower one 30 s later
    /// (30 % within 60 s); it plays at full volume. A report for another thread, or for a sound
    /// that is no longer the thread's last alert, changes nothing.
    @Test(arguments: [
        // (seconds to the next alert, failed sound reported, thread of the report, expected volume)
        (5.0, false, "t1", 0.0), (5.0, true, "t1", 1.0), (5.0, true, "t2", 0.0),
        (30.0, false, "t1", 0.3), (30.0, true, "t1", 1.0),
    ])
    func N11_aSoundThatCouldNotPlayStartsNoCooldown(after: Double, reported: Bool, reportThread: String, volume: Double) {
        var h = Self.harness()
        h.post("a", from: chat, NotificationContent(title: "t", body: "b", sound: "default", threadIdentifier: "t1"))
        let first = try! #require(h.sounds().first)
        #expect(first.thread == "t1" && first.decidedAt == h.now)
        if reported {
            var report = first
            report.thread = reportThread
            h.send(.soundNotPlayed(report))
        }
        h.advance(after)
        h.post("b", from: chat, NotificationContent(title: "t", body: "b", sound: "default", threadIdentifier: "t1"))
        #expect((h.sounds().first?.volume ?? 0) == volume, "\(String(describing: h.replyDecision))")
        #expect(h.replyDecision?.rules.contains("N11") == (volume < 1))
    }

    /// A report about a sound that is no longer the thread's last alert changes nothing.
    @Test func N11_aLateReportAboutAnEarlierSoundKeepsTheCooldownOfTheNext() {
        var h = Self.harness()
        let thread = NotificationContent(title: "t", body: "b", sound: "default", threadIdentifier: "t1")
        h.post("a", from: chat, thread)
        let first = try! #require(h.sounds().first)
        h.advance(70)
        h.post("b", from: chat, thread)   // heard (full volume), the thread's last alert now
        #expect(h.sounds().first?.volume == 1)
        h.send(.soundNotPlayed(first))    // late, about "a"
        h.advance(5)
        h.post("c", from: chat, thread)
        #expect(h.sounds().isEmpty && h.replyDecision?.rules.contains("N11") == true, "\(String(describing: h.replyDecision))")
    }

    @Test(arguments: [
        ("focus", chat, "N7"),
        ("ringer", chat, "A12"),
        ("call", chat, "A4"),
    ])
    func N17_standalonePlayObeysFocusRingerAndCall(condition: String, app: String, rule: String) {
        var h = Self.harness()
        switch condition {
        case "focus": h.send(.setFocus(name: "work", until: nil))
        case "ringer": h.send(.setRinger(silent: true))
        default: h.send(.setCallActive(true))
        }
        h.send(.play(.init(sound: "ping"), app: app, peerExecutablePath: nil))
        #expect(h.replyDecision?.outcome == .silenced)
        #expect(h.replyDecision?.rules == ["N17", rule])
        #expect(h.sounds().isEmpty)
        // An entitled critical sound still plays.
        h.send(.play(.init(sound: "alarm", volume: 0.7, interruptionLevel: .critical), app: alarm, peerExecutablePath: nil))
        #expect(h.sounds().map(\.volume) == [0.7])
        #expect(h.sounds().first?.unmuteOutput == true)
    }

    @Test func N17_allowedAppPlaysThroughFocus() {
        var h = Self.harness()
        h.send(.setFocus(name: "work", until: nil))
        h.send(.play(.init(sound: "ping"), app: "org.example.Boss", peerExecutablePath: nil))
        #expect(h.sounds().count == 1)
    }

    @Test func N17_standalonePlayObeysRateAndCooldown() {
        var h = Self.harness()
        h.send(.play(.init(sound: "ping"), app: chat, peerExecutablePath: nil))
        h.advance(0.3)
        h.send(.play(.init(sound: "ping"), app: chat, peerExecutablePath: nil))
        #expect(h.errorCode == .rateLimited)
        #expect(h.replyDecision?.rules == ["N11"])
        #expect(h.sounds().isEmpty)
        h.advance(30)
        h.send(.play(.init(sound: "ping"), app: chat, peerExecutablePath: nil))
        #expect(h.sounds().map(\.volume) == [0.3])
        // Notification sounds and standalone sounds share the limits.
        h.advance(0.2)
        h.post("n", from: chat)
        #expect(h.sounds().isEmpty)
    }

    @Test func N17_standalonePlayNeedsAuthorizationAndValidVolume() {
        var h = Self.harness()
        h.send(.play(.init(sound: "ping"), app: "org.example.Stranger", peerExecutablePath: nil))
        #expect(h.errorCode == .notAuthorized)
        h.send(.play(.init(sound: "ping", volume: 2), app: chat, peerExecutablePath: nil))
        #expect(h.errorCode == .badRequest)
    }

    @Test func N17_timeSensitivePlayThroughFocusStillObeysRingerAndNamesEachRuleOnce() {
        var h = Self.harness()
        h.send(.setFocus(name: "work", until: nil))
        h.send(.setRinger(silent: true))
        h.send(.play(.init(sound: "ping", interruptionLevel: .timeSensitive), app: chat, peerExecutablePath: nil))
        #expect(h.replyDecision?.outcome == .silenced)
        #expect(h.replyDecision?.rules == ["N17", "N4", "A12"])
        #expect(h.sounds().isEmpty)
    }

    @Test func N17_nonEntitledCriticalPlayIsDowngraded() {
        var h = Self.harness()
        h.send(.setRinger(silent: true))
        h.send(.play(.init(sound: "ping", interruptionLevel: .critical), app: chat, peerExecutablePath: nil))
        #expect(h.replyDecision?.level == .active)
        #expect(h.replyDecision?.rules == ["N17", "N3", "A12"])
        #expect(h.sounds().isEmpty)
    }
}

@Suite struct NotificationScenarioTests {
    /// shared/scenarios/05-notifications-under-focus.json, through the policy.
    @Test func scenario05_focusSilencesOrdinaryAndEntitledCriticalPlaysThroughFocusAndRinger() throws {
        let json = """
        {"entitledCriticalApps": ["org.example.Alarm"],
         "focusModes": {"sleep": {"allowedApps": [], "allowTimeSensitive": true}},
         "authorization": {"default": "grant"}}
        """
        var config = try JSONDecoder().decode(NotificationPolicyConfig.self, from: Data(json.utf8))
        config.timeZone = "UTC"
        var h = NotificationHarness(config: config)
        let start = h.now
        h.authorize("org.example.Chat")
        h.authorize(alarm)
        h.send(.setFocus(name: "sleep", until: nil), at: start)
        let n1 = h.post("n1", from: "org.example.Chat", NotificationContent(sound: "default", interruptionLevel: .active))
        #expect(h.sounds().isEmpty)
        #expect(n1?.sound == nil)
        #expect(n1?.rules.contains("N7") == true)
        h.send(.setRinger(silent: true), at: start + 1)
        h.now = start + 1.5
        let n2 = h.post("n2", from: alarm, NotificationContent(sound: "default", criticalVolume: 0.8, interruptionLevel: .critical))
        #expect(n2?.rules.contains("N3") == true)
        #expect(h.sounds() == [.init(app: alarm, notificationIdentifier: "n2", name: "default", volume: 0.8,
                                     bypassRingerAndFocus: true, unmuteOutput: true, duckOthers: true, decidedAt: h.now)])
    }
}

@Suite struct NotificationConfigTests {
    @Test func configDefaultsMatchThePolicy() throws {
        let c = try JSONDecoder().decode(NotificationPolicyConfig.self, from: Data("{}".utf8))
        #expect(c == NotificationPolicyConfig())
        #expect(c.authorization.default == .prompt)
        #expect(c.summaryTimes.map(\.description) == ["08:00", "18:00"])
        #expect(c.bursts.audibleAlertInterval == 1)
        #expect(c.bursts.coalesceAbovePerSecond == 5)
        #expect(c.bursts.maxDeliveredPerApp == 50)
        #expect(c.bursts.cooldown == [.init(within: 10, volume: 0), .init(within: 60, volume: 0.3)])
        #expect(c.repeatedCallWindow == 180)
        #expect(c.minimumRepeatingInterval == 60)
        #expect(c.placeholderText == "Notification")
        #expect(c.timeZone == nil)
        #expect(c.maxActionsPerCategory == 4)
        #expect(c.problems.isEmpty)
    }

    @Test func configDecodesTheFullShapeAndRoundTrips() throws {
        let json = """
        {"authorization": {"default": "deny"},
         "entitledCriticalApps": ["org.example.Alarm", {"app": "org.example.Pager", "executablePath": "/usr/bin/pager"}],
         "focusModes": {"sleep": {"allowedSenders": ["+49"], "allowRepeatedCalls": false,
                                  "schedule": [{"weekdays": ["mon", "Tuesday", 4], "start": "22:00", "end": "7:00"}]}},
         "summaryTimes": ["07:30"], "bursts": {"maxDeliveredPerApp": 10}, "timeZone": "Europe/Berlin",
         "repeatedCallWindow": 120}
        """
        let c = try JSONDecoder().decode(NotificationPolicyConfig.self, from: Data(json.utf8))
        #expect(c.authorization.default == .deny)
        #expect(c.entitledCriticalApps == [.init(app: "org.example.Alarm"), .init(app: "org.example.Pager", executablePath: "/usr/bin/pager")])
        let sleep = try #require(c.focusModes["sleep"])
        #expect(sleep.allowTimeSensitive == true)
        #expect(sleep.allowRepeatedCalls == false)
        #expect(sleep.schedule.first?.weekdays == [.monday, .tuesday, .wednesday])
        #expect(sleep.schedule.first?.end == .init(hour: 7, minute: 0))
        #expect(c.summaryTimes == [.init(hour: 7, minute: 30)])
        #expect(c.bursts.maxDeliveredPerApp == 10)
        #expect(c.bursts.audibleAlertInterval == 1)
        #expect(c.repeatedCallWindow == 120)
        let again = try JSONDecoder().decode(NotificationPolicyConfig.self, from: JSONEncoder().encode(c))
        #expect(again == c)
    }

    @Test(arguments: [
        #"{"summaryTimes": ["25:00"]}"#,
        #"{"authorization": {"default": "maybe"}}"#,
        #"{"focusModes": {"x": {"schedule": [{"start": "22:00"}]}}}"#,
    ])
    func configRejectsMalformedValues(json: String) {
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(NotificationPolicyConfig.self, from: Data(json.utf8)) }
    }

    @Test func configReportsProblemsThatDecode() {
        let c = NotificationPolicyConfig(timeZone: "Mars/Olympus", defaultCriticalVolume: 2)
        #expect(c.problems.count == 2)
    }

    @Test func configBuiltInCodeWithABadSummaryTimeIsReportedAndDoesNotCrash() {
        let c = NotificationPolicyConfig(authorization: .init(default: .grant), summaryTimes: [.init(hour: 25, minute: 0)],
                                         timeZone: "UTC")
        #expect(c.problems == ["summaryTimes[0]: not a time of day"])
        var h = NotificationHarness(config: c)
        h.authorize(chat)
        h.send(.setSettings(app: chat, .init(scheduledSummary: true)))
        #expect(h.post("n", from: chat)?.outcome == .held(until: nil))
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == nil)
    }

    @Test func stateAndEventsRoundTripThroughJSON() throws {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), focusModes: ["sleep": .init()], timeZone: "UTC"))
        h.authorize(chat)
        h.post("a", from: chat, .test(.timeSensitive))
        h.post("b", from: chat, trigger: .calendar(.init(weekday: .friday, hour: 9), repeats: true))
        h.send(.setFocus(name: "sleep", until: h.now + 60))
        let data = try JSONEncoder().encode(h.state)
        #expect(try JSONDecoder().decode(NotificationState.self, from: data) == h.state)
        let level = try JSONDecoder().decode([InterruptionLevel].self, from: Data(#"["critical", 0, "timeSensitive"]"#.utf8))
        #expect(level == [.critical, .passive, .timeSensitive])
    }
}

@Suite struct NotificationDeadlineTests {
    @Test func nextDeadlineIsNilWhenNothingIsScheduledAndTheEarliestOtherwise() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), timeZone: "UTC"))
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == nil)
        h.authorize(chat)
        h.post("late", from: chat, trigger: .interval(seconds: 900, repeats: false))
        h.post("soon", from: chat, trigger: .interval(seconds: 300, repeats: false))
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == h.now + 300)
        h.send(.setFocus(name: "sleep", until: h.now + 100))
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == h.now + 100)
    }

    @Test func aLateEventProcessesEverythingDueFirstInOrder() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), focusModes: ["sleep": .init()], timeZone: "UTC"))
        h.authorize(chat)
        h.send(.setFocus(name: "sleep", until: h.now + 100))
        h.post("during", from: chat, trigger: .interval(seconds: 50, repeats: false))
        h.post("after", from: chat, trigger: .interval(seconds: 150, repeats: false))
        // No tick came; the next event arrives after all three deadlines.
        h.advance(10)
        h.send(.setRinger(silent: false), at: h.now + 190)
        #expect(NotificationPolicy.explain(app: chat, identifier: "during", in: h.state)?.outcome == .silenced)
        #expect(NotificationPolicy.explain(app: chat, identifier: "after", in: h.state)?.outcome == .delivered)
        #expect(h.last.firstIndex { if case .emit(.focusChanged) = $0 { true } else { false } }!
                < h.last.firstIndex { if case .deliver(let d) = $0 { d.request.identifier == "after" } else { false } }!)
    }
}
