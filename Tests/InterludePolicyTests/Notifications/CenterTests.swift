import InterludePolicy
import Testing

// N9 scheduled summary, N10 replacement, N11 bursts, N12 badges, N13 hidden previews, N14 actions.

private let chat = "org.example.Chat"
private let news = "org.example.News"
private let utc = NotificationHarness.utc

private func granted(_ config: NotificationPolicyConfig = .init(authorization: .init(default: .grant), timeZone: "UTC"),
                     start: NotificationTime = NotificationTime(1_750_000_000)) -> NotificationHarness {
    var h = NotificationHarness(config: config, start: start)
    h.authorize(chat)
    h.authorize(news)
    return h
}

@Suite struct NotificationSummaryTests {
    static func harness() -> NotificationHarness {
        var h = granted(.init(authorization: .init(default: .grant), timeZone: "Europe/Berlin"), start: utc("2025-06-02T10:00:00Z"))
        h.send(.setSettings(app: news, .init(scheduledSummary: true)))
        return h
    }

    @Test func N9_passiveAndActiveAreHeldUntilTheSummaryTime() {
        var h = Self.harness()
        let d = h.post("a", from: news, .test(.active))
        #expect(d?.outcome == .held(until: utc("2025-06-02T16:00:00Z")))  // 18:00 CEST
        #expect(d?.rules == ["N9"])
        #expect(h.post("p", from: news, .test(.passive))?.outcome == .held(until: utc("2025-06-02T16:00:00Z")))
        #expect(h.sounds().isEmpty)
        #expect(h.state.delivered.isEmpty)
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == utc("2025-06-02T16:00:00Z"))
        // An app not in the summary is unaffected.
        #expect(h.post("c", from: chat)?.outcome == .delivered)
    }

    @Test func N9_deliveredTogetherByRelevanceThenTimeWithOneSound() {
        var h = Self.harness()
        h.post("low-early", from: news, .test(relevance: 0.2))
        h.advance(60)
        h.post("high", from: news, .test(relevance: 0.9))
        h.advance(60)
        h.post("low-late", from: news, .test(.passive, relevance: 0.2))
        h.advance(60)
        h.post("mid", from: news, .test(relevance: 0.5))
        let e = h.tick(at: utc("2025-06-02T16:00:00Z"))
        #expect(h.deliveries(in: e).map(\.request.identifier) == ["high", "mid", "low-early", "low-late"])
        let summaries = h.events(in: e).compactMap { if case .summaryDelivered(let v) = $0 { v } else { nil } }
        #expect(summaries.count == 1)
        #expect(summaries.first?.map(\.identifier) == ["high", "mid", "low-early", "low-late"])
        #expect(h.sounds(in: e).count == 1)
        #expect(h.sounds(in: e).first?.notificationIdentifier == "high")
        #expect(h.deliveries(in: e).allSatisfy { $0.decision.rules.first == "N9" })
        #expect(h.state.summaryQueue.isEmpty)
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == nil)
    }

    @Test func N9_morningSummaryAtEightLocal() {
        var h = Self.harness()
        h.tick(at: utc("2025-06-02T20:00:00Z"))  // 22:00 local, after the evening summary
        #expect(h.post("n", from: news)?.outcome == .held(until: utc("2025-06-03T06:00:00Z")))
        let e = h.tick(at: utc("2025-06-03T06:00:00Z"))
        #expect(h.deliveries(in: e).map(\.request.identifier) == ["n"])
    }

    /// N9, N11: the summary holds no more of an app than the center would keep of it; the oldest
    /// held go first and the app is told (reason N11).
    @Test func N9_theSummaryHoldsAtMostTheCenterLimitPerAppAndInAll() {
        var config = NotificationPolicyConfig(authorization: .init(default: .grant), timeZone: "Europe/Berlin")
        config.bursts.maxDeliveredPerApp = 3
        config.bursts.maxDeliveredTotal = 4
        var h = granted(config, start: utc("2025-06-02T10:00:00Z"))
        h.send(.setSettings(app: news, .init(scheduledSummary: true)))
        h.send(.setSettings(app: chat, .init(scheduledSummary: true)))
        for id in ["n1", "n2", "n3"] { h.post(id, from: news) }
        let fourth = h.post("n4", from: news)
        #expect(fourth?.rules == ["N9"])
        #expect(h.events().contains(.removed(app: news, identifiers: ["n1"], reason: "N11")))
        #expect(h.state.summaryQueue.map(\.request.identifier) == ["n2", "n3", "n4"])
        h.post("c1", from: chat)
        h.post("c2", from: chat)  // five held in all: the oldest (news' n2) goes
        #expect(h.events().contains(.removed(app: news, identifiers: ["n2"], reason: "N11")))
        #expect(h.state.summaryQueue.map(\.request.identifier) == ["n3", "n4", "c1", "c2"])
        let e = h.tick(at: utc("2025-06-02T16:00:00Z"))
        #expect(Set(h.deliveries(in: e).map(\.request.identifier)) == ["n3", "n4", "c1", "c2"])
    }

    @Test func N9_criticalIsNotHeld() {
        var h = granted(.init(authorization: .init(default: .grant), entitledCriticalApps: [.init(app: news)], timeZone: "UTC"))
        h.send(.setSettings(app: news, .init(scheduledSummary: true)))
        #expect(h.post("c", from: news, .test(.critical))?.outcome == .delivered)
    }
}

