import Foundation
import InterludeMeasure
import InterludeClient
import InterludePulse

/// Sound onset: from the request to the first audible sample at the sink's monitor, for each way of
/// playing the same sound, interleaved round by round so that drift and noise hit all alike.
struct OnsetBench {
    enum Method: String, CaseIterable {
        case cli, libraryConnected, libraryNewConnection, pactl, paplay, inProcess

        var label: String {
            switch self {
            case .cli: return "`interlude play default` (CLI process)"
            case .libraryConnected: return "`InterludeClient.play(\"default\")` (library, connected)"
            case .libraryNewConnection: return "`InterludeClient` connect + hello + play (library, new connection)"
            case .pactl: return "`pactl play-sample` (sample uploaded before)"
            case .paplay: return "`paplay Sounds/default.wav`"
            case .inProcess: return "`pa_context_play_sample_with_proplist` in the bench (floor)"
            }
        }
    }

    struct Trial {
        var onset: Double?
        /// From the request until the command exited or the request returned.
        var returned: Double
    }

    let monitor: Monitor
    let pulse: PulseConnection
    let socket: String
    let cli: String
    let soundFile: String
    let sampleName: String
    /// First sample above this (−40 dBFS) counts as audible. The sound's raised-cosine attack
    /// crosses it about 0.4 ms into the file; the same for every method.
    let threshold: Float = 0.01
    /// How long one play of the sound lasts at the output, seconds.
    let soundSeconds: Double
    let log: (String) -> Void

    /// Waits until the output has been silent for 0.2 s (previous sounds ended); false after 5 s.
    func waitForSilence() async -> Bool {
        let giveUp = now() + 5
        while now() < giveUp {
            let t = now()
            if await monitor.peak(from: t - 0.2, to: t) < threshold / 2 { return true }
            await sleep(0.1)
        }
        return false
    }

    func trial(_ m: Method, client: InterludeClient) async throws -> Trial {
        if !(await waitForSilence()) { log("warning: the output is not silent before a \(m) trial (other audio?)") }
        // The sink mixes in blocks (10 ms on the null sink with its 10 ms reader), and the silence
        // check above ends just after a block was recorded: without a random delay every request
        // would start at the same phase of the block clock and land in the same block, turning a
        // 1 ms difference between methods into 0 or 10 ms. A random phase makes each median fair.
        await sleep(Double.random(in: 0..<0.02))
        let t0 = now()
        switch m {
        case .cli:
            let status = Spawn.wait(try Spawn.start([cli, "play", "default"]))
            if status != 0 { log("warning: interlude play exited with \(status)") }
        case .pactl:
            let status = Spawn.wait(try Spawn.start(["pactl", "play-sample", sampleName]))
            if status != 0 { log("warning: pactl play-sample exited with \(status)") }
        case .paplay:
            let status = Spawn.wait(try Spawn.start(["paplay", soundFile]))
            if status != 0 { log("warning: paplay exited with \(status)") }
        case .libraryConnected:
            _ = try await client.play("default")
        case .libraryNewConnection:
            let c = try await InterludeClient.connect(socket: socket, app: Self.app)
            _ = try await c.play("default")
            c.close()
        case .inProcess:
            _ = try pulse.playSample(name: sampleName, volume: 1, properties: ["media.role": "event", "event.id": "default"])
        }
        let returned = now() - t0
        // Look from 50 ms before the request: a sound found there is left over from before.
        var onset = await monitor.firstSound(from: t0 - 0.05, to: t0 + 1, threshold: threshold).map { $0 - t0 }
        if let o = onset, o < 0 { log("warning: sound before a \(m) request (\(ms(o))); trial dropped"); onset = nil }
        if onset == nil { log("warning: no sound within 1 s of a \(m) request") }
        // Let the sound end before the next trial.
        await sleep(t0 + soundSeconds + 0.25 - now())
        return Trial(onset: onset, returned: returned)
    }

    /// The library rows play as the user's tool, as `interlude play` does, so that every row takes
    /// the same path in the daemon (S1–S3; an app's `sound.play` is decided by N17 first and needs
    /// the user's authorization).
    static let app = "org.interlude.CLI"

    struct Result {
        var first: Trial
        var trials: [Method: [Trial]]
    }

    /// One cold `interlude play default` (the daemon's first sound since it started), then `runs`
    /// rounds of every method, each round in a rotated order.
    func run(runs: Int, methods: [Method]) async throws -> Result {
        let client = try await InterludeClient.connect(socket: socket, app: Self.app)
        defer { client.close() }
        log("onset: first interlude play default after the daemon started")
        let first = try await trial(.cli, client: client)
        var trials: [Method: [Trial]] = [:]
        for r in 0..<runs {
            log("onset: round \(r + 1)/\(runs)")
            for k in 0..<methods.count {
                let m = methods[(k + r) % methods.count]
                trials[m, default: []].append(try await trial(m, client: client))
            }
        }
        return Result(first: first, trials: trials)
    }

    /// Process start-up alone: the time to run a command that exits at once.
    static func startupOnly(_ argv: [String], runs: Int) throws -> Stats {
        var times: [Double] = []
        for _ in 0..<runs {
            let t0 = now()
            _ = Spawn.wait(try Spawn.start(argv))
            times.append(now() - t0)
        }
        return Stats(times)
    }
}

func ms(_ s: Double?) -> String {
    guard let s else { return "–" }
    return String(format: "%.1f ms", s * 1000)
}
