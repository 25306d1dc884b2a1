import InterludeConfig
import InterludePolicy

/// A scenario file (SCENARIOS.md): sessions, a timeline of steps, and expectations. Parsed with
/// the JSON5 reader so every error names the file, line and place.
public struct Scenario: Sendable {
    public struct Session: Sendable, Equatable {
        public var name: String
        public var app: String
        public var category: AudioCategory
        public var mode: AudioMode
        public var options: [AudioSessionOption]
        /// Hz.
        public var tone: Double
        /// false: the app ignores interruptions (A8).
        public var obeys: Bool
    }

    public enum Action: Sendable, Equatable {
        case activate(String, acceptsDelay: Bool)
        case deactivate(String, notifyOthers: Bool)
        case pause(String)
        case play(String)
        case crash(String)
        case volume(String, db: Double)
        case stream(String, role: String, tone: Double)
        case closeStream(String)
        case ringer(silent: Bool)
        case focus(String)
        case notify(id: String, fields: [String: ConfigValue])
    }

    public struct Step: Sendable, Equatable {
        /// Seconds from the scenario's start.
        public var at: Double
        public var action: Action
        public var line: Int
    }

    // The format's judging numbers (SCENARIOS.md; README "Scenario files").

    /// `levelDb: "silent"` holds below this level, dB relative to the tone at full volume.
    public static let silentBelowDb = -50.0
    /// An `event` expectation with `at` (no `between`) holds for an event within this many seconds
    /// either side of `at`.
    public static let eventWindowSeconds = 0.25
    /// Events are stamped when the runner receives them: this many seconds of delivery are allowed
    /// after a window's end.
    public static let eventDeliverySeconds = 0.05
    /// A notification `sound: "played"` in a scenario without tones: the recording's peak within
    /// `soundListenSeconds` after the decision is above this level, dBFS.
    public static let audiblePeakDbfs = -40.0
    /// How long after a notification's decision the recording is searched for its sound, seconds.
    public static let soundListenSeconds = 1.2

    public enum Level: Sendable, Equatable {
        /// dB range relative to the tone at full volume.
        case range(Double, Double)
        /// Below ``Scenario/silentBelowDb``.
        case silent
        public func holds(_ db: Double) -> Bool {
            switch self {
            case let .range(lo, hi): return db >= lo && db <= hi
            case .silent: return db < Scenario.silentBelowDb
            }
        }
        public var description: String {
            switch self {
            case let .range(lo, hi): return "[\(fmt(lo)), \(fmt(hi))] dB"
            case .silent: return "silent (< \(fmt(Scenario.silentBelowDb)) dB)"
            }
        }
    }

    public struct Expectation: Sendable, Equatable {
        public var line: Int
        /// A point in time, or a window for events.
        public var at: Double?
        public var between: (Double, Double)?
        public var session: String?
        public var state: AudioSessionState?
        public var ducked: Bool?
        public var level: Level?
        public var event: String?
        public var shouldResume: Bool?
        public var reason: String?
        public var promptStyle: String?
        public var notification: String?
        public var sound: String?
        public static func == (a: Self, b: Self) -> Bool { a.line == b.line }
        /// Latest time this expectation needs.
        public var horizon: Double { between?.1 ?? at ?? 0 }
    }

    public var file: String
    public var name: String
    public var config: ConfigValue?
    public var sessions: [Session]
    public var steps: [Step]
    public var expectations: [Expectation]

    /// Tones of unmodified-client streams, by stream name.
    public var streamTones: [String: Double] {
        var out: [String: Double] = [:]
        for s in steps { if case let .stream(x, _, tone) = s.action { out[x] = tone } }
        return out
    }
    /// When the scenario is over: the last step or expectation, plus 0.5 s.
    public var duration: Double {
        let lastNotify = steps.filter { if case .notify = $0.action { return true } else { return false } }.map(\.at).max()
        return max(steps.map(\.at).max() ?? 0, expectations.map(\.horizon).max() ?? 0, (lastNotify ?? -10) + 1.0) + 0.5
    }
    public func session(_ name: String) -> Session? { sessions.first { $0.name == name } }
}

