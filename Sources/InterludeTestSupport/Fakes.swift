import Foundation
import InterludeEngine
import InterludePolicy
import InterludeWire

/// A fake audio server for engine and server tests: tests push stream events; the engine's
/// ramps and mutes are recorded (and reflected on the fake streams).
public final class FakeAudioBackend: AudioBackend, @unchecked Sendable {
    public let events: AsyncStream<AudioBackendEvent>
    let sink: AsyncStream<AudioBackendEvent>.Continuation
    let lock = NSLock()
    var _ramps: [(stream: UInt32, db: Double, duration: Double)] = []
    var _mutes: [UInt32: Bool] = [:]

    public init() { (events, sink) = AsyncStream.makeStream(of: AudioBackendEvent.self) }

    /// Pushes an event as the audio server would.
    public func push(_ e: AudioBackendEvent) { sink.yield(e) }

    public func rampGain(stream: UInt32, toDb gainDb: Double, duration: Double) async {
        lock.withLock { _ramps.append((stream, gainDb, duration)) }
    }
    public func setMute(stream: UInt32, _ muted: Bool) async {
        let (call, delay) = lock.withLock { () -> (Int, (@Sendable (UInt32, Int) -> Double)?) in
            _muteCalls += 1
            return (_muteCalls, _muteDelay)
        }
        // A slow server round trip, as a loaded audio server has (seconds, per call: 1 = the first).
        if let seconds = delay?(stream, call), seconds > 0 { try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9)) }
        lock.withLock { _mutes[stream] = muted }
    }
    var _muteCalls = 0
    var _muteDelay: (@Sendable (UInt32, Int) -> Double)?
    /// Makes `setMute` take `delay(stream, call)` seconds before it takes effect (`call` counts
    /// every `setMute` from 1), to test that output changes are carried out in order.
    public func delayMutes(_ delay: @escaping @Sendable (UInt32, Int) -> Double) { lock.withLock { _muteDelay = delay } }
    var _outputMuted = false
    public func outputMuted() async -> Bool? { lock.withLock { _outputMuted } }
    public func setOutputMuted(_ muted: Bool) async { lock.withLock { _outputMuted = muted } }
    /// "fake audio server".
    public func serverName() async -> String? { "fake audio server" }

    /// The ramps requested so far, in order.
    public var ramps: [(stream: UInt32, db: Double, duration: Double)] { lock.withLock { _ramps } }
    /// The last gain requested for a stream (dB), nil if none.
    public func lastGain(_ stream: UInt32) -> Double? { lock.withLock { _ramps.last { $0.stream == stream }?.db } }
    public func muted(_ stream: UInt32) -> Bool { lock.withLock { _mutes[stream] ?? false } }
    /// How many `setMute` calls so far.
    public var muteCallCount: Int { lock.withLock { _muteCalls } }
}

/// A fake sound player that records what it was asked to play.
public final class FakeSoundPlayer: SoundPlayer, @unchecked Sendable {
    let lock = NSLock()
    var _plays: [(name: String, volume: Double, properties: [String: String])] = []
    var _failure: WireError?
    var _replacement: WireError?
    public init() {}
    public func play(_ nameOrPath: String, volume: Double, properties: [String: String]) async throws(WireError) -> SoundPlayResult {
        if let failure = lock.withLock({ _failure }) { throw failure }
        let replacement = lock.withLock { _plays.append((nameOrPath, volume, properties)); return _replacement }
        return SoundPlayResult(played: replacement == nil ? nameOrPath : "default", warning: replacement, duration: 0.5)
    }
    /// While set, every play stands in the default sound for the requested one with this S1
    /// warning (a sound the folders do not hold) and is recorded.
    public var replacement: WireError? {
        get { lock.withLock { _replacement } }
        set { lock.withLock { _replacement = newValue } }
    }
    /// While set, every play fails with it (the audio server away) and is not recorded.
    public var failure: WireError? {
        get { lock.withLock { _failure } }
        set { lock.withLock { _failure = newValue } }
    }
    public func cachedSamples() async -> [String] { [] }
    public func serverRestarted() async {}
    /// Every play so far, in order.
    public var plays: [(name: String, volume: Double, properties: [String: String])] { lock.withLock { _plays } }
}

/// An in-memory notification store that counts saves (N15 plumbing tests).
public final class MemoryNotificationStore: NotificationStoring, @unchecked Sendable {
    let lock = NSLock()
    var state: NotificationState
    public private(set) var saves = 0
    var _failing = false
    public init(_ state: NotificationState = NotificationState()) { self.state = state }
    public func load() throws -> NotificationState { lock.withLock { state } }
    public func save(_ s: NotificationState) throws {
        try lock.withLock {
            if _failing { throw CocoaError(.fileWriteOutOfSpace) }
            state = s
            saves += 1
        }
    }
    /// While true, every save fails (a full disk) and the saved state stays as it was.
    public var failing: Bool {
        get { lock.withLock { _failing } }
        set { lock.withLock { _failing = newValue } }
    }
    public var saved: NotificationState { lock.withLock { state } }
}

/// A clock the test moves by hand. `sleep(until:)` returns when the test advances past the deadline.
public final class ManualClock: EngineClock, @unchecked Sendable {
    let lock = NSLock()
    var _now: Double
    var waiters: [(Double, CheckedContinuation<Void, Error>)] = []
    public init(now: Double = 1000) { _now = now }
    public var now: Double { lock.withLock { _now } }
    public var wallTime: Double { 1_764_500_000 + now }
    public func sleep(until deadline: Double) async throws {
        try await withCheckedThrowingContinuation { (k: CheckedContinuation<Void, Error>) in
            lock.lock()
            if _now >= deadline { lock.unlock(); k.resume(); return }
            waiters.append((deadline, k))
            lock.unlock()
        }
    }
    /// Moves time forward and wakes the sleepers whose deadline passed.
    public func advance(by seconds: Double) {
        lock.lock()
        _now += seconds
        let due = waiters.filter { $0.0 <= _now }
        waiters.removeAll { $0.0 <= _now }
        lock.unlock()
        for (_, k) in due { k.resume() }
    }
}