@Suite struct NotificationReplacementTests {
    @Test func N10_sameIdentifierReplacesDeliveredAndAlertsAgain() {
        var h = granted()
        h.post("score", from: chat, .test(body: "1:0"))
        h.advance(120)
        let d = h.post("score", from: chat, .test(body: "2:0"))
        #expect(h.center(chat) == ["score"])
        #expect(h.state.delivered.first?.request.content.body == "2:0")
        #expect(d?.rules == ["N10"])
        #expect(h.sounds().count == 1)
        #expect(h.events().contains { if case .updated = $0 { true } else { false } })
        #expect(h.state.apps[chat]?.badge == 1)  // a replacement is not a new unread notification
    }

    @Test func N10_alertOnceDoesNotAlertAgain() {
        var h = granted()
        h.post("dl", from: chat, .test(body: "10 %"))
        h.advance(120)
        let d = h.post("dl", from: chat, .test(alertOnce: true, body: "50 %"))
        #expect(d?.sound == nil)
        #expect(d?.banner == false)
        #expect(d?.rules == ["N10"])
        #expect(h.center(chat) == ["dl"])
    }

    @Test func N10_sameIdentifierReplacesPending() {
        var h = granted()
        h.post("r", from: chat, trigger: .interval(seconds: 100, repeats: false))
        let d = h.post("r", from: chat, .test(body: "new"), trigger: .interval(seconds: 300, repeats: false))
        #expect(d?.rules == ["N8", "N10"])
        #expect(h.state.pending.count == 1)
        #expect(h.state.pending.first?.fireAt == h.now + 300)
        h.advance(200)
        #expect(h.state.delivered.isEmpty)
        h.advance(100)
        #expect(h.center(chat) == ["r"])
        #expect(h.state.delivered.first?.request.content.body == "new")
    }

    @Test func N10_firedRepeatingTriggerKeepsOneEntry() {
        var h = granted()
        h.post("hourly", from: chat, trigger: .interval(seconds: 3600, repeats: true))
        h.advance(3600)
        h.advance(3600)
        h.advance(3600)
        #expect(h.center(chat) == ["hourly"])
        #expect(h.state.pending.count == 1)
    }
}

@Suite struct NotificationBurstTests {
    @Test func N11_twentyInTwoSecondsMakeOneFullVolumeSoundAndAllReachTheCenter() {
        var h = granted()
        var sounds: [NotificationSoundPlayback] = []
        var decisions: [NotificationDecision] = []
        for i in 0..<20 {
            if i > 0 { h.advance(0.1) }
            decisions.append(h.post("m\(i)", from: chat)!)
            sounds += h.sounds()
        }
        #expect(sounds.count == 1)
        #expect(sounds.first?.volume == 1)
        #expect(sounds.first?.notificationIdentifier == "m0")
        #expect(h.center(chat).count == 20)
        #expect(decisions.dropFirst().allSatisfy { $0.rules == ["N11"] && $0.sound == nil && $0.outcome == .delivered })
    }

    @Test func N11_atMostOneAudibleAlertPerAppPerSecondAcrossThreads() {
        var h = granted()
        h.post("a", from: chat, .test(thread: "alice"))
        #expect(h.sounds().count == 1)
        h.advance(0.5)
        let d = h.post("b", from: chat, .test(thread: "bob"))
        #expect(h.sounds().isEmpty)
        #expect(d?.rules == ["N11"])
        h.advance(0.6)
        h.post("c", from: chat, .test(thread: "carol"))
        #expect(h.sounds().map(\.volume) == [1])
        // Another app is not limited by this one.
        h.post("n", from: news)
        #expect(h.sounds().count == 1)
    }

