// Fuzz target `config`: bytes as a config file through JSON5.parse and ConfigLoader.load (UTF-8
// check, JSON5, schema validation, notification policy decoding), the way the daemon reads
// `interlude.json5`. The property: nothing traps; a bad file is a JSON5SyntaxError or a
// ConfigError with a file and a line ≥ 0, and a file the loader takes is one JSON5 parses.
import Foundation
import InterludeConfig

let file = scratchPath("interlude.json5")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeBufferPointer(start: data, count: size)
    let text = String(validating: input, as: UTF8.self)
    var parses = false
    if let text {
        do { _ = try JSON5.parse(text); parses = true } catch {
            fuzzCheck(error.line >= 1 && error.column >= 1, "syntax error without a place: \(error)")
        }
    }
    writeScratch(input, to: file)
    do {
        _ = try ConfigLoader.load(folders: [file])
        fuzzCheck(text != nil && parses, "the loader took a file JSON5 refuses")
    } catch {
        fuzzCheck(error.file == file && error.line >= 0, "a config error without its file or line: \(error)")
    }
    return 0
}