/// A malformed scenario: names the file, the line and the place.
public struct ScenarioError: Error, Sendable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var place: String
    public var message: String
    public var description: String { "\(file):\(line): \(place): \(message)" }
}

/// A number for messages: whole ones without decimals, others with one; any size, NaN included.
func fmt(_ d: Double) -> String {
    guard d.isFinite, abs(d) < 1e15 else { return String(format: "%g", d) }
    return d.rounded() == d ? String(Int(d)) : String(format: "%.1f", d)
}

extension Scenario {
    /// Parses and checks a scenario: known keys only, sessions named by steps and expectations
    /// exist, tones at least 100 Hz apart, times not negative.
    /// - Throws: ``ScenarioError`` naming the place.
    public static func parse(_ text: String, file: String) throws(ScenarioError) -> Scenario {
        let root: ConfigValue
        do { root = try JSON5.parse(text) } catch {
            throw ScenarioError(file: file, line: error.line, place: "syntax", message: error.message)
        }
        guard case let .object(top) = root else { throw ScenarioError(file: file, line: 1, place: "top", message: "must be an object") }
        let p = Parser(file: file)
        try p.known(top, ["name", "config", "sessions", "steps", "expect"], place: "top level")
        var s = Scenario(file: file, name: "", config: nil, sessions: [], steps: [], expectations: [])
        for m in top {
            switch m.key {
            case "name": s.name = try p.string(m.value, line: m.line, place: "name")
            case "config":
                guard case .object = m.value else { throw p.error(m.line, "config", "must be an object of config keys") }
                // Checked now against the config schema, so that a bad key is reported in this file.
                do { _ = try ConfigLoader.load(folders: [], overlay: (file, m.value)) } catch {
                    throw ScenarioError(file: file, line: max(error.line, m.line), place: "config" + (error.key.map { "." + $0 } ?? ""),
                                        message: error.message)
                }
                s.config = m.value
            case "sessions":
                guard case let .object(members) = m.value else { throw p.error(m.line, "sessions", "must be an object") }
                for sm in members { s.sessions.append(try p.session(sm.key, sm.value, line: sm.line)) }
            case "steps":
                guard case let .array(items) = m.value else { throw p.error(m.line, "steps", "must be a list") }
                for (i, item) in items.enumerated() { s.steps.append(try p.step(item, index: i, line: p.line(of: item, near: m.line))) }
            case "expect":
                guard case let .array(items) = m.value else { throw p.error(m.line, "expect", "must be a list") }
                for (i, item) in items.enumerated() { s.expectations.append(try p.expectation(item, index: i, line: p.line(of: item, near: m.line))) }
            default: break
            }
        }
        try p.check(s)
        return s
    }

    struct Parser {
        let file: String
        func error(_ line: Int, _ place: String, _ message: String) -> ScenarioError {
            ScenarioError(file: file, line: line, place: place, message: message)
        }
        /// The line of an object's first key (arrays do not record element lines).
        func line(of v: ConfigValue, near: Int) -> Int {
            if case let .object(m) = v, let first = m.first { return first.line }
            return near
        }
        func known(_ m: [(key: String, line: Int, value: ConfigValue)], _ keys: Set<String>, place: String) throws(ScenarioError) {
            if let bad = m.first(where: { !keys.contains($0.key) }) {
                throw error(bad.line, place, "unknown key \"\(bad.key)\" (known: \(keys.sorted().joined(separator: ", ")))")
            }
        }
        func string(_ v: ConfigValue, line: Int, place: String) throws(ScenarioError) -> String {
            guard case let .string(s) = v else { throw error(line, place, "must be a string") }
            return s
        }
        func number(_ v: ConfigValue, line: Int, place: String) throws(ScenarioError) -> Double {
            guard case let .number(n) = v else { throw error(line, place, "must be a number") }
            return n
        }
        func bool(_ v: ConfigValue, line: Int, place: String) throws(ScenarioError) -> Bool {
            guard case let .bool(b) = v else { throw error(line, place, "must be true or false") }
            return b
        }
        func members(_ v: ConfigValue, line: Int, place: String) throws(ScenarioError) -> [(key: String, line: Int, value: ConfigValue)] {
            guard case let .object(m) = v else { throw error(line, place, "must be an object") }
            return m
        }

