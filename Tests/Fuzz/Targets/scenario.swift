// Fuzz target `scenario`: bytes as a scenario file (README "Scenarios") through Scenario.parse.
// The property: nothing traps; a bad file is a ScenarioError.
import Foundation
import InterludeScenario

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzScenario(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeBufferPointer(start: data, count: size)
    guard let text = String(validating: input, as: UTF8.self) else { return 0 }
    _ = try? Scenario.parse(text, file: "fuzz.scenario")
    return 0
}