    @Test(arguments: [(5.0, nil), (9.9, nil), (10.0, 0.3), (30.0, 0.3), (59.9, 0.3), (60.0, 1.0), (61.0, 1.0)] as [(Double, Double?)])
    func N11_cooldownPerAppAndThread(gap: Double, volume: Double?) {
        var h = granted()
        h.post("first", from: chat, .test(thread: "t"))
        h.advance(gap)
        let d = h.post("second", from: chat, .test(thread: "t"))
        #expect(h.sounds().first?.volume == volume)
        #expect(d?.rules == (volume == 1 ? ["N1"] : ["N11"]))
    }

    @Test func N11_cooldownIsPerThread() {
        var h = granted()
        h.post("a1", from: chat, .test(thread: "alice"))
        h.advance(5)
        h.post("b1", from: chat, .test(thread: "bob"))
        #expect(h.sounds().map(\.volume) == [1])
    }

    @Test func N11_quietRestoresFullVolumeOnlyAfterSixtySeconds() {
        var h = granted()
        h.post("1", from: chat)
        h.advance(30)
        h.post("2", from: chat)  // 30 % (30 s after the previous)
        #expect(h.sounds().map(\.volume) == [0.3])
        h.advance(40)
        h.post("3", from: chat)  // 40 s after the previous: still 30 %
        #expect(h.sounds().map(\.volume) == [0.3])
        h.advance(61)
        h.post("4", from: chat)
        #expect(h.sounds().map(\.volume) == [1])
    }

    @Test func N11_updatesAboveFivePerSecondAreCoalescedKeepingTheLast() {
        var h = granted()
        h.post("progress", from: chat, .test(body: "0"))
        let start = h.now
        var held = 0
        for i in 1...10 {
            h.send(.add(NotificationRequest(identifier: "progress", content: .test(body: "\(i)")), app: chat, peerExecutablePath: nil),
                   at: start + 0.05 * Double(i))
            if case .held? = h.replyDecision?.outcome { held += 1 }
        }
        #expect(held == 5)
        #expect(h.state.delivered.first?.request.content.body == "5")
        #expect(h.state.coalesced.count == 1)
        let release = start + 0.05 + 1  // the first update in the window falls out
        #expect(NotificationPolicy.nextDeadline(h.state, config: h.config) == release)
        let e = h.tick(at: release)
        #expect(h.center(chat) == ["progress"])
        #expect(h.state.delivered.first?.request.content.body == "10")
        #expect(h.events(in: e).contains { if case .updated(let v, _) = $0 { v.body == "10" } else { false } })
        #expect(h.state.coalesced.isEmpty)
    }

    @Test func N11_newNotificationsAreNotCoalesced() {
        var h = granted()
        for i in 0..<10 { h.send(.add(NotificationRequest(identifier: "n\(i)", content: .test()), app: chat, peerExecutablePath: nil)) }
        #expect(h.center(chat).count == 10)
        #expect(h.state.coalesced.isEmpty)
    }

    @Test func N11_atMostFiftyDeliveredPerAppOldestDropped() {
        var h = granted()
        var removed: [String] = []
        for i in 0..<55 {
            h.post("n\(i)", from: chat, .test(sound: nil))
            for case .removed(chat, let ids, "N11") in h.events() { removed += ids }
        }
        #expect(h.center(chat).count == 50)
        #expect(h.center(chat).first == "n5")
        #expect(removed == ["n0", "n1", "n2", "n3", "n4"])
        h.post("other", from: news)
        #expect(h.center(news) == ["other"])
    }

