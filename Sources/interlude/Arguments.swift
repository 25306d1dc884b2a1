import Foundation

/// A tiny argument reader: `--name value`, repeated `--option X`, flags, positionals.
struct Arguments {
    var positionals: [String] = []
    var values: [String: [String]] = [:]
    var flags: Set<String> = []

    struct UsageError: Error, CustomStringConvertible { var description: String }

    /// - Parameter flagNames: options that take no value.
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
                    guard i + 1 < args.count else { throw UsageError(description: "--\(name) needs a value") }
                    values[name, default: []].append(args[i + 1])
                    i += 1
                }
            } else {
                positionals.append(a)
            }
            i += 1
        }
    }

    func value(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }
    func has(_ name: String) -> Bool { flags.contains(name) || values[name] != nil }

    func double(_ name: String, in range: ClosedRange<Double>? = nil) throws -> Double? {
        guard let s = value(name) else { return nil }
        guard let d = Double(s), d.isFinite else { throw UsageError(description: "--\(name) must be a number, not \(s)") }
        if let range, !range.contains(d) {
            throw UsageError(description: "--\(name) must be within \(range.lowerBound)…\(range.upperBound), not \(s)")
        }
        return d
    }

    /// Refuses options the command does not know.
    func only(_ known: Set<String>) throws {
        let given = Set(values.keys).union(flags)
        if let bad = given.subtracting(known).sorted().first { throw UsageError(description: "unknown option --\(bad)") }
    }
}
