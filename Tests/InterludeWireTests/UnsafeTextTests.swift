import Foundation
import InterludeWire
import Testing

/// SECURITY.md: an app's text never reaches a terminal as it is. JSON output (`--json`, the
/// receipts `interlude push --wait` prints) keeps the values a program reads and escapes, the JSON
/// way, what would reorder or forge what a person sees.
@Suite struct UnsafeTextTests {
    @Test(arguments: [
        // (a title as the app gave it, the JSON text printed)
        ("abc\u{202E}txt.exe", #"{"title":"abc\u202Etxt.exe"}"#),
        ("a\u{2028}b\u{2029}c", #"{"title":"a\u2028b\u2029c"}"#),
        ("del\u{7F} c1\u{85} mark\u{200F}", #"{"title":"del\u007F c1\u0085 mark\u200F"}"#),
        ("\u{2066}iso\u{2069}", #"{"title":"\u2066iso\u2069"}"#),
        ("alm\u{061C}x", #"{"title":"alm\u061Cx"}"#),                  // the Arabic letter mark, a direction mark
        ("café 🎵 \u{200D}", "{\"title\":\"café 🎵 \u{200D}\"}"),   // accents, emoji, joiners stay
        ("line\nbreak", #"{"title":"line\nbreak"}"#),               // the encoder's own escape stays
    ])
    func jsonForTerminalEscapesWhatJSONLeavesAndMeansTheSame(title: String, printed: String) throws {
        let encoded = try WireCoding.encode(["title": title])
        let safe = UnsafeText.jsonForTerminal(encoded)
        #expect(String(decoding: safe, as: UTF8.self) == printed)
        // The same JSON value for a program that reads it.
        let back = try JSONSerialization.jsonObject(with: safe) as? [String: String]
        #expect(back?["title"] == title)
        #expect(!String(decoding: safe, as: UTF8.self).unicodeScalars.contains { $0.value >= 0x7F && UnsafeText.mustEscape($0) })
    }

    @Test func jsonForTerminalLeavesTextThatIsNotUTF8Alone() {
        let bytes = Data([0x7B, 0xFF, 0xFE, 0x7D])
        #expect(UnsafeText.jsonForTerminal(bytes) == bytes)
    }
}