    /// N10, N11: an identifier names an entry of its app only. The walks of the center compare
    /// hashes of the app and identifier first (issue 9), then the strings: the same identifier
    /// from another app is another entry, an app id that extends another's is another app, and the
    /// per-app limit counts only the app's own entries, however they interleave.
    @Test func N10_N11_anIdentifierIsPerAppAndTheLimitCountsTheAppsOwnEntries() {
        var config = NotificationPolicyConfig(authorization: .init(default: .grant), timeZone: "UTC")
        config.bursts.maxDeliveredPerApp = 3
        var h = granted(config)
        let chat2 = chat + "2"
        h.authorize(chat2)
        for i in 0..<4 {
            h.post("n\(i)", from: chat, .test(sound: nil))
            h.post("n\(i)", from: chat2, .test(sound: nil))
        }
        #expect(h.center(chat) == ["n1", "n2", "n3"])
        #expect(h.center(chat2) == ["n1", "n2", "n3"])
        let d = h.post("n2", from: chat2, .test(sound: nil, body: "again"))
        #expect(d?.rules.contains("N10") == true)
        #expect(h.center(chat) == ["n1", "n2", "n3"])
        #expect(h.center(chat2) == ["n1", "n3", "n2"])
        #expect(h.state.delivered.filter { $0.request.identifier == "n2" }.map(\.app) == [chat, chat2])
        #expect(h.state.delivered.last?.request.content.body == "again")
        #expect(h.post("n9", from: chat, .test(sound: nil))?.rules.contains("N10") == false)
        #expect(h.center(chat) == ["n2", "n3", "n9"])
        #expect(h.center(chat2) == ["n1", "n3", "n2"])
    }

    /// N11: limits lowered (a config reload, or a start after the user edited the config) apply at
    /// once, not at each app's next add: every app's oldest over `maxDeliveredPerApp`, then the
    /// center's oldest over `maxDeliveredTotal`, each app told which; the scheduled summary keeps
    /// no more than the center would (N9); notifications waiting for a trigger stay (N8).
    @Test func N11_loweredLimitsApplyAtOnce() {
        var h = granted()
        h.send(.setSettings(app: news, .init(scheduledSummary: true)))
        for i in 0..<5 { h.post("c\(i)", from: chat, .test(sound: nil)) }
        for i in 0..<3 { h.post("h\(i)", from: news, .test(sound: nil)) }  // held for the summary (N9)
        h.post("later", from: chat, .test(sound: nil), trigger: .interval(seconds: 3600, repeats: false))
        h.authorize("org.example.Radio")
        for i in 0..<3 { h.post("r\(i)", from: "org.example.Radio", .test(sound: nil)) }
        #expect(h.center(chat) == ["c0", "c1", "c2", "c3", "c4"])
        #expect(h.state.summaryQueue.map(\.request.identifier) == ["h0", "h1", "h2"])

        h.send(.tick)
        #expect(h.events().isEmpty, "nothing changes while the limits stay")
        h.config.bursts.maxDeliveredPerApp = 2
        h.config.bursts.maxDeliveredTotal = 3
        h.send(.limitsChanged)
        var removed: [String: [String]] = [:]
        for case .removed(let app, let ids, "N11") in h.events() { removed[app, default: []] += ids }
        #expect(h.center(chat) == ["c4"])
        #expect(h.center("org.example.Radio") == ["r1", "r2"])
        #expect(removed[chat] == ["c0", "c1", "c2", "c3"])
        #expect(removed["org.example.Radio"] == ["r0"])
        #expect(h.state.summaryQueue.map(\.request.identifier) == ["h1", "h2"])
        #expect(removed[news] == ["h0"])
        #expect(h.state.pending.map(\.request.identifier) == ["later"], "N8: a waiting notification stays")
        #expect(h.reply == nil)

        h.send(.limitsChanged)
        #expect(h.events().isEmpty, "applied once: nothing more to drop")
    }

    /// N10 with N12: a replacement whose badge 0 clears the app's other notifications finds the
    /// entry it replaces again (its old place moved when those before it went) and keeps its
    /// decision (N16). Taken from the old place, the reducer read past the end of the center.
    @Test func N10_N12_aReplacementWithBadgeZeroClearsTheOthersAndKeepsItsEarlierDecision() {
        var h = granted()
        h.post("a", from: chat, .test(sound: nil))
        h.post("b", from: chat, .test(sound: nil))
        h.post("c", from: chat, .test(sound: nil))
        h.post("c", from: chat, .test(sound: nil, badge: 0))
        #expect(h.center(chat) == ["c"])
        #expect(h.state.delivered.last?.earlierDecisions?.count == 1)
        #expect(h.state.apps[chat]?.badge == 0)
    }

