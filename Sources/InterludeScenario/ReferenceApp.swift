import Foundation
import InterludeClient
import InterludePolicy
import InterludePulse
import InterludeWire

/// A well-behaved reference app (`interlude session`, the scenario runner's sessions): registers an
/// audio session, activates it, plays a source through its own PulseAudio stream tagged with the
/// session id, pauses on `interruptionBegan`, resumes on `interruptionEnded` with `shouldResume`,
/// and deactivates (notifying others) when stopped. With ``followAudioServer()`` it also survives
/// an audio-server restart as a real app must: it reopens its stream, as the same session and still
/// paused if it was interrupted (issue 7 hole 13).
public final class ReferenceApp: @unchecked Sendable {
    public let app: String
    public let category: AudioCategory
    public let mode: AudioMode
    public let options: [AudioSessionOption]
    public let source: PulsePlaybackStream.Source
    /// false: ignore interruptions (to test A8 enforcement).
    public let obeys: Bool
    let pulse: PulseConnection
    let socket: String?
    /// Called with every event the app receives, and with its own actions.
    let onEvent: @Sendable (WireEvent) -> Void

    public private(set) var client: InterludeClient?
    public private(set) var session: AudioSessionID?
    public private(set) var activation: ActivateResult?
    private var stream: PulsePlaybackStream?
    private let lock = NSLock()
    private var userPaused = false
    private var interrupted = false
    private var eventTask: Task<Void, Never>?
    private var serverTask: Task<Void, Never>?
    /// Whether the app means to have a stream: from its first start until it is stopped, crashes
    /// or expires. A stream lost with the audio server is then reopened when the server is back.
    private var wantsStream = false
    /// Bumped by every loss and return of the audio server: a reopen attempt of an older one stops.
    private var serverGeneration = 0
    /// Opens when the app's stream starts playing (at once, or at `activated` after a delay, A4).
    public let playing = Latch()
    /// Opens when the daemon closes the connection (it stopped or crashed) or the app stops.
    public let disconnected = Latch()

    public init(socket: String?, app: String, category: AudioCategory, mode: AudioMode = .default,
                options: [AudioSessionOption] = [], source: PulsePlaybackStream.Source, pulse: PulseConnection,
                obeys: Bool = true, onEvent: @escaping @Sendable (WireEvent) -> Void = { _ in }) {
        self.socket = socket; self.app = app; self.category = category; self.mode = mode; self.options = options
        self.source = source; self.pulse = pulse; self.obeys = obeys; self.onEvent = onEvent
    }

    /// Connects and registers (no sound yet).
    public func register() async throws {
        let c = try await InterludeClient.connect(socket: socket, app: app)
        client = c
        session = try await c.register(category: category, mode: mode, options: options)
        let events = c.events
        let gone = disconnected
        eventTask = Task { [weak self] in
            for await e in events { self?.handle(e) }
            gone.open()  // the events end with the connection
        }
    }

    /// Activates and, once active, starts playing. A delayed activation (A4) starts playing when the
    /// `activated` event arrives.
    /// - Throws: ``WireError`` (e.g. `insufficientPriority`), or a PulseAudio error.
    @discardableResult
    public func activate(acceptsDelay: Bool = false) async throws -> ActivateResult {
        guard let c = client, let s = session else { throw WireError(.badRequest, "register first") }
        let r = try await c.activate(s, acceptsDelay: acceptsDelay)
        activation = r
        if r.state == .active { try startStream() }
        return r
    }

    private func startStream() throws {
        lock.lock(); defer { lock.unlock() }
        guard stream == nil, let s = session else { return }
        stream = try PulsePlaybackStream(connection: pulse, name: "\(app) \(s)", source: source,
                                         properties: ["interlude.session": s.rawValue, "application.name": app,
                                                      "interlude.daemon": socket ?? InterludeClient.defaultSocketPath(environment: ProcessInfo.processInfo.environment),
                                                      "media.role": mode == .voicePrompt ? "navigation" : (mode.isCall ? "phone" : "music")])
        wantsStream = true
        if interrupted || userPaused { try? stream?.setCorked(true) }
        playing.open()
    }

