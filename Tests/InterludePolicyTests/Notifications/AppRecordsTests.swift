import Foundation
import InterludePolicy
import Testing

/// `NotificationAppRecords`, the map of the apps the policy knows (`NotificationState.apps`): it
/// reads and changes like a dictionary, encodes as one, and copies in parts, so that a request
/// that changes one app's record neither copies nor compares every app's (issue 9: 240 µs to
/// decide and 1.4 ms to save an add at 10,000 apps).
@Suite struct AppRecordsTests {
    /// A record told apart by its badge.
    static func record(_ badge: Int) -> NotificationAppRecord {
        var r = NotificationAppRecord()
        r.badge = badge
        return r
    }

    /// Random sets, removals and in-place changes, checked against a dictionary after each step;
    /// a copy taken midway keeps its records.
    @Test func readsAndChangesLikeADictionaryAndACopyKeepsItsRecords() throws {
        var rng = SplitMix64(state: 7)
        var apps = NotificationAppRecords(), reference: [String: NotificationAppRecord] = [:]
        var copy = NotificationAppRecords(), copyReference: [String: NotificationAppRecord] = [:]
        for step in 0..<3000 {
            let app = "org.example.App\(Int.random(in: 0..<400, using: &rng))"
            switch Int.random(in: 0..<4, using: &rng) {
            case 0:
                apps[app] = Self.record(step); reference[app] = Self.record(step)
            case 1:
                apps[app] = nil; reference[app] = nil
            case 2:
                apps[app, default: Self.record(-1)].badge += 1; reference[app, default: Self.record(-1)].badge += 1
            default:
                apps[app]?.connected.toggle(); reference[app]?.connected.toggle()
            }
            if step == 1500 { copy = apps; copyReference = reference }
            #expect(apps[app] == reference[app])
            #expect(apps.count == reference.count)
        }
        #expect(apps.dictionary == reference)
        #expect(Dictionary(uniqueKeysWithValues: apps.map { ($0.key, $0.value) }) == reference)
        #expect(Set(apps.keys) == Set(reference.keys))
        #expect(copy.dictionary == copyReference, "the copy taken at step 1500 is unchanged")
        #expect(apps == NotificationAppRecords(reference))
        #expect(apps != copy)
        #expect(apps.compactMapValues { $0.badge > 100 ? $0.badge : nil } == reference.compactMapValues { $0.badge > 100 ? $0.badge : nil })
    }

    /// The JSON of a state is unchanged: the map encodes as the dictionary it holds.
    @Test func encodesAsTheDictionaryItHolds() throws {
        var apps = NotificationAppRecords()
        for i in 0..<50 { apps["org.example.App\(i)"] = Self.record(i) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(try encoder.encode(apps) == encoder.encode(apps.dictionary))
        #expect(try JSONDecoder().decode(NotificationAppRecords.self, from: encoder.encode(apps)) == apps)
        var state = NotificationState()
        state.apps = apps
        #expect(try JSONDecoder().decode(NotificationState.self, from: encoder.encode(state)) == state)
    }

    /// `forEachChange` names exactly the apps added, changed and gone between two states, and
    /// looks only into the parts a change touched: one app changed among 10,000 costs about one
    /// part's records (10,000 / 64), not all of them. Without the parts, every record was
    /// compared on every commit.
    @Test func changesAreFoundByLookingOnlyAtThePartsTouched() {
        var old = NotificationAppRecords()
        for i in 0..<10_000 { old["org.example.App\(i)"] = Self.record(i) }
        var new = old
        new["org.example.App17"]!.badge = -17
        new["org.example.New"] = Self.record(1)
        new["org.example.App42"] = nil
        var seen: [String: String] = [:]
        var compared = 0
        new.forEachChange(from: old, unchanged: { compared += 1; return $0 == $1 }) { app, was, now in
            seen[app] = was == nil ? "added" : now == nil ? "gone" : "changed"
        }
        #expect(seen == ["org.example.App17": "changed", "org.example.New": "added", "org.example.App42": "gone"])
        #expect(compared < 3 * 10_000 / NotificationAppRecords.shardCount * 2, "compared \(compared) records")
        #expect(old["org.example.App17"]?.badge == 17 && old["org.example.App42"] != nil, "the state before keeps its records")
        var unchanged = 0
        new.forEachChange(from: new, unchanged: { _, _ in unchanged += 1; return true }) { _, _, _ in Issue.record("no change") }
        #expect(unchanged == 0, "a state compared with itself looks into no part")
    }
}
