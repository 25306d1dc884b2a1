/// A number for a message as a person would type it: a whole number without ".0" ("60", not
/// "60.0"; within ±1e15), any other as Swift prints it ("0.5", "1e+300"). Used by every message
/// that quotes a number back (the policy's refusals, the wire's, the config's, the CLI's).
public func plainNumber(_ x: Double) -> String {
    x.isFinite && x.rounded() == x && abs(x) < 1e15 ? String(Int64(x)) : String(x)
}
