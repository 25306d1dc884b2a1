import Synchronization
import Testing
@testable import InterludeRemote

/// REMOTE.md "Receipts are owed until the broker has them": a receipt leaves the owed list only
/// when the broker acknowledges that receipt's publish. libmosquitto's packet ids are 16 bits and
/// wrap, so two publishes can share an id; the acknowledgement goes to the oldest, as in
/// libmosquitto's outgoing list.
@Suite struct PacketCallbacksTests {
    @Test func anAcknowledgementTakesTheOldestCallbackOfItsID() {
        let called = Mutex<[String]>([])
        var c = PacketCallbacks()
        c.add(7, { called.withLock { $0.append("old 7") } })
        c.add(8, { called.withLock { $0.append("8") } })
        c.add(7, { called.withLock { $0.append("new 7") } })   // the id came round again
        #expect(c.count == 3)
        c.take(7)?()
        #expect(called.withLock { $0 } == ["old 7"])            // the newer one still waits
        c.take(7)?()
        c.take(8)?()
        #expect(called.withLock { $0 } == ["old 7", "new 7", "8"])
        #expect(c.take(7) == nil && c.take(9) == nil && c.count == 0)
    }
}
