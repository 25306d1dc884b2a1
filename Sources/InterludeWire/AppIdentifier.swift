/// App ids (`hello`'s `app`, and the `app` the user's tool names): 1…255 bytes of UTF-8 without
/// whitespace or control characters, reverse-DNS by convention (`org.example.Music`).
public enum AppIdentifier {
    /// Most UTF-8 bytes an app id has.
    public static let maximumBytes = 255

    /// Why `app` is not a valid app id, or nil if it is.
    public static func problem(_ app: String) -> String? {
        guard !app.isEmpty, app.utf8.count <= maximumBytes,
              !app.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7f }) else {
            return "an app id is 1…255 bytes of UTF-8 without spaces or control characters, e.g. org.example.Music"
        }
        return nil
    }
}
