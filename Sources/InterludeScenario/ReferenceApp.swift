import Foundation
import InterludeClient
import InterludePolicy
import InterludePulse
import InterludeWire

/// A well-behaved reference app (`interlude session`, the scenario runner's sessions): registers an
/// audio session, activates it, plays a source through its own PulseAudio stream tagged with the
/// session id, pauses on `interruptionBegan`, resumes on `interruptionEnded` with `shouldResume`,
/// and deactivates (notifying others) when stopped.
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
        if interrupted || userPaused { try? stream?.setCorked(true) }
        playing.open()
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
            lock.withLock { stream?.close(); stream = nil }
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
        lock.withLock { stream?.close(); stream = nil }
        if let c = client, let s = session { try? await c.deactivate(s, notifyOthers: notifyOthers) }
        client?.close()
        eventTask?.cancel()
    }

    /// The app dies: connection and stream vanish at once (A9).
    public func crash() {
        lock.withLock { stream?.close(); stream = nil }
        client?.close()
        eventTask?.cancel()
    }
}
