import Foundation
import Testing
import InterludeClient
import InterludeEngine
import InterludePolicy
import InterludeTestSupport
import InterludeWire

/// Issue 7 hole 7, the center's part: 20 notifications with 60 KB bodies (1.2 MB) used to be one
/// reply over `server.maxOutputBytes`, and the daemon closed the user's connection. Listings are
/// pages now, bounded by count and size.
@Suite(.serialized) struct CenterPagingTests {
    static let grant = #"{"authorization": {"default": "grant"}}"#
    static let body = String(repeating: "b", count: 60_000)

    func filled(_ d: TestDaemon, count: Int = 20, pending: Int = 0) async throws -> InterludeClient {
        let chat = try await InterludeClient.connect(socket: d.socket, app: "org.example.Chat")
        _ = try await chat.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: [.alert, .badge]),
                                as: AuthorizationResult.self)
        for i in 0..<count {
            _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "n\(i)", title: "t\(i)", body: Self.body),
                                    as: AddNotificationResult.self)
        }
        for i in 0..<pending {
            _ = try await chat.call(NotificationMethod.add, AddNotificationParams(identifier: "p\(i)", title: "later \(i)",
                                                                                  trigger: TriggerParams(in: 3600)),
                                    as: AddNotificationResult.self)
        }
        return chat
    }

    @Test func aCenterOfLargeBodiesIsListedInPagesThatFitTheOutputLimit() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        _ = try await filled(d, pending: 3)
        let user = try await InterludeClient.connect(socket: d.socket, app: Engine.userToolApp)
        var ids: [String] = [], pending: [String] = []
        var offset = 0, pages = 0
        while true {
            let reply = try await user.raw(NotificationMethod.delivered,
                                           params: try JSONValue(encoding: ListNotificationsParams(all: true, offset: offset)))
            let size = try WireCoding.encoder.encode(reply).count
            #expect(size < ListNotificationsParams.listPageBytes + 4096, "a page is \(size) bytes")
            let page = try #require(reply.result).decode(NotificationListResult.self)
            pages += 1
            #expect(page.deliveredCount == 20 && page.pendingCount == 3)
            ids += page.notifications.map(\.identifier)
            pending += page.pending.map(\.identifier)
            #expect(page.notifications.allSatisfy { $0.body == Self.body })
            guard page.more else { #expect(page.nextOffset == nil); break }
            offset = try #require(page.nextOffset)
            #expect(pages < 30)
        }
        #expect(ids == (0..<20).map { "n\($0)" })
        #expect(pending == ["p0", "p1", "p2"])
        #expect(pages >= 5, "60 KB bodies: about 4 per 256 KiB page")
        #expect(try await user.status().version == "test", "the connection is still open")
    }

    @Test func limitAndOffsetAreChecked() async throws {
        let d = try TestDaemon(overlay: Self.grant)
        let chat = try await filled(d, count: 3)
        let two = try await chat.call(NotificationMethod.delivered, ListNotificationsParams(limit: 2), as: NotificationListResult.self)
        #expect(two.notifications.map(\.identifier) == ["n0", "n1"] && two.more && two.nextOffset == 2)
        let rest = try await chat.call(NotificationMethod.delivered, ListNotificationsParams(offset: 2, limit: 2), as: NotificationListResult.self)
        #expect(rest.notifications.map(\.identifier) == ["n2"] && !rest.more)
        let past = try await chat.call(NotificationMethod.delivered, ListNotificationsParams(offset: 99), as: NotificationListResult.self)
        #expect(past.notifications.isEmpty && !past.more)
        for bad in [ListNotificationsParams(offset: -1), ListNotificationsParams(limit: 0), ListNotificationsParams(limit: 1001)] {
            let e = await #expect(throws: WireError.self) { _ = try await chat.call(NotificationMethod.delivered, bad, as: NotificationListResult.self) }
            #expect(e?.code == .badRequest, "\(bad)")
        }
    }
}