    /// Issue 7 hole 7: the per-app cap has no bound on apps; the whole center has one
    /// (`bursts.maxDeliveredTotal`, N11, N15), the oldest over all apps dropped first.
    @Test func N11_theWholeCenterKeepsAtMostMaxDeliveredTotalOldestFirst() {
        var h = granted(.init(authorization: .init(default: .grant), bursts: .init(maxDeliveredTotal: 3), timeZone: "UTC"))
        h.post("c0", from: chat, .test(sound: nil))
        h.post("n0", from: news, .test(sound: nil))
        h.post("c1", from: chat, .test(sound: nil))
        h.post("n1", from: news, .test(sound: nil))
        #expect(h.state.delivered.map(\.request.identifier) == ["n0", "c1", "n1"])
        var removed: [(String, [String], String)] = []
        for case let .removed(app, ids, reason) in h.events() { removed.append((app, ids, reason)) }
        #expect(removed.count == 1)
        #expect(removed.first?.0 == chat && removed.first?.1 == ["c0"] && removed.first?.2 == "N11")
        // A default config bounds it at 1000 over, say, 500 apps of 50 each.
        #expect(NotificationPolicyConfig().bursts.maxDeliveredTotal == 1000)
    }
}

@Suite struct NotificationBadgeTests {
    @Test func N12_badgeCountsUnreadAndContentBadgeSetsIt() {
        var h = granted()
        h.post("a", from: chat, .test(sound: nil))
        h.post("b", from: chat, .test(sound: nil))
        #expect(h.state.apps[chat]?.badge == 2)
        #expect(h.last.contains(.badgeChanged(app: chat, count: 2)))
        let d = h.post("c", from: chat, .test(sound: nil, badge: 7))
        #expect(d?.badge == 7)
        #expect(h.state.apps[chat]?.badge == 7)
        h.send(.setBadge(app: chat, count: 3))
        #expect(h.reply == .done)
        #expect(h.last.contains(.badgeChanged(app: chat, count: 3)))
    }

    @Test func N12_contentBadgeZeroClearsTheAppsDeliveredNotifications() {
        var h = granted()
        h.post("a", from: chat, .test(sound: nil))
        h.post("b", from: chat, .test(sound: nil))
        h.post("x", from: news, .test(sound: nil))
        let d = h.post("clear", from: chat, NotificationContent(badge: 0))  // badge only: takes no place in the center
        #expect(h.center(chat) == [])
        #expect(h.center(news) == ["x"])
        #expect(h.state.apps[chat]?.badge == 0)
        #expect(d?.rules == ["N12"])
        #expect(h.events().contains(.removed(app: chat, identifiers: ["a", "b"], reason: "N12")))
    }

    /// Issue 8 item 7: clearing the whole center left the badge at its old count beside an empty
    /// center. The two ways of clearing now agree: all removed → badge 0; some removed → the badge
    /// stays (the app owns the count it set).
    @Test func N12_clearingTheWholeCenterSetsTheBadgeToZero() {
        var h = granted()
        h.post("a", from: chat, .test(sound: nil))
        h.post("b", from: chat, .test(sound: nil))
        h.post("x", from: news, .test(sound: nil))
        h.send(.removeDelivered(app: chat, identifiers: ["a"]))
        #expect(h.state.apps[chat]?.badge == 2)
        h.send(.removeDelivered(app: chat, identifiers: nil))
        #expect(h.reply == .done)
        #expect(h.center(chat) == [])
        #expect(h.state.apps[chat]?.badge == 0)
        #expect(h.last.contains(.badgeChanged(app: chat, count: 0)))
        #expect(h.state.apps[news]?.badge == 1)
    }

    /// Issue 8 item 7: a badge-only request is an N12 update, not an alert: it neither plays its
    /// sound nor cites N11's audible limit (it did, right after another alert of the app).
    @Test func N12_aBadgeOnlyRequestNeverAlertsNorCitesN11() {
        var h = granted()
        h.post("a", from: chat, .test())
        #expect(h.sounds().count == 1)
        let d = h.post("b", from: chat, NotificationContent(sound: "default", badge: 4))
        #expect(d?.sound == nil)
        #expect(d?.rules.contains("N11") == false, "\(String(describing: d?.rules))")
        #expect(h.sounds().isEmpty)
        #expect(h.state.apps[chat]?.badge == 4)
    }

