import Foundation
import InterludePolicy
import Testing

// Issue 11: remote notifications through the same core (N1, N2, N7, N11, N15 exactly once).

private let chat = "org.example.Chat"

@Suite struct NotificationRemoteTests {
    /// A harness where `chat` is authorized; `registered` and `allowed` set the two remote gates.
    static func harness(registered: Bool = true, allowed: Bool = true) -> NotificationHarness {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), focusModes: ["sleep": .init()], timeZone: "UTC"))
        h.authorize(chat)
        if registered { h.send(.registerRemote(app: chat, enabled: true)) }
        if allowed { h.send(.setSettings(app: chat, .init(remote: true))) }
        return h
    }

    static func push(_ h: inout NotificationHarness, _ messageID: String, identifier: String? = nil, window: Int = 1000,
                     thread: String? = nil) -> NotificationReply? {
        var content = NotificationContent(title: "Your turn", body: "b", sound: "default")
        content.threadIdentifier = thread
        h.send(.addRemote(NotificationRequest(identifier: identifier ?? messageID, content: content, trigger: nil),
                          app: chat, messageID: messageID, dedupeWindow: window))
        return h.reply
    }

    @Test(arguments: [
        // registered, the user's setting, authorized → outcome and rule
        (false, true, true, "rejected", "N1"),
        (true, false, true, "rejected", "N2"),
        (false, false, true, "rejected", "N1"),
        (true, true, false, "rejected", "N1"),
        (true, true, true, "delivered", "N1"),
    ])
    func N1_N2_remoteNeedsRegistrationTheUsersSettingAndAuthorization(registered: Bool, allowed: Bool, authorized: Bool,
                                                                      outcome: String, rule: String) {
        var h = Self.harness(registered: registered, allowed: allowed)
        if !authorized { h.send(.setSettings(app: chat, .init(authorization: .denied))) }
        _ = Self.push(&h, "m1")
        let decision = h.replyDecision
        #expect(decision?.rules == [rule])
        switch decision?.outcome {
        case .rejected(let code)?: #expect(outcome == "rejected" && code == .notAuthorized)
        case .delivered?: #expect(outcome == "delivered"); #expect(h.sounds().map(\.name) == ["default"])
        default: Issue.record("unexpected \(String(describing: decision))")
        }
        if outcome == "rejected" {
            #expect(h.state.delivered.isEmpty && h.sounds().isEmpty)
            #expect(NotificationPolicy.explain(app: chat, identifier: "m1", in: h.state)?.rules == [rule])  // N16
        }
    }

    /// REMOTE.md: a field of the wrong range makes a remote message malformed. The check is the
    /// one `add` refuses with `badRequest` before looking at the state (one function for both):
    /// for each case, `requestProblem` names the rule and `add` refuses with that rule.
    @Test(arguments: [
        // (badge, criticalVolume, relevance, trigger, identifier) → rule (nil: well formed; "-": no rule)
        (Int?(-1), Double?.none, 0.0, NotificationTrigger?.none, "a", String?("N12")),
        (nil, 7, 0, nil, "a", "N3"),
        (nil, nil, 2, nil, "a", "N9"),
        (nil, nil, 0, .interval(seconds: -5, repeats: false), "a", "N8"),
        (nil, nil, 0, .interval(seconds: 10, repeats: true), "a", "N8"),
        (nil, nil, 0, .calendar(NotificationCalendarMatch(month: 2, day: 30), repeats: false), "a", "N8"),
        (nil, nil, 0, nil, "", "-"),
        (5, 0.5, 0.5, .interval(seconds: 120, repeats: true), "a", nil),
    ])
    func N3_N8_N9_N12_requestProblemIsWhatAddRefusesBeforeTheState(badge: Int?, volume: Double?, relevance: Double,
                                                                  trigger: NotificationTrigger?, identifier: String, rule: String?) {
        var h = Self.harness()
        let content = NotificationContent.test(badge: badge, relevance: relevance, criticalVolume: volume)
        let request = NotificationRequest(identifier: identifier, content: content, trigger: trigger)
        let problem = NotificationPolicy.requestProblem(request, at: h.now, config: h.config)
        #expect(problem.map { $0.rule ?? "-" } == rule, "\(String(describing: problem))")
        h.send(.add(request, app: chat, peerExecutablePath: nil))
        if let problem {
            #expect(h.errorCode == .badRequest)
            if case .failed(_, let message, let decision)? = h.reply {
                #expect(message == problem.message && (decision?.rules ?? []) == (problem.rule.map { [$0] } ?? []))
            }
        } else {
            #expect(h.errorCode == nil, "\(String(describing: h.reply))")
        }
    }

    @Test func N2_theRemoteSettingIsOffUntilTheUserTurnsItOn() {
        #expect(NotificationAppSettings().remote == nil)
        var h = Self.harness(registered: true, allowed: false)
        _ = Self.push(&h, "m1")
        #expect(h.errorCode == .notAuthorized)
        h.send(.setSettings(app: chat, .init(remote: true)))
        _ = Self.push(&h, "m2")
        #expect(h.replyDecision?.outcome == .delivered)
        h.send(.registerRemote(app: chat, enabled: false))  // the app unregisters
        _ = Self.push(&h, "m3")
        #expect(h.replyDecision?.rules == ["N1"])
    }

    @Test func N15_aMessageIDSeenBeforeIsADuplicateAndChangesNothing() {
        var h = Self.harness()
        _ = Self.push(&h, "m1")
        let first = h.replyDecision
        let before = h.state
        let reply = Self.push(&h, "m1")
        #expect(reply == .duplicate(identifier: "m1", decision: first))
        #expect(h.state == before)
        #expect(h.deliveries().isEmpty && h.sounds().isEmpty)
        // A rejected message is remembered too: it is not decided again.
        h.send(.setSettings(app: chat, .init(remote: false)))
        _ = Self.push(&h, "m2")
        h.send(.setSettings(app: chat, .init(remote: true)))
        if case .duplicate(_, let d)? = Self.push(&h, "m2") { #expect(d?.rules == ["N2"]) } else { Issue.record("not a duplicate") }
    }

    @Test func N15_theDedupeWindowKeepsTheLastIDs() {
        var h = Self.harness()
        for i in 0..<5 { _ = Self.push(&h, "m\(i)", window: 3) }
        #expect(h.state.remoteMessages == ["m2", "m3", "m4"].map { NotificationPolicy.remoteMessageKey(app: chat, messageID: $0) })
        _ = Self.push(&h, "m4", window: 3)
        if case .duplicate? = h.reply {} else { Issue.record("m4 should be a duplicate") }
    }

    /// A message id is one app's provider's: another app's message with the same id is its own
    /// (it was answered `duplicate` and never delivered). An id remembered bare (before ids were
    /// kept per app) still answers `duplicate` while it is in the window.
    @Test func N15_theSameMessageIDFromAnotherAppIsItsOwnMessage() {
        var h = Self.harness()
        let other = "org.example.Other"
        h.send(.registerRemote(app: other, enabled: true))
        h.send(.setSettings(app: other, .init(remote: true)))
        h.authorize(other)
        _ = Self.push(&h, "1")
        #expect(h.replyDecision?.outcome == .delivered)
        h.send(.addRemote(NotificationRequest(identifier: "o1", content: NotificationContent(title: "t", body: "b"), trigger: nil),
                          app: other, messageID: "1", dedupeWindow: 1000))
        #expect(h.replyDecision?.outcome == .delivered, "\(String(describing: h.reply))")
        _ = Self.push(&h, "1")
        if case .duplicate? = h.reply {} else { Issue.record("the same app's id again should be a duplicate") }
        h.state.remoteMessages.append("legacy-7")
        _ = Self.push(&h, "legacy-7")
        if case .duplicate? = h.reply {} else { Issue.record("a bare id remembered before should be a duplicate") }
    }

    @Test func N7_aRemoteNotificationUnderFocusIsSilenced() {
        var h = Self.harness()
        h.send(.setFocus(name: "sleep", until: nil))
        _ = Self.push(&h, "m1")
        #expect(h.replyDecision?.outcome == .silenced)
        #expect(h.replyDecision?.rules == ["N7"])
        #expect(h.sounds().isEmpty)
        #expect(h.state.delivered.map(\.request.identifier) == ["m1"])
    }

    @Test func N11_aBurstOfRemoteNotificationsMakesOneSoundPerInterval() {
        var h = Self.harness()
        var sounds = 0
        for i in 0..<10 {
            _ = Self.push(&h, "m\(i)", thread: "t\(i % 2)")
            sounds += h.sounds().filter { $0.volume > 0 }.count
        }
        #expect(sounds == 1)  // all within the same second
        h.advance(2)
        _ = Self.push(&h, "m10", thread: "t9")
        #expect(h.sounds().filter { $0.volume > 0 }.count == 1)
    }

    @Test func N3_aRemoteCriticalNotificationIsDecidedAsALocalOne() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), entitledCriticalApps: [.init(app: chat)], timeZone: "UTC"))
        h.authorize(chat, [.alert, .sound, .badge, .criticalAlert])
        h.send(.registerRemote(app: chat, enabled: true))
        h.send(.setSettings(app: chat, .init(remote: true)))
        var content = NotificationContent(title: "t", body: "b", sound: "default")
        content.interruptionLevel = .critical
        h.send(.addRemote(NotificationRequest(identifier: "c", content: content, trigger: nil), app: chat, messageID: "c", dedupeWindow: 10))
        // Entitled by app id alone, as a local request would be: the same core decides.
        let local = h.replyDecision
        var l = NotificationHarness(config: h.config)
        l.authorize(chat, [.alert, .sound, .badge, .criticalAlert])
        _ = l.post("c", from: chat, content)
        #expect(local?.outcome == l.replyDecision?.outcome)
    }
}