    /// Follows the audio server (call once, when the app owns its ``PulseConnection`` and nobody
    /// else reads its events; enables the connection's reconnect with backoff): when the server goes
    /// away the stream is gone with it; when it is back the stream is reopened with the same
    /// session tag, corked if the app is interrupted or paused. Reports `audioServerLost` and
    /// `streamReopened` (with `session`, `sinkInput`) through the event callback, as its own actions.
    ///
    /// A9 counts a ducking or interrupting session's expiry from when its stream vanished with the
    /// server; the stream is back within the reconnect backoff (0.1 s doubling to 5 s, plus the
    /// time the server takes to start), inside the default 10 s expiry. A server down for longer
    /// than the expiry time expires the app's prompt or call as it would a crashed app's.
    public func followAudioServer() {
        let events = pulse.events
        pulse.enableReconnect()
        serverTask = Task { [weak self] in
            for await e in events {
                guard let self else { return }
                switch e {
                case .disconnected: self.audioServerLost()
                case .connected: await self.audioServerBack()
                default: continue
                }
            }
        }
    }

    /// The audio server went away: the stream went with it (closed here; reopened by
    /// ``audioServerBack()``).
    public func audioServerLost() {
        let lost: Bool = lock.withLock {
            serverGeneration += 1
            guard let old = stream else { return false }
            old.close()
            stream = nil
            return true
        }
        if lost { onEvent(WireEvent(event: "audioServerLost", data: .object(["session": .string(session?.rawValue ?? "")]), time: Date().timeIntervalSince1970)) }
    }

    /// The audio server is back: reopens the stream if the app had one, retrying for a while if the
    /// server is not ready for streams yet (0.1 s doubling to 2 s, about 15 s in all).
    public func audioServerBack() async {
        let generation: Int = lock.withLock { serverGeneration += 1; return serverGeneration }
        var delay = 0.1
        for _ in 0..<12 {
            let (wanted, current) = lock.withLock { (wantsStream && stream == nil, serverGeneration == generation) }
            guard wanted, current else { return }
            do {
                try startStream()
                let index = sinkInput.map { JSONValue.number(Double($0)) } ?? .null
                onEvent(WireEvent(event: "streamReopened", data: .object(["session": .string(session?.rawValue ?? ""), "sinkInput": index]),
                                  time: Date().timeIntervalSince1970))
                return
            } catch {
                try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
                delay = min(2, delay * 2)
            }
        }
    }

    private func handle(_ e: WireEvent) {
        onEvent(e)
        guard obeys || e.event == WireEventName.activated else { return }
        switch e.event {
        case WireEventName.interruptionBegan:
            lock.withLock { interrupted = true; try? stream?.setCorked(true) }
        case WireEventName.interruptionEnded:
            let resume = e.data["shouldResume"]?.boolValue ?? false
            lock.withLock {
                interrupted = false
                if resume && !userPaused { try? stream?.setCorked(false) }
            }
        case WireEventName.activated:
            try? startStream()
        case WireEventName.expired:
            lock.withLock { wantsStream = false; stream?.close(); stream = nil }
        default: break
        }
    }

    /// The app's user pauses or plays the stream without deactivating.
    public func setUserPaused(_ paused: Bool) {
        lock.withLock {
            userPaused = paused
            try? stream?.setCorked(paused || (interrupted && obeys))
        }
    }

    /// The sink input of the app's stream, once playing.
    public var sinkInput: UInt32? { lock.withLock { stream?.sinkInputIndex } }

    /// Deactivates (notifying others by default) and closes the stream and the connection.
    public func stop(notifyOthers: Bool = true) async {
        serverTask?.cancel()
        lock.withLock { wantsStream = false; stream?.close(); stream = nil }
        if let c = client, let s = session { try? await c.deactivate(s, notifyOthers: notifyOthers) }
        client?.close()
        eventTask?.cancel()
    }

    /// The app dies: connection and stream vanish at once (A9).
    public func crash() {
        serverTask?.cancel()
        lock.withLock { wantsStream = false; stream?.close(); stream = nil }
        client?.close()
        eventTask?.cancel()
    }
}
