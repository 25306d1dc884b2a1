import InterludeBus
import InterludeEngine
import InterludePolicy
import XCTest

/// The table in README "D-Bus notifications", one row per test.
final class NotificationMappingTests: XCTestCase {
    func map(_ call: BusNotifyCall, exe: String? = "/usr/bin/notify-send") throws -> BusNotificationInput {
        try NotificationMapping.input(call, executable: exe, defaultSound: "message-new-instant")
    }

    func testAppIDFromDesktopEntryThenAppNameThenExecutable() throws {
        XCTAssertEqual(try map(.init(appName: "Chat", hints: ["desktop-entry": .string("org.example.Chat")])).app, "org.example.Chat")
        XCTAssertEqual(try map(.init(appName: "Chat", hints: ["desktop-entry": .string("org.example.Chat.desktop")])).app, "org.example.Chat")
        XCTAssertEqual(try map(.init(appName: "Mozilla Firefox")).app, "Mozilla-Firefox")
        XCTAssertEqual(try map(.init(appName: "")).app, "notify-send")
        XCTAssertThrowsError(try map(.init(appName: ""), exe: nil))
    }

    func testUrgencyToInterruptionLevel() throws {
        XCTAssertEqual(try map(.init(appName: "a", hints: ["urgency": .byte(0)])).content.interruptionLevel, .passive)  // N5
        XCTAssertEqual(try map(.init(appName: "a", hints: ["urgency": .byte(1)])).content.interruptionLevel, .active)
        XCTAssertEqual(try map(.init(appName: "a")).content.interruptionLevel, .active)
        XCTAssertEqual(try map(.init(appName: "a", hints: ["urgency": .byte(2)])).content.interruptionLevel, .critical)  // N3 decides
        XCTAssertEqual(try map(.init(appName: "a", hints: ["urgency": .int(2)])).content.interruptionLevel, .critical)
        XCTAssertThrowsError(try map(.init(appName: "a", hints: ["urgency": .byte(3)])))
        XCTAssertThrowsError(try map(.init(appName: "a", hints: ["urgency": .string("critical")])))
    }

    func testCategoriesRaiseTheLevelAndMarkCalls() throws {
        let call = try map(.init(appName: "a", summary: "Alice", hints: ["category": .string("call.incoming")]))
        XCTAssertEqual(call.content.interruptionLevel, .timeSensitive)  // N4
        XCTAssertTrue(call.content.isCall)  // N7 repeated calls
        XCTAssertEqual(call.content.sender, "Alice")
        XCTAssertEqual(try map(.init(appName: "a", hints: ["category": .string("alarm.ringing")])).content.interruptionLevel, .timeSensitive)
        XCTAssertEqual(try map(.init(appName: "a", hints: ["urgency": .byte(0), "category": .string("im.received")])).content.interruptionLevel, .passive)
        XCTAssertEqual(try map(.init(appName: "a", hints: ["category": .string("cellbroadcast.danger.extreme")])).content.interruptionLevel, .critical)
    }

    func testSoundHints() throws {
        XCTAssertEqual(try map(.init(appName: "a")).content.sound, "message-new-instant")  // bus.defaultSound
        XCTAssertEqual(try map(.init(appName: "a", hints: ["sound-name": .string("bell")])).content.sound, "bell")
        XCTAssertEqual(try map(.init(appName: "a", hints: ["sound-file": .string("file:///tmp/x.wav")])).content.sound, "/tmp/x.wav")
        XCTAssertNil(try map(.init(appName: "a", hints: ["sound-name": .string("bell"), "suppress-sound": .bool(true)])).content.sound)
        XCTAssertNil(try NotificationMapping.input(.init(appName: "a"), executable: nil, defaultSound: "none").content.sound)
        XCTAssertThrowsError(try map(.init(appName: "a", hints: ["suppress-sound": .string("true")])))
        XCTAssertThrowsError(try map(.init(appName: "a", hints: ["sound-name": .int(4)])))
    }

    func testActionsTransientAndReplaces() throws {
        let x = try map(.init(appName: "a", replacesID: 7, actions: ["default", "Open", "yes", "Yes", "no", "No", "yes", "again"],
                              hints: ["transient": .bool(true)]))
        XCTAssertEqual(x.actions.map(\.identifier), ["yes", "no"])  // default is always allowed (N14); duplicates dropped
        XCTAssertEqual(x.actions.map(\.title), ["Yes", "No"])
        XCTAssertTrue(x.transient)
        XCTAssertEqual(x.replacesID, 7)
        // 0/1 as an integer too (`notify-send -h int:transient:1`, a stranger's); other values are refused.
        XCTAssertTrue(try map(.init(appName: "a", hints: ["transient": .int(1)])).transient)
        XCTAssertTrue(try map(.init(appName: "a", hints: ["transient": .byte(1)])).transient)
        XCTAssertFalse(try map(.init(appName: "a", hints: ["transient": .int(0)])).transient)
        XCTAssertThrowsError(try map(.init(appName: "a", hints: ["transient": .int(2)]))) { e in
            XCTAssertTrue("\(e)".contains("must be a boolean (or 0 or 1), not 2"), "\(e)")  // the value, not only its type
        }
        XCTAssertThrowsError(try map(.init(appName: "a", hints: ["transient": .string("true")])))
    }

    func testSenderPidHintIsIgnoredForEntitlements() throws {
        // N3: the executable comes from the bus (GetConnectionUnixProcessID), not from the message.
        let x = try map(.init(appName: "a", hints: ["sender-pid": .int(1)]), exe: "/usr/bin/notify-send")
        XCTAssertEqual(x.executable, "/usr/bin/notify-send")
    }
}

extension NotificationMappingTests {
    func testCriticalUrgencyFallsBackToTimeSensitiveAtMost() throws {
        XCTAssertEqual(try map(.init(appName: "a", hints: ["urgency": .byte(2)])).content.criticalFallbackLevel, .timeSensitive)
        XCTAssertNil(try map(.init(appName: "a")).content.criticalFallbackLevel)
    }
}
