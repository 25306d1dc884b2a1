/// A value the policy's own decoders refuse, with words meant for people ("interruption level 7
/// is not 0…3", "unknown weekday \"someday\""). Carried as the `underlyingError` of the
/// `DecodingError.dataCorrupted` they throw, so the wire layer can tell these messages (shown in
/// a reply as they are) from Foundation's own (internal wording, not shown) by type, not by how
/// a message starts.
public struct PolicyValueError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong with the value, for the user.
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension DecodingError {
    /// `dataCorrupted` at the container's path, with `message` as its description and a
    /// ``PolicyValueError`` as its underlying error.
    public static func policyValue(in c: any SingleValueDecodingContainer, _ message: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: c.codingPath, debugDescription: message, underlyingError: PolicyValueError(message)))
    }

    /// `dataCorrupted` at `path`, with `message` as its description and a ``PolicyValueError``
    /// as its underlying error.
    public static func policyValue(at path: [any CodingKey], _ message: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: path, debugDescription: message, underlyingError: PolicyValueError(message)))
    }
}