// REMOTE.md "Receipts are owed until the broker has them" (N15 for receipts): a receipt is owed from its decision's transaction until
// the broker acknowledges it, so a restart publishes again what a killed daemon had only in memory.
@Suite struct NotificationOwedReceiptTests {
    static func receipt(_ id: String, app: String = chat, time: Double = 100) -> OwedReceipt {
        OwedReceipt(app: app, messageID: id, time: time, payload: #"{"id":"\#(id)","status":"delivered"}"#)
    }

    @Test(arguments: [
        // owed (message ids), acknowledged, → still owed
        (["1", "2", "3"], [String](), ["1", "2", "3"]),
        (["1", "2", "3"], ["1"], ["2", "3"]),
        (["1", "2", "3"], ["2", "1"], ["3"]),                // out of order
        (["1", "2", "3"], ["3", "2", "1"], []),
        (["1", "2", "3"], ["9"], ["1", "2", "3"]),           // never owed: nothing changes
        (["1", "1", "2"], ["1"], ["1", "2"]),                // the same receipt owed twice: one goes per acknowledgement
        (["1", "1", "2"], ["1", "1", "1"], ["2"]),           // acknowledged more often than owed
    ] as [([String], [String], [String])])
    func N15_aReceiptIsOwedUntilTheBrokerAcknowledgesIt(owed: [String], acknowledged: [String], left: [String]) {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), timeZone: "UTC"))
        #expect(h.send(.remoteReceiptsOwed(owed.map { Self.receipt($0) })).isEmpty)
        #expect(h.state.owedReceipts.map(\.messageID) == owed)
        #expect(h.send(.remoteReceiptsAcknowledged(acknowledged.map { Self.receipt($0) })).isEmpty)
        #expect(h.state.owedReceipts.map(\.messageID) == left)
    }

    /// Two receipts are the same only if all of them is: another app's, another time, another text
    /// stays owed.
    @Test func N15_onlyTheSameReceiptIsAcknowledged() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), timeZone: "UTC"))
        h.send(.remoteReceiptsOwed([Self.receipt("1")]))
        var text = Self.receipt("1")
        text.payload = #"{"id":"1","status":"duplicate"}"#
        h.send(.remoteReceiptsAcknowledged([Self.receipt("1", app: "org.example.Other"), Self.receipt("1", time: 101), text]))
        #expect(h.state.owedReceipts == [Self.receipt("1")])
    }

    /// A broker that never acknowledges must not grow the state without end: the oldest go.
    @Test func N15_owedReceiptsAreBounded() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), timeZone: "UTC"))
        let n = NotificationPolicy.maxOwedReceipts
        h.send(.remoteReceiptsOwed((0..<n).map { Self.receipt("\($0)") }))
        h.send(.remoteReceiptsOwed([Self.receipt("new-1"), Self.receipt("new-2")]))
        #expect(h.state.owedReceipts.count == n)
        #expect(h.state.owedReceipts.first?.messageID == "2")
        #expect(h.state.owedReceipts.suffix(2).map(\.messageID) == ["new-1", "new-2"])
    }

    /// Owed receipts are saved (N15): a state that differs only in them is not "presence only".
    @Test func N15_aChangeOfOwedReceiptsIsNotPresenceOnly() {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), timeZone: "UTC"))
        let before = h.state
        h.send(.remoteReceiptsOwed([Self.receipt("1")]))
        #expect(!h.state.differsOnlyInPresence(from: before))
    }

    /// A state encoded before owed receipts existed decodes with none.
    @Test func N15_aStateEncodedBeforeOwedReceiptsDecodesWithNone() throws {
        var h = NotificationHarness(config: .init(authorization: .init(default: .grant), timeZone: "UTC"))
        h.send(.remoteReceiptsOwed([Self.receipt("1")]))
        var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(h.state)) as? [String: Any])
        #expect(object["owedReceipts"] != nil)
        object["owedReceipts"] = nil
        let old = try JSONDecoder().decode(NotificationState.self, from: JSONSerialization.data(withJSONObject: object))
        var expected = h.state
        expected.owedReceipts = []
        #expect(old == expected)
        #expect(try JSONDecoder().decode(NotificationState.self, from: JSONEncoder().encode(h.state)) == h.state)
    }
}
