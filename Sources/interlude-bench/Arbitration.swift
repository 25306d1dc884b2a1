import Foundation
import InterludeMeasure
import InterludeClient
import InterludePolicy

/// Arbitration cost: with N sessions registered, one of them active (a non-mixable `playback`
/// session), activating another non-mixable `playback` session interrupts the active one (A1);
/// deactivating it (notifying others) gives the first one back (A5). Only the activation is timed.
struct ArbitrationBench {
    let socket: String
    let config: AudioPolicyConfig
    let log: (String) -> Void

    struct DaemonResult {
        var activate: Stats
        var deactivate: Stats
        var register: Double
        var residentWithSessions: ProcStats.ResidentMemory?
    }

    /// Over the socket: one connection registers N sessions, then `runs` timed activations.
    func daemon(sessions n: Int, runs: Int, daemonPID: Int32?) async throws -> DaemonResult {
        let client = try await InterludeClient.connect(socket: socket, app: "org.interlude.bench.Arbiter")
        defer { client.close() }
        let events = client.events
        let drain = Task { for await _ in events {} }  // interruptionBegan / interruptionEnded
        defer { drain.cancel() }
        let t0 = now()
        var ids: [AudioSessionID] = []
        for _ in 0..<n { ids.append(try await client.register(category: .playback)) }
        let register = now() - t0
        let music = ids[0], taker = ids[n - 1]
        _ = try await client.activate(music)
        var activate: [Double] = [], deactivate: [Double] = []
        for i in 0..<(runs + 3) {
            let a = now()
            _ = try await client.activate(taker)
            let b = now()
            try await client.deactivate(taker, notifyOthers: true)
            let c = now()
            if i >= 3 { activate.append(b - a); deactivate.append(c - b) }  // 3 warm-up rounds
        }
        let rss = daemonPID.flatMap { ProcStats.residentMemory($0) }
        return DaemonResult(activate: Stats(activate), deactivate: Stats(deactivate), register: register,
                            residentWithSessions: rss)
    }

    struct PureResult {
        /// Registering the N sessions (N `reduce(.register)` events), seconds.
        var register: Double
        /// `AudioPolicy.reduce(.activate)` alone.
        var reduce: Stats
        /// `reduce` and then `nextDeadline`, what the engine runs per event.
        var reduceAndDeadline: Stats
    }

    /// The same, in-process on the pure policy (no socket, no JSON, no actor).
    func pure(sessions n: Int, runs: Int) -> PureResult {
        var state = AudioPolicyState()
        var t = 1000.0
        let ids = (1...n).map { AudioSessionID("s\($0)") }
        let r0 = now()
        for id in ids {
            _ = AudioPolicy.reduce(&state, .register(id, AudioSessionDescriptor(app: "org.interlude.bench.Arbiter", category: .playback)),
                                   now: t, config: config)
        }
        let register = now() - r0
        _ = AudioPolicy.reduce(&state, .activate(ids[0], acceptsDelay: false), now: t, config: config)
        var reduce: [Double] = [], both: [Double] = []
        var effects = 0
        for i in 0..<(runs + 10) {
            t += 0.001
            let a = now()
            effects += AudioPolicy.reduce(&state, .activate(ids[n - 1], acceptsDelay: false), now: t, config: config).count
            let b = now()
            if AudioPolicy.nextDeadline(state, config: config) != nil { effects += 1 }
            let c = now()
            effects += AudioPolicy.reduce(&state, .deactivate(ids[n - 1], notifyOthers: true), now: t, config: config).count
            if i >= 10 { reduce.append(b - a); both.append(c - a) }
        }
        if effects == 0 { log("warning: the policy produced no effects") }
        return PureResult(register: register, reduce: Stats(reduce), reduceAndDeadline: Stats(both))
    }
}

extension ArbitrationBench {
    struct ActiveResult {
        /// Registering and activating all N `ambient` sessions (2N events, each with `nextDeadline`), seconds.
        var activateAll: Double
        /// With the N active: registering, activating and deactivating one more (3 events, each
        /// with `nextDeadline`), per event.
        var perEvent: Stats
    }

    /// On the pure policy, N sessions that are all active at once (`ambient`: mixable, not
    /// playing; a stranger's one connection did this over the socket): what each event costs
    /// when every session is live, and activating them all (linear, not quadratic, in N).
    func pureActive(sessions n: Int, runs: Int) -> ActiveResult {
        var state = AudioPolicyState()
        let t = 1000.0
        let ambient = AudioSessionDescriptor(app: "org.interlude.bench.Ambient", category: .ambient)
        var effects = 0
        let r0 = now()
        for i in 1...n {
            let id = AudioSessionID("s\(i)")
            effects += AudioPolicy.reduce(&state, .register(id, ambient), now: t, config: config).count
            if AudioPolicy.nextDeadline(state, config: config) != nil { effects += 1 }
            effects += AudioPolicy.reduce(&state, .activate(id, acceptsDelay: false), now: t, config: config).count
            if AudioPolicy.nextDeadline(state, config: config) != nil { effects += 1 }
        }
        let activateAll = now() - r0
        var perEvent: [Double] = []
        for i in 0..<(runs + 10) {
            let id = AudioSessionID("x\(i)")
            let a = now()
            effects += AudioPolicy.reduce(&state, .register(id, ambient), now: t, config: config).count
            _ = AudioPolicy.nextDeadline(state, config: config)
            effects += AudioPolicy.reduce(&state, .activate(id, acceptsDelay: false), now: t, config: config).count
            _ = AudioPolicy.nextDeadline(state, config: config)
            effects += AudioPolicy.reduce(&state, .unregister(id, notifyOthers: false), now: t, config: config).count
            _ = AudioPolicy.nextDeadline(state, config: config)
            if i >= 10 { perEvent.append((now() - a) / 3) }
        }
        if effects == 0 { log("warning: the policy produced no effects") }
        return ActiveResult(activateAll: activateAll, perEvent: Stats(perEvent))
    }
}

func us(_ s: Double?) -> String {
    guard let s else { return "–" }
    return s < 0.001 ? String(format: "%.1f µs", s * 1e6) : String(format: "%.2f ms", s * 1000)
}
