import InterludeCommandLine
import InterludePolicy
import Testing

/// What the CLI prints of an app's text (a stranger's find: a title with a newline and an escape
/// sequence forged a line of `interlude center` that looked like another app's critical alert).
@Suite struct CommandOutputTextTests {
    @Test(arguments: [
        ("plain title", "plain title"),
        ("Grüße 👩‍👩‍👧 ok", "Grüße 👩‍👩‍👧 ok"),  // accents, emoji and their joiners are kept
        ("a\nb", "a\\nb"),
        ("x\r\ny\tz", "x\\r\\ny\\tz"),
        ("\u{1B}[31mred\u{1B}[0m", "\\u{1B}[31mred\\u{1B}[0m"),
        ("c1 \u{9B}2J", "c1 \\u{9B}2J"),
        ("del\u{7F}", "del\\u{7F}"),
        ("\u{202E}txt.exe", "\\u{202E}txt.exe"),  // a bidirectional override
        ("\u{200F}rtl \u{2028}sep", "\\u{200F}rtl \\u{2028}sep"),  // a direction mark, a line separator (as the log)
        // A backslash is doubled: the two characters "\n" print unlike a line break (a stranger's find).
        ("a\\nb", "a\\\\nb"),
        ("C:\\dir", "C:\\\\dir"),
        ("fake\n2026-12-03 09:00:00 +0000  org.bank.App  fake  [critical]  Your account is locked",
         "fake\\n2026-12-03 09:00:00 +0000  org.bank.App  fake  [critical]  Your account is locked"),
    ])
    func controlCharactersAreShownEscapedNeverSentToTheTerminal(raw: String, shown: String) {
        let out = CommandOutput.text(raw)
        #expect(out == shown)
        #expect(!out.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
    }

    /// A decision's notes stay one a line (the escaping of whole printed lines had turned the
    /// CLI's own line breaks into "\n", a stranger's find); a note's own control characters are escaped.
    @Test func aDecisionsNotesAreOneALineWithTheirOwnTextEscaped() {
        let d = NotificationDecision(outcome: .delivered, requestedLevel: .active, level: .active, rules: ["N8"],
                                     notes: ["waits for its trigger", "identifier a\u{1B}[2J"])
        let lines = CommandOutput.describe(d).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines[1] == "  waits for its trigger" && lines[2] == "  identifier a\\u{1B}[2J", "\(lines)")
    }
}

/// `interlude [--socket PATH] COMMAND …`: the socket option is taken out wherever it stands; one
/// without a path, or with an empty one, is a usage error (exit 2), not a daemon that is not there.
@Suite struct CommandInvocationTests {
    @Test func theSocketOptionIsTakenOutOfTheLine() {
        let line = CommandInvocation(["status", "--socket", "/run/x", "--json"])
        #expect(line.socket == "/run/x" && line.command == "status" && line.rest == ["--json"] && !line.socketWithoutPath)
        // GNU style: --socket=PATH (it was taken for the command's own unknown option).
        let joined = CommandInvocation(["--socket=/run/y", "status", "--json"])
        #expect(joined.socket == "/run/y" && joined.command == "status" && joined.rest == ["--json"] && !joined.socketWithoutPath)
    }

    @Test(arguments: [["status", "--socket"], ["--socket", "", "status"], ["--socket=", "status"]])
    func aSocketOptionWithoutAPathIsAUsageError(argv: [String]) {
        #expect(CommandInvocation(argv).socketWithoutPath)
    }

    /// A second `--socket` was read as the command ("unknown command --socket"; a stranger's find).
    @Test(arguments: [["--socket", "a", "--socket", "b", "status"], ["--socket=a", "status", "--socket=b"],
                      ["status", "--socket", "a", "--socket", "b"]])
    func aSocketOptionGivenTwiceIsAUsageError(argv: [String]) {
        #expect(CommandInvocation(argv).socketGivenTwice)
    }

    @Test func oneSocketOptionIsNotGivenTwice() {
        let line = CommandInvocation(["status", "--socket", "a", "--json"])
        #expect(!line.socketGivenTwice && line.socket == "a" && line.command == "status" && line.rest == ["--json"])
    }
}

/// An option given twice is a usage error unless it is one that repeats: getopt's "the last wins"
/// dropped the first without a word (`interlude push --title a --title b` sent "b").
@Suite struct RepeatedOptionTests {
    @Test(arguments: [
        (["--title", "a", "--title", "b"], "--title is given twice; it takes one value"),
        (["--title=a", "--title", "b", "--title=c"], "--title is given 3 times; it takes one value"),
        (["--body", "x", "--title", "a", "--body", "y", "--title", "b"], "--body is given twice; it takes one value"),
    ])
    func aSingleValueOptionGivenTwiceIsRefused(argv: [String], message: String) {
        #expect {
            _ = try Arguments(argv, flags: [], options: ["title", "body"])
        } throws: { e in
            (e as? Arguments.UsageError)?.description == message
        }
    }

    /// `--title ""` is an empty title, as `--title=` is (a stranger's `--title ""` was "needs a
    /// value" while `--title=""` was taken); a missing value is still refused.
    @Test func anEmptyValueIsAValueInBothForms() throws {
        let a = try Arguments(["--title", "", "--body="], flags: [], options: ["title", "body"])
        #expect(a.value("title") == "" && a.value("body") == "")
        #expect { _ = try Arguments(["--title"], flags: [], options: ["title"]) } throws: { e in
            (e as? Arguments.UsageError)?.description == "--title needs a value"
        }
    }

    @Test func repeatableOptionsKeepEveryValueInOrder() throws {
        let a = try Arguments(["--option", "mixWithOthers", "--app", "x", "--option=duckOthers", "--json", "--json"],
                              flags: ["json"], options: ["option", "app"], repeatable: ["option"])
        #expect(a.all("option") == ["mixWithOthers", "duckOthers"] && a.value("app") == "x" && a.has("json"))
    }
}
