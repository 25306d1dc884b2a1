// Fuzz target `dispatch`: request lines through the daemon's request dispatch (RequestHandler in
// Sources/InterludeServer) to an Engine with a fake audio server, a fake sound player, an
// in-memory notification store and a manual clock (Sources/InterludeTestSupport). Each input is a
// fresh engine and one or two clients: the input's lines are requests, in order; a line that
// starts with `>` comes from a second client (the `>` is dropped), so the policy sees other apps'
// sessions and notifications. Time stands still (FrozenClock: the engine's timers never fire, so
// nothing outlives the input). Every line is dispatched (the hello gate of RequestHandler.run is
// not in the way, so params of every method are reached at once). The property: no request
// traps; each gets a result or a WireError.
import Dispatch
import Foundation
import InterludeConfig
import InterludeEngine
@testable import InterludeServer
import InterludeTestSupport
import InterludeWire

/// The built-in configuration, loaded once (the same as the test daemon's).
let config: InterludeConfig = {
    do { return try ConfigLoader.load(folders: []) } catch { fatalError("built-in config: \(error)") }
}()

/// A clock at a fixed time whose sleeps end at once as cancelled: the engine's deadline timers
/// give up, and no task is left waiting when the input's engine goes away.
final class FrozenClock: EngineClock {
    var now: Double { 1000 }
    var wallTime: Double { 1_764_500_000 }
    func sleep(until deadline: Double) async throws { throw CancellationError() }
}

/// RequestHandler needs a connection; dispatch does not use it. Never started, never written to.
let idleConnection = Connection(fd: -1, pid: 0, limits: ConnectionLimits(), log: { _ in })

/// Runs `body` on the concurrency pool and waits for it (libFuzzer calls us synchronously).
func runAsync(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task { await body(); done.signal() }
    done.wait()
}

/// Builds the globals before the first input (libFuzzer counts what an input allocates and keeps
/// as a leak).
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    _ = config
    _ = idleConnection
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDispatch(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeBufferPointer(start: data, count: size)
    let lines = input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).map(Array.init)
    runAsync {
        let engine: Engine
        do {
            engine = try Engine(config: config, audio: FakeAudioBackend(), sounds: FakeSoundPlayer(),
                                clock: FrozenClock(), store: MemoryNotificationStore(), version: "fuzz")
        } catch { fatalError("engine: \(error)") }
        // Not engine.start(): it would leave a task per input waiting on the fake's event stream
        // forever (nothing pushes audio events here, and the stream is never finished).
        let first = await engine.connect(pid: 100, executable: nil) { _ in }
        let second = await engine.connect(pid: 101, executable: nil) { _ in }
        for var line in lines {
            var client = first
            if line.first == UInt8(ascii: ">") { client = second; line.removeFirst() }
            guard let request = try? WireRequest.parse(line) else { continue }
            let handler = RequestHandler(engine: engine, client: client, connection: idleConnection, log: { _ in })
            _ = try? await handler.dispatch(request)
        }
        await engine.disconnect(client: first)
        await engine.disconnect(client: second)
    }
    return 0
}