        func session(_ name: String, _ v: ConfigValue, line: Int) throws(ScenarioError) -> Scenario.Session {
            let place = "sessions.\(name)"
            let m = try members(v, line: line, place: place)
            try known(m, ["app", "category", "mode", "options", "tone", "obeys"], place: place)
            var s = Scenario.Session(name: name, app: "", category: .soloAmbient, mode: .default, options: [], tone: 0, obeys: true)
            var haveTone = false
            for x in m {
                let pl = "\(place).\(x.key)"
                switch x.key {
                case "app": s.app = try string(x.value, line: x.line, place: pl)
                case "category":
                    let c = try string(x.value, line: x.line, place: pl)
                    guard let cat = AudioCategory(rawValue: c) else { throw error(x.line, pl, "unknown category \"\(c)\"") }
                    s.category = cat
                case "mode":
                    let c = try string(x.value, line: x.line, place: pl)
                    guard let mode = AudioMode(rawValue: c) else { throw error(x.line, pl, "unknown mode \"\(c)\"") }
                    s.mode = mode
                case "options":
                    guard case let .array(items) = x.value else { throw error(x.line, pl, "must be a list") }
                    for i in items {
                        let o = try string(i, line: x.line, place: pl)
                        guard let opt = AudioSessionOption(rawValue: o) else { throw error(x.line, pl, "unknown option \"\(o)\"") }
                        s.options.append(opt)
                    }
                case "tone": s.tone = try number(x.value, line: x.line, place: pl); haveTone = true
                case "obeys": s.obeys = try bool(x.value, line: x.line, place: pl)
                default: break
                }
            }
            if s.app.isEmpty { throw error(line, place, "needs \"app\"") }
            if let why = AudioSessionDescriptor(app: s.app, category: s.category, mode: s.mode, options: Set(s.options)).configurationProblem {
                throw error(line, place, why)
            }
            if !haveTone { throw error(line, place, "needs \"tone\" (Hz)") }
            return s
        }

