/// The protocol's error table (PROTOCOL.md "Errors"). Codes are stable; messages are for people.
public enum WireErrorCode: String, Codable, Sendable, CaseIterable {
    /// The line is not a JSON object of the request shape, or a param has the wrong type or range.
    case badRequest
    /// The method is not one the daemon knows.
    case unknownMethod
    /// A param the method does not define (the message names it). Nothing was done.
    case unknownField
    /// The first request must be `hello`.
    case helloRequired
    /// A line longer than the 64 KiB cap. The connection is closed after this reply.
    case tooLarge
    /// The session, notification or sound named does not exist (or belongs to another client).
    case notFound
    /// The peer's uid differs from the daemon's, or the app is not authorized (N1).
    case notAuthorized
    /// A4: a non-mixable activation during a call that does not accept delay.
    case insufficientPriority
    /// N6: a promotional request that is time-sensitive or critical, or without the marketing opt-in.
    case promotionalNotAllowed
    /// Too many requests (N11 and connection limits).
    case rateLimited
    /// N14: a category with more than 4 actions.
    case tooManyActions
    /// A count limit is reached: an app's or all apps' notifications waiting for a trigger (N8,
    /// `maxPendingPerApp`, `maxPendingTotal`), or audio sessions (`server.maxSessionsPerClient`,
    /// `server.maxSessions`). Nothing was done; the connection stays usable.
    case limitReached
    /// A sound could not be played at all (not even the default, S1).
    case soundFailed
    /// The audio server is not reachable right now; the request was not carried out.
    case audioUnavailable
    /// The state could not be saved (N15): the request was not carried out.
    case storageFailed
    /// As a warning of `sound.play`: the rules decided no sound (focus, ringer, a call, cooldown); the
    /// message names the rules (N17).
    case silenced
    /// A bug in the daemon. The connection stays usable.
    case internalError
}

/// An error reply: a stable code and a message for people.
public struct WireError: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    public var code: WireErrorCode
    public var message: String
    public init(_ code: WireErrorCode, _ message: String) { self.code = code; self.message = message }
    public var description: String { "\(code.rawValue): \(message)" }
}
