import CPulse

/// An error from the PulseAudio adapter: a stable `code` to branch on and a human `message`.
///
/// The adapter never crashes on a server error; every failure of a `pa_*` call surfaces as one of
/// these. Codes (stable, documented here and nowhere else):
///
/// | code | meaning |
/// |---|---|
/// | `connectionFailed` | the server refused or could not be reached (`pa_context_connect`) |
/// | `notConnected` | no ready connection, or it went away while an operation was pending |
/// | `timeout` | the server did not answer within the time allowed |
/// | `noSuchEntity` | no sink input, sink, sample or source by that index or name (`PA_ERR_NOENTITY`) |
/// | `invalidArgument` | an argument out of range (a volume outside 0…1, an empty sample, a bad property key) |
/// | `sampleTooLarge` | a sample above the 16 MiB sample-cache limit (POLICY.md S3) |
/// | `operationFailed` | any other server-side failure; `message` carries `pa_strerror` |
/// | `wrongThread` | a blocking call made from PulseAudio's own mainloop thread (it would deadlock) |
public struct PulseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable error code (see the table above).
    public var code: String
    /// What happened, for people; not stable.
    public var message: String

    /// Makes an error with a code from the table and a message.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    /// "code: message".
    public var description: String { "\(code): \(message)" }

    static func connectionFailed(_ m: String) -> PulseError { PulseError(code: "connectionFailed", message: m) }
    static func notConnected(_ m: String = "not connected to a PulseAudio server") -> PulseError {
        PulseError(code: "notConnected", message: m)
    }
    static func timeout(_ m: String) -> PulseError { PulseError(code: "timeout", message: m) }
    static func noSuchEntity(_ m: String) -> PulseError { PulseError(code: "noSuchEntity", message: m) }
    static func invalidArgument(_ m: String) -> PulseError { PulseError(code: "invalidArgument", message: m) }
    static func sampleTooLarge(_ m: String) -> PulseError { PulseError(code: "sampleTooLarge", message: m) }
    static func operationFailed(_ m: String) -> PulseError { PulseError(code: "operationFailed", message: m) }
    static let wrongThread = PulseError(
        code: "wrongThread", message: "blocking PulseAudio call made from the PulseAudio mainloop thread")

    /// Maps a libpulse error number (`pa_context_errno`) to a code, with `what` naming the call.
    static func fromPulse(_ errno: Int32, _ what: String) -> PulseError {
        let text = pa_strerror(errno).map { String(cString: $0) } ?? "error \(errno)"
        let message = "\(what): \(text)"
        switch errno {
        case Int32(PA_ERR_NOENTITY.rawValue): return .noSuchEntity(message)
        case Int32(PA_ERR_TIMEOUT.rawValue): return .timeout(message)
        case Int32(PA_ERR_INVALID.rawValue): return .invalidArgument(message)
        case Int32(PA_ERR_TOOLARGE.rawValue): return .sampleTooLarge(message)
        case Int32(PA_ERR_CONNECTIONREFUSED.rawValue), Int32(PA_ERR_CONNECTIONTERMINATED.rawValue),
             Int32(PA_ERR_BADSTATE.rawValue), Int32(PA_ERR_KILLED.rawValue):
            return .notConnected(message)
        default: return .operationFailed(message)
        }
    }
}