        func step(_ v: ConfigValue, index: Int, line: Int) throws(ScenarioError) -> Scenario.Step {
            let place = "steps[\(index)]"
            let m = try members(v, line: line, place: place)
            guard let atM = m.first(where: { $0.key == "at" }) else { throw error(line, place, "needs \"at\" (seconds)") }
            let at = try number(atM.value, line: atM.line, place: place + ".at")
            if at < 0 { throw error(atM.line, place + ".at", "must not be negative") }
            func get(_ k: String) -> (key: String, line: Int, value: ConfigValue)? { m.first { $0.key == k } }
            let kinds = ["activate", "deactivate", "pause", "play", "crash", "volume", "stream", "closeStream", "ringer", "focus", "notify"]
            let present = m.filter { kinds.contains($0.key) }
            guard present.count == 1, let k = present.first else {
                throw error(line, place, present.isEmpty ? "unknown step: needs one of \(kinds.joined(separator: ", "))"
                                                         : "one step may do one thing, not \(present.map(\.key).joined(separator: " and "))")
            }
            let name = k.key == "ringer" || k.key == "focus" || k.key == "notify" ? "" : try string(k.value, line: k.line, place: place + "." + k.key)
            let action: Scenario.Action
            var allowed: Set<String> = ["at", k.key]
            switch k.key {
            case "activate":
                allowed.insert("acceptsDelay")
                action = .activate(name, acceptsDelay: try get("acceptsDelay").map { x throws(ScenarioError) in try bool(x.value, line: x.line, place: place) } ?? false)
            case "deactivate":
                allowed.insert("notifyOthers")
                action = .deactivate(name, notifyOthers: try get("notifyOthers").map { x throws(ScenarioError) in try bool(x.value, line: x.line, place: place) } ?? true)
            case "pause": action = .pause(name)
            case "play": action = .play(name)
            case "crash": action = .crash(name)
            case "volume":
                allowed.insert("db")
                guard let d = get("db") else { throw error(line, place, "volume needs \"db\"") }
                action = .volume(name, db: try number(d.value, line: d.line, place: place + ".db"))
            case "stream":
                allowed.formUnion(["role", "tone"])
                guard let r = get("role"), let t = get("tone") else { throw error(line, place, "stream needs \"role\" and \"tone\"") }
                action = .stream(name, role: try string(r.value, line: r.line, place: place + ".role"),
                                 tone: try number(t.value, line: t.line, place: place + ".tone"))
            case "closeStream": action = .closeStream(name)
            case "ringer":
                let r = try string(k.value, line: k.line, place: place + ".ringer")
                guard r == "silent" || r == "ring" else { throw error(k.line, place + ".ringer", "must be silent or ring") }
                action = .ringer(silent: r == "silent")
            case "focus": action = .focus(try string(k.value, line: k.line, place: place + ".focus"))
            default:
                // A notify step's fields: these are strings; criticalVolume and promotional are not.
                let strings: Set<String> = ["app", "level", "sound", "thread", "id", "sender", "body", "title"]
                allowed.formUnion(strings.union(["criticalVolume", "promotional"]))
                let id = try string(k.value, line: k.line, place: place + ".notify")
                for f in m where strings.contains(f.key) {
                    _ = try string(f.value, line: f.line, place: place + "." + f.key)
                }
                if let l = m.first(where: { $0.key == "level" }), case let .string(level) = l.value,
                   !["passive", "active", "timeSensitive", "critical"].contains(level) {
                    throw error(l.line, place + ".level", "must be passive, active, timeSensitive or critical, not \(level)")
                }
                if let v = m.first(where: { $0.key == "criticalVolume" }) {
                    guard case let .number(x) = v.value, (0...1).contains(x) else {
                        throw error(v.line, place + ".criticalVolume", "must be a number 0…1")
                    }
                }
                action = .notify(id: id, fields: Dictionary(m.filter { $0.key != "at" && $0.key != "notify" }.map { ($0.key, $0.value) },
                                                            uniquingKeysWith: { a, _ in a }))
            }
            try known(m, allowed, place: place)
            return Scenario.Step(at: at, action: action, line: line)
        }

