import Foundation
import InterludeCommandLine
import InterludePolicy
import InterludeRemote
import InterludeWire
import Synchronization

/// `interlude push`: the provider's side of remote notifications (issue 11, REMOTE.md). Publishes
/// messages (QoS 1) to `PREFIX/DEVICE/notifications` and prints, per message, that the broker
/// acknowledged it, or with `--wait-receipt` the device's receipt. `interlude` execs this program
/// (it links libmosquitto; `interlude` links only the client library).
enum PushCLI {
    static let usage = """
    usage: interlude push --broker URL --device ID (--app APP --title T [--body B] [--subtitle S] [--level L]
                          [--sound NAME] [--thread T] [--sender S] [--identifier ID] [--id MSGID] | --stdin [--raw])
                          [--username U] [--password-file F] [--ca-file F] [--topic-prefix P] [--wait-receipt] [--timeout S]

    Publishes a remote notification (REMOTE.md) to device ID through the broker (QoS 1) and prints one
    JSON line per message: {"id", "acknowledged"} once the broker has it, or with --wait-receipt the
    device's receipt (decision and rules). --stdin reads one message per line (JSON objects; v, id and
    app are filled in when missing; --raw publishes the lines exactly as they are). The password comes
    from --password-file (or $INTERLUDE_PUSH_PASSWORD_FILE), never the command line. Exit 0 when every
    message was acknowledged (and every receipt came); 1 otherwise; 2 for a usage error.
    """

    static func run(_ argv: [String]) -> Int32 {
        var args = CommandInvocation(argv).rest
        if args.first == "push" { args.removeFirst() }
        do { return try push(args) } catch let e as Arguments.UsageError {
            return CommandOutput.fail("\(e.description)\n\(usage)", code: 2)
        } catch let e as MQTTError where e.code == .badURL || e.code == .badCredentials {
            return CommandOutput.fail(e.description, code: 2)
        } catch { return CommandOutput.fail(error) }
    }

