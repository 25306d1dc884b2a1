import Foundation

// interlude-bench: composition root only; see Bench.swift. No C callbacks here (DESIGN.md: callbacks
// and signal handlers written in main-actor code trap under Swift 6).
exit(await Bench.run(Array(CommandLine.arguments.dropFirst())))