    /// N16 with N10: a replaced notification's earlier decisions stay explainable, even when the
    /// decision log has moved on (it kept only the latest).
    @Test func N16_aReplacedNotificationKeepsEveryDecision() throws {
        var config = NotificationPolicyConfig()
        config.decisionLogLimit = 10
        config.decisionHistoryPerNotification = 3
        var h = NotificationHarness(config: config)
        h.authorize(chat)
        h.authorize(news)
        for i in 0..<5 {
            h.now = h.now + 120  // past N11's cooldown: each delivery plays
            h.post("q", from: chat, .test(title: "version \(i)"))
        }
        for i in 0..<20 { h.post("other\(i)", from: news, .test(sound: nil)) }  // pushes q out of the log
        let history = NotificationPolicy.history(app: chat, identifier: "q", in: h.state)
        #expect(history.count == 4, "3 kept earlier decisions and the latest: \(history.map(\.time))")
        #expect(history.map(\.time) == history.map(\.time).sorted())
        #expect(history.dropFirst().allSatisfy { $0.decision.rules.contains("N10") })
        #expect(history.last?.decision == h.state.delivered.last { $0.request.identifier == "q" }?.decision)
    }

    @Test func N12_badgesCanBeTurnedOffPerApp() {
        var h = granted()
        h.send(.setSettings(app: chat, .init(badge: false)))
        h.post("a", from: chat, .test(sound: nil))
        let d = h.post("b", from: chat, .test(sound: nil, badge: 5))
        #expect(h.state.apps[chat]?.badge == 0)
        #expect(d?.badge == nil)
        #expect(d?.rules == ["N12"])
        #expect(!h.all.contains { if case .badgeChanged(chat, _) = $0 { true } else { false } })
        h.send(.setBadge(app: chat, count: 4))
        #expect(h.state.apps[chat]?.badge == 0)
    }

    /// An empty identifier is refused in the words of the other params' errors (a stranger's
    /// find: it read "identifier is empty", unlike `param "title" must be a string`).
    @Test func anEmptyIdentifierIsBadRequestNamingTheParam() {
        var h = granted()
        h.post("", from: chat, .test())
        #expect(h.errorCode == .badRequest)
        guard case .failed(_, let message, _)? = h.reply else { Issue.record("not refused: \(String(describing: h.reply))"); return }
        #expect(message == #"param "identifier" must not be empty"#)
    }