    static func push(_ argv: [String]) throws -> Int32 {
        let a = try Arguments(argv, flags: ["wait-receipt", "stdin", "raw", "help"],
                              options: ["broker", "device", "app", "title", "subtitle", "body", "level", "sound", "thread", "sender",
                                        "identifier", "id", "username", "password-file", "ca-file", "topic-prefix", "timeout"])
        if a.has("help") { print(usage); return 0 }
        guard a.positionals.isEmpty else { throw Arguments.UsageError(description: "push takes no positional arguments: \(CommandOutput.text(a.positionals[0]))") }
        guard let brokerText = a.value("broker") else { throw Arguments.UsageError(description: "push needs --broker URL") }
        let broker = try MQTTBrokerURL(brokerText)
        guard let device = a.value("device") else { throw Arguments.UsageError(description: "push needs --device ID") }
        if let why = RemoteTopics.deviceProblem(device) { throw Arguments.UsageError(description: "--device: \(why)") }
        let timeout = try a.double("timeout", in: 0.1...86400) ?? 10
        let prefix = a.value("topic-prefix") ?? "interlude/devices"
        if let why = RemoteTopics.prefixProblem(prefix) { throw Arguments.UsageError(description: "--topic-prefix \(prefix): \(why)") }
        let topics = RemoteTopics(prefix: prefix, device: device)
        // Options that would not be used are refused, not ignored (a stranger's --title with
        // --stdin, --app with --raw, --ca-file for a broker without TLS).
        let single = ["title", "subtitle", "body", "level", "sound", "thread", "sender", "identifier", "id"]
        if a.has("stdin"), let o = single.first(where: a.has) {
            throw Arguments.UsageError(description: "--\(o) is for one message; with --stdin each line is a message of its own")
        }
        if a.has("raw") && !a.has("stdin") { throw Arguments.UsageError(description: "--raw goes with --stdin (it publishes the lines as they are)") }
        if a.has("raw") && a.has("app") { throw Arguments.UsageError(description: "--app fills in the lines' app, which --raw does not do: put it in the lines") }
        if a.has("ca-file") && !broker.tls { throw Arguments.UsageError(description: "--ca-file is for an mqtts:// broker; \(broker) has no TLS") }

        // The messages, checked before anything is sent.
        var messages: [(id: String, bytes: [UInt8])] = []
        /// Indices of `--raw` lines whose id cannot be read (named `line-N`): their receipt, if the
        /// device sends one, names no id, so it is not waited for.
        var unmatchable: Set<Int> = []
        if a.has("stdin") {
            // Lines as bytes: `--raw` publishes each exactly as read (invalid UTF-8 too, which
            // the daemon answers `malformed`, as it does for the same bytes from mosquitto_pub);
            // a line to be completed must be UTF-8 text.
            for (index, bytes) in Self.stdinLines().enumerated() {
                let n = index + 1
                if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
                if a.has("raw") {
                    // The id as the daemon names it in the receipt.
                    let id = RemoteMessage.receiptID(of: bytes)
                    if id == nil { unmatchable.insert(messages.count) }
                    messages.append((id ?? "line-\(n)", bytes))
                    continue
                }
                guard let line = String(validating: bytes, as: UTF8.self) else {
                    throw Arguments.UsageError(description: "stdin line \(n) is not UTF-8 text")
                }
                guard case var .object(o)? = try? JSONValue.parse(Data(line.utf8)) else {
                    throw Arguments.UsageError(description: "stdin line \(n) is not a JSON object")
                }
                if o["v"] == nil { o["v"] = .number(Double(RemoteMessage.version)) }
                if o["id"] == nil { o["id"] = .string(newID()) }
                if o["app"] == nil, let app = a.value("app") { o["app"] = .string(app) }
                let bytes = Array(try WireCoding.encoder.encode(JSONValue.object(o)))
                do { _ = try RemoteMessage.parse(bytes, maxBytes: RemoteMessage.largestMaxBytes) } catch {
                    throw Arguments.UsageError(description: "stdin line \(n): \(error.error.message)")
                }
                messages.append((o["id"]?.stringValue ?? "", bytes))
            }
            if messages.isEmpty { return CommandOutput.fail("standard input held no message (one JSON object a line): nothing published", code: 2) }
        } else {
            guard let app = a.value("app") else { throw Arguments.UsageError(description: "push needs --app APP (or --stdin)") }
            guard let title = a.value("title") else { throw Arguments.UsageError(description: "push needs --title T") }
            var level: InterruptionLevel?
            if let l = a.value("level") {
                guard let v = InterruptionLevel(name: l) else { throw Arguments.UsageError(description: "--level: passive, active, timeSensitive or critical") }
                level = v
            }
            let id = a.value("id") ?? newID()
            let m = RemoteMessage(id: id, app: app, notification: AddNotificationParams(
                identifier: a.value("identifier"), title: title, subtitle: a.value("subtitle"), body: a.value("body"), sound: a.value("sound"),
                thread: a.value("thread"), level: level, sender: a.value("sender")))
            let bytes = try m.encoded()
            do { _ = try RemoteMessage.parse(bytes, maxBytes: RemoteMessage.largestMaxBytes) } catch { throw Arguments.UsageError(description: error.error.message) }
            messages.append((id, bytes))
        }

        var password: String?
        if let file = a.value("password-file") ?? ProcessInfo.processInfo.environment["INTERLUDE_PUSH_PASSWORD_FILE"] {
            password = try MQTTOptions.readPasswordFile(file)
        }
        let receipts = Mutex<[String: [[UInt8]]]>([:])   // per id, in the order they came
        let client = try MQTTClient(MQTTOptions(broker: broker, clientID: "interlude-push-\(getpid())-\(newID().prefix(8))", cleanSession: true,
                                                username: a.value("username"), password: password, caFile: a.value("ca-file")))
        let wait = a.has("wait-receipt")
        try client.start(onMessage: { m in
            guard let r = try? JSONDecoder().decode(RemoteReceipt.self, from: Data(m.payload)), let id = r.id else { return }
            receipts.withLock { $0[id, default: []].append(m.payload) }
        })
        defer { client.stop() }
        try client.waitUntilConnected(timeout: timeout)
        if wait {
            let mid = try client.subscribe(topics.receipts, qos: 1)
            let granted = try client.waitForSubscription(mid, timeout: timeout)
            if granted.first == 128 { return CommandOutput.fail("the broker refused a subscription to \(topics.receipts)") }
        }
        // A message id twice in one batch: the broker takes both, the device decides the first and
        // answers the others `duplicate` (REMOTE.md). Said, not refused (a provider may mean it).
        var seen: [String: Int] = [:]
        for m in messages { seen[m.id, default: 0] += 1 }
        for (id, n) in seen.sorted(by: { $0.key < $1.key }) where n > 1 {
            CommandOutput.write(Data("interlude push: id \(CommandOutput.text(id)) is in this batch \(n) times: the device delivers it once and answers the others duplicate\n".utf8), to: STDERR_FILENO)
        }
        // Acknowledgements per message (packet id → its place in the batch), not per id.
        var indexOf: [Int32: Int] = [:]
        for (i, m) in messages.enumerated() { indexOf[try client.publish(topics.notifications, m.bytes, qos: 1)] = i }
        let acked = client.waitForPublished(Set(indexOf.keys), timeout: timeout + Double(messages.count) / 1000)
        let ackedIndices = Set(acked.compactMap { indexOf[$0] })
        var ok = ackedIndices.count == messages.count
        if wait {
            let deadline = Date(timeIntervalSinceNow: timeout)
            // Each acknowledged message's receipt: an id twice in the batch waits for two.
            var expected: [String: Int] = [:]
            for i in ackedIndices where !unmatchable.contains(i) { expected[messages[i].id, default: 0] += 1 }
            while Date() < deadline, receipts.withLock({ r in !expected.allSatisfy { (r[$0.key]?.count ?? 0) >= $0.value } }) {
                Thread.sleep(forTimeInterval: 0.005)
            }
        }
        let got = receipts.withLock { $0 }
        var used: [String: Int] = [:]   // receipts of an id given out so far (the k-th to its k-th message)
        var unacknowledged: [String] = [], noReceipt: [String] = [], unread: [String] = []
        for (i, m) in messages.enumerated() {
            let k = used[m.id, default: 0]
            used[m.id] = k + 1
            if wait, !unmatchable.contains(i), let all = got[m.id], k < all.count {
                // The receipt as the broker delivered it, escaped for the terminal (the same JSON).
                CommandOutput.write(UnsafeText.jsonForTerminal(Data(all[k])) + Data([0x0A]), to: STDOUT_FILENO)
            } else {
                CommandOutput.printJSONLine(PushLine(id: m.id, acknowledged: ackedIndices.contains(i), receipt: wait ? false : nil))
                if !ackedIndices.contains(i) { unacknowledged.append(m.id) } else if wait {
                    // A line whose id could not be read was not waited for: said apart.
                    if unmatchable.contains(i) { unread.append(m.id) } else { noReceipt.append(m.id) }
                    ok = false
                }
            }
        }
        // Why the exit status is 1, in words (it was said by the JSON lines alone).
        func some(_ ids: [String]) -> String {
            ids.prefix(8).map(CommandOutput.text).joined(separator: ", ") + (ids.count > 8 ? " and \(ids.count - 8) more" : "")
        }
        if !unacknowledged.isEmpty {
            CommandOutput.warn("push: the broker did not acknowledge \(unacknowledged.count) message(s) within \(CommandOutput.fmt(timeout)) s: \(some(unacknowledged))")
        }
        if !noReceipt.isEmpty {
            CommandOutput.warn("push: no receipt within \(CommandOutput.fmt(timeout)) s for \(noReceipt.count) message(s): \(some(noReceipt))")
        }
        if !unread.isEmpty {
            // Not waited for: the device's receipt for such a line names no id.
            CommandOutput.warn("push: no receipt can be matched to \(unread.count) line(s) whose id could not be read: \(some(unread))")
        }
        if messages.count > 1 {
            CommandOutput.write(Data("interlude push: \(messages.count) published, \(ackedIndices.count) acknowledged by the broker\(wait ? ", \(got.values.reduce(0) { $0 + $1.count }) receipts" : "")\n".utf8), to: STDERR_FILENO)
        }
        return ok ? 0 : 1
    }

    struct PushLine: Encodable {
        var id: String
        var acknowledged: Bool
        var receipt: Bool?
    }

    static func newID() -> String { UUID().uuidString.lowercased() }

    /// Standard input's lines as bytes, each without its line break (`\n` or `\r\n`, as
    /// `readLine` strips them); a last line without a break is a line.
    static func stdinLines() -> [[UInt8]] {
        let all = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
        var lines = all.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            line.last == 0x0D ? Array(line.dropLast()) : Array(line)
        }
        if all.last == 0x0A || all.isEmpty { lines.removeLast() }
        return lines
    }
}

extension InterruptionLevel {
    init?(name: String) {
        switch name {
        case "passive": self = .passive
        case "active": self = .active
        case "timeSensitive": self = .timeSensitive
        case "critical": self = .critical
        default: return nil
        }
    }
}
