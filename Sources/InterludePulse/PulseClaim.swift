import CPulse
import Foundation

/// A client of the server (`pa_client_info`): its index and its properties.
public struct PulseClient: Sendable, Equatable {
    /// The server's index of the client.
    public var index: UInt32
    /// Every string property of the client (`application.name`, `application.process.id`, and
    /// whatever the client set, such as a ``PulseClaim``'s).
    public var properties: [String: String]

    /// Memberwise initializer (for tests).
    public init(index: UInt32, properties: [String: String]) {
        self.index = index
        self.properties = properties
    }

    /// `application.process.id`, if the client gave one.
    public var processID: Int32? { InterludePulse.processID(in: properties) }
}

/// A claim a connection announces on the server in its own client properties: "one of us per
/// audio server and user" (the daemon's `interlude.manager`, issue 7 hole 12).
///
/// A claim lives exactly as long as the client that announces it: the server drops a client's
/// properties with its connection, so a holder that was SIGKILLed or lost the server leaves no
/// marker behind (nothing to clean up, no stale lock). The connection stamps the claim anew on
/// every (re)connect, so after a server restart the first to announce again holds it.
///
/// Properties written on the client, for `key` `K`:
/// - `K` = ``value`` (e.g. the daemon's socket path: who holds it, for the other's message);
/// - `K.uid` = the process's real uid (claims of other users on a shared server do not compete);
/// - `K.since` = when this context was created, ns since 1970 (CLOCK_REALTIME).
///
/// The holder among live clients is the one with the earliest `since`, then the lowest client
/// index (``holder(of:uid:among:)``). Every contender computes the same answer from the same
/// client list, so two that connect at once agree on one of them (PipeWire reuses client indexes,
/// so the index alone would not say who came first).
public struct PulseClaim: Sendable, Equatable {
    /// The property key, e.g. `interlude.manager`.
    public var key: String
    /// What the claim says about its holder (the daemon puts its socket path).
    public var value: String

    /// - Parameters:
    ///   - key: the property key naming the claim.
    ///   - value: a non-empty description of the holder.
    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }

    /// The real uid of this process, as the claim writes it.
    public static var currentUID: String { String(getuid()) }

    /// The client properties announcing this claim at `since` (ns since 1970).
    public func properties(since: UInt64, uid: String = PulseClaim.currentUID) -> [String: String] {
        [key: value, key + ".uid": uid, key + ".since": String(since)]
    }

    /// The live client holding the claim `key` for user `uid` among `clients`: of those with the
    /// claim's properties and that uid, the earliest `since`, then the lowest index; nil if none.
    /// A client whose `since` is missing or not a number counts as latest (it cannot win by a
    /// malformed stamp).
    public static func holder(of key: String, uid: String = PulseClaim.currentUID, among clients: [PulseClient]) -> PulseClient? {
        clients
            .filter { $0.properties[key] != nil && $0.properties[key + ".uid"] == uid }
            .min { a, b in
                let sa = UInt64(a.properties[key + ".since"] ?? "") ?? .max
                let sb = UInt64(b.properties[key + ".since"] ?? "") ?? .max
                return (sa, a.index) < (sb, b.index)
            }
    }

    /// Now, ns since 1970 (CLOCK_REALTIME).
    static func nowNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

extension PulseConnection {
    /// Every client on the server, with its properties.
    /// - Throws: `notConnected`, `timeout`, `operationFailed`, `wrongThread`.
    public func clients() throws -> [PulseClient] {
        try perform("list clients", { context, userdata in
            pa_context_get_client_info_list(context, clientListCallback, userdata)
        }, result: { $0.clients })
    }

    /// Every client on the server, without blocking a thread.
    /// - Throws: `notConnected`, `operationFailed`.
    public func clientsAsync() async throws -> [PulseClient] {
        try await performAsync("list clients", { context, userdata in
            pa_context_get_client_info_list(context, clientListCallback, userdata)
        }, result: { $0.clients })
    }

    /// This connection's own client index on the server (`pa_context_get_index`); nil while not
    /// connected.
    public var clientIndex: UInt32? {
        withLock {
            guard let context = readyContextLocked() else { return nil }
            let index = pa_context_get_index(context)
            return index == invalidIndex ? nil : index
        }
    }

    /// Who holds this connection's claim now (see ``PulseClaim``): the holder's client, or nil
    /// when nobody of this user claims it. Compare its index with ``clientIndex`` to know whether
    /// it is this connection.
    /// - Throws: `invalidArgument` if the connection was made without a claim; `notConnected`,
    ///   `operationFailed`.
    public func claimHolder() async throws -> PulseClient? {
        guard let claim = self.claim else { throw PulseError.invalidArgument("claimHolder: this connection announces no claim") }
        return PulseClaim.holder(of: claim.key, among: try await clientsAsync())
    }
}
