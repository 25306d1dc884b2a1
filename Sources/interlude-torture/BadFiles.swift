import Foundation
import InterludeClient
import InterludeMeasure
import InterludeWire
#if canImport(Glibc)
import Glibc
#endif

/// Row 5: broken and hostile sound files in the user's sound folder (S2), each played by path
/// with `sound.play` (the user's tool, so no notification rule is in the way), and broken config
/// files, each given to a fresh daemon. A sound must get a clear answer (the default played with a
/// warning naming the cause, or an error code) within `soundBound` s while a bystander's `status`
/// is answered within 1 s throughout; a config must be refused (exit 78, the file named, a code in
/// brackets) within `configBound` s. A request without an answer in time is stuck.
struct BadFilesRow {
    let ctx: TortureContext
    let soundBound = 5.0
    let configBound = 15.0

    enum Want { case warningOrError, anyAnswer }

    func run() async -> TortureRow {
        let dir = ctx.work + "/badfiles"
        let sounds = dir + "/sounds"
        var problems: [String] = []
        var tried = 0, failed = 0
        var times: [String] = []
        var daemon: DaemonProcess?
        var bystanderWorst: Double?
        do {
            try FileManager.default.createDirectory(atPath: sounds, withIntermediateDirectories: true)
            func write(_ name: String, _ bytes: [UInt8]) throws -> String {
                let p = sounds + "/" + name
                try Data(bytes).write(to: URL(fileURLWithPath: p))
                return p
            }
            let full = HostileFiles.wav(seconds: 1.0)
            var files: [(String, String, Want)] = []
            files.append(("truncated header", try write("truncated-header.wav", Array(full.prefix(20))), .warningOrError))
            files.append(("truncated samples (header 1 s, 0.05 s there)", try write("truncated-data.wav", Array(full.prefix(44 + 4800))), .anyAnswer))
            files.append(("empty", try write("empty.wav", []), .warningOrError))
            files.append(("random bytes", try write("random.wav", (0..<65536).map { _ in UInt8.random(in: 0...255) }), .warningOrError))
            files.append(("zip named .wav", try write("archive.wav", HostileFiles.zip()), .warningOrError))
            // 1 GB header: the data chunk claims 1 GB, the file is that long but sparse.
            let huge = try write("huge.wav", HostileFiles.wavHeader(dataBytes: 1_000_000_000))
            guard truncate(huge, 1_000_000_044) == 0 else { throw Spawn.Failure(description: "truncate \(huge) failed") }
            files.append(("1 GB header (sparse file)", huge, .warningOrError))
            let fifo = sounds + "/fifo.wav"
            guard mkfifo(fifo, 0o644) == 0 else { throw Spawn.Failure(description: "mkfifo failed") }
            files.append(("FIFO named .wav", fifo, .warningOrError))
            let zero = sounds + "/zero.wav"
            _ = symlink("/dev/zero", zero)
            files.append(("symlink to /dev/zero", zero, .warningOrError))

            let config = try writeConfig(dir + "/config", "{ sounds: { userFolder: \"\(sounds)\" } }")
            let d = DaemonProcess(bin: ctx.bin, folder: dir + "/daemon", config: config, pulseServer: ctx.pulseServer)
            daemon = d
            try await d.start()
            let bystander = try await Bystander(socket: d.socket, app: "org.interlude.torture.Bystander", interval: 0.02)
            let user = try await InterludeClient.connect(socket: d.socket, app: userTool, replyTimeout: soundBound)
            defer { user.close() }

            for (what, path, want) in files {
                tried += 1
                let t0 = now()
                var verdict = ""
                do {
                    let r = try await user.play(path)
                    if let w = r.warning { verdict = "\(w.code.rawValue)" }
                    else if want == .warningOrError { verdict = "played without a warning"; failed += 1; problems.append("\(what): played \(r.played) with no warning") }
                    else { verdict = "played" }
                } catch let e as WireError {
                    verdict = e.code.rawValue
                } catch {
                    verdict = "no answer"
                    failed += 1
                    problems.append("\(what): no answer within \(soundBound) s (\(error))")
                    if path == fifo {  // let a daemon blocked in open(2) of the FIFO go on
                        let w = open(fifo, O_WRONLY | O_NONBLOCK); if w >= 0 { close(w) }
                    }
                }
                times.append("\(what) \(ms(now() - t0)) \(verdict)")
                await sleep(1.3)  // the default sound ends (N11 does not apply to the user's tool)
            }

            // A file rewritten while it is decoded: valid, cut short, garbage, valid again…
            let changing = sounds + "/changing.wav"
            try Data(HostileFiles.wav(seconds: 2.0)).write(to: URL(fileURLWithPath: changing))
            let writer = Task.detached {
                let variants: [[UInt8]] = [HostileFiles.wav(seconds: 2.0, frequency: 550), Array(HostileFiles.wav(seconds: 2.0).prefix(3000)),
                                           (0..<8192).map { _ in UInt8.random(in: 0...255) }, HostileFiles.wav(seconds: 0.5, frequency: 770)]
                var k = 0
                while !Task.isCancelled {
                    let fd = open(changing, O_WRONLY | O_TRUNC)
                    if fd >= 0 {
                        variants[k % variants.count].withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
                        close(fd)
                    }
                    k += 1
                    usleep(700)
                }
            }
            var changingTimes: [Double] = []
            var changingOutcomes: [String: Int] = [:]
            for _ in 0..<20 {
                tried += 1
                let t0 = now()
                do {
                    let r = try await user.play(changing)
                    changingOutcomes[r.warning?.code.rawValue ?? "played", default: 0] += 1
                } catch let e as WireError {
                    changingOutcomes[e.code.rawValue, default: 0] += 1
                } catch {
                    failed += 1
                    problems.append("file changing while decoded: no answer (\(error))")
                }
                changingTimes.append(now() - t0)
                await sleep(0.15)
            }
            writer.cancel()
            let cs = Stats(changingTimes)
            times.append("changing while decoded ×20 median \(ms(cs.median)), max \(ms(cs.sorted.last)) ("
                         + changingOutcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")")
            await bystander.stop()
            let b = bystander.result
            bystanderWorst = b.latencies.max()
            if b.unanswered > 0 { failed += b.unanswered; problems.append("bystander status unanswered \(b.unanswered)") }
            if let w = bystanderWorst, w > 1 { problems.append("bystander status took \(ms(w)) (bound 1 s)") }
            _ = d.checkAlive("during the bad sound files")
        } catch {
            problems.append("stopped: \(error)")
        }
        daemon?.stop()
        problems += daemon?.crashes ?? []

        // Config files: each refused by a fresh daemon with exit 78, naming the file.
        let configs: [(String, [UInt8])] = [
            ("nested 40,000 deep", Array(HostileFiles.nestedConfig(depth: 40_000).utf8)),
            ("nested 1,000,000 deep", Array(HostileFiles.nestedConfig(depth: 1_000_000).utf8)),
            ("not UTF-8", Array("{ audio: { duckLevelDb: -14 }, // caf".utf8) + [0xe9, 0xff, 0xfe] + Array(" \n}\n".utf8)),
            ("huge (16 MB string value)", Array("{ audio: { duckLevelDb: \"".utf8) + [UInt8](repeating: 0x78, count: 16 << 20) + Array("\" } }\n".utf8)),
        ]
        for (i, (what, bytes)) in configs.enumerated() {
            tried += 1
            let cdir = dir + "/config-bad-\(i)"
            try? FileManager.default.createDirectory(atPath: cdir, withIntermediateDirectories: true)
            try? Data(bytes).write(to: URL(fileURLWithPath: cdir + "/interlude.json5"))
            let logPath = dir + "/config-bad-\(i).log"
            let t0 = now()
            var verdict: String
            do {
                let pid = try Spawn.start([ctx.bin + "/interluded", "--socket", dir + "/config-bad-\(i).socket", "--state", dir + "/config-bad-state",
                                           "--config", cdir, "--pulse-server", ctx.pulseServer], stderrPath: logPath)
                var status: ExitStatus?
                while now() - t0 < configBound {
                    var raw: Int32 = 0
                    if waitpid(pid, &raw, WNOHANG) == pid { status = ExitStatus(raw: raw); break }
                    usleep(5000)
                }
                let message = ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")
                    .split(separator: "\n").first { $0.contains("bad config") }.map(String.init) ?? ""
                let code = message.range(of: #"\[config[A-Za-z]+\]"#, options: .regularExpression).map { String(message[$0]) }
                if let status {
                    if status.isCrash(expected: .exitCode(78)) {
                        failed += 1
                        problems.append("config \(what): \(status) (want exit 78)")
                    } else if !message.contains("interlude.json5") || code == nil {
                        failed += 1
                        problems.append("config \(what): refused but the message names no file or code: \(message.prefix(200))")
                    }
                    verdict = code ?? "\(status)"
                } else {
                    kill(pid, SIGKILL)
                    var raw: Int32 = 0
                    waitpid(pid, &raw, 0)
                    failed += 1
                    problems.append("config \(what): no answer within \(configBound) s (stuck)")
                    verdict = "stuck"
                }
            } catch {
                failed += 1
                problems.append("config \(what): \(error)")
                verdict = "not run"
            }
            times.append("config \(what) \(ms(now() - t0)) \(verdict)")
        }
        return TortureRow(
            name: "bad sound and config files",
            tried: "\(tried) requests: 8 broken sound files, 20 plays of a file rewritten while decoded, 4 config files",
            failed: failed,
            figures: times.joined(separator: "; ") + "; bystander status worst \(ms(bystanderWorst)); daemon crashes \(daemon?.crashes.count ?? 0)",
            problems: problems)
    }
}