        func expectation(_ v: ConfigValue, index: Int, line: Int) throws(ScenarioError) -> Scenario.Expectation {
            let place = "expect[\(index)]"
            let m = try members(v, line: line, place: place)
            try known(m, ["at", "between", "session", "state", "ducked", "levelDb", "event", "shouldResume", "reason",
                          "promptStyle", "notification", "sound"], place: place)
            var e = Scenario.Expectation(line: line)
            for x in m {
                let pl = "\(place).\(x.key)"
                switch x.key {
                case "at": e.at = try number(x.value, line: x.line, place: pl)
                case "between":
                    guard case let .array(a) = x.value, a.count == 2, case let .number(t1) = a[0], case let .number(t2) = a[1], t1 <= t2 else {
                        throw error(x.line, pl, "must be [t1, t2] with t1 <= t2")
                    }
                    e.between = (t1, t2)
                case "session": e.session = try string(x.value, line: x.line, place: pl)
                case "state":
                    let s = try string(x.value, line: x.line, place: pl)
                    guard let st = AudioSessionState(rawValue: s) else { throw error(x.line, pl, "unknown state \"\(s)\"") }
                    e.state = st
                case "ducked": e.ducked = try bool(x.value, line: x.line, place: pl)
                case "levelDb":
                    switch x.value {
                    case .string("silent"): e.level = .silent
                    case let .array(a) where a.count == 2:
                        guard case let .number(lo) = a[0], case let .number(hi) = a[1], lo <= hi else { throw error(x.line, pl, "must be [lo, hi]") }
                        e.level = .range(lo, hi)
                    default: throw error(x.line, pl, "must be [lo, hi] or \"silent\"")
                    }
                case "event": e.event = try string(x.value, line: x.line, place: pl)
                case "shouldResume": e.shouldResume = try bool(x.value, line: x.line, place: pl)
                case "reason": e.reason = try string(x.value, line: x.line, place: pl)
                case "promptStyle": e.promptStyle = try string(x.value, line: x.line, place: pl)
                case "notification": e.notification = try string(x.value, line: x.line, place: pl)
                case "sound": e.sound = try string(x.value, line: x.line, place: pl)
                default: break
                }
            }
            if e.notification == nil {
                if e.session == nil { throw error(line, place, "needs \"session\" or \"notification\"") }
                if e.event != nil { if e.between == nil && e.at == nil { throw error(line, place, "an event needs \"between\": [t1, t2]") } }
                else if e.at == nil { throw error(line, place, "needs \"at\"") }
            }
            return e
        }

        /// Longest scenario the runner accepts, seconds (it runs in real time).
        static let maxDuration = 600.0

        func check(_ s: Scenario) throws(ScenarioError) {
            if let late = s.steps.first(where: { $0.at > Parser.maxDuration }) {
                throw error(late.line, "step at \(fmt(late.at)) s", "scenarios run in real time; steps may be at most \(Int(Parser.maxDuration)) s")
            }
            if let late = s.expectations.first(where: { $0.horizon > Parser.maxDuration }) {
                throw error(late.line, "expect", "scenarios run in real time; expectations may be at most \(Int(Parser.maxDuration)) s")
            }
            var tones: [(String, Double)] = s.sessions.map { ($0.name, $0.tone) }
            for st in s.steps {
                if case let .stream(x, _, t) = st.action { tones.append((x, t)) }
                switch st.action {
                case let .activate(n, _), let .deactivate(n, _), let .pause(n), let .play(n), let .crash(n), let .volume(n, _):
                    if s.session(n) == nil { throw error(st.line, "step at \(fmt(st.at)) s", "no session named \"\(n)\"") }
                case let .closeStream(x):
                    if s.streamTones[x] == nil { throw error(st.line, "step at \(fmt(st.at)) s", "no stream named \"\(x)\" was opened") }
                default: break
                }
            }
            for t in tones where t.1 < 100 || t.1 > 20000 {
                throw error(1, "tone of \(t.0)", "\(fmt(t.1)) Hz is outside 100…20000 Hz")
            }
            for i in tones.indices { for j in tones.indices where j > i && abs(tones[i].1 - tones[j].1) < 100 {
                throw error(1, "tones", "\(tones[i].0) (\(fmt(tones[i].1)) Hz) and \(tones[j].0) (\(fmt(tones[j].1)) Hz) are closer than 100 Hz")
            } }
            for e in s.expectations {
                if let n = e.session, s.session(n) == nil, s.streamTones[n] == nil {
                    throw error(e.line, "expect", "no session or stream named \"\(n)\"")
                }
                if let n = e.notification, !s.steps.contains(where: { if case .notify(n, _) = $0.action { return true } else { return false } }) {
                    throw error(e.line, "expect", "no notify step for \"\(n)\"")
                }
            }
            if s.expectations.isEmpty { throw error(1, "expect", "a scenario needs at least one expectation") }
        }
    }
}

extension Scenario.Expectation {
    init(line: Int) { self.line = line }
}