    @Test("an identifier too long or holding a control character is refused, naming why", arguments: [
        (String(repeating: "x", count: 1025), #"param "identifier" has 1025 bytes; at most 1024"#),
        (String(repeating: "é", count: 513), #"param "identifier" has 1026 bytes; at most 1024"#),
        ("a\u{0}b", #"param "identifier" holds U+0000 (a control character or line separator); an identifier is one line of text"#),
        ("line\nbreak", #"param "identifier" holds U+000A (a control character or line separator); an identifier is one line of text"#),
        ("del\u{7F}", #"param "identifier" holds U+007F (a control character or line separator); an identifier is one line of text"#),
        ("nel\u{85}", #"param "identifier" holds U+0085 (a control character or line separator); an identifier is one line of text"#),
        ("ls\u{2028}x", #"param "identifier" holds U+2028 (a control character or line separator); an identifier is one line of text"#),
    ])
    func anUnreadableIdentifierIsBadRequest(identifier: String, said: String) {
        var h = granted()
        h.post(identifier, from: chat, .test())
        guard case .failed(_, let message, _)? = h.reply else { Issue.record("not refused: \(String(describing: h.reply))"); return }
        #expect(h.errorCode == .badRequest)
        #expect(message == said)
    }

    @Test("identifiers at the limits are taken", arguments: [String(repeating: "x", count: 1024), " ", "tab\u{A0}nbsp", "🎵/é:ok"])
    func aLongOrUnusualIdentifierWithinTheLimitsIsTaken(identifier: String) {
        var h = granted()
        h.post(identifier, from: chat, .test())
        #expect(h.errorCode == nil, "\(String(describing: h.reply))")
        #expect(h.state.delivered.contains { $0.request.identifier == identifier })
    }

    @Test func N12_negativeBadgeIsBadRequest() {
        var h = granted()
        h.send(.setBadge(app: chat, count: -1))
        #expect(h.errorCode == .badRequest)
        h.post("a", from: chat, .test(badge: -2))
        #expect(h.errorCode == .badRequest)
    }

    /// N1 for badges: an app the user granted (`interlude auth APP grant`) but that never asked is
    /// not authorized, and the error says so (it said only "not authorized" though the user had
    /// granted it); a denied app's error says denied.
    @Test func N1_setBadgeFromAnAppThatNeverAskedSaysWhy() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .prompt), timeZone: "UTC"))
        h.send(.setSettings(app: chat, NotificationSettingsChange(authorization: .authorized)))
        h.send(.setBadge(app: chat, count: 3))
        guard case let .failed(code, message, _)? = h.reply else { Issue.record("accepted: \(String(describing: h.reply))"); return }
        #expect(code == .notAuthorized && message.contains("has not requested authorization"), "\(message)")
        h.authorize(news)
        h.send(.setSettings(app: news, NotificationSettingsChange(authorization: .denied)))
        h.send(.setBadge(app: news, count: 3))
        guard case let .failed(_, denied, _)? = h.reply else { Issue.record("accepted: \(String(describing: h.reply))"); return }
        #expect(denied.contains("notifications are denied for this app"), "\(denied)")
    }

    /// The CLI refuses a badge past 2^31 − 1; the protocol does too (set by `setBadge` or a
    /// notification's content), and counting up stops at it.
    @Test func N12_aBadgeBeyondTheLargestIsBadRequestAndCountingStopsThere() {
        let largest = NotificationPolicy.maximumBadge
        #expect(largest == 2_147_483_647)
        var h = granted()
        h.send(.setBadge(app: chat, count: largest + 1))
        #expect(h.errorCode == .badRequest)
        #expect(h.state.apps[chat]?.badge ?? 0 == 0)
        h.post("a", from: chat, .test(badge: largest + 1))
        #expect(h.errorCode == .badRequest)
        h.send(.setBadge(app: chat, count: largest))
        #expect(h.state.apps[chat]?.badge == largest)
        let d = h.post("b", from: chat, .test(sound: nil))
        #expect(h.state.apps[chat]?.badge == largest && d?.badge == largest)
    }
}

@Suite struct NotificationHiddenPreviewTests {
    @Test(arguments: [
        (NotificationPreviewSetting.always, nil as String?, "secret body"),
        (.never, nil, "Notification"),
        (.never, "New message", "New message"),
    ])
    func N13_hiddenPreviewsReplaceTheBodyForWatchers(previews: NotificationPreviewSetting, placeholder: String?, shown: String) {
        var h = granted()
        h.send(.registerCategories(app: chat, [.init(identifier: "msg", hiddenPreviewsBodyPlaceholder: placeholder)]))
        h.send(.setSettings(app: chat, .init(showPreviews: previews)))
        h.post("m", from: chat, .test(category: "msg", body: "secret body"))
        let views = h.events().compactMap { if case .delivered(let v, _) = $0 { v } else { nil } }
        #expect(views.map(\.body) == [shown])
        #expect(views.first?.previewHidden == (previews == .never))
        #expect(views.first?.title == "title")
        // The engine and store still get the full content.
        #expect(h.deliveries().first?.request.content.body == "secret body")
        #expect(NotificationPolicy.view(of: h.state.delivered[0], in: h.state, config: h.config).body == shown)
    }

    @Test func N13_configPlaceholderIsUsedWithoutCategory() {
        var h = granted(.init(authorization: .init(default: .grant), placeholderText: "Benachrichtigung", timeZone: "UTC"))
        h.send(.setSettings(app: chat, .init(showPreviews: .never)))
        h.post("m", from: chat)
        #expect(h.events().contains { if case .delivered(let v, _) = $0 { v.body == "Benachrichtigung" } else { false } })
    }
}

@Suite struct NotificationActionTests {
    static func actions(_ n: Int) -> [NotificationAction] {
        (0..<n).map { NotificationAction(identifier: "a\($0)", title: "A\($0)") }
    }

    @Test(arguments: [(0, true), (4, true), (5, false)])
    func N14_atMostFourActionsPerCategory(count: Int, ok: Bool) {
        var h = granted()
        h.send(.registerCategories(app: chat, [.init(identifier: "ok", actions: Self.actions(1)),
                                              .init(identifier: "c", actions: Self.actions(count))]))
        if ok {
            #expect(h.reply == .done)
            #expect(h.state.apps[chat]?.categories.count == 2)
        } else {
            #expect(h.errorCode == .tooManyActions)
            #expect(h.state.apps[chat]?.categories.isEmpty == true)  // nothing registered
        }
    }

    /// N14: an action identifier that is empty, the system's own, or given twice is refused, and
    /// the message names it (it said "must be non-empty, unique, and not default/dismiss" for all
    /// three, naming none; a stranger's find).
    @Test(arguments: [
        (["a", ""], #"an action identifier in "c" is empty"#),
        (["a", "dismiss"], #"action "dismiss" in "c": default and dismiss are the system's own actions"#),
        (["a", "b", "a"], #"action "a" is given twice in "c"; action identifiers are unique in a category"#),
    ])
    func N14_aBadActionIdentifierIsNamed(ids: [String], says: String) {
        var h = granted()
        h.send(.registerCategories(app: chat, [.init(identifier: "c", actions: ids.map { NotificationAction(identifier: $0, title: "T") })]))
        #expect(h.errorCode == .badRequest)
        guard case .failed(_, let message, _)? = h.reply else { Issue.record("not refused"); return }
        #expect(message == says)
        #expect(h.state.apps[chat]?.categories.isEmpty != false)
    }

    static func withCategory() -> NotificationHarness {
        var h = granted()
        h.send(.registerCategories(app: chat, [.init(identifier: "msg", actions: [
            .init(identifier: "reply", title: "Reply", textInputPlaceholder: "Message"),
            .init(identifier: "delete", title: "Delete", options: [.destructive]),
        ])]))
        h.post("m1", from: chat, .test(category: "msg"))
        h.post("m2", from: chat, .test(category: "msg"))
        return h
    }

    @Test func N14_responseReachesConnectedAppAtOnce() {
        var h = Self.withCategory()
        h.send(.appConnected(app: chat))
        h.send(.respondToAction(app: chat, notificationIdentifier: "m1", actionIdentifier: "reply", text: "hi"))
        #expect(h.reply == .done)
        #expect(h.last.contains(.sendToApp(app: chat, .init(actionIdentifier: "reply", notificationIdentifier: "m1", text: "hi", time: h.now))))
        #expect(h.center(chat) == ["m2"])
    }

    @Test func N14_responsesAreQueuedWhileTheAppIsOfflineAndSentInOrderOnConnect() {
        var h = Self.withCategory()
        h.send(.appConnected(app: chat))
        h.send(.appDisconnected(app: chat))
        h.send(.respondToAction(app: chat, notificationIdentifier: "m1", actionIdentifier: "delete", text: nil))
        #expect(!h.last.contains { if case .sendToApp = $0 { true } else { false } })
        h.advance(10)
        h.send(.respondToAction(app: chat, notificationIdentifier: "m2", actionIdentifier: "default", text: nil))
        #expect(h.state.apps[chat]?.queuedResponses.count == 2)
        let e = h.send(.appConnected(app: chat))
        let sent = e.compactMap { if case .sendToApp(chat, let r) = $0 { r.actionIdentifier } else { nil } }
        #expect(sent == ["delete", "default"])
        #expect(h.state.apps[chat]?.queuedResponses.isEmpty == true)
    }

    @Test func N15_presenceAloneNeedNotBeSavedButAQueuedResponseSentOnConnectMust() {
        var h = Self.withCategory()
        var before = h.state
        h.advance(5)
        h.send(.appConnected(app: chat))
        #expect(h.state != before)
        #expect(h.state.differsOnlyInPresence(from: before), "connect: only presence and the clock")
        before = h.state
        h.send(.appDisconnected(app: chat))
        #expect(h.state.differsOnlyInPresence(from: before), "disconnect")
        h.send(.respondToAction(app: chat, notificationIdentifier: "m1", actionIdentifier: "delete", text: nil))
        before = h.state
        h.send(.appConnected(app: chat))  // sends the queued response and empties the queue
        #expect(!h.state.differsOnlyInPresence(from: before))
        before = h.state
        h.send(.appConnected(app: "org.example.New"))  // a new app record
        #expect(!h.state.differsOnlyInPresence(from: before))
    }

    @Test(arguments: [
        ("nope", "reply", "x", NotificationErrorCode.notFound),
        ("m1", "archive", nil, .notFound),
        ("m1", "delete", "x", .badRequest),
        ("m1", "dismiss", "x", .badRequest),
    ] as [(String, String, String?, NotificationErrorCode)])
    func N14_unknownNotificationOrActionIsRefused(id: String, action: String, text: String?, code: NotificationErrorCode) {
        var h = Self.withCategory()
        h.send(.respondToAction(app: chat, notificationIdentifier: id, actionIdentifier: action, text: text))
        #expect(h.errorCode == code)
        #expect(h.center(chat) == ["m1", "m2"])
    }
}
