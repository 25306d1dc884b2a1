import Foundation
import InterludePolicy

/// A tiny argument reader shared by `interlude` and `interlude-audio`: `--name value`,
/// `--name=value`, repeated `--option X`, flags, positionals.
public struct Arguments: Sendable {
    /// Arguments that do not start with `--`, in order.
    public var positionals: [String] = []
    /// Every value given for each option name, in order.
    public var values: [String: [String]] = [:]
    /// Options given that take no value.
    public var flags: Set<String> = []

    /// A command line the command cannot run; the CLI prints it and exits with status 2.
    public struct UsageError: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Reads a command's arguments.
    /// - Parameters:
    ///   - flags: options that take no value.
    ///   - options: options that take a value (`--name value` or `--name=value`).
    ///   - repeatable: options that may be given more than once (`--option X --option Y`); any
    ///     other given twice is refused: the first value would be dropped without a word (getopt
    ///     takes the last; `interlude push --title a --title b` sent "b").
    /// - Throws: `UsageError` for an option that is neither (`unknown option --x`), a flag given a
    ///   value, an option that takes a value given last, or one not `repeatable` given twice.
    public init(_ args: [String], flags flagNames: Set<String>, options valueNames: Set<String>, repeatable: Set<String> = []) throws {
        for a in args where a.hasPrefix("--") {
            let name = String(a.dropFirst(2).prefix { $0 != "=" })
            guard flagNames.contains(name) || valueNames.contains(name) else {
                let known = flagNames.union(valueNames).sorted().map { "--" + $0 }
                throw UsageError(description: "unknown option --\(CommandOutput.text(name))" + (known.isEmpty ? " (this command takes none)" : " (known: \(known.joined(separator: ", ")))"))
            }
            if flagNames.contains(name) && a.contains("=") { throw UsageError(description: "--\(CommandOutput.text(name)) takes no value") }
        }
        try self.init(args, flagNames: flagNames)
        if let (name, given) = values.filter({ $0.value.count > 1 && !repeatable.contains($0.key) }).min(by: { $0.key < $1.key }) {
            throw UsageError(description: "--\(CommandOutput.text(name)) is given \(given.count == 2 ? "twice" : "\(given.count) times"); it takes one value")
        }
    }

    /// Reads arguments without checking option names (see the other initializer).
    init(_ args: [String], flagNames: Set<String>) throws {
        var i = 0
        while i < args.count {
            let a = args[i]
            if a.hasPrefix("--") {
                let name = String(a.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    values[String(name[..<eq]), default: []].append(String(name[name.index(after: eq)...]))
                } else if flagNames.contains(name) {
                    flags.insert(name)
                } else {
                    // An empty value is a value, as `--title=` is (`--title ""`: a badge-only
                    // notification); a command that needs one checks it (the daemon's paths).
                    guard i + 1 < args.count else { throw UsageError(description: "--\(CommandOutput.text(name)) needs a value") }
                    values[name, default: []].append(args[i + 1])
                    i += 1
                }
            } else {
                positionals.append(a)
            }
            i += 1
        }
    }

    /// Why the process's command line cannot be read as text, or nil when it can: the first
    /// argument that is not UTF-8 (Swift's `CommandLine.arguments` turns invalid bytes into
    /// U+FFFD, so `interlude settings $'\xff'` acted on an app named "\u{FFFD}" and a path with
    /// such bytes named another file). The CLI's executables refuse such a command line (exit 2)
    /// before reading it.
    public static func commandLineProblem() -> String? {
        for i in 1..<Int(CommandLine.argc) {
            guard let p = CommandLine.unsafeArgv[i] else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: strlen(p))
            if String(validating: bytes, as: UTF8.self) == nil {
                return "argument \(i) (\(CommandOutput.text(String(decoding: bytes, as: UTF8.self)))) is not UTF-8 text"
            }
        }
        return nil
    }

    public func value(_ name: String) -> String? { values[name]?.last }
    public func all(_ name: String) -> [String] { values[name] ?? [] }
    public func has(_ name: String) -> Bool { flags.contains(name) || values[name] != nil }

    /// The option as a finite number, checked against `range` when given; nil when absent.
    /// - Throws: `UsageError` naming the option and the value.
    public func double(_ name: String, in range: ClosedRange<Double>? = nil) throws -> Double? {
        guard let s = value(name) else { return nil }
        guard let d = Double(s), d.isFinite else { throw UsageError(description: "--\(name) must be a number, not \(CommandOutput.text(s))") }
        if let range, !range.contains(d) {
            throw UsageError(description: "--\(name) must be within \(plainNumber(range.lowerBound))…\(plainNumber(range.upperBound)), not \(CommandOutput.text(s))")
        }
        return d
    }
}

/// The start of an `interlude` command line: `[--socket PATH | --socket=PATH] COMMAND ARGUMENTS…`.
public struct CommandInvocation: Sendable {
    /// The `--socket` given anywhere on the line (the daemon's socket), if any.
    public var socket: String?
    /// The command (`play`, `session`, …), nil when there is none.
    public var command: String?
    /// What follows the command, without `--socket PATH`.
    public var rest: [String]
    /// `--socket` was given without a path, or with an empty one (a usage error).
    public var socketWithoutPath = false
    /// `--socket` was given more than once (a usage error, as any option that takes a value
    /// given twice: which socket was meant is not ours to guess).
    public var socketGivenTwice = false

    /// The usage error of the line's `--socket`, as the executables print it (exit 2); nil when
    /// there is none.
    public var usageProblem: String? {
        if socketWithoutPath { return "--socket needs a PATH" }
        if socketGivenTwice { return "--socket is given twice; it takes one value" }
        return nil
    }

    /// Splits `argv` (without the program name).
    public init(_ argv: [String]) {
        var args = argv
        if let i = args.firstIndex(where: { $0 == "--socket" || $0.hasPrefix("--socket=") }) {
            let joined = args[i].hasPrefix("--socket=") ? String(args[i].dropFirst("--socket=".count)) : nil
            let path = joined ?? (i + 1 < args.count ? args[i + 1] : "")
            guard !path.isEmpty else {
                socketWithoutPath = true
                rest = []
                return
            }
            socket = path
            args.removeSubrange(i...(joined == nil ? i + 1 : i))
            socketGivenTwice = args.contains { $0 == "--socket" || $0.hasPrefix("--socket=") }
        }
        command = args.first
        rest = Array(args.dropFirst())
    }
}

